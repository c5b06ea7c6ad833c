//! On-demand list prices: what `estimated_hourly_cost_usd` is computed from. Each price carries its source,
//! the date it was seen and how sure we are, because cloud prices change and differ by region. A provider's
//! `prices` map (negotiated rates, other regions) takes precedence over every entry here.

use super::{Cloud, Confidence};

/// A list price: per node-hour for an instance type, per GB-month (as the vendor bills it) for a Lustre tier.
#[derive(Clone, Copy, Debug)]
pub struct ListPrice {
    pub cloud: Cloud,
    /// The instance type, or `<cloud>-lustre-<tier>` for a Lustre throughput tier (see `lustre_key`).
    pub key: &'static str,
    pub usd: f64,
    pub date: &'static str,
    pub source: &'static str,
    pub confidence: Confidence,
}

/// The price key of a Lustre throughput tier: `aws-lustre-125`, `gcp-lustre-500`, ...
pub fn lustre_key(cloud: Cloud, throughput_per_tib: u32) -> String {
    format!("{}-lustre-{throughput_per_tib}", cloud.as_str())
}

/// Instance types: USD per node-hour, on demand, Linux. Lustre tiers: USD per GB-month.
pub const PRICES: &[ListPrice] = &[
    ListPrice {
        cloud: Cloud::Aws,
        key: "p5.48xlarge",
        usd: 55.04,
        date: "2025-06 (after the June 2025 P5 price cut)",
        source: "AWS EC2 On-Demand, us-east-1, as quoted by two public pricing catalogs and a usage.ai note (98.32 before the cut)",
        confidence: Confidence::TwoSources,
    },
    ListPrice {
        cloud: Cloud::Azure,
        key: "Standard_ND96isr_H100_v5",
        usd: 98.32,
        date: "2026-08 (one source: verified 2026-08-17)",
        source: "Azure Linux VM pay-as-you-go, East US, as quoted by three public pricing catalogs",
        confidence: Confidence::TwoSources,
    },
    ListPrice {
        cloud: Cloud::Gcp,
        key: "a3-highgpu-8g",
        usd: 88.49,
        date: "undated",
        source: "Compute Engine on-demand, us-central1, as quoted by two public pricing catalogs",
        confidence: Confidence::TwoSources,
    },
    ListPrice {
        cloud: Cloud::Oci,
        key: "BM.GPU.H100.8",
        usd: 80.0,
        date: "undated",
        source: "OCI price list, $10 per GPU-hour, as copied by two public pricing tables",
        confidence: Confidence::TwoSources,
    },
    ListPrice {
        cloud: Cloud::Aws,
        key: "aws-lustre-125",
        usd: 0.145,
        date: "undated (seen 2026-11)",
        source: "FSx for Lustre persistent SSD at 125 MB/s/TiB, us-east-1, as quoted by the c3x.dev cost estimator",
        confidence: Confidence::Unconfirmed,
    },
];

/// The catalog's price for a key in a cloud.
pub fn list_price(cloud: Cloud, key: &str) -> Option<&'static ListPrice> {
    PRICES.iter().find(|p| p.cloud == cloud && p.key == key)
}
