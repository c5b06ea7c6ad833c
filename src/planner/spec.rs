//! The unified specification: configuration values parsed into neutral, validated specs. Every rule a
//! user can break is checked here or in the per-cloud rules it calls, with the attribute path and the
//! valid values in the diagnostic. Values still unknown at this point are skipped (they are checked again
//! at plan time); a spec is returned only when everything it needs is known and valid.

use std::collections::BTreeMap;

use crate::catalog::limits;
use crate::catalog::{self, Cloud, Fabric, Sku};
use crate::clouds::rules::{Reported, rules};
use crate::config::validate_tags;
use crate::framework::{AttributePath, Diagnostics, Value, one_of};
pub use crate::model::{
    CapacityPolicy, CapacityType, ClusterRef, ClusterSpec, Day2, FabricRef, FabricSpec, FilesystemSpec, Network, NodeAmount, OnMaintenance,
    Placement, Repair, Workload,
};

// ------------------------------------------------------------------------------------------ helpers

/// A media (transcoding) workload needs NVENC: refused on GPUs known to have none, with the node types of
/// the cloud that have encoders; a warning where the catalog does not know.
fn check_video_encoders(cloud: Cloud, sku: &'static crate::catalog::Sku, diags: &mut Diagnostics) -> bool {
    let with_encoders: Vec<String> = crate::catalog::skus(cloud)
        .filter_map(|s| {
            let (n, _, _) = crate::catalog::video_encoders(s.gpu_model)?;
            (n > 0).then(|| format!("{} ({}x {}, {n} NVENC each)", s.name, s.gpu_count, s.gpu_model))
        })
        .collect();
    let names: Vec<&str> = with_encoders.iter().map(String::as_str).collect();
    let offer = if names.is_empty() { format!("{cloud} offers none in the catalog.") } else { format!("On {cloud}: {}.", one_of(&names)) };
    match crate::catalog::video_encoders(sku.gpu_model) {
        Some((0, source, _)) => {
            diags.error_at(
                AttributePath::attr("workload"),
                "No hardware video encoder",
                format!(
                    "workload = \"media\" transcodes video, but {} has {} GPUs, which have no NVENC video encoder ({source}): the encoding would run on the CPUs. Use a node type with encoders. {offer}",
                    sku.name, sku.gpu_model
                ),
            );
            false
        }
        Some(_) => true,
        None => {
            diags.warning_at(
                AttributePath::attr("workload"),
                "Video encoders unknown",
                format!("The catalog does not know whether {} ({}) has NVENC video encoders. {offer}", sku.name, sku.gpu_model),
            );
            true
        }
    }
}

/// A known string, `Err(())` when unknown (stop quietly), `Ok(None)` when null.
fn string(v: &Value) -> Result<Option<String>, ()> {
    match v {
        Value::Unknown => Err(()),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Ok(None),
    }
}

fn whole_number(v: &Value, path: AttributePath, min: i64, max: i64, diags: &mut Diagnostics) -> Result<Option<i64>, ()> {
    match v {
        Value::Unknown => Err(()),
        Value::Number(n) => match n.as_i64().filter(|i| (min..=max).contains(i)) {
            Some(i) => Ok(Some(i)),
            None => {
                diags.error_at(path, "Value out of range", format!("Expected a whole number from {min} to {max}; got {n}."));
                Err(())
            }
        },
        _ => Ok(None),
    }
}

fn tags(v: &Value, path: AttributePath, diags: &mut Diagnostics) -> Result<BTreeMap<String, String>, ()> {
    if !v.is_wholly_known() {
        return Err(());
    }
    let before = diags.has_errors();
    validate_tags(v, path, diags);
    if diags.has_errors() && !before {
        return Err(());
    }
    Ok(v.as_map().map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()).unwrap_or_default())
}

/// Resource names become parts of vendor names: lowercase letters, digits and hyphens, starting with a
/// letter, at most 40 characters (fits GCP's 63-character names with our suffixes).
pub fn check_name(name: &str, path: AttributePath, diags: &mut Diagnostics) -> bool {
    let ok = (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        diags.error_at(
            path,
            "Invalid name",
            format!("{name:?} cannot be used to name cloud resources: use 1 to 40 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen."),
        );
    }
    ok
}

fn parse_cloud(v: &Value, path: AttributePath, diags: &mut Diagnostics) -> Result<Cloud, ()> {
    let name = string(v)?.ok_or(())?;
    check_cloud(&name, path, diags).ok_or(())
}

/// A supported cloud, or a diagnostic at `path` listing them.
pub fn check_cloud(name: &str, path: AttributePath, diags: &mut Diagnostics) -> Option<Cloud> {
    let cloud = Cloud::parse(name);
    if cloud.is_none() {
        diags.error_at(
            path,
            "Unsupported cloud",
            format!("{name:?} is not a cloud this provider supports. Valid values: {}.", one_of(&Cloud::NAMES)),
        );
    }
    cloud
}

/// A GPU model offered on `cloud`, in the catalog's spelling; otherwise a diagnostic at `gpu` naming the
/// cloud's models and where else the model is offered.
pub fn check_gpu(cloud: Cloud, wanted: &str, diags: &mut Diagnostics) -> Option<&'static str> {
    let offered = catalog::gpu_models(cloud);
    if let Some(model) = catalog::canonical_gpu_model(wanted).filter(|m| offered.contains(m)) {
        return Some(model);
    }
    let elsewhere: Vec<&str> = catalog::canonical_gpu_model(wanted)
        .map(|m| Cloud::ALL.into_iter().filter(|c| catalog::gpu_models(*c).contains(&m)).map(Cloud::as_str).collect())
        .unwrap_or_default();
    let hint = if elsewhere.is_empty() { String::new() } else { format!(" {wanted} is offered on {}.", one_of(&elsewhere)) };
    diags.error_at(
        AttributePath::attr("gpu"),
        "Unsupported GPU model",
        format!("The catalog has no {cloud} instance type with GPU {wanted:?}. GPU models on {cloud}: {}.{hint}", one_of(&offered)),
    );
    None
}

/// An instance type of `cloud` that carries `model` (when one is given); otherwise a diagnostic at
/// `instance_type` with the valid values.
pub fn check_instance_type(cloud: Cloud, name: &str, model: Option<&str>, diags: &mut Diagnostics) -> Option<&'static Sku> {
    let Some(sku) = catalog::find_sku(cloud, name) else {
        let names: Vec<&str> = catalog::skus(cloud).map(|s| s.name).collect();
        diags.error_at(
            AttributePath::attr("instance_type"),
            "Unsupported instance type",
            format!("{name:?} is not a GPU instance type in the {cloud} catalog. Valid values: {}.", one_of(&names)),
        );
        return None;
    };
    if let Some(m) = model
        && sku.gpu_model != m
    {
        diags.error_at(
            AttributePath::attr("instance_type"),
            "Instance type does not match GPU",
            format!("{name} carries {} GPUs, not {m}. Remove one of gpu and instance_type, or make them agree.", sku.gpu_model),
        );
        return None;
    }
    Some(sku)
}

/// The SKU a fabric serves, from `instance_type` or resolved from `gpu` through the catalog. A GPU model
/// with several instance types resolves to the one with the most inter-node bandwidth (then catalog order).
pub fn resolve_sku(cloud: Cloud, gpu: Option<&str>, instance_type: Option<&str>, diags: &mut Diagnostics) -> Option<&'static Sku> {
    let model = match gpu {
        Some(wanted) => Some(check_gpu(cloud, wanted, diags)?),
        None => None,
    };
    match (instance_type, model) {
        (Some(name), _) => check_instance_type(cloud, name, model, diags),
        (None, Some(m)) => catalog::skus(cloud)
            .filter(|s| s.gpu_model == m)
            .max_by_key(|s| (s.network_bandwidth_gbps.unwrap_or(0), std::cmp::Reverse(catalog_index(s)))),
        (None, None) => {
            diags.error_at(
                AttributePath::attr("gpu"),
                "Missing node type",
                format!("Set gpu (one of {}) or instance_type to say which nodes this fabric serves.", one_of(&catalog::gpu_models(cloud))),
            );
            None
        }
    }
}

fn catalog_index(sku: &Sku) -> usize {
    catalog::SKUS.iter().position(|s| std::ptr::eq(s, sku)).unwrap_or(usize::MAX)
}

fn parse_fabric_ref(v: &Value, path: AttributePath, diags: &mut Diagnostics) -> Result<FabricRef, ()> {
    if v.is_unknown() || v.is_null() {
        return Err(());
    }
    let cloud = parse_cloud(v.get("cloud"), path.clone().and_attr("cloud"), diags)?;
    let name = string(v.get("name"))?.ok_or(())?;
    let region = string(v.get("region"))?.ok_or(())?;
    let zone = string(v.get("zone"))?;
    let instance_type = string(v.get("instance_type"))?.ok_or(())?;
    let placement = string(v.get("placement"))?.and_then(|p| Placement::parse(&p)).unwrap_or(Placement::Cluster);
    let Some(sku) = catalog::find_sku(cloud, &instance_type) else {
        diags.error_at(
            path,
            "Unknown fabric instance type",
            format!("The fabric's instance type {instance_type:?} is not in the {cloud} catalog."),
        );
        return Err(());
    };
    Ok(FabricRef { name, cloud, region, zone, sku, placement })
}

// ------------------------------------------------------------------------------------------- fabric

pub fn parse_fabric(c: &Value, diags: &mut Diagnostics) -> Option<FabricSpec> {
    fabric(c, diags).ok()
}

fn fabric(c: &Value, diags: &mut Diagnostics) -> Result<FabricSpec, ()> {
    let name = string(c.get("name"))?.ok_or(())?;
    let name_ok = check_name(&name, AttributePath::attr("name"), diags);
    let cloud = parse_cloud(c.get("cloud"), AttributePath::attr("cloud"), diags)?;
    let region = string(c.get("region"))?.ok_or(())?;
    let zone = string(c.get("zone"))?;
    let rules = rules(cloud);
    let mut ok = name_ok;
    ok &= rules.fabric_zone(&region, zone.as_deref(), diags);
    let gpu = string(c.get("gpu"))?;
    let instance_type = string(c.get("instance_type"))?;
    let sku = resolve_sku(cloud, gpu.as_deref(), instance_type.as_deref(), diags);

    let vpc_id = string(c.get("vpc_id"))?;
    let subnet_id = string(c.get("subnet_id"))?;
    let cidr = string(c.get("cidr_block"))?;
    let network = match (vpc_id, subnet_id) {
        (Some(vpc_id), Some(subnet_id)) => {
            if cidr.is_some() {
                diags.error_at(
                    AttributePath::attr("cidr_block"),
                    "Conflicting attributes",
                    "cidr_block sizes a network the fabric creates; with vpc_id and subnet_id the fabric joins an existing one. Remove cidr_block.",
                );
                ok = false;
            }
            Network::Existing { vpc_id, subnet_id }
        }
        (None, None) => {
            let cidr = cidr.unwrap_or_else(|| "10.0.0.0/16".into());
            if !valid_cidr(&cidr, 16, 24) {
                diags.error_at(
                    AttributePath::attr("cidr_block"),
                    "Invalid CIDR block",
                    format!("{cidr:?} is not an IPv4 CIDR block from /16 to /24, e.g. \"10.0.0.0/16\"."),
                );
                ok = false;
            }
            Network::Create { cidr }
        }
        (vpc, _) => {
            let (missing, given) = if vpc.is_some() { ("subnet_id", "vpc_id") } else { ("vpc_id", "subnet_id") };
            diags.error_at(
                AttributePath::attr(missing),
                "Incomplete existing network",
                format!("{given} is set but {missing} is not. To join an existing network give both; to create one give neither."),
            );
            return Err(());
        }
    };

    let placement_name = string(c.get("placement"))?.unwrap_or_else(|| "cluster".into());
    let placement = match Placement::parse(&placement_name) {
        Some(p) => p,
        None => {
            diags.error_at(
                AttributePath::attr("placement"),
                "Unsupported placement",
                format!("{placement_name:?} is not a placement. Valid values: {}.", one_of(&Placement::NAMES)),
            );
            return Err(());
        }
    };
    ok &= rules.placement(placement, sku, diags).map_err(|Reported| ())?;
    let max_distance = whole_number(c.get("max_distance"), AttributePath::attr("max_distance"), i64::MIN, i64::MAX, diags)?;
    if let Some(d) = max_distance {
        ok &= rules.max_distance(d, placement, sku, diags);
    }
    let resource_group = string(c.get("resource_group"))?;
    if resource_group.is_some() {
        ok &= rules.resource_group(diags);
    }
    let compartment_id = string(c.get("compartment_id"))?;
    ok &= rules.compartment_id(compartment_id.as_deref(), diags);
    let tags = tags(c.get("tags"), AttributePath::attr("tags"), diags)?;
    ok &= rules.tags(&tags, diags);
    let sku = sku.ok_or(())?;
    if !ok {
        return Err(());
    }
    Ok(FabricSpec { name, cloud, region, zone, sku, network, placement, max_distance, resource_group, compartment_id, tags })
}

fn valid_cidr(cidr: &str, min_prefix: u8, max_prefix: u8) -> bool {
    let Some((addr, prefix)) = cidr.split_once('/') else { return false };
    let octets: Vec<&str> = addr.split('.').collect();
    octets.len() == 4
        && octets.iter().all(|o| o.parse::<u8>().is_ok())
        && prefix.parse::<u8>().is_ok_and(|p| (min_prefix..=max_prefix).contains(&p))
}

// ------------------------------------------------------------------------------------------ cluster

/// What a cluster without a fabric says in its place: where it runs, which nodes, and the network to join.
pub const OWN_NETWORK: [&str; 8] = ["cloud", "region", "zone", "gpu", "vpc_id", "subnet_id", "resource_group", "compartment_id"];

/// The fabric a cluster without one gets: named after the cluster, no proximity placement, its own
/// network unless `vpc_id` and `subnet_id` name one. `c` is the cluster's configuration or its state.
pub fn own_fabric_config(c: &Value) -> Value {
    let mut out: BTreeMap<String, Value> = OWN_NETWORK.iter().map(|k| ((*k).to_owned(), c.get(k).clone())).collect();
    for k in ["name", "instance_type", "tags"] {
        out.insert(k.to_owned(), c.get(k).clone());
    }
    out.insert("placement".into(), Value::from("none"));
    out.insert("cidr_block".into(), Value::Null);
    out.insert("max_distance".into(), Value::Null);
    Value::Map(out)
}

fn own_fabric(c: &Value, diags: &mut Diagnostics) -> Result<FabricSpec, ()> {
    if c.get("cloud").is_null() {
        diags.error_at(
            AttributePath::attr("fabric"),
            "Missing fabric",
            format!(
                "Set fabric = hpc_gpu_fabric.<name> to build on a fabric (training), or leave it out and set cloud ({}), region and zone \
                 with gpu or instance_type: the cluster then makes its own network, or joins vpc_id and subnet_id, with no placement \
                 group and no RDMA pieces (inference and media).",
                one_of(&Cloud::NAMES)
            ),
        );
        return Err(());
    }
    fabric(&own_fabric_config(c), diags)
}

/// A cluster on a fabric takes its location, node type and network from it; saying them again is refused.
fn no_own_network_settings(c: &Value, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    for attr in OWN_NETWORK.iter().chain(&["instance_type"]) {
        if c.get(attr).is_present() {
            diags.error_at(
                AttributePath::attr(attr),
                "Conflicting with fabric",
                format!(
                    "This cluster builds on fabric, which sets its {attr}. Remove {attr}, or remove fabric to run the cluster without one."
                ),
            );
            ok = false;
        }
    }
    ok
}

/// A cluster's configuration or state, parsed. A configuration (validate, plan, apply) goes through
/// [`parse_cluster_config`] instead, which adds the checks a state saved before them need not pass.
pub fn parse_cluster(c: &Value, diags: &mut Diagnostics) -> Option<ClusterSpec> {
    cluster(c, diags).ok()
}

/// A cluster's configuration, for validate, plan and apply: [`parse_cluster`], and the checks that refuse a
/// configuration without refusing to read a state an earlier version of the provider wrote.
pub fn parse_cluster_config(c: &Value, diags: &mut Diagnostics) -> Option<ClusterSpec> {
    let spec = parse_cluster(c, diags)?;
    selfcheck_can_be_awaited(&spec, diags).then_some(spec)
}

/// `update_strategy.wait_for_selfcheck` waits for the verdict the nodes' boot-time self-check publishes,
/// which only the self-check in their user data (`data "hpc_gpu_selfcheck"`) does: without it, or with one
/// that keeps its verdict to itself, every batch of a rolling update would wait out the update's timeout.
/// User data whose text hides parts (fetched at boot, encoded) is only warned about.
fn selfcheck_can_be_awaited(spec: &ClusterSpec, diags: &mut Diagnostics) -> bool {
    use crate::clouds::user_data::{Selfcheck, selfcheck};
    if !spec.day2.wait_for_selfcheck {
        return true;
    }
    let path = AttributePath::attr("update_strategy").and_attr("wait_for_selfcheck");
    let attr = if spec.user_data_write_only { "user_data_wo" } else { "user_data" };
    let fix = format!(
        "Put the self-check in the nodes' user data: declare data \"hpc_gpu_selfcheck\" (with your own user data in its user_data) \
         and set {attr} = data.hpc_gpu_selfcheck.<name>.combined_user_data; or set update_strategy.wait_for_selfcheck = false."
    );
    let waits = "update_strategy.wait_for_selfcheck = true makes each batch of a rolling update wait for its nodes to publish the \
                 verdict of their boot-time self-check";
    let found = spec.user_data.as_ref().map(|u| selfcheck(u.expose_str()));
    match found {
        Some(Selfcheck::Carried { publishes: true }) => true,
        Some(Selfcheck::Carried { publishes: false }) => {
            diags.error_at(
                path,
                "Self-check does not publish its verdict",
                format!(
                    "{waits}, but the self-check in {attr} was made with publish_verdict = false, so no verdict ever comes: every batch \
                     would wait until the update's timeout. Set publish_verdict = true (its default) in data \"hpc_gpu_selfcheck\", or \
                     set update_strategy.wait_for_selfcheck = false."
                ),
            );
            false
        }
        Some(Selfcheck::Unseen) => {
            diags.warning_at(
                path,
                "Self-check not seen in user data",
                format!(
                    "{waits}. {attr} holds no self-check in its own text, but content the plan cannot read (fetched at boot with \
                     #include, or encoded): if the nodes do not run the self-check, every batch will wait until the update's \
                     timeout. {fix}"
                ),
            );
            true
        }
        None | Some(Selfcheck::Absent) => {
            let what = if found.is_none() { "the nodes have no user data".to_owned() } else { format!("{attr} carries no self-check") };
            diags.error_at(
                path,
                "No self-check to wait for",
                format!("{waits}, but {what}: no verdict would ever come, and every batch would wait until the update's timeout. {fix}"),
            );
            false
        }
    }
}

fn cluster(c: &Value, diags: &mut Diagnostics) -> Result<ClusterSpec, ()> {
    nodes_of(c, false, diags)
}

/// A cluster's nodes, or (`pool`) a node pool's, whose cloud's pool checks its image and key itself.
fn nodes_of(c: &Value, pool: bool, diags: &mut Diagnostics) -> Result<ClusterSpec, ()> {
    let name = string(c.get("name"))?.ok_or(())?;
    let mut ok = check_name(&name, AttributePath::attr("name"), diags);
    let own_network = c.get("fabric").is_null();
    let (fabric, own_fabric) = if own_network {
        match own_fabric(c, diags) {
            Ok(f) => {
                let reference = FabricRef {
                    name: f.name.clone(),
                    cloud: f.cloud,
                    region: f.region.clone(),
                    zone: f.zone.clone(),
                    sku: f.sku,
                    placement: f.placement,
                };
                (Ok(reference), Some(f))
            }
            Err(()) => (Err(()), None),
        }
    } else {
        ok &= no_own_network_settings(c, diags);
        (parse_fabric_ref(c.get("fabric"), AttributePath::attr("fabric"), diags), None)
    };
    let node_count = whole_number(c.get("node_count"), AttributePath::attr("node_count"), 1, i64::from(crate::model::MOST_NODES), diags)?
        .ok_or(())? as u32;
    let capacity_name = string(c.get("capacity_type"))?.unwrap_or_else(|| "on-demand".into());
    let Some(capacity) = CapacityType::parse(&capacity_name) else {
        diags.error_at(
            AttributePath::attr("capacity_type"),
            "Unsupported capacity type",
            format!("{capacity_name:?} is not a capacity type. Valid values: {}.", one_of(&CapacityType::NAMES)),
        );
        return Err(());
    };
    let reservation_id = string(c.get("reservation_id"))?;
    let workload_name = string(c.get("workload"))?.unwrap_or_else(|| "pretraining".into());
    let Some(workload) = Workload::parse(&workload_name) else {
        diags.error_at(
            AttributePath::attr("workload"),
            "Unsupported workload",
            format!("{workload_name:?} is not a workload. Valid values: {}.", one_of(&Workload::NAMES)),
        );
        return Err(());
    };
    let image = string(c.get("image"))?;
    let (stored, write_only) = (string(c.get("user_data"))?, string(c.get("user_data_wo"))?);
    let user_data_version = c.get("user_data_wo_version");
    if stored.is_some() && write_only.is_some() {
        diags.error_at(
            AttributePath::attr("user_data_wo"),
            "Conflicting user data",
            "Set user_data or user_data_wo, not both: user_data_wo is the same user data, kept out of state.",
        );
    }
    if write_only.is_some() && user_data_version.is_null() {
        diags.error_at(
            AttributePath::attr("user_data_wo"),
            "Missing user_data_wo_version",
            "user_data_wo is never stored, so a change to it cannot be seen: set user_data_wo_version (e.g. 1) and change it whenever \
             user_data_wo changes, to roll the new user data onto the nodes.",
        );
    }
    if user_data_version.is_present() && c.get("user_data_wo").is_null() {
        diags.warning_at(
            AttributePath::attr("user_data_wo_version"),
            "Version without write-only user data",
            "user_data_wo_version is set but user_data_wo is not: the version only matters with user_data_wo.",
        );
    }
    let user_data_path = if write_only.is_some() { "user_data_wo" } else { "user_data" };
    let user_data_write_only = write_only.is_some();
    let user_data = stored.or(write_only);
    let ssh_public_key = string(c.get("ssh_public_key"))?;
    ok &= ssh_public_key.as_deref().is_none_or(|k| public_key_ok(k, diags));
    let node_identity = string(c.get("node_identity"))?;
    let rdma_wanted = whole_number(c.get("rdma_interfaces"), AttributePath::attr("rdma_interfaces"), 0, 1024, diags)?;
    let tags = tags(c.get("tags"), AttributePath::attr("tags"), diags)?;
    ok &= check_timeouts(c, diags);
    let fabric = fabric?;
    let cloud = fabric.cloud;
    let sku = fabric.sku;
    let rules = rules(cloud);
    ok &= rules.tags(&tags, diags);
    if own_network && workload.trains() && node_count > 1 {
        diags.error_at(
            AttributePath::attr("fabric"),
            "Missing fabric",
            format!(
                "{node_count} nodes for {} train together: they need proximity placement and their RDMA fabric ({}) between them, which a cluster \
                 without a fabric does not get. Declare an hpc_gpu_fabric (placement = \"cluster\") and set fabric = hpc_gpu_fabric.<name>. \
                 Without a fabric a cluster serves inference or media, or is a single node.",
                workload.as_str(),
                sku.fabric.as_str()
            ),
        );
        ok = false;
    }
    if workload == Workload::Media {
        ok &= check_video_encoders(cloud, sku, diags);
    }
    if !pool {
        ok &= rules.cluster_nodes(sku, image.as_deref(), ssh_public_key.as_deref(), diags);
    }
    if sku.arm64() && image.is_none() && !pool {
        diags.error_at(
            AttributePath::attr("image"),
            "Missing Arm64 image",
            format!(
                "{} has Arm64 (NVIDIA Grace) CPUs, and the default GPU image on {cloud} is built for x86-64: nodes would not boot. Set image \
                 to an arm64 GPU image with the NVIDIA driver, IMEX and the fabric's RDMA drivers.",
                sku.name
            ),
        );
        ok = false;
    }
    if !capacity.offered_on(cloud) {
        let valid: Vec<&str> =
            CapacityType::NAMES.iter().copied().filter(|n| CapacityType::parse(n).is_some_and(|c| c.offered_on(cloud))).collect();
        diags.error_at(
            AttributePath::attr("capacity_type"),
            "Capacity type not offered",
            format!("{:?} is not offered on {cloud}. Valid values on {cloud}: {}.", capacity.as_str(), one_of(&valid)),
        );
        ok = false;
    }
    match (capacity, &reservation_id) {
        (CapacityType::Reservation | CapacityType::CapacityBlock, None) => {
            let what = rules.reservation_target();
            diags.error_at(
                AttributePath::attr("reservation_id"),
                "Missing reservation",
                format!("capacity_type = {:?} launches into reserved capacity: set reservation_id to {what}.", capacity.as_str()),
            );
            ok = false;
        }
        (CapacityType::OnDemand | CapacityType::Spot | CapacityType::FlexStart, Some(_)) => {
            diags.error_at(
                AttributePath::attr("reservation_id"),
                "Reservation without reserved capacity type",
                format!(
                    "reservation_id only applies with capacity_type = \"reservation\" or \"capacity-block\"; capacity_type is {:?}.",
                    capacity.as_str()
                ),
            );
            ok = false;
        }
        _ => {}
    }
    // An UltraServer block is counted in UltraServers, not instances.
    if capacity == CapacityType::CapacityBlock && sku.nvlink_domain.is_none() && node_count > limits::AWS_CAPACITY_BLOCK_MAX_INSTANCES {
        diags.error_at(
            AttributePath::attr("node_count"),
            "Too many nodes for a capacity block",
            format!("An AWS Capacity Block holds at most {} instances; node_count is {node_count}. Split the cluster or use another capacity type.", limits::AWS_CAPACITY_BLOCK_MAX_INSTANCES),
        );
        ok = false;
    }
    if let Some(id) = &reservation_id {
        ok &= rules.reservation_id(capacity, sku, id, diags);
    }
    ok &= check_whole_domains(sku, node_count, diags);
    ok &= rules.cluster_capacity(capacity, sku, fabric.placement, node_count, diags);
    if !pool {
        ok &= rules.nodes_listed(node_count, diags);
    }
    let max_rdma = sku.rdma_interfaces.unwrap_or(0);
    let rdma_interfaces = match rdma_wanted {
        None => max_rdma,
        Some(n) if n >= 1 && n as u32 <= max_rdma && sku.fabric == Fabric::Efa => n as u32,
        Some(n) => {
            let detail = if sku.fabric == Fabric::Efa {
                format!(
                    "{} has {max_rdma} EFA-capable network cards, so rdma_interfaces can be 1 to {max_rdma} (one per card); got {n}. Leave it out to use all {max_rdma}.",
                    sku.name
                )
            } else {
                format!(
                    "rdma_interfaces sets the EFA interface count on AWS; on {} the {} layout is fixed by the instance type ({max_rdma}). Remove it.",
                    sku.name,
                    sku.fabric.as_str()
                )
            };
            diags.error_at(AttributePath::attr("rdma_interfaces"), "Unsupported RDMA interface count", detail);
            ok = false;
            max_rdma
        }
    };
    // EC2 takes what is over its limit gzip-compressed (cloud-init inflates it): its size is what counts there.
    let sent = |ud: &str| if cloud == Cloud::Aws { crate::clouds::user_data::aws_bytes(ud).len() } else { ud.len() };
    if let Some(ud) = &user_data
        && sent(ud) > limits::user_data_limit(cloud).0
    {
        let (max, rule) = limits::user_data_limit(cloud);
        diags.error_at(
            AttributePath::attr(user_data_path),
            "User data too large",
            format!(
                "{rule}; this is {} bytes ({} as sent; the limit here is {max}). Keep a small bootstrap that fetches the rest (from \
                 object storage or a configuration service).",
                ud.len(),
                sent(ud)
            ),
        );
        ok = false;
    }
    let day2 = day2(c, diags);
    if let Ok(d) = &day2 {
        ok &= rules.node_identity(node_identity.as_deref(), d.wait_for_selfcheck, diags);
    }
    let capacity_policy = capacity_policy(c, workload, node_count, diags);
    if !ok {
        return Err(());
    }
    let spec = ClusterSpec {
        day2: day2?,
        capacity_policy: capacity_policy?,
        user_data_version: user_data_version.as_number().and_then(|n| n.as_i64()),
        name,
        fabric,
        own_fabric,
        gpu: if own_network { string(c.get("gpu"))? } else { None },
        node_count,
        capacity,
        reservation_id,
        image,
        user_data: user_data.map(crate::redact::Secret::new),
        user_data_write_only,
        ssh_public_key,
        node_identity,
        workload,
        rdma_interfaces,
        tags,
        running_groups: Vec::new(),
        slurm: slurm_join(c.get("slurm"), diags)?,
    };
    composed_user_data_fits(&spec, user_data_path, diags)?;
    Ok(spec)
}

/// The key types OpenSSH public keys start with (`ssh-keygen -t ...`, security keys included).
const SSH_KEY_TYPES: [&str; 7] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// `ssh_public_key` is the key itself, one OpenSSH line (`ssh-ed25519 AAAA... comment`): a path to it, the
/// private key, or other text is refused here rather than by the cloud at launch (or, on an emulator, never).
pub fn public_key_ok(key: &str, diags: &mut Diagnostics) -> bool {
    let first = key.split_whitespace().next().unwrap_or_default();
    let body = key.split_whitespace().nth(1).unwrap_or_default();
    if SSH_KEY_TYPES.contains(&first) && !body.is_empty() && body.chars().all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c)) {
        return true;
    }
    let trimmed = key.trim();
    let detail = if !trimmed.contains(' ') && (trimmed.starts_with(['~', '/', '.']) || trimmed.ends_with(".pub")) {
        format!(
            "{trimmed:?} is a path: ssh_public_key takes the key itself. Read the file with file(), e.g. \
             ssh_public_key = file(\"{trimmed}\")."
        )
    } else if trimmed.contains("PRIVATE KEY") {
        "This is a private key: give the public half (the .pub file, e.g. ssh_public_key = file(\"~/.ssh/id_ed25519.pub\")), and \
         keep the private key out of the configuration."
            .to_owned()
    } else {
        format!(
            "It is not an OpenSSH public key: one line of a key type ({}), then the key in base64, e.g. \
             \"ssh-ed25519 AAAAC3Nza... you@host\" (the contents of ~/.ssh/id_ed25519.pub).",
            SSH_KEY_TYPES.join(", ")
        )
    };
    diags.error_at(AttributePath::attr("ssh_public_key"), "Invalid SSH public key", detail);
    false
}

/// The length of a Slurm key the fabric makes (64 random bytes, base64), for sizing user data before it exists.
const SLURM_KEY_CHARS: usize = 88;

/// The nodes boot with the user's user data and, when they join Slurm, the join the provider adds before it
/// (one MIME document): the cloud's limit holds for all of it, so it is checked here, not at launch after the
/// fabric exists.
fn composed_user_data_fits(spec: &ClusterSpec, user_data_path: &str, diags: &mut Diagnostics) -> Result<(), ()> {
    let Some(join) = &spec.slurm else { return Ok(()) };
    let key = join.key.as_ref().map_or_else(|| "k".repeat(SLURM_KEY_CHARS), |k| k.expose_str().to_owned());
    let probe = ClusterSpec {
        slurm: Some(crate::model::SlurmJoin { controllers: join.controllers.clone(), key: Some(crate::redact::Secret::new(key)) }),
        ..spec.clone()
    };
    let text = crate::clouds::slurm::node_user_data(&probe, 0).map(|u| u.expose().clone()).unwrap_or_default();
    let (max, rule) = limits::user_data_limit(spec.fabric.cloud);
    // EC2 takes what is over its limit gzip-compressed (cloud-init inflates it): its size is what counts there.
    let sent = if spec.fabric.cloud == Cloud::Aws { crate::clouds::user_data::aws_bytes(&text).len() } else { text.len() };
    if sent <= max {
        return Ok(());
    }
    let total = text.len();
    let own = spec.user_data.as_ref().map_or(0, |u| u.expose().len());
    let path = if own > 0 { user_data_path } else { "slurm" };
    diags.error_at(
        AttributePath::attr(path),
        "User data too large with the Slurm join",
        format!(
            "{rule}; the nodes' user data would be {total} bytes ({sent} as sent; the limit here is {max}): yours is {own} bytes and \
             the Slurm join the provider adds before it (slurm = ...) about {} bytes. Make yours smaller: a small bootstrap that fetches \
             the rest (from object storage or a configuration service).",
            total - own
        ),
    );
    Err(())
}

/// `slurm`: the fabric's `slurm_join` a cluster's nodes join with (null: the nodes are outside Slurm).
fn slurm_join(v: &Value, diags: &mut Diagnostics) -> Result<Option<crate::model::SlurmJoin>, ()> {
    if v.is_null() {
        return Ok(None);
    }
    if v.is_unknown() {
        return Err(());
    }
    let controllers = string_list(v.get("controller_addresses"))?;
    // A key the fabric's apply makes is unknown until then: the nodes' revision waits for it, not the plan.
    let key = match v.get("key") {
        Value::Unknown => None,
        k => Some(k.as_str().unwrap_or_default().to_owned()),
    };
    if controllers.is_empty() || key.as_deref() == Some("") {
        diags.error_at(
            AttributePath::attr("slurm"),
            "Incomplete Slurm join",
            "slurm needs the controllers' addresses and the key: give it the fabric's join, slurm = hpc_gpu_fabric.<name>.slurm_join, with slurm = true on the fabric.",
        );
        return Err(());
    }
    Ok(Some(crate::model::SlurmJoin { controllers, key: key.map(crate::redact::Secret::new) }))
}

/// `capacity_policy` and `min_nodes`, defaulted from the workload where unset.
fn capacity_policy(c: &Value, workload: Workload, node_count: u32, diags: &mut Diagnostics) -> Result<CapacityPolicy, ()> {
    let min = whole_number(c.get("min_nodes"), AttributePath::attr("min_nodes"), 1, i64::from(u32::MAX), diags)?;
    let policy = match string(c.get("capacity_policy"))? {
        None => None,
        Some(p) if CapacityPolicy::NAMES.contains(&p.as_str()) => Some(p),
        Some(p) => {
            diags.error_at(
                AttributePath::attr("capacity_policy"),
                "Unsupported capacity policy",
                format!(
                    "{p:?} is not a capacity policy. Valid values: {} (all-or-nothing: keep no node unless all came; at-least: keep \
                     what came when at least min_nodes did; keep-partial: keep what came and fail the apply, the next apply retries).",
                    one_of(&CapacityPolicy::NAMES)
                ),
            );
            return Err(());
        }
    };
    let min = min.map(|m| m as u32);
    let default = CapacityPolicy::default_for(workload);
    let out = match (policy.as_deref(), min) {
        (Some("at-least"), m) => CapacityPolicy::AtLeast(m.unwrap_or(1)),
        (Some("all-or-nothing"), None) => CapacityPolicy::AllOrNothing,
        (Some(_), None) => CapacityPolicy::KeepPartial,
        (None, None) => default,
        (None, Some(m)) if default.min_nodes().is_some() => CapacityPolicy::AtLeast(m),
        (named, Some(_)) => {
            diags.error_at(
                AttributePath::attr("min_nodes"),
                "min_nodes without at-least",
                format!(
                    "min_nodes applies with capacity_policy = \"at-least\"; the policy here is {:?}{}. Set capacity_policy = \
                     \"at-least\" or remove min_nodes.",
                    named.unwrap_or(default.as_str()),
                    if named.is_none() { format!(" (the default for {} clusters)", workload.as_str()) } else { String::new() }
                ),
            );
            return Err(());
        }
    };
    if let CapacityPolicy::AtLeast(m) = out
        && m > node_count
    {
        diags.error_at(
            AttributePath::attr("min_nodes"),
            "min_nodes above node_count",
            format!("min_nodes = {m} asks for more nodes than node_count = {node_count}: set it from 1 to {node_count}."),
        );
        return Err(());
    }
    Ok(out)
}

/// `repair`, `max_repairs` and the `update_strategy` block, defaulted where unset.
fn day2(c: &Value, diags: &mut Diagnostics) -> Result<Day2, ()> {
    let mut out = Day2::default();
    if let Some(r) = string(c.get("repair"))? {
        let Some(repair) = Repair::parse(&r) else {
            diags.error_at(
                AttributePath::attr("repair"),
                "Unsupported repair",
                format!(
                    "{r:?} is not a repair. Valid values: {} (replace: remake an unhealthy node under its own name; reboot: restart it; \
                     report: show it in the plan and change nothing).",
                    one_of(&Repair::NAMES)
                ),
            );
            return Err(());
        };
        out.repair = repair;
    }
    if let Some(m) = string(c.get("on_maintenance"))? {
        let Some(on) = OnMaintenance::parse(&m) else {
            diags.error_at(
                AttributePath::attr("on_maintenance"),
                "Unsupported on_maintenance",
                format!(
                    "{m:?} is not what an apply can do with a node the cloud has scheduled maintenance on. Valid values: {} (report: \
                     show it in scheduled_maintenance with its window and leave the node alone; replace: remake it under its own name \
                     ahead of the window, within max_repairs).",
                    one_of(&OnMaintenance::NAMES)
                ),
            );
            return Err(());
        };
        out.on_maintenance = on;
    }
    let amount = |v: &Value, path: AttributePath, what: &str, diags: &mut Diagnostics| -> Result<Option<NodeAmount>, ()> {
        let Some(text) = string(v)? else { return Ok(None) };
        match NodeAmount::parse(&text) {
            Some(a) => Ok(Some(a)),
            None => {
                diags.error_at(
                    path,
                    format!("Invalid {what}"),
                    format!("{text:?} is neither a node count (a whole number from 1, e.g. 2) nor a percentage of the nodes (1% to 100%, e.g. \"25%\")."),
                );
                Err(())
            }
        }
    };
    if let Some(a) = amount(c.get("max_repairs"), AttributePath::attr("max_repairs"), "max_repairs", diags)? {
        out.max_repairs = a;
    }
    let strategy = c.get("update_strategy");
    if strategy.is_unknown() {
        return Err(());
    }
    if strategy.is_present() {
        let path = AttributePath::attr("update_strategy").and_attr("batch_size");
        if let Some(a) = amount(strategy.get("batch_size"), path, "batch_size", diags)? {
            out.batch_size = a;
        }
        match strategy.get("wait_for_selfcheck") {
            Value::Unknown => return Err(()),
            Value::Bool(b) => out.wait_for_selfcheck = *b,
            _ => {}
        }
    }
    Ok(out)
}

/// The `timeouts` block: each entry a duration (`90m`, `2h`, `1h30m`) of at most a day.
fn check_timeouts(c: &Value, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    for (k, v) in c.get("timeouts").as_map().into_iter().flatten() {
        let Some(s) = v.as_str() else { continue };
        let at = AttributePath::attr("timeouts").and_attr(k);
        match crate::clock::parse_duration(s) {
            None => {
                diags.error_at(
                    at,
                    "Invalid duration",
                    format!("{s:?} is not a duration. Use a number with a unit: \"90m\", \"2h\", \"1h30m\"."),
                );
                ok = false;
            }
            Some(secs) if secs > crate::clock::LONGEST_TIMEOUT_SECS => {
                diags.error_at(
                    at,
                    "Timeout too long",
                    format!("{s:?} is longer than a day, the longest a {k} may wait. Use at most \"24h\"."),
                );
                ok = false;
            }
            Some(_) => {}
        }
    }
    ok
}

/// A rack-scale node type (GB200/GB300 NVL72) is planned as whole NVLink domains: a partial domain leaves
/// GPUs of a rack idle that are paid for, and its NVLink fabric is not the one jobs were sized for.
fn check_whole_domains(sku: &Sku, node_count: u32, diags: &mut Diagnostics) -> bool {
    let Some(domain) = sku.nvlink_domain else { return true };
    if node_count.is_multiple_of(domain.nodes) {
        return true;
    }
    let below = node_count / domain.nodes * domain.nodes;
    let valid: Vec<String> = [below, below + domain.nodes, below + 2 * domain.nodes]
        .into_iter()
        .filter(|n| *n > 0)
        .map(|n| format!("{n} ({} domain{})", n / domain.nodes, if n == domain.nodes { "" } else { "s" }))
        .collect();
    let valid = match valid.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => valid.join(""),
    };
    diags.error_at(
        AttributePath::attr("node_count"),
        "Not a whole number of NVLink domains",
        format!(
            "{} is a rack-scale node type: {} nodes ({} GPUs) share one NVLink domain, and a cluster of it is made of whole domains. \
             node_count is {node_count}; valid counts near it: {valid}.",
            sku.name,
            domain.nodes,
            sku.nvlink_domain_gpus(),
        ),
    );
    false
}

// --------------------------------------------------------------------------------------- filesystem

pub fn parse_filesystem(c: &Value, diags: &mut Diagnostics) -> Option<FilesystemSpec> {
    filesystem(c, diags).ok()
}

/// The short filesystem name Lustre clients mount (GCP `filesystem`, OCI `file_system_name`): at most 8
/// letters or digits. Derived from the resource name when not given.
pub fn default_filesystem_name(name: &str) -> String {
    let s: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).take(8).collect();
    if s.is_empty() { "lustre".into() } else { s }
}

fn filesystem(c: &Value, diags: &mut Diagnostics) -> Result<FilesystemSpec, ()> {
    let name = string(c.get("name"))?.ok_or(())?;
    let mut ok = check_name(&name, AttributePath::attr("name"), diags);
    ok &= check_timeouts(c, diags);
    let fabric = parse_fabric_ref(c.get("fabric"), AttributePath::attr("fabric"), diags);
    let cluster = match c.get("cluster") {
        Value::Null => None,
        Value::Unknown => return Err(()),
        v => {
            let gpus = whole_number(v.get("gpus_total"), AttributePath::attr("cluster"), 0, i64::MAX, diags)?.ok_or(())? as u32;
            let workload = string(v.get("workload"))?.and_then(|w| Workload::parse(&w)).unwrap_or(Workload::Pretraining);
            Some(ClusterRef { name: string(v.get("name"))?.unwrap_or_default(), gpus_total: gpus, workload })
        }
    };
    let capacity_gib = whole_number(c.get("capacity_gib"), AttributePath::attr("capacity_gib"), 1, i64::MAX, diags)?.ok_or(())? as u64;
    let tier = whole_number(c.get("throughput_per_tib"), AttributePath::attr("throughput_per_tib"), 1, 100_000, diags)?.ok_or(())? as u32;
    let given_filesystem_name = string(c.get("filesystem_name"))?;
    let filesystem_name = given_filesystem_name.clone().unwrap_or_else(|| default_filesystem_name(&name));
    let data_repository = string(c.get("data_repository"))?;
    let metadata_iops = whole_number(c.get("metadata_iops"), AttributePath::attr("metadata_iops"), 1, i64::MAX, diags)?.map(|i| i as u64);
    let window = string(c.get("maintenance_window"))?;
    let tags = tags(c.get("tags"), AttributePath::attr("tags"), diags)?;
    // Checks that do not need the fabric come first: at validation the fabric is usually still unknown.
    if filesystem_name.is_empty() || filesystem_name.len() > 8 || !filesystem_name.chars().all(|c| c.is_ascii_alphanumeric()) {
        diags.error_at(
            AttributePath::attr("filesystem_name"),
            "Invalid filesystem name",
            format!("{filesystem_name:?} cannot be a Lustre filesystem name: use 1 to 8 letters or digits (the name clients mount)."),
        );
        ok = false;
    }
    let fabric = fabric?;
    let cloud = fabric.cloud;
    let rules = rules(cloud);
    ok &= rules.filesystem_name(given_filesystem_name.as_deref(), diags);
    ok &= rules.tags(&tags, diags);
    let tiers = limits::lustre_throughput_tiers(cloud);
    if !tiers.contains(&tier) {
        let valid: Vec<String> = tiers.iter().map(u32::to_string).collect();
        diags.error_at(
            AttributePath::attr("throughput_per_tib"),
            "Unsupported throughput tier",
            format!("{tier} MB/s per TiB is not a managed Lustre tier on {cloud}. Valid values: {}.", one_of(&valid)),
        );
        ok = false;
    } else if let Err(e) = limits::check_lustre_capacity(cloud, tier, capacity_gib) {
        let nearest: Vec<String> = e.nearest.iter().map(u64::to_string).collect();
        diags.error_at(
            AttributePath::attr("capacity_gib"),
            "Unsupported Lustre capacity",
            format!("{capacity_gib} GiB is rejected by the {cloud} API: {}. Nearest valid sizes: {} GiB.", e.rule, one_of(&nearest)),
        );
        ok = false;
    }
    if let Some(iops) = metadata_iops {
        ok &= rules.metadata_iops(iops, diags);
    }
    if let Some(repo) = &data_repository
        && !rules.data_repository_ok(repo)
    {
        diags.error_at(
            AttributePath::attr("data_repository"),
            "Unsupported data repository",
            format!("{repo:?} is not a {cloud} object store location. Use the form \"{}\".", rules.data_repository_form()),
        );
        ok = false;
    }
    let maintenance_window = match rules.maintenance_window(window.as_deref(), diags) {
        Ok(w) => w,
        Err(Reported) => {
            ok = false;
            None
        }
    };
    if !ok {
        return Err(());
    }
    Ok(FilesystemSpec {
        name,
        filesystem_name,
        fabric,
        cluster,
        capacity_gib,
        throughput_per_tib: tier,
        data_repository,
        metadata_iops,
        maintenance_window,
        tags,
    })
}

// -------------------------------------------------------------------------------------------- slurm

pub fn parse_slurm(c: &Value, diags: &mut Diagnostics) -> Option<crate::model::SlurmSpec> {
    slurm(c, diags).ok()
}

/// The controllers' and login nodes' default instance type on each cloud: 8 vCPUs and 32 GiB, general purpose.
pub fn default_slurm_instance_type(cloud: Cloud) -> &'static str {
    match cloud {
        Cloud::Aws => "m7i.2xlarge",
        Cloud::Azure => "Standard_D8s_v5",
        Cloud::Gcp => "n2-standard-8",
        Cloud::Oci => "VM.Standard.E5.Flex",
    }
}

/// Where slurmctld keeps its state unless told: the controller's own disk.
pub const DEFAULT_STATE_SAVE_LOCATION: &str = "/var/spool/slurmctld";

/// A node group list (`placement_groups`, `nvlink_domains`) of a cluster object: `(name, nodes)`.
fn node_groups(v: &Value) -> Result<Vec<crate::model::NodeGroup>, ()> {
    if v.is_unknown() {
        return Err(());
    }
    let mut out = Vec::new();
    for g in v.as_list().unwrap_or_default() {
        let name = string(g.get("name"))?.ok_or(())?;
        let nodes = string_list(g.get("nodes"))?;
        out.push(crate::model::NodeGroup { name, nodes });
    }
    Ok(out)
}

fn string_list(v: &Value) -> Result<Vec<String>, ()> {
    if !v.is_wholly_known() {
        return Err(());
    }
    Ok(v.as_list().unwrap_or_default().iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
}

fn slurm(c: &Value, diags: &mut Diagnostics) -> Result<crate::model::SlurmSpec, ()> {
    use crate::model::{Partition, SlurmNodes, TopologyChoice};
    let name = string(c.get("name"))?.ok_or(())?;
    let mut ok = check_name(&name, AttributePath::attr("name"), diags);
    let fabric = parse_fabric_ref(c.get("fabric"), AttributePath::attr("fabric"), diags)?;
    let cidr = match c.get("fabric").get("cidr_block") {
        Value::Unknown => return Err(()),
        Value::String(s) => s.clone(),
        _ => {
            diags.error_at(
                AttributePath::attr("fabric"),
                "Slurm needs a fabric that creates its network",
                format!(
                    "Fabric {} joins an existing network, where no room can be set aside for the Slurm controllers and login nodes. Let \
                     the fabric create its network (leave out vpc_id and subnet_id), with slurm = true.",
                    fabric.name
                ),
            );
            return Err(());
        }
    };
    if c.get("fabric").get("slurm_join").is_null() {
        diags.error_at(
            AttributePath::attr("fabric"),
            "The fabric does not host Slurm",
            format!(
                "Fabric {} has no slurm_join: set slurm = true on it, so that it sets aside the controllers' subnet and holds the key the \
                 cluster's daemons share.",
                fabric.name
            ),
        );
        ok = false;
    }
    let version_text = string(c.get("slurm_version"))?.ok_or(())?;
    let version = crate::catalog::slurm::find(&version_text);
    if version.is_none() {
        diags.error_at(
            AttributePath::attr("slurm_version"),
            "Unsupported Slurm version",
            format!(
                "Slurm {version_text:?} is not one this provider renders configuration for. Supported: {} (the version the images run: the \
                 clouds' stock Ubuntu 22.04 GPU images install 21.08, Debian 12 22.05, Ubuntu 24.04 23.11).",
                crate::framework::one_of(&crate::catalog::slurm::names())
            ),
        );
        ok = false;
    }
    let default_type = default_slurm_instance_type(fabric.cloud);
    let controller_type = string(c.get("controller_instance_type"))?.unwrap_or_else(|| default_type.to_owned());
    let login_type = string(c.get("login_instance_type"))?.unwrap_or_else(|| default_type.to_owned());
    let backup = match c.get("backup_controller") {
        Value::Unknown => return Err(()),
        v => v.as_bool().unwrap_or(false),
    };
    // The backup controller, the state path and the health check interval are checked with the rest of what
    // slurm.conf says, the way Slurm reads it (planner::slurm).
    let state_save = string(c.get("state_save_location"))?;
    let login_nodes = whole_number(c.get("login_nodes"), AttributePath::attr("login_nodes"), 0, 16, diags)?.unwrap_or(1) as u32;
    let interval =
        whole_number(c.get("health_check_interval"), AttributePath::attr("health_check_interval"), 0, i64::from(u32::MAX), diags)?
            .unwrap_or(300) as u32;
    let topology = match string(c.get("topology"))? {
        None => TopologyChoice::Auto,
        Some(t) => match TopologyChoice::parse(&t) {
            Some(t) => t,
            None => {
                diags.error_at(
                    AttributePath::attr("topology"),
                    "Unsupported topology",
                    format!("topology {t:?} is not one of {}.", crate::framework::one_of(&TopologyChoice::NAMES)),
                );
                return Err(());
            }
        },
    };
    let parts = c.get("partition");
    if parts.is_unknown() {
        return Err(());
    }
    let mut partitions = Vec::new();
    let mut complete = true;
    for (i, p) in parts.as_list().unwrap_or_default().iter().enumerate() {
        let at = AttributePath::attr("partition").and_index(i);
        let pname = string(p.get("name"))?.ok_or(())?;
        let default = match p.get("default") {
            Value::Unknown => return Err(()),
            v => v.as_bool().unwrap_or(false),
        };
        let max_time = string(p.get("max_time"))?.unwrap_or_else(|| "INFINITE".into());
        let cluster = p.get("cluster");
        // What the partition needs of the cluster; its ids may still be unknown (they are assigned at apply).
        let needed = ["name", "instance_type", "node_names", "placement_groups", "nvlink_domains"];
        let fabric_known = ["name", "cloud"].iter().all(|k| cluster.get("fabric").get(k).is_wholly_known());
        if cluster.is_unknown() || !fabric_known || !needed.iter().all(|k| cluster.get(k).is_wholly_known()) {
            complete = false;
            continue;
        }
        let cluster_name = string(cluster.get("name"))?.ok_or(())?;
        let cluster_fabric = cluster.get("fabric");
        let same = cluster_fabric.get("name").as_str() == Some(fabric.name.as_str())
            && cluster_fabric.get("cloud").as_str() == Some(fabric.cloud.as_str());
        if !same {
            diags.error_at(
                at.clone().and_attr("cluster"),
                "Partition on another fabric",
                format!(
                    "Partition {pname:?}: cluster {cluster_name} is on fabric {}, and the Slurm cluster on fabric {}. A partition's nodes \
                     reach the controllers through the fabric's network: use a cluster on fabric {}.",
                    cluster_fabric.get("name").as_str().unwrap_or("(none)"),
                    fabric.name,
                    fabric.name
                ),
            );
            ok = false;
            continue;
        }
        let instance_type = string(cluster.get("instance_type"))?.ok_or(())?;
        let Some(sku) = catalog::find_sku(fabric.cloud, &instance_type) else {
            diags.error_at(
                at.clone().and_attr("cluster"),
                "Unknown node type",
                format!("Partition {pname:?}: {instance_type} is not in the {} catalog.", fabric.cloud),
            );
            ok = false;
            continue;
        };
        let nodes = SlurmNodes {
            cluster: cluster_name,
            sku,
            names: string_list(cluster.get("node_names"))?,
            placement_groups: node_groups(cluster.get("placement_groups"))?,
            nvlink_domains: node_groups(cluster.get("nvlink_domains"))?,
        };
        partitions.push(Partition { name: pname, default, max_time, nodes });
    }
    let image = string(c.get("image"))?;
    let ssh_public_key = string(c.get("ssh_public_key"))?;
    if ssh_public_key.as_deref().is_some_and(|k| !public_key_ok(k, diags)) {
        return Err(());
    }
    let tags = tags(c.get("tags"), AttributePath::attr("tags"), diags)?;
    let accounting = match c.get("accounting") {
        Value::Unknown => return Err(()),
        v => v.as_bool().unwrap_or(false),
    };
    let custom_settings = match c.get("custom_settings") {
        Value::Unknown => return Err(()),
        Value::Null => BTreeMap::new(),
        m => {
            if !m.is_wholly_known() {
                return Err(());
            }
            m.as_map().map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()).unwrap_or_default()
        }
    };
    if !ok || !complete {
        return Err(());
    }
    Ok(crate::model::SlurmSpec {
        name,
        fabric,
        cidr,
        version: version.ok_or(())?,
        controller_type,
        backup,
        state_save_location: state_save.unwrap_or_else(|| DEFAULT_STATE_SAVE_LOCATION.to_owned()),
        login_type,
        login_nodes,
        partitions,
        topology,
        health_check_interval: interval,
        image,
        ssh_public_key,
        tags,
        key: c.get("fabric").get("slurm_join").get("key").as_str().map(|k| crate::redact::Secret::new(k.to_owned())),
        custom_settings,
        accounting,
    })
}

/// `hpc_gpu_node_pool`: the nodes as a cluster's (on a fabric), and what joins them to Kubernetes.
pub fn parse_node_pool(c: &Value, diags: &mut Diagnostics) -> Option<crate::model::NodePoolSpec> {
    node_pool(c, diags).ok()
}

fn node_pool(c: &Value, diags: &mut Diagnostics) -> Result<crate::model::NodePoolSpec, ()> {
    use crate::model::{NodePoolSpec, Taint, TaintEffect};
    if c.get("fabric").is_null() {
        diags.error_at(
            AttributePath::attr("fabric"),
            "Missing fabric",
            "A node pool's nodes are placed on a fabric, whose network and placement they join: declare an hpc_gpu_fabric and set \
             fabric = hpc_gpu_fabric.<name>.",
        );
        return Err(());
    }
    let nodes = nodes_of(c, true, diags);
    let kubernetes_cluster = string(c.get("kubernetes_cluster"))?.ok_or(())?;
    let mut ok = true;
    let kubernetes_version = match string(c.get("kubernetes_version"))? {
        None => None,
        Some(v) => {
            let parts: Vec<Option<u32>> = v.split('.').map(|p| p.parse().ok()).collect();
            match parts.as_slice() {
                [Some(1), Some(minor)] | [Some(1), Some(minor), Some(_)] => Some((1, *minor)),
                _ => {
                    diags.error_at(
                        AttributePath::attr("kubernetes_version"),
                        "Invalid Kubernetes version",
                        format!("{v:?} is not a Kubernetes version: write the minor version (\"1.33\") or a patch of it (\"1.33.2\")."),
                    );
                    ok = false;
                    None
                }
            }
        }
    };
    let autoscaling = match c.get("autoscaling") {
        Value::Null => None,
        a => {
            let min =
                whole_number(a.get("min_count"), AttributePath::attr("autoscaling").and_attr("min_count"), 0, 100_000, diags)?.ok_or(())?;
            let max =
                whole_number(a.get("max_count"), AttributePath::attr("autoscaling").and_attr("max_count"), 1, 100_000, diags)?.ok_or(())?;
            Some((min as u32, max as u32))
        }
    };
    let labels = c.get("labels");
    if !labels.is_wholly_known() {
        return Err(());
    }
    let labels: BTreeMap<String, String> =
        labels.as_map().map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()).unwrap_or_default();
    let mut taints = Vec::new();
    let list = c.get("taint");
    if !list.is_wholly_known() {
        return Err(());
    }
    for (i, t) in list.as_list().unwrap_or_default().iter().enumerate() {
        let key = string(t.get("key"))?.unwrap_or_default();
        let value = string(t.get("value"))?.unwrap_or_default();
        let effect = string(t.get("effect"))?.unwrap_or_default();
        match TaintEffect::parse(&effect) {
            Some(effect) => taints.push(Taint { key, value, effect }),
            None => {
                diags.error_at(
                    AttributePath::attr("taint").and_index(i).and_attr("effect"),
                    "Unsupported taint effect",
                    format!("{effect:?} is not a taint effect. Valid values: {}.", one_of(&TaintEffect::NAMES)),
                );
                ok = false;
            }
        }
    }
    let node_role = string(c.get("node_role"))?;
    let nodes = nodes?;
    if !ok {
        return Err(());
    }
    Ok(NodePoolSpec { nodes, kubernetes_cluster, kubernetes_version, autoscaling, labels, taints, node_role })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_cidrs() {
        assert_eq!(default_filesystem_name("train-lustre-1"), "trainlus");
        assert!(valid_cidr("10.0.0.0/16", 16, 24) && !valid_cidr("10.0.0/16", 16, 24) && !valid_cidr("10.0.0.0/8", 16, 24));
    }

    #[test]
    fn gpu_resolves_to_the_best_connected_sku() {
        let mut d = Diagnostics::new();
        assert_eq!(resolve_sku(Cloud::Gcp, Some("H100"), None, &mut d).unwrap().name, "a3-megagpu-8g");
        assert_eq!(resolve_sku(Cloud::Aws, Some("h200"), None, &mut d).unwrap().name, "p5e.48xlarge");
        assert!(d.is_empty());
    }
}
