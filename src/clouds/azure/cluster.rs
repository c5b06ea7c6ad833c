//! `hpc_gpu_cluster` on Azure: Uniform VM scale sets of ND-series VMs with InfiniBand (single placement
//! group, one fault domain, no overprovisioning, manual upgrades) in the fabric's proximity placement
//! group, at most 100 VMs each (`<cluster>-0`, `<cluster>-1`, ... as the plan showed). A refresh lists
//! each scale set's VMs and their network interfaces with one call each per scale set. A scale set is the
//! cluster's only when its `hpc:owner` tag is this owner's: another owner's same-named scale set is never
//! resized, retagged or deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value as Json, json};

use super::api::Arm;
use super::fabric::{COMPUTE_API, NETWORK_API};
use crate::clouds::NodeAddress;
use crate::framework::Context;
use crate::model::{CapacityType, ClusterSpec, Placement};
use crate::ownership::{Census, marker_in_json};

/// The Azure HPC image (Ubuntu 22.04 with the InfiniBand and GPU drivers) used when a cluster sets none.
pub const DEFAULT_IMAGE: &str = "microsoft-dsvm:ubuntu-hpc:2204:latest";

pub fn scale_set_id(arm: &Arm, group: &str, cluster: &str, index: usize) -> String {
    format!("{}/providers/Microsoft.Compute/virtualMachineScaleSets/{cluster}-{index}", arm.group_id(group))
}

/// The resource group a fabric lives in, from its id (`azure/<group>/<name>`).
pub fn group_of_fabric(fabric_id: &str) -> Option<String> {
    super::api::parse_id(fabric_id).map(|(g, _)| g.to_owned())
}

/// The API version of the scale-set network interface operations (Microsoft.Network serves them at
/// 2018-10-01, under the scale set's Microsoft.Compute path).
pub const VMSS_NIC_API: &str = "2018-10-01";

/// A live VM of a scale set: its resource id and its primary NIC's private address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vm {
    pub id: String,
    pub private_ip: Option<String>,
}

/// A scale set of the cluster, read by id, if it exists and the census admits it.
async fn own_set(ctx: &Context, arm: &Arm, id: &str, census: &Census) -> Result<Option<Json>, String> {
    let set = arm.get(ctx, id, COMPUTE_API).await?;
    Ok(set.filter(|s| census.admit(SCALE_SET, &super::api::short(id), marker_in_json(&s["tags"]), None)))
}

/// The node piece of a cluster's expansion: one scale set.
pub const SCALE_SET: &str = "azurerm_linux_virtual_machine_scale_set";

/// Each scale set's live VMs (in instance-id order), in scale-set order; `None` for a scale set that does
/// not exist or is not the census's. Per scale set: one read, one VM list, one NIC list.
pub async fn observe(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    cluster: &str,
    sets: usize,
    census: &Census,
) -> Result<Vec<Option<Vec<Vm>>>, String> {
    let mut out = Vec::new();
    for i in 0..sets {
        let id = scale_set_id(arm, group, cluster, i);
        if own_set(ctx, arm, &id, census).await?.is_none() {
            out.push(None);
            continue;
        }
        let mut vms = arm.list(ctx, &format!("{id}/virtualMachines"), COMPUTE_API).await?;
        vms.sort_by_key(|vm| vm["instanceId"].as_str().and_then(|i| i.parse::<u64>().ok()).unwrap_or(u64::MAX));
        let nics = arm.list(ctx, &format!("{id}/networkInterfaces"), VMSS_NIC_API).await?;
        let address_of = |vm_id: &str| {
            nics.iter()
                .filter(|n| n["properties"]["virtualMachine"]["id"].as_str().is_some_and(|v| v.eq_ignore_ascii_case(vm_id)))
                .flat_map(|n| n["properties"]["ipConfigurations"].as_array().cloned().unwrap_or_default())
                .find(|c| c["properties"]["primary"].as_bool() != Some(false))
                .and_then(|c| c["properties"]["privateIPAddress"].as_str().map(str::to_owned))
        };
        out.push(Some(
            vms.iter().filter_map(|vm| vm["id"].as_str()).map(|vm| Vm { id: vm.to_owned(), private_ip: address_of(vm) }).collect(),
        ));
    }
    Ok(out)
}

/// The nodes for what exists: scale set `j` holds nodes `offset(j) ..` in instance-id order, so a VM
/// missing from a set shows as that set's last node missing.
pub fn nodes(cluster: &str, sizes: &[u32], live: &[Option<Vec<Vm>>]) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    for (j, size) in sizes.iter().enumerate() {
        let vms = live.get(j).and_then(Option::as_ref).map(Vec::as_slice).unwrap_or_default();
        out.extend(vms.iter().take(*size as usize).enumerate().map(|(k, vm)| NodeAddress {
            name: format!("{cluster}-{}", offset + k),
            id: vm.id.clone(),
            private_ip: vm.private_ip.clone(),
        }));
        offset += *size as usize;
    }
    out
}

fn image_reference(image: Option<&str>) -> Json {
    let image = image.unwrap_or(DEFAULT_IMAGE);
    if image.starts_with("/subscriptions/") {
        return json!({"id": image});
    }
    let parts: Vec<&str> = image.split(':').collect();
    match parts.as_slice() {
        [publisher, offer, sku, version] => json!({"publisher": publisher, "offer": offer, "sku": sku, "version": version}),
        _ => json!({"id": image}),
    }
}

/// The fabric's subnet: created by the fabric (deterministic) or given to it (its security group's tags).
async fn subnet_of(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<String, String> {
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg", arm.group_id(group));
    let nsg = arm
        .get(ctx, &nsg_id, NETWORK_API)
        .await?
        .ok_or_else(|| format!("fabric {fabric} has no security group in {group}: apply the fabric first"))?;
    Ok(match nsg["tags"]["hpc:subnet"].as_str() {
        Some(s) => s.to_owned(),
        None => format!("{}/providers/Microsoft.Network/virtualNetworks/{fabric}-vpc/subnets/{fabric}-subnet", arm.group_id(group)),
    })
}

/// The host-name prefix of scale set `index`: Azure allows 1 to 15 characters ("Computer name prefixes must
/// be 1 to 15 characters long") and appends each VM's instance id, so every set of a cluster gets its own.
pub fn computer_name_prefix(cluster: &str, index: usize) -> String {
    let suffix = format!("-{index}-");
    let room = 15usize.saturating_sub(suffix.len());
    let base: String = cluster.chars().take(room).collect();
    format!("{}{suffix}", base.trim_end_matches('-'))
}

/// A scale set's body. `prefix` is its host-name prefix: Azure never changes it after the set is made.
fn body(arm: &Arm, spec: &ClusterSpec, group: &str, subnet: &str, size: u32, prefix: &str, tags: &BTreeMap<String, String>) -> Json {
    let f = &spec.fabric;
    let mut os = json!({"computerNamePrefix": prefix, "adminUsername": "azureuser"});
    match &spec.ssh_public_key {
        Some(key) => {
            os["linuxConfiguration"] = json!({"disablePasswordAuthentication": true,
                "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": key.trim()}]}});
        }
        // Refused at plan time (Azure needs a key or a password); kept well-formed for state written before.
        None => os["linuxConfiguration"] = json!({"disablePasswordAuthentication": true}),
    }
    if let Some(u) = &spec.user_data {
        os["customData"] = json!(base64::engine::general_purpose::STANDARD.encode(u));
    }
    let mut profile = json!({
        "osProfile": os,
        "storageProfile": {"imageReference": image_reference(spec.image.as_deref()), "osDisk": {"createOption": "FromImage", "caching": "ReadWrite"}},
        "networkProfile": {"networkInterfaceConfigurations": [{"name": "nic0", "properties": {"primary": true, "enableAcceleratedNetworking": true,
            "ipConfigurations": [{"name": "ip0", "properties": {"subnet": {"id": subnet}}}]}}]},
        "priority": if spec.capacity == CapacityType::Spot { "Spot" } else { "Regular" },
    });
    if spec.capacity == CapacityType::Spot {
        profile["evictionPolicy"] = json!("Delete");
    }
    if let Some(r) = &spec.reservation_id {
        profile["capacityReservation"] = json!({"capacityReservationGroup": {"id": r}});
    }
    // A capacity reservation group takes only scale sets without a single placement group (the planner
    // refuses reservations for InfiniBand sizes, which need one).
    let single = spec.reservation_id.is_none();
    let mut props = json!({
        "orchestrationMode": "Uniform",
        "singlePlacementGroup": single,
        "platformFaultDomainCount": 1,
        "overprovision": false,
        "upgradePolicy": {"mode": "Manual"},
        "virtualMachineProfile": profile,
    });
    if f.placement == Placement::Cluster {
        props["proximityPlacementGroup"] =
            json!({"id": format!("{}/providers/Microsoft.Compute/proximityPlacementGroups/{}-ppg", arm.group_id(group), f.name)});
    }
    let mut b =
        json!({"location": f.region, "tags": tags, "sku": {"name": f.sku.name, "tier": "Standard", "capacity": size}, "properties": props});
    if let Some(z) = &f.zone {
        b["zones"] = json!([z]);
    }
    b
}

/// PUTs every scale set at its planned size (ARM scales out to replace missing VMs) and deletes scale sets
/// the cluster no longer needs. Each is read first: a scale set with the cluster's name that belongs to
/// another owner stops the create before anything is made, and is never PUT or deleted.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    tags: &BTreeMap<String, String>,
    previous_sets: usize,
    timeout: Duration,
    census: &Census,
) -> Result<(), String> {
    let sizes = super::cluster_scale_sets(spec);
    let all = sizes.len().max(previous_sets);
    let mut mine = Vec::new();
    let mut taken = Vec::new();
    let mut prefixes = Vec::new();
    for i in 0..all {
        let id = scale_set_id(arm, group, &spec.name, i);
        let exists = arm.get(ctx, &id, COMPUTE_API).await?;
        // A set keeps the host-name prefix it was made with (ARM refuses to change it).
        let kept = exists.as_ref().and_then(|s| s.pointer("/properties/virtualMachineProfile/osProfile/computerNamePrefix")?.as_str());
        prefixes.push(kept.map_or_else(|| computer_name_prefix(&spec.name, i), str::to_owned));
        let ours = exists.as_ref().is_some_and(|s| census.admit(SCALE_SET, &super::api::short(&id), marker_in_json(&s["tags"]), None));
        if exists.is_some() && !ours {
            taken.push(format!("{}-{i}", spec.name));
        }
        mine.push(ours);
    }
    census.gate()?;
    if !taken.is_empty() {
        return Err(format!("scale set(s) {} belong to another owner and were left alone", taken.join(", ")));
    }
    let subnet = subnet_of(ctx, arm, group, &spec.fabric.name).await?;
    let mut tags = tags.clone();
    tags.insert("hpc:workload".into(), spec.workload.as_str().into());
    if spec.image.is_none() {
        tags.insert("hpc:default-image".into(), "true".into());
    }
    let tags = &tags;
    let puts = sizes.iter().enumerate().map(|(i, size)| {
        let id = scale_set_id(arm, group, &spec.name, i);
        let b = body(arm, spec, group, &subnet, *size, &prefixes[i], tags);
        async move { arm.put(ctx, &id, COMPUTE_API, &b, timeout).await.map(|_| ()) }
    });
    futures::future::try_join_all(puts).await?;
    let extra = (sizes.len()..all).filter(|i| mine[*i]).map(|i| {
        let id = scale_set_id(arm, group, &spec.name, i);
        async move { arm.delete(ctx, &id, COMPUTE_API, timeout).await }
    });
    futures::future::try_join_all(extra).await?;
    Ok(())
}

/// Deletes the cluster's scale sets the census admits.
pub async fn delete(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    cluster: &str,
    sets: usize,
    timeout: Duration,
    census: &Census,
) -> Result<(), String> {
    let mut ours = Vec::new();
    for i in 0..sets {
        let id = scale_set_id(arm, group, cluster, i);
        if own_set(ctx, arm, &id, census).await?.is_some() {
            ours.push(id);
        }
    }
    let deletes = ours.iter().map(|id| async move { arm.delete(ctx, id, COMPUTE_API, timeout).await });
    futures::future::try_join_all(deletes).await.map(|_| ())
}

/// The scale sets of a cluster that exist and the census admits, in order, with their VM counts (one GET
/// and one list each).
pub async fn scale_sets(ctx: &Context, arm: &Arm, group: &str, cluster: &str, census: &Census) -> Result<Vec<(Json, usize)>, String> {
    let mut out = Vec::new();
    loop {
        let id = scale_set_id(arm, group, cluster, out.len());
        let Some(set) = own_set(ctx, arm, &id, census).await? else { return Ok(out) };
        let vms = arm.list(ctx, &format!("{id}/virtualMachines"), COMPUTE_API).await?;
        out.push((set, vms.len()));
    }
}

/// The fabric a scale set belongs to, as the `fabric = hpc_gpu_fabric.x` object, from its security group.
pub async fn fabric_ref(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<crate::framework::Value, String> {
    use crate::framework::Value;
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg", arm.group_id(group));
    let nsg = arm.get(ctx, &nsg_id, NETWORK_API).await?.ok_or_else(|| format!("the fabric {fabric} no longer exists in {group}"))?;
    let tag = |k: &str| nsg["tags"][k].as_str().map_or(Value::Null, Value::from);
    Ok(Value::object([
        ("id", Value::from(super::api::resource_id(group, fabric))),
        ("cloud", Value::from("azure")),
        ("region", Value::from(nsg["location"].as_str().unwrap_or_default())),
        ("zone", tag("hpc:zone")),
        ("name", Value::from(fabric)),
        ("instance_type", tag("hpc:instance-type")),
        ("placement", tag("hpc:placement")),
    ]))
}

/// The configuration an import rebuilds from the scale sets.
pub async fn imported_config(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    cluster: &str,
    defaults: &BTreeMap<String, String>,
    census: &Census,
) -> Result<crate::framework::Value, String> {
    use crate::framework::Value;
    let sets = scale_sets(ctx, arm, group, cluster, census).await?;
    let Some((first, _)) = sets.first() else {
        return Err(format!("no cluster named {cluster:?} in {group}: no scale set {cluster}-0"));
    };
    let tags = super::api::tags_of(first);
    let fabric = tags.get("hpc:fabric").ok_or_else(|| format!("scale set {cluster}-0 has no hpc:fabric tag"))?;
    let profile = &first["properties"]["virtualMachineProfile"];
    let reservation = profile["capacityReservation"]["capacityReservationGroup"]["id"].as_str().map(str::to_owned);
    let capacity = match (profile["priority"].as_str(), &reservation) {
        (Some("Spot"), _) => "spot",
        (_, Some(_)) => "reservation",
        _ => "on-demand",
    };
    let image = if tags.contains_key("hpc:default-image") {
        None
    } else {
        let r = &profile["storageProfile"]["imageReference"];
        match r["id"].as_str() {
            Some(id) => Some(id.to_owned()),
            None => Some(format!(
                "{}:{}:{}:{}",
                r["publisher"].as_str().unwrap_or_default(),
                r["offer"].as_str().unwrap_or_default(),
                r["sku"].as_str().unwrap_or_default(),
                r["version"].as_str().unwrap_or_default()
            )),
        }
    };
    let os = &profile["osProfile"];
    // ARM does not return customData on real Azure; what the emulator or ARM gives back is used.
    let user_data = os["customData"]
        .as_str()
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let ssh = os["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].as_str().map(str::to_owned);
    Ok(Value::object([
        ("name", Value::from(cluster)),
        ("fabric", fabric_ref(ctx, arm, group, fabric).await?),
        ("node_count", Value::int(sets.iter().map(|(_, n)| *n as i64).sum())),
        ("capacity_type", Value::from(capacity)),
        ("reservation_id", Value::from(reservation)),
        ("image", Value::from(image)),
        ("user_data", Value::from(user_data)),
        ("ssh_public_key", Value::from(ssh)),
        ("workload", Value::from(tags.get("hpc:workload").cloned())),
        ("tags", super::api::imported_tags(&tags, defaults)),
    ]))
}
