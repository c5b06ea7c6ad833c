//! The Compute Engine regional quotas a cluster's nodes draw on, as `regions.get` reports them
//! (`Region.quotas[]`: `metric`, `limit`, `usage`), and Compute Engine's words for "no capacity".
//!
//! Only metrics of compute v1's `Quota.metric` enum are read: that is what `regions.get` answers (the
//! discovery document `compute.v1.json`, from which google-cloud-compute-v1 is generated, lists them; a
//! unit test checks every metric below against the crate's enum). The newer GPU families (H100 Mega, H200,
//! B200, GB200, and on-demand H100) are limited by Cloud Quotas' "GPUs per GPU family" quota
//! (`GPUS-PER-GPU-FAMILY-per-project-region`, dimension `gpu_family`), which `regions.get` does not report:
//! for them [`family`] says `None` and the plan-time check reads nothing.
//!
//! Spot VMs and DWS flex-start VMs draw on the preemptible quota of their GPU (Google Cloud docs,
//! "Allocation quotas" / "Preemptible quotas" and "About flex-start VMs": flex-start uses preemptible
//! quota); nodes launched into a reservation draw on the reservation, which bounds them.

use crate::catalog::{Cloud, Sku};
use crate::clouds::quota::QuotaFamily;
use crate::model::{CapacityType, ClusterSpec};

/// One row of the table: a machine type, the GPU metric its nodes' on-demand GPUs count against, and the
/// preemptible one (spot and flex-start).
struct Row {
    machine_type: &'static str,
    on_demand: Option<&'static str>,
    preemptible: Option<&'static str>,
}

/// Machine type -> regional GPU quota metric (per node: the machine type's GPUs).
const TABLE: &[Row] = &[
    // G2 (one L4 per g2-standard-4): "NVIDIA L4 GPUs" and "Preemptible NVIDIA L4 GPUs", Google Cloud docs
    // "Allocation quotas" (GPU quota); both in compute v1's Quota.metric enum.
    Row { machine_type: "g2-standard-4", on_demand: Some("NVIDIA_L4_GPUS"), preemptible: Some("PREEMPTIBLE_NVIDIA_L4_GPUS") },
    // A3 High (8 x nvidia-h100-80gb): spot GPUs count against "Preemptible NVIDIA H100 GPUs"
    // (PREEMPTIBLE_NVIDIA_H100_GPUS, in the v1 enum). UNCONFIRMED: that A3 High spot VMs draw on it rather
    // than on the GPU-family quota. On-demand H100 is the GPU-family quota (no v1 metric): not read.
    Row { machine_type: "a3-highgpu-8g", on_demand: None, preemptible: Some("PREEMPTIBLE_NVIDIA_H100_GPUS") },
    // A3 Mega (nvidia-h100-mega-80gb), A3 Ultra (nvidia-h200-141gb), A4 (nvidia-b200), A4X (nvidia-gb200):
    // Cloud Quotas' GPU-family quota only; no metric in compute v1's Quota.metric enum.
    Row { machine_type: "a3-megagpu-8g", on_demand: None, preemptible: None },
    Row { machine_type: "a3-ultragpu-8g", on_demand: None, preemptible: None },
    Row { machine_type: "a4-highgpu-8g", on_demand: None, preemptible: None },
    Row { machine_type: "a4x-highgpu-4g", on_demand: None, preemptible: None },
];

/// The metric the nodes of `sku` draw on under `capacity`, if `regions.get` reports one.
pub fn metric(sku: &Sku, capacity: CapacityType) -> Option<&'static str> {
    let row = TABLE.iter().find(|r| r.machine_type == sku.name)?;
    match capacity {
        CapacityType::OnDemand => row.on_demand,
        CapacityType::Spot | CapacityType::FlexStart => row.preemptible,
        CapacityType::Reservation | CapacityType::CapacityBlock => None,
    }
}

/// The console's own name of a metric: `NVIDIA_L4_GPUS` -> `NVIDIA L4 GPUs`,
/// `PREEMPTIBLE_NVIDIA_H100_GPUS` -> `Preemptible NVIDIA H100 GPUs`.
pub fn display_name(metric: &str) -> String {
    metric
        .split('_')
        .map(|w| match w {
            "PREEMPTIBLE" => "Preemptible".to_owned(),
            "GPUS" => "GPUs".to_owned(),
            other => other.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How to ask for more: the Cloud Quotas preference for the metric's regional quota (UNCONFIRMED: the
/// quota id is the metric with dashes and `-per-project-region`, as Cloud Quotas names Compute Engine's
/// regional quotas), and the console page.
pub fn request(metric: &str, region: &str) -> String {
    let quota_id = format!("{}-per-project-region", metric.replace('_', "-"));
    format!(
        "gcloud beta quotas preferences create --service=compute.googleapis.com --quota-id={quota_id} --dimensions=region={region} \
         --preferred-value=<n> --project=<project>, or the console: https://console.cloud.google.com/iam-admin/quotas?metric=compute.googleapis.com%2F{}",
        metric.to_lowercase()
    )
}

/// The quota the nodes of `spec` draw on in its region; `None` for a reservation or a machine type whose
/// GPUs `regions.get` does not report.
pub fn family(spec: &ClusterSpec) -> Option<QuotaFamily> {
    let sku = spec.fabric.sku;
    let metric = metric(sku, spec.capacity)?;
    let region = spec.fabric.region.clone();
    Some(QuotaFamily {
        cloud: Cloud::Gcp,
        request: request(metric, &region),
        scope: region,
        id: metric.to_owned(),
        name: display_name(metric),
        unit: "GPUs",
        per_node: u64::from(sku.gpu_count),
    })
}

/// What a plan says of a machine type whose GPUs count against the GPU-family quota, which `regions.get`
/// does not report and the Cloud Quotas API gives (its discovery document is not among the definitions this
/// provider's calls are judged by, so it is not called): the quota and how to read it by hand. `None` when the
/// quota is read, or a reservation bounds the nodes.
pub fn unread(spec: &ClusterSpec) -> Option<String> {
    let sku = spec.fabric.sku;
    let row = TABLE.iter().find(|r| r.machine_type == sku.name)?;
    let unread = match spec.capacity {
        CapacityType::OnDemand => row.on_demand.is_none(),
        CapacityType::Spot | CapacityType::FlexStart => row.preemptible.is_none(),
        CapacityType::Reservation | CapacityType::CapacityBlock => false,
    };
    unread.then(|| {
        format!(
            "{} ({} x {}) counts against Compute Engine's GPU-family quota (Cloud Quotas GPUS-PER-GPU-FAMILY-per-project-region, \
             dimension gpu_family) in {}, which regions.get does not report; check it with `gcloud beta quotas info describe \
             GPUS-PER-GPU-FAMILY-per-project-region --service=compute.googleapis.com --project=<project>` or the console's Quotas page",
            sku.name, sku.gpu_count, sku.gpu_model, spec.fabric.region
        )
    })
}

/// Compute Engine's codes for "the zone has no capacity for this": the operation error of an insert or
/// bulkInsert that could not be placed.
pub const CAPACITY_CODES: [&str; 2] = ["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "ZONE_RESOURCE_POOL_EXHAUSTED"];

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_compute_v1::model::quota::Metric;

    #[test]
    fn every_metric_read_is_one_regions_get_reports() {
        for row in TABLE {
            for m in [row.on_demand, row.preemptible].into_iter().flatten() {
                let parsed: Metric = serde_json::from_value(serde_json::json!(m)).unwrap();
                assert!(!matches!(parsed, Metric::UnknownValue(_)), "{m} is not in compute v1's Quota.metric enum");
            }
        }
        // The table covers every Google Cloud machine type of the catalog.
        for sku in crate::catalog::SKUS.iter().filter(|s| s.cloud == Cloud::Gcp) {
            assert!(TABLE.iter().any(|r| r.machine_type == sku.name), "{} has no row", sku.name);
        }
    }

    #[test]
    fn names_read_as_the_console_shows_them() {
        assert_eq!(display_name("NVIDIA_L4_GPUS"), "NVIDIA L4 GPUs");
        assert_eq!(display_name("PREEMPTIBLE_NVIDIA_H100_GPUS"), "Preemptible NVIDIA H100 GPUs");
        let r = request("NVIDIA_L4_GPUS", "us-central1");
        assert!(r.contains("--quota-id=NVIDIA-L4-GPUS-per-project-region") && r.contains("region=us-central1"), "{r}");
    }
}
