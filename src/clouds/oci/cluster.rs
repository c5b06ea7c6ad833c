//! `hpc_gpu_cluster` on OCI: an instance configuration for the bare-metal GPU shape with the Oracle Cloud
//! Agent's RDMA plugins enabled, and the nodes: launched one per node into the fabric's compute cluster
//! (placement `cluster`; OCI has no batch launch outside instance pools), or as the single instance pool of
//! a cluster network (placement `cluster-network`), resized in place. Nodes carry the display name
//! `<cluster>-<i>` and the freeform tag `hpc:cluster`; a refresh is one instance list per cluster (two for
//! a cluster network), whatever the node count. GB200/GB300 nodes are launched per NVLink domain by a GPU
//! memory cluster instead (see `memory`). Only what the census admits (the `hpc:owner` freeform tag; a
//! cluster network's instances with it) is resized, renamed, retagged or terminated.
//!
//! Day 2: each instance configuration records the node configuration revision it was made from (its
//! `hpc:revision` freeform tag); when the spec's revision has none, a new one is made (instance
//! configurations cannot be changed) and the nodes launched from then on come from it, each tagged
//! `hpc:revision`. The refresh reads each node's health from the same instance list (a lifecycle state other
//! than running or launching, `timeMaintenanceRebootDue`) and the verdict its self-check published in its
//! own `hpc:selfcheck` freeform tag (UpdateInstance, with the instance principal). Freeform tags are replaced
//! whole by UpdateInstance, so every retag keeps those two keys as the node has them.
//! The lifecycle's backend for this kind, `Backend<ClusterSpec>` and `ClusterBackend` on `backend::Oci`, comes last, before the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value as Json, json};

use super::api;
use super::api::{Oci, Service, encode, is_gone, tags_of};
use super::backend::{self, configured, fabric_place, fabric_region, import_id, name_of, no_fabric_id, summary};
use super::fabric::{Joined, join, retag};
use super::{cluster, limits, memory};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared::{self, NodeAddress};
use crate::clouds::shared::{REVISION_TAG, SELFCHECK_TAG};
use crate::framework::{Context, Value};
use crate::model::{CapacityType, ClusterSpec, Placement};
use crate::nodes::{node_index, node_name, order};
use crate::ownership::{Census, marker_in};

/// Launch calls in flight at once (OCI publishes no rate; 429s are retried with backoff).
pub(super) const PARALLEL: usize = 8;

/// Where a cluster's nodes live, for lookups.
pub struct Location<'a> {
    pub compartment: &'a str,
    pub zone: &'a str,
    pub name: &'a str,
    pub placement: Placement,
    /// Nodes per NVLink domain of a rack-scale shape (GB200/GB300), whose domains are GPU memory clusters.
    pub per_domain: Option<u32>,
}

/// Nodes per NVLink domain of an OCI shape whose domains are GPU memory clusters, `None` for other shapes.
pub fn per_domain(shape: &str) -> Option<u32> {
    crate::catalog::find_sku(crate::catalog::Cloud::Oci, shape)?.nvlink_domain.map(|d| d.nodes)
}

/// The cluster network named `<cluster>-cn` the census admits, if it exists.
pub async fn find_network(ctx: &Context, oci: &Oci, compartment: &str, name: &str, census: &Census) -> Result<Option<Json>, CloudError> {
    let q = format!("compartmentId={}&displayName={}", encode(compartment), encode(&format!("{name}-cn")));
    let all = oci.list(ctx, Service::Core, "clusterNetworks", &q).await?;
    Ok(all
        .into_iter()
        .filter(|n| !is_gone(n))
        .find(|n| census.admit("oci_core_cluster_network", &format!("{name}-cn"), marker_in(&tags_of(n)), n["timeCreated"].as_str())))
}

/// The cluster's live nodes (not terminating) the census admits, in name order: one list call for
/// independently placed nodes; for a cluster network (whose instances are its own), its lookup and one
/// list of its instances.
pub async fn observe(ctx: &Context, oci: &Oci, at: &Location<'_>, census: &Census) -> Result<Vec<Json>, CloudError> {
    let mut nodes = match at.placement {
        Placement::ClusterNetwork => match find_network(ctx, oci, at.compartment, at.name, census).await? {
            Some(cn) => {
                let id = cn["id"].as_str().unwrap_or_default();
                oci.list(
                    ctx,
                    Service::Core,
                    &format!("clusterNetworks/{id}/instances"),
                    &format!("compartmentId={}", encode(at.compartment)),
                )
                .await?
            }
            None => Vec::new(),
        },
        _ => {
            let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
            let all = oci.list(ctx, Service::Core, "instances", &q).await?;
            all.into_iter()
                .filter(|i| {
                    let tags = tags_of(i);
                    tags.get("hpc:cluster").map(String::as_str) == Some(at.name)
                        && !matches!(i["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED"))
                        && census.admit(
                            "oci_core_instance",
                            i["displayName"].as_str().unwrap_or_default(),
                            marker_in(&tags),
                            i["timeCreated"].as_str(),
                        )
                })
                .collect()
        }
    };
    nodes.retain(|n| !is_gone(n) && !matches!(node_state(n).as_str(), "TERMINATING" | "TERMINATED"));
    nodes.sort_by_key(|n| (order(at.name, n["displayName"].as_str().unwrap_or_default()), n["displayName"].to_string()));
    Ok(nodes)
}

/// A node's state in capitals: an Instance's `lifecycleState` (`RUNNING`), or a cluster network
/// InstanceSummary's `state`, which has no fixed set of values and which the service writes as `Running`.
pub fn node_state(n: &Json) -> String {
    n["lifecycleState"].as_str().or(n["state"].as_str()).unwrap_or_default().to_ascii_uppercase()
}

/// Why OCI holds a node unhealthy: a lifecycle state other than running or launching (`state STOPPED`);
/// `None` when it is healthy.
pub fn health_of(n: &Json) -> Option<String> {
    let state = node_state(n);
    (!state.is_empty() && !matches!(state.as_str(), "RUNNING" | "PROVISIONING" | "STARTING")).then(|| format!("state {state}"))
}

/// The maintenance reboot OCI has scheduled on a node that is otherwise healthy, with the time it is due
/// (`timeMaintenanceRebootDue`: `maintenance reboot due 2026-12-05T00:00Z`). OCI reboots the instance
/// then (a user may reboot it earlier); reported, not repaired, unless `on_maintenance` asks.
pub fn maintenance_of(n: &Json) -> Option<String> {
    if health_of(n).is_some() {
        return None;
    }
    let due = n["timeMaintenanceRebootDue"].as_str().filter(|t| !t.is_empty())?;
    Some(format!("maintenance reboot due {}", crate::clock::utc_minute(due)))
}

/// A cluster network's nodes as full Instances (freeform tags, maintenance), from one ListInstances in the
/// availability domain: its own list answers InstanceSummaries, which have neither. Other nodes are
/// Instances already and are returned as they are; a summary OCI does not list yet is kept.
pub async fn with_details(ctx: &Context, oci: &Oci, at: &Location<'_>, nodes: Vec<Json>) -> Result<Vec<Json>, CloudError> {
    if nodes.iter().all(|n| n.get("freeformTags").is_some()) {
        return Ok(nodes);
    }
    let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
    let full: BTreeMap<String, Json> =
        oci.list(ctx, Service::Core, "instances", &q).await?.into_iter().filter_map(|i| Some((i["id"].as_str()?.to_owned(), i))).collect();
    Ok(nodes.into_iter().map(|n| n["id"].as_str().and_then(|id| full.get(id)).cloned().unwrap_or(n)).collect())
}

/// The nodes `observe` found, with their instance OCIDs, their primary VNIC's private address, their
/// revision, health and self-check verdict: one list of VNIC attachments in the availability domain and one
/// list of private IPs per subnet the nodes are in (one, for a fabric), and for a cluster network one
/// instance list, whatever the node count.
pub async fn addresses(ctx: &Context, oci: &Oci, at: &Location<'_>, nodes: &[Json]) -> Result<Vec<crate::clouds::NodeAddress>, CloudError> {
    let nodes = with_details(ctx, oci, at, nodes.to_vec()).await?;
    let mut vnic_of: BTreeMap<String, String> = BTreeMap::new();
    let mut subnets: BTreeSet<String> = BTreeSet::new();
    let ours: BTreeSet<&str> = nodes.iter().filter_map(|n| n["id"].as_str()).collect();
    if !ours.is_empty() {
        let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
        for a in oci.list(ctx, Service::Core, "vnicAttachments", &q).await? {
            let (Some(instance), Some(vnic)) = (a["instanceId"].as_str(), a["vnicId"].as_str()) else { continue };
            if a["lifecycleState"].as_str() != Some("ATTACHED") || !ours.contains(instance) {
                continue;
            }
            // The primary VNIC is the one at NIC index 0 (or the first listed).
            if a["nicIndex"].as_u64().unwrap_or(0) == 0 || !vnic_of.contains_key(instance) {
                vnic_of.insert(instance.to_owned(), vnic.to_owned());
            }
            if let Some(subnet) = a["subnetId"].as_str() {
                subnets.insert(subnet.to_owned());
            }
        }
    }
    let mut ip_of: BTreeMap<String, String> = BTreeMap::new();
    for subnet in subnets {
        for ip in oci.list(ctx, Service::Core, "privateIps", &format!("subnetId={}", encode(&subnet))).await? {
            if let (Some(vnic), Some(addr)) = (ip["vnicId"].as_str(), ip["ipAddress"].as_str())
                && ip["isPrimary"].as_bool() != Some(false)
            {
                ip_of.insert(vnic.to_owned(), addr.to_owned());
            }
        }
    }
    Ok(nodes
        .iter()
        .map(|n| {
            let id = n["id"].as_str().unwrap_or_default().to_owned();
            let private_ip = vnic_of.get(&id).and_then(|v| ip_of.get(v)).cloned();
            let tags = tags_of(n);
            crate::clouds::NodeAddress {
                name: n["displayName"].as_str().unwrap_or_default().to_owned(),
                id,
                private_ip,
                revision: tags.get(REVISION_TAG).cloned(),
                health: health_of(n),
                maintenance: maintenance_of(n),
                selfcheck: tags.get(SELFCHECK_TAG).cloned(),
            }
        })
        .collect())
}

/// The default image for a GPU shape: the newest platform image OCI offers for it whose name says GPU.
async fn default_image(ctx: &Context, oci: &Oci, compartment: &str, shape: &str) -> Result<String, CloudError> {
    let q = format!("compartmentId={}&shape={}&sortBy=TIMECREATED&sortOrder=DESC", encode(compartment), encode(shape));
    let images = oci.list(ctx, Service::Core, "images", &q).await?;
    images
        .iter()
        .find(|i| i["displayName"].as_str().is_some_and(|n| n.contains("GPU")))
        .or(images.first())
        .and_then(|i| i["id"].as_str().map(str::to_owned))
        .ok_or_else(|| CloudError::other(format!("OCI offers no image for shape {shape} in this region: set image to an image OCID")))
}

/// The launch details every node gets: the instance configuration's (InstanceConfigurationLaunchInstanceDetails)
/// and, with [`launch_instance_details`], each launched node's. Only fields both models have.
fn launch_details(spec: &ClusterSpec, compartment: &str, image: &str, joined: &Joined, tags: &BTreeMap<String, String>) -> Json {
    let f = &spec.fabric;
    let mut metadata = serde_json::Map::new();
    if let Some(key) = &spec.ssh_public_key {
        metadata.insert("ssh_authorized_keys".into(), json!(key.trim()));
    }
    if let Some(u) = crate::clouds::slurm::node_user_data(spec, 0) {
        metadata.insert("user_data".into(), json!(base64::engine::general_purpose::STANDARD.encode(u.expose())));
    }
    // The RDMA plugins configure RDMA NICs; a shape without them (VM.GPU.A10) runs the agent's defaults.
    let rdma = f.sku.fabric != crate::catalog::Fabric::None;
    let plugins: Vec<Json> =
        if rdma { super::RDMA_PLUGINS.iter().map(|p| json!({"name": p, "desiredState": "ENABLED"})).collect() } else { Vec::new() };
    let mut d = json!({
        "compartmentId": compartment,
        "availabilityDomain": f.zone,
        "shape": f.sku.name,
        "sourceDetails": {"sourceType": "image", "imageId": image},
        "createVnicDetails": {"subnetId": joined.subnet, "nsgIds": [joined.nsg], "assignPublicIp": false},
        "agentConfig": {"isMonitoringDisabled": false, "isManagementDisabled": false, "pluginsConfig": plugins},
        "metadata": metadata,
        "freeformTags": tags,
    });
    if spec.capacity == CapacityType::Spot {
        d["preemptibleInstanceConfig"] = json!({"preemptionAction": {"type": "TERMINATE", "preserveBootVolume": false}});
    }
    if let Some(r) = &spec.reservation_id {
        d["capacityReservationId"] = json!(r);
    }
    d
}

/// A node's LaunchInstance body, a LaunchInstanceDetails built from the cluster rather than the instance
/// configuration's launch details replayed: those are another model, with fields LaunchInstance does not
/// take (launchMode, preferredMaintenanceAction) and nested types of their own.
fn launch_instance_details(spec: &ClusterSpec, compartment: &str, image: &str, joined: &Joined, tags: &BTreeMap<String, String>) -> Json {
    let mut d = launch_details(spec, compartment, image, joined, tags);
    if let Some(cc) = &joined.compute_cluster {
        d["computeClusterId"] = json!(cc);
    }
    d
}

/// The freeform tags a node gets when the provider tags it: `tags`, with the node's own day-2 keys as the
/// node has them (the revision it was made with, the verdict its self-check published), which UpdateInstance
/// would otherwise drop (it replaces the whole map). `revision` is what a node without a revision tag gets.
pub fn node_tags(live: &BTreeMap<String, String>, tags: &BTreeMap<String, String>, revision: Option<&str>) -> BTreeMap<String, String> {
    let mut out = tags.clone();
    if let Some(r) = revision {
        out.insert(REVISION_TAG.to_owned(), r.to_owned());
    }
    for key in [REVISION_TAG, SELFCHECK_TAG] {
        if let Some(v) = live.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    out
}

/// Gives a node the cluster's tags (UpdateInstance, which replaces the whole map), keeping its own day-2
/// keys as the node has them when the write is made (`if-match`: a verdict published meanwhile is read again
/// and kept); nothing when it has them.
async fn retag_node(ctx: &Context, oci: &Oci, node: &Json, tags: &BTreeMap<String, String>) -> Result<(), CloudError> {
    let retagged = |node: &Json| {
        let live = tags_of(node);
        let wanted = node_tags(&live, tags, None);
        (live != wanted).then(|| json!({"freeformTags": wanted}))
    };
    if retagged(node).is_none() {
        return Ok(());
    }
    let id = node["id"].as_str().unwrap_or_default();
    let what = format!("node {}", node["displayName"].as_str().unwrap_or(id));
    oci.rewrite(ctx, Service::Core, &format!("/instances/{id}"), &what, retagged).await.map(|_| ())
}

/// The cluster's instance configurations `<cluster>-ic` the census admits (summaries, newest first): one
/// list, as OCI cannot filter it by name. There is one per node configuration revision a rolling update
/// still needs, each tagged with its revision (`hpc:revision`; none on one an earlier release made).
pub async fn configurations(ctx: &Context, oci: &Oci, compartment: &str, name: &str, census: &Census) -> Result<Vec<Json>, CloudError> {
    let all = oci.list(ctx, Service::Core, "instanceConfigurations", &format!("compartmentId={}", encode(compartment))).await?;
    let wanted = format!("{name}-ic");
    let mut ours: Vec<Json> = all
        .into_iter()
        .filter(|c| {
            c["displayName"].as_str() == Some(&wanted)
                && census.admit("oci_core_instance_configuration", &wanted, marker_in(&tags_of(c)), c["timeCreated"].as_str())
        })
        .collect();
    let newest = |c: &Json| (c["timeCreated"].as_str().unwrap_or_default().to_owned(), c["id"].as_str().unwrap_or_default().to_owned());
    ours.sort_by_key(|c| std::cmp::Reverse(newest(c)));
    Ok(ours)
}

async fn get_configuration(ctx: &Context, oci: &Oci, summary: &Json) -> Result<Option<Json>, CloudError> {
    let id = summary["id"].as_str().unwrap_or_default();
    oci.get(ctx, Service::Core, &format!("/instanceConfigurations/{id}")).await
}

/// The cluster's newest instance configuration `<cluster>-ic` the census admits, if one exists.
pub async fn find_configuration(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    name: &str,
    census: &Census,
) -> Result<Option<Json>, CloudError> {
    match configurations(ctx, oci, compartment, name, census).await?.first() {
        Some(summary) => get_configuration(ctx, oci, summary).await,
        None => Ok(None),
    }
}

/// Whether a configuration an earlier release made (no revision tag) is what the spec makes: the same image
/// (or the default one), SSH key and user data (write-only user data the spec does not carry is taken as
/// the same).
fn made_from(config: &Json, spec: &ClusterSpec) -> bool {
    let d = &config["instanceDetails"]["launchDetails"];
    let image = match &spec.image {
        Some(i) => d["sourceDetails"]["imageId"].as_str() == Some(i.as_str()),
        None => tags_of(config).contains_key("hpc:default-image"),
    };
    let ssh = d["metadata"]["ssh_authorized_keys"].as_str() == spec.ssh_public_key.as_deref().map(str::trim);
    let user_data = (spec.user_data_write_only && spec.user_data.is_none())
        || d["metadata"]["user_data"].as_str().map(str::to_owned)
            == crate::clouds::slurm::node_user_data(spec, 0).map(|u| base64::engine::general_purpose::STANDARD.encode(u.expose()));
    image && ssh && user_data
}

/// The configuration for the spec's revision among `summaries`: the one tagged with it, else one an earlier
/// release made from the same settings (adopted: it gets the tag).
async fn configuration_for(ctx: &Context, oci: &Oci, spec: &ClusterSpec, summaries: &[Json]) -> Result<Option<Json>, CloudError> {
    let revision = spec.revision();
    if let Some(tagged) = summaries.iter().find(|c| tags_of(c).get(REVISION_TAG) == Some(&revision)) {
        return get_configuration(ctx, oci, tagged).await;
    }
    for legacy in summaries.iter().filter(|c| !tags_of(c).contains_key(REVISION_TAG)) {
        if let Some(full) = get_configuration(ctx, oci, legacy).await?
            && made_from(&full, spec)
        {
            return Ok(Some(full));
        }
    }
    Ok(None)
}

/// Deletes, best effort, the configurations no node runs any more (a finished rolling update's old ones),
/// other than `current`: one instance list, and one DELETE each (refused while a pool or memory cluster
/// still launches from it; the next apply tries again, the cluster's destroy deletes every one).
async fn drop_stale_configurations(ctx: &Context, oci: &Oci, at: &Location<'_>, summaries: &[Json], current: &str, census: &Census) {
    let stale: Vec<&Json> = summaries.iter().filter(|c| c["id"].as_str() != Some(current)).collect();
    if stale.is_empty() {
        return;
    }
    let Ok(nodes) = observe(ctx, oci, at, census).await else { return };
    let Ok(nodes) = with_details(ctx, oci, at, nodes).await else { return };
    let running: BTreeSet<Option<String>> = nodes.iter().map(|n| tags_of(n).get(REVISION_TAG).cloned()).collect();
    for c in stale {
        if running.contains(&tags_of(c).get(REVISION_TAG).cloned()) {
            continue;
        }
        let id = c["id"].as_str().unwrap_or_default();
        let _ = oci.send(ctx, reqwest::Method::DELETE, Service::Core, &format!("/instanceConfigurations/{id}"), None).await;
    }
}

/// A capacity failure as users need it: what, where, and how many nodes exist. The error keeps its kind and
/// OCI's code (and OCI's own words, "Out of host capacity", in its message), so the cluster's
/// `capacity_policy` decides what happens to the nodes that came.
pub(super) fn capacity_message(spec: &ClusterSpec, err: &CloudError, have: usize) -> CloudError {
    if err.capacity_code().is_some() {
        err.clone().map_message(|err| format!(
            "Out of host capacity: OCI has no free {} hosts in {} right now ({err}). {have} of {} nodes exist; what is kept follows the \
             cluster's capacity_policy. Apply again later to launch the rest, or launch into a capacity reservation \
             (capacity_type = \"reservation\", reservation_id)",
            spec.fabric.sku.name,
            spec.fabric.zone.as_deref().unwrap_or("the availability domain"),
            spec.node_count
        ))
    } else {
        err.clone()
    }
}

/// Before on-demand nodes are launched: OCI's compute capacity report for the shape in the availability
/// domain (CreateComputeCapacityReport: "Use the capacity report to determine whether sufficient capacity
/// is available for a shape before you create an instance", and, in CreateClusterNetwork's words, "before
/// you create a cluster network"). When it reports fewer hosts than the capacity policy needs of the nodes
/// this apply adds (all of them under `all-or-nothing`), nothing is launched: the launch would end below
/// the policy's minimum and be released again, after its hosts had been paid for. The report is a
/// snapshot: a launch it lets through can still fall short, and the policy then settles what came. One
/// call, only when nodes are missing; none for a reservation, spot or a policy that keeps any node.
async fn host_capacity_for(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    compartment: &str,
    zone: &str,
    have: u32,
) -> Result<(), CloudError> {
    let missing = spec.node_count.saturating_sub(have);
    let needed = spec.capacity_policy.min_new(have, missing);
    if needed <= 1 || spec.capacity != crate::model::CapacityType::OnDemand || zone.is_empty() {
        return Ok(());
    }
    let shape = spec.fabric.sku.name;
    let body = json!({"compartmentId": compartment, "availabilityDomain": zone, "shapeAvailabilities": [{"instanceShape": shape}]});
    let (report, _) = oci.create(ctx, Service::Core, "computeCapacityReports", &body, &format!("a capacity report for {shape}")).await?;
    let found = report["shapeAvailabilities"].as_array().into_iter().flatten().find(|a| a["instanceShape"] == shape);
    let Some(available) = found.and_then(|a| a["availableCount"].as_u64()) else { return Ok(()) };
    if available >= u64::from(needed) {
        return Ok(());
    }
    let status = found.and_then(|a| a["availabilityStatus"].as_str()).unwrap_or("OUT_OF_HOST_CAPACITY");
    let why = CloudError::new(
        crate::clouds::ErrorKind::NoCapacity,
        // OCI's own words for a launch no host can take, as its launches fail with them.
        Some("Out of host capacity".to_owned()),
        format!(
            "OCI's capacity report for {zone} gives {available} free {shape} host(s) ({status}); this apply needs {needed} of the \
             {missing} node(s) it adds under capacity_policy \"{}\", so nothing was launched",
            spec.capacity_policy.as_str()
        ),
    );
    Err(capacity_message(spec, &why, have as usize))
}

/// Creates or updates the cluster until it has exactly `node_count` running nodes named `<cluster>-0..`;
/// the nodes it launches come from the spec's node configuration revision (a new instance configuration
/// when none has it), each tagged with that revision. Nodes of another revision are left running: the
/// rolling update removes them batch by batch and calls this again. `settings` are the day-2 settings the
/// configuration gives ([`day2_settings`]), which the instance configuration's tags keep for an import.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    compartment: &str,
    tags: &BTreeMap<String, String>,
    settings: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let f = &spec.fabric;
    let zone = f.zone.clone().unwrap_or_default();
    let at = Location { compartment, zone: &zone, name: &spec.name, placement: f.placement, per_domain: spec.nvlink_domain_nodes() };
    // Everything with the cluster's names is looked at before anything is made.
    let running = observe(ctx, oci, &at, census).await?;
    let summaries = configurations(ctx, oci, compartment, &spec.name, census).await?;
    let existing = configuration_for(ctx, oci, spec, &summaries).await?;
    let memory_clusters = match at.per_domain {
        Some(_) => {
            let all = super::memory::list(ctx, oci, &at).await?;
            super::memory::ours(&all, &at, census);
            all
        }
        None => Vec::new(),
    };
    census.gate()?;
    let have: BTreeSet<u32> =
        running.iter().filter_map(|n| node_index(at.name, n["displayName"].as_str()?)).filter(|i| *i < spec.node_count).collect();
    host_capacity_for(ctx, oci, spec, compartment, &zone, have.len() as u32).await?;
    let joined = join(ctx, oci, compartment, &f.name, &zone, f.placement == Placement::Cluster).await?;
    let revision = spec.revision();
    // What the nodes launched from now on are tagged with: the cluster's tags and their revision.
    let mut launch_tags = tags.clone();
    launch_tags.insert(REVISION_TAG.into(), revision.clone());
    let mut config_tags = launch_tags.clone();
    config_tags.extend(settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    config_tags.insert("hpc:workload".into(), spec.workload.as_str().into());
    if spec.image.is_none() {
        config_tags.insert("hpc:default-image".into(), "true".into());
    }
    let image_of = |c: &Json| c["instanceDetails"]["launchDetails"]["sourceDetails"]["imageId"].as_str().map(str::to_owned);
    // The image the configuration was made with; a new configuration's is the spec's, or the default image
    // the cluster already runs (a new revision of other settings does not move it to a newer image).
    let image = match (existing.as_ref().and_then(image_of), &spec.image) {
        (Some(i), _) => i,
        (None, Some(i)) => i.clone(),
        (None, None) => {
            let defaulted = summaries.iter().find(|c| tags_of(c).contains_key("hpc:default-image"));
            let known = match defaulted {
                Some(c) => get_configuration(ctx, oci, c).await?.as_ref().and_then(image_of),
                None => None,
            };
            match known {
                Some(i) => i,
                None => default_image(ctx, oci, compartment, f.sku.name).await?,
            }
        }
    };
    let config = match existing {
        Some(c) => {
            retag(ctx, oci, "instanceConfigurations", &c, &config_tags).await?;
            c
        }
        None => {
            // `source` says which CreateInstanceConfiguration* model the body is (NONE: the details given
            // here), as the OCI SDK always sends it.
            let body = json!({
                "source": "NONE",
                "compartmentId": compartment,
                "displayName": format!("{}-ic", spec.name),
                "freeformTags": config_tags,
                "instanceDetails": {"instanceType": "compute", "launchDetails": launch_details(spec, compartment, &image, &joined, &launch_tags)},
            });
            oci.create(ctx, Service::Core, "instanceConfigurations", &body, &format!("instance configuration {}-ic", spec.name)).await?.0
        }
    };
    let config_id = config["id"].as_str().unwrap_or_default().to_owned();
    match f.placement {
        Placement::ClusterNetwork => converge_network(ctx, oci, spec, &at, &config_id, &joined, tags, timeout, census).await?,
        // GB200/GB300: each NVLink domain's nodes are launched by its GPU memory cluster.
        _ if at.per_domain.is_some() => {
            let compute_cluster = joined.compute_cluster.as_deref().ok_or_else(|| {
                CloudError::other(format!("fabric {} has no compute cluster: GPU memory clusters are built over one", f.name))
            })?;
            super::memory::converge(ctx, oci, spec, &at, &memory_clusters, &config_id, compute_cluster, tags, timeout, census).await?;
            wait_running(ctx, oci, spec, &at, timeout, census).await?
        }
        _ => {
            let details = launch_instance_details(spec, compartment, &image, &joined, &launch_tags);
            converge_nodes(ctx, oci, spec, &at, &details, tags, &launch_tags, timeout, census).await?
        }
    }
    drop_stale_configurations(ctx, oci, &at, &summaries, &config_id, census).await;
    Ok(())
}

/// Nodes placed one by one (a compute cluster, or none): the extra ones terminated, the kept ones retagged,
/// the missing ones launched from `details` with `launch_tags` (the cluster's tags and the revision).
#[allow(clippy::too_many_arguments)]
async fn converge_nodes(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    details: &Json,
    tags: &BTreeMap<String, String>,
    launch_tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let nodes = observe(ctx, oci, at, census).await?;
    let have: BTreeSet<u32> = nodes.iter().filter_map(|n| node_index(at.name, n["displayName"].as_str()?)).collect();
    // Scale down: the highest indexes go first.
    let extra: Vec<(String, String)> = nodes
        .iter()
        .filter(|n| node_index(at.name, n["displayName"].as_str().unwrap_or_default()).is_none_or(|i| i >= spec.node_count))
        .map(|n| (n["id"].as_str().unwrap_or_default().to_owned(), format!("node {}", n["displayName"].as_str().unwrap_or_default())))
        .collect();
    terminate(ctx, oci, extra, timeout).await?;
    // Tags changed: every remaining node gets them.
    let kept: Vec<Json> = nodes
        .iter()
        .filter(|n| node_index(at.name, n["displayName"].as_str().unwrap_or_default()).is_some_and(|i| i < spec.node_count))
        .cloned()
        .collect();
    futures::stream::iter(kept.into_iter().map(|n| async move { retag_node(ctx, oci, &n, tags).await }))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    let missing: Vec<u32> = (0..spec.node_count).filter(|i| !have.contains(i)).collect();
    let launched = futures::stream::iter(missing.into_iter().map(|i| {
        let mut body = details.clone();
        body["displayName"] = json!(node_name(at.name, i));
        body["freeformTags"] = json!(launch_tags);
        let what = format!("node {}", node_name(at.name, i));
        async move { oci.create(ctx, Service::Core, "instances", &body, &what).await.map(|_| ()) }
    }))
    .buffer_unordered(PARALLEL)
    .collect::<Vec<Result<(), CloudError>>>()
    .await;
    if let Some(Err(e)) = launched.iter().find(|r| r.is_err()) {
        let now = observe(ctx, oci, at, census).await.map(|n| n.len()).unwrap_or(0);
        return Err(capacity_message(spec, e, now));
    }
    wait_running(ctx, oci, spec, at, timeout, census).await
}

/// Waits until every node has come up (RUNNING; a node stopped outside, which the refresh reports as
/// unhealthy, is not waited for), with one list call per round; a node that dies on the way is named.
async fn wait_running(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let want = spec.node_count as usize;
    let progress = crate::clouds::shared::Progress::new();
    crate::clouds::shared::wait_for(ctx, &format!("{want} node(s) to run"), timeout, || async {
        let nodes = observe(ctx, oci, at, census).await?;
        let count = |states: &[&str]| nodes.iter().filter(|n| states.contains(&node_state(n).as_str())).count() as u32;
        let (running, starting) = (count(&["RUNNING"]), count(&["PROVISIONING", "STARTING"]));
        let pending_capacity = (want as u32).saturating_sub(nodes.len() as u32);
        let counts = crate::clouds::shared::NodeCounts { running, total: want as u32, starting, pending_capacity };
        progress.nodes(&spec.name, counts);
        if nodes.len() < want {
            let why = format!("only {} of {want} nodes came up (OCI terminated the others while launching them)", nodes.len());
            return Err(CloudError::other(why));
        }
        let up = nodes.iter().filter(|n| matches!(node_state(n).as_str(), "RUNNING" | "STOPPED")).count();
        let launching = nodes.iter().any(|n| matches!(node_state(n).as_str(), "PROVISIONING" | "STARTING"));
        Ok((up >= want && !launching).then_some(()))
    })
    .await
}

#[allow(clippy::too_many_arguments)]
async fn converge_network(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    config_id: &str,
    joined: &Joined,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let what = format!("cluster network {}-cn", spec.name);
    let work = match find_network(ctx, oci, at.compartment, at.name, census).await? {
        None => {
            let body = json!({
                "compartmentId": at.compartment,
                "displayName": format!("{}-cn", spec.name),
                "freeformTags": tags,
                "instancePools": [{"instanceConfigurationId": config_id, "size": spec.node_count, "displayName": format!("{}-pool", spec.name)}],
                "placementConfiguration": {"availabilityDomain": at.zone, "primaryVnicSubnets": {"subnetId": joined.subnet}},
            });
            oci.create(ctx, Service::Core, "clusterNetworks", &body, &what).await.map_err(|e| capacity_message(spec, &e, 0))?.1
        }
        Some(cn) => {
            // Made from the cluster network as it is when written (`if-match`), read again if it changed.
            let resized = |cn: &Json| {
                let pool = &cn["instancePools"][0];
                let size = pool["size"].as_u64().unwrap_or(0);
                // A new revision's configuration: the pool launches from it from now on (its instances keep theirs).
                let reconfigured = pool["instanceConfigurationId"].as_str() != Some(config_id);
                (size != u64::from(spec.node_count) || tags_of(cn) != *tags || reconfigured).then(|| {
                    let mut update = json!({"id": pool["id"], "size": spec.node_count});
                    if reconfigured {
                        update["instanceConfigurationId"] = json!(config_id);
                    }
                    json!({"instancePools": [update], "freeformTags": tags})
                })
            };
            if resized(&cn).is_some() {
                let id = cn["id"].as_str().unwrap_or_default();
                oci.rewrite(ctx, Service::Core, &format!("/clusterNetworks/{id}"), &what, resized).await?.and_then(|(_, wr)| wr)
            } else {
                None
            }
        }
    };
    // A work request that failed for want of hosts may have left part of the pool running (a resize OCI
    // could only partly place): those nodes are still named and tagged below, so that the state and the
    // capacity policy see them under the cluster's names, and then the failure is returned.
    let failed = match work {
        Some(wr) => oci.wait_work_request(ctx, Service::Core, &wr, &format!("building {what}"), timeout).await.err(),
        None => None,
    };
    // OCI names pool instances itself; give them the cluster's names, filling gaps from the lowest index, and
    // the cluster's tags beside the revision their configuration gave them.
    let nodes = observe(ctx, oci, at, census).await?;
    let taken: BTreeSet<u32> =
        nodes.iter().filter_map(|n| node_index(at.name, n["displayName"].as_str()?)).filter(|i| *i < spec.node_count).collect();
    let unnamed: Vec<Json> = nodes
        .into_iter()
        .filter(|n| node_index(at.name, n["displayName"].as_str().unwrap_or_default()).is_none_or(|i| i >= spec.node_count))
        .collect();
    let unnamed = if unnamed.is_empty() { unnamed } else { with_details(ctx, oci, at, unnamed).await? };
    let mut free = (0..spec.node_count).filter(|i| !taken.contains(i));
    let revision = spec.revision();
    let renames: Vec<(String, String)> =
        unnamed.iter().filter_map(|n| Some((n["id"].as_str()?.to_owned(), node_name(at.name, free.next()?)))).collect();
    let revision = &revision;
    futures::stream::iter(renames.into_iter().map(|(id, name)| async move {
        // The node's own keys as it has them when written (`if-match`).
        let renamed = |n: &Json| Some(json!({"displayName": name, "freeformTags": node_tags(&tags_of(n), tags, Some(revision))}));
        oci.rewrite(ctx, Service::Core, &format!("/instances/{id}"), &format!("node {name}"), renamed).await.map(|_| ())
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<()>>()
    .await?;
    if let Some(e) = failed {
        let now = observe(ctx, oci, at, census).await.map(|n| n.len()).unwrap_or(0);
        return Err(capacity_message(spec, &e, now));
    }
    wait_running(ctx, oci, spec, at, timeout, census).await
}

/// Terminates every node (or the cluster network) the census admits and waits for it, then deletes the
/// configurations (one per revision a rolling update left).
pub async fn delete(ctx: &Context, oci: &Oci, at: &Location<'_>, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    // GPU memory clusters first: deleting one terminates its instances (any node left is terminated below).
    if at.per_domain.is_some() {
        super::memory::delete(ctx, oci, at, timeout, census).await?;
    }
    if at.placement == Placement::ClusterNetwork {
        if let Some(cn) = find_network(ctx, oci, at.compartment, at.name, census).await? {
            let id = cn["id"].as_str().unwrap_or_default();
            let what = format!("cluster network {}-cn", at.name);
            if let Some(wr) = oci.delete(ctx, Service::Core, &format!("/clusterNetworks/{id}"), &what, timeout).await? {
                oci.wait_work_request(ctx, Service::Core, &wr, &format!("terminating {what}"), timeout).await?;
            }
        }
    } else {
        let nodes = observe(ctx, oci, at, census).await?;
        let all = nodes
            .iter()
            .map(|n| (n["id"].as_str().unwrap_or_default().to_owned(), format!("node {}", n["displayName"].as_str().unwrap_or_default())))
            .collect();
        terminate(ctx, oci, all, timeout).await?;
    }
    wait_terminated(ctx, oci, at, timeout, census).await?;
    for c in configurations(ctx, oci, at.compartment, at.name, census).await? {
        let id = c["id"].as_str().unwrap_or_default();
        oci.delete(
            ctx,
            Service::Core,
            &format!("/instanceConfigurations/{id}"),
            &format!("instance configuration {}-ic", at.name),
            timeout,
        )
        .await?;
    }
    Ok(())
}

/// Terminates instances `(id, what)`, a few at a time.
async fn terminate(ctx: &Context, oci: &Oci, nodes: Vec<(String, String)>, timeout: Duration) -> Result<(), CloudError> {
    futures::stream::iter(nodes.into_iter().map(|(id, what)| async move {
        oci.delete(ctx, Service::Core, &format!("/instances/{id}?preserveBootVolume=false"), &what, timeout).await.map(|_| ())
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<()>>()
    .await
    .map(|_| ())
}

/// Waits until no node of the cluster (this owner's) is left but terminated ones (one list per round).
async fn wait_terminated(ctx: &Context, oci: &Oci, at: &Location<'_>, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
    crate::clouds::shared::wait_for(ctx, &format!("the nodes of {} to terminate", at.name), timeout, || async {
        let all = oci.list(ctx, Service::Core, "instances", &q).await?;
        let left = all.iter().any(|i| {
            let tags = tags_of(i);
            let named = tags.get("hpc:cluster").map(String::as_str) == Some(at.name)
                || node_index(at.name, i["displayName"].as_str().unwrap_or_default()).is_some();
            named && census.claims(marker_in(&tags)) && i["lifecycleState"].as_str() != Some("TERMINATED")
        });
        Ok((!left).then_some(()))
    })
    .await
}

/// The named nodes among `nodes`: (OCID, name, state).
fn named<'a>(nodes: &'a [Json], names: &[String]) -> Vec<(&'a str, &'a str, String)> {
    nodes
        .iter()
        .filter_map(|n| {
            let name = n["displayName"].as_str()?;
            names.iter().any(|w| w == name).then(|| (n["id"].as_str().unwrap_or_default(), name, node_state(n)))
        })
        .collect()
}

/// Day 2: removes the named nodes the census admits and waits until OCI has terminated them, so that
/// [`converge`] makes them again under their names, in their place, from the spec's configuration. A node
/// placed on its own (compute cluster, GPU memory cluster) is terminated: a memory cluster then counts one
/// instance fewer and its resize back launches the new one on the same fabric. A cluster network's node is
/// detached from the pool, terminated and the pool made one smaller (DetachInstancePoolInstance with
/// isAutoTerminate and isDecrementSize), one at a time; converge then points the pool at the spec's
/// configuration and brings it back to its size, and names the new instance. Names not found are skipped.
pub async fn remove_nodes(
    ctx: &Context,
    oci: &Oci,
    at: &Location<'_>,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let nodes = observe(ctx, oci, at, census).await?;
    let victims = named(&nodes, names);
    if victims.is_empty() {
        return Ok(());
    }
    if at.placement == Placement::ClusterNetwork {
        let what = format!("cluster network {}-cn", at.name);
        let cn =
            find_network(ctx, oci, at.compartment, at.name, census).await?.ok_or_else(|| CloudError::other(format!("{what} is gone")))?;
        let (cn_id, pool) = (cn["id"].as_str().unwrap_or_default(), cn["instancePools"][0]["id"].as_str().unwrap_or_default());
        for (id, name, _) in &victims {
            // OCI scales the pool for each detach: one at a time, each on a RUNNING cluster network.
            let path = format!("/clusterNetworks/{cn_id}");
            oci.wait_state(
                ctx,
                Service::Core,
                &path,
                &["RUNNING"],
                &["TERMINATING", "TERMINATED"],
                &format!("waiting for {what}"),
                timeout,
            )
            .await?;
            let body = json!({"instanceId": id, "isDecrementSize": true, "isAutoTerminate": true});
            let detaching = format!("detaching node {name} from {what}");
            let (_, wr) = oci
                .action_with_work_request(
                    ctx,
                    Service::Core,
                    &format!("/instancePools/{pool}/actions/detachInstance"),
                    Some(&body),
                    &detaching,
                )
                .await?;
            if let Some(wr) = wr {
                oci.wait_work_request(ctx, Service::Core, &wr, &detaching, timeout).await?;
            }
        }
    } else {
        let all = victims.iter().map(|(id, name, _)| ((*id).to_owned(), format!("node {name}"))).collect();
        terminate(ctx, oci, all, timeout).await?;
    }
    let ids: Vec<&str> = victims.iter().map(|(id, _, _)| *id).collect();
    let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
    let which = victims.iter().map(|(_, n, _)| *n).collect::<Vec<_>>().join(", ");
    crate::clouds::shared::wait_for(ctx, &format!("{which} to terminate"), timeout, || async {
        let all = oci.list(ctx, Service::Core, "instances", &q).await?;
        let left =
            all.iter().any(|i| i["id"].as_str().is_some_and(|id| ids.contains(&id)) && i["lifecycleState"].as_str() != Some("TERMINATED"));
        Ok((!left).then_some(()))
    })
    .await
}

/// How long a reset node may keep reading RUNNING before it counts as restarted: OCI may answer the
/// action, and list the instance, as RUNNING for a moment before it goes down.
const RESET_SEEN_WITHIN: Duration = Duration::from_secs(60);

/// Day 2: restarts the named nodes the census admits in place (InstanceAction RESET, START for a stopped
/// one) and waits until each has gone down and is RUNNING again, one instance list per round.
pub async fn reboot_nodes(
    ctx: &Context,
    oci: &Oci,
    at: &Location<'_>,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let nodes = observe(ctx, oci, at, census).await?;
    let victims: Vec<(String, String, String)> =
        named(&nodes, names).into_iter().map(|(id, name, state)| (id.to_owned(), name.to_owned(), state)).collect();
    if victims.is_empty() {
        return Ok(());
    }
    let actions: Vec<(String, String, String)> = victims
        .iter()
        .map(|(id, name, state)| (id.clone(), name.clone(), if state == "STOPPED" { "START" } else { "RESET" }.to_owned()))
        .collect();
    let answers = futures::stream::iter(actions.into_iter().map(|(id, name, action)| async move {
        let body =
            oci.action(ctx, Service::Core, &format!("/instances/{id}?action={action}"), None, &format!("{action} of node {name}")).await?;
        Ok::<_, String>((id, node_state(&body)))
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<(String, String)>>()
    .await?;
    // Nodes seen not RUNNING since the action: they went down (or were down) and are restarting.
    let down = std::sync::Mutex::new(answers.into_iter().filter(|(_, s)| s != "RUNNING").map(|(id, _)| id).collect::<BTreeSet<String>>());
    let started = tokio::time::Instant::now();
    let which = victims.iter().map(|(_, n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    crate::clouds::shared::wait_for(ctx, &format!("{which} to run again"), timeout, || async {
        let nodes = observe(ctx, oci, at, census).await?;
        let mut down = down.lock().unwrap_or_else(|e| e.into_inner());
        let mut all_up = true;
        for (id, name, _) in &victims {
            let Some(n) = nodes.iter().find(|n| n["id"].as_str() == Some(id.as_str())) else {
                return Err(format!("node {name} was terminated while it restarted").into());
            };
            if node_state(n) != "RUNNING" {
                down.insert(id.clone());
                all_up = false;
            }
        }
        let restarted = victims.iter().all(|(id, _, _)| down.contains(id)) || started.elapsed() >= RESET_SEEN_WITHIN;
        Ok((all_up && restarted).then_some(()))
    })
    .await
}

/// The instance configuration's tags that keep the day-2 settings a configuration gives (not their
/// defaults), as `hpc:workload` keeps the workload, so that an import gives them back: `repair`,
/// `max_repairs` and the `update_strategy` block (`hpc:update-strategy` marks the block, its attributes have
/// their own tags).
const REPAIR_TAG: &str = "hpc:repair";
const MAX_REPAIRS_TAG: &str = "hpc:max-repairs";
const UPDATE_STRATEGY_TAG: &str = "hpc:update-strategy";
const BATCH_SIZE_TAG: &str = "hpc:batch-size";
const WAIT_FOR_SELFCHECK_TAG: &str = "hpc:wait-for-selfcheck";
/// `node_identity` (the dynamic group the nodes publish their self-check as), which OCI keeps nowhere else.
const NODE_IDENTITY_TAG: &str = "hpc:node-identity";
/// `on_maintenance` (what an apply does with a node OCI has scheduled maintenance on).
const ON_MAINTENANCE_TAG: &str = "hpc:on-maintenance";

/// The day-2 settings of a cluster's configuration, as the instance configuration's tags keep them.
pub fn day2_settings(config: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let kept = [
        ("repair", REPAIR_TAG),
        ("max_repairs", MAX_REPAIRS_TAG),
        ("node_identity", NODE_IDENTITY_TAG),
        ("on_maintenance", ON_MAINTENANCE_TAG),
    ];
    for (attr, tag) in kept {
        if let Some(v) = config.get(attr).as_str() {
            out.insert(tag.to_owned(), v.to_owned());
        }
    }
    let strategy = config.get("update_strategy");
    if strategy.is_present() {
        out.insert(UPDATE_STRATEGY_TAG.to_owned(), "true".to_owned());
        if let Some(v) = strategy.get("batch_size").as_str() {
            out.insert(BATCH_SIZE_TAG.to_owned(), v.to_owned());
        }
        if let Some(v) = strategy.get("wait_for_selfcheck").as_bool() {
            out.insert(WAIT_FOR_SELFCHECK_TAG.to_owned(), v.to_string());
        }
    }
    out
}

/// The day-2 settings an import gives back from the instance configuration's tags.
fn imported_day2(tags: &BTreeMap<String, String>) -> [(&'static str, Value); 5] {
    let strategy = if tags.contains_key(UPDATE_STRATEGY_TAG) {
        Value::object([
            ("batch_size", Value::from(tags.get(BATCH_SIZE_TAG).cloned())),
            ("wait_for_selfcheck", tags.get(WAIT_FOR_SELFCHECK_TAG).map_or(Value::Null, |v| Value::from(v == "true"))),
        ])
    } else {
        Value::Null
    };
    [
        ("repair", Value::from(tags.get(REPAIR_TAG).cloned())),
        ("max_repairs", Value::from(tags.get(MAX_REPAIRS_TAG).cloned())),
        ("update_strategy", strategy),
        ("node_identity", Value::from(tags.get(NODE_IDENTITY_TAG).cloned())),
        ("on_maintenance", Value::from(tags.get(ON_MAINTENANCE_TAG).cloned())),
    ]
}

/// The configuration an import rebuilds from the instance configuration and the nodes.
pub async fn imported_config(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    name: &str,
    defaults: &BTreeMap<String, String>,
    census: &Census,
) -> Result<(Value, Placement), CloudError> {
    let config = find_configuration(ctx, oci, compartment, name, census)
        .await?
        .ok_or_else(|| CloudError::other(format!("no cluster named {name:?} in the compartment: no instance configuration {name}-ic")))?;
    let tags = tags_of(&config);
    let fabric =
        tags.get("hpc:fabric").ok_or_else(|| CloudError::other(format!("instance configuration {name}-ic has no hpc:fabric tag")))?;
    let (fabric_ref, _) = super::fabric::fabric_ref(ctx, oci, compartment, fabric).await?;
    let placement = match fabric_ref.get("placement").as_str() {
        Some("cluster-network") => Placement::ClusterNetwork,
        Some("none") => Placement::None,
        _ => Placement::Cluster,
    };
    let zone = fabric_ref.get("zone").as_str().unwrap_or_default().to_owned();
    let per_domain = fabric_ref.get("instance_type").as_str().and_then(per_domain);
    let nodes = observe(ctx, oci, &Location { compartment, zone: &zone, name, placement, per_domain }, census).await?;
    let d = &config["instanceDetails"]["launchDetails"];
    let reservation = d["capacityReservationId"].as_str().map(str::to_owned);
    let capacity = match (d["preemptibleInstanceConfig"].is_object(), &reservation) {
        (true, _) => "spot",
        (_, Some(_)) => "reservation",
        _ => "on-demand",
    };
    let image = (!tags.contains_key("hpc:default-image")).then(|| d["sourceDetails"]["imageId"].as_str().unwrap_or_default().to_owned());
    let whole = d["metadata"]["user_data"]
        .as_str()
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
        .and_then(|b| String::from_utf8(b).ok());
    // The Slurm join the nodes were made with, key included: adopted, never made anew.
    let slurm = crate::clouds::slurm::join_value(whole.as_deref());
    let user_data = crate::clouds::slurm::user_part(whole);
    let ssh = d["metadata"]["ssh_authorized_keys"].as_str().map(str::to_owned);
    let user = crate::clouds::shared::user_tags(crate::catalog::Cloud::Oci, &tags, defaults);
    let [repair, max_repairs, strategy, identity, maintenance] = imported_day2(&tags);
    let config = Value::object([
        repair,
        max_repairs,
        strategy,
        identity,
        maintenance,
        ("name", Value::from(name)),
        ("fabric", fabric_ref),
        ("node_count", Value::int(nodes.len() as i64)),
        ("capacity_type", Value::from(capacity)),
        ("reservation_id", Value::from(reservation)),
        ("image", Value::from(image)),
        ("user_data", Value::from(user_data)),
        ("slurm", slurm),
        ("ssh_public_key", Value::from(ssh)),
        ("workload", Value::from(tags.get("hpc:workload").cloned())),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]);
    Ok((config, placement))
}

/// The node piece of a cluster's expansion.
pub(super) const NODES: &str = "oci_core_instance";
const CONFIGURATION: &str = "oci_core_instance_configuration";

/// Where an OCI cluster lives, from its fabric reference.
#[derive(Debug, PartialEq, Eq)]
struct Site {
    region: String,
    compartment: String,
    /// The availability domain.
    zone: String,
    placement: Placement,
    /// Nodes per NVLink domain of a GB200/GB300 cluster (its domains are GPU memory clusters).
    per_domain: Option<u32>,
}

impl Site {
    fn at<'a>(&'a self, name: &'a str) -> cluster::Location<'a> {
        cluster::Location { compartment: &self.compartment, zone: &self.zone, name, placement: self.placement, per_domain: self.per_domain }
    }
}

/// The site of a cluster (planned or in state): region and compartment from its fabric's id, availability
/// domain and placement as the fabric reference says; None without an OCI fabric id.
fn location(v: &Value) -> Option<Site> {
    let fabric = v.get("fabric");
    let (region, compartment) = fabric_place(v)?;
    let placement = fabric.get("placement").as_str().and_then(Placement::parse).unwrap_or(Placement::Cluster);
    let shape = v.get("instance_type").as_str().or(fabric.get("instance_type").as_str()).unwrap_or_default();
    let zone = fabric.get("zone").as_str().unwrap_or_default().to_owned();
    Some(Site { region, compartment, zone, placement, per_domain: cluster::per_domain(shape) })
}

/// What the day-2 core asks of a cluster's nodes besides the converge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Day2Work {
    Remove,
    Reboot,
}

/// Day-2 work asked for before the cluster's compartment was known here, to be done by the apply that
/// follows on the same census (see [`day2_nodes`]).
struct Deferred {
    census: (usize, String),
    cluster: String,
    work: Day2Work,
    names: Vec<String>,
}

static DEFERRED: std::sync::Mutex<Vec<Deferred>> = std::sync::Mutex::new(Vec::new());

/// The census's address and its owner's marker: the one operation the core passes to both calls.
fn census_key(step: &Step<'_>) -> (usize, String) {
    (std::ptr::from_ref(step.census) as usize, step.census.owner().marker().to_owned())
}

/// Where a cluster's day-2 calls go: the spec gives region, availability domain and placement; the
/// compartment is its own fabric's or, for a cluster on a fabric, the one in the cluster's id
/// (`oci/<region>/<compartment>/<name>`), which the census holds once an apply has set it. `None` when
/// neither is known.
fn day2_site(step: &Step<'_>, spec: &ClusterSpec) -> Option<Site> {
    let f = &spec.fabric;
    let from_id = || {
        let id = step.census.import_id()?;
        let (region, compartment, name) = api::parse_id(&id)?;
        (region == f.region && name == spec.name).then(|| compartment.to_owned())
    };
    let compartment = spec.own_fabric.as_ref().and_then(|o| o.compartment_id.clone()).or_else(from_id)?;
    Some(Site {
        region: f.region.clone(),
        compartment,
        zone: f.zone.clone().unwrap_or_default(),
        placement: f.placement,
        per_domain: spec.nvlink_domain_nodes(),
    })
}

async fn day2_at(step: &Step<'_>, site: &Site, name: &str, work: Day2Work, names: &[String]) -> Result<(), CloudError> {
    let client = api::connect(step.ctx, &site.region)?;
    let at = site.at(name);
    match work {
        Day2Work::Remove => cluster::remove_nodes(step.ctx, &client, &at, names, step.timeout, step.census).await,
        Day2Work::Reboot => cluster::reboot_nodes(step.ctx, &client, &at, names, step.timeout, step.census).await,
    }
}

/// Removes or reboots the named nodes. The spec carries no compartment for a cluster on a fabric (it is in
/// the fabric's and the cluster's ids, in the plan): when the census does not know it yet (a repair comes
/// before the apply that sets it), the work is deferred to that apply, which does it first, on the same
/// census, before it converges.
async fn day2_nodes(step: &Step<'_>, spec: &ClusterSpec, names: &[String], work: Day2Work) -> Result<(), CloudError> {
    match day2_site(step, spec) {
        Some(site) => day2_at(step, &site, &spec.name, work, names).await,
        None => {
            let mut deferred = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
            deferred.push(Deferred { census: census_key(step), cluster: spec.name.clone(), work, names: names.to_vec() });
            Ok(())
        }
    }
}

/// Does the day-2 work deferred to this apply (same census, same cluster), in the order it was asked.
async fn deferred_day2(step: &Step<'_>, site: &Site, name: &str) -> Result<(), CloudError> {
    let mine: Vec<Deferred> = {
        let mut deferred = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest) = std::mem::take(&mut *deferred).into_iter().partition(|d| d.census == census_key(step) && d.cluster == name);
        *deferred = rest;
        mine
    };
    for d in mine {
        day2_at(step, site, name, d.work, &d.names).await?;
    }
    Ok(())
}

/// The cluster's live nodes with their addresses.
async fn live_nodes(step: &Step<'_>, client: &api::Oci, at: &cluster::Location<'_>) -> Result<Vec<NodeAddress>, CloudError> {
    let nodes = cluster::observe(step.ctx, client, at, step.census).await?;
    cluster::addresses(step.ctx, client, at, &nodes).await
}

/// A cluster state brought to its nodes and, for GB200/GB300, to each NVLink domain's GPU memory cluster
/// (`clusters`, `None` when not read).
fn with_found(
    state: &Value,
    at: &cluster::Location<'_>,
    nodes: &[NodeAddress],
    clusters: Option<&BTreeMap<String, serde_json::Value>>,
) -> Value {
    let out = shared::with_nodes(state, Cloud::Oci, NODES, nodes);
    match at.per_domain {
        Some(per) => memory::with_domains(&out, nodes, clusters, per),
        None => out,
    }
}

/// The cluster's own GPU memory clusters (one list), for a GB200/GB300 cluster only.
async fn memory_clusters(
    step: &Step<'_>,
    client: &api::Oci,
    at: &cluster::Location<'_>,
) -> Result<Option<BTreeMap<String, serde_json::Value>>, CloudError> {
    match at.per_domain {
        Some(_) => memory::clusters(step.ctx, client, at, step.census).await.map(Some),
        None => Ok(None),
    }
}

/// `state` brought to the nodes that exist, or as it is when they cannot be listed.
async fn with_live(step: &Step<'_>, client: &api::Oci, at: &cluster::Location<'_>, state: &Value) -> Value {
    let clusters = memory_clusters(step, client, at).await.ok().flatten();
    match live_nodes(step, client, at).await {
        Ok(nodes) => with_found(state, at, &nodes, clusters.as_ref()),
        Err(_) => state.clone(),
    }
}

#[async_trait]
impl Backend<ClusterSpec> for backend::Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx)
    }

    fn id(&self, _spec: &ClusterSpec) -> Option<String> {
        // The compartment is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    /// `in us-ashburn-1 (Uocm:US-ASHBURN-AD-2)`: region and availability domain of the fabric.
    fn place(&self, v: &Value) -> String {
        let region = fabric_region(v);
        match v.get("fabric").get("zone").as_str() {
            Some(zone) if !zone.is_empty() => format!("in {region} ({zone})"),
            _ => format!("in {region}"),
        }
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let Some(site) = location(change.planned) else { return Outcome::failed(change.prior.clone(), no_fabric_id("cluster")) };
        let client = match api::connect(step.ctx, &site.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let spec = change.spec;
        let at = site.at(name_of(change.planned));
        let id = api::resource_id(&site.region, &site.compartment, &spec.name);
        step.census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        if let Err(e) = deferred_day2(step, &site, &spec.name).await {
            return Outcome::failed(with_live(step, &client, &at, &state).await, e);
        }
        let settings = cluster::day2_settings(change.config);
        match cluster::converge(step.ctx, &client, spec, &site.compartment, change.tags, &settings, step.timeout, step.census).await {
            // Where the plan left `nodes` unknown, the nodes as they now are; a failed lookup leaves it null
            // for the next refresh.
            Ok(()) if change.planned.get("nodes").is_unknown() => match live_nodes(step, &client, &at).await {
                Ok(nodes) => Outcome::done(shared::with_attr(&state, "nodes", shared::nodes_value(&nodes))),
                Err(_) => Outcome::done(state),
            },
            Ok(()) => Outcome::done(state),
            Err(e) => Outcome::failed(with_live(step, &client, &at, &state).await, e),
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let Some(site) = location(prior) else { return Outcome::failed(prior.clone(), no_fabric_id("cluster")) };
        let client = match api::connect(step.ctx, &site.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let at = site.at(name_of(prior));
        match cluster::delete(step.ctx, &client, &at, step.timeout, step.census).await {
            Ok(()) => Outcome::done(Value::Null),
            Err(e) => Outcome::failed(with_live(step, &client, &at, prior).await, e),
        }
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, CloudError> {
        let Some(site) = location(state) else { return Ok(Some(state.clone())) };
        let name = name_of(state);
        let client = api::connect(step.ctx, &site.region)?;
        let at = site.at(name);
        // One ListInstances (and for GB200/GB300 one ListComputeGpuMemoryClusters), whatever the size.
        let nodes = cluster::observe(step.ctx, &client, &at, step.census).await;
        let config = cluster::find_configuration(step.ctx, &client, &site.compartment, name, step.census).await;
        let clusters = memory_clusters(step, &client, &at).await?;
        match (nodes, config) {
            (Ok(nodes), Ok(None)) if nodes.is_empty() && clusters.as_ref().is_none_or(BTreeMap::is_empty) => Ok(None),
            (Ok(nodes), Ok(config)) => {
                let nodes = cluster::addresses(step.ctx, &client, &at, &nodes).await?;
                let out = with_found(state, &at, &nodes, clusters.as_ref());
                Ok(Some(if config.is_none() { shared::with_missing(&out, |k| k != CONFIGURATION) } else { out }))
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "cluster", "train")?;
        let client = api::connect(step.ctx, region).map_err(ImportError::failed)?;
        let (config, _) = cluster::imported_config(step.ctx, &client, compartment, name, step.default_tags, step.census)
            .await
            .map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[async_trait]
impl ClusterBackend for backend::Oci {
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        day2_nodes(step, spec, names, Day2Work::Remove).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        day2_nodes(step, spec, names, Day2Work::Reboot).await
    }

    fn node_piece(&self) -> &'static str {
        NODES
    }

    /// The Compute service limit of the shape's GPUs in the fabric's availability domain.
    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        limits::family(spec)
    }

    /// One GetResourceAvailability on the region's Limits endpoint, for the tenancy.
    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
        let client = api::connect(ctx, &limits::region_of(family))?;
        limits::read(ctx, &client, family).await
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), CloudError> {
        let f = &spec.fabric;
        let zone = f.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx, &f.region)?;
        let compartment = spec.own_fabric.as_ref().and_then(|o| o.compartment_id.clone()).unwrap_or_default();
        let at = cluster::Location {
            compartment: &compartment,
            zone: &zone,
            name: &spec.name,
            placement: f.placement,
            per_domain: spec.nvlink_domain_nodes(),
        };
        cluster::observe(step.ctx, &client, &at, step.census).await?;
        if at.per_domain.is_some() {
            memory::clusters(step.ctx, &client, &at, step.census).await?;
        }
        cluster::find_configuration(step.ctx, &client, &compartment, &spec.name, step.census).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::super::backend::tests::{COMPARTMENT, fabric_ref, on_fabric};
    use super::*;

    #[test]
    fn a_node_is_unhealthy_when_stopped_and_a_maintenance_reboot_due_is_maintenance() {
        for (node, health, maintenance) in [
            (json!({"lifecycleState": "RUNNING"}), None, None),
            (json!({"lifecycleState": "PROVISIONING"}), None, None),
            (json!({"state": "Starting"}), None, None),
            (json!({"lifecycleState": "STOPPED"}), Some("state STOPPED"), None),
            (json!({"lifecycleState": "STOPPING", "timeMaintenanceRebootDue": "2026-12-05T00:00:00.000Z"}), Some("state STOPPING"), None),
            (
                json!({"lifecycleState": "RUNNING", "timeMaintenanceRebootDue": "2026-12-05T06:30:29.600Z"}),
                None,
                Some("maintenance reboot due 2026-12-05T06:30Z"),
            ),
            (json!({"lifecycleState": "RUNNING", "timeMaintenanceRebootDue": ""}), None, None),
        ] {
            assert_eq!((health_of(&node).as_deref(), maintenance_of(&node).as_deref()), (health, maintenance), "{node}");
        }
        // A time with another offset is shown in UTC, as every cloud's times are.
        let due = json!({"lifecycleState": "RUNNING", "timeMaintenanceRebootDue": "2026-12-05T00:00+01:00"});
        assert_eq!(maintenance_of(&due).as_deref(), Some("maintenance reboot due 2026-12-04T23:00Z"));
    }

    #[test]
    fn any_instance_answer_reads_a_health_and_a_state_without_a_panic() {
        let node = json!({"id": "ocid1.instance", "displayName": "lib-3", "lifecycleState": "RUNNING",
                          "timeMaintenanceRebootDue": "2026-12-05T06:30:29.600Z", "freeformTags": {"hpc:revision": "r1"}});
        let summary = json!({"id": "ocid1.instance", "displayName": "lib-4", "state": "Running"});
        let list = |j: Json| j.as_array().cloned().unwrap_or_else(|| vec![j]);
        let strategy = proptest::strategy::Strategy::prop_map(crate::fuzz::answers(vec![json!([node, summary])]), list);
        crate::fuzz::check("health_of", strategy, |nodes| {
            for n in &nodes {
                let state = node_state(n);
                if health_of(n).is_none() && !state.is_empty() && !matches!(state.as_str(), "RUNNING" | "PROVISIONING" | "STARTING") {
                    return Err(format!("{n}: state {state} is not healthy"));
                }
            }
            let names: Vec<String> = nodes.iter().filter_map(|n| n["displayName"].as_str().map(str::to_owned)).collect();
            let _ = named(&nodes, &names);
            Ok(())
        });
    }

    #[test]
    fn retagging_a_node_keeps_its_revision_and_selfcheck_verdict() {
        let tags: BTreeMap<String, String> =
            [("hpc:cluster", "c"), ("team", "ml")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let live: BTreeMap<String, String> = [("hpc:cluster", "c"), ("old", "x"), ("hpc:selfcheck", "ok"), ("hpc:revision", "r1")]
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let out = node_tags(&live, &tags, Some("r2"));
        assert_eq!(out.get("hpc:revision").map(String::as_str), Some("r1"), "the node's own revision wins");
        assert_eq!(out.get("hpc:selfcheck").map(String::as_str), Some("ok"));
        assert_eq!((out.get("team").map(String::as_str), out.contains_key("old")), (Some("ml"), false), "user tags are the cluster's");
        let fresh = node_tags(&BTreeMap::new(), &tags, Some("r2"));
        assert_eq!(fresh.get("hpc:revision").map(String::as_str), Some("r2"));
        assert!(!node_tags(&BTreeMap::new(), &tags, None).contains_key("hpc:revision"));
    }

    #[test]
    fn day2_settings_round_trip_through_the_configurations_tags() {
        let config = Value::object([
            ("repair", Value::from("report")),
            ("max_repairs", Value::Null),
            ("update_strategy", Value::object([("batch_size", Value::from("2")), ("wait_for_selfcheck", Value::from(true))])),
            ("node_identity", Value::from("ocid1.dynamicgroup.oc1..hpc")),
            ("on_maintenance", Value::from("replace")),
        ]);
        let tags = day2_settings(&config);
        assert_eq!(
            tags.keys().collect::<Vec<_>>(),
            ["hpc:batch-size", "hpc:node-identity", "hpc:on-maintenance", "hpc:repair", "hpc:update-strategy", "hpc:wait-for-selfcheck"]
        );
        let [repair, max_repairs, strategy, identity, maintenance] = imported_day2(&tags);
        assert_eq!(maintenance.1, Value::from("replace"), "on_maintenance comes back");
        assert_eq!(identity.1, Value::from("ocid1.dynamicgroup.oc1..hpc"), "OCI keeps node_identity only in the tags");
        assert_eq!((repair.1, max_repairs.1), (Value::from("report"), Value::Null));
        assert_eq!(strategy.1.get("batch_size"), &Value::from("2"));
        assert_eq!(strategy.1.get("wait_for_selfcheck"), &Value::from(true));
        // Nothing set, nothing kept: an import gives the defaults.
        assert!(day2_settings(&Value::object([("name", Value::from("c"))])).is_empty());
        assert_eq!(imported_day2(&BTreeMap::new())[2].1, Value::Null);
    }

    #[test]
    fn cluster_network_states_are_read_in_any_casing() {
        for (node, state) in [
            (json!({"state": "Running"}), "RUNNING"),
            (json!({"state": "Terminated"}), "TERMINATED"),
            (json!({"lifecycleState": "RUNNING"}), "RUNNING"),
            (json!({}), ""),
        ] {
            assert_eq!(node_state(&node), state, "{node}");
        }
    }
    use serde_json::json;

    #[test]
    fn a_cluster_lives_where_its_fabric_id_says() {
        let site = location(&on_fabric(fabric_ref(Some("cluster-network")))).unwrap();
        assert_eq!(
            site,
            Site {
                region: "us-ashburn-1".into(),
                compartment: COMPARTMENT.into(),
                zone: "Uocm:US-ASHBURN-AD-2".into(),
                placement: Placement::ClusterNetwork,
                per_domain: None
            }
        );
        assert_eq!(location(&on_fabric(fabric_ref(Some("none")))).unwrap().placement, Placement::None);
        // Without a placement (or an unknown one) the fabric's default: a compute cluster.
        assert_eq!(location(&on_fabric(fabric_ref(None))).unwrap().placement, Placement::Cluster);
        assert_eq!(location(&on_fabric(fabric_ref(Some("spread")))).unwrap().placement, Placement::Cluster);
    }

    #[test]
    fn a_fabric_without_an_oci_id_places_nothing() {
        for id in [json!(null), json!("oci/us-ashburn-1/lib"), json!("oci/us-ashburn-1/not-an-ocid/lib"), json!("aws/us-east-1/lib")] {
            let v = on_fabric(json!({"id": id, "region": "us-ashburn-1"}));
            assert_eq!(location(&v), None, "{id}");
            assert_eq!(fabric_place(&v), None, "{id}");
            // Messages still name the region the reference gives.
            assert_eq!(fabric_region(&v), "us-ashburn-1");
        }
        assert_eq!(fabric_place(&on_fabric(fabric_ref(None))), Some(("us-ashburn-1".into(), COMPARTMENT.into())));
    }
}
