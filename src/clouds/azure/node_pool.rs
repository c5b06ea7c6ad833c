//! An AKS agent pool of GPU nodes (azure-mgmt-containerservice, `agentPools`): one virtual machine scale
//! set, in the fabric's proximity placement group and subnet, with the GPU driver left to the NVIDIA
//! operators (`gpuProfile.driver = None`). InfiniBand connects the VMs of one scale set only, so a pool is
//! one InfiniBand fabric and is never split. The in-cluster half is the NVIDIA Network Operator's
//! `NicClusterPolicy` with the RDMA shared device plugin over the InfiniBand ports.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::api::{self, Arm, Write, short, tags_of};
use super::backend::{self, arm, group_of, unknown_fabric};
use crate::catalog::{Fabric, limits::AZURE_VMSS_MAX_IB_NODES};
use crate::clouds::backend::{Backend, Change, ClusterFacts, ImportError, Imported, NodePoolBackend, Outcome, Step};
use crate::clouds::error::{CloudError, ErrorKind};
use crate::clouds::kubernetes::{InCluster, NODE_LABEL, network_operator, pool_tags, taint_string};
use crate::clouds::shared::with_attr;
use crate::framework::{AttributePath, Diagnostics};
use crate::framework::{Context, Value};
use crate::model::{CapacityType, Defaults, NodeAmount, NodePoolSpec, Piece, Placement, tag_string};
use crate::ownership::{Census, marker_in_json};

/// `/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name>`.
fn managed_cluster_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('/').collect();
    parts.len() == 9
        && parts[0].is_empty()
        && parts[1].eq_ignore_ascii_case("subscriptions")
        && parts[3].eq_ignore_ascii_case("resourceGroups")
        && parts[5].eq_ignore_ascii_case("providers")
        && parts[6].eq_ignore_ascii_case("Microsoft.ContainerService")
        && parts[7].eq_ignore_ascii_case("managedClusters")
        && [2, 4, 8].iter().all(|i| !parts[*i].is_empty())
}

/// Linux agent pool names: 1-12 lowercase letters and digits, starting with a letter.
fn agent_pool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b.len() <= 12 && b[0].is_ascii_lowercase() && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

pub fn fits(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let c = &spec.nodes;
    if !agent_pool_name(&c.name) {
        diags.error_at(
            AttributePath::attr("name"),
            "Invalid AKS agent pool name",
            format!(
                "{:?} cannot name an AKS Linux agent pool: 1 to 12 lowercase letters and digits, starting with a letter (e.g. \"gpu1\").",
                c.name
            ),
        );
        ok = false;
    }
    if !managed_cluster_id(&spec.kubernetes_cluster) {
        diags.error_at(
            AttributePath::attr("kubernetes_cluster"),
            "Invalid AKS cluster id",
            format!(
                "{:?} is not an AKS cluster's resource id: /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name> (azurerm_kubernetes_cluster.<x>.id).",
                spec.kubernetes_cluster
            ),
        );
        ok = false;
    }
    if spec.node_role.is_some() {
        diags.error_at(
            AttributePath::attr("node_role"),
            "Node role not used on AKS",
            "An AKS agent pool's nodes run as the cluster's kubelet identity: remove node_role.",
        );
        ok = false;
    }
    for (attr, set, why) in [
        ("image", c.image.is_some(), "AKS boots its own node image for the cluster's version"),
        ("ssh_public_key", c.ssh_public_key.is_some(), "AKS nodes take the key of the cluster's Linux profile"),
        ("user_data", c.user_data.is_some(), "AKS agent pools take no user data"),
    ] {
        if set {
            diags.error_at(AttributePath::attr(attr), "Not used on AKS", format!("{why}: remove {attr}."));
            ok = false;
        }
    }
    let largest = spec.autoscaling.map_or(c.node_count, |(_, max)| max);
    if c.fabric.sku.fabric == Fabric::InfiniBand && largest > AZURE_VMSS_MAX_IB_NODES {
        diags.error_at(
            AttributePath::attr(if spec.autoscaling.is_some() { "autoscaling" } else { "node_count" }),
            "Pool larger than one InfiniBand fabric",
            format!(
                "An AKS agent pool is one scale set, and InfiniBand joins at most {AZURE_VMSS_MAX_IB_NODES} VMs of one scale set; this pool \
                 could hold {largest}. Keep it to {AZURE_VMSS_MAX_IB_NODES} nodes and make a second pool for more: jobs must then keep \
                 to one pool (its InfiniBand does not reach the other)."
            ),
        );
        ok = false;
    }
    ok
}

pub fn node_pool(spec: &NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
    let c = &spec.nodes;
    let n = &c.name;
    let f = &c.fabric;
    let tags = tag_string(&pool_tags(spec, d));
    let taints: Vec<String> = spec.taints.iter().map(taint_string).collect();
    let pool = Piece::new("azurerm_kubernetes_cluster_node_pool", n.as_str())
        .set("kubernetes_cluster_id", &spec.kubernetes_cluster)
        .set("vm_size", f.sku.name)
        .set("node_count", c.node_count)
        .set("auto_scaling_enabled", spec.autoscaling.is_some())
        .set_opt("min_count", spec.autoscaling.map(|(min, _)| min))
        .set_opt("max_count", spec.autoscaling.map(|(_, max)| max))
        .set_opt("orchestrator_version", spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}")))
        .set("os_sku", "Ubuntu")
        .set("vnet_subnet_id", c.network_label("subnet"))
        .set("requires", "the fabric's virtual network is the AKS cluster's (Azure CNI), or peered with it")
        .set(
            "proximity_placement_group_id",
            if f.placement == Placement::Cluster { format!("azurerm_proximity_placement_group.{}-ppg", f.name) } else { "(none)".into() },
        )
        .set("gpu_driver", "None (the NVIDIA GPU Operator installs it)")
        .set("priority", if c.capacity == CapacityType::Spot { "Spot, eviction_policy = Delete" } else { "Regular" })
        .set_opt("capacity_reservation_group_id", c.reservation_id.as_deref())
        .set("node_labels", tag_string(labels))
        .set("node_taints", if taints.is_empty() { "(none)".into() } else { taints.join(", ") })
        .set(
            "upgrade_settings",
            format!(
                "max_surge = 0, max_unavailable = {}",
                match c.day2.batch_size {
                    NodeAmount::Count(k) => k.to_string(),
                    NodeAmount::Percent(p) => format!("{p}%"),
                }
            ),
        )
        .set("tags", &tags);
    vec![pool]
}

pub fn kubernetes(spec: &NodePoolSpec) -> InCluster {
    // No Azure API names a VM's rack or switch: the pool (one scale set, one InfiniBand fabric) is the level.
    network_operator(spec, "infiniband", &[NODE_LABEL, "kubernetes.io/hostname"])
}

// ------------------------------------------------------------------------------------------ backend

/// azure-mgmt-containerservice 41.8.0's API version.
pub const AKS_API: &str = "2026-08-01";

/// The piece kind the census knows an agent pool by.
const AGENT_POOL: &str = "azurerm_kubernetes_cluster_node_pool";

/// The agent pool's ARM id under its cluster.
pub fn agent_pool_id(cluster: &str, pool: &str) -> String {
    format!("{}/agentPools/{pool}", cluster.trim_end_matches('/'))
}

/// The cluster id's resource group and name.
fn cluster_parts(cluster: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = cluster.trim_end_matches('/').split('/').collect();
    (parts.len() == 9).then(|| (parts[4], parts[8]))
}

/// `azure/<cluster's resource group>/<cluster>/<pool>`.
pub fn pool_id(cluster: &str, pool: &str) -> Option<String> {
    let (group, name) = cluster_parts(cluster)?;
    Some(crate::clouds::shared::resource_id(crate::catalog::Cloud::Azure, &[group, name], pool))
}

/// The whole agent pool a PUT writes (a PUT replaces it): one scale set of the fabric's node type in its
/// subnet and proximity placement group, the GPU driver left to the NVIDIA operators, no surge (a GPU node
/// more than the reservation holds may not exist), the labels and taints, autoscaling bounds, spot.
fn body(spec: &NodePoolSpec, subnet: &str, ppg: Option<&str>, labels: &BTreeMap<String, String>, tags: &BTreeMap<String, String>) -> Json {
    let c = &spec.nodes;
    let mut p = json!({
        "count": c.node_count,
        "vmSize": c.fabric.sku.name,
        "osType": "Linux",
        "osSKU": "Ubuntu",
        "mode": "User",
        "vnetSubnetID": subnet,
        "nodeLabels": labels,
        "nodeTaints": spec.taints.iter().map(taint_string).collect::<Vec<_>>(),
        "enableAutoScaling": spec.autoscaling.is_some(),
        "scaleSetPriority": if c.capacity == CapacityType::Spot { "Spot" } else { "Regular" },
        "gpuProfile": {"driver": "None"},
        "upgradeSettings": {"maxSurge": "0", "maxUnavailable": match c.day2.batch_size {
            NodeAmount::Count(k) => k.to_string(),
            NodeAmount::Percent(p) => format!("{p}%"),
        }},
        "tags": tags,
    });
    if let Some((min, max)) = spec.autoscaling {
        p["minCount"] = json!(min);
        p["maxCount"] = json!(max);
    }
    if c.capacity == CapacityType::Spot {
        p["scaleSetEvictionPolicy"] = json!("Delete");
    }
    if let Some(ppg) = ppg {
        p["proximityPlacementGroupID"] = json!(ppg);
    }
    if let Some(r) = &c.reservation_id {
        p["capacityReservationGroupID"] = json!(r);
    }
    if let Some((a, b)) = spec.kubernetes_version {
        p["orchestratorVersion"] = json!(format!("{a}.{b}"));
    }
    json!({"properties": p})
}

/// The agent pool, if it exists; one another owner holds is a Conflict naming it (never written over).
async fn agent_pool(ctx: &Context, arm: &Arm, id: &str, census: &Census) -> Result<Option<Json>, CloudError> {
    let Some(found) = arm.get(ctx, id, AKS_API).await? else { return Ok(None) };
    let tags = json!(found["properties"]["tags"]);
    if census.admit(AGENT_POOL, &short(id), marker_in_json(&tags), None) {
        return Ok(Some(found));
    }
    Err(CloudError::new(
        ErrorKind::Conflict,
        None,
        format!("agent pool {} is another owner's (its hpc:owner tag): choose another pool name", short(id)),
    ))
}

/// Makes or brings the agent pool to `spec`, after reading the cluster (never changed): it must be in the
/// fabric's region, and its other pools in the fabric's virtual network.
#[allow(clippy::too_many_arguments)]
pub async fn converge(
    ctx: &Context,
    arm: &Arm,
    spec: &NodePoolSpec,
    group: &str,
    labels: &BTreeMap<String, String>,
    tags: &BTreeMap<String, String>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let c = &spec.nodes;
    let invalid = |message: String| CloudError::new(ErrorKind::InvalidRequest { field: Some("kubernetes_cluster".into()) }, None, message);
    let cluster = arm
        .get(ctx, &spec.kubernetes_cluster, AKS_API)
        .await?
        .ok_or_else(|| invalid(format!("no AKS cluster {}: kubernetes_cluster must name an existing cluster", spec.kubernetes_cluster)))?;
    let location = cluster["location"].as_str().unwrap_or_default();
    if !location.eq_ignore_ascii_case(&c.fabric.region) {
        return Err(invalid(format!(
            "AKS cluster {} is in {location}, the fabric in {}: an agent pool's VMs are in its cluster's region; use a fabric in {location}",
            short(&spec.kubernetes_cluster),
            c.fabric.region
        )));
    }
    let subnet = super::cluster::subnet_of(ctx, arm, group, &c.fabric.name).await?;
    let vnet_of = |s: &str| s.to_lowercase().split_once("/subnets/").map(|(v, _)| v.to_owned());
    let others: Vec<String> = cluster["properties"]["agentPoolProfiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["vnetSubnetID"].as_str().map(str::to_owned))
        .collect();
    if let Some(other) = others.iter().find(|o| vnet_of(o) != vnet_of(&subnet)) {
        return Err(invalid(format!(
            "AKS cluster {} runs its pools in {}, the fabric in {}: a cluster's pools share one virtual network (Azure CNI). Give the \
             fabric the cluster's virtual network (vpc_id) and a subnet of it (subnet_id)",
            short(&spec.kubernetes_cluster),
            vnet_of(other).unwrap_or_default(),
            vnet_of(&subnet).unwrap_or_default()
        )));
    }
    let ppg = (c.fabric.placement == Placement::Cluster)
        .then(|| format!("{}/providers/Microsoft.Compute/proximityPlacementGroups/{}-ppg", arm.group_id(group), c.fabric.name));
    let id = agent_pool_id(&spec.kubernetes_cluster, &c.name);
    let want = body(spec, &subnet, ppg.as_deref(), labels, tags);
    match agent_pool(ctx, arm, &id, census).await? {
        None => {
            census.gate()?;
            arm.put(ctx, &id, AKS_API, &want, Write::Create, timeout).await?;
        }
        Some(found) if api::holds(&found, &want) => {}
        Some(found) => {
            // The pool as read, under its etag: another writer's change in between is refused (412), not overwritten.
            let etag = found["properties"]["eTag"].as_str().unwrap_or("*").to_owned();
            arm.put(ctx, &id, AKS_API, &want, Write::UpdateIf(&etag), timeout).await?;
        }
    }
    Ok(())
}

/// A pool's state brought to the agent pool as it is: its size (or autoscaling bounds), labels and taints.
fn refreshed(state: &Value, found: &Json) -> Value {
    let p = &found["properties"];
    let mut out = state.clone();
    let int = |v: &Json| Value::int(v.as_i64().unwrap_or(0));
    if state.get("autoscaling").is_null() {
        out = with_attr(&out, "node_count", int(&p["count"]));
    } else {
        out = with_attr(&out, "autoscaling", Value::object([("min_count", int(&p["minCount"])), ("max_count", int(&p["maxCount"]))]));
    }
    crate::clouds::kubernetes::with_live_labels_and_taints(&out, &node_labels(p), live_taints(p))
}

/// The labels an agent pool's nodes carry.
fn node_labels(p: &Json) -> BTreeMap<String, String> {
    p["nodeLabels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default()
}

/// The taints an agent pool's nodes carry (`key=value:Effect`).
fn live_taints(p: &Json) -> std::collections::BTreeSet<crate::clouds::kubernetes::LiveTaint> {
    p["nodeTaints"].as_array().into_iter().flatten().filter_map(|t| t.as_str()).filter_map(crate::clouds::kubernetes::parse_taint).collect()
}

/// The configuration of an imported pool, from its agent pool.
fn imported_config(cluster: &str, pool: &str, found: &Json, defaults: &BTreeMap<String, String>) -> Result<Value, CloudError> {
    let p = &found["properties"];
    let tags = tags_of(&json!({"tags": p["tags"]}));
    let fabric = tags
        .get("hpc:fabric")
        .cloned()
        .ok_or_else(|| CloudError::other(format!("agent pool {pool} has no hpc:fabric tag: it was not made by this provider")))?;
    // The fabric's resource group is its proximity placement group's, else its subnet's.
    let group_in = |id: &str| id.split('/').nth(4).map(str::to_owned);
    let ppg = p["proximityPlacementGroupID"].as_str();
    let group = ppg.or(p["vnetSubnetID"].as_str()).and_then(group_in).unwrap_or_default();
    let labels = crate::clouds::kubernetes::user_labels(&node_labels(p));
    let taints: Vec<Value> = live_taints(p).into_iter().map(crate::clouds::kubernetes::taint_block).collect();
    let autoscaling = if p["enableAutoScaling"] == true {
        Value::object([
            ("min_count", Value::int(p["minCount"].as_i64().unwrap_or(0))),
            ("max_count", Value::int(p["maxCount"].as_i64().unwrap_or(0))),
        ])
    } else {
        Value::Null
    };
    let batch = p["upgradeSettings"]["maxUnavailable"].as_str().filter(|b| *b != "25%").map(str::to_owned);
    let capacity = match (p["scaleSetPriority"].as_str(), p["capacityReservationGroupID"].as_str()) {
        (Some("Spot"), _) => Value::from("spot"),
        (_, Some(_)) => Value::from("reservation"),
        _ => Value::Null,
    };
    let fabric_ref = Value::object([
        ("id", Value::from(api::resource_id(&group, &fabric))),
        ("cloud", Value::from("azure")),
        ("region", Value::from(found["location"].as_str().map(str::to_owned))),
        ("zone", Value::Null),
        ("name", Value::from(fabric.as_str())),
        ("instance_type", Value::from(p["vmSize"].as_str().map(str::to_owned))),
        ("placement", Value::from(if ppg.is_some() { "cluster" } else { "none" })),
    ]);
    Ok(Value::object([
        ("name", Value::from(pool)),
        ("fabric", fabric_ref),
        ("kubernetes_cluster", Value::from(cluster)),
        ("kubernetes_version", Value::from(p["orchestratorVersion"].as_str().map(str::to_owned))),
        ("node_count", Value::int(p["count"].as_i64().unwrap_or(0))),
        ("capacity_type", capacity),
        ("reservation_id", Value::from(p["capacityReservationGroupID"].as_str().map(str::to_owned))),
        (
            "labels",
            if labels.is_empty() { Value::Null } else { Value::Map(labels.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) },
        ),
        ("taint", Value::list(taints)),
        ("autoscaling", autoscaling),
        ("update_strategy", batch.map_or(Value::Null, |b| Value::object([("batch_size", Value::from(b))]))),
        ("tags", api::imported_tags(&tags, defaults)),
    ]))
}

fn cluster_of(v: &Value) -> &str {
    v.get("kubernetes_cluster").as_str().unwrap_or_default()
}

fn pool_of(v: &Value) -> &str {
    v.get("name").as_str().unwrap_or_default()
}

#[async_trait]
impl NodePoolBackend for backend::Azure {
    /// The managed cluster, once: it exists, in the fabric's region.
    async fn cluster_facts(&self, ctx: &Context, spec: &NodePoolSpec) -> Result<Option<ClusterFacts>, CloudError> {
        let arm = arm(ctx).await?;
        let mut refusals = Vec::new();
        let Some(cluster) = arm.get(ctx, &spec.kubernetes_cluster, AKS_API).await? else {
            refusals.push((
                "kubernetes_cluster",
                "No such AKS cluster".to_owned(),
                format!(
                    "No AKS cluster {}: name an existing cluster by its resource id (azurerm_kubernetes_cluster.<x>.id).",
                    spec.kubernetes_cluster
                ),
            ));
            return Ok(Some(ClusterFacts { version: None, refusals }));
        };
        let location = cluster["location"].as_str().unwrap_or_default();
        if !location.eq_ignore_ascii_case(&spec.nodes.fabric.region) {
            refusals.push((
                "fabric",
                "AKS cluster in another region".to_owned(),
                format!(
                    "AKS cluster {} is in {location}, the fabric in {}: an agent pool's VMs are in its cluster's region. Use a fabric in \
                     {location}.",
                    short(&spec.kubernetes_cluster),
                    spec.nodes.fabric.region
                ),
            ));
        }
        let props = &cluster["properties"];
        let version = props["currentKubernetesVersion"].as_str().or(props["kubernetesVersion"].as_str());
        Ok(Some(ClusterFacts { version: version.and_then(crate::clouds::kubernetes::minor_version), refusals }))
    }
}

#[async_trait]
impl Backend<NodePoolSpec> for backend::Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        arm(ctx).await.map(|_| ())
    }

    fn id(&self, spec: &NodePoolSpec) -> Option<String> {
        pool_id(&spec.kubernetes_cluster, &spec.nodes.name)
    }

    fn place(&self, v: &Value) -> String {
        format!("in AKS cluster {}", short(cluster_of(v)))
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        backend::unknown_fabric_summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, NodePoolSpec>) -> Outcome {
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let Some(group) = group_of(change.planned) else { return Outcome::failed(change.prior.clone(), unknown_fabric()) };
        let labels: BTreeMap<String, String> = change
            .planned
            .get("node_labels")
            .as_map()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default();
        let spec = change.spec;
        match converge(step.ctx, &arm, spec, &group, &labels, change.tags, step.timeout, step.census).await {
            Ok(()) => Outcome::done(change.state.clone()),
            Err(e) => {
                let id = agent_pool_id(&spec.kubernetes_cluster, &spec.nodes.name);
                match arm.get(step.ctx, &id, AKS_API).await {
                    Ok(Some(found)) => Outcome::failed(refreshed(change.state, &found), e),
                    Ok(None) if change.creating() => Outcome::failed(Value::Null, e),
                    _ => Outcome::failed(change.prior.clone(), e),
                }
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&NodePoolSpec>) -> Outcome {
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let id = agent_pool_id(cluster_of(prior), pool_of(prior));
        let done = match agent_pool(step.ctx, &arm, &id, step.census).await {
            Ok(Some(_)) => arm.delete(step.ctx, &id, AKS_API, step.timeout).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&NodePoolSpec>) -> Result<Option<Value>, CloudError> {
        let arm = arm(step.ctx).await?;
        let id = agent_pool_id(cluster_of(state), pool_of(state));
        Ok(agent_pool(step.ctx, &arm, &id, step.census).await?.map(|found| refreshed(state, &found)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some([group, cluster, pool]) = crate::clouds::shared::parse_id::<3>(crate::catalog::Cloud::Azure, id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure node pool id: give \"azure/<AKS cluster's resource group>/<AKS cluster>/<pool name>\", e.g. \
                 \"azure/ml-rg/ml-prod/gpu\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::failed)?;
        let cluster_id = format!("{}/providers/Microsoft.ContainerService/managedClusters/{cluster}", arm.group_id(group));
        let pool_id = agent_pool_id(&cluster_id, pool);
        let found = agent_pool(step.ctx, &arm, &pool_id, step.census).await.map_err(ImportError::failed)?.ok_or_else(|| {
            ImportError::failed(CloudError::new(ErrorKind::NotFound, None, format!("no agent pool {pool} in AKS cluster {cluster}")))
        })?;
        let mut found = found;
        // An agent pool's location is its cluster's.
        if found["location"].is_null() {
            let cluster = arm.get(step.ctx, &cluster_id, AKS_API).await.map_err(ImportError::failed)?;
            found["location"] = cluster.map(|c| c["location"].clone()).unwrap_or(Json::Null);
        }
        let config = imported_config(&cluster_id, pool, &found, step.default_tags).map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names() {
        assert!(managed_cluster_id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/ml"));
        assert!(!managed_cluster_id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/ml"));
        assert!(agent_pool_name("gpu1"));
        assert!(!agent_pool_name("gpu-pool"));
        assert!(!agent_pool_name("averylongpoolname"));
    }
}
