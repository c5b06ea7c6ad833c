//! `hpc_parallel_filesystem` on Azure: Azure Managed Lustre (`Microsoft.StorageCache/amlFilesystems`) in
//! the fabric's subnet and resource group, with its SKU (throughput tier), capacity in TiB, the required
//! maintenance window and optional blob import/export (HSM). AMLFS is sized at creation (the plan replaces
//! it on a capacity change); tags update in place.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::api::Arm;
use crate::framework::Context;
use crate::planner::FilesystemSpec;

pub const API: &str = "2024-07-01";

pub fn filesystem_id(arm: &Arm, group: &str, name: &str) -> String {
    format!("{}/providers/Microsoft.StorageCache/amlFilesystems/{name}", arm.group_id(group))
}

/// Capacity (GiB) and tier (MB/s per TiB) of a live filesystem.
pub fn size_of(fs: &Json) -> (i64, i64) {
    let tib = fs["properties"]["storageCapacityTiB"].as_f64().unwrap_or(0.0);
    let tier = fs["sku"]["name"].as_str().and_then(|s| s.rsplit('-').next()).and_then(|t| t.parse().ok()).unwrap_or(0);
    ((tib * 1024.0).round() as i64, tier)
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
async fn subnet(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<String, String> {
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg", arm.group_id(group));
    let nsg = arm
        .get(ctx, &nsg_id, super::fabric::NETWORK_API)
        .await?
        .ok_or_else(|| format!("fabric {fabric} has no security group in {group}: apply the fabric first"))?;
    Ok(nsg["tags"]["hpc:subnet"].as_str().map(str::to_owned).unwrap_or_else(|| {
        format!("{}/providers/Microsoft.Network/virtualNetworks/{fabric}-vpc/subnets/{fabric}-subnet", arm.group_id(group))
    }))
}

/// Creates the filesystem, or brings its tags up to date.
pub async fn converge(
    ctx: &Context,
    arm: &Arm,
    spec: &FilesystemSpec,
    group: &str,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Json, String> {
    let id = filesystem_id(arm, group, &spec.name);
    let (day, time) = spec.maintenance_window.clone().unwrap_or_else(|| ("Sunday".into(), "02:00".into()));
    let mut props = json!({
        "storageCapacityTiB": spec.capacity_gib as f64 / 1024.0,
        "filesystemSubnet": subnet(ctx, arm, group, &spec.fabric.name).await?,
        "maintenanceWindow": {"dayOfWeek": day, "timeOfDayUTC": time},
    });
    if let Some(container) = &spec.data_repository {
        props["hsm"] = json!({"settings": {"container": container, "loggingContainer": container, "importPrefix": "/"}});
    }
    let body = json!({
        "location": spec.fabric.region,
        "zones": [spec.fabric.zone.clone().unwrap_or_else(|| "1".into())],
        "sku": {"name": format!("AMLFS-Durable-Premium-{}", spec.throughput_per_tib)},
        "tags": tags,
        "properties": props,
    });
    arm.put(ctx, &id, API, &body, timeout).await
}

pub async fn observe(ctx: &Context, arm: &Arm, group: &str, name: &str) -> Result<Option<Json>, String> {
    arm.get(ctx, &filesystem_id(arm, group, name), API).await
}

pub async fn delete(ctx: &Context, arm: &Arm, group: &str, name: &str, timeout: Duration) -> Result<(), String> {
    arm.delete(ctx, &filesystem_id(arm, group, name), API, timeout).await
}
