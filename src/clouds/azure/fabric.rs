//! `hpc_gpu_fabric` on Azure: resource group (unless given), VNet and subnet (unless given), a network
//! security group on the subnet, and the proximity placement group. Every piece has a deterministic id;
//! the security group's tags record the fabric's configuration for imports. A refresh is one GET per piece.
//! Only pieces the census admits (their `hpc:owner` tag) are used, changed or deleted; the resource group
//! the fabric made is deleted only while nothing of another owner is in it.
//! The lifecycle's backend for this kind, `Backend<FabricSpec>` on `backend::Azure`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::api;
use super::api::{Arm, Write, same_id, short};
use super::backend::{self, arm};
use super::fabric;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{FabricSpec, Network, Placement};
use crate::ownership::{Census, marker_in_json};

pub const NETWORK_API: &str = "2026-03-01";
pub const COMPUTE_API: &str = "2026-04-01";
pub const GROUP_API: &str = "2025-04-01";

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

/// What exists of a fabric and is the census's.
#[derive(Debug, Default)]
pub struct FabricLive {
    /// The resource group exists (the fabric's own or the user's).
    pub group: bool,
    /// The resource group is one the fabric made, and this owner's.
    pub group_ours: bool,
    pub vnet: bool,
    pub subnet: Option<Json>,
    pub nsg: Option<Json>,
    pub ppg: bool,
    /// Pieces at the fabric's ids that another owner holds: never PUT over.
    pub taken: Vec<String>,
}

impl FabricLive {
    pub fn is_empty(&self) -> bool {
        !self.group_ours && !self.vnet && self.nsg.is_none() && !self.ppg
    }

    /// Whether the subnet carries the fabric's security group.
    pub fn associated(&self, ids: &Ids) -> bool {
        self.subnet.as_ref().and_then(|s| s["properties"]["networkSecurityGroup"]["id"].as_str()).is_some_and(|id| same_id(id, &ids.nsg))
    }
}

/// A piece read by id, kept when the census admits it; one another owner holds is noted in `taken`.
fn admitted(census: &Census, kind: &str, piece: Option<Json>, taken: &mut Vec<String>) -> Option<Json> {
    let piece = piece?;
    let id = short(piece["id"].as_str().unwrap_or_default());
    if census.admit(kind, &id, marker_in_json(&piece["tags"]), None) {
        return Some(piece);
    }
    taken.push(id);
    None
}

pub async fn observe(ctx: &Context, arm: &Arm, ids: &Ids, census: &Census) -> Result<FabricLive, CloudError> {
    let Some(group) = arm.get(ctx, &ids.group, GROUP_API).await? else {
        // Nothing of the fabric's own yet; a subnet given to it (in the user's group) is there all the same.
        let subnet = if ids.network_is_ours { None } else { arm.get(ctx, &ids.subnet, NETWORK_API).await? };
        return Ok(FabricLive { subnet, ..FabricLive::default() });
    };
    let mut taken = Vec::new();
    let group_ours = ids.group_is_ours && admitted(census, "azurerm_resource_group", Some(group), &mut taken).is_some();
    let vnet = ids.network_is_ours
        && admitted(census, "azurerm_virtual_network", arm.get(ctx, &ids.vnet, NETWORK_API).await?, &mut taken).is_some();
    // A created subnet is the VNet's; a given one is the user's, read to associate the security group.
    let subnet = if !ids.network_is_ours || vnet { arm.get(ctx, &ids.subnet, NETWORK_API).await? } else { None };
    let nsg = admitted(census, "azurerm_network_security_group", arm.get(ctx, &ids.nsg, NETWORK_API).await?, &mut taken);
    let ppg = match &ids.ppg {
        Some(id) => admitted(census, "azurerm_proximity_placement_group", arm.get(ctx, id, COMPUTE_API).await?, &mut taken).is_some(),
        None => false,
    };
    Ok(FabricLive { group: true, group_ours, vnet, subnet, nsg, ppg, taken })
}

/// The tags of the security group: the user's, ours, and what an import needs.
pub fn nsg_tags(spec: &FabricSpec, gpu: Option<&str>, tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    crate::clouds::recorded_config(spec, gpu, tags, ("hpc:vnet", "hpc:subnet"))
}

/// Creates what is missing and, when the tags changed, retags what exists. A create is create-only
/// (`If-None-Match: *`), so two states making the same names at the same moment cannot overwrite each other.
/// A retag goes through each resource's own UpdateTags or Update operation (PATCH `{"tags"}`), never a PUT:
/// a PUT replaces the whole resource, so one of the VNet without its subnets would delete them (or fail with
/// InUseSubnetCannotBeDeleted while the cluster's NICs are in it) and one of the security group without its
/// rules would drop rules added outside. A subnet is written back as it was read, with only its security
/// group set.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    arm: &Arm,
    spec: &FabricSpec,
    gpu: Option<&str>,
    tags: &BTreeMap<String, String>,
    retag: bool,
    timeout: Duration,
    census: &Census,
) -> Result<Ids, CloudError> {
    let ids = ids(arm, spec);
    let live = observe(ctx, arm, &ids, census).await?;
    census.gate()?;
    if !live.taken.is_empty() {
        return Err(format!("{} belong to another owner and were left alone", live.taken.join(", ")).into());
    }
    let location = &spec.region;
    let retagged = json!({"tags": tags});
    if !live.group {
        if !ids.group_is_ours {
            return Err(
                format!("resource group {} (resource_group) does not exist", spec.resource_group.as_deref().unwrap_or_default()).into()
            );
        }
        arm.put(ctx, &ids.group, GROUP_API, &json!({"location": location, "tags": tags}), Write::Create, timeout).await?;
    } else if retag && ids.group_is_ours {
        // ResourceGroups_Update.
        arm.patch(ctx, &ids.group, GROUP_API, &retagged, timeout).await?;
    }
    let nsg_tags = nsg_tags(spec, gpu, tags);
    if live.nsg.is_none() {
        let body = json!({"location": location, "tags": nsg_tags, "properties": {}});
        arm.put(ctx, &ids.nsg, NETWORK_API, &body, Write::Create, timeout).await?;
    } else if retag {
        // NetworkSecurityGroups_UpdateTags: the rules stay as they are.
        arm.patch(ctx, &ids.nsg, NETWORK_API, &json!({"tags": nsg_tags}), timeout).await?;
    }
    match &spec.network {
        Network::Create { cidr } => {
            if !live.vnet {
                let body = json!({"location": location, "tags": tags, "properties": {"addressSpace": {"addressPrefixes": [cidr]}}});
                arm.put(ctx, &ids.vnet, NETWORK_API, &body, Write::Create, timeout).await?;
            } else if retag {
                // VirtualNetworks_UpdateTags: the subnets stay as they are.
                arm.patch(ctx, &ids.vnet, NETWORK_API, &retagged, timeout).await?;
            }
            match &live.subnet {
                None => {
                    let body = json!({"properties": {"addressPrefix": crate::clouds::first_subnet(cidr),
                                                     "networkSecurityGroup": {"id": ids.nsg}}});
                    arm.put(ctx, &ids.subnet, NETWORK_API, &body, Write::Create, timeout).await?;
                }
                Some(_) if !live.associated(&ids) => set_security_group(ctx, arm, &ids, Some(&ids.nsg), timeout).await?,
                Some(_) => {}
            }
        }
        Network::Existing { subnet_id, .. } => {
            if live.subnet.is_none() {
                return Err(format!("subnet {subnet_id} (subnet_id) does not exist").into());
            }
            if !live.associated(&ids) {
                set_security_group(ctx, arm, &ids, Some(&ids.nsg), timeout).await?;
            }
        }
    }
    if let Some(ppg) = &ids.ppg {
        if !live.ppg {
            let mut body = json!({"location": location, "tags": tags, "properties": {"proximityPlacementGroupType": "Standard",
                                  "intent": {"vmSizes": [spec.sku.name]}}});
            if let Some(z) = &spec.zone {
                body["zones"] = json!([z]);
            }
            arm.put(ctx, ppg, COMPUTE_API, &body, Write::Create, timeout).await?;
        } else if retag {
            // ProximityPlacementGroups_Update.
            arm.patch(ctx, ppg, COMPUTE_API, &retagged, timeout).await?;
        }
    }
    Ok(ids)
}

/// Sets the subnet's security group to `nsg` (or takes ours off it, for None), the rest of the subnet as
/// it is: a read-modify-write under the subnet's etag ([`Arm::rewrite`]), so a change another writer makes to
/// the subnet meanwhile (a service endpoint, a route table, a delegation) is kept, not written over. A
/// subnet already as wanted is left alone; one that carries another security group by then keeps it when
/// ours is taken off.
async fn set_security_group(ctx: &Context, arm: &Arm, ids: &Ids, nsg: Option<&str>, timeout: Duration) -> Result<(), CloudError> {
    arm.rewrite(ctx, &ids.subnet, NETWORK_API, None, timeout, |found| {
        let current = found["properties"]["networkSecurityGroup"]["id"].as_str();
        let mut subnet = writable_subnet(found);
        match nsg {
            Some(id) if !current.is_some_and(|c| same_id(c, id)) => subnet["properties"]["networkSecurityGroup"] = json!({"id": id}),
            None if current.is_some_and(|c| same_id(c, &ids.nsg)) => {
                subnet["properties"].as_object_mut().map(|p| p.remove("networkSecurityGroup"));
            }
            _ => return None,
        }
        Some(subnet)
    })
    .await
}

/// A subnet as read, as a body to PUT back: all it holds but what ARM sets itself (the read-only fields of
/// azure-mgmt-network's `Subnet` and `SubnetPropertiesFormat`), so that the PUT, which replaces the whole
/// subnet, changes only what the caller then sets.
pub fn writable_subnet(found: &Json) -> Json {
    const READ_ONLY: [&str; 7] = [
        "ipConfigurationProfiles",
        "ipConfigurations",
        "privateEndpoints",
        "provisioningState",
        "purpose",
        "resourceNavigationLinks",
        "serviceAssociationLinks",
    ];
    let mut properties = found["properties"].as_object().cloned().unwrap_or_default();
    properties.retain(|k, _| !READ_ONLY.contains(&k.as_str()));
    let mut out = json!({"properties": properties});
    for k in ["id", "name"] {
        if let Some(v) = found.get(k) {
            out[k] = v.clone();
        }
    }
    out
}

/// Deletes what of the fabric is this owner's: its own resource group in one call while nothing of
/// another owner is in it, or its pieces one by one inside the user's group.
pub async fn delete(ctx: &Context, arm: &Arm, spec: &FabricSpec, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let ids = ids(arm, spec);
    let live = observe(ctx, arm, &ids, census).await?;
    if ids.group_is_ours {
        if !live.group_ours {
            return Ok(());
        }
        // Deleting a group deletes everything in it: only when all of it is this owner's.
        let held = arm.list(ctx, &format!("{}/resources", ids.group), GROUP_API).await?;
        let foreign: Vec<&Json> = held
            .iter()
            .filter(|r| {
                !census.admit(
                    r["type"].as_str().unwrap_or("resource"),
                    &short(r["id"].as_str().unwrap_or_default()),
                    marker_in_json(&r["tags"]),
                    None,
                )
            })
            .collect();
        if !foreign.is_empty() {
            let names: Vec<String> = foreign.iter().map(|r| short(r["id"].as_str().unwrap_or_default())).collect();
            return Err(format!(
                "resource group {} holds {} resource(s) of another owner ({}); deleting the group would delete them, so it was left as \
                 it is: delete them (or the configuration that made them) first, then destroy again",
                short(&ids.group),
                names.len(),
                names.join(", ")
            )
            .into());
        }
        return arm.delete(ctx, &ids.group, GROUP_API, timeout).await;
    }
    if live.ppg
        && let Some(ppg) = &ids.ppg
    {
        arm.delete(ctx, ppg, COMPUTE_API, timeout).await?;
    }
    if ids.network_is_ours {
        if live.vnet {
            arm.delete(ctx, &ids.vnet, NETWORK_API, timeout).await?;
        }
    } else if live.nsg.is_some() && live.associated(&ids) {
        // Leave the user's subnet as it was found: without our security group.
        set_security_group(ctx, arm, &ids, None, timeout).await?;
    }
    if live.nsg.is_some() {
        arm.delete(ctx, &ids.nsg, NETWORK_API, timeout).await?;
    }
    Ok(())
}

/// Which planned pieces exist, by kind, for the refreshed expansion.
pub fn present(live: &FabricLive, ids: &Ids) -> impl Fn(&str) -> bool {
    let (group, vnet, subnet, nsg, assoc, ppg) =
        (live.group_ours, live.vnet, live.subnet.is_some(), live.nsg.is_some(), live.associated(ids), live.ppg);
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
) -> Result<Value, CloudError> {
    let tags = super::api::tags_of(nsg);
    let region = nsg["location"].as_str().unwrap_or_default();
    let group = if given_group { Value::from(group) } else { Value::Null };
    crate::clouds::config_from_record(
        crate::catalog::Cloud::Azure,
        name,
        region,
        &tags,
        ("hpc:vnet", "hpc:subnet"),
        &[("resource_group", group)],
        defaults,
    )
    .map_err(CloudError::from)
}

#[async_trait]
impl Backend<FabricSpec> for backend::Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        api::connect(ctx).await.map(|_| ())
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&fabric::group_name(&spec.name, spec.resource_group.as_deref()), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let ids = fabric::ids(&arm, spec);
        let mut state = change.state.clone();
        if let Network::Create { .. } = &spec.network {
            state = shared::with_attr(&state, "vpc_id", Value::from(ids.vnet.as_str()));
            state = shared::with_attr(&state, "subnet_id", Value::from(ids.subnet.as_str()));
        }
        let gpu = change.config.get("gpu").as_str();
        let done = fabric::converge(step.ctx, &arm, spec, gpu, change.tags, change.retag(), step.timeout, step.census).await;
        // The state is the planned one whether or not the fabric is complete: what was made stays in it.
        Outcome { state, error: done.err() }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, spec: Option<&FabricSpec>) -> Outcome {
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let Some(spec) = spec else {
            return Outcome::failed(prior.clone(), "its state does not describe a fabric this provider can read");
        };
        let done = fabric::delete(step.ctx, &arm, spec, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&FabricSpec>) -> Result<Option<Value>, CloudError> {
        let Some(spec) = spec else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let ids = fabric::ids(&arm, spec);
        let live = fabric::observe(step.ctx, &arm, &ids, step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        Ok(Some(shared::with_missing(state, fabric::present(&live, &ids))))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure fabric id: give \"azure/<resource group>/<fabric name>\", e.g. \"azure/train-rg/train\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::failed)?;
        let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{name}-nsg", arm.group_id(group));
        let config = match arm.get(step.ctx, &nsg_id, fabric::NETWORK_API).await {
            Ok(Some(nsg)) => {
                step.census.admit(
                    "azurerm_network_security_group",
                    &format!("{name}-nsg"),
                    crate::ownership::marker_in_json(&nsg["tags"]),
                    None,
                );
                let ours = group == format!("{name}-rg");
                fabric::imported_config(group, name, &nsg, !ours, step.default_tags)
            }
            Ok(None) => Err(format!("no fabric named {name:?} in resource group {group}: no security group {name}-nsg").into()),
            Err(e) => Err(e),
        }
        .map_err(ImportError::failed)?;
        let assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        // A fabric with a Slurm cluster: its join, key included, as its nodes carry it (never made anew).
        let join = slurm_join_of(step.ctx, &arm, group, name).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, assigned).with_slurm_join(join))
    }

    /// A network the fabric created has the ids its names give.
    async fn imported(&self, step: &Step<'_>, spec: &FabricSpec, found: &mut Imported) -> Result<(), ImportError> {
        if let Network::Create { .. } = &spec.network {
            let arm = arm(step.ctx).await.map_err(ImportError::failed)?;
            let ids = fabric::ids(&arm, spec);
            found.assigned.insert("vpc_id".into(), Value::from(ids.vnet.as_str()));
            found.assigned.insert("subnet_id".into(), Value::from(ids.subnet.as_str()));
        }
        Ok(())
    }
}

/// The Slurm join the fabric's GPU nodes boot with, from their scale sets' model (`customData`; ARM gives it
/// back where it does, not on Azure itself, whose answers leave it out): one list of the group's scale sets;
/// null without one.
async fn slurm_join_of(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<Value, CloudError> {
    use base64::Engine;
    let sets = arm.list(ctx, &format!("{}/providers/Microsoft.Compute/virtualMachineScaleSets", arm.group_id(group)), COMPUTE_API).await?;
    Ok(sets
        .iter()
        .filter(|s| s["tags"]["hpc:fabric"].as_str() == Some(fabric))
        .map(|s| {
            let data = s["properties"]["virtualMachineProfile"]["osProfile"]["customData"]
                .as_str()
                .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                .and_then(|b| String::from_utf8(b).ok());
            crate::clouds::slurm::join_value(data.as_deref())
        })
        .find(Value::is_present)
        .unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnet_is_put_back_with_what_it_holds_less_what_arm_sets() {
        let found = serde_json::json!({
            "id": "/s/vnet/subnets/a", "name": "a", "type": "Microsoft.Network/virtualNetworks/subnets", "etag": "W/\"1\"",
            "properties": {"addressPrefix": "10.0.0.0/24", "serviceEndpoints": [{"service": "Microsoft.Storage"}],
                           "routeTable": {"id": "/s/rt"}, "provisioningState": "Succeeded", "ipConfigurations": [{"id": "/s/nic/ip"}],
                           "purpose": "x"},
        });
        let body = writable_subnet(&found);
        assert_eq!(
            body,
            serde_json::json!({"id": "/s/vnet/subnets/a", "name": "a",
                               "properties": {"addressPrefix": "10.0.0.0/24", "serviceEndpoints": [{"service": "Microsoft.Storage"}],
                                              "routeTable": {"id": "/s/rt"}}})
        );
    }

    #[test]
    fn any_security_group_or_subnet_answer_imports_without_a_panic() {
        use crate::fuzz::{answers, check};
        let nsg = serde_json::json!({"location": "eastus", "tags": {"hpc:instance-type": "Standard_ND96isr_H100_v5", "hpc:placement": "cluster",
                                     "hpc:cidr": "10.0.0.0/16", "hpc:vnet": "v", "hpc:subnet": "s", "hpc:owner": "o-1", "team": "ml"}});
        let subnet = serde_json::json!({"id": "/s/vnet/subnets/a", "name": "a", "properties": {"addressPrefix": "10.0.0.0/24"}});
        check("imported_config", answers(vec![nsg, subnet]), |found| {
            let _ = (fabric::imported_config("rg", "train", &found, true, &BTreeMap::new()), writable_subnet(&found));
            Ok(())
        });
    }

    #[test]
    fn an_imported_fabric_keeps_a_user_tag_named_name() {
        let nsg = serde_json::json!({
            "location": "eastus",
            "tags": {"hpc:instance-type": "Standard_ND96isr_H100_v5", "hpc:placement": "cluster", "hpc:cidr": "10.0.0.0/16",
                     "hpc:owner": "o-1", "hpc:fabric": "train", "Name": "x", "team": "ml", "env": "prod"},
        });
        let defaults = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let config = fabric::imported_config("train-rg", "train", &nsg, false, &defaults).unwrap();
        let tags = config.get("tags");
        assert_eq!(tags.get("Name").as_str(), Some("x"), "{tags:?}");
        assert_eq!(tags.get("team").as_str(), Some("ml"));
        assert!(tags.get("env").is_null() && tags.get("hpc:owner").is_null(), "defaults and the provider's keys are left out: {tags:?}");
    }
}
