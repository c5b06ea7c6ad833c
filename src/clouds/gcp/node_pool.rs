//! A GKE node pool of GPU nodes (`container.v1`, `projects.locations.clusters.nodePools`): in the fabric's
//! zone, in the fabric's compact placement policy (`placementPolicy.type = COMPACT` with `policyName`), with
//! the GPU NICs' networks as `networkConfig.additionalNodeNetworkConfigs` (the cluster must have
//! multi-networking on). The in-cluster half is a `GKENetworkParamSet` and a `Network` per GPU NIC network,
//! which pods name in their `networking.gke.io/interfaces` annotation, and Google's NCCL plugin installer.

use std::collections::BTreeMap;
use std::fmt::Write;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::api::{self, Gcp};
use super::topology::{gpu_vpcs, is_roce, rdma_subnets};
use crate::catalog::Fabric;
use crate::clouds::backend::{Backend, Change, ClusterFacts, ImportError, Imported, NodePoolBackend, Outcome, Step};
use crate::clouds::error::{CloudError, ErrorKind};
use crate::clouds::kubernetes::{InCluster, effect_constant, pool_tags};
use crate::clouds::shared::{Poll, with_attr};
use crate::framework::{AttributePath, Context, Diagnostics, Value, one_of};
use crate::model::{CapacityType, Defaults, NodeAmount, NodePoolSpec, Piece, Placement, tag_string};
use crate::ownership::Census;

/// GKE node image types that carry the GPU driver installer and the multi-NIC support GPU pools need.
const IMAGE_TYPES: [&str; 2] = ["COS_CONTAINERD", "UBUNTU_CONTAINERD"];

/// `projects/<project>/locations/<location>/clusters/<name>` -> the location.
fn cluster_location(id: &str) -> Option<&str> {
    match id.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "locations", location, "clusters", c] if [p, location, c].iter().all(|s| !s.is_empty()) => Some(location),
        _ => None,
    }
}

/// GKE node pool names: RFC 1035 labels of at most 40 characters.
fn pool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !name.ends_with('-')
}

/// The GPU NICs' networks and subnetworks a node of the fabric's type has, besides nic0's, in NIC order.
pub fn additional_networks(spec: &NodePoolSpec) -> Vec<(String, String)> {
    let (f, sku) = (&spec.nodes.fabric.name, spec.nodes.fabric.sku);
    let mut out = Vec::new();
    for i in 0..gpu_vpcs(sku) {
        out.push((format!("{f}-gpu-{i}"), format!("{f}-gpu-{i}")));
    }
    if is_roce(sku) {
        out.push((format!("{f}-gvnic-1"), format!("{f}-gvnic-1")));
        for i in 0..rdma_subnets(sku) {
            out.push((format!("{f}-rdma"), format!("{f}-rdma-{i}")));
        }
    }
    out
}

pub fn fits(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let f = &spec.nodes.fabric;
    match cluster_location(&spec.kubernetes_cluster) {
        None => {
            diags.error_at(
                AttributePath::attr("kubernetes_cluster"),
                "Invalid GKE cluster id",
                format!(
                    "{:?} is not a GKE cluster's id: projects/<project>/locations/<region or zone>/clusters/<name> (google_container_cluster.<x>.id).",
                    spec.kubernetes_cluster
                ),
            );
            ok = false;
        }
        Some(location) if location != f.region && Some(location) != f.zone.as_deref() => {
            diags.error_at(
                AttributePath::attr("kubernetes_cluster"),
                "Cluster and fabric in different places",
                format!(
                    "The cluster is in {location} and the fabric in {} ({}): a node pool's nodes are in its cluster's region, and the \
                     fabric's networks and compact placement are in its zone. Use a fabric in a zone of {location}, or a cluster in {}.",
                    f.zone.as_deref().unwrap_or(&f.region),
                    f.region,
                    f.region
                ),
            );
            ok = false;
        }
        Some(_) => {}
    }
    if !pool_name(&spec.nodes.name) {
        diags.error_at(
            AttributePath::attr("name"),
            "Invalid GKE node pool name",
            format!(
                "{:?} cannot name a GKE node pool: 1 to 40 lowercase letters, digits and hyphens, starting with a letter and not ending \
                 with a hyphen (e.g. \"gpu\").",
                spec.nodes.name
            ),
        );
        ok = false;
    }
    for (attr, set, why) in [
        (
            "user_data",
            spec.nodes.user_data.is_some(),
            "GKE nodes boot GKE's own configuration and take no user data; run setup as a DaemonSet",
        ),
        (
            "ssh_public_key",
            spec.nodes.ssh_public_key.is_some(),
            "GKE pools take no SSH key of their own; reach nodes with OS Login or kubectl debug",
        ),
    ] {
        if set {
            diags.error_at(AttributePath::attr(attr), "Not used on GKE", format!("{why}: remove {attr}."));
            ok = false;
        }
    }
    if let Some(image) = spec.nodes.image.as_deref().filter(|i| !IMAGE_TYPES.contains(i)) {
        diags.error_at(
            AttributePath::attr("image"),
            "Unsupported GKE image type",
            format!("On GKE, image is the node image type: {image:?} is not one. Valid values: {}.", one_of(&IMAGE_TYPES)),
        );
        ok = false;
    }
    ok
}

pub fn node_pool(spec: &NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
    let c = &spec.nodes;
    let n = &c.name;
    let f = &c.fabric;
    let resource_labels = super::labels(&pool_tags(spec, d));
    let networks = additional_networks(spec);
    let taints: Vec<String> = spec.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, effect_constant(t.effect))).collect();
    let reservation = match c.capacity {
        CapacityType::Reservation => format!("SPECIFIC_RESERVATION {}", c.reservation_id.as_deref().unwrap_or_default()),
        CapacityType::Spot | CapacityType::FlexStart => "NO_RESERVATION".into(),
        _ => "ANY_RESERVATION".into(),
    };
    let pool = Piece::new("google_container_node_pool", n.as_str())
        .set("cluster", &spec.kubernetes_cluster)
        .set("node_locations", f.zone.as_deref().unwrap_or(&f.region))
        .set("initial_node_count", c.node_count)
        .set_opt("autoscaling", spec.autoscaling.map(|(min, max)| format!("total_min_node_count = {min}, total_max_node_count = {max}")))
        .set_opt("version", spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}")))
        .set(
            "placement_policy",
            if f.placement == Placement::Cluster {
                format!("COMPACT, policy_name = google_compute_resource_policy.{}-placement", f.name)
            } else {
                "(none)".into()
            },
        )
        .set("node_config.machine_type", f.sku.name)
        .set("node_config.image_type", c.image.as_deref().unwrap_or(IMAGE_TYPES[0]))
        .set(
            "node_config.guest_accelerator",
            format!("{} x {}, gpu_driver_installation_config.gpu_driver_version = LATEST", f.sku.gpu_count, f.sku.gpu_model),
        )
        .set("node_config.gvnic.enabled", true)
        .set("node_config.reservation_affinity", reservation)
        .set("node_config.spot", c.capacity == CapacityType::Spot)
        .set("node_config.flex_start", c.capacity == CapacityType::FlexStart)
        .set_opt("node_config.service_account", spec.node_role.as_deref())
        .set("node_config.labels", tag_string(labels))
        .set("node_config.taints", if taints.is_empty() { "(none)".into() } else { taints.join(", ") })
        .set("node_config.resource_labels", &resource_labels)
        .set("management.auto_repair", c.day2.repair == crate::model::Repair::Replace)
        // A training pool's nodes change when the configuration says so, not when GKE picks a version.
        .set("management.auto_upgrade", false)
        .set(
            "upgrade_settings",
            format!(
                "SURGE, max_surge = 0, max_unavailable = {}",
                match c.day2.batch_size {
                    NodeAmount::Count(k) => k,
                    amount => amount.of(c.node_count),
                }
            ),
        );
    let mut out = vec![pool];
    if !networks.is_empty() {
        out.push(
            Piece::new("google_container_node_pool.network_config.additional_node_network_configs", format!("{n} gpu nics"))
                .count(networks.len() as u32)
                .set("networks", networks.iter().map(|(net, sub)| format!("{net}/{sub}")).collect::<Vec<_>>().join(", "))
                .set("requires", "networkConfig.enableMultiNetworking on the cluster (and ADVANCED_DATAPATH)"),
        );
    }
    out
}

pub fn kubernetes(spec: &NodePoolSpec) -> InCluster {
    let sku = spec.nodes.fabric.sku;
    let networks = additional_networks(spec);
    let mut y = String::new();
    let (device_mode, installer) = match sku.fabric {
        Fabric::Roce => ("RDMA", "gpudirect-rdma/nccl-rdma-installer.yaml"),
        Fabric::GpuDirectTcpxo => ("NetDevice", "gpudirect-tcpxo/nccl-tcpxo-installer.yaml"),
        Fabric::GpuDirectTcpx => ("NetDevice", "gpudirect-tcpx/nccl-tcpx-installer.yaml"),
        _ => ("", ""),
    };
    if networks.is_empty() {
        let _ = writeln!(y, "# {} has no GPU NICs besides nic0: no Network objects or NCCL plugin are needed.", sku.name);
    } else {
        let _ = writeln!(y, "# The GPU NICs' networks of {} as GKE objects; pods list them in their", sku.name);
        y.push_str("# networking.gke.io/interfaces annotation. Then Google's NCCL plugin installer DaemonSet:\n");
        let _ = writeln!(
            y,
            "#   kubectl apply -f https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master/{installer}"
        );
        let prefix = if device_mode == "RDMA" { "rdma" } else { "gpu" };
        let mut devices = 0;
        for (network, subnet) in &networks {
            // A RoCE node's second gVNIC is on an ordinary L3 network; the GPU NICs are devices.
            let l3 = network.ends_with("-gvnic-1");
            let name = if l3 {
                "gvnic-1".to_owned()
            } else {
                devices += 1;
                format!("{prefix}-{}", devices - 1)
            };
            let _ = write!(
                y,
                "---\napiVersion: networking.gke.io/v1\nkind: GKENetworkParamSet\nmetadata:\n  name: {name}\nspec:\n  vpc: {network}\n  vpcSubnet: {subnet}\n"
            );
            if !l3 {
                let _ = writeln!(y, "  deviceMode: {device_mode}");
            }
            let _ = write!(
                y,
                "---\napiVersion: networking.gke.io/v1\nkind: Network\nmetadata:\n  name: {name}\nspec:\n  type: {}\n  parametersRef:\n    group: networking.gke.io\n    kind: GKENetworkParamSet\n    name: {name}\n",
                if l3 { "L3" } else { "Device" }
            );
        }
    }
    InCluster {
        topology_levels: [
            "cloud.google.com/gce-topology-block",
            "cloud.google.com/gce-topology-subblock",
            "cloud.google.com/gce-topology-host",
            "kubernetes.io/hostname",
        ]
        .map(str::to_owned)
        .to_vec(),
        labels: BTreeMap::new(),
        device_plugin: y,
        device_resources: BTreeMap::new(),
    }
}

// ------------------------------------------------------------------------------------------ backend

/// The GKE API (`container.v1`), or the endpoint override.
pub const CONTAINER: &str = "https://container.googleapis.com";

/// The piece kind the census knows a node pool by.
const NODE_POOL: &str = "google_container_node_pool";

/// The GKE accelerator type of a machine type's GPUs (Google Cloud's GPU machine types page).
fn accelerator_type(machine_type: &str) -> Option<&'static str> {
    Some(match machine_type {
        "a3-highgpu-8g" => "nvidia-h100-80gb",
        "a3-megagpu-8g" => "nvidia-h100-mega-80gb",
        "a3-ultragpu-8g" => "nvidia-h200-141gb",
        "a4-highgpu-8g" => "nvidia-b200",
        "a4x-highgpu-4g" => "nvidia-gb200",
        "g2-standard-4" => "nvidia-l4",
        _ => return None,
    })
}

/// `projects/<p>/locations/<l>/clusters/<c>` -> (`projects/<p>/locations/<l>`, the cluster's name).
fn cluster_parts(id: &str) -> Option<(String, &str)> {
    let location = cluster_location(id)?;
    let (parent, name) = id.rsplit_once("/clusters/")?;
    let _ = location;
    Some((parent.to_owned(), name))
}

/// The pool's relative name under its cluster.
fn pool_path(cluster: &str, pool: &str) -> String {
    format!("{}/nodePools/{pool}", cluster.trim_end_matches('/'))
}

fn url(gcp: &Gcp, path: &str) -> String {
    format!("{}/v1/{}", api::base(gcp, CONTAINER), path.trim_start_matches('/'))
}

/// A GET that answers `None` for 404.
async fn get(ctx: &Context, gcp: &Gcp, path: &str, what: &str) -> Result<Option<Json>, CloudError> {
    match api::rest(ctx, gcp, reqwest::Method::GET, &url(gcp, path), None, what).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// GKE refuses a write while another operation runs on the cluster ("Cluster is running incompatible
/// operation"): the write waits for it, within the step's time, and is sent again.
fn busy(e: &CloudError) -> bool {
    e.message.contains("incompatible operation")
}

/// One write to the cluster's pools (`method` on `path` with `body`), then its operation until it is done.
async fn write(
    ctx: &Context,
    gcp: &Gcp,
    method: reqwest::Method,
    path: &str,
    body: Option<&Json>,
    what: &str,
    timeout: Duration,
) -> Result<(), CloudError> {
    let mut poll = Poll::new(ctx, format!("waiting to {what}"), timeout);
    let op = loop {
        match api::rest(ctx, gcp, method.clone(), &url(gcp, path), body, what).await {
            Err(e) if busy(&e) => poll.pause(None).await?,
            other => break other?,
        }
    };
    wait(ctx, gcp, path, op, what, timeout).await
}

/// Waits until the pool at `path` is RUNNING (or RUNNING_WITH_ERROR); ERROR is the create's failure.
async fn running(ctx: &Context, gcp: &Gcp, path: &str, what: &str, timeout: Duration) -> Result<(), CloudError> {
    let mut poll = Poll::new(ctx, format!("waiting to {what}"), timeout);
    loop {
        let pool = get(ctx, gcp, path, &format!("reading GKE node pool {path}")).await?;
        match pool.as_ref().and_then(|p| p["status"].as_str()) {
            Some("RUNNING" | "RUNNING_WITH_ERROR") => return Ok(()),
            Some("ERROR") => {
                let message = pool.as_ref().and_then(|p| p["statusMessage"].as_str()).unwrap_or("the pool is in ERROR");
                return Err(api::operation_error("ERROR", format!("{what}: {message}")));
            }
            _ => poll.pause(None).await?,
        }
    }
}

/// Polls a GKE operation (`projects/<p>/locations/<l>/operations/<name>`) until it is DONE; its `error`
/// is the write's.
async fn wait(ctx: &Context, gcp: &Gcp, path: &str, mut op: Json, what: &str, timeout: Duration) -> Result<(), CloudError> {
    let parent = path.split("/clusters/").next().unwrap_or_default().to_owned();
    let name = op["name"].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_owned();
    let mut poll = Poll::new(ctx, format!("waiting to {what}"), timeout);
    loop {
        if op["status"] == "DONE" {
            let e = &op["error"];
            if e.is_object() && e["code"].as_i64().unwrap_or(0) != 0 {
                let message = e["message"].as_str().or(op["statusMessage"].as_str()).unwrap_or("the operation failed");
                let code = if message.contains("ZONE_RESOURCE_POOL_EXHAUSTED") { "ZONE_RESOURCE_POOL_EXHAUSTED" } else { "ERROR" };
                return Err(api::operation_error(code, format!("{what}: {message}")));
            }
            return Ok(());
        }
        poll.pause(None).await?;
        let op_path = format!("{parent}/operations/{name}");
        op = api::rest(ctx, gcp, reqwest::Method::GET, &url(gcp, &op_path), None, "reading a GKE operation").await?;
    }
}

/// What the cluster must be for the pool: where the fabric is, with multi-networking on when the nodes
/// have GPU NICs besides nic0. Each refusal names the attribute to change.
fn cluster_refusals(spec: &NodePoolSpec, cluster: &Json) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    let f = &spec.nodes.fabric;
    let zone = f.zone.as_deref().unwrap_or(&f.region);
    let locations: Vec<&str> = cluster["locations"].as_array().into_iter().flatten().filter_map(Json::as_str).collect();
    if !locations.is_empty() && !locations.contains(&zone) {
        out.push((
            "fabric",
            "Fabric outside the cluster's zones".to_owned(),
            format!(
                "GKE cluster {} has nodes in {}, the fabric is in {zone}: a node pool's zones are its cluster's. Use a fabric in one of them, \
                 or add {zone} to the cluster's node locations.",
                spec.kubernetes_cluster,
                locations.join(", ")
            ),
        ));
    }
    if !additional_networks(spec).is_empty() && cluster["networkConfig"]["enableMultiNetworking"] != true {
        out.push((
            "kubernetes_cluster",
            "Multi-networking is off".to_owned(),
            format!(
                "The nodes of {} have GPU NICs on networks of their own, which a GKE pool attaches only in a cluster with \
                 multi-networking: set enable_multi_networking = true and datapath_provider = \"ADVANCED_DATAPATH\" on \
                 google_container_cluster {} (GKE 1.28 or later), or use a fabric of a node type without GPU NICs.",
                f.sku.name, spec.kubernetes_cluster
            ),
        ));
    }
    out
}

/// The pool's `upgradeSettings.maxUnavailable`: the batch as a count of nodes.
fn batch_of(spec: &NodePoolSpec) -> u32 {
    let c = &spec.nodes;
    match c.day2.batch_size {
        NodeAmount::Count(k) => k,
        amount => amount.of(c.node_count),
    }
    .max(1)
}

/// Surge upgrades with no node more than the pool's (a GPU node more than the reservation holds may not
/// exist), `batch_of` nodes at a time.
fn upgrade_settings(spec: &NodePoolSpec) -> Json {
    json!({"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": batch_of(spec)})
}

fn taints_json(spec: &NodePoolSpec) -> Json {
    json!(spec.taints.iter().map(|t| json!({"key": t.key, "value": t.value, "effect": effect_constant(t.effect)})).collect::<Vec<_>>())
}

/// The node pool a create sends: the fabric's machine type with its GPUs, the GPU NICs' networks, the
/// compact placement, the capacity, the labels and taints, no automatic upgrades, no surge.
fn body(project: &str, spec: &NodePoolSpec, labels: &BTreeMap<String, String>, tags: &BTreeMap<String, String>) -> Json {
    let c = &spec.nodes;
    let f = &c.fabric;
    let zone = f.zone.clone().unwrap_or_else(|| f.region.clone());
    let mut config = json!({
        "machineType": f.sku.name,
        "imageType": c.image.as_deref().unwrap_or(IMAGE_TYPES[0]),
        "gvnic": {"enabled": true},
        "labels": labels,
        "taints": taints_json(spec),
        "resourceLabels": api::labels(tags),
        "spot": c.capacity == CapacityType::Spot,
        "flexStart": c.capacity == CapacityType::FlexStart,
        "reservationAffinity": match c.capacity {
            CapacityType::Reservation => json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name", "values": [c.reservation_id.clone().unwrap_or_default()]}),
            CapacityType::Spot | CapacityType::FlexStart => json!({"consumeReservationType": "NO_RESERVATION"}),
            _ => json!({"consumeReservationType": "ANY_RESERVATION"}),
        },
    });
    if let Some(accelerator) = accelerator_type(f.sku.name) {
        config["accelerators"] = json!([{
            "acceleratorType": accelerator,
            "acceleratorCount": f.sku.gpu_count.to_string(),
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
        }]);
    }
    if let Some(account) = &spec.node_role {
        config["serviceAccount"] = json!(account);
    }
    let mut pool = json!({
        "name": c.name,
        "initialNodeCount": c.node_count,
        "locations": [zone],
        "config": config,
        "management": {"autoRepair": c.day2.repair == crate::model::Repair::Replace, "autoUpgrade": false},
        "upgradeSettings": upgrade_settings(spec),
    });
    if let Some((a, b)) = spec.kubernetes_version {
        pool["version"] = json!(format!("{a}.{b}"));
    }
    if let Some((min, max)) = spec.autoscaling {
        pool["autoscaling"] = json!({"enabled": true, "totalMinNodeCount": min, "totalMaxNodeCount": max, "locationPolicy": "ANY"});
    }
    if f.placement == Placement::Cluster && super::topology::gpu_topology(f.sku).is_none() {
        pool["placementPolicy"] = json!({"type": "COMPACT", "policyName": format!("{}-placement", f.name)});
    }
    let networks = additional_networks(spec);
    if !networks.is_empty() {
        let region = &f.region;
        pool["networkConfig"] = json!({"additionalNodeNetworkConfigs": networks.iter().map(|(n, s)| json!({
            "network": format!("projects/{project}/global/networks/{n}"),
            "subnetwork": format!("projects/{project}/regions/{region}/subnetworks/{s}"),
        })).collect::<Vec<_>>()});
    }
    json!({"nodePool": pool})
}

/// A node pool as GKE answers it, and its size: the sum of its managed instance groups' target sizes (a
/// pool has no size of its own after `initialNodeCount`; one compute read per zone).
struct PoolLive {
    pool: Json,
    size: i64,
}

async fn observe(ctx: &Context, gcp: &Gcp, path: &str, census: &Census) -> Result<Option<PoolLive>, CloudError> {
    let Some(pool) = get(ctx, gcp, path, &format!("reading GKE node pool {path}")).await? else { return Ok(None) };
    let marker = pool["config"]["resourceLabels"]["hpc_owner"].as_str();
    let name = pool["name"].as_str().unwrap_or_default();
    if !census.admit(NODE_POOL, name, marker, None) {
        return Err(CloudError::new(
            ErrorKind::Conflict,
            None,
            format!("GKE node pool {name} is another owner's (its hpc_owner resource label): choose another pool name"),
        ));
    }
    let mut size = 0;
    for group in pool["instanceGroupUrls"].as_array().into_iter().flatten().filter_map(Json::as_str) {
        let Some((_, rest)) = group.split_once("/compute/v1/") else { continue };
        let igm_url =
            format!("{}/compute/v1/{}", api::base(gcp, api::COMPUTE), rest.replace("/instanceGroups/", "/instanceGroupManagers/"));
        let igm = api::rest(ctx, gcp, reqwest::Method::GET, &igm_url, None, "reading a GKE node pool's instance group").await?;
        size += igm["targetSize"].as_i64().unwrap_or(0);
    }
    Ok(Some(PoolLive { pool, size }))
}

fn live_labels(pool: &Json) -> BTreeMap<String, String> {
    pool["config"]["labels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default()
}

fn live_taints(pool: &Json) -> std::collections::BTreeSet<crate::clouds::kubernetes::LiveTaint> {
    let effect = |e: &str| match e {
        "PREFER_NO_SCHEDULE" => "PreferNoSchedule",
        "NO_EXECUTE" => "NoExecute",
        _ => "NoSchedule",
    };
    pool["config"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or_default().to_owned();
            (s("key"), s("value"), effect(t["effect"].as_str().unwrap_or_default()).to_owned())
        })
        .collect()
}

/// A pool's state brought to the pool as it is: its size (or autoscaling bounds), labels and taints.
fn refreshed(state: &Value, live: &PoolLive) -> Value {
    let mut out = state.clone();
    let a = &live.pool["autoscaling"];
    if state.get("autoscaling").is_null() || a["enabled"] != true {
        out = with_attr(&out, "node_count", Value::int(live.size));
    } else {
        let int = |v: &Json| Value::int(v.as_i64().unwrap_or(0));
        out = with_attr(
            &out,
            "autoscaling",
            Value::object([("min_count", int(&a["totalMinNodeCount"])), ("max_count", int(&a["totalMaxNodeCount"]))]),
        );
    }
    crate::clouds::kubernetes::with_live_labels_and_taints(&out, &live_labels(&live.pool), live_taints(&live.pool))
}

/// Makes or brings the node pool to `spec`, after reading the cluster (never changed).
async fn converge(
    step: &Step<'_>,
    gcp: &Gcp,
    spec: &NodePoolSpec,
    labels: &BTreeMap<String, String>,
    tags: &BTreeMap<String, String>,
) -> Result<(), CloudError> {
    let ctx = step.ctx;
    let cluster_id = &spec.kubernetes_cluster;
    let invalid = |message: String| CloudError::new(ErrorKind::InvalidRequest { field: Some("kubernetes_cluster".into()) }, None, message);
    let cluster = get(ctx, gcp, cluster_id, &format!("reading GKE cluster {cluster_id}"))
        .await?
        .ok_or_else(|| invalid(format!("no GKE cluster {cluster_id}: kubernetes_cluster must name an existing cluster")))?;
    if let Some((_, summary, detail)) = cluster_refusals(spec, &cluster).into_iter().next() {
        return Err(invalid(format!("{summary}: {detail}")));
    }
    let path = pool_path(cluster_id, &spec.nodes.name);
    let timeout = step.timeout;
    let Some(live) = observe(ctx, gcp, &path, step.census).await? else {
        step.census.gate()?;
        let parent = format!("{}/nodePools", cluster_id.trim_end_matches('/'));
        let what = format!("create GKE node pool {}", spec.nodes.name);
        let made = write(ctx, gcp, reqwest::Method::POST, &parent, Some(&body(&gcp.project, spec, labels, tags)), &what, timeout).await;
        return match made {
            // GKE's create has no request id: a create it carried out whose answer was lost is answered, when
            // sent again, with 409 ALREADY_EXISTS. The pool is this create's if it carries this owner's marker
            // (`observe` refuses another owner's): then it is waited for as the first answer would have been.
            Err(e) if e.status == Some(409) || e.kind == ErrorKind::Conflict => match observe(ctx, gcp, &path, step.census).await? {
                Some(_) => running(ctx, gcp, &path, &what, timeout).await,
                None => Err(e),
            },
            other => other,
        };
    };
    let mut p = live.pool;
    let c = &spec.nodes;
    // The autoscaling bounds, then the size (without autoscaling), then the rest in one update.
    let want_scaling = match spec.autoscaling {
        Some((min, max)) => json!({"enabled": true, "totalMinNodeCount": min, "totalMaxNodeCount": max, "locationPolicy": "ANY"}),
        None => json!({"enabled": false}),
    };
    let enabled = p["autoscaling"]["enabled"] == true;
    let bounds_differ = match spec.autoscaling {
        Some((min, max)) => {
            !enabled
                || p["autoscaling"]["totalMinNodeCount"].as_i64() != Some(i64::from(min))
                || p["autoscaling"]["totalMaxNodeCount"].as_i64() != Some(i64::from(max))
        }
        None => enabled,
    };
    if bounds_differ {
        let what = format!("set the autoscaling of GKE node pool {}", c.name);
        write(
            ctx,
            gcp,
            reqwest::Method::POST,
            &format!("{path}:setAutoscaling"),
            Some(&json!({"autoscaling": want_scaling})),
            &what,
            timeout,
        )
        .await?;
    }
    let resize = spec.autoscaling.is_none() && live.size != i64::from(c.node_count);
    if resize {
        let what = format!("resize GKE node pool {} to {}", c.name, c.node_count);
        write(ctx, gcp, reqwest::Method::POST, &format!("{path}:setSize"), Some(&json!({"nodeCount": c.node_count})), &what, timeout)
            .await?;
    }
    if bounds_differ || resize {
        // Each write gives the pool a new etag, which the update below must send.
        p = get(ctx, gcp, &path, &format!("reading GKE node pool {path}")).await?.unwrap_or(p);
    }
    let p = &p;
    let version = p["version"].as_str().unwrap_or_default();
    let want_version = spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}"));
    let version_differs = want_version
        .as_ref()
        .is_some_and(|w| crate::clouds::kubernetes::minor_version(version) != crate::clouds::kubernetes::minor_version(w));
    let image = c.image.as_deref().unwrap_or(IMAGE_TYPES[0]);
    let want_resource_labels = api::labels(tags);
    let live_resource_labels: BTreeMap<String, String> = p["config"]["resourceLabels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let want_taints: std::collections::BTreeSet<_> =
        spec.taints.iter().map(|t| (t.key.clone(), t.value.clone(), t.effect.as_str().to_owned())).collect();
    if version_differs
        || p["config"]["imageType"].as_str() != Some(image)
        || &live_labels(p) != labels
        || live_taints(p) != want_taints
        || live_resource_labels != want_resource_labels
        || p["upgradeSettings"]["maxUnavailable"].as_i64() != Some(i64::from(batch_of(spec)))
    {
        // nodeVersion and imageType are required: the pool's own when they do not change.
        let update = json!({
            "nodeVersion": want_version.filter(|_| version_differs).unwrap_or_else(|| version.to_owned()),
            "imageType": image,
            "labels": {"labels": labels},
            "taints": {"taints": taints_json(spec)},
            "resourceLabels": {"labels": want_resource_labels},
            "upgradeSettings": upgrade_settings(spec),
            "etag": p["etag"],
        });
        let what = format!("update GKE node pool {}", c.name);
        write(ctx, gcp, reqwest::Method::PUT, &path, Some(&update), &what, timeout).await?;
    }
    Ok(())
}

/// The configuration of an imported pool, from the pool and its fabric's description.
async fn imported_config(
    ctx: &Context,
    gcp: &Gcp,
    cluster: &str,
    live: &PoolLive,
    defaults: &BTreeMap<String, String>,
) -> Result<Value, CloudError> {
    let p = &live.pool;
    let config = &p["config"];
    let name = p["name"].as_str().unwrap_or_default();
    let resource_labels: BTreeMap<String, String> = config["resourceLabels"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let fabric = resource_labels
        .get("hpc_fabric")
        .cloned()
        .ok_or_else(|| CloudError::other(format!("GKE node pool {name} has no hpc_fabric label: it was not made by this provider")))?;
    let zone = p["locations"][0].as_str().unwrap_or_default().to_owned();
    let region = super::backend::region_of(&zone).to_owned();
    let f = super::fabric::observe(ctx, gcp, &fabric, &region, &Census::reading()).await?;
    let d = f.description().ok_or_else(|| CloudError::other(format!("the fabric {fabric} of GKE node pool {name} no longer exists")))?;
    let labels = crate::clouds::kubernetes::user_labels(&live_labels(p));
    let taints: Vec<Value> = live_taints(p).into_iter().map(crate::clouds::kubernetes::taint_block).collect();
    let a = &p["autoscaling"];
    let autoscaling = if a["enabled"] == true {
        Value::object([
            ("min_count", Value::int(a["totalMinNodeCount"].as_i64().unwrap_or(0))),
            ("max_count", Value::int(a["totalMaxNodeCount"].as_i64().unwrap_or(0))),
        ])
    } else {
        Value::Null
    };
    let affinity = &config["reservationAffinity"];
    let (capacity, reservation) = match (config["spot"] == true, config["flexStart"] == true, affinity["consumeReservationType"].as_str()) {
        (true, _, _) => (Value::from("spot"), Value::Null),
        (_, true, _) => (Value::from("flex-start"), Value::Null),
        (_, _, Some("SPECIFIC_RESERVATION")) => {
            (Value::from("reservation"), Value::from(affinity["values"][0].as_str().map(str::to_owned)))
        }
        _ => (Value::Null, Value::Null),
    };
    let node_count = live.size;
    let batch = p["upgradeSettings"]["maxUnavailable"].as_i64().unwrap_or(1);
    let default_batch = i64::from(NodeAmount::Percent(25).of(u32::try_from(node_count).unwrap_or(0)).max(1));
    let user_tags: BTreeMap<String, String> = resource_labels
        .iter()
        .filter(|(k, v)| !k.starts_with("hpc_") && defaults.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let map = |m: BTreeMap<String, String>| {
        if m.is_empty() { Value::Null } else { Value::Map(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }
    };
    Ok(Value::object([
        ("name", Value::from(name)),
        ("fabric", super::fabric::fabric_ref(&zone, &region, &fabric, &d)),
        ("kubernetes_cluster", Value::from(cluster)),
        (
            "kubernetes_version",
            Value::from(p["version"].as_str().and_then(crate::clouds::kubernetes::minor_version).map(|(a, b)| format!("{a}.{b}"))),
        ),
        ("node_count", Value::int(node_count)),
        ("capacity_type", capacity),
        ("reservation_id", reservation),
        ("image", Value::from(config["imageType"].as_str().filter(|i| *i != IMAGE_TYPES[0]).map(str::to_owned))),
        ("node_role", Value::from(config["serviceAccount"].as_str().filter(|a| *a != "default").map(str::to_owned))),
        ("repair", if p["management"]["autoRepair"] == false { Value::from("report") } else { Value::Null }),
        ("labels", map(labels)),
        ("taint", Value::list(taints)),
        ("autoscaling", autoscaling),
        (
            "update_strategy",
            if batch == default_batch { Value::Null } else { Value::object([("batch_size", Value::from(batch.to_string()))]) },
        ),
        ("tags", map(user_tags)),
    ]))
}

fn cluster_of(v: &Value) -> &str {
    v.get("kubernetes_cluster").as_str().unwrap_or_default()
}

fn pool_of(v: &Value) -> &str {
    v.get("name").as_str().unwrap_or_default()
}

#[async_trait]
impl NodePoolBackend for super::backend::Gcp {
    /// The GKE cluster, once: it exists, has the fabric's zone, and multi-networking where the nodes need it.
    async fn cluster_facts(&self, ctx: &Context, spec: &NodePoolSpec) -> Result<Option<ClusterFacts>, CloudError> {
        let gcp = api::connect(ctx).await?;
        let id = &spec.kubernetes_cluster;
        let Some(cluster) = get(ctx, &gcp, id, &format!("reading GKE cluster {id}")).await? else {
            let refusal = (
                "kubernetes_cluster",
                "No such GKE cluster".to_owned(),
                format!("No GKE cluster {id}: name an existing cluster by its id (google_container_cluster.<x>.id)."),
            );
            return Ok(Some(ClusterFacts { version: None, refusals: vec![refusal] }));
        };
        let version = cluster["currentMasterVersion"].as_str().and_then(crate::clouds::kubernetes::minor_version);
        Ok(Some(ClusterFacts { version, refusals: cluster_refusals(spec, &cluster) }))
    }
}

#[async_trait]
impl Backend<NodePoolSpec> for super::backend::Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        super::backend::configured(ctx).await
    }

    fn id(&self, spec: &NodePoolSpec) -> Option<String> {
        let location = cluster_location(&spec.kubernetes_cluster)?;
        let (_, cluster) = cluster_parts(&spec.kubernetes_cluster)?;
        Some(crate::clouds::shared::resource_id(crate::catalog::Cloud::Gcp, &[location, cluster], &spec.nodes.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in GKE cluster {}", cluster_of(v))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, NodePoolSpec>) -> Outcome {
        let gcp = match api::connect(step.ctx).await {
            Ok(g) => g,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let labels = crate::clouds::shared::string_map(change.planned.get("node_labels"));
        let spec = change.spec;
        match converge(step, &gcp, spec, &labels, change.tags).await {
            Ok(()) => Outcome::done(change.state.clone()),
            Err(e) => {
                let path = pool_path(&spec.kubernetes_cluster, &spec.nodes.name);
                match observe(step.ctx, &gcp, &path, &Census::reading()).await {
                    Ok(Some(live)) => Outcome::failed(refreshed(change.state, &live), e),
                    Ok(None) if change.creating() => Outcome::failed(Value::Null, e),
                    _ => Outcome::failed(change.prior.clone(), e),
                }
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&NodePoolSpec>) -> Outcome {
        let gcp = match api::connect(step.ctx).await {
            Ok(g) => g,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let path = pool_path(cluster_of(prior), pool_of(prior));
        let done = match observe(step.ctx, &gcp, &path, step.census).await {
            Ok(Some(_)) => {
                let what = format!("delete GKE node pool {}", pool_of(prior));
                match write(step.ctx, &gcp, reqwest::Method::DELETE, &path, None, &what, step.timeout).await {
                    Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
                    other => other,
                }
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&NodePoolSpec>) -> Result<Option<Value>, CloudError> {
        let gcp = api::connect(step.ctx).await?;
        let path = pool_path(cluster_of(state), pool_of(state));
        Ok(observe(step.ctx, &gcp, &path, step.census).await?.map(|live| refreshed(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some([location, cluster, pool]) = crate::clouds::shared::parse_id::<3>(crate::catalog::Cloud::Gcp, id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud node pool id: give \"gcp/<GKE cluster's location>/<GKE cluster>/<pool name>\", e.g. \
                 \"gcp/us-central1/ml-prod/gpu\" (the project is the provider's)."
            )));
        };
        let gcp = api::connect(step.ctx).await.map_err(ImportError::failed)?;
        let cluster_id = format!("projects/{}/locations/{location}/clusters/{cluster}", gcp.project);
        let path = pool_path(&cluster_id, pool);
        let live = observe(step.ctx, &gcp, &path, step.census).await.map_err(ImportError::failed)?.ok_or_else(|| {
            ImportError::failed(CloudError::new(ErrorKind::NotFound, None, format!("no node pool {pool} in GKE cluster {cluster_id}")))
        })?;
        let config = imported_config(step.ctx, &gcp, &cluster_id, &live, step.default_tags).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> NodePoolSpec {
        let mut c = json!({
            "name": "gpu", "node_count": 4, "kubernetes_cluster": "projects/p/locations/us-central1/clusters/ml",
            "fabric": {"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                       "instance_type": "a3-megagpu-8g", "placement": "cluster"},
            "taint": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        });
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let ty = crate::resources::node_pool::schema().value_type();
        let v = crate::framework::codec::decode_json(c.to_string().as_bytes(), &ty).unwrap();
        crate::planner::spec::parse_node_pool(&v, &mut Diagnostics::new()).expect("a valid pool")
    }

    #[test]
    fn a_pool_is_created_with_the_fabrics_nics_placement_and_no_surge() {
        let labels = BTreeMap::from([("hpc-platform/cluster".to_owned(), "gpu".to_owned())]);
        let tags = BTreeMap::from([("hpc:owner".to_owned(), "m1".to_owned())]);
        let b = body("p", &spec(json!({})), &labels, &tags);
        let p = &b["nodePool"];
        assert_eq!(p["initialNodeCount"], 4);
        assert_eq!(p["locations"], json!(["us-central1-a"]));
        assert_eq!(p["placementPolicy"], json!({"type": "COMPACT", "policyName": "train-placement"}));
        let extra = p["networkConfig"]["additionalNodeNetworkConfigs"].as_array().unwrap();
        assert_eq!(extra.len(), 8, "A3 Mega's eight GPU NICs");
        assert_eq!(
            extra[0],
            json!({"network": "projects/p/global/networks/train-gpu-0", "subnetwork": "projects/p/regions/us-central1/subnetworks/train-gpu-0"})
        );
        assert_eq!(p["config"]["accelerators"][0]["acceleratorType"], "nvidia-h100-mega-80gb");
        assert_eq!(p["config"]["accelerators"][0]["acceleratorCount"], "8");
        assert_eq!(p["config"]["taints"], json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]));
        assert_eq!(p["config"]["resourceLabels"]["hpc_owner"], "m1");
        assert_eq!(p["management"]["autoUpgrade"], false);
        assert_eq!(p["upgradeSettings"]["maxSurge"], 0);
        assert_eq!(p["upgradeSettings"]["maxUnavailable"], 1, "25% of 4");
        let scaled = body("p", &spec(json!({"autoscaling": {"min_count": 0, "max_count": 8}})), &labels, &tags);
        assert_eq!(scaled["nodePool"]["autoscaling"]["totalMaxNodeCount"], 8);
    }

    #[test]
    fn a_cluster_without_multi_networking_or_the_fabrics_zone_is_refused() {
        let s = spec(json!({}));
        let good = json!({"locations": ["us-central1-a", "us-central1-b"], "networkConfig": {"enableMultiNetworking": true}});
        assert!(cluster_refusals(&s, &good).is_empty());
        let off = json!({"locations": ["us-central1-a"], "networkConfig": {}});
        let r = cluster_refusals(&s, &off);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, "kubernetes_cluster");
        assert!(r[0].2.contains("enable_multi_networking = true"), "{}", r[0].2);
        let elsewhere = json!({"locations": ["us-central1-c"], "networkConfig": {"enableMultiNetworking": true}});
        assert_eq!(cluster_refusals(&s, &elsewhere)[0].0, "fabric");
    }

    #[test]
    fn a_refresh_reads_the_size_of_the_instance_groups_and_the_live_labels_and_taints() {
        let state = Value::object([
            ("node_count", Value::int(4)),
            ("autoscaling", Value::Null),
            ("labels", Value::Map(BTreeMap::from([("team".to_owned(), Value::from("llm"))]))),
            ("node_labels", Value::Map(BTreeMap::new())),
            ("taint", Value::list([])),
        ]);
        let pool = json!({"config": {"labels": {"team": "other", "hpc-platform/cluster": "gpu"},
                                      "taints": [{"key": "k", "value": "v", "effect": "NO_EXECUTE"}]},
                          "initialNodeCount": 4});
        let out = refreshed(&state, &PoolLive { pool, size: 2 });
        assert_eq!(out.get("node_count"), &Value::int(2), "the size is the instance groups', not initialNodeCount");
        assert_eq!(out.get("labels").get("team").as_str(), Some("other"));
        assert_eq!(out.get("taint").as_list().unwrap()[0].get("effect").as_str(), Some("NoExecute"));
    }

    #[test]
    fn cluster_ids_name_their_location() {
        assert_eq!(cluster_location("projects/p/locations/us-central1/clusters/ml"), Some("us-central1"));
        assert_eq!(cluster_location("projects/p/zones/us-central1-a/clusters/ml"), None);
        assert_eq!(cluster_location("ml"), None);
    }
}
