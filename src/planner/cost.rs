//! The estimated hourly cost shown in the plan: node count x the instance type's on-demand price, and a
//! Lustre filesystem's capacity x its tier's monthly price / 730 hours. Prices come from the provider's
//! `prices` map (negotiated rates) or else the catalog's list prices, each quoted with its source and date
//! in `cost_basis`. Spot, reserved, capacity-block and flex-start capacity are not estimated: their price is
//! not a list price, and a guess would be read as a fact.

use std::collections::BTreeMap;

use super::spec::{CapacityType, ClusterSpec, FilesystemSpec};
use crate::catalog::Cloud;
use crate::catalog::prices::{ListPrice, list_price, lustre_key};

/// Hours in a month, as AWS and Azure convert monthly prices.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// What the plan shows: the estimate (None when not estimated) and how it was made, or why not.
#[derive(Clone, Debug, PartialEq)]
pub struct Cost {
    pub usd_per_hour: Option<f64>,
    pub basis: String,
}

impl Cost {
    fn none(basis: String) -> Cost {
        Cost { usd_per_hour: None, basis }
    }
}

fn cents(usd: f64) -> f64 {
    (usd * 100.0).round() / 100.0
}

/// A price for `key`: the provider's own, or the catalog's.
enum Found {
    Provider(f64),
    Catalog(&'static ListPrice),
}

fn price(cloud: Cloud, key: &str, prices: &BTreeMap<String, f64>) -> Option<Found> {
    match prices.get(key) {
        Some(p) => Some(Found::Provider(*p)),
        None => list_price(cloud, key).map(Found::Catalog),
    }
}

const CAVEAT: &str = "An estimate: list prices differ by region and change; set prices in the provider block for your rates.";

pub fn cluster_cost(spec: &ClusterSpec, prices: &BTreeMap<String, f64>) -> Cost {
    let sku = spec.fabric.sku;
    let why_not = match spec.capacity {
        CapacityType::OnDemand => None,
        CapacityType::Spot => Some("spot prices move with demand and are not list prices"),
        CapacityType::Reservation => Some("reserved capacity is billed through its reservation, whatever runs on it"),
        CapacityType::CapacityBlock => Some("a capacity block is paid for up front when it is bought"),
        CapacityType::FlexStart => Some("flex-start capacity is billed at its own discounted rate"),
    };
    if let Some(why) = why_not {
        return Cost::none(format!("Not estimated for {} capacity: {why}.", spec.capacity.as_str()));
    }
    let n = spec.node_count;
    match price(spec.fabric.cloud, sku.name, prices) {
        Some(Found::Provider(p)) => {
            Cost { usd_per_hour: Some(cents(p * f64::from(n))), basis: format!("{n} x {} at ${p}/h from the provider's prices.", sku.name) }
        }
        Some(Found::Catalog(p)) => Cost {
            usd_per_hour: Some(cents(p.usd * f64::from(n))),
            basis: format!(
                "{n} x {} at ${}/h on-demand list price ({}; {}; {}). {CAVEAT}",
                sku.name,
                p.usd,
                p.source,
                p.date,
                p.confidence.label()
            ),
        },
        None => Cost::none(format!(
            "Not estimated: the catalog has no list price for {name}. Set prices = {{ \"{name}\" = <USD per node-hour> }} in the provider block.",
            name = sku.name
        )),
    }
}

pub fn filesystem_cost(spec: &FilesystemSpec, prices: &BTreeMap<String, f64>) -> Cost {
    let cloud = spec.fabric.cloud;
    let key = lustre_key(cloud, spec.throughput_per_tib);
    let capacity = spec.capacity_gib as f64;
    let unit = if cloud == Cloud::Oci { "GB" } else { "GiB" };
    let hourly = |per_month: f64| Some(cents(capacity * per_month / HOURS_PER_MONTH));
    match price(cloud, &key, prices) {
        Some(Found::Provider(p)) => Cost {
            usd_per_hour: hourly(p),
            basis: format!(
                "{} {unit} at ${p} per GB-month ({key}) from the provider's prices, / {HOURS_PER_MONTH} hours.",
                spec.capacity_gib
            ),
        },
        Some(Found::Catalog(p)) => Cost {
            usd_per_hour: hourly(p.usd),
            basis: format!(
                "{} {unit} at ${} per GB-month / {HOURS_PER_MONTH} hours ({}; {}; {}). {CAVEAT}",
                spec.capacity_gib,
                p.usd,
                p.source,
                p.date,
                p.confidence.label()
            ),
        },
        None => Cost::none(format!(
            "Not estimated: the catalog has no list price for the {} MB/s/TiB Lustre tier on {cloud}. Set prices = {{ \"{key}\" = <USD per GB-month> }} in the provider block.",
            spec.throughput_per_tib
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Diagnostics, Resource, Value};
    use crate::planner::spec::{parse_cluster, parse_filesystem};

    fn value(resource: &dyn Resource, json: &serde_json::Value) -> Value {
        crate::framework::codec::decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).unwrap()
    }

    fn fabric(cloud: &str, instance_type: &str) -> serde_json::Value {
        serde_json::json!({"id": null, "cloud": cloud, "region": "r", "zone": "z", "name": "f", "instance_type": instance_type, "placement": "cluster"})
    }

    fn cluster(cloud: &str, instance_type: &str, nodes: u32, capacity: &str) -> ClusterSpec {
        let config = serde_json::json!({"name": "c", "fabric": fabric(cloud, instance_type), "node_count": nodes, "capacity_type": capacity,
                                        "reservation_id": if capacity == "reservation" { Some("cr-1") } else { None }});
        let mut diags = Diagnostics::default();
        parse_cluster(&value(&crate::resources::gpu_cluster::GpuCluster, &config), &mut diags).unwrap_or_else(|| panic!("{diags:?}"))
    }

    fn filesystem(cloud: &str, instance_type: &str, gib: u64, tier: u32) -> FilesystemSpec {
        let config =
            serde_json::json!({"name": "fs", "fabric": fabric(cloud, instance_type), "capacity_gib": gib, "throughput_per_tib": tier});
        let mut diags = Diagnostics::default();
        parse_filesystem(&value(&crate::resources::parallel_filesystem::ParallelFilesystem, &config), &mut diags)
            .unwrap_or_else(|| panic!("{diags:?}"))
    }

    #[test]
    fn sixteen_p5_nodes_at_list_price() {
        let cost = cluster_cost(&cluster("aws", "p5.48xlarge", 16, "on-demand"), &BTreeMap::new());
        assert_eq!(cost.usd_per_hour, Some(880.64));
        assert!(cost.basis.starts_with("16 x p5.48xlarge at $55.04/h on-demand list price (AWS EC2 On-Demand"), "{}", cost.basis);
        assert!(cost.basis.contains("2025-06") && cost.basis.contains("An estimate"), "{}", cost.basis);
    }

    #[test]
    fn the_providers_prices_win() {
        let prices = BTreeMap::from([("p5.48xlarge".to_owned(), 40.0), ("aws-lustre-500".to_owned(), 0.3)]);
        let cost = cluster_cost(&cluster("aws", "p5.48xlarge", 4, "on-demand"), &prices);
        assert_eq!(cost.usd_per_hour, Some(160.0));
        assert!(cost.basis.contains("from the provider's prices"), "{}", cost.basis);
        let fs = filesystem_cost(&filesystem("aws", "p5.48xlarge", 4800, 500), &prices);
        assert_eq!(fs.usd_per_hour, Some(1.97), "4800 x 0.3 / 730");
    }

    #[test]
    fn spot_and_reserved_capacity_are_not_guessed() {
        for capacity in ["spot", "reservation"] {
            let cost = cluster_cost(&cluster("aws", "p5.48xlarge", 4, capacity), &BTreeMap::new());
            assert_eq!(cost.usd_per_hour, None, "{capacity}");
            assert!(cost.basis.starts_with(&format!("Not estimated for {capacity} capacity")), "{}", cost.basis);
        }
    }

    #[test]
    fn no_price_says_how_to_give_one() {
        let cost = cluster_cost(&cluster("aws", "p5en.48xlarge", 2, "on-demand"), &BTreeMap::new());
        assert_eq!(cost.usd_per_hour, None);
        assert!(cost.basis.contains("prices = { \"p5en.48xlarge\" = <USD per node-hour> }"), "{}", cost.basis);
        let fs = filesystem_cost(&filesystem("aws", "p5.48xlarge", 4800, 500), &BTreeMap::new());
        assert!(fs.basis.contains("\"aws-lustre-500\""), "{}", fs.basis);
    }

    #[test]
    fn lustre_at_the_catalog_price() {
        let fs = filesystem_cost(&filesystem("aws", "p5.48xlarge", 7200, 125), &BTreeMap::new());
        assert_eq!(fs.usd_per_hour, Some(1.43), "7200 x 0.145 / 730");
        assert!(fs.basis.contains("c3x.dev"), "{}", fs.basis);
    }
}
