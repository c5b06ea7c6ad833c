//! `hpc_gpu_cluster` on Azure: Uniform VM scale sets of ND-series VMs with InfiniBand (single placement
//! group, one fault domain, no overprovisioning, manual upgrades) in the fabric's proximity placement
//! group, at most 100 VMs each (`<cluster>-0`, `<cluster>-1`, ... as the plan showed). A refresh lists
//! each scale set's VMs (with their instance views) and their network interfaces with one call each per
//! scale set. A scale set is the cluster's only when its `hpc:owner` tag is this owner's: another owner's
//! same-named scale set is never resized, retagged or deleted.
//!
//! Names. Azure numbers a scale set's VMs itself and never reuses an instance id, so the provider names
//! each VM itself and keeps the names on its scale set (`hpc:nodes`, see [`super::node_names`]), read with
//! the set: scale set `j` holds nodes `first(j) ..` of the planned split. An apply names the VMs it makes
//! (a grow's, a repair's) with the lowest free names of their set and writes each its name into its own
//! `userData` (`VirtualMachineScaleSetVMs_Update`), where the node's Slurm join reads it through the
//! instance metadata service; a shrink deletes the VMs named highest. A VM no name is kept for (made
//! outside) shows as `<scale set>_<instance id>`, and the next apply deletes it. A scale set an earlier
//! release made, without the tag, is named by position until an apply writes it.
//!
//! Day 2. Nodes are remade in place under their names: the scale set model is brought to the spec, then
//! the named VMs get `manualupgrade` and `reimage` (and `redeploy` first, off their host, when the cloud or
//! their self-check says they are broken), and their names are written into their userData again. Health
//! comes from each VM's instance view: provisioning and power states, a scheduled maintenance, and the
//! Application Health extension every scale set runs, which probes the node's self-check on
//! `http://localhost:<SELFCHECK_PORT><SELFCHECK_PATH>` (Rich Health States; the verdict travels in its
//! `customMetrics`). Azure keeps no tags on a scale set's VMs (its tag support table: "No" for
//! `virtualMachineScaleSets/virtualMachines`), so the revision a node runs is the scale set model's
//! (`hpc:revision` on the scale set) when the VM has the latest model applied.
//! The lifecycle's backend for this kind, `Backend<ClusterSpec>` and `ClusterBackend` on `backend::Azure`, comes last, before the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{Value as Json, json};

use super::api;
use super::api::{Arm, Write};
use super::backend::{self, arm, group_of, group_place, unknown_fabric, unknown_fabric_summary};
use super::fabric::{COMPUTE_API, NETWORK_API};
use super::node_names::{self, NodeMap};
use super::{cluster, fabric, quota};
use crate::catalog::Cloud;
use crate::clouds::NodeAddress;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared;
use crate::framework::Context;
use crate::framework::Value;
use crate::model::{CapacityType, ClusterSpec, Placement};
use crate::nodes::{node_index, node_name};
use crate::ownership::{Census, marker_in_json};

/// The Azure HPC image (Ubuntu 22.04 with the InfiniBand and GPU drivers) used when a cluster sets none.
pub const DEFAULT_IMAGE: &str = "microsoft-dsvm:ubuntu-hpc:2204:latest";

/// The name of a cluster's scale set `index`: `<cluster>-<index>`, numbered apart from its nodes (scale set 1
/// of a cluster of 300 VMs holds nodes `<cluster>-100` ..).
pub fn scale_set_name(cluster: &str, index: usize) -> String {
    format!("{cluster}-{index}")
}

pub fn scale_set_id(arm: &Arm, group: &str, cluster: &str, index: usize) -> String {
    format!("{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}", arm.group_id(group), scale_set_name(cluster, index))
}

/// The resource group a fabric lives in, from its id (`azure/<group>/<name>`).
pub fn group_of_fabric(fabric_id: &str) -> Option<String> {
    super::api::parse_id(fabric_id).map(|(g, _)| g.to_owned())
}

/// The API version of the scale-set network interface operations (Microsoft.Network serves them at
/// 2018-10-01, under the scale set's Microsoft.Compute path).
pub const VMSS_NIC_API: &str = "2018-10-01";

/// The Application Health extension every scale set's model carries: it probes the node's self-check on
/// `http://localhost:SELFCHECK_PORT SELFCHECK_PATH`, which answers Rich Health States
/// (`{"ApplicationHealthState": "Healthy" | "Unhealthy", "customMetrics": "{\"hpcSelfcheck\": \"<verdict>\"}"}`).
pub const HEALTH_EXTENSION: &str = "hpc-health";
pub const SELFCHECK_PORT: u16 = 8477;
pub const SELFCHECK_PATH: &str = "/hpc-selfcheck";
/// The key of the self-check's verdict in the probe answer's `customMetrics`.
pub const SELFCHECK_METRIC: &str = "hpcSelfcheck";
/// How long the extension reports `Initializing` after a boot before it gives up on an answer (`Unknown`):
/// the self-check waits up to 300 s for the devices, after the OS and drivers are up.
pub const HEALTH_GRACE_SECONDS: u64 = 1200;
/// The scale set tag of the model's revision before the current one: what its VMs not yet upgraded run.
pub const PREVIOUS_REVISION_TAG: &str = "hpc:previous-revision";
/// Set on a scale set while some of its VMs are being remade, and cleared when they are done: until then a
/// VM with the latest model applied may not have been reimaged, and runs what the state says.
pub const REMAKING_TAG: &str = "hpc:remaking";
/// The revision shown for a VM that is not on its scale set's model when nothing says which one it runs.
pub const UNKNOWN_REVISION: &str = "unknown";

/// A live VM of a scale set: its resource id, its primary NIC's private address, and what its instance view
/// says (see [`condition`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Vm {
    pub id: String,
    pub private_ip: Option<String>,
    pub instance_id: String,
    /// `latestModelApplied`: it runs the scale set's current model.
    pub latest: bool,
    pub condition: Condition,
}

/// What a VM's instance view says of it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Condition {
    /// Why the cloud holds it unhealthy, with the time it gives.
    pub health: Option<String>,
    /// The maintenance Azure has scheduled on its host, with the window: reported, not repaired, unless
    /// `on_maintenance` asks (then a remake redeploys it off the host).
    pub maintenance: Option<String>,
    /// The verdict its self-check published through the Application Health extension.
    pub selfcheck: Option<String>,
    /// `PowerState/<power>`: running, stopped, deallocated, starting, ...
    pub power: Option<String>,
    /// Whether provisioning is done (`ProvisioningState/succeeded`).
    pub provisioned: bool,
    /// Its host is the trouble (failed provisioning, a scheduled maintenance, an unhealthy or failing node):
    /// a repair moves it off it (`redeploy`).
    pub broken: bool,
}

impl Condition {
    pub fn running(&self) -> bool {
        self.power.as_deref() == Some("running")
    }

    /// Stopped or deallocated: only `start` brings it back.
    pub fn stopped(&self) -> bool {
        matches!(self.power.as_deref(), Some("stopped" | "deallocated"))
    }
}

/// A scale set of the cluster as it is: the revisions its tags record and its VMs in instance-id order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SetLive {
    /// `hpc:revision`: the revision of its model (none on a scale set an earlier release made).
    pub revision: Option<String>,
    /// `hpc:previous-revision`: the model's revision before.
    pub previous: Option<String>,
    /// `hpc:remaking`: VMs of it are being remade.
    pub remaking: bool,
    /// `hpc:nodes`: which node each VM is (None for a set made before the provider kept it: by position).
    pub map: Option<NodeMap>,
    pub vms: Vec<Vm>,
}

/// A verdict as the self-check publishes it: lowercase letters, digits and `-`, at most 63 characters.
fn verdict(v: &str) -> Option<String> {
    let ok = !v.is_empty() && v.len() <= 63 && v.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    ok.then(|| v.to_owned())
}

/// What a VM's instance view (VirtualMachineScaleSetVMInstanceView) says: provisioning failed
/// (`ProvisioningState/failed/<code>`), the power state (`PowerState/stopped`, `deallocated`), a scheduled
/// maintenance (`maintenanceRedeployStatus`), and the Application Health extension's state (`vmHealth`,
/// `HealthState/<state>`) with the self-check's verdict in the extension's `CustomMetrics` substatus.
pub fn condition(view: &Json) -> Condition {
    let since = |s: &Json| s["time"].as_str().map(|t| format!(" since {}", crate::clock::utc_minute(t))).unwrap_or_default();
    let mut out = Condition::default();
    let mut failed = None;
    for s in view["statuses"].as_array().into_iter().flatten() {
        let code = s["code"].as_str().unwrap_or_default();
        let lower = code.to_ascii_lowercase();
        if let Some(power) = lower.strip_prefix("powerstate/") {
            out.power = Some(power.to_owned());
        } else if lower == "provisioningstate/succeeded" {
            out.provisioned = true;
        } else if lower.starts_with("provisioningstate/failed") {
            let why = code.splitn(3, '/').nth(2).map(|c| format!(" ({c})")).unwrap_or_default();
            failed = Some(format!("provisioning failed{why}{}", since(s)));
        }
    }
    let stopped = match out.power.as_deref() {
        Some(p @ ("stopped" | "deallocated")) => Some(format!("VM {p}")),
        _ => None,
    };
    let m = &view["maintenanceRedeployStatus"];
    let completed = m["lastOperationResultCode"].as_str().is_some_and(|c| c.eq_ignore_ascii_case("MaintenanceCompleted"));
    let window = m["maintenanceWindowStartTime"].as_str().or(m["preMaintenanceWindowStartTime"].as_str());
    let end = m["maintenanceWindowEndTime"].as_str().map(|t| format!(" to {}", crate::clock::utc_minute(t))).unwrap_or_default();
    let maintenance = window.filter(|_| !completed).map(|t| format!("scheduled for maintenance from {}{end}", crate::clock::utc_minute(t)));
    let health = &view["vmHealth"]["status"];
    let state = health["code"].as_str().and_then(|c| c.strip_prefix("HealthState/")).map(str::to_ascii_lowercase);
    let published = view["extensions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.contains("ApplicationHealth")))
        .flat_map(|e| e["substatuses"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["code"].as_str().is_some_and(|c| c.to_ascii_lowercase().contains("/custommetrics/")))
        .find_map(|s| serde_json::from_str::<Json>(s["message"].as_str()?).ok()?[SELFCHECK_METRIC].as_str().and_then(verdict));
    out.selfcheck = match state.as_deref() {
        Some("healthy") => Some(published.clone().unwrap_or_else(|| "ok".into())),
        Some("unhealthy") => published.clone(),
        // Initializing (the node has not answered since it booted) or Unknown: no verdict yet.
        _ => None,
    };
    // Unhealthy without a verdict of the self-check's: the extension's own word, with its time.
    let unhealthy = (state.as_deref() == Some("unhealthy") && published.is_none())
        .then(|| format!("Application Health extension reports the node unhealthy{}", since(health)));
    let failing = out.selfcheck.as_deref().is_some_and(|v| v.starts_with("fail"));
    out.broken = failed.is_some() || maintenance.is_some() || unhealthy.is_some() || failing;
    out.health = failed.or(stopped).or(unhealthy);
    out.maintenance = maintenance.filter(|_| out.health.is_none());
    out
}

/// A scale set of the cluster, read by id, if it exists and the census admits it.
async fn own_set(ctx: &Context, arm: &Arm, id: &str, census: &Census) -> Result<Option<Json>, CloudError> {
    let set = arm.get(ctx, id, COMPUTE_API).await?;
    Ok(set.filter(|s| census.admit(SCALE_SET, &super::api::short(id), marker_in_json(&s["tags"]), None)))
}

/// The node piece of a cluster's expansion: one scale set.
pub const SCALE_SET: &str = "azurerm_linux_virtual_machine_scale_set";

/// A scale set as it is, from its resource (tags) and its VMs listed with their instance views.
fn set_live(set: &Json, vms: &[Json], nics: &[Json]) -> SetLive {
    let mut vms: Vec<&Json> = vms.iter().collect();
    vms.sort_by_key(|vm| vm["instanceId"].as_str().and_then(|i| i.parse::<u64>().ok()).unwrap_or(u64::MAX));
    let address_of = |vm_id: &str| {
        nics.iter()
            .filter(|n| n["properties"]["virtualMachine"]["id"].as_str().is_some_and(|v| v.eq_ignore_ascii_case(vm_id)))
            .flat_map(|n| n["properties"]["ipConfigurations"].as_array().cloned().unwrap_or_default())
            .find(|c| c["properties"]["primary"].as_bool() != Some(false))
            .and_then(|c| c["properties"]["privateIPAddress"].as_str().map(str::to_owned))
    };
    let tag = |k: &str| set["tags"][k].as_str().map(str::to_owned);
    SetLive {
        revision: tag(crate::clouds::shared::REVISION_TAG),
        previous: tag(PREVIOUS_REVISION_TAG),
        remaking: tag(REMAKING_TAG).is_some(),
        map: NodeMap::from_tags(&super::api::tags_of(set)),
        vms: vms
            .iter()
            .filter_map(|vm| {
                let id = vm["id"].as_str()?;
                Some(Vm {
                    id: id.to_owned(),
                    private_ip: address_of(id),
                    instance_id: vm["instanceId"].as_str().unwrap_or_default().to_owned(),
                    latest: vm["properties"]["latestModelApplied"].as_bool() != Some(false),
                    condition: condition(&vm["properties"]["instanceView"]),
                })
            })
            .collect(),
    }
}

/// The VMs of a scale set with their instance views (one call, whatever their number).
async fn list_vms(ctx: &Context, arm: &Arm, set_id: &str) -> Result<Vec<Json>, CloudError> {
    arm.list(ctx, &format!("{set_id}/virtualMachines?$expand=instanceView"), COMPUTE_API).await
}

/// Each scale set as it is, in scale-set order; `None` for a scale set that does not exist or is not the
/// census's. Per scale set: one read, one VM list (with instance views), one NIC list.
pub async fn observe(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    cluster: &str,
    sets: usize,
    census: &Census,
) -> Result<Vec<Option<SetLive>>, CloudError> {
    let mut out = Vec::new();
    for i in 0..sets {
        let id = scale_set_id(arm, group, cluster, i);
        let Some(set) = own_set(ctx, arm, &id, census).await? else {
            out.push(None);
            continue;
        };
        let vms = list_vms(ctx, arm, &id).await?;
        let nics = arm.list(ctx, &format!("{id}/networkInterfaces"), VMSS_NIC_API).await?;
        out.push(Some(set_live(&set, &vms, &nics)));
    }
    Ok(out)
}

/// The revision a VM runs: its scale set model's when it has the latest model applied (and no remake of
/// the set was left unfinished); else what `known` (the state's `node_revisions`) says, or the model's
/// previous revision, or [`UNKNOWN_REVISION`]. A VM off the model that the state says runs the model's
/// revision keeps it: the model changed in something the revision does not cover (the health extension,
/// a change made outside), not in what the node was made from. `None` for a scale set an earlier release
/// made (no revision recorded).
fn revision_of(set: &SetLive, vm: &Vm, known: Option<&str>) -> Option<String> {
    let model = set.revision.as_deref()?;
    if vm.latest {
        let trusted = if set.remaking { known.unwrap_or(model) } else { model };
        return Some(trusted.to_owned());
    }
    Some(known.or(set.previous.as_deref().filter(|p| *p != model)).unwrap_or(UNKNOWN_REVISION).to_owned())
}

/// A VM's instance id as a number (None for one ARM gave no number).
fn instance_of(vm: &Vm) -> Option<u64> {
    vm.instance_id.parse().ok()
}

/// The instance ids of a VM list as ARM gives it, in order.
fn listed_ids(vms: &[Json]) -> Vec<u64> {
    let mut ids: Vec<u64> = vms.iter().filter_map(|vm| vm["instanceId"].as_str()?.parse().ok()).collect();
    ids.sort_unstable();
    ids
}

/// The first node of each scale set of a split (`sizes`), and the range of nodes each holds.
fn ranges(sizes: &[u32]) -> Vec<Range<u32>> {
    let mut first = 0u32;
    sizes
        .iter()
        .map(|size| {
            let range = first..first.saturating_add(*size);
            first = range.end;
            range
        })
        .collect()
}

/// Every VM of the scale sets that exist with its node name, set by set: the names its set's map keeps
/// (in node order), then the VMs the map does not name under their Azure names (`<scale set>_<instance
/// id>`). A set without a map (made by an earlier release) names its first `size` VMs by position, in
/// instance-id order, as that release did.
fn named_vms<'a>(cluster: &str, sizes: &[u32], live: &'a [Option<SetLive>]) -> Vec<(usize, &'a Vm, String)> {
    let mut out = Vec::new();
    for (j, range) in ranges(sizes).into_iter().enumerate() {
        let Some(set) = live.get(j).and_then(Option::as_ref) else { continue };
        let azure_name = |vm: &Vm| format!("{}_{}", scale_set_name(cluster, j), vm.instance_id);
        let map = set.map.clone().unwrap_or_else(|| {
            let ids: Vec<u64> = set.vms.iter().filter_map(instance_of).collect();
            NodeMap::by_position(&ids, range.start, range.end - range.start)
        });
        let mut named: Vec<(u32, &Vm)> = Vec::new();
        let mut unnamed: Vec<&Vm> = Vec::new();
        for vm in &set.vms {
            match instance_of(vm).and_then(|i| map.get(i)) {
                Some(index) => named.push((index, vm)),
                None => unnamed.push(vm),
            }
        }
        named.sort_by_key(|(index, _)| *index);
        out.extend(named.into_iter().map(|(index, vm)| (j, vm, node_name(cluster, index))));
        out.extend(unnamed.into_iter().map(|vm| (j, vm, azure_name(vm))));
    }
    out
}

/// The nodes for what exists (see [`named_vms`]): a VM missing from a set shows as its node missing, and
/// no other node's name moves. A VM no name is kept for (the set grown outside) is a node of its own under
/// its Azure name (`<scale set>_<instance id>`): the next plan shows it going, and the apply deletes it by
/// id, with no other node renamed. `known` is the state's `node_revisions`.
pub fn nodes(cluster: &str, sizes: &[u32], live: &[Option<SetLive>], known: &crate::framework::Value) -> Vec<NodeAddress> {
    named_vms(cluster, sizes, live)
        .into_iter()
        .filter_map(|(j, vm, name)| {
            let set = live.get(j)?.as_ref()?;
            Some(NodeAddress {
                revision: revision_of(set, vm, known.get(&name).as_str()),
                health: vm.condition.health.clone(),
                maintenance: vm.condition.maintenance.clone(),
                selfcheck: vm.condition.selfcheck.clone(),
                name,
                id: vm.id.clone(),
                private_ip: vm.private_ip.clone(),
            })
        })
        .collect()
}

/// The named nodes among what exists, by scale set: `(set index, the scale set's VMs that are named, with
/// their names)`.
fn named<'a>(cluster: &str, sizes: &[u32], live: &'a [Option<SetLive>], names: &[String]) -> Vec<(usize, Vec<(&'a Vm, String)>)> {
    let mut out: Vec<(usize, Vec<(&'a Vm, String)>)> = Vec::new();
    for (j, vm, name) in named_vms(cluster, sizes, live) {
        if !names.contains(&name) {
            continue;
        }
        match out.last_mut() {
            Some((set, vms)) if *set == j => vms.push((vm, name)),
            _ => out.push((j, vec![(vm, name)])),
        }
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
pub(super) async fn subnet_of(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<String, CloudError> {
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg", arm.group_id(group));
    let nsg = arm
        .get(ctx, &nsg_id, NETWORK_API)
        .await?
        .ok_or_else(|| CloudError::other(format!("fabric {fabric} has no security group in {group}: apply the fabric first")))?;
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

/// The Application Health extension of a scale set model (Rich Health States over HTTP, see
/// [`HEALTH_EXTENSION`]).
fn health_extension() -> Json {
    json!({"name": HEALTH_EXTENSION, "properties": {
        "publisher": "Microsoft.ManagedServices", "type": "ApplicationHealthLinux", "typeHandlerVersion": "2.0",
        "autoUpgradeMinorVersion": true,
        "settings": {"protocol": "http", "port": SELFCHECK_PORT, "requestPath": SELFCHECK_PATH, "intervalInSeconds": 30,
                     "numberOfProbes": 1, "gracePeriod": HEALTH_GRACE_SECONDS}}})
}

/// A scale set's size as ARM gives it (`sku.capacity`), or `listed` (its VMs) when it gives none. A
/// capacity past u32 is an error: `as` made 4,294,967,297 a size of 1, and the PUT that followed would have
/// scaled the set in to one VM.
fn capacity_of(set: &Json, listed: usize) -> Result<u32, CloudError> {
    match &set["sku"]["capacity"] {
        Json::Null => Ok(u32::try_from(listed).unwrap_or(u32::MAX)),
        c => c
            .as_u64()
            .and_then(|c| u32::try_from(c).ok())
            .ok_or_else(|| CloudError::other(format!("the scale set's capacity {c} is not a size"))),
    }
}

/// Whether a scale set's model runs the Application Health extension.
fn has_health_extension(set: &Json) -> bool {
    let extensions = set.pointer("/properties/virtualMachineProfile/extensionProfile/extensions").and_then(Json::as_array);
    extensions.into_iter().flatten().any(|e| e["properties"]["type"].as_str().is_some_and(|t| t.starts_with("ApplicationHealth")))
}

/// What a scale set PUT does with the `hpc:remaking` marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Remake {
    /// As it is (a converge: an unfinished remake stays marked until a remake finishes).
    Keep,
    /// VMs of the set are about to be remade.
    Begin,
    /// They are done.
    End,
}

/// A scale set's PUT, from the spec and the scale set as it is (`None` for one to make): its host-name
/// prefix kept (Azure never changes it), `tags` (the user's, the owner's and the provider's own) with the
/// model's revision in `hpc:revision` and the one before in `hpc:previous-revision`, and `hpc:remaking`
/// as `remake` says. The Application Health extension goes into every new model,
/// and into an existing one only when the model changes anyway: added alone, it would leave every VM off
/// the latest model.
#[allow(clippy::too_many_arguments)]
fn set_body(
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    subnet: &str,
    index: usize,
    size: u32,
    existing: Option<&Json>,
    tags: &BTreeMap<String, String>,
    remake: Remake,
) -> Json {
    use crate::clouds::shared::REVISION_TAG;
    let kept = existing.and_then(|s| s.pointer("/properties/virtualMachineProfile/osProfile/computerNamePrefix")?.as_str());
    let prefix = kept.map_or_else(|| computer_name_prefix(&spec.name, index), str::to_owned);
    let revision = spec.revision();
    let live_tag = |k: &str| existing.and_then(|s| s["tags"][k].as_str()).map(str::to_owned);
    let before = live_tag(REVISION_TAG);
    let mut tags = tags.clone();
    tags.insert("hpc:workload".into(), spec.workload.as_str().into());
    if spec.image.is_none() {
        tags.insert("hpc:default-image".into(), "true".into());
    } else {
        tags.remove("hpc:default-image");
    }
    tags.insert(REVISION_TAG.into(), revision.clone());
    let previous = match before.as_deref() {
        Some(b) if b != revision => Some(b.to_owned()),
        _ => live_tag(PREVIOUS_REVISION_TAG),
    };
    match previous {
        Some(p) => tags.insert(PREVIOUS_REVISION_TAG.into(), p),
        None => tags.remove(PREVIOUS_REVISION_TAG),
    };
    let marker = match remake {
        Remake::Keep => live_tag(REMAKING_TAG),
        Remake::Begin => Some(revision.clone()),
        Remake::End => None,
    };
    match marker {
        Some(r) => tags.insert(REMAKING_TAG.into(), r),
        None => tags.remove(REMAKING_TAG),
    };
    // The names of its VMs stay as the set holds them: a PUT replaces the tags whole.
    tags.retain(|k, _| !node_names::is_map_tag(k));
    if let Some(set) = existing {
        tags.extend(super::api::tags_of(set).into_iter().filter(|(k, _)| node_names::is_map_tag(k)));
    }
    let changes = before.as_deref().is_some_and(|b| b != revision);
    let health = existing.is_none_or(|s| has_health_extension(s) || changes);
    body(arm, spec, group, subnet, size, &prefix, &tags, health)
}

/// A scale set's body. `prefix` is its host-name prefix: Azure never changes it after the set is made.
/// Every VM of every set boots the same custom data: it learns its node name from its own userData.
#[allow(clippy::too_many_arguments)]
fn body(
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    subnet: &str,
    size: u32,
    prefix: &str,
    tags: &BTreeMap<String, String>,
    health: bool,
) -> Json {
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
    if let Some(u) = crate::clouds::slurm::node_user_data(spec, 0) {
        os["customData"] = json!(base64::engine::general_purpose::STANDARD.encode(u.expose()));
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
    if health {
        profile["extensionProfile"] = json!({"extensions": [health_extension()]});
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
/// another owner stops the create before anything is made, and is never PUT or deleted. Before a running
/// set is written, the VMs that are no node of its planned range go (see [`sort_out`]); after the writes,
/// the VMs they made are named and told their names ([`name_vms`]), whether the writes succeeded or not
/// (an allocation failure leaves the VMs that were placed, and those are nodes).
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
) -> Result<(), CloudError> {
    let sizes = super::cluster_scale_sets(spec);
    let all = sizes.len().max(previous_sets);
    let mut mine = Vec::new();
    let mut taken = Vec::new();
    let mut existing = Vec::new();
    let mut shrunk = vec![false; all];
    for i in 0..all {
        let id = scale_set_id(arm, group, &spec.name, i);
        let exists = arm.get(ctx, &id, COMPUTE_API).await?;
        let ours = exists.as_ref().is_some_and(|s| census.admit(SCALE_SET, &super::api::short(&id), marker_in_json(&s["tags"]), None));
        if exists.is_some() && !ours {
            taken.push(scale_set_name(&spec.name, i));
        }
        mine.push(ours);
        existing.push(exists);
    }
    census.gate()?;
    if !taken.is_empty() {
        return Err(format!("scale set(s) {} belong to another owner and were left alone", taken.join(", ")).into());
    }
    // A shrink removes the nodes the plan named, the highest ones, and a VM that is no node goes too: each
    // deleted by id before any set is resized. Lowering the capacity alone would leave the choice to the
    // scale set's scale-in policy, which knows nothing of the names.
    // The capacity each set has once they are gone: what a PUT expects to find.
    let mut expected: Vec<u64> = existing.iter().map(|s| s.as_ref().and_then(|s| s["sku"]["capacity"].as_u64()).unwrap_or(0)).collect();
    let ranges = ranges(&sizes);
    let mut kept: Vec<Option<Kept>> = vec![None; sizes.len()];
    for (i, range) in ranges.iter().enumerate() {
        let Some(set) = existing[i].as_ref().filter(|_| mine[i]) else { continue };
        let id = scale_set_id(arm, group, &spec.name, i);
        let listed = listed_ids(&arm.list(ctx, &format!("{id}/virtualMachines"), COMPUTE_API).await?);
        let map = NodeMap::from_tags(&super::api::tags_of(set));
        // A VM the map does not name may have been named by an apply stopped before it wrote the map: its
        // own userData says so (read for those VMs alone, which are normally none).
        let mut said = BTreeMap::new();
        for vm in listed.iter().filter(|vm| map.as_ref().is_some_and(|m| m.get(**vm).is_none())) {
            if let Some(name) =
                vm_user_data(ctx, arm, &format!("{id}/virtualMachines/{vm}")).await?.as_deref().and_then(node_names::name_in_user_data)
            {
                said.insert(*vm, name);
            }
        }
        let (stays, doomed) = sort_out(&spec.name, map.as_ref(), &listed, range.clone(), &said);
        if !doomed.is_empty() {
            let doomed: Vec<String> = doomed.iter().map(u64::to_string).collect();
            act(ctx, arm, &id, "delete", json!({"instanceIds": doomed}), timeout).await?;
            expected[i] = expected[i].saturating_sub(doomed.len() as u64);
            // Its etag changed with its capacity: the PUT below reads it again.
            existing[i].take();
            shrunk[i] = true;
        }
        kept[i] = Some(Kept { listed: listed.into_iter().collect(), ..stays });
    }
    let subnet = subnet_of(ctx, arm, group, &spec.fabric.name).await?;
    let subnet = &subnet;
    let puts = sizes.iter().enumerate().map(|(i, size)| {
        let id = scale_set_id(arm, group, &spec.name, i);
        let (found, expected, runs) = (existing[i].clone(), expected[i], existing[i].is_some() || shrunk[i]);
        async move {
            if !runs {
                // A scale set found missing is created create-only: another state's made meanwhile is not PUT over.
                let b = set_body(arm, spec, group, subnet, i, *size, None, tags, Remake::Keep);
                return arm.put(ctx, &id, COMPUTE_API, &b, Write::Create, timeout).await.map(|_| ());
            }
            // One that runs is written as read, under its etag, so a change made to it meanwhile is read
            // again rather than written over; and a PUT never takes VMs away: a set grown since it was read
            // (by another writer, after this plan was made) keeps its capacity, and the next plan shows the
            // VMs it added. Only the deletes above, by instance id, remove VMs.
            let body = |set: &Json| {
                let live = set["sku"]["capacity"].as_u64().unwrap_or(0);
                let size = if live > expected { u32::try_from(live).unwrap_or(u32::MAX).max(*size) } else { *size };
                Some(set_body(arm, spec, group, subnet, i, size, Some(set), tags, Remake::Keep))
            };
            arm.rewrite(ctx, &id, COMPUTE_API, found, timeout, body).await
        }
    });
    // Every scale set's operation is followed to its end, a failed one too: what came is what the caller
    // observes next (an allocation failure leaves the VMs that were placed).
    let mut failures: Vec<CloudError> = futures::future::join_all(puts).await.into_iter().filter_map(Result::err).collect();
    let naming =
        kept.into_iter().enumerate().map(|(i, before)| name_vms(ctx, arm, spec, group, i, ranges[i].clone(), before, timeout, census));
    failures.extend(futures::future::join_all(naming).await.into_iter().filter_map(Result::err));
    // One error for all of them, of the kind of the first shortage (else of the first failure).
    if let Some(first) = failures.iter().find(|e| e.capacity_code().is_some()).or(failures.first()) {
        let text = failures.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("; ");
        return Err(first.clone().map_message(|_| text));
    }
    let extra = (sizes.len()..all).filter(|i| mine[*i]).map(|i| {
        let id = scale_set_id(arm, group, &spec.name, i);
        async move { arm.delete(ctx, &id, COMPUTE_API, timeout).await }
    });
    futures::future::try_join_all(extra).await?;
    Ok(())
}

/// What a running scale set keeps of its VMs, as sorted out before a converge writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Kept {
    /// Every VM it listed then: a VM not among them was made by the converge.
    listed: BTreeSet<u64>,
    /// The VMs that stay, under their names.
    map: NodeMap,
    /// The ones among them named now (a set an earlier release made names its VMs by position), which
    /// learn their names from their userData once the converge writes it.
    fresh: Vec<u64>,
}

/// Which of a running scale set's VMs (`listed`, instance ids) stay under which names, and which go, given
/// the set's map (None for a set made before the provider kept one) and the nodes its planned split gives
/// it (`range`): a named VM past the range goes (a shrink takes the highest names); a VM the map does not
/// name goes too, unless its own userData (`said`, read for those VMs alone) names it a free node of the
/// range, which an apply stopped before it wrote the map did. A set without a map keeps its first VMs by
/// position, in instance-id order, as many as the range holds, as the earlier release named them.
fn sort_out(cluster: &str, map: Option<&NodeMap>, listed: &[u64], range: Range<u32>, said: &BTreeMap<u64, String>) -> (Kept, Vec<u64>) {
    let (stays, fresh) = match map {
        None => {
            let stays = NodeMap::by_position(listed, range.start, range.end - range.start);
            let fresh = stays.iter().map(|(vm, _)| vm).collect();
            (stays, fresh)
        }
        Some(map) => {
            let mut stays = map.clone();
            stays.retain(|vm, index| listed.contains(&vm) && range.contains(&index));
            for vm in listed.iter().filter(|vm| map.get(**vm).is_none()) {
                let claim = said.get(vm).and_then(|name| node_index(cluster, name));
                if let Some(index) = claim.filter(|k| range.contains(k) && !stays.holds(*k)) {
                    stays.insert(*vm, index);
                }
            }
            (stays, Vec::new())
        }
    };
    let doomed = listed.iter().copied().filter(|vm| stays.get(*vm).is_none()).collect();
    (Kept { listed: BTreeSet::new(), map: stays, fresh }, doomed)
}

/// A scale-set VM's own `userData` (`$expand=userData`: a VM list never carries it); None when it has
/// none or is gone.
async fn vm_user_data(ctx: &Context, arm: &Arm, vm_id: &str) -> Result<Option<String>, CloudError> {
    let reply = arm.send(ctx, reqwest::Method::GET, &format!("{vm_id}?$expand=userData&api-version={COMPUTE_API}"), None).await?;
    match reply.status {
        200 => Ok(reply.body["properties"]["userData"].as_str().filter(|u| !u.is_empty()).map(str::to_owned)),
        404 => Ok(None),
        _ => Err(reply.failure(&format!("reading {}", super::api::short(vm_id)))),
    }
}

/// How many VMs are told their names at once.
const NAMING_AT_ONCE: usize = 16;

/// Writes node `name` into the VM's own `userData` (`VirtualMachineScaleSetVMs_Update`), where the node
/// reads it through the instance metadata service; the VM keeps running.
async fn write_name(ctx: &Context, arm: &Arm, vm_id: &str, location: &str, name: &str, timeout: Duration) -> Result<(), CloudError> {
    let body = json!({"location": location, "properties": {"userData": node_names::user_data(name)}});
    arm.update(ctx, reqwest::Method::PUT, vm_id, COMPUTE_API, &body, None, timeout)
        .await
        .map_err(|e| e.context(format!("telling node {name} its name (the userData of {})", super::api::short(vm_id))))
}

/// Writes each named VM's name into its userData, a few at a time: the VMs that could not be told.
async fn tell_names(ctx: &Context, arm: &Arm, location: &str, vms: Vec<(String, String)>, timeout: Duration) -> Vec<(String, CloudError)> {
    use futures::stream::StreamExt;
    futures::stream::iter(vms)
        .map(|(vm_id, name)| async move { write_name(ctx, arm, &vm_id, location, &name, timeout).await.err().map(|e| (vm_id, e)) })
        .buffer_unordered(NAMING_AT_ONCE)
        .filter_map(|failed| async move { failed })
        .collect()
        .await
}

/// After a converge's writes, scale set `index` (if it is the census's): the VMs that stay keep their
/// names (`before`, None for a set made now), each VM made since takes the lowest free node of `range`
/// (a repaired node gets back the name of the one it replaces) and is told its name, and the set's map is
/// written (its tags alone, under its etag) when it changed. A VM made meanwhile for which no node is free
/// (the set grown outside) stays unnamed; one that could not be told its name is left out of the map, so
/// the next apply deletes it and makes another.
#[allow(clippy::too_many_arguments)]
async fn name_vms(
    ctx: &Context,
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    index: usize,
    range: Range<u32>,
    before: Option<Kept>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let id = scale_set_id(arm, group, &spec.name, index);
    let Some(set) = own_set(ctx, arm, &id, census).await? else { return Ok(()) };
    let live = listed_ids(&arm.list(ctx, &format!("{id}/virtualMachines"), COMPUTE_API).await?);
    let Kept { listed, mut map, mut fresh } = before.unwrap_or_default();
    map.retain(|vm, _| live.contains(&vm));
    fresh.retain(|vm| map.get(*vm).is_some());
    let made: Vec<u64> = live.iter().copied().filter(|vm| !listed.contains(vm)).collect();
    let new: Vec<u64> = map.assign(&made, range).into_iter().map(|(vm, _)| vm).collect();
    fresh.extend(&new);
    let told: Vec<(String, String)> =
        fresh.iter().filter_map(|vm| Some((format!("{id}/virtualMachines/{vm}"), node_name(&spec.name, map.get(*vm)?)))).collect();
    let failed = tell_names(ctx, arm, &spec.fabric.region, told, timeout).await;
    // A new VM that was not told is no node yet (an earlier release's VMs stay what they were).
    for vm in new.iter().filter(|vm| failed.iter().any(|(vm_id, _)| vm_id.ends_with(&format!("/virtualMachines/{vm}")))) {
        map.remove(*vm);
    }
    let written = |found: &Json| {
        let tags = super::api::tags_of(found);
        (NodeMap::from_tags(&tags).as_ref() != Some(&map)).then(|| map.into_tags(&tags))
    };
    if written(&set).is_some() {
        arm.retag(ctx, &id, COMPUTE_API, Some(set), timeout, written).await?;
    }
    match failed.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Deletes the named nodes for good (`release_nodes`: what a launch gave that the capacity policy does not
/// keep): each scale set holding some deletes them by instance id (VirtualMachineScaleSets_DeleteInstances,
/// which lowers the set's capacity with them), followed to the operation's end, so they are released only
/// once ARM says so. A node is otherwise never deleted on Azure (see [`remake`]); this is the scale set's own
/// way of undoing a scale-out.
pub async fn release(
    ctx: &Context,
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let (sizes, live) = observe_spec(ctx, arm, spec, group, census).await?;
    let jobs = named(&spec.name, &sizes, &live, names).into_iter().map(|(j, vms)| async move {
        let id = scale_set_id(arm, group, &spec.name, j);
        let gone: Vec<String> = vms.iter().map(|(vm, _)| vm.instance_id.clone()).collect();
        act(ctx, arm, &id, "delete", json!({"instanceIds": gone}), timeout).await?;
        // The names of the VMs that went are free again.
        let freed = |found: &Json| {
            let tags = super::api::tags_of(found);
            let mut map = NodeMap::from_tags(&tags)?;
            let before = map.clone();
            map.retain(|vm, _| !gone.contains(&vm.to_string()));
            (map != before).then(|| map.into_tags(&tags))
        };
        arm.retag(ctx, &id, COMPUTE_API, None, timeout, freed).await
    });
    futures::future::try_join_all(jobs).await.map(|_| ())
}

/// The cluster's scale sets as they are, by the spec's split (the census's only).
async fn observe_spec(
    ctx: &Context,
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    census: &Census,
) -> Result<(Vec<u32>, Vec<Option<SetLive>>), CloudError> {
    let sizes = super::cluster_scale_sets(spec);
    let live = observe(ctx, arm, group, &spec.name, sizes.len(), census).await?;
    Ok((sizes, live))
}

/// One scale set action on the VMs `body` names, followed to its end.
async fn act(ctx: &Context, arm: &Arm, set_id: &str, action: &str, body: Json, timeout: Duration) -> Result<(), CloudError> {
    let what = format!("{action} of {} VM(s) of {}", body["instanceIds"].as_array().map_or(0, Vec::len), super::api::short(set_id));
    arm.action(ctx, &format!("{set_id}/{action}"), COMPUTE_API, &body, &what, timeout).await
}

/// Waits until the scale set's VMs `instance_ids` run, provisioned, on the latest model when `latest`.
async fn wait_running(
    ctx: &Context,
    arm: &Arm,
    set_id: &str,
    instance_ids: &[String],
    latest: bool,
    timeout: Duration,
) -> Result<(), CloudError> {
    let what = format!("VM(s) {} of {} to run again", instance_ids.join(", "), super::api::short(set_id));
    crate::clouds::shared::wait_for(ctx, &what, timeout, || async {
        let vms = list_vms(ctx, arm, set_id).await?;
        let ready = instance_ids.iter().all(|i| {
            vms.iter().find(|vm| vm["instanceId"].as_str() == Some(i.as_str())).is_some_and(|vm| {
                let c = condition(&vm["properties"]["instanceView"]);
                let settled = vm["properties"]["provisioningState"].as_str().is_none_or(|p| p.eq_ignore_ascii_case("Succeeded"));
                settled && c.running() && (!latest || vm["properties"]["latestModelApplied"].as_bool() != Some(false))
            })
        });
        Ok(ready.then_some(()))
    })
    .await
}

/// The instance ids of VMs, for a scale set action's `instanceIds`.
fn ids(vms: &[&Vm]) -> Vec<String> {
    vms.iter().map(|vm| vm.instance_id.clone()).collect()
}

/// The VMs of named nodes, without their names.
fn vms_of<'a>(named: &[(&'a Vm, String)]) -> Vec<&'a Vm> {
    named.iter().map(|(vm, _)| *vm).collect()
}

/// Remakes the named nodes in place under their own names (`remove_nodes`): each scale set holding one is
/// brought to the spec's model (image, custom data, SSH key) and marked `hpc:remaking`; its stopped named
/// VMs are started and the broken ones (failed provisioning, a scheduled maintenance, unhealthy or failing
/// their self-check) redeployed to a new host; then every named VM gets `manualupgrade` (the new model) and
/// `reimage` (a fresh OS disk from it, so the custom data runs again), and the marker is cleared once they
/// run. Each is told its name again (its userData): nothing Azure documents says an upgrade to the model
/// keeps a VM's own userData, and the join that runs again on the fresh disk waits for it. Only VMs of
/// scale sets the census admits are touched; the others of each set keep running as they are (with a new
/// model, they show as not on it until their own turn).
pub async fn remake(
    ctx: &Context,
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let (sizes, live) = observe_spec(ctx, arm, spec, group, census).await?;
    let targets = named(&spec.name, &sizes, &live, names);
    if targets.is_empty() {
        return Ok(());
    }
    let subnet = subnet_of(ctx, arm, group, &spec.fabric.name).await?;
    let subnet = &subnet;
    let jobs = targets.into_iter().map(|(j, named)| async move {
        let vms = vms_of(&named);
        let id = scale_set_id(arm, group, &spec.name, j);
        let vanished = || format!("scale set {} vanished while its nodes were remade", scale_set_name(&spec.name, j));
        // The set's model is written as read, under its etag, at its capacity as read: a resize another
        // writer made meanwhile is read again, never undone by a capacity from an older read.
        let listed = vms.len();
        let model = |remake: Remake| {
            move |set: &Json| {
                let size = capacity_of(set, listed).ok()?;
                Some(set_body(arm, spec, group, subnet, j, size, Some(set), &super::api::tags_of(set), remake))
            }
        };
        let set = arm.get(ctx, &id, COMPUTE_API).await?.ok_or_else(vanished)?;
        capacity_of(&set, vms.len()).map_err(|e| e.context(format!("remaking nodes of {}", scale_set_name(&spec.name, j))))?;
        arm.rewrite(ctx, &id, COMPUTE_API, Some(set), timeout, model(Remake::Begin)).await?;
        let stopped: Vec<&Vm> = vms.iter().copied().filter(|vm| vm.condition.stopped()).collect();
        if !stopped.is_empty() {
            act(ctx, arm, &id, "start", json!({"instanceIds": ids(&stopped)}), timeout).await?;
        }
        let broken: Vec<&Vm> = vms.iter().copied().filter(|vm| vm.condition.broken).collect();
        if !broken.is_empty() {
            act(ctx, arm, &id, "redeploy", json!({"instanceIds": ids(&broken)}), timeout).await?;
        }
        let all = ids(&vms);
        act(ctx, arm, &id, "manualupgrade", json!({"instanceIds": all}), timeout).await?;
        act(ctx, arm, &id, "reimage", json!({"instanceIds": all}), timeout).await?;
        wait_running(ctx, arm, &id, &all, true, timeout).await?;
        let told = named.iter().filter(|(_, name)| node_index(&spec.name, name).is_some()).map(|(vm, name)| (vm.id.clone(), name.clone()));
        if let Some((_, e)) = tell_names(ctx, arm, &spec.fabric.region, told.collect(), timeout).await.into_iter().next() {
            return Err(e);
        }
        // The set as it is now (the PUT above changed its tags and model), the marker cleared.
        arm.rewrite(ctx, &id, COMPUTE_API, None, timeout, model(Remake::End)).await
    });
    futures::future::try_join_all(jobs).await.map(|_| ())
}

/// Restarts the named nodes in place (`reboot_nodes`): `restart` for running VMs, `start` for stopped or
/// deallocated ones (Azure restarts only a running VM), `redeploy` for one with a maintenance scheduled on
/// its host (a reboot there would not end it); then waits until they run.
pub async fn reboot(
    ctx: &Context,
    arm: &Arm,
    spec: &ClusterSpec,
    group: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let (sizes, live) = observe_spec(ctx, arm, spec, group, census).await?;
    let jobs = named(&spec.name, &sizes, &live, names).into_iter().map(|(j, named)| async move {
        let vms = vms_of(&named);
        let id = scale_set_id(arm, group, &spec.name, j);
        let maintenance = |vm: &&Vm| vm.condition.maintenance.is_some();
        let (move_off, stay): (Vec<&Vm>, Vec<&Vm>) = vms.iter().copied().partition(maintenance);
        let (stopped, running): (Vec<&Vm>, Vec<&Vm>) = stay.into_iter().partition(|vm| vm.condition.stopped());
        for (action, these) in [("restart", &running), ("start", &stopped), ("redeploy", &move_off)] {
            if !these.is_empty() {
                act(ctx, arm, &id, action, json!({"instanceIds": ids(these)}), timeout).await?;
            }
        }
        wait_running(ctx, arm, &id, &ids(&vms), false, timeout).await
    });
    futures::future::try_join_all(jobs).await.map(|_| ())
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
) -> Result<(), CloudError> {
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

/// The scale sets of a cluster that exist and the census admits, in order, with their VMs' instance ids
/// (one GET and one list each).
pub async fn scale_sets(
    ctx: &Context,
    arm: &Arm,
    group: &str,
    cluster: &str,
    census: &Census,
) -> Result<Vec<(Json, Vec<u64>)>, CloudError> {
    let mut out = Vec::new();
    loop {
        let id = scale_set_id(arm, group, cluster, out.len());
        let Some(set) = own_set(ctx, arm, &id, census).await? else { return Ok(out) };
        let vms = arm.list(ctx, &format!("{id}/virtualMachines"), COMPUTE_API).await?;
        out.push((set, listed_ids(&vms)));
    }
}

/// The planned size of each scale set, as far as the sets say it: the nodes a set's map names up to its
/// highest (a lost node below it still counts, and shows as missing), or its VMs for a set without a map.
fn imported_sizes(sets: &[(Json, Vec<u64>)]) -> Vec<u32> {
    let mut first = 0u32;
    sets.iter()
        .map(|(set, ids)| {
            let size = match NodeMap::from_tags(&super::api::tags_of(set)) {
                Some(map) => {
                    let named: Vec<u32> = ids.iter().filter_map(|vm| map.get(*vm)).collect();
                    let top = named.iter().max().map_or(0, |k| (k + 1).saturating_sub(first));
                    top.max(named.len() as u32)
                }
                None => ids.len() as u32,
            };
            first = first.saturating_add(size);
            size
        })
        .collect()
}

/// The fabric a scale set belongs to, as the `fabric = hpc_gpu_fabric.x` object, from its security group.
pub async fn fabric_ref(ctx: &Context, arm: &Arm, group: &str, fabric: &str) -> Result<crate::framework::Value, CloudError> {
    use crate::framework::Value;
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg", arm.group_id(group));
    let nsg = arm
        .get(ctx, &nsg_id, NETWORK_API)
        .await?
        .ok_or_else(|| CloudError::other(format!("the fabric {fabric} no longer exists in {group}")))?;
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
) -> Result<(crate::framework::Value, Vec<u32>), CloudError> {
    use crate::framework::Value;
    let sets = scale_sets(ctx, arm, group, cluster, census).await?;
    let Some((first, _)) = sets.first() else {
        return Err(format!("no cluster named {cluster:?} in {group}: no scale set {}", scale_set_name(cluster, 0)).into());
    };
    let tags = super::api::tags_of(first);
    let fabric = tags
        .get("hpc:fabric")
        .ok_or_else(|| CloudError::other(format!("scale set {} has no hpc:fabric tag", scale_set_name(cluster, 0))))?;
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
    let whole = os["customData"]
        .as_str()
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
        .and_then(|b| String::from_utf8(b).ok());
    // The Slurm join the nodes were made with, key included: adopted, never made anew.
    let slurm = crate::clouds::slurm::join_value(whole.as_deref());
    let user_data = crate::clouds::slurm::user_part(whole);
    let ssh = os["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].as_str().map(str::to_owned);
    let sizes = imported_sizes(&sets);
    let config = Value::object([
        ("name", Value::from(cluster)),
        ("fabric", fabric_ref(ctx, arm, group, fabric).await?),
        ("node_count", Value::int(sizes.iter().map(|n| i64::from(*n)).sum())),
        ("capacity_type", Value::from(capacity)),
        ("reservation_id", Value::from(reservation)),
        ("image", Value::from(image)),
        ("user_data", Value::from(user_data)),
        ("slurm", slurm),
        ("ssh_public_key", Value::from(ssh)),
        ("workload", Value::from(tags.get("hpc:workload").cloned())),
        ("tags", super::api::imported_tags(&tags, defaults)),
    ]);
    Ok((config, sizes))
}

/// The scale-set sizes a state was planned with (from its expansion).
fn azure_sizes(state: &Value) -> Vec<u32> {
    state
        .get("expansion")
        .as_list()
        .unwrap_or_default()
        .iter()
        .filter(|p| p.get("kind").as_str() == Some(SCALE_SET))
        .filter_map(|p| p.get("settings").get("instances").as_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// Scale-set sizes in the shape [`azure_sizes`] reads: what an import observed.
fn observed_sets(sizes: &[u32]) -> Value {
    let set = |n: &u32| {
        Value::object([("kind", Value::from(SCALE_SET)), ("settings", Value::object([("instances", Value::from(n.to_string()))]))])
    };
    Value::object([("expansion", Value::list(sizes.iter().map(set)))])
}

/// The scale sets the refresh did not find, marked missing in the expansion (the next apply recreates them).
fn with_gone_sets(state: Value, cluster: &str, live: &[Option<cluster::SetLive>]) -> Value {
    let gone: Vec<String> =
        live.iter().enumerate().filter(|(_, l)| l.is_none()).map(|(i, _)| cluster::scale_set_name(cluster, i)).collect();
    if gone.is_empty() {
        return state;
    }
    let marked = Value::list(state.get("expansion").as_list().unwrap_or_default().iter().map(|p| {
        let missing = p.get("name").as_str().is_some_and(|n| gone.iter().any(|g| g == n));
        if missing && p.get("kind").as_str().is_some() { shared::marked_missing(p) } else { p.clone() }
    }));
    shared::with_attr(&state, "expansion", marked)
}

/// The resource group of a cluster's fabric, from its spec.
fn spec_group(spec: &ClusterSpec) -> String {
    let given = spec.own_fabric.as_ref().and_then(|o| o.resource_group.as_deref());
    fabric::group_name(&spec.fabric.name, given)
}

#[async_trait]
impl Backend<ClusterSpec> for backend::Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        api::connect(ctx).await.map(|_| ())
    }

    /// Only the fabric's id names the resource group: `apply` makes the id.
    fn id(&self, _spec: &ClusterSpec) -> Option<String> {
        None
    }

    fn place(&self, v: &Value) -> String {
        group_place(v)
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        unknown_fabric_summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let arm = match arm(ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let Some(group) = group_of(change.planned) else { return Outcome::failed(change.prior.clone(), unknown_fabric()) };
        let previous_sets = azure_sizes(change.prior).len();
        let id = api::resource_id(&group, &spec.name);
        census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        let sizes = super::cluster_scale_sets(spec);
        match cluster::converge(ctx, &arm, spec, &group, change.tags, previous_sets, step.timeout, census).await {
            Ok(()) => {
                // What the plan left to the apply: the nodes and what they run and report (a known value in
                // the plan is kept as planned).
                let computed = ["nodes", "node_revisions", "unhealthy_nodes", "scheduled_maintenance", "selfcheck"];
                if !computed.iter().any(|a| change.planned.get(a).is_unknown()) {
                    return Outcome::done(state);
                }
                // A failed lookup leaves them null: the next refresh fills them in.
                match cluster::observe(ctx, &arm, &group, &spec.name, sizes.len(), census).await {
                    Ok(live) => {
                        let nodes = cluster::nodes(&spec.name, &sizes, &live, change.prior.get("node_revisions"));
                        let mut found = shared::node_day2(change.prior, &nodes);
                        found.insert("nodes".into(), shared::nodes_value(&nodes));
                        let state = computed
                            .iter()
                            .filter(|a| change.planned.get(a).is_unknown())
                            .fold(state, |s, a| shared::with_attr(&s, a, found.remove(*a).unwrap_or(Value::Null)));
                        Outcome::done(state)
                    }
                    Err(_) => Outcome::done(state),
                }
            }
            Err(e) => {
                // What came stays in state; the capacity policy (the lifecycle's settle) releases what it does
                // not keep, through `release_nodes`.
                let kept = match cluster::observe(ctx, &arm, &group, &spec.name, sizes.len(), census).await {
                    Ok(live) => {
                        let nodes = cluster::nodes(&spec.name, &sizes, &live, change.prior.get("node_revisions"));
                        shared::with_nodes(&state, Cloud::Azure, SCALE_SET, &nodes)
                    }
                    Err(_) => state,
                };
                Outcome::failed(kept, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let Some(group) = group_of(prior) else { return Outcome::failed(prior.clone(), unknown_fabric()) };
        let previous_sets = azure_sizes(prior).len();
        let name = prior.get("name").as_str().unwrap_or_default();
        let done = cluster::delete(step.ctx, &arm, &group, name, previous_sets, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, CloudError> {
        let name = state.get("name").as_str().unwrap_or_default();
        let Some(group) = group_of(state) else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let sizes = azure_sizes(state);
        let live = cluster::observe(step.ctx, &arm, &group, name, sizes.len(), step.census).await?;
        if live.iter().all(Option::is_none) {
            return Ok(None);
        }
        let nodes = cluster::nodes(name, &sizes, &live, state.get("node_revisions"));
        // Each scale set keeps its planned size in the expansion (no piece is of this kind).
        let out = shared::with_nodes(state, Cloud::Azure, "(scale sets keep their planned sizes)", &nodes);
        Ok(Some(with_gone_sets(out, name, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure cluster id: give \"azure/<resource group>/<cluster name>\", e.g. \"azure/train-rg/train\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::failed)?;
        let (config, sizes) =
            cluster::imported_config(step.ctx, &arm, group, name, step.default_tags, step.census).await.map_err(ImportError::failed)?;
        let mut found = Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))]));
        // The scale sets as they run, so the imported state's expansion is their layout, not a new split.
        found.observed = observed_sets(&sizes);
        Ok(found)
    }
}

#[async_trait]
impl ClusterBackend for backend::Azure {
    /// On Azure a node is remade in place, never deleted: a VM made again would get a new instance id at
    /// its scale set's end and move every later node's name. The scale set model is brought to the spec
    /// and the named VMs upgraded to it and reimaged (redeployed first when broken); the apply that follows
    /// finds nothing missing.
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        cluster::remake(step.ctx, &arm, spec, &group, names, step.timeout, step.census).await
    }

    /// Deleted by instance id: the capacity policy releases what a launch gave, never reimages it.
    async fn release_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        cluster::release(step.ctx, &arm, spec, &group, names, step.timeout, step.census).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        cluster::reboot(step.ctx, &arm, spec, &group, names, step.timeout, step.census).await
    }

    fn node_piece(&self) -> &'static str {
        SCALE_SET
    }

    fn running_groups(&self, state: &Value) -> Vec<u32> {
        azure_sizes(state)
    }

    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        quota::family(spec)
    }

    /// The family's quota and, for Regular VMs, the regional total (`cores`).
    fn quotas(&self, spec: &ClusterSpec) -> Vec<QuotaFamily> {
        quota::quotas(spec)
    }

    /// One `Usage_List` of the location per family.
    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
        let arm = arm(ctx).await?;
        quota::read(ctx, &arm, family).await
    }

    /// One `Usage_List` of the location for all of them: every usage it lists (family and regional
    /// quotas alike), so the location is not listed again in the run.
    async fn read_quotas(&self, ctx: &Context, families: &[QuotaFamily]) -> Result<BTreeMap<String, QuotaReading>, CloudError> {
        let Some(first) = families.first() else { return Ok(BTreeMap::new()) };
        debug_assert!(families.iter().all(|f| f.scope == first.scope), "one location per read");
        let arm = arm(ctx).await?;
        Ok(quota::readings(&quota::usages(ctx, &arm, &first.scope).await?))
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), CloudError> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        let sets = super::cluster_scale_sets(spec).len();
        // The census notes another owner's scale sets; the caller's look ahead refuses them.
        cluster::observe(step.ctx, &arm, &group, &spec.name, sets, step.census).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Value;

    fn spec(image: Option<&str>) -> ClusterSpec {
        let sku = crate::catalog::find_sku(crate::catalog::Cloud::Azure, "Standard_ND96isr_H100_v5").unwrap();
        ClusterSpec {
            day2: Default::default(),
            capacity_policy: crate::model::CapacityPolicy::AllOrNothing,
            user_data_version: None,
            name: "c".into(),
            fabric: crate::model::FabricRef {
                name: "f".into(),
                cloud: crate::catalog::Cloud::Azure,
                region: "eastus".into(),
                zone: None,
                sku,
                placement: Placement::Cluster,
            },
            own_fabric: None,
            gpu: None,
            node_count: 4,
            capacity: CapacityType::OnDemand,
            reservation_id: None,
            image: image.map(str::to_owned),
            user_data: None,
            user_data_write_only: false,
            ssh_public_key: Some("ssh-ed25519 AAAA x".into()),
            node_identity: None,
            workload: crate::model::Workload::Pretraining,
            rdma_interfaces: 8,
            tags: Default::default(),
            running_groups: Vec::new(),
            slurm: None,
        }
    }

    fn status(code: &str, time: Option<&str>) -> Json {
        let mut s = json!({"code": code, "level": "Info"});
        if let Some(t) = time {
            s["time"] = json!(t);
        }
        s
    }

    fn running(extra: Json) -> Json {
        let mut view = json!({"statuses": [status("ProvisioningState/succeeded", Some("2026-12-01T09:00:00+00:00")), status("PowerState/running", None)]});
        view.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        view
    }

    fn probed(state: &str, metrics: Option<&str>) -> Json {
        let mut subs = vec![json!({"code": "ComponentStatus/ApplicationHealthState/succeeded", "message": state})];
        if let Some(m) = metrics {
            subs.push(json!({"code": "ComponentStatus/CustomMetrics/succeeded", "message": m}));
        }
        running(json!({
            "vmHealth": {"status": status(&format!("HealthState/{}", state.to_lowercase()), Some("2026-12-01T10:02:41.1234567+00:00"))},
            "extensions": [{"name": HEALTH_EXTENSION, "type": "Microsoft.ManagedServices.ApplicationHealthLinux", "substatuses": subs}],
        }))
    }

    /// ARM's `sku.capacity` was cast `as u32`: a capacity of 2^32 + 1 became a size of 1, and the remake's
    /// PUT would have scaled the set in to one VM.
    #[test]
    fn a_scale_set_capacity_past_u32_is_an_error_not_a_smaller_size() {
        assert_eq!(capacity_of(&json!({"sku": {"capacity": 3}}), 5), Ok(3));
        assert_eq!(capacity_of(&json!({"sku": {}}), 5), Ok(5), "no capacity: the VMs listed");
        for hostile in [json!(4_294_967_297u64), json!(-1), json!(1.5), json!("3")] {
            assert!(capacity_of(&json!({"sku": {"capacity": hostile}}), 5).is_err(), "{hostile}");
        }
    }

    #[test]
    fn any_scale_set_answer_reads_without_a_panic() {
        use crate::fuzz::{answers, check};
        use proptest::prelude::*;
        let view = probed("Unhealthy", Some(r#"{"hpcSelfcheck": "fail-gpu-3"}"#));
        let mut failed = running(json!({"maintenanceRedeployStatus": {"maintenanceWindowStartTime": "2026-12-05T00:00:00.000-08:00",
                                                                       "lastOperationResultCode": "None"}}));
        failed["statuses"][0] = status("ProvisioningState/failed/AllocationFailed", Some("2026-12-01T09:00:00+00:00"));
        let vm = |id: &str, view: &Json| {
            json!({"id": format!("/s/vmss/c-0/virtualMachines/{id}"), "instanceId": id,
                   "properties": {"latestModelApplied": true, "instanceView": view}})
        };
        let vms = json!([vm("0", &view), vm("1", &failed), vm("7", &running(json!({})))]);
        let nic = json!({"properties": {"virtualMachine": {"id": "/s/vmss/c-0/virtualMachines/1"},
                                        "ipConfigurations": [{"properties": {"primary": true, "privateIPAddress": "10.0.0.5"}}]}});
        let set = json!({"tags": {"hpc:revision": "r2", "hpc:previous-revision": "r1"}, "sku": {"capacity": 3},
                         "properties": {"virtualMachineProfile": {"extensionProfile": {"extensions": [health_extension()]}}}});
        let lists = |j: Json| j.as_array().cloned().unwrap_or_else(|| vec![j]);
        let sizes = proptest::collection::vec(0u32..4, 0..3);
        let strategy = (answers(vec![set]), answers(vec![vms]).prop_map(lists), answers(vec![json!([nic])]).prop_map(lists), sizes);
        check("set_live", strategy, |(set, vms, nics, sizes)| {
            let live = set_live(&set, &vms, &nics);
            let _ = (has_health_extension(&set), capacity_of(&set, vms.len()));
            for vm in vms.iter() {
                let _ = condition(&vm["properties"]["instanceView"]);
            }
            let all = vec![Some(live.clone()), None, Some(live.clone())];
            let found = nodes("c", &sizes, &all, &crate::framework::Value::Null);
            let names: Vec<String> = found.iter().map(|n| n.name.clone()).collect();
            let _ = named("c", &sizes, &all, &names);
            if live.vms.len() > vms.len() {
                return Err("more VMs than listed".into());
            }
            Ok(())
        });
    }

    #[test]
    fn a_healthy_vm_reports_its_self_checks_verdict() {
        let ok = condition(&probed("Healthy", Some(r#"{"hpcSelfcheck": "ok"}"#)));
        assert_eq!((ok.health.as_deref(), ok.selfcheck.as_deref(), ok.broken, ok.running()), (None, Some("ok"), false, true));
        // Healthy with no verdict of ours: the extension's word stands for it.
        assert_eq!(condition(&probed("Healthy", None)).selfcheck.as_deref(), Some("ok"));
        assert_eq!(condition(&probed("Initializing", None)).selfcheck, None, "not answered since it booted");
        let unknown = condition(&probed("Unknown", None));
        assert_eq!((unknown.selfcheck, unknown.health, unknown.broken), (None, None, false), "nothing answers: no verdict, not unhealthy");
    }

    #[test]
    fn a_failed_self_check_is_its_verdict_and_breaks_the_node() {
        let failed = condition(&probed("Unhealthy", Some(r#"{"hpcSelfcheck": "fail-gpus-7-of-8"}"#)));
        assert_eq!(failed.selfcheck.as_deref(), Some("fail-gpus-7-of-8"));
        assert_eq!(failed.health, None, "the verdict says why: no word of the extension's over it");
        assert!(failed.broken);
        // A verdict that is not label-safe is no verdict.
        let odd = condition(&probed("Unhealthy", Some(r#"{"hpcSelfcheck": "FAIL: 7/8"}"#)));
        assert_eq!(odd.selfcheck, None);
        assert_eq!(odd.health.as_deref(), Some("Application Health extension reports the node unhealthy since 2026-12-01T10:02Z"));
    }

    #[test]
    fn the_cloud_s_own_health_signals_become_reasons_with_their_times() {
        let failed = condition(&json!({"statuses": [
            status("ProvisioningState/failed/InternalOperationError", Some("2026-12-01T10:02:00+00:00")), status("PowerState/running", None)]}));
        assert_eq!(failed.health.as_deref(), Some("provisioning failed (InternalOperationError) since 2026-12-01T10:02Z"));
        assert!(failed.broken && !failed.provisioned);
        let stopped =
            condition(&json!({"statuses": [status("ProvisioningState/succeeded", None), status("PowerState/deallocated", None)]}));
        assert_eq!(stopped.health.as_deref(), Some("VM deallocated"));
        assert!(stopped.stopped() && !stopped.broken);
        let maintenance = condition(&running(json!({"maintenanceRedeployStatus": {"isCustomerInitiatedMaintenanceAllowed": true,
            "preMaintenanceWindowStartTime": "2026-12-01T00:00:00Z", "maintenanceWindowStartTime": "2026-12-05T00:00:00+00:00",
            "maintenanceWindowEndTime": "2026-12-05T04:00:00+00:00"}})));
        assert_eq!(
            (maintenance.health.as_deref(), maintenance.maintenance.as_deref()),
            (None, Some("scheduled for maintenance from 2026-12-05T00:00Z to 2026-12-05T04:00Z")),
            "maintenance is reported with its window, and is no repair reason"
        );
        assert!(maintenance.broken, "a remake moves it off the host");
        let done = condition(&running(json!({"maintenanceRedeployStatus": {"maintenanceWindowStartTime": "2026-12-05T00:00:00Z",
            "lastOperationResultCode": "MaintenanceCompleted"}})));
        assert_eq!((done.health, done.maintenance), (None, None), "a maintenance done is nothing to repair or report");
        let unhealthy = condition(&probed("Unhealthy", None));
        assert_eq!(unhealthy.health.as_deref(), Some("Application Health extension reports the node unhealthy since 2026-12-01T10:02Z"));
        assert!(unhealthy.broken);
    }

    fn set(revision: Option<&str>, previous: Option<&str>, remaking: bool, latest: &[bool]) -> SetLive {
        let vms = latest
            .iter()
            .enumerate()
            .map(|(i, l)| Vm { id: format!("vm{i}"), instance_id: i.to_string(), latest: *l, ..Default::default() })
            .collect();
        SetLive { revision: revision.map(str::to_owned), previous: previous.map(str::to_owned), remaking, map: None, vms }
    }

    #[test]
    fn a_node_runs_the_model_revision_only_with_the_latest_model_applied() {
        let known = Value::object([("c-0", Value::from("r1")), ("c-1", Value::from("r1"))]);
        let live = [Some(set(Some("r2"), Some("r1"), false, &[true, false, false]))];
        let found = nodes("c", &[3], &live, &known);
        let revisions: Vec<Option<&str>> = found.iter().map(|n| n.revision.as_deref()).collect();
        assert_eq!(revisions, vec![Some("r2"), Some("r1"), Some("r1")], "c-2: the model's previous revision");
        // Nothing says what a VM off the model runs: never the model's.
        let lost = [Some(set(Some("r2"), None, false, &[false]))];
        assert_eq!(nodes("c", &[1], &lost, &Value::Null)[0].revision.as_deref(), Some(UNKNOWN_REVISION));
        // Off a model whose revision the state says it runs: the model changed in something else.
        let same = Value::object([("c-0", Value::from("r2"))]);
        assert_eq!(nodes("c", &[1], &lost, &same)[0].revision.as_deref(), Some("r2"));
        // A remake left unfinished: the state says what the VMs on the model run.
        let remaking = [Some(set(Some("r2"), Some("r1"), true, &[true, true]))];
        let revisions: Vec<Option<String>> = nodes("c", &[2], &remaking, &known).into_iter().map(|n| n.revision).collect();
        assert_eq!(revisions, vec![Some("r1".into()), Some("r1".into())]);
        // A scale set an earlier release made records no revision: the state's stands.
        let old = [Some(set(None, None, false, &[true]))];
        assert_eq!(nodes("c", &[1], &old, &known)[0].revision, None);
    }

    #[test]
    fn named_nodes_are_found_by_their_position_in_a_scale_set_an_earlier_release_made() {
        let live = [Some(set(Some("r"), None, false, &[true, true])), None, Some(set(Some("r"), None, false, &[true, true]))];
        let names = vec!["c-1".to_owned(), "c-4".to_owned(), "c-3".to_owned(), "c-9".to_owned()];
        let found: Vec<(usize, Vec<String>)> = named("c", &[2, 2, 2], &live, &names)
            .into_iter()
            .map(|(j, vms)| (j, vms.iter().map(|(v, _)| v.instance_id.clone()).collect()))
            .collect();
        assert_eq!(found, vec![(0, vec!["1".to_owned()]), (2, vec!["0".to_owned()])], "c-3 is in a set that is gone, c-9 is no node");
    }

    /// The VMs of a set with a map: (instance id, latest).
    fn mapped(ids: &[u64], map: &[(u64, u32)]) -> SetLive {
        let mut m = NodeMap::default();
        for (id, index) in map {
            m.insert(*id, *index);
        }
        let vms = ids.iter().map(|i| Vm { id: format!("vm{i}"), instance_id: i.to_string(), latest: true, ..Default::default() }).collect();
        SetLive { revision: Some("r".into()), map: Some(m), vms, ..Default::default() }
    }

    #[test]
    fn a_set_with_a_map_names_its_vms_by_it_whatever_their_order() {
        // Node 1's VM was lost and repaired as VM 9; VM 12 came from outside.
        let live = [Some(mapped(&[0, 2, 3, 9, 12], &[(0, 0), (2, 2), (3, 3), (9, 1)])), Some(mapped(&[0], &[(0, 4)]))];
        let names: Vec<String> = nodes("c", &[4, 1], &live, &Value::Null).into_iter().map(|n| format!("{}={}", n.name, n.id)).collect();
        assert_eq!(names, ["c-0=vm0", "c-1=vm9", "c-2=vm2", "c-3=vm3", "c-0_12=vm12", "c-4=vm0"]);
        // Lost again, in the middle: no other name moves.
        let live = [Some(mapped(&[0, 3, 9], &[(0, 0), (2, 2), (3, 3), (9, 1)]))];
        let names: Vec<String> = nodes("c", &[4], &live, &Value::Null).into_iter().map(|n| n.name).collect();
        assert_eq!(names, ["c-0", "c-1", "c-3"]);
        let found = named("c", &[4], &live, &["c-1".to_owned(), "c-2".to_owned()]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.iter().map(|(vm, name)| (vm.id.as_str(), name.as_str())).collect::<Vec<_>>(), [("vm9", "c-1")]);
    }

    #[test]
    fn before_a_write_the_vms_past_the_range_and_those_no_name_is_kept_for_are_sorted_out_to_go() {
        let map = |pairs: &[(u64, u32)]| {
            let mut m = NodeMap::default();
            for (id, index) in pairs {
                m.insert(*id, *index);
            }
            m
        };
        let none = BTreeMap::new();
        // A shrink of nodes 0..5 to 0..3: the highest names go, whatever their ids (VM 9 is node 1).
        let (kept, doomed) = sort_out("c", Some(&map(&[(0, 0), (9, 1), (2, 2), (3, 3), (4, 4)])), &[0, 2, 3, 4, 9], 0..3, &none);
        assert_eq!((kept.map, doomed), (map(&[(0, 0), (9, 1), (2, 2)]), vec![3, 4]));
        // VM 7 came from outside; VM 8 was named node 1 by an apply stopped before it wrote the map.
        let said = BTreeMap::from([(8, "c-1".to_owned()), (7, "c-2".to_owned())]);
        let (kept, doomed) = sort_out("c", Some(&map(&[(0, 0), (2, 2)])), &[0, 2, 7, 8], 0..3, &said);
        assert_eq!((kept.map, doomed), (map(&[(0, 0), (2, 2), (8, 1)]), vec![7]), "c-2 is taken: VM 7's claim is no name");
        // A set an earlier release made: by position, as many as its range holds.
        let (kept, doomed) = sort_out("c", None, &[3, 5, 8], 10..12, &none);
        assert_eq!((kept.map, kept.fresh, doomed), (map(&[(3, 10), (5, 11)]), vec![3, 5], vec![8]));
    }

    #[test]
    fn an_import_sizes_the_sets_by_the_names_they_keep() {
        let set = |tags: Json| json!({"tags": tags});
        let sets = [
            // Nodes 0..4, node 1 lost: still four.
            (set(json!({"hpc:nodes": "0:0,2-3:2"})), vec![0, 2, 3]),
            // Nodes 4..6 (the set holds 4 and 5) and a VM made outside.
            (set(json!({"hpc:nodes": "0-1:4"})), vec![0, 1, 7]),
            // An earlier release's set: its VMs.
            (set(json!({})), vec![0, 1, 2]),
        ];
        assert_eq!(imported_sizes(&sets), [4, 2, 3]);
    }

    #[test]
    fn the_model_records_its_revisions_and_runs_the_health_extension() {
        let arm = Arm::offline("s");
        let tags = BTreeMap::from([("team".to_owned(), "ml".to_owned())]);
        let old = spec(Some("a:b:c:1"));
        let new = spec(Some("a:b:c:2"));
        let fresh = set_body(&arm, &old, "g", "subnet", 0, 4, None, &tags, Remake::Keep);
        assert_eq!(fresh["tags"]["hpc:revision"], json!(old.revision()));
        assert!(fresh["tags"].get(PREVIOUS_REVISION_TAG).is_none() && fresh["tags"].get(REMAKING_TAG).is_none());
        assert!(has_health_extension(&fresh), "a new scale set runs the Application Health extension");
        let settings = &fresh["properties"]["virtualMachineProfile"]["extensionProfile"]["extensions"][0]["properties"]["settings"];
        assert_eq!((settings["port"].as_u64(), settings["requestPath"].as_str()), (Some(u64::from(SELFCHECK_PORT)), Some(SELFCHECK_PATH)));
        // The image changes: the new revision, the old one kept as the previous, the marker as asked.
        let begun = set_body(&arm, &new, "g", "subnet", 0, 4, Some(&fresh), &tags, Remake::Begin);
        assert_eq!(begun["tags"]["hpc:revision"], json!(new.revision()));
        assert_eq!(begun["tags"][PREVIOUS_REVISION_TAG], json!(old.revision()));
        assert_eq!(begun["tags"][REMAKING_TAG], json!(new.revision()));
        let kept = set_body(&arm, &new, "g", "subnet", 0, 4, Some(&begun), &tags, Remake::Keep);
        assert_eq!((&kept["tags"][PREVIOUS_REVISION_TAG], &kept["tags"][REMAKING_TAG]), (&json!(old.revision()), &json!(new.revision())));
        let ended = set_body(&arm, &new, "g", "subnet", 0, 4, Some(&kept), &tags, Remake::End);
        assert!(ended["tags"].get(REMAKING_TAG).is_none());
        assert_eq!(ended["tags"]["team"], "ml");
        // A scale set an earlier release made, without the extension: not added while the model stays.
        let mut legacy = fresh.clone();
        legacy["properties"]["virtualMachineProfile"].as_object_mut().unwrap().remove("extensionProfile");
        legacy["tags"].as_object_mut().unwrap().remove("hpc:revision");
        assert!(!has_health_extension(&set_body(&arm, &old, "g", "subnet", 0, 4, Some(&legacy), &tags, Remake::Keep)));
        legacy["tags"]["hpc:revision"] = json!(old.revision());
        assert!(!has_health_extension(&set_body(&arm, &old, "g", "subnet", 0, 4, Some(&legacy), &tags, Remake::Keep)));
        assert!(
            has_health_extension(&set_body(&arm, &new, "g", "subnet", 0, 4, Some(&legacy), &tags, Remake::Keep)),
            "the model changes anyway"
        );
    }
    use crate::clouds::azure::scale_set_sizes;

    fn scale_set(name: &str, instances: &str) -> Value {
        Value::object([
            ("kind", Value::from(SCALE_SET)),
            ("name", Value::from(name)),
            ("settings", Value::object([("instances", Value::from(instances)), ("sku", Value::from("Standard_ND96isr_H100_v5"))])),
        ])
    }

    fn piece(kind: &str, name: &str) -> Value {
        Value::object([
            ("kind", Value::from(kind)),
            ("name", Value::from(name)),
            ("settings", Value::object([("tags", Value::from("{}"))])),
        ])
    }

    #[test]
    fn scale_sets_hold_at_most_100_nodes_and_differ_by_at_most_one() {
        assert_eq!(scale_set_sizes(101), vec![51, 50]);
        assert_eq!(scale_set_sizes(300), vec![100, 100, 100]);
        assert_eq!(scale_set_sizes(0), vec![0], "an empty cluster still plans one (empty) scale set");
        for nodes in 1..=1000u32 {
            let sizes = scale_set_sizes(nodes);
            assert_eq!(sizes.iter().sum::<u32>(), nodes, "{nodes}");
            assert!(sizes.iter().all(|s| *s <= 100), "{nodes}: {sizes:?}");
            assert_eq!(sizes.len() as u32, nodes.div_ceil(100), "{nodes}: as few sets as the limit allows");
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{nodes}: {sizes:?}");
        }
    }

    #[test]
    fn sizes_are_read_back_from_the_scale_sets_of_the_expansion_in_order() {
        let state = Value::object([(
            "expansion",
            Value::list([
                piece("azurerm_resource_group", "big-rg"),
                scale_set("big-0", "75"),
                scale_set("big-1", "74"),
                piece("other", "x"),
            ]),
        )]);
        assert_eq!(azure_sizes(&state), vec![75, 74]);
        let unreadable = Value::object([("expansion", Value::list([scale_set("big-0", "many"), scale_set("big-1", "3")]))]);
        assert_eq!(azure_sizes(&unreadable), vec![3], "a size that is not a number is skipped");
        assert!(azure_sizes(&Value::Null).is_empty());
        assert!(azure_sizes(&Value::object([("expansion", Value::Null)])).is_empty());
    }

    #[test]
    fn computer_name_prefixes_fit_azure_s_15_characters_and_differ_per_set() {
        assert_eq!(cluster::computer_name_prefix("train", 0), "train-0-");
        assert_eq!(cluster::computer_name_prefix("averyveryverylongname", 12), "averyveryve-12-");
        // A cut that ends on a hyphen does not double it.
        assert_eq!(cluster::computer_name_prefix("abcdefghijk-lmn", 0), "abcdefghijk-0-");
        let prefixes: Vec<String> = (0..120).map(|i| cluster::computer_name_prefix("a-rather-long-cluster-name", i)).collect();
        assert!(prefixes.iter().all(|p| (1..=15).contains(&p.len())), "{prefixes:?}");
        let distinct: std::collections::BTreeSet<&String> = prefixes.iter().collect();
        assert_eq!(distinct.len(), prefixes.len());
    }

    #[test]
    fn a_scale_set_deleted_outside_is_marked_missing() {
        let state = Value::object([("expansion", Value::list([scale_set("c-0", "2"), scale_set("c-1", "2")]))]);
        let vm = cluster::Vm { id: "vm".into(), ..Default::default() };
        let set = cluster::SetLive { vms: vec![vm.clone(), vm], ..Default::default() };
        let out = with_gone_sets(state.clone(), "c", &[Some(set), None]);
        let pieces = out.get("expansion").as_list().unwrap().to_vec();
        assert!(pieces[0].get("settings").get("missing").is_null());
        assert_eq!(pieces[1].get("settings").get("missing").as_str(), Some(shared::MISSING));
        assert_eq!(with_gone_sets(state.clone(), "c", &[Some(Default::default()), Some(Default::default())]), state);
    }
}
