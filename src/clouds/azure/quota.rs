//! The Azure compute quota a cluster's nodes draw on, as Microsoft.Compute's usages report it
//! (`GET /subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/usages`, operation
//! `Usage_List`: `ListUsagesResult.value[]` of `Usage {name {value, localizedValue}, currentValue, limit,
//! unit}`), and Azure's words for "no capacity".
//!
//! Regular (on-demand) VMs count their vCPUs against two quotas at once: that of their VM family
//! (`standardNDSH100v5Family`, ...) and the location's total of every family, `cores` ("Total Regional
//! vCPUs"; Microsoft Learn, "Check vCPU quotas": the vCPUs of a new VM "must not exceed the vCPU quota for
//! the VM size family or the total regional vCPU quota"; "If either of those quotas are exceeded, the VM
//! deployment will not be allowed"). Both come from the same usages list, so the check holds a cluster
//! to both with one `Usage_List` per location. Spot VMs count against the one regional low-priority quota, `lowPriorityCores`, whatever
//! their family, and neither of the others (Microsoft Learn, "Azure Spot Virtual Machines", quota
//! section; the usages list names it "Total Regional Low-priority vCPUs"). Nodes in a capacity
//! reservation group draw on the reservation, which bounds them: no quota is read.

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

/// The location's total of Regular VMs' vCPUs, every family's together (its `localizedValue` likewise).
pub const CORES: (&str, &str) = ("cores", "Total Regional vCPUs");

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

/// Every quota the nodes of `spec` draw on: for Regular VMs their family's and the regional total
/// (`cores`), for spot `lowPriorityCores` alone, for a reservation none.
pub fn quotas(spec: &ClusterSpec) -> Vec<QuotaFamily> {
    let Some(first) = family(spec) else { return Vec::new() };
    let regional = (spec.capacity == CapacityType::OnDemand).then(|| QuotaFamily {
        id: CORES.0.to_owned(),
        name: CORES.1.to_owned(),
        request: format!(
            "a regional vCPU quota increase (\"{}\" in the portal's Quotas, Compute), e.g. {}",
            CORES.1,
            request(CORES.0, &first.scope, "dedicated")
        ),
        ..first.clone()
    });
    std::iter::once(first).chain(regional).collect()
}

/// The usage of `id` in a usages list: Azure's casing of family names varies between its APIs
/// (`standardNDSH100v5Family`, `StandardNDSH100v5Family`), so they compare without case.
pub fn reading(usages: &[Json], id: &str) -> Option<QuotaReading> {
    let usage = usages.iter().find(|u| u["name"]["value"].as_str().is_some_and(|v| v.eq_ignore_ascii_case(id)))?;
    let number = |v: &Json| v.as_u64().or_else(|| v.as_i64().map(|n| n.max(0) as u64));
    Some(QuotaReading { limit: number(&usage["limit"])?, used: number(&usage["currentValue"])? })
}

/// Every usage of a usages list that reads as numbers, by its name as listed (`Usage.name.value`).
pub fn readings(usages: &[Json]) -> std::collections::BTreeMap<String, QuotaReading> {
    let mut out = std::collections::BTreeMap::new();
    for usage in usages {
        if let Some(id) = usage["name"]["value"].as_str()
            && let Some(r) = reading(std::slice::from_ref(usage), id)
        {
            out.entry(id.to_owned()).or_insert(r);
        }
    }
    out
}

/// One `Usage_List` of a location, following `nextLink`.
pub async fn usages(ctx: &Context, arm: &Arm, location: &str) -> Result<Vec<Json>, CloudError> {
    let url = format!("/subscriptions/{}/providers/Microsoft.Compute/locations/{location}/usages", arm.subscription);
    arm.list(ctx, &url, COMPUTE_API)
        .await
        .map_err(|e| e.map_message(|e| format!("reading the Microsoft.Compute usages of {location} (Usage_List) failed: {e}")))
}

/// One `Usage_List` of the family's location (following `nextLink`): the family's limit and usage.
pub async fn read(ctx: &Context, arm: &Arm, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
    let usages = usages(ctx, arm, &family.scope).await?;
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

    #[test]
    fn a_regular_vm_draws_on_its_family_and_the_regional_total_a_spot_vm_on_low_priority_cores_alone() {
        for sku in crate::catalog::SKUS.iter().filter(|s| s.cloud == Cloud::Azure) {
            let on_demand = quotas(&spec(sku.name, "on-demand"));
            let ids: Vec<&str> = on_demand.iter().map(|f| f.id.as_str()).collect();
            assert_eq!(ids, [family(&spec(sku.name, "on-demand")).unwrap().id.as_str(), "cores"], "{}", sku.name);
            let cores = &on_demand[1];
            assert_eq!((cores.name.as_str(), cores.scope.as_str(), cores.unit), ("Total Regional vCPUs", "westus3", "vCPUs"));
            assert_eq!(cores.per_node, on_demand[0].per_node, "{}: a node takes its vCPUs of both", sku.name);
            assert!(cores.request.starts_with("a regional vCPU quota increase (\"Total Regional vCPUs\""), "{}", cores.request);
            assert!(cores.request.contains("--resource-name cores --scope") && cores.request.contains("locations/westus3"));
            assert!(cores.request.contains("--resource-type dedicated") && cores.request.contains("value=<n>"), "{}", cores.request);
            let spot: Vec<String> = quotas(&spec(sku.name, "spot")).into_iter().map(|f| f.id).collect();
            assert_eq!(spot, [LOW_PRIORITY.0], "{}: spot counts against neither family nor cores", sku.name);
            assert!(quotas(&spec(sku.name, "reservation")).is_empty(), "{}", sku.name);
        }
    }

    #[test]
    fn one_usages_list_reads_the_family_and_the_regional_total_together() {
        let usages = vec![
            json!({"name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}, "currentValue": 96, "limit": 200, "unit": "Count"}),
            json!({"name": {"value": "lowPriorityCores"}, "currentValue": 0, "limit": 100, "unit": "Count"}),
            json!({"name": {"value": "StandardNDSH100v5Family"}, "currentValue": 96, "limit": 100000, "unit": "Count"}),
            json!({"name": {"value": "availabilitySets"}, "currentValue": -1, "limit": 2500, "unit": "Count"}),
            json!({"name": {"value": "standardNCFamily"}, "limit": 24}),
            json!({"name": {"localizedValue": "nameless"}, "currentValue": 1, "limit": 2}),
        ];
        let got = readings(&usages);
        assert_eq!(got["cores"], QuotaReading { limit: 200, used: 96 });
        assert_eq!(got["StandardNDSH100v5Family"], QuotaReading { limit: 100_000, used: 96 }, "as listed: the check compares without case");
        assert_eq!(got["lowPriorityCores"], QuotaReading { limit: 100, used: 0 });
        assert_eq!(got["availabilitySets"], QuotaReading { limit: 2500, used: 0 }, "a negative usage reads as none");
        assert_eq!(got.len(), 4, "a usage without numbers or a name is no reading: {got:?}");

        // The regional total short while the family has room: the diagnostic names cores and the fix.
        let s = spec("Standard_ND96isr_H100_v5", "on-demand");
        let [fam, cores] = &quotas(&s)[..] else { panic!("two quotas") };
        assert!(crate::resources::capacity::shortfall(&s, 3, fam, got["StandardNDSH100v5Family"], 0).is_none());
        let (summary, detail) = crate::resources::capacity::shortfall(&s, 3, cores, got["cores"], 0).expect("288 > 104 free");
        assert_eq!(summary, "Not enough Azure quota for train");
        for part in [
            "288 vCPUs of the quota \"Total Regional vCPUs\" (cores)",
            "The quota is 200 vCPUs, 96 in use, 104 free",
            "Ask for at least 384 vCPUs: a regional vCPU quota increase",
            "--resource-name cores",
            "value=384",
            "node_count = 16 (what fits)",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
    }
}
