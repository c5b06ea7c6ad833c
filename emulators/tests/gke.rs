//! Google Kubernetes Engine (container v1) on the Google Cloud emulator, through raw JSON as the provider
//! sends it: a multi-networking cluster, a GPU node pool with additional node networks and COMPACT
//! placement in a resource policy made through Compute Engine, operations polled to DONE, the pool's size
//! read from its managed instance groups, setSize, update with etags, the refusals GKE gives, deletes that
//! leave nothing behind, and injected faults. With `HPC_CONFORMANCE=strict` and `HPC_CONFORMANCE_DEFS`
//! every call and answer is judged by container.v1's (and compute.v1's) discovery documents.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use hpc_emulators::harness;
use serde_json::{Value, json};

const P: &str = "ml-prod";
const REGION: &str = "us-central1";
const ZONE: &str = "us-central1-a";

/// A raw call on the emulator's port: the HTTP status and the JSON answer.
fn call(endpoint: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let addr = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, payload) = out.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, serde_json::from_str(payload).unwrap_or(Value::Null))
}

/// A call that must succeed: its answer.
fn ok(endpoint: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let (status, out) = call(endpoint, method, path, body);
    assert_eq!(status, 200, "{method} {path}: {out}");
    out
}

/// A call that must be refused with `status` and the google.rpc code `code`: the error's message.
fn refused(endpoint: &str, method: &str, path: &str, body: Option<Value>, status: u16, code: &str) -> String {
    let (got, out) = call(endpoint, method, path, body);
    assert_eq!((got, out["error"]["status"].as_str()), (status, Some(code)), "{method} {path}: {out}");
    assert_eq!(out["error"]["code"], status, "{out}");
    out["error"]["message"].as_str().unwrap_or_default().to_owned()
}

fn parent(location: &str) -> String {
    format!("/v1/projects/{P}/locations/{location}")
}

fn cluster_path(location: &str, cluster: &str) -> String {
    format!("{}/clusters/{cluster}", parent(location))
}

/// Polls a GKE operation (as answered by a write) until DONE, as a client must before its next write.
fn wait(endpoint: &str, location: &str, op: &Value) -> Value {
    let name = op["name"].as_str().unwrap_or_else(|| panic!("not an operation: {op}"));
    let path = format!("{}/operations/{name}", parent(location));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = ok(endpoint, "GET", &path, None);
        if now["status"] == "DONE" {
            return now;
        }
        assert_eq!(now["status"], "RUNNING", "{now}");
        assert!(Instant::now() < deadline, "operation {name} never finished: {now}");
        std::thread::sleep(Duration::from_millis(40));
    }
}

/// The fabric's networks through Compute Engine: the cluster's VPC and two GPU NIC VPCs, each with a
/// subnetwork in the region, and a compact placement policy.
fn fabric(ep: &str) {
    let compute = format!("/compute/v1/projects/{P}");
    for (i, net) in ["vpc", "gpu-0", "gpu-1"].iter().enumerate() {
        ok(ep, "POST", &format!("{compute}/global/networks"), Some(json!({"name": net, "autoCreateSubnetworks": false})));
        ok(
            ep,
            "POST",
            &format!("{compute}/regions/{REGION}/subnetworks"),
            Some(json!({"name": net, "network": format!("projects/{P}/global/networks/{net}"), "ipCidrRange": format!("10.{i}.0.0/20")})),
        );
    }
    ok(
        ep,
        "POST",
        &format!("{compute}/regions/{REGION}/resourcePolicies"),
        Some(json!({"name": "train-placement", "groupPlacementPolicy": {"collocation": "COLLOCATED"}})),
    );
}

fn multi_network_cluster(name: &str) -> Value {
    json!({"cluster": {
        "name": name, "network": "vpc", "subnetwork": "vpc", "initialClusterVersion": "1.33",
        "networkConfig": {"enableMultiNetworking": true, "datapathProvider": "ADVANCED_DATAPATH"},
        "nodePools": [{"name": "system", "initialNodeCount": 1, "config": {"machineType": "e2-standard-4"}}],
    }})
}

fn gpu_pool(name: &str, count: i64) -> Value {
    json!({"nodePool": {
        "name": name, "initialNodeCount": count, "locations": [ZONE], "version": "1.33",
        "config": {"machineType": "a3-megagpu-8g", "imageType": "COS_CONTAINERD", "labels": {"hpc_pool": name},
                   "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
                   "gvnic": {"enabled": true}, "reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}},
        "placementPolicy": {"type": "COMPACT", "policyName": "train-placement"},
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": "gpu-0", "subnetwork": "gpu-0"},
                                                           {"network": "gpu-1", "subnetwork": "gpu-1"}]},
        "management": {"autoRepair": true},
        "upgradeSettings": {"maxSurge": 0, "maxUnavailable": 1, "strategy": "SURGE"},
    }})
}

/// `https://www.googleapis.com/compute/v1/projects/..` -> `/compute/v1/projects/..` on the emulator.
fn local(url: &str) -> String {
    url.trim_start_matches("https://www.googleapis.com").to_owned()
}

fn target_size(ep: &str, group_url: &str) -> i64 {
    ok(ep, "GET", &local(group_url), None)["targetSize"].as_i64().unwrap()
}

#[test]
fn a_gpu_pool_with_additional_networks_and_compact_placement_lives_and_dies() {
    let ep = &harness::start_gcp();
    fabric(ep);
    let op = ok(ep, "POST", &format!("{}/clusters", parent(REGION)), Some(multi_network_cluster("train")));
    assert_eq!(op["operationType"], "CREATE_CLUSTER");
    assert_eq!(op["status"], "RUNNING");
    // Until the cluster's create is done, it is PROVISIONING and no node pool can be added.
    let cluster = ok(ep, "GET", &cluster_path(REGION, "train"), None);
    assert_eq!(cluster["status"], "PROVISIONING", "{cluster}");
    let early =
        refused(ep, "POST", &format!("{}/nodePools", cluster_path(REGION, "train")), Some(gpu_pool("gpu", 2)), 400, "FAILED_PRECONDITION");
    assert_eq!(early, format!("Cluster is running incompatible operation {}.", op["name"].as_str().unwrap()));
    let done = wait(ep, REGION, &op);
    assert!(done["endTime"].is_string() && done.get("error").is_none(), "{done}");

    let cluster = ok(ep, "GET", &cluster_path(REGION, "train"), None);
    assert_eq!(cluster["status"], "RUNNING");
    assert_eq!(cluster["location"], REGION);
    assert_eq!(cluster["locations"], json!(["us-central1-a", "us-central1-b", "us-central1-c"]));
    assert_eq!(cluster["currentMasterVersion"], "1.33.5-gke.1162000");
    assert_eq!(cluster["networkConfig"]["network"], format!("projects/{P}/global/networks/vpc"));
    assert_eq!(cluster["networkConfig"]["subnetwork"], format!("projects/{P}/regions/{REGION}/subnetworks/vpc"));
    assert_eq!(cluster["networkConfig"]["enableMultiNetworking"], true);
    assert_eq!(cluster["selfLink"], format!("https://container.googleapis.com/v1/projects/{P}/locations/{REGION}/clusters/train"));
    assert_eq!(cluster["nodePools"][0]["name"], "system");
    // The system pool: one group of one node in each of the cluster's three zones.
    assert_eq!(cluster["nodePools"][0]["instanceGroupUrls"].as_array().unwrap().len(), 3);
    assert_eq!(cluster["currentNodeCount"], 3);

    // The GPU pool.
    let pools = format!("{}/nodePools", cluster_path(REGION, "train"));
    let op = ok(ep, "POST", &pools, Some(gpu_pool("gpu", 2)));
    let name = op["name"].as_str().unwrap();
    let (digits, hex) = name.strip_prefix("operation-").and_then(|r| r.split_once('-')).unwrap_or_else(|| panic!("{name}"));
    assert!(digits.chars().all(|c| c.is_ascii_digit()) && hex.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
    assert_eq!(op["operationType"], "CREATE_NODE_POOL");
    let pool_path = format!("{pools}/gpu");
    assert_eq!(op["targetLink"], format!("https://container.googleapis.com{pool_path}"));
    assert_eq!(op["selfLink"], format!("https://container.googleapis.com{}/operations/{name}", parent(REGION)));
    let pool = ok(ep, "GET", &pool_path, None);
    assert_eq!(pool["status"], "PROVISIONING");
    assert_eq!(ok(ep, "GET", &cluster_path(REGION, "train"), None)["status"], "RECONCILING");
    // A second write while the create runs is refused: clients wait for the operation first.
    let busy = refused(ep, "POST", &format!("{pool_path}:setSize"), Some(json!({"nodeCount": 4})), 400, "FAILED_PRECONDITION");
    assert!(busy.contains(name), "{busy}");
    wait(ep, REGION, &op);

    let pool = ok(ep, "GET", &pool_path, None);
    assert_eq!(pool["status"], "RUNNING", "{pool}");
    assert_eq!(pool["version"], "1.33.5-gke.1162000");
    assert_eq!(pool["locations"], json!([ZONE]));
    assert_eq!(pool["placementPolicy"], json!({"type": "COMPACT", "policyName": "train-placement"}));
    assert_eq!(pool["networkConfig"]["additionalNodeNetworkConfigs"][1], json!({"network": "gpu-1", "subnetwork": "gpu-1"}));
    assert_eq!(pool["config"]["labels"], json!({"hpc_pool": "gpu"}));
    let groups: Vec<String> = pool["instanceGroupUrls"].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_owned()).collect();
    assert_eq!(groups.len(), 1, "one group per zone: {pool}");
    let prefix = format!("https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZONE}/instanceGroupManagers/gke-train-gpu-");
    assert!(groups[0].starts_with(&prefix) && groups[0].ends_with("-grp"), "{}", groups[0]);
    // The pool's size is its groups' target size.
    let group = ok(ep, "GET", &local(&groups[0]), None);
    assert_eq!(group["targetSize"], 2);
    assert_eq!(group["status"]["isStable"], true);
    assert_eq!(group["zone"], format!("https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZONE}"));
    assert_eq!(group["selfLink"], groups[0]);
    let listed = ok(ep, "GET", &format!("/compute/v1/projects/{P}/zones/{ZONE}/instanceGroupManagers"), None);
    assert_eq!(listed["kind"], "compute#instanceGroupManagerList");
    assert_eq!(listed["items"].as_array().unwrap().len(), 2, "the system pool's group and the GPU pool's in {ZONE}: {listed}");
    // GKE's groups are changed through their pool, not through Compute Engine.
    let igm_delete = call(ep, "DELETE", &local(&groups[0]), None);
    assert_eq!(igm_delete.0, 400, "{}", igm_delete.1);

    // setSize changes the groups' target size, not initialNodeCount.
    let op = ok(ep, "POST", &format!("{pool_path}:setSize"), Some(json!({"nodeCount": 5})));
    assert_eq!(op["operationType"], "SET_NODE_POOL_SIZE");
    assert_eq!(ok(ep, "GET", &pool_path, None)["status"], "RECONCILING");
    wait(ep, REGION, &op);
    assert_eq!(target_size(ep, &groups[0]), 5);
    let pool = ok(ep, "GET", &pool_path, None);
    assert_eq!(pool["initialNodeCount"], 2);
    assert_eq!(ok(ep, "GET", &cluster_path(REGION, "train"), None)["currentNodeCount"], 3 + 5);

    // update: labels and taints are replaced, the etag changes; a stale etag is ABORTED.
    let etag = pool["etag"].as_str().unwrap().to_owned();
    let update = json!({"labels": {"labels": {"team": "ml"}}, "taints": {"taints": [{"key": "dedicated", "value": "train", "effect": "NO_EXECUTE"}]},
                        "resourceLabels": {"labels": {"hpc_cluster": "train"}}, "etag": etag});
    let op = ok(ep, "PUT", &pool_path, Some(update));
    assert_eq!(op["operationType"], "UPGRADE_NODES");
    wait(ep, REGION, &op);
    let pool = ok(ep, "GET", &pool_path, None);
    assert_eq!(pool["config"]["labels"], json!({"team": "ml"}));
    assert_eq!(pool["config"]["taints"], json!([{"key": "dedicated", "value": "train", "effect": "NO_EXECUTE"}]));
    assert_eq!(pool["config"]["resourceLabels"], json!({"hpc_cluster": "train"}));
    assert_ne!(pool["etag"], etag);
    let stale = refused(ep, "PUT", &pool_path, Some(json!({"labels": {"labels": {}}, "etag": etag})), 409, "ABORTED");
    assert!(stale.contains("etag"), "{stale}");
    // Clearing the taints with the current etag; nodeVersion "-" is the control plane's version.
    let op = ok(ep, "PUT", &pool_path, Some(json!({"taints": {}, "nodeVersion": "-", "etag": pool["etag"]})));
    wait(ep, REGION, &op);
    let pool = ok(ep, "GET", &pool_path, None);
    assert!(pool["config"].get("taints").is_none(), "{pool}");
    assert_eq!(pool["version"], "1.33.5-gke.1162000");
    assert_eq!(pool["config"]["labels"], json!({"team": "ml"}), "what the update did not name stays");

    // Autoscaling: a range out of order is refused; a good one is GKE's UPDATE_CLUSTER operation.
    let bad = refused(
        ep,
        "POST",
        &format!("{pool_path}:setAutoscaling"),
        Some(json!({"autoscaling": {"enabled": true, "minNodeCount": 3, "maxNodeCount": 1}})),
        400,
        "INVALID_ARGUMENT",
    );
    assert!(bad.contains("minNodeCount"), "{bad}");
    let op = ok(
        ep,
        "POST",
        &format!("{pool_path}:setAutoscaling"),
        Some(json!({"autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 8, "locationPolicy": "ANY"}})),
    );
    assert_eq!(op["operationType"], "UPDATE_CLUSTER");
    wait(ep, REGION, &op);
    assert_eq!(ok(ep, "GET", &pool_path, None)["autoscaling"]["totalMaxNodeCount"], 8);
    assert_eq!(target_size(ep, &groups[0]), 5, "autoscaling limits do not resize by themselves");

    let listed = ok(ep, "GET", &pools, None);
    let names: Vec<&str> = listed["nodePools"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["system", "gpu"]);

    // Deleting the pool deletes its groups.
    let op = ok(ep, "DELETE", &pool_path, None);
    assert_eq!(op["operationType"], "DELETE_NODE_POOL");
    wait(ep, REGION, &op);
    refused(ep, "GET", &pool_path, None, 404, "NOT_FOUND");
    assert_eq!(call(ep, "GET", &local(&groups[0]), None).0, 404);
    let inventory = harness::admin(ep, "GET", "inventory", None);
    assert_eq!(
        inventory["resources"]["container"]["nodePools"],
        json!([format!("projects/{P}/locations/{REGION}/clusters/train/nodePools/system")])
    );
    let snapshot = harness::admin(ep, "GET", "snapshot", None);
    assert_eq!(snapshot["container"][format!("projects/{P}/locations/{REGION}/clusters/train")]["name"], "train");

    // Deleting the cluster deletes the rest; with the fabric gone too, nothing is left.
    let op = ok(ep, "DELETE", &cluster_path(REGION, "train"), None);
    assert_eq!(op["operationType"], "DELETE_CLUSTER");
    wait(ep, REGION, &op);
    refused(ep, "GET", &cluster_path(REGION, "train"), None, 404, "NOT_FOUND");
    let compute = format!("/compute/v1/projects/{P}");
    ok(ep, "DELETE", &format!("{compute}/regions/{REGION}/resourcePolicies/train-placement"), None);
    for net in ["vpc", "gpu-0", "gpu-1"] {
        ok(ep, "DELETE", &format!("{compute}/regions/{REGION}/subnetworks/{net}"), None);
        ok(ep, "DELETE", &format!("{compute}/global/networks/{net}"), None);
    }
    let inventory = harness::admin(ep, "GET", "inventory", None);
    assert_eq!(inventory["empty"], true, "{inventory}");
    assert_eq!(inventory["resources"]["compute"]["instanceGroupManagers"], json!([]));
}

#[test]
fn gke_refuses_what_it_refuses() {
    let ep = &harness::start_gcp();
    fabric(ep);
    // A cluster without multi-networking takes no additional node networks.
    let plain = json!({"cluster": {"name": "plain", "network": "vpc", "subnetwork": "vpc", "initialNodeCount": 1}});
    wait(ep, ZONE, &ok(ep, "POST", &format!("{}/clusters", parent(ZONE)), Some(plain.clone())));
    let zonal = ok(ep, "GET", &cluster_path(ZONE, "plain"), None);
    assert_eq!(zonal["locations"], json!([ZONE]));
    assert_eq!(zonal["nodePools"][0]["name"], "default-pool");
    refused(ep, "POST", &format!("{}/clusters", parent(ZONE)), Some(plain), 409, "ALREADY_EXISTS");
    let plain_pools = format!("{}/nodePools", cluster_path(ZONE, "plain"));
    let message = refused(ep, "POST", &plain_pools, Some(gpu_pool("gpu", 1)), 400, "INVALID_ARGUMENT");
    assert!(message.contains("multi-networking") && message.contains("enableMultiNetworking"), "{message}");
    // Multi-networking is GKE Dataplane V2's.
    let mut v1 = multi_network_cluster("legacy");
    v1["cluster"]["networkConfig"]["datapathProvider"] = json!("LEGACY_DATAPATH");
    let message = refused(ep, "POST", &format!("{}/clusters", parent(REGION)), Some(v1), 400, "INVALID_ARGUMENT");
    assert!(message.contains("ADVANCED_DATAPATH"), "{message}");

    wait(ep, REGION, &ok(ep, "POST", &format!("{}/clusters", parent(REGION)), Some(multi_network_cluster("train"))));
    let pools = format!("{}/nodePools", cluster_path(REGION, "train"));
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = gpu_pool("gpu", 2);
        change(&mut body["nodePool"]);
        body
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&|p| p["placementPolicy"]["policyName"] = json!("nowhere")), "nowhere"),
        (with(&|p| p["locations"] = json!(["us-central1-a", "us-central1-b"])), "single zone"),
        (with(&|p| p["locations"] = json!(["europe-west4-a"])), "europe-west4-a"),
        (with(&|p| p["networkConfig"]["additionalNodeNetworkConfigs"][0]["network"] = json!("gpu-9")), "gpu-9"),
        (with(&|p| p["networkConfig"]["additionalNodeNetworkConfigs"][0]["subnetwork"] = json!("gpu-9")), "gpu-9"),
        (with(&|p| p["networkConfig"]["additionalNodeNetworkConfigs"][0]["subnetwork"] = json!("gpu-1")), "belongs to network gpu-1"),
        (with(&|p| p["name"] = json!("GPU_pool")), "GPU_pool"),
        (with(&|p| p["name"] = json!("a".repeat(41))), "40"),
        (with(&|p| p["initialNodeCount"] = json!(-1)), "initialNodeCount"),
        (with(&|p| p["autoscaling"] = json!({"enabled": true, "minNodeCount": 4, "maxNodeCount": 2})), "minNodeCount"),
        (with(&|p| p["version"] = json!("1.34")), "newer"),
    ];
    for (body, says) in cases {
        let message = refused(ep, "POST", &pools, Some(body.clone()), 400, "INVALID_ARGUMENT");
        assert!(message.contains(says), "{body}: {message}");
    }
    let inventory = harness::admin(ep, "GET", "inventory", None);
    assert_eq!(
        inventory["resources"]["container"]["nodePools"].as_array().unwrap().len(),
        2,
        "only the two clusters' first pools: {inventory}"
    );

    // What is missing is NOT_FOUND; a name taken is ALREADY_EXISTS.
    refused(ep, "POST", &format!("{}/nodePools", cluster_path(REGION, "nope")), Some(gpu_pool("gpu", 1)), 404, "NOT_FOUND");
    refused(ep, "GET", &cluster_path(REGION, "nope"), None, 404, "NOT_FOUND");
    refused(ep, "GET", &format!("{pools}/nope"), None, 404, "NOT_FOUND");
    refused(ep, "POST", &format!("{pools}/nope:setSize"), Some(json!({"nodeCount": 1})), 404, "NOT_FOUND");
    refused(ep, "GET", &format!("{}/operations/operation-1-deadbeef", parent(REGION)), None, 404, "NOT_FOUND");
    wait(ep, REGION, &ok(ep, "POST", &pools, Some(gpu_pool("gpu", 1))));
    refused(ep, "POST", &pools, Some(gpu_pool("gpu", 1)), 409, "ALREADY_EXISTS");
    refused(ep, "POST", &format!("{pools}/gpu:setSize"), Some(json!({"nodeCount": -1})), 400, "INVALID_ARGUMENT");
    refused(ep, "PUT", &format!("{pools}/gpu"), Some(json!({"imageType": "WINDOWS_95"})), 400, "INVALID_ARGUMENT");
}

#[test]
fn container_faults_behave_as_the_admin_api_says() {
    let ep = &harness::start_gcp();
    fabric(ep);
    wait(ep, REGION, &ok(ep, "POST", &format!("{}/clusters", parent(REGION)), Some(multi_network_cluster("train"))));
    let pools = format!("{}/nodePools", cluster_path(REGION, "train"));
    let fault = |operation: &str, kind: &str| {
        harness::admin(ep, "POST", "faults", Some(json!({"service": "container", "operation": operation, "kind": kind, "times": 1})));
    };

    // An operation error: accepted, then DONE with a google.rpc.Status, and nothing made.
    fault("nodePools.create", "operation_error");
    let op = ok(ep, "POST", &pools, Some(gpu_pool("gpu", 2)));
    let done = wait(ep, REGION, &op);
    assert_eq!(done["error"]["code"], 13, "{done}");
    assert_eq!(done["statusMessage"], done["error"]["message"]);
    refused(ep, "GET", &format!("{pools}/gpu"), None, 404, "NOT_FOUND");
    // No capacity: the create's operation fails with GCE_STOCKOUT naming the zone.
    fault("nodePools.create", "capacity");
    let done = wait(ep, REGION, &ok(ep, "POST", &pools, Some(gpu_pool("gpu", 2))));
    assert_eq!(done["error"]["code"], 8, "{done}");
    assert!(done["error"]["message"].as_str().unwrap().contains(ZONE), "{done}");
    refused(ep, "GET", &format!("{pools}/gpu"), None, 404, "NOT_FOUND");

    wait(ep, REGION, &ok(ep, "POST", &pools, Some(gpu_pool("gpu", 2))));
    let group = ok(ep, "GET", &format!("{pools}/gpu"), None)["instanceGroupUrls"][0].as_str().unwrap().to_owned();
    fault("nodePools.get", "throttle");
    refused(ep, "GET", &format!("{pools}/gpu"), None, 429, "RESOURCE_EXHAUSTED");
    fault("nodePools.setSize", "server_error");
    refused(ep, "POST", &format!("{pools}/gpu:setSize"), Some(json!({"nodeCount": 4})), 503, "UNAVAILABLE");
    assert_eq!(target_size(ep, &group), 2, "a 503 changes nothing");
    // A lost answer: the resize happened, the caller only heard 503.
    fault("nodePools.setSize", "answer_lost");
    refused(ep, "POST", &format!("{pools}/gpu:setSize"), Some(json!({"nodeCount": 4})), 503, "UNAVAILABLE");
    assert_eq!(target_size(ep, &group), 4);
    // Nobody polls the lost operation: it ends by time alone.
    std::thread::sleep(Duration::from_secs_f64(hpc_emulators::gke::UNWATCHED_SECONDS + 0.1));
    fault("operations.get", "server_error");
    let op = ok(ep, "POST", &format!("{pools}/gpu:setSize"), Some(json!({"nodeCount": 3})));
    let path = format!("{}/operations/{}", parent(REGION), op["name"].as_str().unwrap());
    refused(ep, "GET", &path, None, 503, "UNAVAILABLE");
    wait(ep, REGION, &op);
    fault("clusters.get", "not_found");
    refused(ep, "GET", &cluster_path(REGION, "train"), None, 404, "NOT_FOUND");
    assert_eq!(ok(ep, "GET", &cluster_path(REGION, "train"), None)["status"], "RUNNING");
    let counters = harness::admin(ep, "GET", "counters", None);
    assert_eq!(counters["counters"]["container:nodePools.create"], 3, "{counters}");
    assert!(counters["counters"]["container:operations.get"].as_u64().unwrap() >= 4, "{counters}");

    // An out-of-band delete of the pool takes its groups with it.
    harness::admin(
        ep,
        "POST",
        "out-of-band",
        Some(json!({"action": "delete", "id": format!("projects/{P}/locations/{REGION}/clusters/train/nodePools/gpu")})),
    );
    refused(ep, "GET", &format!("{pools}/gpu"), None, 404, "NOT_FOUND");
    assert_eq!(call(ep, "GET", &local(&group), None).0, 404);
    harness::admin(ep, "POST", "reset", None);
    assert_eq!(harness::admin(ep, "GET", "inventory", None)["resources"]["container"], json!({"clusters": [], "nodePools": []}));
}

/// GKE's and Managed Lustre's operations share a path template; each is answered (and judged) as its own.
#[test]
fn lustre_and_gke_operations_live_side_by_side() {
    let ep = &harness::start_gcp();
    fabric(ep);
    let gke = ok(ep, "POST", &format!("{}/clusters", parent(ZONE)), Some(json!({"cluster": {"name": "c", "initialNodeCount": 1}})));
    let lustre = ok(
        ep,
        "POST",
        &format!("{}/instances?instanceId=scratch", parent(ZONE)),
        Some(json!({"capacityGib": "18000", "perUnitStorageThroughput": "1000", "filesystem": "scratch",
                    "network": format!("projects/{P}/global/networks/vpc")})),
    );
    let lustre_op = lustre["name"].as_str().unwrap();
    assert!(lustre_op.starts_with(&format!("projects/{P}/locations/{ZONE}/operations/")), "{lustre}");
    std::thread::sleep(Duration::from_millis(350));
    let done = ok(ep, "GET", &format!("/v1/{lustre_op}"), None);
    assert_eq!(done["done"], true, "{done}");
    assert_eq!(wait(ep, ZONE, &gke)["operationType"], "CREATE_CLUSTER");
}
