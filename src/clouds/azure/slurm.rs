//! `hpc_slurm_cluster` on Azure: a subnet of its own in the fabric's virtual network (the network's last
//! /28, with the fabric's security group), and for each controller and login node a network interface (the
//! controllers' at their fixed addresses) and a Linux VM, set up by its first boot (custom data,
//! `clouds::slurm::setup_script`) and carrying their Slurm configuration in their `userData` (rewritten by a
//! PATCH when it changes; the tag `hpc:slurm-config` names its revision), all in the fabric's resource
//! group. The interfaces and VMs carry
//! `hpc:slurm` and the owner's marker; the subnet (which has no tags) is this cluster's while its
//! interfaces are in it. Every create is create-only (`If-None-Match: *`); only the census's pieces are
//! changed or deleted, and the fabric's are only read.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{Value as Json, json};

use super::api::{self, Arm, Write, same_id};
use super::backend::{self, arm, group_of, group_place, unknown_fabric, unknown_fabric_summary};
use super::fabric::{COMPUTE_API, NETWORK_API};
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::clouds::slurm::{Role, channel, setup_script, slurm_config};
use crate::framework::{Context, Value};
use crate::model::SlurmPlan;
use crate::model::SlurmSpec;
use crate::ownership::{Census, marker_in_json};

/// The user the VMs' SSH key is installed for.
const ADMIN: &str = "azureuser";

struct Ids {
    vnet: String,
    subnet: String,
    nsg: String,
}

fn ids(arm: &Arm, group: &str, spec_name: &str, fabric: &str) -> Ids {
    let g = arm.group_id(group);
    let vnet = format!("{g}/providers/Microsoft.Network/virtualNetworks/{fabric}-vpc");
    Ids {
        subnet: format!("{vnet}/subnets/{spec_name}-control"),
        vnet,
        nsg: format!("{g}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg"),
    }
}

fn nic_id(arm: &Arm, group: &str, host: &str) -> String {
    format!("{}/providers/Microsoft.Network/networkInterfaces/{host}-nic", arm.group_id(group))
}

fn vm_id(arm: &Arm, group: &str, host: &str) -> String {
    format!("{}/providers/Microsoft.Compute/virtualMachines/{host}", arm.group_id(group))
}

/// What exists: the subnet, and each host's interface and VM that the census admits.
#[derive(Default)]
struct SlurmLive {
    subnet: Option<Json>,
    nics: BTreeMap<String, Json>,
    vms: BTreeMap<String, Json>,
}

impl SlurmLive {
    fn is_empty(&self) -> bool {
        self.nics.is_empty() && self.vms.is_empty()
    }
}

async fn observe(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    state_hosts: &[String],
    ids: &Ids,
    census: &Census,
) -> Result<SlurmLive, CloudError> {
    let mut live = SlurmLive { subnet: arm.get(ctx, &ids.subnet, NETWORK_API).await?, ..Default::default() };
    for host in state_hosts {
        let admit = |kind: &str, piece: &str, r: &Json| census.admit(kind, piece, marker_in_json(&r["tags"]), None);
        if let Some(nic) = arm.get(ctx, &nic_id(arm, group, host), NETWORK_API).await?
            && admit("azurerm_network_interface", &format!("{host}-nic"), &nic)
        {
            live.nics.insert(host.clone(), nic);
        }
        if let Some(vm) = arm.get(ctx, &vm_id(arm, group, host), COMPUTE_API).await?
            && admit("azurerm_linux_virtual_machine", host, &vm)
        {
            live.vms.insert(host.clone(), vm);
        }
    }
    Ok(live)
}

fn image_reference(image: Option<&str>) -> Json {
    let image = image.unwrap_or(super::cluster::DEFAULT_IMAGE);
    match image.split(':').collect::<Vec<_>>()[..] {
        [publisher, offer, sku, version] if !image.starts_with('/') => {
            json!({"publisher": publisher, "offer": offer, "sku": sku, "version": version})
        }
        _ => json!({"id": image}),
    }
}

#[allow(clippy::too_many_arguments)]
async fn converge(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    spec: &SlurmSpec,
    plan: &SlurmPlan,
    tags: &BTreeMap<String, String>,
    retag: bool,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let ids = ids(arm, group, &spec.name, &spec.fabric.name);
    let hosts: Vec<String> = plan.controllers.iter().map(|(h, _)| h.clone()).chain(plan.logins.iter().cloned()).collect();
    let live = observe(ctx, arm, group, &hosts, &ids, census).await?;
    census.gate()?;
    let vnet = arm.get(ctx, &ids.vnet, NETWORK_API).await?.ok_or_else(|| {
        CloudError::other(format!("fabric {} has no virtual network {}-vpc: apply the fabric first", spec.fabric.name, spec.fabric.name))
    })?;
    let location = vnet["location"].as_str().unwrap_or(&spec.fabric.region).to_owned();
    if live.subnet.is_none() {
        let body = json!({"properties": {"addressPrefix": plan.control_subnet, "networkSecurityGroup": {"id": ids.nsg}}});
        arm.put(ctx, &ids.subnet, NETWORK_API, &body, Write::Create, timeout).await?;
    }
    let Some(key) = &spec.ssh_public_key else {
        return Err(CloudError::other("an Azure Linux VM needs ssh_public_key (password login is off)"));
    };
    let config = slurm_config(plan, spec.key.as_ref().map(|k| k.expose_str()));
    let mut vm_tags = tags.clone();
    vm_tags.insert(channel::AZURE_TAG.into(), config.revision.clone());
    // The VMs that exist and carry another configuration, or whose tags changed: one PATCH each of their userData
    // (which their sync program reads from the instance metadata service) and their tags with the revision (a
    // PATCH replaces the tags); changed tags also a PATCH of each interface's.
    for (host, vm) in &live.vms {
        let stale = vm["tags"][channel::AZURE_TAG].as_str() != Some(config.revision.as_str());
        if !stale && !retag {
            continue;
        }
        let mut body = json!({"tags": vm_tags});
        if stale {
            body["properties"] = json!({"userData": config.payload});
        }
        arm.patch(ctx, &vm_id(arm, group, host), COMPUTE_API, &body, timeout)
            .await
            .map_err(|e| e.context(format!("writing Slurm configuration {} and tags to {host}", config.revision)))?;
    }
    if retag {
        for host in live.nics.keys() {
            arm.patch(ctx, &nic_id(arm, group, host), NETWORK_API, &json!({"tags": tags}), timeout).await?;
        }
    }
    let mut wanted: Vec<(String, Role, Option<String>, &str)> =
        plan.controllers.iter().map(|(h, a)| (h.clone(), Role::Controller, Some(a.clone()), spec.controller_type.as_str())).collect();
    wanted.extend(plan.logins.iter().map(|h| (h.clone(), Role::Login, None, spec.login_type.as_str())));
    for (host, role, address, size) in wanted {
        let nic = nic_id(arm, group, &host);
        if !live.nics.contains_key(&host) {
            let mut ip = json!({"subnet": {"id": ids.subnet}, "privateIPAllocationMethod": "Dynamic", "primary": true});
            if let Some(a) = &address {
                ip["privateIPAllocationMethod"] = json!("Static");
                ip["privateIPAddress"] = json!(a);
            }
            let body =
                json!({"location": location, "tags": tags, "properties": {"ipConfigurations": [{"name": "ipconfig", "properties": ip}]}});
            arm.put(ctx, &nic, NETWORK_API, &body, Write::Create, timeout).await?;
        }
        if live.vms.contains_key(&host) {
            continue;
        }
        let script = setup_script(spec, role, &host, spec.key.as_ref().map(|k| k.expose_str()));
        let body = json!({
            "location": location,
            "tags": vm_tags,
            "properties": {
                "userData": config.payload,
                "hardwareProfile": {"vmSize": size},
                "storageProfile": {"imageReference": image_reference(spec.image.as_deref()), "osDisk": {"createOption": "FromImage", "caching": "ReadWrite"}},
                "osProfile": {
                    "computerName": host,
                    "adminUsername": ADMIN,
                    "customData": base64::engine::general_purpose::STANDARD.encode(&script),
                    "linuxConfiguration": {"disablePasswordAuthentication": true,
                        "ssh": {"publicKeys": [{"path": format!("/home/{ADMIN}/.ssh/authorized_keys"), "keyData": key.trim()}]}},
                },
                "networkProfile": {"networkInterfaces": [{"id": nic, "properties": {"primary": true}}]},
            },
        });
        arm.put(ctx, &vm_id(arm, group, &host), COMPUTE_API, &body, Write::Create, timeout).await?;
    }
    Ok(())
}

async fn delete(ctx: &Context, arm: &Arm, group: &str, state: &Value, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let name = state.get("name").as_str().unwrap_or_default();
    let fabric = state.get("fabric").get("name").as_str().unwrap_or_default();
    let ids = ids(arm, group, name, fabric);
    let (controllers, logins) = shared::slurm_hosts(state);
    let hosts: Vec<String> = controllers.into_iter().chain(logins).collect();
    let live = observe(ctx, arm, group, &hosts, &ids, census).await?;
    // The subnet is this cluster's when one of its interfaces is in it (a subnet has no tags).
    let ours = live.subnet.is_some()
        && live.nics.values().any(|n| {
            n["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str().is_some_and(|s| same_id(s, &ids.subnet))
        });
    for host in live.vms.keys() {
        arm.delete(ctx, &vm_id(arm, group, host), COMPUTE_API, timeout).await?;
    }
    for host in live.nics.keys() {
        arm.delete(ctx, &nic_id(arm, group, host), NETWORK_API, timeout).await?;
    }
    if ours {
        arm.delete(ctx, &ids.subnet, NETWORK_API, timeout).await?;
    }
    Ok(())
}

/// An imported Slurm cluster's resource group (its fabric, which says it otherwise, is filled by the first
/// plan): its id's.
fn imported_group(state: &Value) -> Option<String> {
    state.get("id").as_str().and_then(api::parse_id).map(|(g, _)| g.to_owned())
}

fn with_live(state: &Value, live: &SlurmLive) -> Value {
    let address = |host: &str| {
        live.nics
            .get(host)
            .and_then(|n| n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"].as_str())
            .map(str::to_owned)
    };
    let exists = |kind: &str, piece: &str| match kind {
        "azurerm_subnet" => live.subnet.is_some(),
        "azurerm_network_interface" => live.nics.contains_key(piece.trim_end_matches("-nic")),
        _ => live.vms.contains_key(piece),
    };
    let revision = |host: &str| live.vms.get(host).map(|vm| vm["tags"][channel::AZURE_TAG].as_str().map(str::to_owned));
    shared::slurm_state(state, ADMIN, exists, shared::SlurmHostsLive { address: &address, revision: &revision })
}

#[async_trait]
impl Backend<SlurmSpec> for backend::Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        arm(ctx).await.map(|_| ())
    }

    fn id(&self, _spec: &SlurmSpec) -> Option<String> {
        // The resource group is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    fn place(&self, v: &Value) -> String {
        group_place(v)
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        unknown_fabric_summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, SlurmSpec>) -> Outcome {
        let Some(group) = group_of(change.planned) else { return Outcome::failed(change.prior.clone(), unknown_fabric()) };
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let spec = change.spec;
        let id = api::resource_id(&group, &spec.name);
        step.census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        let Some(plan) = SlurmPlan::from_state(change.planned) else {
            return Outcome::failed(change.prior.clone(), CloudError::other("the plan does not say the Slurm configuration"));
        };
        let done = converge(step.ctx, &arm, &group, spec, &plan, change.tags, change.retag(), step.timeout, step.census).await;
        let ids = ids(&arm, &group, &spec.name, &spec.fabric.name);
        let hosts: Vec<String> = plan.controllers.iter().map(|(h, _)| h.clone()).chain(plan.logins.iter().cloned()).collect();
        let state = match observe(step.ctx, &arm, &group, &hosts, &ids, step.census).await {
            Ok(live) => with_live(&state, &live),
            Err(_) => state,
        };
        Outcome::of(done, state.clone(), || state)
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&SlurmSpec>) -> Outcome {
        let Some(group) = group_of(prior).or_else(|| imported_group(prior)) else {
            return Outcome::failed(prior.clone(), unknown_fabric());
        };
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        Outcome::of(delete(step.ctx, &arm, &group, prior, step.timeout, step.census).await, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&SlurmSpec>) -> Result<Option<Value>, CloudError> {
        let Some(group) = group_of(state).or_else(|| imported_group(state)) else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let name = state.get("name").as_str().unwrap_or_default();
        let ids = ids(&arm, &group, name, state.get("fabric").get("name").as_str().unwrap_or_default());
        let (controllers, logins) = shared::slurm_hosts(state);
        let hosts: Vec<String> = controllers.into_iter().chain(logins).collect();
        let live = observe(step.ctx, &arm, &group, &hosts, &ids, step.census).await?;
        Ok((!live.is_empty()).then(|| with_live(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure Slurm cluster id: give \"azure/<resource group>/<Slurm cluster name>\", e.g. \"azure/train-rg/ml\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::failed)?;
        // One list of the group's VMs, those tagged with the cluster and admitted; then the controller's userData,
        // which only a get with $expand=userData gives.
        let url = format!("{}/providers/Microsoft.Compute/virtualMachines", arm.group_id(group));
        let vms = arm.list(step.ctx, &url, COMPUTE_API).await.map_err(ImportError::failed)?;
        let mut hosts = Vec::new();
        for vm in vms {
            let host = vm["name"].as_str().unwrap_or_default().to_owned();
            if vm["tags"]["hpc:slurm"].as_str() != Some(name)
                || !step.census.admit("azurerm_linux_virtual_machine", &host, marker_in_json(&vm["tags"]), None)
            {
                continue;
            }
            let tags =
                vm["tags"].as_object().into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect();
            let size = vm["properties"]["hardwareProfile"]["vmSize"].as_str().unwrap_or_default().to_owned();
            let key = vm["properties"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].as_str().map(str::to_owned);
            hosts.push(shared::SlurmHostFound { host, instance_type: size, tags, ssh_public_key: key });
        }
        let controller = vm_id(&arm, group, &crate::nodes::controller_name(name, 0));
        let payload =
            match arm.send(step.ctx, reqwest::Method::GET, &format!("{controller}?$expand=userData&api-version={COMPUTE_API}"), None).await
            {
                Ok(reply) if reply.status == 200 => reply.body["properties"]["userData"].as_str().map(str::to_owned),
                Ok(_) => None,
                Err(e) => return Err(ImportError::failed(e)),
            };
        // The region is the VMs' location.
        let region = match arm.get(step.ctx, &controller, COMPUTE_API).await {
            Ok(Some(vm)) => vm["location"].as_str().unwrap_or_default().to_owned(),
            _ => String::new(),
        };
        shared::slurm_imported(crate::catalog::Cloud::Azure, id, &region, name, &hosts, payload.as_deref(), step.default_tags)
    }
}
