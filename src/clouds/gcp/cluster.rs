//! `hpc_gpu_cluster` on Google Cloud: the nodes, created with one `instances.bulkInsert` per batch (exact
//! names through perInstanceProperties, the compact placement policy, one NIC per GPU VPC with the right
//! nic type, TERMINATE on host maintenance, reservation affinity / spot / DWS flex start), labelled
//! `hpc_cluster`, `hpc_fabric` and `hpc_owner` so a refresh is one filtered `instances.list` per zone; only
//! the nodes the census admits are kept, relabelled, rebooted or deleted.
//!
//! Day 2: that one list also says, per node, what Compute Engine holds of its health (`status`,
//! `resourceStatus.upcomingMaintenance`) and two labels of the node's own, which a relabelling keeps: the
//! node configuration revision it was made with (`hpc-revision`, set at bulkInsert) and the verdict its
//! boot-time self-check published with instances.setLabels under its service account (`hpc-selfcheck`).
//! Repairs delete nodes (then the converge makes them again in their policy and reservation) or restart
//! them in place (reset, start or resume, as their status allows). The day-2 settings (`repair`,
//! `max_repairs`, `update_strategy`) are kept in the nodes' metadata (`hpc-day2`) for an import.
//!
//! A4X (GB200 NVL72): the cluster makes one compact policy per NVLink domain, `<cluster>-nvl<k>` with
//! gpuTopology 1x72, described like the fabric's pieces (`hpc-provider cluster=... owner=...`), and creates
//! each domain's 18 nodes into their own domain's policy, bound to the reservation. A refresh lists the
//! region's policies once; destroy deletes the nodes, then the policies the census admits.
//! The lifecycle's backend for this kind, `Backend<ClusterSpec>` and `ClusterBackend` on `backend::Gcp`, comes last, before the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_compute_v1::model;
use serde_json::json;

use super::api::{self, Gcp, call};
use super::backend::{self, configured, in_zone, region_of, zone_and_name};
use super::{cluster, quota};
use super::{fabric, topology};
use crate::catalog::Cloud;
use crate::catalog::Fabric;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::retry;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{CapacityType, ClusterSpec, Placement};
use crate::ownership::Census;

/// Nodes per bulkInsert: all-or-nothing within a batch.
pub const BATCH: usize = 100;
/// The Deep Learning VM image family used when a cluster sets no image.
pub const DEFAULT_IMAGE: &str = "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570";

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub status: String,
    pub instance: model::Instance,
}

/// Instances a page of the nodes' list asks for: Compute Engine's largest page (and its default). With
/// the pages a list follows ([`shared::Pages::most_items`]), it bounds the nodes a refresh can read.
pub const LIST_PAGE: u32 = 500;

/// The cluster's nodes the census admits: one filtered list (paginated, [`LIST_PAGE`]) in the zone.
pub async fn nodes(ctx: &Context, gcp: &Gcp, zone: &str, cluster: &str, census: &Census) -> Result<Vec<Node>, CloudError> {
    let filter = format!("labels.hpc_cluster = \"{cluster}\"");
    let mut out = Vec::new();
    let mut token = String::new();
    let mut pages = shared::Pages::new("Compute Engine", "nextPageToken");
    loop {
        let t = token.clone();
        let page = call(ctx, "listing the cluster's nodes", || {
            gcp.instances
                .list()
                .set_project(&gcp.project)
                .set_zone(zone)
                .set_filter(&filter)
                .set_max_results(LIST_PAGE)
                .set_page_token(&t)
                .send()
        })
        .await?;
        for i in page.items {
            let name = i.name.clone().unwrap_or_default();
            let marker = i.labels.get("hpc_owner").map(String::as_str);
            if !census.admit("google_compute_instance", &name, marker, i.creation_timestamp.as_deref()) {
                continue;
            }
            let status = i.status.as_ref().map(|s| s.name().unwrap_or_default().to_owned()).unwrap_or_default();
            out.push(Node { name, status, instance: i });
        }
        match pages.next(page.next_page_token.filter(|t| !t.is_empty()), "listing the cluster's nodes")? {
            Some(next) => token = next,
            None => break,
        }
    }
    Ok(out)
}

/// Statuses on the way to running (or, for queued capacity, waiting for it): not a sign of trouble.
fn coming_up(status: &str) -> bool {
    matches!(status, "PROVISIONING" | "STAGING" | "PENDING")
}

/// Why Compute Engine holds a node unhealthy, from the instance the list already answered (no call of its
/// own): a status other than RUNNING (TERMINATED after a host error or a maintenance it was not live
/// migrated through, SUSPENDED, REPAIRING, ...).
pub fn health(i: &model::Instance) -> Option<String> {
    let status = i.status.as_ref().and_then(|s| s.name()).unwrap_or("RUNNING");
    (status != "RUNNING" && !coming_up(status)).then(|| format!("status {status}"))
}

/// The maintenance Compute Engine has scheduled on a node that is otherwise healthy, with its window
/// (`resourceStatus.upcomingMaintenance`): on GPU VMs (onHostMaintenance TERMINATE) it stops the node in
/// the window, which the node's own status then says. Reported, not repaired, unless `on_maintenance`
/// asks (the cloud carries it out itself, and a user can start it early with `performMaintenance`).
pub fn maintenance(i: &model::Instance) -> Option<String> {
    if health(i).is_some() {
        return None;
    }
    let m = i.resource_status.as_ref()?.upcoming_maintenance.as_ref()?;
    let kind = match m.r#type.as_ref().and_then(|t| t.name()) {
        Some("SCHEDULED") => "scheduled ",
        Some("UNSCHEDULED") => "unscheduled ",
        Some("MULTIPLE") => "multiple ",
        _ => "",
    };
    let ongoing = m.maintenance_status.as_ref().and_then(|s| s.name()) == Some("ONGOING");
    let at = m.window_start_time.as_deref().map(crate::clock::utc_minute);
    Some(match (ongoing, at) {
        (true, Some(t)) => format!("{kind}maintenance ongoing since {t}"),
        (true, None) => format!("{kind}maintenance ongoing"),
        (false, Some(t)) => format!("upcoming {kind}maintenance from {t}"),
        (false, None) => format!("upcoming {kind}maintenance"),
    })
}

/// A label of a node, if it has one.
pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.instance.labels.get(key).map(String::as_str)
}

/// The labels the nodes write or the provider sets per node, which a relabelling keeps as they are: the
/// self-check's verdict and the node configuration revision it was made with.
const NODE_OWN_LABELS: [&str; 2] = [shared::SELFCHECK_LABEL, shared::REVISION_LABEL];

/// Whether a label is one of a node's own ([`NODE_OWN_LABELS`]), never a user's.
pub fn node_own_label(key: &str) -> bool {
    NODE_OWN_LABELS.contains(&key)
}

/// The nodes in index order, with the id the google provider gives an instance, nic0's address, the
/// revision and self-check verdict in its labels and what Compute Engine says of its health.
pub fn addresses(project: &str, zone: &str, cluster: &str, nodes: &[Node]) -> Vec<crate::clouds::NodeAddress> {
    let mut ordered: Vec<(u32, &Node)> = nodes.iter().map(|n| (crate::nodes::order(cluster, &n.name), n)).collect();
    ordered.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    ordered
        .into_iter()
        .map(|(_, node)| crate::clouds::NodeAddress {
            id: format!("projects/{project}/zones/{zone}/instances/{}", node.name),
            name: node.name.clone(),
            private_ip: node.instance.network_interfaces.first().and_then(|nic| nic.network_ip.clone()),
            revision: label(node, shared::REVISION_LABEL).map(str::to_owned),
            health: health(&node.instance),
            maintenance: maintenance(&node.instance),
            selfcheck: label(node, shared::SELFCHECK_LABEL).map(str::to_owned),
        })
        .collect()
}

/// Node names in index order.
pub fn node_names(cluster: &str, nodes: &[Node]) -> Vec<String> {
    let mut names: Vec<(u32, String)> = nodes.iter().map(|n| (crate::nodes::order(cluster, &n.name), n.name.clone())).collect();
    names.sort();
    names.into_iter().map(|(_, n)| n).collect()
}

/// The host network and subnetwork the fabric's nodes join (created by the fabric, or given to it).
async fn host_network(ctx: &Context, gcp: &Gcp, spec: &ClusterSpec) -> Result<(String, String), CloudError> {
    let f = &spec.fabric;
    let p = &gcp.project;
    // A cluster without a fabric that joins a network names it itself (an Ethernet fabric on a given
    // network has no pieces of its own to record it).
    if let Some(crate::model::Network::Existing { vpc_id: vpc, subnet_id: subnet }) = spec.own_fabric.as_ref().map(|f| &f.network) {
        return Ok((
            format!("projects/{p}/global/networks/{}", api::short_name(vpc)),
            format!("projects/{p}/regions/{}/subnetworks/{}", f.region, api::short_name(subnet)),
        ));
    }
    let live = fabric::observe(ctx, gcp, &f.name, &f.region, &Census::reading()).await?;
    let d = live
        .description()
        .ok_or_else(|| CloudError::other(format!("fabric {} has no pieces in {}: apply the fabric first", f.name, gcp.project)))?;
    Ok(match (d.get("vpc"), d.get("subnet")) {
        (Some(v), Some(s)) => (
            format!("projects/{p}/global/networks/{}", api::short_name(v)),
            format!("projects/{p}/regions/{}/subnetworks/{}", f.region, api::short_name(s)),
        ),
        _ => (
            format!("projects/{p}/global/networks/{}-vpc", f.name),
            format!("projects/{p}/regions/{}/subnetworks/{}-subnet", f.region, f.name),
        ),
    })
}

/// The metadata key that keeps a cluster's day-2 settings on its nodes (as `hpc-workload` keeps the
/// workload), so that an import gives them back: `repair`, `max_repairs` and the `update_strategy` block, as
/// JSON. None of it changes a node: a change is written onto the nodes with setMetadata.
pub const DAY2_METADATA: &str = "hpc-day2";

/// The day-2 settings of a cluster state or plan, as [`DAY2_METADATA`] keeps them: `repair` and
/// `max_repairs` as planned (defaults included), the `update_strategy` block as configured (null without it).
pub fn day2_settings(state: &Value) -> String {
    let text = |v: &Value| v.as_str().map_or(serde_json::Value::Null, |s| json!(s));
    let strategy = state.get("update_strategy");
    let strategy = if strategy.is_null() || !strategy.is_present() {
        serde_json::Value::Null
    } else {
        json!({"batch_size": text(strategy.get("batch_size")), "wait_for_selfcheck": strategy.get("wait_for_selfcheck").as_bool()})
    };
    let mut settings =
        json!({"repair": text(state.get("repair")), "max_repairs": text(state.get("max_repairs")), "update_strategy": strategy});
    // `on_maintenance` only when it is not the default, so that nodes made before it existed keep their metadata.
    if let Some(m) = state.get("on_maintenance").as_str().filter(|m| *m != crate::model::OnMaintenance::Report.as_str()) {
        settings["on_maintenance"] = json!(m);
    }
    settings.to_string()
}

/// The configuration's day-2 attributes an import gives back from a node's [`DAY2_METADATA`] (nothing from a
/// node an earlier release made).
fn imported_day2(i: &model::Instance) -> Vec<(&'static str, Value)> {
    let Some(settings) = metadata(i, DAY2_METADATA).and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok()) else {
        return Vec::new();
    };
    let text = |v: &serde_json::Value| v.as_str().map_or(Value::Null, Value::from);
    let strategy = &settings["update_strategy"];
    let strategy = if strategy.is_object() {
        Value::object([
            ("batch_size", text(&strategy["batch_size"])),
            ("wait_for_selfcheck", strategy["wait_for_selfcheck"].as_bool().map_or(Value::Null, Value::from)),
        ])
    } else {
        Value::Null
    };
    vec![
        ("repair", text(&settings["repair"])),
        ("max_repairs", text(&settings["max_repairs"])),
        ("update_strategy", strategy),
        ("on_maintenance", text(&settings["on_maintenance"])),
    ]
}

/// The instance properties every node shares.
fn properties(
    project: &str,
    spec: &ClusterSpec,
    host: &(String, String),
    labels: &BTreeMap<String, String>,
    day2: Option<&str>,
    policy: Option<&str>,
) -> serde_json::Value {
    let f = &spec.fabric;
    let p = project;
    let r = &f.region;
    let net = |n: &str| format!("projects/{p}/global/networks/{n}");
    let sub = |n: &str| format!("projects/{p}/regions/{r}/subnetworks/{n}");
    let mut nics = vec![json!({"network": host.0, "subnetwork": host.1, "nicType": "GVNIC"})];
    // One NIC per network of the fabric's topology (super::topology), in its order.
    match f.sku.fabric {
        Fabric::GpuDirectTcpx | Fabric::GpuDirectTcpxo => {
            for i in 0..topology::gpu_vpcs(f.sku) {
                let name = format!("{}-gpu-{i}", f.name);
                nics.push(json!({"network": net(&name), "subnetwork": sub(&name), "nicType": "GVNIC"}));
            }
        }
        Fabric::Roce => {
            let gvnic = format!("{}-gvnic-1", f.name);
            nics.push(json!({"network": net(&gvnic), "subnetwork": sub(&gvnic), "nicType": "GVNIC"}));
            for i in 0..topology::rdma_subnets(f.sku) {
                nics.push(json!({"network": net(&format!("{}-rdma", f.name)), "subnetwork": sub(&format!("{}-rdma-{i}", f.name)), "nicType": "MRDMA"}));
            }
        }
        _ => {}
    }
    let mut scheduling = json!({"onHostMaintenance": "TERMINATE", "automaticRestart": false, "provisioningModel": "STANDARD"});
    let mut affinity = json!({"consumeReservationType": "ANY_RESERVATION"});
    match spec.capacity {
        CapacityType::Spot => {
            scheduling["provisioningModel"] = json!("SPOT");
            scheduling["instanceTerminationAction"] = json!("DELETE");
            affinity = json!({"consumeReservationType": "NO_RESERVATION"});
        }
        CapacityType::FlexStart => {
            // DWS flex start: capacity for at most 7 days, then the VMs are deleted.
            scheduling["provisioningModel"] = json!("FLEX_START");
            scheduling["instanceTerminationAction"] = json!("DELETE");
            scheduling["maxRunDuration"] = json!({"seconds": "604800"});
            affinity = json!({"consumeReservationType": "NO_RESERVATION"});
        }
        CapacityType::Reservation => {
            affinity = json!({"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
                              "values": [spec.reservation_id.clone().unwrap_or_default()]});
        }
        _ => {}
    }
    let mut metadata = vec![
        json!({"key": "hpc-workload", "value": spec.workload.as_str()}),
        json!({"key": "hpc-image", "value": spec.image.clone().unwrap_or_else(|| "default".into())}),
    ];
    if let Some(d) = day2 {
        metadata.push(json!({"key": DAY2_METADATA, "value": d}));
    }
    if let Some(g) = &spec.gpu {
        metadata.push(json!({"key": "hpc-gpu", "value": g}));
    }
    if let Some(u) = &spec.user_data {
        metadata.push(json!({"key": "startup-script", "value": u.expose()}));
    }
    // Joining Slurm: cloud-init's user data (the user's own stays the startup script).
    if let Some(join) = &spec.slurm {
        metadata.push(json!({"key": "user-data", "value": crate::clouds::slurm::join_script(spec.fabric.cloud, &spec.name, join, 0)}));
    }
    if let Some(k) = &spec.ssh_public_key {
        metadata.push(json!({"key": "ssh-keys", "value": format!("hpc:{}", k.trim())}));
    }
    let mut props = json!({
        "machineType": f.sku.name,
        "labels": labels,
        "scheduling": scheduling,
        "reservationAffinity": affinity,
        "networkInterfaces": nics,
        "disks": [{"boot": true, "autoDelete": true, "initializeParams": {"sourceImage": spec.image.as_deref().unwrap_or(DEFAULT_IMAGE), "diskSizeGb": "500"}}],
        "metadata": {"items": metadata},
    });
    // Names, not URLs: the policy is the one of that name in the zone's region.
    if let Some(p) = policy {
        props["resourcePolicies"] = json!([p]);
    }
    // The service account the self-check sets the node's label with (node_identity); the scope lets the
    // account's roles decide what it may do.
    if let Some(email) = &spec.node_identity {
        props["serviceAccounts"] = json!([{"email": email, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]);
    }
    props
}

/// The compact policy the nodes at `indices` go into, by name: the fabric's, or on A4X their NVLink
/// domain's. Nodes are grouped by it, in order.
fn policy_groups(spec: &ClusterSpec, names: &[&String]) -> Vec<(Option<String>, Vec<String>)> {
    let mut groups: Vec<(Option<String>, Vec<String>)> = Vec::new();
    for name in names {
        let policy = match spec.nvlink_domain_nodes() {
            Some(per) if topology::gpu_topology(spec.fabric.sku).is_some() => {
                Some(crate::nodes::domain_name(&spec.name, crate::nodes::domain_of(crate::nodes::order(&spec.name, name), per)))
            }
            _ if spec.fabric.placement == Placement::Cluster => Some(format!("{}-placement", spec.fabric.name)),
            _ => None,
        };
        match groups.last_mut() {
            Some((p, members)) if *p == policy => members.push((*name).clone()),
            _ => groups.push((policy, vec![(*name).clone()])),
        }
    }
    groups
}

/// One NVLink domain's compact policy (A4X): its name and the body `resourcePolicies.insert` takes.
#[derive(Clone, Debug)]
pub struct DomainPolicy {
    pub index: u32,
    pub name: String,
    pub body: serde_json::Value,
}

/// What a domain policy's description says: whose cluster and domain it is, and its owner's marker
/// (descriptions are fixed at creation). No `fabric=`: the fabric's listing must not take it for its own.
pub fn domain_description(cluster: &str, index: u32, topology: &str, owner: Option<&str>) -> String {
    let mut s = format!("hpc-provider cluster={cluster} domain={index} gpu_topology={topology}");
    if let Some(o) = owner {
        s.push_str(&format!(" owner={o}"));
    }
    s
}

/// The cluster's domain policies in domain order (none unless the machine type is rack-scale): compact
/// (COLLOCATED) with the machine type's GPU slice (`gpuTopology` 1x72, a v1 field; no vmCount, which the
/// topology fixes, and no maxDistance, which conflicts with it).
pub fn domain_policies(spec: &ClusterSpec, owner: Option<&str>) -> Vec<DomainPolicy> {
    let Some(shape) = topology::gpu_topology(spec.fabric.sku) else { return Vec::new() };
    spec.nvlink_domains()
        .into_iter()
        .map(|d| {
            let body = json!({"name": d.name, "description": domain_description(&spec.name, d.index, &shape, owner),
                              "groupPlacementPolicy": {"collocation": "COLLOCATED", "gpuTopology": shape}});
            DomainPolicy { index: d.index, name: d.name, body }
        })
        .collect()
}

/// The cluster's domain policies that exist and the census admits, by name: one paginated
/// `resourcePolicies.list` in the region, whatever the cluster's size. A policy with a domain's name and
/// no description of ours still takes the name (the census records whose it is).
pub async fn domain_policies_live(
    ctx: &Context,
    gcp: &Gcp,
    region: &str,
    cluster: &str,
    census: &Census,
) -> Result<BTreeSet<String>, CloudError> {
    let mut out = BTreeSet::new();
    let mut token = String::new();
    let mut pages = shared::Pages::new("Compute Engine", "nextPageToken");
    loop {
        let t = token.clone();
        let page = call(ctx, "listing the cluster's NVLink domain policies", || {
            gcp.policies.list().set_project(&gcp.project).set_region(region).set_page_token(&t).send()
        })
        .await?;
        for p in page.items {
            let Some(name) = p.name else { continue };
            if crate::nodes::domain_index(cluster, &name).is_none() {
                continue;
            }
            let described = p.description.as_deref().and_then(fabric::parse_description);
            if described.as_ref().is_some_and(|d| d.get("cluster").map(String::as_str) != Some(cluster)) {
                continue;
            }
            let marker = described.as_ref().and_then(|d| d.get("owner")).map(String::as_str);
            if census.admit("google_compute_resource_policy", &name, marker, p.creation_timestamp.as_deref()) {
                out.insert(name);
            }
        }
        match pages.next(page.next_page_token.filter(|t| !t.is_empty()), "listing the cluster's NVLink domain policies")? {
            Some(next) => token = next,
            None => break,
        }
    }
    Ok(out)
}

async fn insert_policy(ctx: &Context, gcp: &Gcp, region: &str, policy: &DomainPolicy, timeout: Duration) -> Result<(), CloudError> {
    let what = format!("creating resource policy {} (NVLink domain {})", policy.name, policy.index);
    let body: model::ResourcePolicy = serde_json::from_value(policy.body.clone()).map_err(|e| CloudError::other(format!("{what}: {e}")))?;
    let rid = api::request_id();
    let op = call(ctx, &what, || {
        gcp.policies.insert().set_project(&gcp.project).set_region(region).set_request_id(&rid).set_body(body.clone()).send()
    })
    .await?;
    api::wait(ctx, gcp, op, &what, timeout).await
}

async fn delete_policy(ctx: &Context, gcp: &Gcp, region: &str, name: &str, timeout: Duration) -> Result<(), CloudError> {
    let what = format!("deleting resource policy {name}");
    match call(ctx, &what, || gcp.policies.delete().set_project(&gcp.project).set_region(region).set_resource_policy(name).send()).await {
        Ok(op) => api::wait(ctx, gcp, op, &what, timeout).await,
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

pub struct Options<'a> {
    pub labels: &'a BTreeMap<String, String>,
    /// Labels changed in the configuration: set them on the nodes that stay (one call per node).
    pub relabel: bool,
    /// The day-2 settings the nodes keep ([`DAY2_METADATA`]), and whether they changed: then they are
    /// written onto the nodes that stay (one call per node).
    pub day2: Option<&'a str>,
    pub redescribe: bool,
    pub timeout: Duration,
}

/// Creates the missing nodes (bulkInsert per batch with their exact names) and deletes those beyond
/// `node_count`, waiting for both. On A4X the domain policies come first (the missing ones), each domain's
/// nodes go into their own, and the policies of domains no longer wanted go once their nodes have.
pub async fn converge(ctx: &Context, gcp: &Gcp, spec: &ClusterSpec, o: &Options<'_>, census: &Census) -> Result<(), CloudError> {
    let zone = spec.fabric.zone.clone().unwrap_or_default();
    let region = &spec.fabric.region;
    let live = nodes(ctx, gcp, &zone, &spec.name, census).await?;
    let domains = domain_policies(spec, census.marker());
    let rack = topology::gpu_topology(spec.fabric.sku).is_some();
    let policies = if rack { domain_policies_live(ctx, gcp, region, &spec.name, census).await? } else { BTreeSet::new() };
    census.gate()?;
    let wanted = crate::nodes::node_names(&spec.name, spec.node_count);
    let missing: Vec<&String> = wanted.iter().filter(|w| !live.iter().any(|n| &n.name == *w)).collect();
    // A wanted node that exists but is stopped is left alone: the refresh reports it unhealthy
    // (`status TERMINATED`), and the cluster's `repair` decides (reboot_nodes starts it, remove_nodes lets
    // this converge make it again).
    let made = domains.iter().filter(|d| !policies.contains(&d.name)).map(|d| insert_policy(ctx, gcp, region, d, o.timeout));
    futures::future::try_join_all(made).await?;
    if !missing.is_empty() {
        let host = host_network(ctx, gcp, spec).await?;
        // The nodes made now run the spec's node configuration: they carry its revision.
        let mut labels = o.labels.clone();
        labels.insert(shared::REVISION_LABEL.to_owned(), spec.revision());
        // bulkInsert's minCount is the capacity policy's: all of them under all-or-nothing (Compute Engine
        // makes none unless it can make them all), fewer under at-least and keep-partial (it makes what the
        // zone has, at least minCount). Over several batches the minimum is spread: each batch needs what
        // the batches before it did not bring.
        let existing = (wanted.len() - missing.len()) as u32;
        let mut need = spec.capacity_policy.min_new(existing, missing.len() as u32) as usize;
        let mut made: Vec<String> = Vec::new();
        let mut short: Option<CloudError> = None;
        'groups: for (policy, names) in policy_groups(spec, &missing) {
            let props: model::InstanceProperties =
                serde_json::from_value(properties(&gcp.project, spec, &host, &labels, o.day2, policy.as_deref()))
                    .map_err(|e| CloudError::other(format!("building the instance properties: {e}")))?;
            for batch in names.chunks(BATCH) {
                let min = need.clamp(1, batch.len());
                let per_instance: serde_json::Map<String, serde_json::Value> = batch.iter().map(|n| (n.clone(), json!({}))).collect();
                let body: model::BulkInsertInstanceResource = serde_json::from_value(json!({
                    "count": batch.len().to_string(), "minCount": min.to_string(), "perInstanceProperties": per_instance,
                }))
                .map_err(|e| CloudError::other(format!("building the bulkInsert request: {e}")))?;
                let body = body.set_instance_properties(props.clone());
                let into = match (&policy, rack) {
                    (Some(p), true) => format!(" (NVLink domain {p})"),
                    _ => String::new(),
                };
                let what = format!("creating {} x {} in {zone}{into}", batch.len(), spec.fabric.sku.name);
                // One request id for every attempt: a bulkInsert whose answer was lost is answered again with its
                // operation, never carried out twice.
                let rid = api::request_id();
                let op = call(ctx, &what, || {
                    gcp.instances.bulk_insert().set_project(&gcp.project).set_zone(&zone).set_request_id(&rid).set_body(body.clone()).send()
                })
                .await?;
                // Fewer than minCount: the operation fails (ZONE_RESOURCE_POOL_EXHAUSTED) and makes none.
                let done = api::wait_done(ctx, gcp, op, &what, o.timeout).await?;
                let created =
                    if min == batch.len() { batch.to_vec() } else { batch_made(ctx, gcp, &zone, &spec.name, batch, &done, census).await? };
                need = need.saturating_sub(created.len());
                let got = created.len();
                made.extend(created);
                if got < batch.len() {
                    let code = shortfall_code(&done);
                    let message = format!(
                        "{what}: Compute Engine made {got} of {} (minCount {min}): {code}: the zone has no capacity for the other {}",
                        batch.len(),
                        batch.len() - got
                    );
                    short = Some(api::operation_error(&code, message));
                    break 'groups;
                }
            }
        }
        // Flex-start capacity may queue; everything else is running before the converge says it is done
        // (a rolling update starts its next batch only then).
        if spec.capacity != CapacityType::FlexStart {
            wait_settled(ctx, gcp, &zone, &spec.name, &made, o.timeout, census).await?;
        }
        if let Some(e) = short {
            // The nodes made stay (the lifecycle's capacity policy decides whether they are kept).
            return Err(e);
        }
    }
    if o.relabel {
        let relabels = live.iter().filter(|n| wanted.contains(&n.name)).map(|n| set_labels(ctx, gcp, &zone, n, o));
        futures::future::try_join_all(relabels).await?;
    }
    if let (true, Some(settings)) = (o.redescribe, o.day2) {
        let stale = live.iter().filter(|n| wanted.contains(&n.name) && metadata(&n.instance, DAY2_METADATA).as_deref() != Some(settings));
        futures::future::try_join_all(stale.map(|n| set_day2(ctx, gcp, &zone, n, settings, o.timeout))).await?;
    }
    let extra: Vec<&Node> = live.iter().filter(|n| !wanted.contains(&n.name)).collect();
    delete_nodes(ctx, gcp, &zone, &spec.name, extra.iter().map(|n| n.name.clone()).collect(), o.timeout, census).await?;
    // Domains scaled away: their policies, now empty.
    let kept: BTreeSet<&str> = domains.iter().map(|d| d.name.as_str()).collect();
    let stale = policies.iter().filter(|p| !kept.contains(p.as_str())).map(|p| delete_policy(ctx, gcp, region, p, o.timeout));
    futures::future::try_join_all(stale).await.map(|_| ())
}

/// The nodes of `batch` a finished bulkInsert made: its `instancesBulkInsertOperationMetadata` count when it
/// has one (Compute Engine creates them under the names asked for), else one list of the cluster's nodes.
async fn batch_made(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    batch: &[String],
    done: &model::Operation,
    census: &Census,
) -> Result<Vec<String>, CloudError> {
    let counted: Option<i32> = done
        .instances_bulk_insert_operation_metadata
        .as_ref()
        .filter(|m| !m.per_location_status.is_empty())
        .map(|m| m.per_location_status.values().filter_map(|s| s.created_vm_count).sum());
    if counted == Some(batch.len() as i32) {
        return Ok(batch.to_vec());
    }
    let live = nodes(ctx, gcp, zone, cluster, census).await?;
    Ok(batch.iter().filter(|b| live.iter().any(|n| &&n.name == b)).cloned().collect())
}

/// The code of a bulkInsert that made fewer than it was asked for: one its operation names (an error or a
/// warning entry), else Compute Engine's code for a zone without the resources.
fn shortfall_code(done: &model::Operation) -> String {
    let said: Vec<String> = done
        .error
        .iter()
        .flat_map(|e| e.errors.iter().filter_map(|x| x.code.clone()))
        .chain(done.warnings.iter().filter_map(|w| w.code.as_ref().and_then(|c| c.name()).map(str::to_owned)))
        .collect();
    said.into_iter()
        .find(|c| super::quota::CAPACITY_CODES.contains(&c.as_str()))
        .unwrap_or_else(|| "ZONE_RESOURCE_POOL_EXHAUSTED".to_owned())
}

/// Until none of `names` is still PROVISIONING or STAGING (one list per round): each runs, or has stopped
/// and the refresh says so. A node gone meanwhile counts as settled (the next converge makes it).
async fn wait_settled(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let what = format!("{} node(s) of {cluster} to run", names.len());
    let progress = shared::Progress::new();
    shared::wait_for(ctx, &what, timeout, || async {
        let live = nodes(ctx, gcp, zone, cluster, census).await?;
        let busy = live.iter().any(|n| names.contains(&n.name) && matches!(n.status.as_str(), "PROVISIONING" | "STAGING"));
        let count = |states: &[&str]| live.iter().filter(|n| states.contains(&n.status.as_str())).count() as u32;
        let (running, starting) = (count(&["RUNNING"]), count(&["PROVISIONING", "STAGING"]));
        // The cluster's nodes that are neither there nor coming are those Compute Engine had no capacity for.
        let pending_capacity = names.iter().filter(|name| !live.iter().any(|n| &n.name == *name)).count() as u32;
        let total = live.len() as u32 + pending_capacity;
        progress.nodes(cluster, shared::NodeCounts { running, total, starting, pending_capacity });
        Ok((!busy).then_some(()))
    })
    .await
}

/// The labels a node gets when the provider sets them: `wanted` (the cluster's tags as labels) with the
/// node's own labels ([`NODE_OWN_LABELS`]) kept as the node has them, since setLabels replaces them all.
fn labels_for(node: &model::Instance, wanted: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> =
        wanted.iter().filter(|(k, _)| !node_own_label(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    for key in NODE_OWN_LABELS {
        if let Some(v) = node.labels.get(key) {
            labels.insert(key.to_owned(), v.clone());
        }
    }
    labels
}

/// Sets a node's labels to what `labels` makes of the ones it has, with the fingerprint setLabels needs.
/// The node itself writes its self-check verdict meanwhile, which changes the fingerprint (412
/// conditionNotMet): then the node is read again and the labels made anew from what it has, a few times.
async fn relabel(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    node: &Node,
    labels: impl Fn(&model::Instance) -> BTreeMap<String, String>,
    what: &str,
    timeout: Duration,
) -> Result<(), CloudError> {
    let read = || call(ctx, what, || gcp.instances.get().set_project(&gcp.project).set_zone(zone).set_instance(&node.name).send());
    let op = retry::guarded(
        node.instance.clone(),
        |instance| {
            let mut request = model::InstancesSetLabelsRequest::new().set_labels(labels(&instance));
            if let Some(f) = instance.label_fingerprint.clone() {
                request = request.set_label_fingerprint(f);
            }
            call(ctx, what, move || {
                gcp.instances
                    .set_labels()
                    .set_project(&gcp.project)
                    .set_zone(zone)
                    .set_instance(&node.name)
                    .set_body(request.clone())
                    .send()
            })
        },
        read,
    )
    .await?;
    api::wait(ctx, gcp, op, what, timeout).await
}

/// Writes the day-2 settings into a node's metadata (setMetadata replaces every item: the others are kept),
/// with the metadata's fingerprint; on 412 conditionNotMet the node is read again, a few times.
async fn set_day2(ctx: &Context, gcp: &Gcp, zone: &str, node: &Node, settings: &str, timeout: Duration) -> Result<(), CloudError> {
    let what = format!("recording the day-2 settings on node {}", node.name);
    let what = what.as_str();
    let read = || call(ctx, what, || gcp.instances.get().set_project(&gcp.project).set_zone(zone).set_instance(&node.name).send());
    let op = retry::guarded(
        node.instance.clone(),
        |instance| {
            let current = instance.metadata.clone().unwrap_or_default();
            let mut items: Vec<model::metadata::Items> =
                current.items.iter().filter(|m| m.key.as_deref() != Some(DAY2_METADATA)).cloned().collect();
            items.push(model::metadata::Items::new().set_key(DAY2_METADATA).set_value(settings));
            let mut body = model::Metadata::new().set_items(items);
            if let Some(f) = current.fingerprint.clone() {
                body = body.set_fingerprint(f);
            }
            call(ctx, what, move || {
                gcp.instances.set_metadata().set_project(&gcp.project).set_zone(zone).set_instance(&node.name).set_body(body.clone()).send()
            })
        },
        read,
    )
    .await?;
    api::wait(ctx, gcp, op, what, timeout).await
}

async fn set_labels(ctx: &Context, gcp: &Gcp, zone: &str, node: &Node, o: &Options<'_>) -> Result<(), CloudError> {
    let what = format!("labelling node {}", node.name);
    relabel(ctx, gcp, zone, node, |i| labels_for(i, o.labels), &what, o.timeout).await
}

/// Day 2, replace: deletes the named nodes the census admits (one list, one delete each) and waits until
/// they are gone; the converge that follows makes them again under their names, in their placement
/// policy (on A4X their NVLink domain's) and reservation, with the spec's configuration.
pub async fn remove(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let live = nodes(ctx, gcp, zone, cluster, census).await?;
    let doomed: Vec<String> = live.into_iter().map(|n| n.name).filter(|n| names.contains(n)).collect();
    delete_nodes(ctx, gcp, zone, cluster, doomed, timeout, census).await
}

/// Day 2, reboot: restarts the named nodes the census admits in place and waits until they run. A running
/// node is reset; a stopped one (TERMINATED, STOPPED) started; a suspended one resumed; one on its way to
/// one of these (STOPPING, SUSPENDING, REPAIRING, ...) is first waited for. Its last self-check verdict is
/// taken off first: it ran on the boot before, and the node publishes a new one as it comes up.
pub async fn reboot(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let settled = |n: &Node| matches!(n.status.as_str(), "RUNNING" | "TERMINATED" | "STOPPED" | "SUSPENDED");
    let what = format!("{} node(s) of {cluster} to settle before they are rebooted", names.len());
    let live = shared::wait_for(ctx, &what, timeout, || async {
        let live: Vec<Node> = nodes(ctx, gcp, zone, cluster, census).await?.into_iter().filter(|n| names.contains(&n.name)).collect();
        Ok::<_, CloudError>(live.iter().all(settled).then_some(live))
    })
    .await?;
    if live.is_empty() {
        return Ok(());
    }
    let cleared = live.iter().filter(|n| label(n, shared::SELFCHECK_LABEL).is_some()).map(|n| {
        let what = format!("clearing the self-check verdict of node {}", n.name);
        let without = |i: &model::Instance| {
            i.labels.iter().filter(|(k, _)| *k != shared::SELFCHECK_LABEL).map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        async move { relabel(ctx, gcp, zone, n, without, &what, timeout).await }
    });
    futures::future::try_join_all(cleared).await?;
    let restarts = live.iter().map(|n| async move {
        let p = &gcp.project;
        let name = n.name.as_str();
        let (what, op) = match n.status.as_str() {
            "RUNNING" => {
                let what = format!("resetting node {name}");
                let op = call(ctx, &what, || gcp.instances.reset().set_project(p).set_zone(zone).set_instance(name).send()).await?;
                (what, op)
            }
            "SUSPENDED" => {
                let what = format!("resuming node {name}");
                let op = call(ctx, &what, || gcp.instances.resume().set_project(p).set_zone(zone).set_instance(name).send()).await?;
                (what, op)
            }
            _ => {
                let what = format!("starting node {name}");
                let op = call(ctx, &what, || gcp.instances.start().set_project(p).set_zone(zone).set_instance(name).send()).await?;
                (what, op)
            }
        };
        api::wait(ctx, gcp, op, &what, timeout).await
    });
    futures::future::try_join_all(restarts).await?;
    let names: Vec<String> = live.into_iter().map(|n| n.name).collect();
    let what = format!("{} rebooted node(s) of {cluster} to run", names.len());
    shared::wait_for(ctx, &what, timeout, || async {
        let live = nodes(ctx, gcp, zone, cluster, census).await?;
        let down: Vec<&Node> = live.iter().filter(|n| names.contains(&n.name) && n.status != "RUNNING").collect();
        // Its restart operation is done, so a node that is neither running nor coming up stopped again.
        match down.iter().find(|n| !coming_up(&n.status)) {
            Some(n) => Err(format!("node {} is {} after its restart, not RUNNING", n.name, n.status).into()),
            None => Ok(down.is_empty().then_some(())),
        }
    })
    .await
}

/// Deletes nodes by name: one delete call each (Compute has no batch delete), a few in flight at once, then
/// one list per round until they are gone, rather than polling each node's operation.
async fn delete_nodes(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    names: Vec<String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    use futures::{StreamExt, TryStreamExt};
    if names.is_empty() {
        return Ok(());
    }
    // Each delete's operation is followed to its end: one that fails says why at once, where a wait for the
    // nodes to go would run to the timeout.
    futures::stream::iter(names.iter().cloned().map(|name| async move {
        let what = format!("deleting node {name}");
        match call(ctx, &what, || gcp.instances.delete().set_project(&gcp.project).set_zone(zone).set_instance(&name).send()).await {
            Ok(op) => api::wait(ctx, gcp, op, &what, timeout).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<()>>()
    .await?;
    let what = format!("{} node(s) of {cluster} to be deleted", names.len());
    crate::clouds::shared::wait_for(ctx, &what, timeout, || async {
        let left = nodes(ctx, gcp, zone, cluster, census).await?.into_iter().filter(|n| names.contains(&n.name)).count();
        Ok((left == 0).then_some(()))
    })
    .await
}

/// Deletes every node of the cluster the census admits, then (`rack`: A4X) its NVLink domain policies the
/// census admits.
pub async fn delete(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    rack: bool,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let live = nodes(ctx, gcp, zone, cluster, census).await?;
    delete_nodes(ctx, gcp, zone, cluster, live.into_iter().map(|n| n.name).collect(), timeout, census).await?;
    if !rack {
        return Ok(());
    }
    let region = super::backend::region_of(zone);
    let policies = domain_policies_live(ctx, gcp, region, cluster, census).await?;
    futures::future::try_join_all(policies.iter().map(|p| delete_policy(ctx, gcp, region, p, timeout))).await.map(|_| ())
}

/// A metadata value of a node.
pub fn metadata(i: &model::Instance, key: &str) -> Option<String> {
    i.metadata.as_ref()?.items.iter().find(|m| m.key.as_deref() == Some(key)).and_then(|m| m.value.clone())
}

/// The configuration an import rebuilds from the nodes (their labels, scheduling and metadata) and the
/// fabric's description.
pub async fn imported_config(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    cluster: &str,
    live: &[Node],
    defaults: &BTreeMap<String, String>,
) -> Result<Value, CloudError> {
    let first = live.first().ok_or_else(|| {
        CloudError::other(format!("no cluster named {cluster:?} in {zone}: no instances labelled hpc_cluster = {cluster}"))
    })?;
    let i = &first.instance;
    let labels = i.labels.clone().into_iter().collect::<BTreeMap<String, String>>();
    let fabric_name =
        labels.get("hpc_fabric").cloned().ok_or_else(|| CloudError::other(format!("node {} has no hpc_fabric label", first.name)))?;
    let region = zone.rsplit_once('-').map_or(zone, |(r, _)| r);
    // The fabric's pieces are read for their description (a cluster without a fabric imports its own
    // network separately, under the cluster's owner).
    let f = fabric::observe(ctx, gcp, &fabric_name, region, &Census::reading()).await?;
    // A cluster without a fabric that joined a network has no fabric pieces: its nodes say it all.
    let joined = (f.description().is_none() && fabric_name == cluster && i.resource_policies.is_empty())
        .then(|| i.network_interfaces.first())
        .flatten()
        .and_then(|nic| Some((nic.network.clone()?, nic.subnetwork.clone()?)));
    let d = match (f.description(), &joined) {
        (Some(d), _) => d,
        (None, Some(_)) => BTreeMap::new(),
        (None, None) => return Err(format!("the fabric {fabric_name} of cluster {cluster} no longer exists").into()),
    };
    let scheduling = i.scheduling.clone().unwrap_or_default();
    let model_name = scheduling.provisioning_model.as_ref().and_then(|m| m.name().map(str::to_owned)).unwrap_or_default();
    let affinity = i.reservation_affinity.clone().unwrap_or_default();
    let affinity_type = affinity.consume_reservation_type.as_ref().and_then(|t| t.name().map(str::to_owned)).unwrap_or_default();
    let (capacity, reservation) = match (model_name.as_str(), affinity_type.as_str()) {
        ("SPOT", _) => ("spot", None),
        ("FLEX_START", _) => ("flex-start", None),
        (_, "SPECIFIC_RESERVATION") => ("reservation", affinity.values.first().cloned()),
        _ => ("on-demand", None),
    };
    let image = metadata(i, "hpc-image").filter(|v| v != "default");
    let ssh = metadata(i, "ssh-keys").map(|k| k.strip_prefix("hpc:").unwrap_or(&k).to_owned());
    let user: BTreeMap<String, String> = labels
        .iter()
        .filter(|(k, v)| !k.starts_with("hpc_") && !node_own_label(k) && defaults.get(*k).map(|d| d.to_lowercase()) != Some((*v).clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let p = &gcp.project;
    let location: Vec<(&str, Value)> = match joined {
        Some((vpc, subnet)) => vec![
            ("fabric", Value::Null),
            ("cloud", Value::from("gcp")),
            ("region", Value::from(region)),
            ("zone", Value::from(zone)),
            ("gpu", Value::from(metadata(i, "hpc-gpu"))),
            ("instance_type", Value::from(i.machine_type.as_deref().map(api::short_name))),
            ("vpc_id", Value::from(format!("projects/{p}/global/networks/{}", api::short_name(&vpc)))),
            ("subnet_id", Value::from(format!("projects/{p}/regions/{region}/subnetworks/{}", api::short_name(&subnet)))),
        ],
        None => vec![("fabric", fabric::fabric_ref(zone, region, &fabric_name, &d))],
    };
    let mut config = Value::object(location);
    let Value::Map(entries) = &mut config else { unreachable!("an object") };
    entries.extend(
        [
            ("name", Value::from(cluster)),
            ("node_count", Value::int(live.len() as i64)),
            ("capacity_type", Value::from(capacity)),
            ("reservation_id", Value::from(reservation)),
            ("image", Value::from(image)),
            ("user_data", Value::from(metadata(i, "startup-script"))),
            // The Slurm join the nodes were made with, key included: adopted, never made anew.
            ("slurm", crate::clouds::slurm::join_value(metadata(i, "user-data").as_deref())),
            ("ssh_public_key", Value::from(ssh)),
            ("node_identity", Value::from(i.service_accounts.first().and_then(|a| a.email.clone()))),
            ("workload", Value::from(metadata(i, "hpc-workload"))),
            ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    entries.extend(imported_day2(i).into_iter().map(|(k, v)| (k.to_owned(), v)));
    Ok(config)
}

/// The kind of the node piece in a cluster's expansion.
const NODE_PIECE: &str = "google_compute_instance";

/// The cluster's nodes with their addresses, revisions, self-check verdicts and health (a stopped node is
/// there, unhealthy: `status TERMINATED`).
async fn live_nodes(
    ctx: &Context,
    client: &api::Gcp,
    zone: &str,
    name: &str,
    census: &Census,
) -> Result<Vec<shared::NodeAddress>, CloudError> {
    let live = cluster::nodes(ctx, client, zone, name, census).await?;
    Ok(cluster::addresses(&client.project, zone, name, &live))
}

/// Nodes per NVLink domain of a cluster state whose machine type places each domain in a policy of its own
/// (A4X), `None` otherwise.
fn domain_nodes(state: &Value) -> Option<u32> {
    let sku = crate::catalog::find_sku(Cloud::Gcp, state.get("instance_type").as_str()?)?;
    super::topology::gpu_topology(sku)?;
    sku.nvlink_domain.map(|d| d.nodes)
}

/// A cluster state brought to the nodes that exist ([`shared::with_nodes`]) and, on A4X, to each NVLink
/// domain: a domain's node piece counts and names its own nodes that are up (missing when none is), and its
/// policy piece is marked missing when the policy is gone. `policies` is `None` when they were not read.
fn with_domain_nodes(state: &Value, nodes: &[shared::NodeAddress], policies: Option<&BTreeSet<String>>) -> Value {
    let out = shared::with_nodes(state, Cloud::Gcp, NODE_PIECE, nodes);
    let Some(per) = domain_nodes(state) else { return out };
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let Some(pieces) = out.get("expansion").as_list() else { return out };
    let pieces: Vec<Value> = pieces
        .iter()
        .map(|p| {
            let Some(k) = p.get("name").as_str().and_then(|n| crate::nodes::domain_index(&name, n)) else { return p.clone() };
            match p.get("kind").as_str() {
                Some("google_compute_resource_policy") => match policies {
                    Some(found) if !found.contains(p.get("name").as_str().unwrap_or_default()) => shared::marked_missing(p),
                    _ => p.clone(),
                },
                Some(NODE_PIECE) => {
                    let mut mine: Vec<u32> = nodes
                        .iter()
                        .map(|n| crate::nodes::order(&name, &n.name))
                        .filter(|i| *i != u32::MAX && crate::nodes::domain_of(*i, per) == k)
                        .collect();
                    mine.sort_unstable();
                    let whole: Vec<u32> = crate::nodes::whole_domain(k, per).collect();
                    let names = if mine == whole {
                        crate::nodes::node_range(&name, &mine)
                    } else {
                        mine.iter().map(|i| crate::nodes::node_name(&name, *i)).collect::<Vec<_>>().join(", ")
                    };
                    let patched = shared::patch_piece(&Value::list([p.clone()]), NODE_PIECE, Some(mine.len() as i64), &[("names", names)]);
                    let patched = patched.as_list().and_then(|l| l.first().cloned()).unwrap_or_else(|| p.clone());
                    if mine.is_empty() { shared::marked_missing(&patched) } else { patched }
                }
                _ => p.clone(),
            }
        })
        .collect();
    shared::with_attr(&out, "expansion", Value::list(pieces))
}

/// The cluster's NVLink domain policies, read (one list) only for a machine type that has them.
async fn live_policies(ctx: &Context, client: &api::Gcp, state: &Value, census: &Census) -> Result<Option<BTreeSet<String>>, CloudError> {
    if domain_nodes(state).is_none() {
        return Ok(None);
    }
    let (zone, name) = zone_and_name(state);
    cluster::domain_policies_live(ctx, client, region_of(zone), name, census).await.map(Some)
}

#[async_trait]
impl Backend<ClusterSpec> for backend::Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx).await
    }

    fn id(&self, spec: &ClusterSpec) -> Option<String> {
        Some(api::resource_id(spec.fabric.zone.as_deref().unwrap_or_default(), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        in_zone(v.get("fabric").get("zone"))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let labels = api::labels(change.tags);
        let relabel = !change.creating() && api::labels(change.prior_tags) != labels;
        let day2 = cluster::day2_settings(change.planned);
        let redescribe = !change.creating() && cluster::day2_settings(change.prior) != day2;
        let options = cluster::Options { labels: &labels, relabel, day2: Some(&day2), redescribe, timeout: step.timeout };
        let state = change.state.clone();
        match cluster::converge(ctx, &client, spec, &options, census).await {
            Ok(()) => {
                if !change.planned.get("nodes").is_unknown() {
                    return Outcome::done(state);
                }
                // A failed lookup leaves it null: the next refresh fills it in.
                match live_nodes(ctx, &client, &zone, &spec.name, census).await {
                    Ok(nodes) => Outcome::done(shared::with_attr(&state, "nodes", shared::nodes_value(&nodes))),
                    Err(_) => Outcome::done(state),
                }
            }
            Err(e) => {
                let policies = live_policies(ctx, &client, &state, census).await.ok().flatten();
                let state = match live_nodes(ctx, &client, &zone, &spec.name, census).await {
                    Ok(nodes) => with_domain_nodes(&state, &nodes, policies.as_ref()),
                    Err(_) => state,
                };
                Outcome::failed(state, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let (ctx, census) = (step.ctx, step.census);
        let (zone, name) = zone_and_name(prior);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let rack = domain_nodes(prior).is_some();
        let Err(e) = cluster::delete(ctx, &client, zone, name, rack, step.timeout, census).await else { return Outcome::done(Value::Null) };
        let policies = live_policies(ctx, &client, prior, census).await;
        let left = match (cluster::nodes(ctx, &client, zone, name, census).await, policies) {
            // Nothing left (not even an NVLink domain policy): the cluster is gone.
            (Ok(live), Ok(p)) if live.is_empty() && p.as_ref().is_none_or(BTreeSet::is_empty) => Value::Null,
            (Ok(live), p) => with_domain_nodes(prior, &cluster::addresses(&client.project, zone, name, &live), p.ok().flatten().as_ref()),
            _ => prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, CloudError> {
        let (zone, name) = zone_and_name(state);
        let client = api::connect(step.ctx).await?;
        // One instances.list, and on A4X one resourcePolicies.list, whatever the size.
        let live = cluster::nodes(step.ctx, &client, zone, name, step.census).await?;
        let policies = live_policies(step.ctx, &client, state, step.census).await?;
        if live.is_empty() && policies.as_ref().is_none_or(BTreeSet::is_empty) {
            return Ok(None);
        }
        // Health, revisions and self-check verdicts come with the same list: nothing per node.
        let nodes = cluster::addresses(&client.project, zone, name, &live);
        Ok(Some(with_domain_nodes(state, &nodes, policies.as_ref())))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((zone, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud cluster id: give \"gcp/<zone>/<cluster name>\", e.g. \"gcp/us-central1-a/train\"."
            )));
        };
        let client = api::connect(step.ctx).await.map_err(ImportError::failed)?;
        let defaults = api::labels(step.default_tags);
        let live = cluster::nodes(step.ctx, &client, zone, name, step.census).await.map_err(ImportError::failed)?;
        let config = cluster::imported_config(step.ctx, &client, zone, name, &live, &defaults).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[async_trait]
impl ClusterBackend for backend::Gcp {
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx).await?;
        cluster::remove(step.ctx, &client, &zone, &spec.name, names, step.timeout, step.census).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx).await?;
        cluster::reboot(step.ctx, &client, &zone, &spec.name, names, step.timeout, step.census).await
    }

    fn node_piece(&self) -> &'static str {
        NODE_PIECE
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), CloudError> {
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx).await?;
        cluster::nodes(step.ctx, &client, &zone, &spec.name, step.census).await.map(|_| ())
    }

    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        quota::family(spec)
    }

    fn unread_quota(&self, spec: &ClusterSpec) -> Option<String> {
        quota::unread(spec)
    }

    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
        let client = api::connect(ctx).await?;
        read_quota(ctx, &client, family).await
    }
}

/// One `regions.get` of the family's region: its `quotas[]` entry for the family's metric.
pub async fn read_quota(ctx: &Context, client: &api::Gcp, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
    let region = family.scope.as_str();
    let what = format!("reading the quotas of region {region} (regions.get)");
    let found = api::call(ctx, &what, || client.regions.get().set_project(&client.project).set_region(region).send())
        .await
        .map_err(String::from)?;
    let entry = found.quotas.iter().find(|q| q.metric.as_ref().and_then(|m| m.name()) == Some(family.id.as_str()));
    let Some(q) = entry else {
        // Compute Engine answers without quotas when it cannot read them (quotaStatusWarning says why).
        let why = found
            .quota_status_warning
            .as_ref()
            .and_then(|w| w.message.clone())
            .map_or_else(|| format!("it lists no quota {}", family.id), |m| format!("no quotas: {m}"));
        return Err(format!("{what}: {why}").into());
    };
    let whole = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v.round() as u64);
    match (whole(q.limit), whole(q.usage)) {
        (Some(limit), Some(used)) => Ok(QuotaReading { limit, used }),
        _ => Err(format!("{what}: quota {} has no limit or usage ({:?}, {:?})", family.id, q.limit, q.usage).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Cloud;
    use crate::model::{FabricRef, Workload};

    fn a4x(nodes: u32) -> ClusterSpec {
        ClusterSpec {
            day2: Default::default(),
            capacity_policy: crate::model::CapacityPolicy::AllOrNothing,
            user_data_version: None,
            name: "gb".into(),
            fabric: FabricRef {
                name: "fab".into(),
                cloud: Cloud::Gcp,
                region: "us-central1".into(),
                zone: Some("us-central1-a".into()),
                sku: crate::catalog::find_sku(Cloud::Gcp, "a4x-highgpu-4g").unwrap(),
                placement: Placement::Cluster,
            },
            own_fabric: None,
            gpu: None,
            node_count: nodes,
            capacity: CapacityType::Reservation,
            reservation_id: Some("gb200-res".into()),
            image: Some("projects/p/global/images/arm".into()),
            user_data: None,
            user_data_write_only: false,
            ssh_public_key: None,
            node_identity: None,
            workload: Workload::Pretraining,
            rdma_interfaces: 4,
            tags: Default::default(),
            running_groups: Vec::new(),
            slurm: None,
        }
    }

    #[test]
    fn the_planned_domains_are_the_policies_and_node_groups_apply_makes() {
        let spec = a4x(36);
        let pieces = crate::clouds::gcp::cluster(&spec, &crate::model::Defaults::default());
        let planned_policies: Vec<(&str, Option<&String>)> = pieces
            .iter()
            .filter(|p| p.kind == "google_compute_resource_policy")
            .map(|p| (p.name.as_str(), p.settings.get("group_placement_policy.gpu_topology")))
            .collect();
        let made = domain_policies(&spec, Some("o-1"));
        let made_policies: Vec<(&str, Option<String>)> =
            made.iter().map(|d| (d.name.as_str(), d.body["groupPlacementPolicy"]["gpuTopology"].as_str().map(str::to_owned))).collect();
        assert_eq!(planned_policies.iter().map(|(n, t)| (*n, t.cloned())).collect::<Vec<_>>(), made_policies);
        assert_eq!(made_policies, [("gb-nvl0", Some("1x72".to_owned())), ("gb-nvl1", Some("1x72".to_owned()))]);
        for d in &made {
            let group = &d.body["groupPlacementPolicy"];
            assert_eq!(group["collocation"], "COLLOCATED");
            assert!(group.get("vmCount").is_none() && group.get("maxDistance").is_none(), "{group}");
            let described = fabric::parse_description(d.body["description"].as_str().unwrap()).unwrap();
            assert_eq!(
                (described.get("cluster").map(String::as_str), described.get("owner").map(String::as_str)),
                (Some("gb"), Some("o-1"))
            );
            assert!(!described.contains_key("fabric"), "the fabric's listing must not take it");
        }
        // Each domain's node piece is the group bulkInsert makes into that domain's policy.
        let names = crate::nodes::node_names("gb", 36);
        let groups = policy_groups(&spec, &names.iter().collect::<Vec<_>>());
        let planned_nodes: Vec<(String, u32, String, String)> = pieces
            .iter()
            .filter(|p| p.kind == "google_compute_instance")
            .map(|p| (p.name.clone(), p.count, p.settings["names"].clone(), p.settings["resource_policies"].clone()))
            .collect();
        let applied: Vec<(String, u32, String, String)> = groups
            .iter()
            .map(|(policy, members)| {
                let policy = policy.clone().unwrap();
                let indices: Vec<u32> = members.iter().map(|m| crate::nodes::order("gb", m)).collect();
                (
                    policy.clone(),
                    members.len() as u32,
                    crate::nodes::node_range("gb", &indices),
                    format!("google_compute_resource_policy.{policy}"),
                )
            })
            .collect();
        assert_eq!(planned_nodes, applied);
        assert_eq!(planned_nodes[1].2, "gb-18 .. gb-35");
        // A lost node goes back into its own domain's policy.
        let lost = "gb-20".to_owned();
        assert_eq!(policy_groups(&spec, &[&lost]), [(Some("gb-nvl1".to_owned()), vec![lost.clone()])]);
        // 4 MRDMA NICs on the RDMA VPC's 4 subnets, as the plan's piece says.
        let props = properties("p", &spec, &("h".into(), "s".into()), &BTreeMap::new(), None, Some("gb-nvl0"));
        let rdma: Vec<&str> = props["networkInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["nicType"] == "MRDMA")
            .map(|n| n["subnetwork"].as_str().unwrap())
            .collect();
        assert_eq!(rdma.len(), 4);
        assert!(rdma[3].ends_with("/subnetworks/fab-rdma-3"), "{rdma:?}");
        let rdma_piece = pieces.iter().find(|p| p.name == "gb rdma nics").unwrap();
        assert_eq!((rdma_piece.count, rdma_piece.settings["subnetworks"].as_str()), (4, "fab-rdma-0 .. fab-rdma-3"));
        assert_eq!(props["reservationAffinity"]["consumeReservationType"], "SPECIFIC_RESERVATION");
        assert_eq!(props["reservationAffinity"]["values"], json!(["gb200-res"]));
        assert_eq!(props["resourcePolicies"], json!(["gb-nvl0"]));
        // Nothing of this for other machine types.
        let mut a4 = a4x(4);
        a4.fabric.sku = crate::catalog::find_sku(Cloud::Gcp, "a4-highgpu-8g").unwrap();
        assert!(domain_policies(&a4, None).is_empty());
        let four = crate::nodes::node_names("gb", 4);
        assert_eq!(policy_groups(&a4, &four.iter().collect::<Vec<_>>()), [(Some("fab-placement".to_owned()), four.clone())]);
    }

    fn instance(v: serde_json::Value) -> model::Instance {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_status_other_than_running_is_unhealthy_and_coming_up_is_not() {
        for status in ["TERMINATED", "STOPPED", "SUSPENDED", "REPAIRING", "STOPPING", "DEPROVISIONING"] {
            assert_eq!(health(&instance(json!({"status": status}))), Some(format!("status {status}")), "{status}");
        }
        for status in ["PROVISIONING", "STAGING", "RUNNING", "PENDING"] {
            assert_eq!(health(&instance(json!({"status": status}))), None, "{status}");
        }
        assert_eq!(health(&instance(json!({}))), None);
    }

    #[test]
    fn upcoming_maintenance_is_maintenance_with_its_window_in_utc_and_no_reason() {
        let running = |m: serde_json::Value| instance(json!({"status": "RUNNING", "resourceStatus": {"upcomingMaintenance": m}}));
        let m = |m: serde_json::Value| {
            let i = running(m);
            assert_eq!(health(&i), None, "maintenance is no repair reason");
            maintenance(&i)
        };
        assert_eq!(
            m(json!({"type": "SCHEDULED", "windowStartTime": "2026-12-05T00:00:00Z", "maintenanceStatus": "PENDING"})).as_deref(),
            Some("upcoming scheduled maintenance from 2026-12-05T00:00Z")
        );
        assert_eq!(
            m(json!({"type": "UNSCHEDULED", "windowStartTime": "2026-12-04T20:30:00.000-08:00", "maintenanceStatus": "ONGOING"}))
                .as_deref(),
            Some("unscheduled maintenance ongoing since 2026-12-05T04:30Z")
        );
        assert_eq!(m(json!({})).as_deref(), Some("upcoming maintenance"));
        // A stopped node says so first.
        let both = instance(json!({"status": "TERMINATED", "resourceStatus": {"upcomingMaintenance": {"type": "SCHEDULED"}}}));
        assert_eq!((health(&both).as_deref(), maintenance(&both)), (Some("status TERMINATED"), None));
        let plain = instance(json!({"status": "RUNNING", "resourceStatus": {"physicalHost": "/b/s/h"}}));
        assert_eq!((health(&plain), maintenance(&plain)), (None, None));
    }

    #[test]
    fn any_instance_answer_reads_a_health_labels_and_metadata_without_a_panic() {
        use crate::fuzz::{answers, check};
        let i = json!({"name": "train-1", "status": "RUNNING", "labels": {"hpc-revision": "r1", "hpc-selfcheck": "ok"},
                       "networkInterfaces": [{"networkIP": "10.0.0.3"}],
                       "metadata": {"fingerprint": "abc=", "items": [{"key": "hpc-workload", "value": "pretraining"},
                                                                  {"key": "hpc-day2", "value": r#"{"repair": "reboot", "update_strategy": {"batch_size": "2"}}"#}]},
                       "resourceStatus": {"upcomingMaintenance": {"type": "SCHEDULED", "windowStartTime": "2026-12-05T00:00:00Z",
                                                                  "maintenanceStatus": "ONGOING"}}});
        let op = json!({"status": "DONE", "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "m"}]},
                        "warnings": [{"code": "NOT_CRITICAL_ERROR"}]});
        check("health", answers(vec![i, op]), |j| {
            if let Ok(done) = serde_json::from_value::<model::Operation>(j.clone()) {
                let _ = shortfall_code(&done);
            }
            let Ok(instance) = serde_json::from_value::<model::Instance>(j) else { return Ok(()) };
            let name = instance.name.clone().unwrap_or_default();
            let node = Node { name, status: "RUNNING".into(), instance };
            let _ = (
                health(&node.instance),
                metadata(&node.instance, "hpc-workload"),
                imported_day2(&node.instance),
                labels_for(&node.instance, &BTreeMap::new()),
            );
            let _ = (addresses("p", "z", "train", std::slice::from_ref(&node)), node_names("train", &[node]));
            Ok(())
        });
    }

    fn node(labels: serde_json::Value) -> Node {
        Node { name: "train-1".into(), status: "RUNNING".into(), instance: instance(json!({"status": "RUNNING", "labels": labels})) }
    }

    #[test]
    fn a_node_reports_its_revision_verdict_and_health() {
        let nodes =
            [node(json!({"hpc_cluster": "train", "hpc-revision": "0a1b2c3d4e", "hpc-selfcheck": "fail-gpus-7-of-8"})), node(json!({}))];
        let mut second = nodes[1].clone();
        second.name = "train-0".into();
        second.instance.status = Some(model::instance::Status::Terminated);
        let found = addresses("p", "z", "train", &[nodes[0].clone(), second]);
        assert_eq!(found[0].name, "train-0");
        assert_eq!(
            (found[0].revision.as_deref(), found[0].selfcheck.as_deref(), found[0].health.as_deref()),
            (None, None, Some("status TERMINATED"))
        );
        assert_eq!(
            (found[1].revision.as_deref(), found[1].selfcheck.as_deref(), found[1].health.as_deref()),
            (Some("0a1b2c3d4e"), Some("fail-gpus-7-of-8"), None)
        );
        assert_eq!(shared::unhealthy_reason(&found[1]).as_deref(), Some("self-check: 7 of 8 GPUs"));
    }

    #[test]
    fn the_day2_settings_an_import_reads_are_the_ones_the_nodes_keep() {
        let state = |strategy: Value| {
            Value::object([("repair", Value::from("reboot")), ("max_repairs", Value::from("2")), ("update_strategy", strategy)])
        };
        let node = |settings: String| instance(json!({"metadata": {"items": [{"key": DAY2_METADATA, "value": settings}]}}));
        let mut with = state(Value::object([("batch_size", Value::from("50%")), ("wait_for_selfcheck", Value::from(true))]));
        if let Value::Map(m) = &mut with {
            m.insert("on_maintenance".into(), Value::from("replace"));
        }
        let back: BTreeMap<&str, Value> = imported_day2(&node(day2_settings(&with))).into_iter().collect();
        assert_eq!(back["on_maintenance"], Value::from("replace"));
        assert_eq!(back["repair"], Value::from("reboot"));
        assert_eq!(back["max_repairs"], Value::from("2"));
        assert_eq!(back["update_strategy"], with.get("update_strategy").clone());
        let without: BTreeMap<&str, Value> = imported_day2(&node(day2_settings(&state(Value::Null)))).into_iter().collect();
        assert_eq!(without["update_strategy"], Value::Null);
        assert_eq!(without["on_maintenance"], Value::Null, "the default is not kept");
        assert!(!day2_settings(&state(Value::Null)).contains("on_maintenance"), "nodes made before it keep their metadata");
        // A node an earlier release made keeps none: the import leaves them to their defaults.
        assert!(imported_day2(&instance(json!({}))).is_empty());
    }

    #[test]
    fn relabelling_keeps_the_nodes_own_labels() {
        let live = node(json!({"team": "ml", "hpc-revision": "r1", "hpc-selfcheck": "ok", "old": "x"}));
        let wanted: BTreeMap<String, String> =
            [("team", "research"), ("hpc_cluster", "train"), ("hpc-revision", "r2")].map(|(k, v)| (k.to_owned(), v.to_owned())).into();
        let labels = labels_for(&live.instance, &wanted);
        let expected: BTreeMap<String, String> =
            [("team", "research"), ("hpc_cluster", "train"), ("hpc-revision", "r1"), ("hpc-selfcheck", "ok")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into();
        assert_eq!(labels, expected);
        assert!(node_own_label("hpc-selfcheck") && node_own_label("hpc-revision") && !node_own_label("hpc_cluster"));
    }
}
