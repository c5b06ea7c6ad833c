//! `hpc_gpu_cluster` on OCI: an instance configuration for the bare-metal GPU shape with the Oracle Cloud
//! Agent's RDMA plugins enabled, and the nodes: launched one per node into the fabric's compute cluster
//! (placement `cluster`; OCI has no batch launch outside instance pools), or as the single instance pool of
//! a cluster network (placement `cluster-network`), resized in place. Nodes carry the display name
//! `<cluster>-<i>` and the freeform tag `hpc:cluster`; a refresh is one instance list per cluster (two for
//! a cluster network), whatever the node count. GB200/GB300 nodes are launched per NVLink domain by a GPU
//! memory cluster instead (see `memory`). Only what the census admits (the `hpc:owner` freeform tag; a
//! cluster network's instances with it) is resized, renamed, retagged or terminated.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use base64::Engine;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value as Json, json};

use super::api::{Oci, Service, encode, is_gone, tags_of};
use super::fabric::{Joined, join, retag};
use crate::framework::{Context, Value};
use crate::model::{CapacityType, ClusterSpec, Placement};
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

/// The index of a node named `<cluster>-<i>`.
pub fn index_of(cluster: &str, name: &str) -> Option<u32> {
    name.strip_prefix(cluster)?.strip_prefix('-')?.parse().ok()
}

/// The cluster network named `<cluster>-cn` the census admits, if it exists.
pub async fn find_network(ctx: &Context, oci: &Oci, compartment: &str, name: &str, census: &Census) -> Result<Option<Json>, String> {
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
pub async fn observe(ctx: &Context, oci: &Oci, at: &Location<'_>, census: &Census) -> Result<Vec<Json>, String> {
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
    nodes.sort_by_key(|n| {
        (index_of(at.name, n["displayName"].as_str().unwrap_or_default()).unwrap_or(u32::MAX), n["displayName"].to_string())
    });
    Ok(nodes)
}

/// A node's state in capitals: an Instance's `lifecycleState` (`RUNNING`), or a cluster network
/// InstanceSummary's `state`, which has no fixed set of values and which the service writes as `Running`.
pub fn node_state(n: &Json) -> String {
    n["lifecycleState"].as_str().or(n["state"].as_str()).unwrap_or_default().to_ascii_uppercase()
}

/// The nodes `observe` found, with their instance OCIDs and their primary VNIC's private address: one list
/// of VNIC attachments in the availability domain and one list of private IPs per subnet the nodes are
/// in (one, for a fabric), whatever the node count.
pub async fn addresses(ctx: &Context, oci: &Oci, at: &Location<'_>, nodes: &[Json]) -> Result<Vec<crate::clouds::NodeAddress>, String> {
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
            crate::clouds::NodeAddress { name: n["displayName"].as_str().unwrap_or_default().to_owned(), id, private_ip }
        })
        .collect())
}

/// The default image for a GPU shape: the newest platform image OCI offers for it whose name says GPU.
async fn default_image(ctx: &Context, oci: &Oci, compartment: &str, shape: &str) -> Result<String, String> {
    let q = format!("compartmentId={}&shape={}&sortBy=TIMECREATED&sortOrder=DESC", encode(compartment), encode(shape));
    let images = oci.list(ctx, Service::Core, "images", &q).await?;
    images
        .iter()
        .find(|i| i["displayName"].as_str().is_some_and(|n| n.contains("GPU")))
        .or(images.first())
        .and_then(|i| i["id"].as_str().map(str::to_owned))
        .ok_or_else(|| format!("OCI offers no image for shape {shape} in this region: set image to an image OCID"))
}

/// The launch details every node gets: the instance configuration's (InstanceConfigurationLaunchInstanceDetails)
/// and, with [`launch_instance_details`], each launched node's. Only fields both models have.
fn launch_details(spec: &ClusterSpec, compartment: &str, image: &str, joined: &Joined, tags: &BTreeMap<String, String>) -> Json {
    let f = &spec.fabric;
    let mut metadata = serde_json::Map::new();
    if let Some(key) = &spec.ssh_public_key {
        metadata.insert("ssh_authorized_keys".into(), json!(key.trim()));
    }
    if let Some(u) = &spec.user_data {
        metadata.insert("user_data".into(), json!(base64::engine::general_purpose::STANDARD.encode(u)));
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

/// The cluster's instance configuration `<cluster>-ic` the census admits, if it exists (OCI cannot filter
/// this list by name).
pub async fn find_configuration(ctx: &Context, oci: &Oci, compartment: &str, name: &str, census: &Census) -> Result<Option<Json>, String> {
    let all = oci.list(ctx, Service::Core, "instanceConfigurations", &format!("compartmentId={}", encode(compartment))).await?;
    let wanted = format!("{name}-ic");
    let Some(summary) = all.into_iter().find(|c| {
        c["displayName"].as_str() == Some(&wanted)
            && census.admit("oci_core_instance_configuration", &wanted, marker_in(&tags_of(c)), c["timeCreated"].as_str())
    }) else {
        return Ok(None);
    };
    let id = summary["id"].as_str().unwrap_or_default();
    oci.get(ctx, Service::Core, &format!("/instanceConfigurations/{id}")).await
}

/// A capacity failure as users need it: what, where, and that the apply can simply be run again.
pub(super) fn capacity_message(spec: &ClusterSpec, err: &str, have: usize) -> String {
    if err.to_ascii_lowercase().contains("out of host capacity") {
        format!(
            "Out of host capacity: OCI has no free {} hosts in {} right now ({err}). {have} of {} nodes exist and are kept; apply again \
             later to launch the rest, or launch into a capacity reservation (capacity_type = \"reservation\", reservation_id)",
            spec.fabric.sku.name,
            spec.fabric.zone.as_deref().unwrap_or("the availability domain"),
            spec.node_count
        )
    } else {
        err.to_owned()
    }
}

/// Creates or updates the cluster until it has exactly `node_count` running nodes named `<cluster>-0..`.
pub async fn converge(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    compartment: &str,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), String> {
    let f = &spec.fabric;
    let zone = f.zone.clone().unwrap_or_default();
    let at = Location { compartment, zone: &zone, name: &spec.name, placement: f.placement, per_domain: spec.nvlink_domain_nodes() };
    // Everything with the cluster's names is looked at before anything is made.
    observe(ctx, oci, &at, census).await?;
    let existing = find_configuration(ctx, oci, compartment, &spec.name, census).await?;
    let memory_clusters = match at.per_domain {
        Some(_) => {
            let all = super::memory::list(ctx, oci, &at).await?;
            super::memory::ours(&all, &at, census);
            all
        }
        None => Vec::new(),
    };
    census.gate()?;
    let joined = join(ctx, oci, compartment, &f.name, &zone, f.placement == Placement::Cluster).await?;
    let mut config_tags = tags.clone();
    config_tags.insert("hpc:workload".into(), spec.workload.as_str().into());
    if spec.image.is_none() {
        config_tags.insert("hpc:default-image".into(), "true".into());
    }
    // The image the configuration was made with; a new configuration's is resolved now.
    let known =
        existing.as_ref().and_then(|c| c["instanceDetails"]["launchDetails"]["sourceDetails"]["imageId"].as_str().map(str::to_owned));
    let image = match (known, &spec.image) {
        (Some(i), _) => i,
        (None, Some(i)) => i.clone(),
        (None, None) => default_image(ctx, oci, compartment, f.sku.name).await?,
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
                "instanceDetails": {"instanceType": "compute", "launchDetails": launch_details(spec, compartment, &image, &joined, tags)},
            });
            oci.create(ctx, Service::Core, "instanceConfigurations", &body, &format!("instance configuration {}-ic", spec.name)).await?.0
        }
    };
    let config_id = config["id"].as_str().unwrap_or_default().to_owned();
    match f.placement {
        Placement::ClusterNetwork => converge_network(ctx, oci, spec, &at, &config_id, &joined, tags, timeout, census).await,
        // GB200/GB300: each NVLink domain's nodes are launched by its GPU memory cluster.
        _ if at.per_domain.is_some() => {
            let compute_cluster = joined
                .compute_cluster
                .as_deref()
                .ok_or_else(|| format!("fabric {} has no compute cluster: GPU memory clusters are built over one", f.name))?;
            super::memory::converge(ctx, oci, spec, &at, &memory_clusters, &config_id, compute_cluster, tags, timeout, census).await?;
            wait_running(ctx, oci, spec, &at, timeout, census).await
        }
        _ => {
            let details = launch_instance_details(spec, compartment, &image, &joined, tags);
            converge_nodes(ctx, oci, spec, &at, &details, tags, timeout, census).await
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn converge_nodes(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    details: &Json,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), String> {
    let nodes = observe(ctx, oci, at, census).await?;
    let have: BTreeSet<u32> = nodes.iter().filter_map(|n| index_of(at.name, n["displayName"].as_str()?)).collect();
    // Scale down: the highest indexes go first.
    let extra: Vec<(String, String)> = nodes
        .iter()
        .filter(|n| index_of(at.name, n["displayName"].as_str().unwrap_or_default()).is_none_or(|i| i >= spec.node_count))
        .map(|n| (n["id"].as_str().unwrap_or_default().to_owned(), format!("node {}", n["displayName"].as_str().unwrap_or_default())))
        .collect();
    terminate(ctx, oci, extra, timeout).await?;
    // Tags changed: every remaining node gets them.
    let kept: Vec<Json> = nodes
        .iter()
        .filter(|n| index_of(at.name, n["displayName"].as_str().unwrap_or_default()).is_some_and(|i| i < spec.node_count))
        .cloned()
        .collect();
    futures::stream::iter(kept.into_iter().map(|n| async move { retag(ctx, oci, "instances", &n, tags).await }))
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    let missing: Vec<u32> = (0..spec.node_count).filter(|i| !have.contains(i)).collect();
    let launched = futures::stream::iter(missing.into_iter().map(|i| {
        let mut body = details.clone();
        body["displayName"] = json!(format!("{}-{i}", at.name));
        body["freeformTags"] = json!(tags);
        let what = format!("node {}-{i}", at.name);
        async move { oci.create(ctx, Service::Core, "instances", &body, &what).await.map(|_| ()) }
    }))
    .buffer_unordered(PARALLEL)
    .collect::<Vec<Result<(), String>>>()
    .await;
    if let Some(Err(e)) = launched.iter().find(|r| r.is_err()) {
        let now = observe(ctx, oci, at, census).await.map(|n| n.len()).unwrap_or(0);
        return Err(capacity_message(spec, e, now));
    }
    wait_running(ctx, oci, spec, at, timeout, census).await
}

/// Waits until every node is RUNNING, with one list call per round; a node that dies on the way is named.
async fn wait_running(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    timeout: Duration,
    census: &Census,
) -> Result<(), String> {
    let want = spec.node_count as usize;
    crate::clouds::shared::wait_for(ctx, &format!("{want} node(s) to run"), timeout, || async {
        let nodes = observe(ctx, oci, at, census).await?;
        if nodes.len() < want {
            let why = format!("only {} of {want} nodes came up (OCI terminated the others while launching them)", nodes.len());
            return Err(capacity_message(spec, &why, nodes.len()));
        }
        let running = nodes.iter().filter(|n| node_state(n) == "RUNNING").count();
        Ok((running >= want).then_some(()))
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
) -> Result<(), String> {
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
            let pool = &cn["instancePools"][0];
            let size = pool["size"].as_u64().unwrap_or(0);
            if size != u64::from(spec.node_count) || tags_of(&cn) != *tags {
                let body = json!({"instancePools": [{"id": pool["id"], "size": spec.node_count}], "freeformTags": tags});
                let id = cn["id"].as_str().unwrap_or_default();
                oci.update(ctx, Service::Core, &format!("/clusterNetworks/{id}"), &body, &what).await?.1
            } else {
                None
            }
        }
    };
    if let Some(wr) = work {
        oci.wait_work_request(ctx, Service::Core, &wr, &format!("building {what}"), timeout)
            .await
            .map_err(|e| capacity_message(spec, &e, 0))?;
    }
    // OCI names pool instances itself; give them the cluster's names, filling gaps from the lowest index.
    let nodes = observe(ctx, oci, at, census).await?;
    let taken: BTreeSet<u32> =
        nodes.iter().filter_map(|n| index_of(at.name, n["displayName"].as_str()?)).filter(|i| *i < spec.node_count).collect();
    let mut free = (0..spec.node_count).filter(|i| !taken.contains(i));
    let renames: Vec<(String, String)> = nodes
        .iter()
        .filter(|n| index_of(at.name, n["displayName"].as_str().unwrap_or_default()).is_none_or(|i| i >= spec.node_count))
        .filter_map(|n| Some((n["id"].as_str()?.to_owned(), format!("{}-{}", at.name, free.next()?))))
        .collect();
    futures::stream::iter(renames.into_iter().map(|(id, name)| {
        let body = json!({"displayName": name, "freeformTags": tags});
        async move { oci.update(ctx, Service::Core, &format!("/instances/{id}"), &body, &format!("node {name}")).await.map(|_| ()) }
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<()>>()
    .await?;
    wait_running(ctx, oci, spec, at, timeout, census).await
}

/// Terminates every node (or the cluster network) the census admits and waits for it, then deletes the
/// configuration.
pub async fn delete(ctx: &Context, oci: &Oci, at: &Location<'_>, timeout: Duration, census: &Census) -> Result<(), String> {
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
    if let Some(c) = find_configuration(ctx, oci, at.compartment, at.name, census).await? {
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
async fn terminate(ctx: &Context, oci: &Oci, nodes: Vec<(String, String)>, timeout: Duration) -> Result<(), String> {
    futures::stream::iter(nodes.into_iter().map(|(id, what)| async move {
        oci.delete(ctx, Service::Core, &format!("/instances/{id}?preserveBootVolume=false"), &what, timeout).await.map(|_| ())
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<()>>()
    .await
    .map(|_| ())
}

/// Waits until no node of the cluster (this owner's) is left but terminated ones (one list per round).
async fn wait_terminated(ctx: &Context, oci: &Oci, at: &Location<'_>, timeout: Duration, census: &Census) -> Result<(), String> {
    let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
    crate::clouds::shared::wait_for(ctx, &format!("the nodes of {} to terminate", at.name), timeout, || async {
        let all = oci.list(ctx, Service::Core, "instances", &q).await?;
        let left = all.iter().any(|i| {
            let tags = tags_of(i);
            let named = tags.get("hpc:cluster").map(String::as_str) == Some(at.name)
                || index_of(at.name, i["displayName"].as_str().unwrap_or_default()).is_some();
            named && census.claims(marker_in(&tags)) && i["lifecycleState"].as_str() != Some("TERMINATED")
        });
        Ok((!left).then_some(()))
    })
    .await
}

/// The configuration an import rebuilds from the instance configuration and the nodes.
pub async fn imported_config(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    name: &str,
    defaults: &BTreeMap<String, String>,
    census: &Census,
) -> Result<(Value, Placement), String> {
    let config = find_configuration(ctx, oci, compartment, name, census)
        .await?
        .ok_or_else(|| format!("no cluster named {name:?} in the compartment: no instance configuration {name}-ic"))?;
    let tags = tags_of(&config);
    let fabric = tags.get("hpc:fabric").ok_or_else(|| format!("instance configuration {name}-ic has no hpc:fabric tag"))?;
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
    let user_data = d["metadata"]["user_data"]
        .as_str()
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
        .and_then(|b| String::from_utf8(b).ok());
    let ssh = d["metadata"]["ssh_authorized_keys"].as_str().map(str::to_owned);
    let user = crate::clouds::shared::user_tags(crate::catalog::Cloud::Oci, &tags, defaults);
    let config = Value::object([
        ("name", Value::from(name)),
        ("fabric", fabric_ref),
        ("node_count", Value::int(nodes.len() as i64)),
        ("capacity_type", Value::from(capacity)),
        ("reservation_id", Value::from(reservation)),
        ("image", Value::from(image)),
        ("user_data", Value::from(user_data)),
        ("ssh_public_key", Value::from(ssh)),
        ("workload", Value::from(tags.get("hpc:workload").cloned())),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]);
    Ok((config, placement))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_indices_come_only_from_the_clusters_own_names() {
        assert_eq!(index_of("lib", "lib-0"), Some(0));
        assert_eq!(index_of("lib", "lib-12"), Some(12));
        // A cluster whose name has a hyphen: the index is after the whole name.
        assert_eq!(index_of("lib-a", "lib-a-3"), Some(3));
        for other in ["lib", "lib-", "lib-x", "lib-a-3", "library-1", "xlib-1", "lib_1", "lib--1", "lib-1-2"] {
            assert_eq!(index_of("lib", other), None, "{other}");
        }
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
}
