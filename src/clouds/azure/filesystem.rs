//! `hpc_parallel_filesystem` on Azure: Azure Managed Lustre (`Microsoft.StorageCache/amlFilesystems`) in
//! the fabric's subnet and resource group, with its SKU (throughput tier), capacity in TiB, the required
//! maintenance window and optional blob import/export (HSM). AMLFS is sized at creation (the plan replaces
//! it on a capacity change); tags update in place. A filesystem of the same name that another owner's
//! `hpc:owner` tag marks is never PUT or deleted.
//! The lifecycle's backend for this kind, `Backend<FilesystemSpec>` on `backend::Azure`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::api;
use super::api::{Arm, Write};
use super::backend::{self, arm, group_of, group_place, unknown_fabric, unknown_fabric_summary};
use super::filesystem;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::FilesystemSpec;
use crate::ownership::{Census, marker_in_json};

pub const API: &str = "2026-08-01";

pub fn filesystem_id(arm: &Arm, group: &str, name: &str) -> String {
    format!("{}/providers/Microsoft.StorageCache/amlFilesystems/{name}", arm.group_id(group))
}

/// Capacity (GiB) and tier (MB/s per TiB) of a live filesystem.
pub fn size_of(fs: &Json) -> (i64, i64) {
    // A negative or absurd figure is none (`as` holds a float past i64 at i64's end).
    let tib = fs["properties"]["storageCapacityTiB"].as_f64().filter(|t| *t > 0.0).unwrap_or(0.0);
    let tier = fs["sku"]["name"].as_str().and_then(|s| s.rsplit('-').next()).and_then(|t| t.parse().ok()).unwrap_or(0);
    ((tib * 1024.0).round() as i64, i64::max(tier, 0))
}

pub fn mount_target(fs: &Json) -> String {
    fs["properties"]["clientInfo"]["mgsAddress"].as_str().map(|m| format!("{m}@tcp:/lustrefs")).unwrap_or_default()
}

pub fn mount_command(fs: &Json) -> String {
    fs["properties"]["clientInfo"]["mountCommand"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("sudo mount -t lustre -o noatime,flock {} /lustre", mount_target(fs)))
}

/// The fabric's subnet, as the cluster finds it.
async fn subnet(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<String, CloudError> {
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg", arm.group_id(group));
    let nsg = arm
        .get(ctx, &nsg_id, super::fabric::NETWORK_API)
        .await?
        .ok_or_else(|| CloudError::other(format!("fabric {fabric} has no security group in {group}: apply the fabric first")))?;
    Ok(nsg["tags"]["hpc:subnet"].as_str().map(str::to_owned).unwrap_or_else(|| {
        format!("{}/providers/Microsoft.Network/virtualNetworks/{fabric}-vpc/subnets/{fabric}-subnet", arm.group_id(group))
    }))
}

/// Creates the filesystem (create-only, `If-None-Match: *`), or brings its tags up to date through
/// AmlFilesystems_Update (PATCH `{"tags"}`), which changes nothing else; a changed blob link is PUT again
/// in whole.
pub async fn converge(
    ctx: &Context,
    arm: &Arm,
    spec: &FilesystemSpec,
    group: &str,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<Json, CloudError> {
    let id = filesystem_id(arm, group, &spec.name);
    let found = arm.get(ctx, &id, API).await?;
    let ours = found.as_ref().is_none_or(|fs| census.admit(KIND, &spec.name, marker_in_json(&fs["tags"]), None));
    census.gate()?;
    if !ours {
        return Err(format!("filesystem {} belongs to another owner and was left alone", spec.name).into());
    }
    let (day, time) = spec.maintenance_window.clone().unwrap_or_else(|| ("Sunday".into(), "02:00".into()));
    let mut props = json!({
        "storageCapacityTiB": spec.capacity_gib as f64 / 1024.0,
        "filesystemSubnet": subnet(ctx, arm, group, &spec.fabric.name).await?,
        "maintenanceWindow": {"dayOfWeek": day, "timeOfDayUTC": time},
    });
    if let Some(container) = &spec.data_repository {
        props["hsm"] = json!({"settings": {"container": container, "loggingContainer": logging_container(container), "importPrefix": "/"}});
    }
    let body = json!({
        "location": spec.fabric.region,
        "zones": [spec.fabric.zone.clone().unwrap_or_else(|| "1".into())],
        "sku": {"name": format!("AMLFS-Durable-Premium-{}", spec.throughput_per_tib)},
        "tags": tags,
        "properties": props,
    });
    match &found {
        None => arm.put(ctx, &id, API, &body, Write::Create, timeout).await,
        Some(fs) if same_link(fs, spec.data_repository.as_deref()) => {
            if api::tags_of(fs) == *tags {
                arm.settled(ctx, &id, API, &format!("provisioning amlFilesystems/{}", spec.name), timeout).await
            } else {
                arm.patch(ctx, &id, API, &json!({"tags": tags}), timeout).await
            }
        }
        Some(_) => arm.put(ctx, &id, API, &body, Write::Update, timeout).await,
    }
}

/// Whether a live filesystem links the blob container `wanted` (or none, as wanted).
fn same_link(fs: &Json, wanted: Option<&str>) -> bool {
    let linked = fs["properties"]["hsm"]["settings"]["container"].as_str().filter(|c| !c.is_empty());
    match (linked, wanted) {
        (None, None) => true,
        (Some(a), Some(b)) => api::same_id(a, b),
        _ => false,
    }
}

const KIND: &str = "azurerm_managed_lustre_file_system";

/// A blob container's resource id split into (account id, container name): AMLFS's HSM settings take
/// resource ids ("Resource ID of storage container"), not URLs.
pub fn container_parts(id: &str) -> Option<(&str, &str)> {
    let (account, container) = id.trim_end_matches('/').rsplit_once("/blobServices/default/containers/")?;
    let segs: Vec<&str> = account.trim_start_matches('/').split('/').collect();
    let shaped = segs.len() == 8
        && segs[0].eq_ignore_ascii_case("subscriptions")
        && segs[2].eq_ignore_ascii_case("resourceGroups")
        && segs[4].eq_ignore_ascii_case("providers")
        && segs[5].eq_ignore_ascii_case("Microsoft.Storage")
        && segs[6].eq_ignore_ascii_case("storageAccounts")
        && segs.iter().all(|s| !s.is_empty());
    (shaped && account.starts_with('/') && !container.is_empty() && !container.contains('/')).then_some((account, container))
}

/// The logging container beside the data container: AMLFS wants a separate container of the same storage
/// account ("Must be a separate container in the same storage account"), `<container>-logs`.
pub fn logging_container(container: &str) -> String {
    format!("{}-logs", container.trim_end_matches('/'))
}

/// The filesystem, if it exists and the census admits it.
pub async fn observe(ctx: &Context, arm: &Arm, group: &str, name: &str, census: &Census) -> Result<Option<Json>, CloudError> {
    let found = arm.get(ctx, &filesystem_id(arm, group, name), API).await?;
    Ok(found.filter(|fs| census.admit(KIND, name, marker_in_json(&fs["tags"]), None)))
}

/// Deletes the filesystem if it is the census's.
pub async fn delete(ctx: &Context, arm: &Arm, group: &str, name: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    if observe(ctx, arm, group, name, census).await?.is_none() {
        return Ok(());
    }
    arm.delete(ctx, &filesystem_id(arm, group, name), API, timeout).await
}

/// The configuration an import rebuilds from the filesystem, its tags, and the fabric and cluster they name.
pub async fn imported_config(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    fs: &Json,
    defaults: &BTreeMap<String, String>,
) -> Result<Value, CloudError> {
    let (capacity, tier) = size_of(fs);
    let tags = super::api::tags_of(fs);
    let fabric = tags.get("hpc:fabric").ok_or_else(|| "the filesystem has no hpc:fabric tag naming its fabric".to_owned())?;
    let fabric_ref = super::cluster::fabric_ref(ctx, arm, group, fabric).await?;
    let cluster_ref = match tags.get("hpc:cluster") {
        Some(cluster) => {
            let sets = super::cluster::scale_sets(ctx, arm, group, cluster, &Census::reading()).await?;
            let per_node = fabric_ref
                .get("instance_type")
                .as_str()
                .and_then(|t| crate::catalog::find_sku(crate::catalog::Cloud::Azure, t))
                .map_or(0, |s| i64::from(s.gpu_count));
            let workload = sets
                .first()
                .and_then(|(s, _)| s["tags"]["hpc:workload"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "pretraining".into());
            Value::object([
                ("id", Value::from(super::api::resource_id(group, cluster))),
                ("name", Value::from(cluster.as_str())),
                ("gpus_total", Value::int(sets.iter().map(|(_, vms)| vms.len() as i64).sum::<i64>() * per_node)),
                ("workload", Value::from(workload)),
            ])
        }
        None => Value::Null,
    };
    let w = &fs["properties"]["maintenanceWindow"];
    Ok(Value::object([
        ("name", Value::from(fs["name"].as_str().unwrap_or_default())),
        ("fabric", fabric_ref),
        ("cluster", cluster_ref),
        ("capacity_gib", Value::int(capacity)),
        ("throughput_per_tib", Value::int(tier)),
        ("data_repository", Value::from(fs["properties"]["hsm"]["settings"]["container"].as_str().map(str::to_owned))),
        (
            "maintenance_window",
            Value::from(format!("{} {}", w["dayOfWeek"].as_str().unwrap_or("Sunday"), w["timeOfDayUTC"].as_str().unwrap_or("02:00"))),
        ),
        ("tags", super::api::imported_tags(&tags, defaults)),
    ]))
}

/// A filesystem state brought to what exists.
fn azure_refreshed(state: &Value, fs: &serde_json::Value) -> Value {
    let (capacity, tier) = filesystem::size_of(fs);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(crate::clouds::shared::throughput_mbps(capacity, tier, 1024)));
    out.insert("mount_target".into(), Value::from(filesystem::mount_target(fs)));
    out.insert("mount_command".into(), Value::from(filesystem::mount_command(fs)));
    Value::Map(out)
}

#[async_trait]
impl Backend<FilesystemSpec> for backend::Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        api::connect(ctx).await.map(|_| ())
    }

    /// Only the fabric's id names the resource group: `apply` makes the id.
    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        None
    }

    fn place(&self, v: &Value) -> String {
        group_place(v)
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        unknown_fabric_summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let name = change.planned.get("name").as_str().unwrap_or_default();
        let arm = match arm(ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let Some(group) = group_of(change.planned) else { return Outcome::failed(change.prior.clone(), unknown_fabric()) };
        let id = api::resource_id(&group, name);
        census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        match filesystem::converge(ctx, &arm, spec, &group, change.tags, step.timeout, census).await {
            Ok(fs) => {
                let state = shared::with_attr(&state, "mount_target", Value::from(filesystem::mount_target(&fs)));
                Outcome::done(shared::with_attr(&state, "mount_command", Value::from(filesystem::mount_command(&fs))))
            }
            Err(e) => {
                let kept = match filesystem::observe(ctx, &arm, &group, name, census).await {
                    Ok(Some(fs)) => azure_refreshed(&state, &fs),
                    _ if change.creating() => Value::Null,
                    _ => change.prior.clone(),
                };
                Outcome::failed(kept, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let name = prior.get("name").as_str().unwrap_or_default();
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let Some(group) = group_of(prior) else { return Outcome::failed(prior.clone(), unknown_fabric()) };
        let done = filesystem::delete(step.ctx, &arm, &group, name, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, CloudError> {
        let name = state.get("name").as_str().unwrap_or_default();
        let Some(group) = group_of(state) else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let found = filesystem::observe(step.ctx, &arm, &group, name, step.census).await?;
        Ok(found.map(|fs| azure_refreshed(state, &fs)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure filesystem id: give \"azure/<resource group>/<name>\", e.g. \"azure/train-rg/scratch\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::failed)?;
        let fs = filesystem::observe(step.ctx, &arm, group, name, step.census)
            .await
            .and_then(|found| found.ok_or_else(|| CloudError::other(format!("no Azure Managed Lustre filesystem {name} in {group}"))))
            .map_err(ImportError::failed)?;
        let config = filesystem::imported_config(step.ctx, &arm, group, &fs, step.default_tags).await.map_err(ImportError::failed)?;
        let assigned = BTreeMap::from([
            ("id".to_owned(), Value::from(id)),
            ("mount_target".to_owned(), Value::from(filesystem::mount_target(&fs))),
            ("mount_command".to_owned(), Value::from(filesystem::mount_command(&fs))),
        ]);
        Ok(Imported::new(config, assigned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::{answers, check, hostile_str};

    fn amlfs() -> Json {
        json!({"name": "lib-fs", "tags": {"hpc:fabric": "lib", "hpc:owner": "o-1"}, "sku": {"name": "AMLFS-Durable-Premium-250"},
               "properties": {"storageCapacityTiB": 8, "clientInfo": {"mgsAddress": "10.0.0.4", "mountCommand": "sudo mount x"},
                              "hsm": {"settings": {"container": "/subscriptions/s/c"}},
                              "maintenanceWindow": {"dayOfWeek": "Sunday", "timeOfDayUTC": "02:00"}}})
    }

    /// A capacity past i64 (ARM's `storageCapacityTiB` is a number, and nothing bounds it) overflowed the
    /// throughput's product: a refresh panicked in a debug build (and wrapped in a release one).
    #[test]
    fn a_capacity_too_large_to_count_is_no_overflow() {
        let mut fs = amlfs();
        fs["properties"]["storageCapacityTiB"] = json!(1e300);
        let out = azure_refreshed(&Value::Null, &fs);
        assert_eq!(out.get("throughput_mbps"), &Value::int(i64::MAX / 1024));
        fs["properties"]["storageCapacityTiB"] = json!(-4);
        assert_eq!(size_of(&fs), (0, 250), "a negative capacity is none");
        assert_eq!(size_of(&amlfs()), (8192, 250));
    }

    #[test]
    fn any_filesystem_answer_refreshes_without_a_panic() {
        check("azure_refreshed", (answers(vec![amlfs()]), hostile_str()), |(fs, container)| {
            let out = azure_refreshed(&Value::Null, &fs);
            let _ = (same_link(&fs, Some(&container)), same_link(&fs, None), container_parts(&container), logging_container(&container));
            let (capacity, tier) = size_of(&fs);
            if capacity < 0 || tier < 0 || out.get("throughput_mbps").as_number().and_then(|n| n.as_i64()).is_none_or(|t| t < 0) {
                return Err(format!("negative figures: {capacity} GiB, {tier} MB/s per TiB"));
            }
            Ok(())
        });
    }
}
