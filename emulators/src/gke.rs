//! Google Kubernetes Engine (container.googleapis.com v1) on the GCP emulator's port: the
//! `projects.locations` forms of clusters (create, get, list, delete) and their node pools (create, get,
//! list, delete, setSize, setAutoscaling, setManagement, update), with GKE's own long-running operations
//! (`operation-<digits>-<hex>`, RUNNING then DONE). A pool's nodes are Compute Engine managed instance
//! groups, one per zone of the pool, kept in the Compute store beside everything else (read-only there):
//! their `targetSize` is the pool's size, as on GKE, where `initialNodeCount` never changes after the create.
//!
//! What GKE refuses is refused the same way: a missing cluster or pool (404 NOT_FOUND), a pool name taken
//! (409 ALREADY_EXISTS), a bad name, size or autoscaling range, zones outside the cluster's region, a
//! COMPACT placement over several zones or naming a resource policy the region does not have, additional
//! node networks on a cluster without multi-networking or naming networks that do not exist (400
//! INVALID_ARGUMENT), a stale etag (409 ABORTED), and any write while another operation of the same cluster
//! is still running (400 FAILED_PRECONDITION "Cluster is running incompatible operation ...").
//! Bodies and answers follow container.v1's discovery document (camelCase, enums by name, int64 as strings).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::gcp_lustre::error;

/// How long an operation stays RUNNING (and a pool PROVISIONING or RECONCILING under it).
pub const SETTLE_SECONDS: f64 = 0.2;
/// An operation nobody polls (its answer was lost) ends anyway after this long. One that is polled ends at
/// the first read after SETTLE_SECONDS: so a loaded machine cannot make a client miss a RUNNING state it
/// is entitled to see (a pool PROVISIONING, a second write refused) before it has looked at the operation.
pub const UNWATCHED_SECONDS: f64 = 3.0;
const CONTAINER: &str = "https://container.googleapis.com/v1/";
const COMPUTE: &str = "https://www.googleapis.com/compute/v1/";
/// The Kubernetes minor version a cluster gets when it names none.
const DEFAULT_VERSION: &str = "1.33";
/// The GKE patch a bare `1.33` or `1.33.5` becomes (`1.33.5-gke.1162000`).
const PATCH: &str = "5";
const GKE_BUILD: &str = "gke.1162000";
/// Node image types GKE takes (`config.imageType`, `UpdateNodePoolRequest.imageType`).
const IMAGE_TYPES: &[&str] = &["COS_CONTAINERD", "UBUNTU_CONTAINERD", "WINDOWS_LTSC_CONTAINERD", "WINDOWS_SAC_CONTAINERD", "COS", "UBUNTU"];
/// Fields of NodePool that only GKE sets: whatever a client sent for them is replaced.
const POOL_OUTPUT_ONLY: &[&str] =
    &["selfLink", "status", "statusMessage", "etag", "instanceGroupUrls", "podIpv4CidrSize", "conditions", "updateInfo", "kubeletCertInfo"];
const CLUSTER_OUTPUT_ONLY: &[&str] = &[
    "selfLink",
    "status",
    "statusMessage",
    "endpoint",
    "createTime",
    "id",
    "currentMasterVersion",
    "currentNodeVersion",
    "currentNodeCount",
    "instanceGroupUrls",
    "location",
    "zone",
    "servicesIpv4Cidr",
    "nodeIpv4CidrSize",
    "expireTime",
    "currentEmulatedVersion",
];

/// What GKE needs of Compute Engine's store: reading networks, subnetworks and resource policies, and
/// keeping the instance group managers of node pools. Paths are relative (`projects/p/zones/z/...`).
pub trait Compute {
    /// A resource as Compute Engine answers it.
    fn get(&self, path: &str) -> Option<Value>;
    /// Stores an instance group manager made for a node pool; Compute Engine fills in id, selfLink, zone,
    /// kind and creationTimestamp, and checks the body against its model.
    fn put_igm(&mut self, path: &str, igm: Value) -> Result<(), String>;
    /// Sets an instance group manager's `targetSize`.
    fn set_target_size(&mut self, path: &str, size: i64);
    fn remove(&mut self, path: &str);
}

/// How an accepted write fails (an admin fault): its operation ends DONE with the error, nothing done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// google.rpc INTERNAL (13).
    Internal,
    /// No capacity in the zone: google.rpc RESOURCE_EXHAUSTED (8), GCE_STOCKOUT.
    Stockout,
}

struct Operation {
    value: Value,
    started: Instant,
    started_at: SystemTime,
    /// The cluster (`projects/p/locations/l/clusters/c`) it runs on.
    cluster: String,
    error: Option<(i64, String)>,
    /// How many times operations.get read it.
    reads: std::cell::Cell<u32>,
}

impl Operation {
    fn finished(&self) -> bool {
        let age = self.started.elapsed().as_secs_f64();
        (age >= SETTLE_SECONDS && self.reads.get() > 0) || age >= UNWATCHED_SECONDS
    }
}

struct Pool {
    value: Value,
    /// The last operation that changed the pool (its key): PROVISIONING or RECONCILING until it is done.
    op: String,
}

struct Cluster {
    value: Value,
    /// The operation that created it: PROVISIONING until it is done.
    op: String,
    /// In creation order, as GKE lists them.
    pools: Vec<Pool>,
}

#[derive(Default)]
pub struct Gke {
    /// By path, `projects/p/locations/l/clusters/c`.
    clusters: BTreeMap<String, Cluster>,
    /// By path, `projects/p/locations/l/operations/<name>`.
    operations: BTreeMap<String, Operation>,
    next: u64,
}

fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

fn invalid(message: impl AsRef<str>) -> Response {
    error(400, "INVALID_ARGUMENT", message.as_ref())
}

/// A refusal before it becomes a response: HTTP status, google.rpc code, message.
struct Refused(u16, &'static str, String);

impl Refused {
    fn response(self) -> Response {
        error(self.0, self.1, &self.2)
    }
}

/// 400 INVALID_ARGUMENT.
fn bad(message: impl Into<String>) -> Refused {
    Refused(400, "INVALID_ARGUMENT", message.into())
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// RFC 3339 in UTC with milliseconds, as GKE writes times.
fn rfc3339(t: SystemTime) -> String {
    crate::clock::rfc3339_millis(t)
}

/// A whole number from JSON: proto3 JSON takes int32 and int64 as numbers or strings.
fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// RFC 1035 label of at most `max` characters: lowercase letters, digits and hyphens, starting with a letter
/// and not ending with a hyphen.
fn rfc1035(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `us-central1-a` is a zone (a region, a hyphen, one letter); `us-central1` is not.
fn is_zone(location: &str) -> bool {
    location.rsplit_once('-').is_some_and(|(region, z)| region.contains('-') && z.len() == 1 && z.chars().all(|c| c.is_ascii_lowercase()))
}

fn region_of(location: &str) -> &str {
    if is_zone(location) { location.rsplit_once('-').map_or(location, |(r, _)| r) } else { location }
}

/// A GKE version as GKE answers it: `1.33` -> `1.33.5-gke.1162000`, `1.33.4` -> `1.33.4-gke.1162000`, a full
/// `1.33.4-gke.1000` as it is.
fn expand_version(v: &str) -> Result<String, String> {
    let (numbers, build) = match v.split_once('-') {
        Some((n, b)) => (n, Some(b)),
        None => (v, None),
    };
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let build_ok = build.is_none_or(|b| b.strip_prefix("gke.").is_some_and(numeric));
    match (parts.as_slice(), build) {
        ([major, minor], None) if numeric(major) && numeric(minor) => Ok(format!("{major}.{minor}.{PATCH}-{GKE_BUILD}")),
        ([major, minor, patch], None) if [major, minor, patch].iter().all(|p| numeric(p)) => Ok(format!("{numbers}-{GKE_BUILD}")),
        ([major, minor, patch], Some(_)) if build_ok && [major, minor, patch].iter().all(|p| numeric(p)) => Ok(v.to_owned()),
        _ => Err(format!(
            "Version \"{v}\" is invalid: give a GKE version such as \"1.33\", \"1.33.5\" or \"1.33.5-gke.1162000\" (\"-\" or \"latest\" for the control plane's)."
        )),
    }
}

/// (major, minor) of an expanded version.
fn minor_of(v: &str) -> (u64, u64) {
    let mut it = v.split(['.', '-']).map(|p| p.parse::<u64>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The last path segment of a name, a relative path or a URL.
fn last(s: &str) -> &str {
    s.trim_end_matches('/').rsplit('/').next().unwrap_or_default()
}

/// Where a request's location, cluster and pool are: `v1/projects/{p}/locations/{l}/...`.
struct Parsed<'a> {
    project: &'a str,
    location: &'a str,
    /// The segments after the location.
    tail: Vec<&'a str>,
}

fn parse(path: &str) -> Option<Parsed<'_>> {
    let rest = path.trim_start_matches('/').strip_prefix("v1/")?;
    let segs: Vec<&str> = rest.split('/').collect();
    if segs.len() < 5 || segs[0] != "projects" || segs[2] != "locations" || segs[1].is_empty() || segs[3].is_empty() {
        return None;
    }
    Some(Parsed { project: segs[1], location: segs[3], tail: segs[4..].to_vec() })
}

/// Whether a path is GKE's own (clusters and their node pools; operations are told apart by name, see
/// [`Gke::knows_operation`]).
pub fn serves(path: &str) -> bool {
    parse(path).is_some_and(|p| p.tail.first().is_some_and(|t| *t == "clusters" || t.starts_with("clusters:")))
}

/// The REST method a call is (`nodePools.setSize`): the operation admin faults and counters name, under the
/// service `container`.
pub fn method_of(method: &str, path: &str) -> &'static str {
    let Some(p) = parse(path) else { return "unknown" };
    let verb = |s: &str| s.split_once(':').map(|(_, v)| v.to_owned());
    match (method, p.tail.as_slice()) {
        (_, ["operations", ..]) => "operations.get",
        ("POST", ["clusters"]) => "clusters.create",
        ("GET", ["clusters"]) => "clusters.list",
        ("GET", ["clusters", _]) => "clusters.get",
        ("DELETE", ["clusters", _]) => "clusters.delete",
        ("POST", ["clusters", _, "nodePools"]) => "nodePools.create",
        ("GET", ["clusters", _, "nodePools"]) => "nodePools.list",
        ("GET", ["clusters", _, "nodePools", _]) => "nodePools.get",
        ("PUT", ["clusters", _, "nodePools", _]) => "nodePools.update",
        ("DELETE", ["clusters", _, "nodePools", _]) => "nodePools.delete",
        ("POST", ["clusters", _, "nodePools", np]) => match verb(np).as_deref() {
            Some("setSize") => "nodePools.setSize",
            Some("setAutoscaling") => "nodePools.setAutoscaling",
            Some("setManagement") => "nodePools.setManagement",
            _ => "unknown",
        },
        _ => "unknown",
    }
}

/// Whether a call of `method` (from [`method_of`]) changes something, and so starts an operation.
pub fn is_write(method: &str) -> bool {
    !matches!(method, "operations.get" | "clusters.get" | "clusters.list" | "nodePools.get" | "nodePools.list" | "unknown")
}

/// Autoscaling as GKE checks it: per-zone or total limits (not both), each range non-negative and in order.
fn check_autoscaling(a: &Value, at: &str) -> Result<(), Refused> {
    if a.is_null() {
        return Ok(());
    }
    if !a.is_object() {
        return Err(bad(format!("{at} must be a NodePoolAutoscaling object")));
    }
    let get = |k: &str| a.get(k).and_then(int);
    let (min, max, tmin, tmax) = (get("minNodeCount"), get("maxNodeCount"), get("totalMinNodeCount"), get("totalMaxNodeCount"));
    if let Some((k, v)) = [("minNodeCount", min), ("maxNodeCount", max), ("totalMinNodeCount", tmin), ("totalMaxNodeCount", tmax)]
        .into_iter()
        .find_map(|(k, v)| v.filter(|v| *v < 0).map(|v| (k, v)))
    {
        return Err(bad(format!("{at}.{k} must be non-negative, got {v}.")));
    }
    if a["enabled"].as_bool() != Some(true) {
        return Ok(());
    }
    let per_zone = min.is_some_and(|v| v > 0) || max.is_some_and(|v| v > 0);
    let total = tmin.is_some_and(|v| v > 0) || tmax.is_some_and(|v| v > 0);
    if per_zone && total {
        return Err(bad(format!(
            "{at}: per zone limits (minNodeCount, maxNodeCount) and total limits (totalMinNodeCount, totalMaxNodeCount) cannot both be set."
        )));
    }
    let (lo, hi, names) = if total {
        (tmin.unwrap_or(0), tmax.unwrap_or(0), ("totalMinNodeCount", "totalMaxNodeCount"))
    } else {
        (min.unwrap_or(0), max.unwrap_or(0), ("minNodeCount", "maxNodeCount"))
    };
    if hi < 1 {
        return Err(bad(format!("{at}.{} must be at least 1 when autoscaling is enabled.", names.1)));
    }
    if lo > hi {
        return Err(bad(format!("{at}.{} ({lo}) must not be greater than {at}.{} ({hi}).", names.0, names.1)));
    }
    Ok(())
}

/// The path of a named network or subnetwork: a bare name, a relative path or a URL.
fn compute_path(given: &str, project: &str, collection: &str, scope: &str) -> String {
    let given = given.split("/compute/v1/").last().unwrap_or(given).trim_start_matches('/');
    if given.starts_with("projects/") { given.to_owned() } else { format!("projects/{project}/{scope}/{collection}/{}", last(given)) }
}

impl Gke {
    /// Whether `path` (`v1/projects/p/locations/l/operations/<name>`) is an operation of GKE's.
    pub fn knows_operation(&self, path: &str) -> bool {
        let key = path.trim_start_matches('/').trim_start_matches("v1/");
        self.operations.contains_key(key)
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// (cluster paths, node pool paths).
    pub fn inventory(&self) -> (Vec<String>, Vec<String>) {
        let clusters = self.clusters.keys().cloned().collect();
        let pools = self
            .clusters
            .iter()
            .flat_map(|(k, c)| c.pools.iter().map(move |p| format!("{k}/nodePools/{}", p.value["name"].as_str().unwrap_or_default())))
            .collect();
        (clusters, pools)
    }

    /// Every cluster and pool as a client reading it gets it, by path.
    pub fn snapshot(&self, compute: &dyn Compute) -> serde_json::Map<String, Value> {
        let mut out = serde_json::Map::new();
        for (key, cluster) in &self.clusters {
            out.insert(key.clone(), self.cluster_view(key, compute));
            for pool in &cluster.pools {
                out.insert(format!("{key}/nodePools/{}", pool.value["name"].as_str().unwrap_or_default()), self.pool_view(pool));
            }
        }
        out
    }

    /// Deletes a cluster or a node pool behind the API's back (another tool, the console): its instance
    /// group managers go with it. False when there is nothing at `path`.
    pub fn remove_outside(&mut self, path: &str, compute: &mut dyn Compute) -> bool {
        if let Some(cluster) = self.clusters.remove(path) {
            for pool in &cluster.pools {
                Self::drop_groups(pool, compute);
            }
            return true;
        }
        let Some((cluster, name)) = path.split_once("/nodePools/") else { return false };
        let Some(c) = self.clusters.get_mut(cluster) else { return false };
        let Some(i) = c.pools.iter().position(|p| p.value["name"] == name) else { return false };
        let pool = c.pools.remove(i);
        Self::drop_groups(&pool, compute);
        true
    }

    fn drop_groups(pool: &Pool, compute: &mut dyn Compute) {
        for url in pool.value["instanceGroupUrls"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            compute.remove(url.trim_start_matches(COMPUTE));
        }
    }

    fn running(&self, key: &str) -> bool {
        self.operations.get(key).is_some_and(|op| !op.finished())
    }

    /// The operation of the cluster at `cluster` still running, if any.
    fn busy(&self, cluster: &str) -> Option<String> {
        self.operations
            .values()
            .find(|op| op.cluster == cluster && !op.finished())
            .map(|op| op.value["name"].as_str().unwrap_or_default().to_owned())
    }

    fn incompatible(name: &str) -> Response {
        error(400, "FAILED_PRECONDITION", &format!("Cluster is running incompatible operation {name}."))
    }

    fn etag(&mut self) -> String {
        self.next += 1;
        let a = fnv(&format!("etag-{}", self.next));
        let b = fnv(&format!("etag-{}-b", self.next));
        format!("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48, b & 0xffff_ffff_ffff)
    }

    /// A new operation on the cluster at `cluster`, RUNNING for SETTLE_SECONDS; its key.
    fn operation(
        &mut self,
        project: &str,
        location: &str,
        cluster: &str,
        kind: &str,
        target: &str,
        failure: Option<(i64, String)>,
    ) -> String {
        self.next += 1;
        let now = SystemTime::now();
        let millis = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        let name = format!("operation-{millis}-{:08x}", fnv(&format!("{cluster} {kind} {}", self.next)) & 0xffff_ffff);
        let key = format!("projects/{project}/locations/{location}/operations/{name}");
        let value = json!({
            "name": name, "zone": location, "location": location, "operationType": kind, "status": "RUNNING",
            "selfLink": format!("{CONTAINER}{key}"), "targetLink": target, "startTime": rfc3339(now),
        });
        self.operations.insert(
            key.clone(),
            Operation {
                value,
                started: Instant::now(),
                started_at: now,
                cluster: cluster.to_owned(),
                error: failure,
                reads: std::cell::Cell::new(0),
            },
        );
        key
    }

    /// operations.get: the operation, read once more.
    fn poll(&self, key: &str) -> Option<Value> {
        let op = self.operations.get(key)?;
        op.reads.set(op.reads.get() + 1);
        self.operation_view(key)
    }

    fn operation_view(&self, key: &str) -> Option<Value> {
        let op = self.operations.get(key)?;
        let mut v = op.value.clone();
        if op.finished() {
            v["status"] = json!("DONE");
            v["endTime"] = json!(rfc3339(op.started_at + Duration::from_secs_f64(SETTLE_SECONDS)));
            if let Some((code, message)) = &op.error {
                v["error"] = json!({"code": code, "message": message});
                v["statusMessage"] = json!(message);
            }
        }
        Some(v)
    }

    /// The failure an admin fault asks for, worded for the zone a write would have used.
    fn failure(failure: Option<Failure>, project: &str, zone: &str) -> Option<(i64, String)> {
        failure.map(|f| match f {
            Failure::Internal => (13, "Internal error. Please try again.".to_owned()),
            Failure::Stockout => (
                8,
                format!(
                    "Google Compute Engine: The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request. GCE_STOCKOUT."
                ),
            ),
        })
    }

    fn pool_view(&self, pool: &Pool) -> Value {
        let mut v = pool.value.clone();
        let status = match self.operations.get(&pool.op) {
            Some(op) if self.running(&pool.op) => {
                if matches!(op.value["operationType"].as_str(), Some("CREATE_NODE_POOL" | "CREATE_CLUSTER")) {
                    "PROVISIONING"
                } else {
                    "RECONCILING"
                }
            }
            _ => "RUNNING",
        };
        v["status"] = json!(status);
        v
    }

    fn cluster_view(&self, key: &str, compute: &dyn Compute) -> Value {
        let Some(cluster) = self.clusters.get(key) else { return Value::Null };
        let mut v = cluster.value.clone();
        v["status"] = json!(if self.running(&cluster.op) {
            "PROVISIONING"
        } else if self.busy(key).is_some() {
            "RECONCILING"
        } else {
            "RUNNING"
        });
        let pools: Vec<Value> = cluster.pools.iter().map(|p| self.pool_view(p)).collect();
        let groups: Vec<Value> = pools.iter().flat_map(|p| p["instanceGroupUrls"].as_array().cloned().unwrap_or_default()).collect();
        let nodes: i64 = groups
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|u| compute.get(u.trim_start_matches(COMPUTE)))
            .filter_map(|g| g.get("targetSize").and_then(int))
            .sum();
        let oldest = pools.iter().filter_map(|p| p["version"].as_str()).min_by_key(|v| minor_of(v)).map(str::to_owned);
        v["currentNodeVersion"] = json!(oldest.unwrap_or_else(|| v["currentMasterVersion"].as_str().unwrap_or_default().to_owned()));
        v["currentNodeCount"] = json!(nodes);
        v["instanceGroupUrls"] = json!(groups);
        v["nodePools"] = json!(pools);
        v
    }

    /// Checks a node pool for the cluster `cluster` (its stored value) and fills in what GKE fills in: the
    /// pool as it will be stored (without its instance groups, etag and selfLink) and its zones.
    fn check_pool(compute: &dyn Compute, cluster: &Value, project: &str, given: &Value, at: &str) -> Result<(Value, Vec<String>), Refused> {
        let Some(map) = given.as_object() else { return Err(bad(format!("{at} is required"))) };
        let mut pool = Value::Object(map.clone());
        for k in POOL_OUTPUT_ONLY {
            pool.as_object_mut().map(|m| m.remove(*k));
        }
        let name = pool["name"].as_str().unwrap_or_default().to_owned();
        if !rfc1035(&name, 40) {
            return Err(bad(format!(
                "Invalid node pool name \"{name}\": it must be 1 to 40 characters of lowercase letters, digits and hyphens, start with a letter and not end with a hyphen."
            )));
        }
        if let Some(n) = pool.get("initialNodeCount").and_then(int).filter(|n| *n < 0) {
            return Err(bad(format!("{at}.initialNodeCount must be non-negative, got {n}.")));
        }
        check_autoscaling(&pool["autoscaling"], &format!("{at}.autoscaling"))?;
        let location = cluster["location"].as_str().unwrap_or_default();
        let region = region_of(location);
        let zones: Vec<String> = match pool.get("locations").and_then(Value::as_array) {
            Some(l) if !l.is_empty() => l.iter().map(|z| z.as_str().unwrap_or_default().to_owned()).collect(),
            _ => cluster["locations"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect(),
        };
        if let Some(z) = zones.iter().find(|z| !is_zone(z) || region_of(z) != region) {
            return Err(bad(format!(
                "{at}.locations: \"{z}\" is not a zone of {region}, the region of the cluster; a node pool's zones are in its cluster's region."
            )));
        }
        let placement = &pool["placementPolicy"];
        let compact = placement["type"].as_str() == Some("COMPACT");
        let policy = placement["policyName"].as_str().filter(|p| !p.is_empty());
        if policy.is_some() && !compact {
            return Err(bad(format!("{at}.placementPolicy.policyName can only be set with placementPolicy.type COMPACT.")));
        }
        if compact && zones.len() > 1 {
            return Err(bad(format!(
                "{at}.placementPolicy: COMPACT placement needs the node pool in a single zone, but its locations are {}.",
                zones.join(", ")
            )));
        }
        if let Some(policy) = policy {
            let path = compute_path(policy, project, "resourcePolicies", &format!("regions/{region}"));
            if !path.starts_with(&format!("projects/{project}/regions/{region}/resourcePolicies/")) || compute.get(&path).is_none() {
                return Err(bad(format!(
                    "{at}.placementPolicy.policyName: the resource policy \"{policy}\" was not found in {region} (projects/{project}/regions/{region}/resourcePolicies/{})",
                    last(policy)
                )));
            }
        }
        let additional = pool["networkConfig"]["additionalNodeNetworkConfigs"].as_array().cloned().unwrap_or_default();
        if !additional.is_empty() {
            if cluster["networkConfig"]["enableMultiNetworking"].as_bool() != Some(true) {
                return Err(bad(format!(
                    "{at}.networkConfig.additionalNodeNetworkConfigs needs multi-networking: the cluster was not created with networkConfig.enableMultiNetworking."
                )));
            }
            let primary = last(cluster["network"].as_str().unwrap_or("default")).to_owned();
            let mut seen = Vec::new();
            for (i, extra) in additional.iter().enumerate() {
                let here = format!("{at}.networkConfig.additionalNodeNetworkConfigs[{i}]");
                let (Some(network), Some(subnetwork)) = (extra["network"].as_str(), extra["subnetwork"].as_str()) else {
                    return Err(bad(format!("{here} needs both network and subnetwork.")));
                };
                let net = compute_path(network, project, "networks", "global");
                if compute.get(&net).is_none() {
                    return Err(bad(format!("{here}.network: network \"{network}\" does not exist ({net}).")));
                }
                if last(network) == primary {
                    return Err(bad(format!(
                        "{here}.network: \"{network}\" is the cluster's own network; additional node networks are other VPCs."
                    )));
                }
                let sub = compute_path(subnetwork, project, "subnetworks", &format!("regions/{region}"));
                let Some(found) = compute.get(&sub) else {
                    return Err(bad(format!("{here}.subnetwork: subnetwork \"{subnetwork}\" does not exist ({sub}).")));
                };
                if !sub.starts_with(&format!("projects/{project}/regions/{region}/")) {
                    return Err(bad(format!("{here}.subnetwork: \"{subnetwork}\" is not in {region}, the region of the cluster.")));
                }
                if last(found["network"].as_str().unwrap_or_default()) != last(&net) {
                    return Err(bad(format!(
                        "{here}: subnetwork \"{subnetwork}\" belongs to network {}, not \"{network}\".",
                        last(found["network"].as_str().unwrap_or_default())
                    )));
                }
                if seen.contains(&sub) {
                    return Err(bad(format!(
                        "{here}.subnetwork: \"{subnetwork}\" is named twice; each additional node network interface needs its own subnetwork."
                    )));
                }
                seen.push(sub);
            }
        }
        let master = cluster["currentMasterVersion"].as_str().unwrap_or_default().to_owned();
        let version = match pool["version"].as_str().filter(|v| !v.is_empty()) {
            None | Some("-" | "latest") => master.clone(),
            Some(v) => expand_version(v).map_err(bad)?,
        };
        if minor_of(&version) > minor_of(&master) {
            return Err(bad(format!(
                "{at}.version {version} is newer than the control plane's version {master}; nodes may not be newer than their control plane."
            )));
        }
        if let Some(image) = pool["config"]["imageType"].as_str().filter(|i| !IMAGE_TYPES.contains(&i.to_ascii_uppercase().as_str())) {
            return Err(bad(format!("{at}.config.imageType: unknown image type \"{image}\" (valid: {}).", IMAGE_TYPES.join(", "))));
        }
        // What GKE fills in when a pool leaves it out.
        if !pool["config"].is_object() {
            pool["config"] = json!({});
        }
        let defaults = json!({
            "machineType": "e2-medium", "diskSizeGb": 100, "diskType": "pd-balanced", "imageType": "COS_CONTAINERD",
            "serviceAccount": "default", "metadata": {"disable-legacy-endpoints": "true"},
            "oauthScopes": ["https://www.googleapis.com/auth/devstorage.read_only", "https://www.googleapis.com/auth/logging.write",
                            "https://www.googleapis.com/auth/monitoring", "https://www.googleapis.com/auth/service.management.readonly",
                            "https://www.googleapis.com/auth/servicecontrol", "https://www.googleapis.com/auth/trace.append"],
        });
        for (k, v) in defaults.as_object().into_iter().flatten() {
            if pool["config"].get(k).is_none_or(Value::is_null) {
                pool["config"][k] = v.clone();
            }
        }
        if let Some(image) = pool["config"]["imageType"].as_str().map(str::to_ascii_uppercase) {
            pool["config"]["imageType"] = json!(image);
        }
        if pool.get("management").is_none_or(Value::is_null) {
            pool["management"] = json!({"autoUpgrade": true, "autoRepair": true});
        }
        if pool.get("upgradeSettings").is_none_or(Value::is_null) {
            pool["upgradeSettings"] = json!({"maxSurge": 1, "strategy": "SURGE"});
        }
        if pool.get("maxPodsConstraint").is_none_or(Value::is_null) {
            pool["maxPodsConstraint"] = json!({"maxPodsPerNode": "110"});
        }
        pool["locations"] = json!(zones);
        pool["version"] = json!(version);
        pool["podIpv4CidrSize"] = json!(24);
        Ok((pool, zones))
    }

    /// Makes a checked pool's instance group managers (one per zone, `initialNodeCount` each) and finishes it.
    fn materialize(&mut self, compute: &mut dyn Compute, cluster_key: &str, mut pool: Value, zones: &[String], op: &str) -> Pool {
        let cluster = last(cluster_key).to_owned();
        let project = cluster_key.split('/').nth(1).unwrap_or_default().to_owned();
        let name = pool["name"].as_str().unwrap_or_default().to_owned();
        let size = pool.get("initialNodeCount").and_then(int).unwrap_or(0);
        let mut urls = Vec::new();
        for zone in zones {
            self.next += 1;
            let hex = format!("{:08x}", fnv(&format!("{cluster_key}/{name}/{zone}/{}", self.next)) & 0xffff_ffff);
            let short = |s: &str, n: usize| s.chars().take(n).collect::<String>().trim_end_matches('-').to_owned();
            let base = format!("gke-{}-{}-{hex}", short(&cluster, 20), short(&name, 20));
            let group = format!("{base}-grp");
            let path = format!("projects/{project}/zones/{zone}/instanceGroupManagers/{group}");
            let igm = json!({
                "name": group, "baseInstanceName": base, "targetSize": size,
                "instanceTemplate": format!("{COMPUTE}projects/{project}/global/instanceTemplates/{base}"),
                "instanceGroup": format!("{COMPUTE}projects/{project}/zones/{zone}/instanceGroups/{group}"),
                "versions": [{"name": "", "instanceTemplate": format!("{COMPUTE}projects/{project}/global/instanceTemplates/{base}")}],
                "status": {"isStable": true, "versionTarget": {"isReached": true}, "stateful": {"hasStatefulConfig": false, "perInstanceConfigs": {"allEffective": true}}},
                "currentActions": {"none": size, "creating": 0, "creatingWithoutRetries": 0, "verifying": 0, "recreating": 0, "deleting": 0,
                                   "abandoning": 0, "restarting": 0, "refreshing": 0, "suspending": 0, "resuming": 0, "stopping": 0, "starting": 0},
                "listManagedInstancesResults": "PAGELESS",
                "description": format!("GKE node pool {name} of cluster {cluster}"),
            });
            if compute.put_igm(&path, igm).is_ok() {
                urls.push(json!(format!("{COMPUTE}{path}")));
            }
        }
        pool["instanceGroupUrls"] = json!(urls);
        pool["selfLink"] = json!(format!("{CONTAINER}{cluster_key}/nodePools/{name}"));
        pool["etag"] = json!(self.etag());
        Pool { value: pool, op: op.to_owned() }
    }

    /// Handles GKE's `/v1/projects/{p}/locations/{l}/...` paths (clusters, node pools and GKE's own
    /// operations); `None` when the path is not GKE's. `failure` makes an accepted write's operation fail.
    pub fn handle(
        &mut self,
        compute: &mut dyn Compute,
        method: &str,
        path: &str,
        body: &[u8],
        failure: Option<Failure>,
    ) -> Option<Response> {
        let p = parse(path)?;
        if !(serves(path) || p.tail.first() == Some(&"operations") && self.knows_operation(path)) {
            return None;
        }
        let body: Value = if body.is_empty() {
            json!({})
        } else {
            match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => return Some(invalid(format!("Invalid JSON payload received. {e}"))),
            }
        };
        let (project, location) = (p.project, p.location);
        let parent = format!("projects/{project}/locations/{location}");
        let not_found = |what: &str| error(404, "NOT_FOUND", &format!("Not found: {what}."));
        Some(match (method, p.tail.as_slice()) {
            ("GET", ["operations", name]) => match self.poll(&format!("{parent}/operations/{name}")) {
                Some(v) => ok(v),
                None => not_found(&format!("{parent}/operations/{name}")),
            },
            ("POST", ["clusters"]) => self.create_cluster(compute, project, location, &body, failure),
            ("GET", ["clusters"]) => {
                let prefix = format!("{parent}/clusters/");
                let keys: Vec<String> = self.clusters.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
                let clusters: Vec<Value> = keys.iter().map(|k| self.cluster_view(k, compute)).collect();
                ok(json!({"clusters": clusters}))
            }
            ("GET", ["clusters", c]) => {
                let key = format!("{parent}/clusters/{c}");
                if !self.clusters.contains_key(&key) {
                    return Some(not_found(&key));
                }
                ok(self.cluster_view(&key, compute))
            }
            ("DELETE", ["clusters", c]) => {
                let key = format!("{parent}/clusters/{c}");
                let Some(cluster) = self.clusters.get(&key) else { return Some(not_found(&key)) };
                let target = format!("{CONTAINER}{key}");
                let zone = cluster.value["locations"][0].as_str().unwrap_or(location).to_owned();
                if let Some(f) = Self::failure(failure, project, &zone) {
                    let op = self.operation(project, location, &key, "DELETE_CLUSTER", &target, Some(f));
                    return Some(ok(self.operation_view(&op).unwrap_or_default()));
                }
                self.remove_outside(&key, compute);
                let op = self.operation(project, location, &key, "DELETE_CLUSTER", &target, None);
                ok(self.operation_view(&op).unwrap_or_default())
            }
            (_, ["clusters", c, "nodePools", rest @ ..]) => {
                let key = format!("{parent}/clusters/{c}");
                if !self.clusters.contains_key(&key) {
                    return Some(not_found(&key));
                }
                self.pools(compute, project, location, &key, method, rest, &body, failure)
            }
            _ => error(404, "NOT_FOUND", &format!("no route {method} {path}")),
        })
    }

    fn create_cluster(
        &mut self,
        compute: &mut dyn Compute,
        project: &str,
        location: &str,
        body: &Value,
        failure: Option<Failure>,
    ) -> Response {
        let Some(given) = body.get("cluster").and_then(Value::as_object) else { return invalid("cluster is required") };
        let mut cluster = Value::Object(given.clone());
        for k in CLUSTER_OUTPUT_ONLY {
            cluster.as_object_mut().map(|m| m.remove(*k));
        }
        let name = cluster["name"].as_str().unwrap_or_default().to_owned();
        if !rfc1035(&name, 40) {
            return invalid(format!(
                "Invalid cluster name \"{name}\": it must be 1 to 40 characters of lowercase letters, digits and hyphens, start with a letter and not end with a hyphen."
            ));
        }
        let key = format!("projects/{project}/locations/{location}/clusters/{name}");
        if self.clusters.contains_key(&key) {
            return error(409, "ALREADY_EXISTS", &format!("Already exists: {key}."));
        }
        if let Some(op) = self.busy(&key) {
            // Still being deleted.
            return Self::incompatible(&op);
        }
        let region = region_of(location).to_owned();
        let zones: Vec<String> = match cluster["locations"].as_array() {
            Some(l) if !l.is_empty() => l.iter().map(|z| z.as_str().unwrap_or_default().to_owned()).collect(),
            _ if is_zone(location) => vec![location.to_owned()],
            _ => ["a", "b", "c"].iter().map(|z| format!("{region}-{z}")).collect(),
        };
        if let Some(z) = zones.iter().find(|z| !is_zone(z) || region_of(z) != region) {
            return invalid(format!("cluster.locations: \"{z}\" is not a zone of {region}."));
        }
        let network = last(cluster["network"].as_str().filter(|n| !n.is_empty()).unwrap_or("default")).to_owned();
        let subnetwork = last(cluster["subnetwork"].as_str().filter(|n| !n.is_empty()).unwrap_or("default")).to_owned();
        if !cluster["networkConfig"].is_object() {
            cluster["networkConfig"] = json!({});
        }
        let multi = cluster["networkConfig"]["enableMultiNetworking"].as_bool() == Some(true);
        if multi && cluster["networkConfig"]["datapathProvider"].as_str() != Some("ADVANCED_DATAPATH") {
            return invalid(
                "cluster.networkConfig.enableMultiNetworking needs GKE Dataplane V2: set networkConfig.datapathProvider to ADVANCED_DATAPATH.",
            );
        }
        cluster["networkConfig"]["network"] = json!(format!("projects/{project}/global/networks/{network}"));
        cluster["networkConfig"]["subnetwork"] = json!(format!("projects/{project}/regions/{region}/subnetworks/{subnetwork}"));
        cluster["network"] = json!(network);
        cluster["subnetwork"] = json!(subnetwork);
        let version = match cluster["initialClusterVersion"].as_str().filter(|v| !v.is_empty()) {
            None | Some("-" | "latest") => expand_version(DEFAULT_VERSION).unwrap_or_default(),
            Some(v) => match expand_version(v) {
                Ok(v) => v,
                Err(e) => return invalid(e),
            },
        };
        let given_pools =
            cluster.as_object_mut().and_then(|m| m.remove("nodePools")).and_then(|p| p.as_array().cloned()).unwrap_or_default();
        let initial = cluster.get("initialNodeCount").and_then(int);
        if !given_pools.is_empty() && initial.is_some() {
            return invalid(
                "cluster.initialNodeCount cannot be set together with cluster.nodePools: give each node pool its initialNodeCount.",
            );
        }
        if let Some(n) = initial.filter(|n| *n < 0) {
            return invalid(format!("cluster.initialNodeCount must be non-negative, got {n}."));
        }
        let pools = if given_pools.is_empty() {
            let mut pool = json!({"name": "default-pool", "initialNodeCount": initial.unwrap_or(3)});
            if let Some(config) = cluster.get("nodeConfig").filter(|c| c.is_object()) {
                pool["config"] = config.clone();
            }
            vec![pool]
        } else {
            given_pools
        };
        cluster.as_object_mut().map(|m| m.remove("initialNodeCount"));
        let n = self.clusters.len() as u64 + self.next;
        let hash = fnv(&key);
        cluster["location"] = json!(location);
        cluster["zone"] = json!(location);
        cluster["locations"] = json!(zones);
        cluster["currentMasterVersion"] = json!(version);
        cluster["selfLink"] = json!(format!("{CONTAINER}{key}"));
        cluster["endpoint"] = json!(format!("34.{}.{}.{}", 16 + hash % 100, (hash >> 8) % 256, 2 + (hash >> 16) % 250));
        cluster["createTime"] = json!(rfc3339(SystemTime::now()));
        cluster["id"] = json!(format!("{:016x}{:016x}", hash, fnv(&format!("{key}/{n}"))));
        cluster["clusterIpv4Cidr"] = json!(format!("10.{}.0.0/14", 4 * (1 + n % 60)));
        cluster["servicesIpv4Cidr"] = json!("34.118.224.0/20");
        cluster["nodeIpv4CidrSize"] = json!(24);
        let mut checked = Vec::new();
        for (i, pool) in pools.iter().enumerate() {
            let at = format!("cluster.nodePools[{i}]");
            let (pool, pool_zones) = match Self::check_pool(compute, &cluster, project, pool, &at) {
                Ok(c) => c,
                Err(e) => return e.response(),
            };
            if checked.iter().any(|(p, _): &(Value, Vec<String>)| p["name"] == pool["name"]) {
                return invalid(format!("{at}.name: node pool \"{}\" is named twice.", pool["name"].as_str().unwrap_or_default()));
            }
            checked.push((pool, pool_zones));
        }
        let target = format!("{CONTAINER}{key}");
        if let Some(f) = Self::failure(failure, project, &zones[0]) {
            let op = self.operation(project, location, &key, "CREATE_CLUSTER", &target, Some(f));
            return ok(self.operation_view(&op).unwrap_or_default());
        }
        let op = self.operation(project, location, &key, "CREATE_CLUSTER", &target, None);
        cluster["etag"] = json!(self.etag());
        let made: Vec<Pool> =
            checked.into_iter().map(|(pool, pool_zones)| self.materialize(compute, &key, pool, &pool_zones, &op)).collect();
        self.clusters.insert(key, Cluster { value: cluster, op: op.clone(), pools: made });
        ok(self.operation_view(&op).unwrap_or_default())
    }

    #[allow(clippy::too_many_arguments)]
    fn pools(
        &mut self,
        compute: &mut dyn Compute,
        project: &str,
        location: &str,
        key: &str,
        method: &str,
        rest: &[&str],
        body: &Value,
        failure: Option<Failure>,
    ) -> Response {
        let (pool_name, verb) = match rest.first() {
            Some(s) => match s.split_once(':') {
                Some((n, v)) => (Some(n.to_owned()), Some(v.to_owned())),
                None => (Some((*s).to_owned()), None),
            },
            None => (None, None),
        };
        if rest.len() > 1 {
            return error(404, "NOT_FOUND", &format!("no route {method} {key}/nodePools/{}", rest.join("/")));
        }
        let cluster_value = self.clusters[key].value.clone();
        let index = pool_name.as_ref().and_then(|n| self.clusters[key].pools.iter().position(|p| p.value["name"] == n.as_str()));
        let pool_path = pool_name.as_ref().map(|n| format!("{key}/nodePools/{n}")).unwrap_or_default();
        let target = format!("{CONTAINER}{pool_path}");
        let missing = || error(404, "NOT_FOUND", &format!("Not found: {pool_path}."));
        match (method, pool_name.as_deref(), verb.as_deref()) {
            ("GET", None, None) => {
                let pools: Vec<Value> = self.clusters[key].pools.iter().map(|p| self.pool_view(p)).collect();
                ok(json!({"nodePools": pools}))
            }
            ("POST", None, None) => {
                let Some(given) = body.get("nodePool").filter(|p| p.is_object()) else { return invalid("nodePool is required") };
                let (pool, zones) = match Self::check_pool(compute, &cluster_value, project, given, "nodePool") {
                    Ok(c) => c,
                    Err(e) => return e.response(),
                };
                let name = pool["name"].as_str().unwrap_or_default().to_owned();
                if self.clusters[key].pools.iter().any(|p| p.value["name"] == name.as_str()) {
                    return error(409, "ALREADY_EXISTS", &format!("Already exists: {key}/nodePools/{name}."));
                }
                if let Some(op) = self.busy(key) {
                    return Self::incompatible(&op);
                }
                let target = format!("{CONTAINER}{key}/nodePools/{name}");
                let failed = Self::failure(failure, project, zones.first().map_or(location, String::as_str));
                let is_failed = failed.is_some();
                let op = self.operation(project, location, key, "CREATE_NODE_POOL", &target, failed);
                if !is_failed {
                    let made = self.materialize(compute, key, pool, &zones, &op);
                    if let Some(c) = self.clusters.get_mut(key) {
                        c.pools.push(made);
                    }
                }
                ok(self.operation_view(&op).unwrap_or_default())
            }
            ("GET", Some(_), None) => match index {
                Some(i) => ok(self.pool_view(&self.clusters[key].pools[i])),
                None => missing(),
            },
            ("DELETE", Some(_), None) => {
                let Some(i) = index else { return missing() };
                if let Some(op) = self.busy(key) {
                    return Self::incompatible(&op);
                }
                let zone = self.clusters[key].pools[i].value["locations"][0].as_str().unwrap_or(location).to_owned();
                let failed = Self::failure(failure, project, &zone);
                let is_failed = failed.is_some();
                let op = self.operation(project, location, key, "DELETE_NODE_POOL", &target, failed);
                if !is_failed && let Some(c) = self.clusters.get_mut(key) {
                    let pool = c.pools.remove(i);
                    Self::drop_groups(&pool, compute);
                }
                ok(self.operation_view(&op).unwrap_or_default())
            }
            (m, Some(_), v) if (m == "POST" && v.is_some()) || (m == "PUT" && v.is_none()) => {
                let Some(i) = index else { return missing() };
                let current = self.clusters[key].pools[i].value.clone();
                let (kind, changed) = match v {
                    Some("setSize") => {
                        let count = body.get("nodeCount").map_or(Some(0), int);
                        match count {
                            Some(n) if n >= 0 => ("SET_NODE_POOL_SIZE", Change::Size(n)),
                            _ => return invalid(format!("nodeCount must be a non-negative whole number, got {}.", body["nodeCount"])),
                        }
                    }
                    Some("setAutoscaling") => {
                        let autoscaling = body.get("autoscaling").cloned().unwrap_or(json!({}));
                        if let Err(e) = check_autoscaling(&autoscaling, "autoscaling") {
                            return e.response();
                        }
                        let mut pool = current.clone();
                        pool["autoscaling"] = autoscaling;
                        ("UPDATE_CLUSTER", Change::Value(pool))
                    }
                    Some("setManagement") => {
                        let mut pool = current.clone();
                        pool["management"] = body.get("management").cloned().unwrap_or(json!({}));
                        ("SET_NODE_POOL_MANAGEMENT", Change::Value(pool))
                    }
                    Some(other) => return error(404, "NOT_FOUND", &format!("no route {method} {pool_path}:{other}")),
                    None => {
                        let etag = body["etag"].as_str().filter(|e| !e.is_empty());
                        if let Some(etag) = etag.filter(|e| Some(*e) != current["etag"].as_str()) {
                            return error(
                                409,
                                "ABORTED",
                                &format!(
                                    "The etag \"{etag}\" is not the node pool's current etag: it has changed since it was read. Read it again and retry."
                                ),
                            );
                        }
                        match Self::updated(compute, &cluster_value, project, &current, body) {
                            Ok(c) => ("UPGRADE_NODES", c),
                            Err(e) => return e.response(),
                        }
                    }
                };
                if let Some(op) = self.busy(key) {
                    return Self::incompatible(&op);
                }
                let zone = current["locations"][0].as_str().unwrap_or(location).to_owned();
                let failed = Self::failure(failure, project, &zone);
                let is_failed = failed.is_some();
                let op = self.operation(project, location, key, kind, &target, failed);
                if !is_failed {
                    let etag = self.etag();
                    let mut zones_changed = None;
                    let mut value = match changed {
                        Change::Size(n) => {
                            for url in current["instanceGroupUrls"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                                compute.set_target_size(url.trim_start_matches(COMPUTE), n);
                            }
                            current.clone()
                        }
                        Change::Value(v) => v,
                        Change::Zones(v, zones) => {
                            zones_changed = Some(zones);
                            v
                        }
                    };
                    if let Some(zones) = zones_changed {
                        value = self.rezone(compute, key, value, &current, &zones);
                    }
                    value["etag"] = json!(etag);
                    if let Some(c) = self.clusters.get_mut(key) {
                        c.pools[i] = Pool { value, op: op.clone() };
                    }
                } else if let Some(c) = self.clusters.get_mut(key) {
                    c.pools[i].op = op.clone();
                }
                ok(self.operation_view(&op).unwrap_or_default())
            }
            _ => error(404, "NOT_FOUND", &format!("no route {method} {key}/nodePools/{}", rest.join("/"))),
        }
    }

    /// Moves a pool to other zones: instance group managers for the new zones (at the size the pool's
    /// groups have now), the dropped zones' groups deleted.
    fn rezone(&mut self, compute: &mut dyn Compute, key: &str, mut value: Value, current: &Value, zones: &[String]) -> Value {
        let urls: Vec<String> =
            current["instanceGroupUrls"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect();
        let zone_of = |url: &str| url.split("/zones/").nth(1).and_then(|z| z.split('/').next()).unwrap_or_default().to_owned();
        let size = urls.first().and_then(|u| compute.get(u.trim_start_matches(COMPUTE))).and_then(|g| g.get("targetSize").and_then(int));
        let mut kept: Vec<Value> = Vec::new();
        for url in &urls {
            if zones.contains(&zone_of(url)) {
                kept.push(json!(url));
            } else {
                compute.remove(url.trim_start_matches(COMPUTE));
            }
        }
        let new: Vec<String> = zones.iter().filter(|z| !urls.iter().any(|u| &zone_of(u) == *z)).cloned().collect();
        if !new.is_empty() {
            let mut seed = value.clone();
            seed["initialNodeCount"] = json!(size.unwrap_or_else(|| value.get("initialNodeCount").and_then(int).unwrap_or(0)));
            let made = self.materialize(compute, key, seed, &new, "");
            kept.extend(made.value["instanceGroupUrls"].as_array().cloned().unwrap_or_default());
        }
        value["instanceGroupUrls"] = json!(kept);
        value["locations"] = json!(zones);
        value
    }

    /// What an UpdateNodePoolRequest makes of a pool, checked as GKE checks it.
    fn updated(compute: &dyn Compute, cluster: &Value, project: &str, current: &Value, body: &Value) -> Result<Change, Refused> {
        let mut pool = current.clone();
        let master = cluster["currentMasterVersion"].as_str().unwrap_or_default().to_owned();
        if let Some(v) = body["nodeVersion"].as_str().filter(|v| !v.is_empty()) {
            let version = if matches!(v, "-" | "latest") { master.clone() } else { expand_version(v).map_err(bad)? };
            if minor_of(&version) > minor_of(&master) {
                return Err(bad(format!(
                    "nodeVersion {version} is newer than the control plane's version {master}; nodes may not be newer than their control plane."
                )));
            }
            pool["version"] = json!(version);
        }
        if let Some(image) = body["imageType"].as_str().filter(|i| !i.is_empty()) {
            let upper = image.to_ascii_uppercase();
            if !IMAGE_TYPES.contains(&upper.as_str()) {
                return Err(bad(format!("imageType: unknown image type \"{image}\" (valid: {}).", IMAGE_TYPES.join(", "))));
            }
            pool["config"]["imageType"] = json!(upper);
        }
        if !pool["config"].is_object() {
            pool["config"] = json!({});
        }
        // The wrapped maps and lists replace what the pool had; an empty one clears it.
        for (field, inner, into) in [
            ("labels", "labels", "labels"),
            ("resourceLabels", "labels", "resourceLabels"),
            ("taints", "taints", "taints"),
            ("tags", "tags", "tags"),
        ] {
            if let Some(wrapper) = body.get(field).filter(|w| w.is_object()) {
                let v = wrapper.get(inner).cloned().unwrap_or(Value::Null);
                let empty = v.is_null() || v.as_object().is_some_and(|m| m.is_empty()) || v.as_array().is_some_and(|a| a.is_empty());
                if empty {
                    pool["config"].as_object_mut().map(|m| m.remove(into));
                } else {
                    pool["config"][into] = v;
                }
            }
        }
        for field in [
            "machineType",
            "diskType",
            "kubeletConfig",
            "linuxNodeConfig",
            "workloadMetadataConfig",
            "gcfsConfig",
            "gvnic",
            "fastSocket",
            "loggingConfig",
            "confidentialNodes",
            "windowsNodeConfig",
            "containerdConfig",
            "resourceManagerTags",
            "accelerators",
            "storagePools",
            "maxRunDuration",
            "flexStart",
            "bootDisk",
            "consolidationDelay",
        ] {
            if let Some(v) = body.get(field).filter(|v| !v.is_null() && v.as_str() != Some("")) {
                pool["config"][field] = v.clone();
            }
        }
        if let Some(gb) = body.get("diskSizeGb").and_then(int).filter(|gb| *gb != 0) {
            if gb < 10 {
                return Err(bad(format!("diskSizeGb must be at least 10, got {gb}.")));
            }
            pool["config"]["diskSizeGb"] = json!(gb);
        }
        for field in ["upgradeSettings", "nodeDrainConfig", "maintenancePolicy", "queuedProvisioning"] {
            if let Some(v) = body.get(field).filter(|v| !v.is_null()) {
                pool[field] = v.clone();
            }
        }
        if let Some(zones) = body["locations"].as_array().filter(|l| !l.is_empty()) {
            let zones: Vec<String> = zones.iter().map(|z| z.as_str().unwrap_or_default().to_owned()).collect();
            let mut probe = pool.clone();
            probe["locations"] = json!(zones);
            probe["version"] = json!(null);
            for k in POOL_OUTPUT_ONLY {
                probe.as_object_mut().map(|m| m.remove(*k));
            }
            Self::check_pool(compute, cluster, project, &probe, "nodePool")?;
            if zones
                != current["locations"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect::<Vec<_>>()
            {
                return Ok(Change::Zones(pool, zones));
            }
        }
        Ok(Change::Value(pool))
    }
}

/// What a write does to a pool.
enum Change {
    /// Its groups' target size.
    Size(i64),
    /// Its value.
    Value(Value),
    /// Its value and its zones.
    Zones(Value, Vec<String>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_zones_names_and_times() {
        assert_eq!(expand_version("1.33").unwrap(), "1.33.5-gke.1162000");
        assert_eq!(expand_version("1.32.4").unwrap(), "1.32.4-gke.1162000");
        assert_eq!(expand_version("1.31.2-gke.1000").unwrap(), "1.31.2-gke.1000");
        assert!(expand_version("one").is_err() && expand_version("1.33.x").is_err());
        assert!(minor_of("1.34.0-gke.1") > minor_of("1.33.5-gke.1162000"));
        assert!(is_zone("us-central1-a") && !is_zone("us-central1") && !is_zone("europe-west4"));
        assert_eq!(region_of("us-central1-f"), "us-central1");
        assert!(rfc1035("gpu-pool-1", 40) && !rfc1035("Gpu", 40) && !rfc1035("a-", 40) && !rfc1035(&"a".repeat(41), 40));
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(1_767_225_600_123)), "2026-01-01T00:00:00.123Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn method_names_for_faults_and_counters() {
        let base = "v1/projects/p/locations/us-central1";
        assert_eq!(method_of("POST", &format!("{base}/clusters/c/nodePools/np:setSize")), "nodePools.setSize");
        assert_eq!(method_of("PUT", &format!("{base}/clusters/c/nodePools/np")), "nodePools.update");
        assert_eq!(method_of("GET", &format!("{base}/operations/operation-1-ab")), "operations.get");
        assert_eq!(method_of("POST", &format!("{base}/clusters")), "clusters.create");
        assert!(serves(&format!("/{base}/clusters/c")) && !serves(&format!("{base}/instances")));
    }
}
