//! OCI service limits for the plan's quota check: the Compute limit a GPU shape's instances count against
//! (GPUs, per availability domain), and its reading through the Limits service's GetResourceAvailability
//! (`GET /20190729/services/compute/limits/{limitName}/resourceAvailability?compartmentId=<tenancy>&
//! availabilityDomain=<AD>`: `used` and `available`, so the limit is their sum). Service limits apply to
//! every kind of host capacity alike ("Service limits and compartment quotas apply to all types of host
//! capacity", OCI's Capacity Types page), so preemptible nodes draw on the same limit as on-demand ones;
//! nodes launched into a capacity reservation draw on the reservation, which bounds them.

use super::api::{Oci, Service, encode};
use crate::catalog::Cloud;
use crate::clouds::CloudError;
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::framework::Context;
use crate::model::{CapacityType, ClusterSpec};

/// The Limits service's name for Compute.
pub const SERVICE: &str = "compute";

/// A GPU shape series and the Compute limit its instances count against, in GPUs.
struct Limit {
    /// The shape name up to its GPU count (`BM.GPU.H100.`), which every size of the series shares.
    series: &'static str,
    name: &'static str,
    /// What OCI's limits and quotas reference says the limit counts.
    description: &'static str,
}

/// GPU shape series -> Compute limit name. Source of the confirmed names: OCI's Compute Quotas reference
/// (docs.oracle.com/en-us/iaas/Content/Quotas/Concepts/resourcequotas_topic-Compute_Quotas.htm, "Core- and
/// GPU-Based Quotas", family `compute-core`), whose quota names are the service limits' names, each scoped to
/// the availability domain and counting GPUs. The `oci` SDK has no list of limit names (ListLimitDefinitions
/// answers them at run time), so none is checked against a machine-readable definition.
const LIMITS: &[Limit] = &[
    // Not in the Compute Quotas table; named so by OCI tenancies' limit listings (`oci limits value list
    // --service-name compute`) in several public tools. UNCONFIRMED against an Oracle document.
    Limit { series: "BM.GPU.H100.", name: "gpu-h100-count", description: "GPUs for shapes in the BM.GPU.H100 series" },
    // Compute Quotas: "gpu-h200-count ... Total number of GPUs for shapes in the BM.GPU.H200 series".
    Limit { series: "BM.GPU.H200.", name: "gpu-h200-count", description: "GPUs for shapes in the BM.GPU.H200 series" },
    // Compute Quotas: "gpu-b200-count ... Total number of GPUs for shapes in the BM.GPU.B200 series".
    Limit { series: "BM.GPU.B200.", name: "gpu-b200-count", description: "GPUs for shapes in the BM.GPU.B200 series" },
    // Compute Quotas: "gpu-mi300x-count ... Total number of GPUs for shapes in the BM.GPU.MI300X series".
    Limit { series: "BM.GPU.MI300X.", name: "gpu-mi300x-count", description: "GPUs for shapes in the BM.GPU.MI300X series" },
    // Compute Quotas: "gpu-a10-count ... Total number of GPUs for shapes in the VM.GPU.A10 and BM.GPU.A10 series".
    Limit { series: "VM.GPU.A10.", name: "gpu-a10-count", description: "GPUs for shapes in the VM.GPU.A10 and BM.GPU.A10 series" },
    Limit { series: "BM.GPU.A10.", name: "gpu-a10-count", description: "GPUs for shapes in the VM.GPU.A10 and BM.GPU.A10 series" },
    // UNCONFIRMED: the newer series are not in the Compute Quotas table; named by the table's pattern
    // (`gpu-<model>-count`).
    Limit { series: "BM.GPU.L40S.", name: "gpu-l40s-count", description: "GPUs for shapes in the BM.GPU.L40S series" },
    Limit { series: "BM.GPU.B300.", name: "gpu-b300-count", description: "GPUs for shapes in the BM.GPU.B300 series" },
    // UNCONFIRMED, as above; GB200 -v2/-v3 racks are the same series.
    Limit { series: "BM.GPU.GB200", name: "gpu-gb200-count", description: "GPUs for shapes in the BM.GPU.GB200 series" },
    Limit { series: "BM.GPU.GB300.", name: "gpu-gb300-count", description: "GPUs for shapes in the BM.GPU.GB300 series" },
];

fn limit_of(shape: &str) -> Option<&'static Limit> {
    LIMITS.iter().find(|l| shape.starts_with(l.series))
}

/// The Compute limit name a shape's instances count against, if the provider knows it.
pub fn limit_name(shape: &str) -> Option<&'static str> {
    limit_of(shape).map(|l| l.name)
}

/// The limit the nodes of `spec` count against in its availability domain; `None` for nodes launched into a
/// reservation (or a capacity block) and for shapes with no known limit.
pub fn family(spec: &ClusterSpec) -> Option<QuotaFamily> {
    if matches!(spec.capacity, CapacityType::Reservation | CapacityType::CapacityBlock) {
        return None;
    }
    let sku = spec.fabric.sku;
    let limit = limit_of(sku.name)?;
    let region = &spec.fabric.region;
    let ad = spec.fabric.zone.clone().unwrap_or_default();
    Some(QuotaFamily {
        cloud: Cloud::Oci,
        scope: ad.clone(),
        id: limit.name.to_owned(),
        name: limit.description.to_owned(),
        unit: "GPUs",
        per_node: u64::from(sku.gpu_count),
        request: format!(
            "in the OCI Console, Governance & Administration > Limits, Quotas and Usage \
             (https://cloud.oracle.com/limits?region={region}), \"Request a service limit increase\" for service Compute, \
             limit {} in {ad}, to <n>",
            limit.name
        ),
    })
}

/// The region of a family [`family`] made: its scope is the availability domain, whose name does not always
/// spell the region, so the region is read back from the console address in its `request`.
pub fn region_of(family: &QuotaFamily) -> String {
    family.request.split("?region=").nth(1).and_then(|r| r.split(')').next()).unwrap_or_default().to_owned()
}

/// GetResourceAvailability for the family's limit in its availability domain, for the tenancy (the root
/// compartment: service limits are the tenancy's): the limit is `used + available`.
pub async fn read(ctx: &Context, oci: &Oci, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
    let path = format!(
        "/services/{SERVICE}/limits/{}/resourceAvailability?compartmentId={}&availabilityDomain={}",
        encode(&family.id),
        encode(&oci.tenancy),
        encode(&family.scope)
    );
    let what = format!("reading the OCI service limit {} in {} (Limits GetResourceAvailability)", family.id, family.scope);
    let reply = oci.send(ctx, reqwest::Method::GET, Service::Limits, &path, None).await.map_err(|e| e.context(&what))?;
    if reply.status != 200 {
        let why = match reply.status {
            404 => " (OCI answers 404 when the limit does not exist or does not report availability)",
            401 | 403 => " (the API key's user may lack `inspect resource-availability` on the tenancy)",
            _ => "",
        };
        return Err(reply.failure(&what).map_message(|_| format!("{what}: HTTP {}: {}{why}", reply.status, reply.error())));
    }
    reading(&reply.body).ok_or_else(|| CloudError::other(format!("{what}: the answer has no used/available figures: {}", reply.body)))
}

/// A ResourceAvailability as a reading. OCI leaves the fields empty for limits it cannot report on.
pub fn reading(body: &serde_json::Value) -> Option<QuotaReading> {
    let used = body["used"].as_u64()?;
    let available = body["available"].as_u64()?;
    // Figures whose sum is past u64 are no reading (the sum overflowed).
    Some(QuotaReading { limit: used.checked_add(available)?, used })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_gpu_shape_has_a_limit_and_series_do_not_shadow_each_other() {
        for sku in crate::catalog::skus(Cloud::Oci) {
            let limit = limit_of(sku.name).unwrap_or_else(|| panic!("{} has no limit", sku.name));
            assert!(limit.name.starts_with("gpu-") && limit.name.ends_with("-count"), "{}", limit.name);
        }
        assert_eq!(limit_name("BM.GPU.GB200-v3.4"), Some("gpu-gb200-count"));
        assert_eq!(limit_name("BM.GPU.B200.8"), Some("gpu-b200-count"));
        assert_eq!(limit_name("BM.GPU.B300.8"), Some("gpu-b300-count"));
        assert_eq!(limit_name("BM.GPU.H200.8"), Some("gpu-h200-count"));
        assert_eq!(limit_name("BM.Standard.E5.192"), None);
    }

    #[test]
    fn a_reading_is_used_plus_available_and_empty_fields_are_no_reading() {
        let r = reading(&serde_json::json!({"used": 16, "available": 48, "fractionalUsage": 16.0})).unwrap();
        assert_eq!((r.limit, r.used, r.free()), (64, 16, 48));
        assert_eq!(reading(&serde_json::json!({})), None);
    }

    /// `used + available` overflowed on figures past u64 (a panic in a debug build, a wrapped limit in a
    /// release one).
    #[test]
    fn figures_whose_sum_is_past_u64_are_no_reading() {
        assert_eq!(reading(&serde_json::json!({"used": u64::MAX, "available": 1})), None);
        crate::fuzz::check("reading", crate::fuzz::answers(vec![serde_json::json!({"used": 16, "available": 48})]), |body| {
            match reading(&body) {
                Some(r) if r.used > r.limit => Err(format!("{r:?}")),
                _ => Ok(()),
            }
        });
    }
}
