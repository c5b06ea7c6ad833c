//! `hpc_gpu_fabric` on Azure: resource group (unless given), VNet and subnet (unless given), a network
//! security group on the subnet, and the proximity placement group. Every piece has a deterministic id;
//! the security group's tags record the fabric's configuration for imports. A refresh is one GET per piece.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::api::{Arm, same_id};
use crate::framework::{Context, Value};
use crate::planner::{FabricSpec, Network, Placement};

pub const NETWORK_API: &str = "2024-05-01";
pub const COMPUTE_API: &str = "2024-07-01";
pub const GROUP_API: &str = "2021-04-01";

/// The ids of a fabric's pieces.
pub struct Ids {
    pub group: String,
    pub group_is_ours: bool,
    pub vnet: String,
    pub subnet: String,
    pub network_is_ours: bool,
    pub nsg: String,
    pub ppg: Option<String>,
}

pub fn group_name(spec_name: &str, given: Option<&str>) -> String {
    given.map_or_else(|| format!("{spec_name}-rg"), str::to_owned)
}

pub fn ids(arm: &Arm, spec: &FabricSpec) -> Ids {
    let n = &spec.name;
    let group = arm.group_id(&group_name(n, spec.resource_group.as_deref()));
    let (vnet, subnet, ours) = match &spec.network {
        Network::Existing { vpc_id, subnet_id } => (vpc_id.clone(), subnet_id.clone(), false),
        Network::Create { .. } => {
            let vnet = format!("{group}/providers/Microsoft.Network/virtualNetworks/{n}-vpc");
            let subnet = format!("{vnet}/subnets/{n}-subnet");
            (vnet, subnet, true)
        }
    };
    Ids {
        nsg: format!("{group}/providers/Microsoft.Network/networkSecurityGroups/{n}-nsg"),
        ppg: (spec.placement == Placement::Cluster)
            .then(|| format!("{group}/providers/Microsoft.Compute/proximityPlacementGroups/{n}-ppg")),
        group,
        group_is_ours: spec.resource_group.is_none(),
        vnet,
        subnet,
        network_is_ours: ours,
    }
}

/// What exists of a fabric.
#[derive(Debug, Default)]
pub struct FabricLive {
    pub group: bool,
    pub vnet: bool,
    pub subnet: Option<Json>,
    pub nsg: Option<Json>,
    pub ppg: bool,
}

impl FabricLive {
    pub fn is_empty(&self) -> bool {
        !self.group && !self.vnet && self.nsg.is_none() && !self.ppg
    }

    /// Whether the subnet carries the fabric's security group.
    pub fn associated(&self, ids: &Ids) -> bool {
        self.subnet.as_ref().and_then(|s| s["properties"]["networkSecurityGroup"]["id"].as_str()).is_some_and(|id| same_id(id, &ids.nsg))
    }
}

pub async fn observe(ctx: &Context, arm: &Arm, ids: &Ids) -> Result<FabricLive, String> {
    let group = arm.get(ctx, &ids.group, GROUP_API).await?.is_some();
    if !group {
        return Ok(FabricLive::default());
    }
    Ok(FabricLive {
        group,
        vnet: arm.get(ctx, &ids.vnet, NETWORK_API).await?.is_some(),
        subnet: arm.get(ctx, &ids.subnet, NETWORK_API).await?,
        nsg: arm.get(ctx, &ids.nsg, NETWORK_API).await?,
        ppg: match &ids.ppg {
            Some(id) => arm.get(ctx, id, COMPUTE_API).await?.is_some(),
            None => false,
        },
    })
}

/// The tags of the security group: the user's, ours, and what an import needs.
pub fn nsg_tags(spec: &FabricSpec, gpu: Option<&str>, tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    crate::clouds::recorded_config(spec, gpu, tags, ("hpc:vnet", "hpc:subnet"))
}

/// Creates what is missing; on an update, brings tags up to date (PUT is idempotent in ARM).
pub async fn converge(
    ctx: &Context,
    arm: &Arm,
    spec: &FabricSpec,
    gpu: Option<&str>,
    tags: &BTreeMap<String, String>,
    retag: bool,
    timeout: Duration,
) -> Result<Ids, String> {
    let ids = ids(arm, spec);
    let live = observe(ctx, arm, &ids).await?;
    let location = &spec.region;
    if !live.group {
        if !ids.group_is_ours {
            return Err(format!("resource group {} (resource_group) does not exist", spec.resource_group.as_deref().unwrap_or_default()));
        }
        arm.put(ctx, &ids.group, GROUP_API, &json!({"location": location, "tags": tags}), timeout).await?;
    } else if retag && ids.group_is_ours {
        arm.put(ctx, &ids.group, GROUP_API, &json!({"location": location, "tags": tags}), timeout).await?;
    }
    let nsg_body = json!({"location": location, "tags": nsg_tags(spec, gpu, tags), "properties": {}});
    if live.nsg.is_none() || retag {
        arm.put(ctx, &ids.nsg, NETWORK_API, &nsg_body, timeout).await?;
    }
    match &spec.network {
        Network::Create { cidr } => {
            if !live.vnet || retag {
                let body = json!({"location": location, "tags": tags, "properties": {"addressSpace": {"addressPrefixes": [cidr]}}});
                arm.put(ctx, &ids.vnet, NETWORK_API, &body, timeout).await?;
            }
            if live.subnet.is_none() || !live.associated(&ids) {
                let body =
                    json!({"properties": {"addressPrefix": crate::clouds::first_subnet(cidr), "networkSecurityGroup": {"id": ids.nsg}}});
                arm.put(ctx, &ids.subnet, NETWORK_API, &body, timeout).await?;
            }
        }
        Network::Existing { subnet_id, .. } => {
            let Some(mut subnet) = live.subnet.clone() else { return Err(format!("subnet {subnet_id} (subnet_id) does not exist")) };
            if !live.associated(&ids) {
                subnet["properties"]["networkSecurityGroup"] = json!({"id": ids.nsg});
                arm.put(ctx, &ids.subnet, NETWORK_API, &subnet, timeout).await?;
            }
        }
    }
    if let Some(ppg) = &ids.ppg
        && (!live.ppg || retag)
    {
        let mut body = json!({"location": location, "tags": tags, "properties": {"proximityPlacementGroupType": "Standard",
                              "intent": {"vmSizes": [spec.sku.name]}}});
        if let Some(z) = &spec.zone {
            body["zones"] = json!([z]);
        }
        arm.put(ctx, ppg, COMPUTE_API, &body, timeout).await?;
    }
    Ok(ids)
}

/// Deletes the fabric: its own resource group in one call, or its pieces inside the user's group.
pub async fn delete(ctx: &Context, arm: &Arm, spec: &FabricSpec, timeout: Duration) -> Result<(), String> {
    let ids = ids(arm, spec);
    if ids.group_is_ours {
        return arm.delete(ctx, &ids.group, GROUP_API, timeout).await;
    }
    if let Some(ppg) = &ids.ppg {
        arm.delete(ctx, ppg, COMPUTE_API, timeout).await?;
    }
    if ids.network_is_ours {
        arm.delete(ctx, &ids.vnet, NETWORK_API, timeout).await?;
    } else if let Some(mut subnet) = arm.get(ctx, &ids.subnet, NETWORK_API).await? {
        // Leave the user's subnet as it was found: without our security group.
        if subnet["properties"]["networkSecurityGroup"]["id"].as_str().is_some_and(|id| same_id(id, &ids.nsg)) {
            subnet["properties"].as_object_mut().map(|p| p.remove("networkSecurityGroup"));
            arm.put(ctx, &ids.subnet, NETWORK_API, &subnet, timeout).await?;
        }
    }
    arm.delete(ctx, &ids.nsg, NETWORK_API, timeout).await
}

/// Which planned pieces exist, by kind, for the refreshed expansion.
pub fn present(live: &FabricLive, ids: &Ids) -> impl Fn(&str) -> bool {
    let (group, vnet, subnet, nsg, assoc, ppg) =
        (live.group, live.vnet, live.subnet.is_some(), live.nsg.is_some(), live.associated(ids), live.ppg);
    move |kind: &str| match kind {
        "azurerm_resource_group" => group,
        "azurerm_virtual_network" => vnet,
        "azurerm_subnet" => subnet,
        "azurerm_network_security_group" => nsg,
        "azurerm_subnet_network_security_group_association" => assoc,
        "azurerm_proximity_placement_group" => ppg,
        _ => true,
    }
}

/// The configuration an import rebuilds from the security group's tags.
pub fn imported_config(
    group: &str,
    name: &str,
    nsg: &Json,
    given_group: bool,
    defaults: &BTreeMap<String, String>,
) -> Result<Value, String> {
    let tags: BTreeMap<String, String> = nsg["tags"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let get = |k: &str| tags.get(k).map_or(Value::Null, |v| Value::from(v.as_str()));
    let instance_type = tags.get("hpc:instance-type").ok_or_else(|| format!("security group {name}-nsg has no hpc:instance-type tag"))?;
    let user = crate::clouds::aws::api::user_tags(&tags, defaults);
    Ok(Value::object([
        ("name", Value::from(name)),
        ("cloud", Value::from("azure")),
        ("region", Value::from(nsg["location"].as_str().unwrap_or_default())),
        ("zone", get("hpc:zone")),
        ("gpu", get("hpc:gpu")),
        ("instance_type", Value::from(instance_type.as_str())),
        ("vpc_id", get("hpc:vnet")),
        ("subnet_id", get("hpc:subnet")),
        ("cidr_block", get("hpc:cidr")),
        ("placement", get("hpc:placement")),
        ("resource_group", if given_group { Value::from(group) } else { Value::Null }),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]))
}
