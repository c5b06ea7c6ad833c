//! GB200/GB300 NVL72 on OCI: one GPU memory cluster `<cluster>-nvl<k>` per NVLink domain, of the domain's 18
//! nodes, over the fabric's compute cluster, on a GPU memory fabric (the rack's NVLink fabric). Fabrics are
//! the racks' own: the provider finds one per domain (ListComputeGpuMemoryFabrics, at most once per apply in
//! the root compartment, where OCI keeps them, and in the cluster's compartment) and never creates, changes
//! or deletes one. The memory cluster launches its instances from the cluster's instance configuration; the
//! provider names each `<cluster>-<i>` once (UpdateInstance), so nodes are tracked, drift-checked and owned
//! by name and tag as every other OCI node is.
//!
//! A refresh is one ListInstances and one ListComputeGpuMemoryClusters whatever the size. An apply lists a
//! cluster's instances (ListComputeGpuMemoryClusterInstances) only for the domains whose new instances it
//! must name: an Instance does not say which memory cluster launched it, and nothing else does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use serde_json::{Value as Json, json};

use super::api::{Oci, Service, encode, is_gone, tags_of};
use super::cluster::{Location, PARALLEL, capacity_message, node_tags, observe};
use crate::clouds::CloudError;
use crate::clouds::shared::{self, NodeAddress};
use crate::framework::{Context, Value};
use crate::model::ClusterSpec;
use crate::nodes::{domain_index, node_index, node_name};
use crate::ownership::{Census, marker_in};

/// The expansion's piece kinds.
pub const FABRIC: &str = "oci_core_compute_gpu_memory_fabric";
pub const CLUSTER: &str = "oci_core_compute_gpu_memory_cluster";

/// How the planned fabric piece says the fabric is chosen.
pub const FABRIC_CHOICE: &str = "found at apply, one per domain: an AVAILABLE, HEALTHY GPU memory fabric in the availability domain \
     with available_host_count >= 18 that no GPU memory cluster uses (ListComputeGpuMemoryFabrics once per apply)";
pub const FABRIC_LIFECYCLE: &str = "the rack's own: never created, changed or deleted";

/// Every GPU memory cluster in the cluster's compartment and availability domain, any owner's, not being
/// deleted: one paginated list.
pub async fn list(ctx: &Context, oci: &Oci, at: &Location<'_>) -> Result<Vec<Json>, CloudError> {
    let q = format!("compartmentId={}&availabilityDomain={}", encode(at.compartment), encode(at.zone));
    Ok(oci.list(ctx, Service::Core, "computeGpuMemoryClusters", &q).await?.into_iter().filter(|c| !is_gone(c)).collect())
}

/// The cluster's own memory clusters among `all`, by display name (`<cluster>-nvl<k>`); same-named ones of
/// other owners are recorded by the census.
pub fn ours(all: &[Json], at: &Location<'_>, census: &Census) -> BTreeMap<String, Json> {
    all.iter()
        .filter_map(|c| {
            let name = c["displayName"].as_str()?;
            domain_index(at.name, name)?;
            census.admit(CLUSTER, name, marker_in(&tags_of(c)), c["timeCreated"].as_str()).then(|| (name.to_owned(), c.clone()))
        })
        .collect()
}

/// The cluster's own memory clusters: [`list`] then [`ours`].
pub async fn clusters(ctx: &Context, oci: &Oci, at: &Location<'_>, census: &Census) -> Result<BTreeMap<String, Json>, CloudError> {
    Ok(ours(&list(ctx, oci, at).await?, at, census))
}

/// Fabrics in the availability domain free for a new memory cluster of `per` hosts: AVAILABLE, HEALTHY,
/// with `per` hosts available and used by none of `all` (the memory clusters that exist), in name order.
/// Also what the availability domain has, for the message when there are too few.
async fn free_fabrics(ctx: &Context, oci: &Oci, at: &Location<'_>, all: &[Json], per: u32) -> Result<(Vec<Json>, Vec<String>), CloudError> {
    // OCI keeps fabrics in the root compartment ("this should always be the root compartment"); one may
    // have been moved to the cluster's.
    let mut compartments = vec![oci.tenancy.as_str()];
    if !at.compartment.is_empty() && at.compartment != oci.tenancy {
        compartments.push(at.compartment);
    }
    let mut found: BTreeMap<String, Json> = BTreeMap::new();
    for c in compartments.into_iter().filter(|c| !c.is_empty()) {
        let q = format!("compartmentId={}&availabilityDomain={}", encode(c), encode(at.zone));
        for f in oci.list(ctx, Service::Core, "computeGpuMemoryFabrics", &q).await? {
            if let Some(id) = f["id"].as_str() {
                found.insert(id.to_owned(), f);
            }
        }
    }
    let used: BTreeSet<&str> = all.iter().filter_map(|c| c["gpuMemoryFabricId"].as_str()).collect();
    let seen = found
        .values()
        .map(|f| {
            format!(
                "{} ({}, {}, {} of {} hosts available{})",
                f["displayName"].as_str().unwrap_or_else(|| f["id"].as_str().unwrap_or_default()),
                f["lifecycleState"].as_str().unwrap_or("?"),
                f["fabricHealth"].as_str().unwrap_or("?"),
                f["availableHostCount"].as_u64().unwrap_or(0),
                f["totalHostCount"].as_u64().unwrap_or(0),
                if used.contains(f["id"].as_str().unwrap_or_default()) { ", in use" } else { "" }
            )
        })
        .collect();
    let mut free: Vec<Json> = found
        .into_values()
        .filter(|f| {
            f["lifecycleState"].as_str() == Some("AVAILABLE")
                && f["fabricHealth"].as_str() == Some("HEALTHY")
                && f["availableHostCount"].as_u64().unwrap_or(0) >= u64::from(per)
                && !used.contains(f["id"].as_str().unwrap_or_default())
        })
        .collect();
    free.sort_by_key(|f| (f["displayName"].as_str().unwrap_or_default().to_owned(), f["id"].as_str().unwrap_or_default().to_owned()));
    Ok((free, seen))
}

/// Creates, resizes, retags and deletes the memory clusters until each planned domain has its own with its
/// nodes, then names the instances they launched. `all` is the memory cluster list read before the census
/// gate.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    all: &[Json],
    config_id: &str,
    compute_cluster: &str,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let per = spec.nvlink_domain_nodes().unwrap_or(1);
    let domains = spec.nvlink_domains();
    let live = ours(all, at, census);
    // Scale down: whole domains go, each memory cluster with its instances.
    let extra: Vec<&Json> =
        live.iter().filter(|(name, _)| domain_index(at.name, name).is_none_or(|k| k as usize >= domains.len())).map(|(_, c)| c).collect();
    delete_each(ctx, oci, &extra, timeout).await?;
    let mut work: Vec<(String, String)> = Vec::new();
    let mut missing = Vec::new();
    for d in &domains {
        let want = d.nodes.len() as u64;
        let Some(gmc) = live.get(&d.name) else {
            missing.push(d);
            continue;
        };
        let id = gmc["id"].as_str().unwrap_or_default();
        // Made from the memory cluster as it is when written (`if-match`), read again if it changed.
        let update = |gmc: &Json| {
            let mut body = serde_json::Map::new();
            // A lost node (or one a repair or a rolling update removed): the memory cluster counts one instance
            // fewer; its size brought back relaunches it on the fabric, from the cluster's instance configuration
            // for the spec's revision.
            if gmc["size"].as_u64() != Some(want) {
                body.insert("size".into(), json!(want));
                body.insert("instanceConfigurationId".into(), json!(config_id));
            }
            if tags_of(gmc) != *tags {
                body.insert("freeformTags".into(), json!(tags));
            }
            (!body.is_empty()).then_some(Json::Object(body))
        };
        let Some(body) = update(gmc) else { continue };
        let what = format!("GPU memory cluster {}", d.name);
        let path = format!("/computeGpuMemoryClusters/{id}");
        if body.get("size").is_some() && gmc["lifecycleState"].as_str() != Some("ACTIVE") {
            oci.wait_state(ctx, Service::Core, &path, &["ACTIVE"], &["DELETING", "DELETED"], &format!("waiting for {what}"), timeout)
                .await?;
        }
        let wr = oci.rewrite(ctx, Service::Core, &path, &what, update).await?.and_then(|(_, wr)| wr);
        if let Some(wr) = wr {
            work.push((wr, format!("resizing {what}")));
        }
    }
    let mut created = BTreeMap::new();
    if !missing.is_empty() {
        // Every new domain gets its fabric before anything is made: too few fabrics makes nothing.
        let (free, seen) = free_fabrics(ctx, oci, at, all, per).await?;
        if free.len() < missing.len() {
            return Err(too_few_fabrics(spec, at, missing.len(), &free, &seen).into());
        }
        for (d, fabric) in missing.iter().zip(&free) {
            let body = json!({
                "availabilityDomain": at.zone,
                "compartmentId": at.compartment,
                "computeClusterId": compute_cluster,
                "instanceConfigurationId": config_id,
                "gpuMemoryFabricId": fabric["id"],
                "size": d.nodes.len(),
                "displayName": d.name,
                "freeformTags": tags,
            });
            let what = format!("GPU memory cluster {}", d.name);
            let (gmc, wr) = oci.create(ctx, Service::Core, "computeGpuMemoryClusters", &body, &what).await?;
            created.insert(d.name.clone(), gmc);
            if let Some(wr) = wr {
                work.push((wr, format!("building {what}")));
            }
        }
    }
    let waits = work.iter().map(|(wr, what)| oci.wait_work_request(ctx, Service::Core, wr, what, timeout));
    let failed = futures::future::try_join_all(waits).await.err();
    let mut by_name = live;
    by_name.extend(created);
    let named = name_nodes(ctx, oci, spec, at, &by_name, tags, census).await;
    // A memory cluster OCI could only partly place keeps what came: named above, so that the state and the
    // capacity policy see them under the cluster's names; the failure is what the apply reports.
    if let Some(e) = failed {
        let now = observe(ctx, oci, at, census).await.map(|n| n.len()).unwrap_or(0);
        return Err(capacity_message(spec, &e, now));
    }
    named
}

fn too_few_fabrics(spec: &ClusterSpec, at: &Location<'_>, needed: usize, free: &[Json], seen: &[String]) -> String {
    format!(
        "{} needs {needed} more GPU memory fabric(s) in {} (one NVL72 rack per NVLink domain) that are AVAILABLE and HEALTHY with \
         {} hosts available and no GPU memory cluster on them; {} qualif{}. The fabrics OCI lists there: {}. GPU memory fabrics come \
         with the GB200/GB300 racks OCI provisions for the tenancy (dedicated capacity); the provider never creates one. Nothing was \
         created for the new domains: free a fabric or lower node_count, and apply again",
        spec.name,
        at.zone,
        spec.nvlink_domain_nodes().unwrap_or(0),
        free.len(),
        if free.len() == 1 { "ies" } else { "y" },
        if seen.is_empty() { "none".to_owned() } else { seen.join("; ") }
    )
}

/// Deletes memory clusters (OCI terminates their instances) and waits for each.
async fn delete_each(ctx: &Context, oci: &Oci, clusters: &[&Json], timeout: Duration) -> Result<(), CloudError> {
    let targets: Vec<(String, String)> = clusters
        .iter()
        .map(|c| {
            let id = c["id"].as_str().unwrap_or_default().to_owned();
            (format!("GPU memory cluster {}", c["displayName"].as_str().unwrap_or(&id)), id)
        })
        .collect();
    futures::stream::iter(targets.into_iter().map(|(what, id)| async move {
        if let Some(wr) = oci.delete(ctx, Service::Core, &format!("/computeGpuMemoryClusters/{id}"), &what, timeout).await? {
            oci.wait_work_request(ctx, Service::Core, &wr, &format!("deleting {what}"), timeout).await?;
        }
        Ok::<(), CloudError>(())
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<()>>()
    .await
    .map(|_| ())
}

/// Deletes the cluster's own memory clusters (and with them their instances).
pub async fn delete(ctx: &Context, oci: &Oci, at: &Location<'_>, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let live = clusters(ctx, oci, at, census).await?;
    delete_each(ctx, oci, &live.values().collect::<Vec<_>>(), timeout).await
}

/// Gives the instances the memory clusters launched the cluster's names, `<cluster>-<i>` with `i` in their
/// domain's range (lowest free first), and every node the cluster's tags (beside its own revision and
/// self-check tags). Only a domain short of named nodes has its instances listed, to tell which unnamed
/// instances are its.
async fn name_nodes(
    ctx: &Context,
    oci: &Oci,
    spec: &ClusterSpec,
    at: &Location<'_>,
    clusters: &BTreeMap<String, Json>,
    tags: &BTreeMap<String, String>,
    census: &Census,
) -> Result<(), CloudError> {
    let nodes = observe(ctx, oci, at, census).await?;
    let named: BTreeSet<u32> =
        nodes.iter().filter_map(|n| node_index(at.name, n["displayName"].as_str()?)).filter(|i| *i < spec.node_count).collect();
    let unnamed: BTreeMap<&str, &Json> = nodes
        .iter()
        .filter(|n| node_index(at.name, n["displayName"].as_str().unwrap_or_default()).is_none_or(|i| i >= spec.node_count))
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    // Each named with the cluster's name and tags, or given its tags, keeping its own keys as the node has
    // them when written (`if-match`); the revision of its configuration given to a new one.
    let mut updates: Vec<(String, Option<String>, String)> = Vec::new();
    let revision = spec.revision();
    for d in spec.nvlink_domains() {
        let short = d.nodes.iter().any(|i| !named.contains(i));
        let Some(gmc) = clusters.get(&d.name).filter(|_| short && !unnamed.is_empty()) else { continue };
        let id = gmc["id"].as_str().unwrap_or_default();
        let members = oci.list(ctx, Service::Core, &format!("computeGpuMemoryClusters/{id}/instances"), "").await?;
        let mut free = d.nodes.iter().filter(|i| !named.contains(i));
        for m in members.iter().filter(|m| !matches!(m["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED"))) {
            let Some(member) = m["id"].as_str().filter(|i| unnamed.contains_key(i)) else { continue };
            let Some(i) = free.next() else { break };
            updates.push((member.to_owned(), Some(revision.clone()), node_name(at.name, *i)));
        }
    }
    // Tags changed: every named node gets them.
    for n in nodes.iter().filter(|n| !unnamed.contains_key(n["id"].as_str().unwrap_or_default())) {
        let live = tags_of(n);
        let wanted = node_tags(&live, tags, None);
        if live != wanted {
            let name = n["displayName"].as_str().unwrap_or_default().to_owned();
            updates.push((n["id"].as_str().unwrap_or_default().to_owned(), None, name));
        }
    }
    futures::stream::iter(updates.into_iter().map(|(id, revision, name)| async move {
        let update = |n: &Json| {
            let live = tags_of(n);
            let wanted = node_tags(&live, tags, revision.as_deref());
            match &revision {
                Some(_) => Some(json!({"displayName": name, "freeformTags": wanted})),
                None => (live != wanted).then(|| json!({"freeformTags": wanted})),
            }
        };
        oci.rewrite(ctx, Service::Core, &format!("/instances/{id}"), &format!("node {name}"), update).await.map(|_| ())
    }))
    .buffer_unordered(PARALLEL)
    .try_collect::<Vec<()>>()
    .await
    .map(|_| ())
}

/// A cluster state brought to each NVLink domain as found: a domain's node piece counts and names its own
/// nodes (missing when none is up), its memory cluster piece shows the size OCI reports (missing when the
/// memory cluster is gone, and then its fabric piece too: a new one is found for it). `clusters` is `None`
/// when they were not read. Applied after [`shared::with_nodes`].
pub fn with_domains(state: &Value, nodes: &[NodeAddress], clusters: Option<&BTreeMap<String, Json>>, per: u32) -> Value {
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let Some(pieces) = state.get("expansion").as_list() else { return state.clone() };
    let pieces: Vec<Value> = pieces
        .iter()
        .map(|p| {
            let piece_name = p.get("name").as_str().unwrap_or_default();
            let Some(k) = domain_index(&name, piece_name) else { return p.clone() };
            let one = |count: Option<i64>, settings: &[(&str, String)]| {
                let kind = p.get("kind").as_str().unwrap_or_default();
                let patched = shared::patch_piece(&Value::list([p.clone()]), kind, count, settings);
                patched.as_list().and_then(|l| l.first().cloned()).unwrap_or_else(|| p.clone())
            };
            let gmc = clusters.map(|c| c.get(piece_name));
            match p.get("kind").as_str() {
                Some(super::cluster::NODES) => {
                    let mine = crate::nodes::nodes_in_domain(&name, nodes.iter().map(|n| n.name.as_str()), k, per);
                    let names = crate::nodes::domain_names_setting(&name, k, per, &mine);
                    let patched = one(Some(mine.len() as i64), &[("names", names)]);
                    if mine.is_empty() { shared::marked_missing(&patched) } else { patched }
                }
                Some(CLUSTER) => match gmc {
                    Some(None) => shared::marked_missing(p),
                    Some(Some(c)) => one(None, &[("size", c["size"].as_u64().unwrap_or(0).to_string())]),
                    None => p.clone(),
                },
                Some(FABRIC) => match gmc {
                    Some(None) => shared::marked_missing(p),
                    _ => p.clone(),
                },
                _ => p.clone(),
            }
        })
        .collect();
    shared::with_attr(state, "expansion", Value::list(pieces))
}
