//! `hpc_gpu_cluster` on Google Cloud: the nodes, created with one `instances.bulkInsert` per batch (exact
//! names through perInstanceProperties, the compact placement policy, one NIC per GPU VPC with the right
//! nic type, TERMINATE on host maintenance, reservation affinity / spot / DWS flex start), labelled
//! `hpc_cluster`, `hpc_fabric` and `hpc_owner` so a refresh is one filtered `instances.list` per zone; only
//! the nodes the census admits are kept, started, relabelled or deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use google_cloud_compute_v1::model;
use serde_json::json;

use super::api::{self, Gcp, call};
use super::{fabric, topology};
use crate::catalog::Fabric;
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

/// The cluster's nodes the census admits: one filtered list (paginated) in the zone.
pub async fn nodes(ctx: &Context, gcp: &Gcp, zone: &str, cluster: &str, census: &Census) -> Result<Vec<Node>, String> {
    let filter = format!("labels.hpc_cluster = \"{cluster}\"");
    let mut out = Vec::new();
    let mut token = String::new();
    loop {
        let t = token.clone();
        let page = call(ctx, "listing the cluster's nodes", || {
            gcp.instances.list().set_project(&gcp.project).set_zone(zone).set_filter(&filter).set_page_token(&t).send()
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
        match page.next_page_token {
            Some(next) if !next.is_empty() => token = next,
            _ => break,
        }
    }
    Ok(out)
}

/// Whether a node is up (or coming up): a stopped (TERMINATED, STOPPED), stopping, suspended or
/// deprovisioning VM trains nothing.
pub fn is_up(node: &Node) -> bool {
    !matches!(node.status.as_str(), "STOPPING" | "PENDING_STOP" | "STOPPED" | "TERMINATED" | "SUSPENDING" | "SUSPENDED" | "DEPROVISIONING")
}

/// The nodes that are up, for a refresh: a stopped node counts as missing, and the next apply starts it.
pub fn up(nodes: Vec<Node>) -> Vec<Node> {
    nodes.into_iter().filter(is_up).collect()
}

/// The nodes in index order, with the id the google provider gives an instance and nic0's address.
pub fn addresses(project: &str, zone: &str, cluster: &str, nodes: &[Node]) -> Vec<crate::clouds::NodeAddress> {
    let mut ordered: Vec<(u32, &Node)> = nodes.iter().map(|n| (index_of(cluster, &n.name), n)).collect();
    ordered.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    ordered
        .into_iter()
        .map(|(_, node)| crate::clouds::NodeAddress {
            id: format!("projects/{project}/zones/{zone}/instances/{}", node.name),
            name: node.name.clone(),
            private_ip: node.instance.network_interfaces.first().and_then(|nic| nic.network_ip.clone()),
        })
        .collect()
}

/// The index of a node named `<cluster>-<i>`; names that do not follow it sort last.
fn index_of(cluster: &str, name: &str) -> u32 {
    name.strip_prefix(cluster).and_then(|r| r.strip_prefix('-')).and_then(|i| i.parse().ok()).unwrap_or(u32::MAX)
}

/// Node names in index order.
pub fn node_names(cluster: &str, nodes: &[Node]) -> Vec<String> {
    let mut names: Vec<(u32, String)> = nodes.iter().map(|n| (index_of(cluster, &n.name), n.name.clone())).collect();
    names.sort();
    names.into_iter().map(|(_, n)| n).collect()
}

/// The host network and subnetwork the fabric's nodes join (created by the fabric, or given to it).
async fn host_network(ctx: &Context, gcp: &Gcp, spec: &ClusterSpec) -> Result<(String, String), String> {
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
    let d = live.description().ok_or_else(|| format!("fabric {} has no pieces in {}: apply the fabric first", f.name, gcp.project))?;
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

/// The instance properties every node shares.
fn properties(gcp: &Gcp, spec: &ClusterSpec, host: &(String, String), labels: &BTreeMap<String, String>) -> serde_json::Value {
    let f = &spec.fabric;
    let p = &gcp.project;
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
            for i in 0..topology::RDMA_SUBNETS {
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
    if let Some(g) = &spec.gpu {
        metadata.push(json!({"key": "hpc-gpu", "value": g}));
    }
    if let Some(u) = &spec.user_data {
        metadata.push(json!({"key": "startup-script", "value": u}));
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
    if f.placement == Placement::Cluster {
        // Names, not URLs: the policy is the one of that name in the zone's region.
        props["resourcePolicies"] = json!([format!("{}-placement", f.name)]);
    }
    props
}

pub struct Options<'a> {
    pub labels: &'a BTreeMap<String, String>,
    /// Labels changed in the configuration: set them on the nodes that stay (one call per node).
    pub relabel: bool,
    pub timeout: Duration,
}

/// Creates the missing nodes (bulkInsert per batch with their exact names) and deletes those beyond
/// `node_count`, waiting for both.
pub async fn converge(ctx: &Context, gcp: &Gcp, spec: &ClusterSpec, o: &Options<'_>, census: &Census) -> Result<(), String> {
    let zone = spec.fabric.zone.clone().unwrap_or_default();
    let live = nodes(ctx, gcp, &zone, &spec.name, census).await?;
    census.gate()?;
    let wanted = crate::model::node_names(&spec.name, spec.node_count);
    let missing: Vec<&String> = wanted.iter().filter(|w| !live.iter().any(|n| &n.name == *w)).collect();
    // Wanted nodes that exist but are stopped are started again, under their own names.
    let stopped = live.iter().filter(|n| wanted.contains(&n.name) && !is_up(n)).map(|n| start_node(ctx, gcp, &zone, &n.name, o.timeout));
    futures::future::try_join_all(stopped).await?;
    if !missing.is_empty() {
        let host = host_network(ctx, gcp, spec).await?;
        let props: model::InstanceProperties =
            serde_json::from_value(properties(gcp, spec, &host, o.labels)).map_err(|e| format!("building the instance properties: {e}"))?;
        for batch in missing.chunks(BATCH) {
            let per_instance: serde_json::Map<String, serde_json::Value> = batch.iter().map(|n| ((*n).clone(), json!({}))).collect();
            let body: model::BulkInsertInstanceResource = serde_json::from_value(json!({
                "count": batch.len().to_string(), "minCount": batch.len().to_string(), "perInstanceProperties": per_instance,
            }))
            .map_err(|e| format!("building the bulkInsert request: {e}"))?;
            let body = body.set_instance_properties(props.clone());
            let what = format!("creating {} x {} in {zone}", batch.len(), spec.fabric.sku.name);
            let op =
                call(ctx, &what, || gcp.instances.bulk_insert().set_project(&gcp.project).set_zone(&zone).set_body(body.clone()).send())
                    .await?;
            api::wait(ctx, gcp, op, &what, o.timeout).await?;
        }
    }
    if o.relabel {
        let relabels = live.iter().filter(|n| wanted.contains(&n.name)).map(|n| set_labels(ctx, gcp, &zone, n, o));
        futures::future::try_join_all(relabels).await?;
    }
    let extra: Vec<&Node> = live.iter().filter(|n| !wanted.contains(&n.name)).collect();
    delete_nodes(ctx, gcp, &zone, &spec.name, extra.iter().map(|n| n.name.clone()).collect(), o.timeout, census).await
}

async fn start_node(ctx: &Context, gcp: &Gcp, zone: &str, name: &str, timeout: Duration) -> Result<(), String> {
    let what = format!("starting node {name}");
    let op = call(ctx, &what, || gcp.instances.start().set_project(&gcp.project).set_zone(zone).set_instance(name).send()).await?;
    api::wait(ctx, gcp, op, &what, timeout).await
}

async fn set_labels(ctx: &Context, gcp: &Gcp, zone: &str, node: &Node, o: &Options<'_>) -> Result<(), String> {
    let what = format!("labelling node {}", node.name);
    let mut request = model::InstancesSetLabelsRequest::new().set_labels(o.labels.clone());
    if let Some(f) = node.instance.label_fingerprint.clone() {
        request = request.set_label_fingerprint(f);
    }
    let op = call(ctx, &what, || {
        gcp.instances.set_labels().set_project(&gcp.project).set_zone(zone).set_instance(&node.name).set_body(request.clone()).send()
    })
    .await?;
    api::wait(ctx, gcp, op, &what, o.timeout).await
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
) -> Result<(), String> {
    use futures::{StreamExt, TryStreamExt};
    if names.is_empty() {
        return Ok(());
    }
    futures::stream::iter(names.iter().cloned().map(|name| async move {
        let what = format!("deleting node {name}");
        match call(ctx, &what, || gcp.instances.delete().set_project(&gcp.project).set_zone(zone).set_instance(&name).send()).await {
            Ok(_) => Ok(()),
            Err(e) if e.not_found() => Ok(()),
            Err(e) => Err(e.to_string()),
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

/// Deletes every node of the cluster the census admits.
pub async fn delete(ctx: &Context, gcp: &Gcp, zone: &str, cluster: &str, timeout: Duration, census: &Census) -> Result<(), String> {
    let live = nodes(ctx, gcp, zone, cluster, census).await?;
    delete_nodes(ctx, gcp, zone, cluster, live.into_iter().map(|n| n.name).collect(), timeout, census).await
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
) -> Result<Value, String> {
    let first =
        live.first().ok_or_else(|| format!("no cluster named {cluster:?} in {zone}: no instances labelled hpc_cluster = {cluster}"))?;
    let i = &first.instance;
    let labels = i.labels.clone().into_iter().collect::<BTreeMap<String, String>>();
    let fabric_name = labels.get("hpc_fabric").cloned().ok_or_else(|| format!("node {} has no hpc_fabric label", first.name))?;
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
        (None, None) => return Err(format!("the fabric {fabric_name} of cluster {cluster} no longer exists")),
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
        .filter(|(k, v)| !k.starts_with("hpc_") && defaults.get(*k).map(|d| d.to_lowercase()) != Some((*v).clone()))
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
            ("ssh_public_key", Value::from(ssh)),
            ("workload", Value::from(metadata(i, "hpc-workload"))),
            ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(status: &str) -> Node {
        Node { name: "train-0".into(), status: status.into(), instance: model::Instance::new() }
    }

    #[test]
    fn stopped_stopping_and_deprovisioning_nodes_are_not_up() {
        for status in ["STOPPED", "PENDING_STOP", "DEPROVISIONING", "STOPPING", "TERMINATED", "SUSPENDING", "SUSPENDED"] {
            assert!(!is_up(&node(status)), "{status}");
        }
        for status in ["PROVISIONING", "STAGING", "RUNNING", "REPAIRING", "PENDING"] {
            assert!(is_up(&node(status)), "{status}");
        }
    }
}
