//! The Azure compute quota a cluster's nodes draw on, as Microsoft.Compute's usages report it
//! (`GET /subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/usages`, operation
//! `Usage_List`: `ListUsagesResult.value[]` of `Usage {name {value, localizedValue}, currentValue, limit,
//! unit}`), and Azure's words for "no capacity".
//!
//! Regular (on-demand) VMs count their vCPUs against the quota of their VM family
//! (`standardNDSH100v5Family`, ...), and against the regional total (`cores`, which this check does not
//! read: the family's is the one that is short in practice, and one quota is read per cluster). Spot VMs
//! count against the one regional low-priority quota, `lowPriorityCores`, whatever their family (Microsoft
//! Learn, "Azure Spot Virtual Machines", quota section; the usages list names it "Total Regional
//! Low-priority vCPUs"). Nodes in a
//! capacity reservation group draw on the reservation, which bounds them: no quota is read.

use serde_json::Value as Json;

use super::api::Arm;
use super::fabric::COMPUTE_API;
use crate::catalog::Cloud;
use crate::clouds::CloudError;
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::framework::Context;
use crate::model::{CapacityType, ClusterSpec};

/// The spot quota: one per location for every family (its `localizedValue` as the usages list gives it).
pub const LOW_PRIORITY: (&str, &str) = ("lowPriorityCores", "Total Regional Low-priority vCPUs");

/// One row of the table: a VM size, the usage its vCPUs count against when it runs as a Regular VM, that
/// usage's display name, and the size's vCPUs.
struct Row {
    size: &'static str,
    family: &'static str,
    name: &'static str,
    vcpus: u64,
}

/// VM size -> VM family quota (`Usage.name.value`), in vCPUs.
const TABLE: &[Row] = &[
    // Microsoft Learn, per-VM-family vCPU quota names ("NVadsA10_v5-series: StandardNVADSA10v5Family"),
    // seen the same in usages lists; NVadsA10 v5 size page: Standard_NV36ads_A10_v5 has 36 vCPUs.
    Row { size: "Standard_NV36ads_A10_v5", family: "StandardNVADSA10v5Family", name: "Standard NVADSA10v5 Family vCPUs", vcpus: 36 },
    // Same table ("ND-H100-v5-series: standardNDSH100v5Family"); ND H100 v5 size page: 96 vCPUs.
    Row { size: "Standard_ND96isr_H100_v5", family: "standardNDSH100v5Family", name: "Standard NDSH100v5 Family vCPUs", vcpus: 96 },
    // Same table ("ND-H200-v5-series: standardNDISRH200V5Family"); ND H200 v5 size page: 96 vCPUs.
    Row { size: "Standard_ND96isr_H200_v5", family: "standardNDISRH200V5Family", name: "Standard NDISRH200V5 Family vCPUs", vcpus: 96 },
    // UNCONFIRMED: the family name is from third-party quota tools only (not found in Microsoft's table);
    // ND MI300X v5 size page: 96 vCPUs.
    Row { size: "Standard_ND96isr_MI300X_v5", family: "standardNDISv5MI300XFamily", name: "Standard NDISv5MI300X Family vCPUs", vcpus: 96 },
    // UNCONFIRMED: the family name is from third-party quota tools only; ND GB200 v6 size page: 128 vCPUs.
    Row {
        size: "Standard_ND128isr_NDR_GB200_v6",
        family: "standardNDISRGB200V6NDRFamily",
        name: "Standard NDISRGB200V6NDR Family vCPUs",
        vcpus: 128,
    },
    // UNCONFIRMED: the family name is from third-party quota tools only; ND GB300 v6 size page: 128 vCPUs.
    Row {
        size: "Standard_ND128isr_GB300_v6",
        family: "standardNDISRGB300V6Family",
        name: "Standard NDISRGB300V6 Family vCPUs",
        vcpus: 128,
    },
];

/// The vCPUs of a VM size the table knows.
pub fn vcpus(size: &str) -> Option<u64> {
    TABLE.iter().find(|r| r.size == size).map(|r| r.vcpus)
}

/// How to ask for more of a usage in a location: the `az quota` extension (Microsoft.Quota), or the
/// portal's Quotas page.
pub fn request(id: &str, location: &str, resource_type: &str) -> String {
    format!(
        "az quota update --resource-name {id} --scope /subscriptions/<subscription id>/providers/Microsoft.Compute/locations/{location} \
         --resource-type {resource_type} --limit-object value=<n>, or the portal: \
         https://portal.azure.com/#view/Microsoft_Azure_Capacity/QuotaMenuBlade/~/myQuotas"
    )
}

/// The quota the nodes of `spec` draw on in the fabric's location: the VM family's for Regular VMs,
/// `lowPriorityCores` for spot; `None` for a capacity reservation, and for a size the table lacks.
pub fn family(spec: &ClusterSpec) -> Option<QuotaFamily> {
    let row = TABLE.iter().find(|r| r.size == spec.fabric.sku.name)?;
    let location = spec.fabric.region.clone();
    let (id, name, resource_type) = match spec.capacity {
        CapacityType::OnDemand => (row.family, row.name, "dedicated"),
        CapacityType::Spot => (LOW_PRIORITY.0, LOW_PRIORITY.1, "lowPriority"),
        // Reservations bound themselves; Azure has neither capacity blocks nor flex-start (the planner refuses them).
        CapacityType::Reservation | CapacityType::CapacityBlock | CapacityType::FlexStart => return None,
    };
    Some(QuotaFamily {
        cloud: Cloud::Azure,
        request: request(id, &location, resource_type),
        scope: location,
        id: id.to_owned(),
        name: name.to_owned(),
        unit: "vCPUs",
        per_node: row.vcpus,
    })
}

/// The usage of `id` in a usages list: Azure's casing of family names varies between its APIs
/// (`standardNDSH100v5Family`, `StandardNDSH100v5Family`), so they compare without case.
pub fn reading(usages: &[Json], id: &str) -> Option<QuotaReading> {
    let usage = usages.iter().find(|u| u["name"]["value"].as_str().is_some_and(|v| v.eq_ignore_ascii_case(id)))?;
    let number = |v: &Json| v.as_u64().or_else(|| v.as_i64().map(|n| n.max(0) as u64));
    Some(QuotaReading { limit: number(&usage["limit"])?, used: number(&usage["currentValue"])? })
}

/// One `Usage_List` of the family's location (following `nextLink`): the family's limit and usage.
pub async fn read(ctx: &Context, arm: &Arm, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
    let url = format!("/subscriptions/{}/providers/Microsoft.Compute/locations/{}/usages", arm.subscription, family.scope);
    let usages = arm
        .list(ctx, &url, COMPUTE_API)
        .await
        .map_err(|e| e.map_message(|e| format!("reading the Microsoft.Compute usages of {} (Usage_List) failed: {e}", family.scope)))?;
    reading(&usages, &family.id).ok_or_else(|| {
        CloudError::other(format!(
            "the Microsoft.Compute usages of {} (Usage_List) list no {} ({} entries came back)",
            family.scope,
            family.id,
            usages.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(size: &str, capacity: &str) -> ClusterSpec {
        use crate::framework::Value;
        let config = Value::object([
            ("name", Value::from("train")),
            ("cloud", Value::from("azure")),
            ("region", Value::from("westus3")),
            ("instance_type", Value::from(size)),
            // 18: a whole NVL72 rack of the rack-scale sizes, and any count for the others.
            ("node_count", Value::int(18)),
            ("workload", Value::from("inference")),
            ("image", Value::from("Canonical:ubuntu-24_04-lts:server:latest")),
            ("ssh_public_key", Value::from("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc x")),
        ]);
        let mut diags = crate::framework::Diagnostics::new();
        let mut spec = crate::planner::spec::parse_cluster(&config, &mut diags).unwrap_or_else(|| panic!("{size}: {diags:?}"));
        spec.capacity = match capacity {
            "spot" => CapacityType::Spot,
            "reservation" => CapacityType::Reservation,
            _ => CapacityType::OnDemand,
        };
        spec
    }

    #[test]
    fn every_azure_node_type_draws_on_its_family_on_demand_on_low_priority_cores_as_spot_and_on_nothing_reserved() {
        let skus: Vec<&crate::catalog::Sku> = crate::catalog::SKUS.iter().filter(|s| s.cloud == Cloud::Azure).collect();
        assert!(skus.len() >= 6, "{}", skus.len());
        for sku in skus {
            let regular = family(&spec(sku.name, "on-demand")).unwrap_or_else(|| panic!("{}: no family", sku.name));
            assert_eq!((regular.cloud, regular.scope.as_str(), regular.unit), (Cloud::Azure, "westus3", "vCPUs"));
            assert!(regular.id.to_lowercase().starts_with("standard") && regular.id.ends_with("Family"), "{}", regular.id);
            assert_eq!(Some(regular.per_node), vcpus(sku.name));
            assert!(regular.per_node >= 36, "{}: {}", sku.name, regular.per_node);
            assert!(regular.request.contains(&format!("--resource-name {}", regular.id)), "{}", regular.request);
            assert!(regular.request.contains("locations/westus3") && regular.request.contains("--resource-type dedicated"));
            assert!(regular.request.contains("value=<n>"), "the shared layer fills in the value: {}", regular.request);
            let spot = family(&spec(sku.name, "spot")).unwrap();
            assert_eq!((spot.id.as_str(), spot.name.as_str(), spot.per_node), (LOW_PRIORITY.0, LOW_PRIORITY.1, regular.per_node));
            assert!(spot.request.contains("--resource-type lowPriority"), "{}", spot.request);
            assert_eq!(family(&spec(sku.name, "reservation")), None, "{}: a reservation bounds itself", sku.name);
        }
        assert_eq!(family(&spec("Standard_ND96isr_H100_v5", "on-demand")).unwrap().id, "standardNDSH100v5Family");
        assert_eq!(family(&spec("Standard_NV36ads_A10_v5", "on-demand")).unwrap().per_node, 36);
    }

    #[test]
    fn usages_are_matched_without_case_and_read_as_numbers() {
        let usages = vec![
            json!({"name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}, "currentValue": 10, "limit": 350, "unit": "Count"}),
            json!({"name": {"value": "StandardNDSH100v5Family"}, "currentValue": 192, "limit": 768, "unit": "Count"}),
        ];
        assert_eq!(reading(&usages, "standardNDSH100v5Family"), Some(QuotaReading { limit: 768, used: 192 }));
        assert_eq!(reading(&usages, "lowPriorityCores"), None);
        let broken = vec![json!({"name": {"value": "cores"}, "limit": 4})];
        assert_eq!(reading(&broken, "cores"), None, "a usage without currentValue is not a reading");
    }

    #[test]
    fn any_usages_answer_reads_without_a_panic() {
        use crate::fuzz::{answers, check};
        let usage = json!({"name": {"value": "StandardNDSH100v5Family"}, "currentValue": 192, "limit": 768, "unit": "Count"});
        check("reading", answers(vec![json!([usage.clone(), usage])]), |page| {
            let usages = page.as_array().cloned().unwrap_or_default();
            let _ = reading(&usages, "standardNDSH100v5Family");
            Ok(())
        });
    }
}
