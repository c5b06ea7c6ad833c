//! The Google Cloud resources through the provider's own Resource implementations against the project's
//! GCP emulator: an existing host network joined by self link and partial path (no false drift), capacity
//! options on the nodes, capacity and rate-limit errors, import ids; day 2 (health and self-check verdicts
//! read with the one list, repairs by replacement and by reboot, a rolling image change, the backend's
//! remove_nodes and reboot_nodes leaving other nodes alone).
//!
//! The behaviours every cloud keeps (create, grow, shrink, drift, import, ownership, capacity policies, repair,
//! rolling updates, destroy) are in `contract.rs`; this file keeps what only Google Cloud has.

use std::sync::Arc;

use hpc_emulators::harness::{admin, start_gcp};
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;

fn context(endpoint: &str) -> Context {
    let provider = json!({"gcp": {"project": "ml-prod", "endpoint": endpoint}});
    let config = decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&config, "test"))))
}

fn value(resource: &dyn Resource, json: Json) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).unwrap()
}

/// Plans and applies as the CLI would: the planned value, the new state and the diagnostics.
async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Value, Vec<String>) {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    (planned, out.new_state, diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect())
}

/// A GET on the emulator's Compute API.
fn get(endpoint: &str, path: &str) -> Json {
    get_at(endpoint, &format!("/compute/v1/projects/ml-prod/{path}"))
}

/// A GET of any path on the emulator.
fn get_at(endpoint: &str, path: &str) -> Json {
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer t\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap()
}

fn post(endpoint: &str, path: &str, body: Json) {
    post_at(endpoint, &format!("/compute/v1/projects/ml-prod/{path}"), body);
}

/// A POST of any path on the emulator, answered 200.
fn post_at(endpoint: &str, path: &str, body: Json) {
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(host).unwrap();
    let body = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200"), "{out}");
}

const FABRIC_REF: fn() -> Json = || {
    json!({"id": "gcp/us-central1-a/est", "name": "est", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
           "instance_type": "a3-highgpu-8g", "placement": "cluster"})
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_host_network_by_self_link_spot_nodes_and_a_capacity_error() {
    let ep = start_gcp();
    let ctx = context(&ep);
    // The estate's own network, made outside this provider.
    post(&ep, "global/networks", json!({"name": "corp-vpc", "autoCreateSubnetworks": false, "mtu": 8896}));
    post(
        &ep,
        "regions/us-central1/subnetworks",
        json!({"name": "corp-gpu", "network": "projects/ml-prod/global/networks/corp-vpc", "ipCidrRange": "10.8.0.0/20", "region": "us-central1"}),
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let self_link = "https://www.googleapis.com/compute/v1/projects/ml-prod/global/networks/corp-vpc";
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "est", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g",
               "vpc_id": self_link, "subnet_id": "projects/ml-prod/regions/us-central1/subnetworks/corp-gpu", "max_distance": 2}),
    );
    let (_, fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    // The references stay exactly as written: the re-plan sees no change.
    assert_eq!(fabric.get("vpc_id").as_str(), Some(self_link));
    let mut d = Diagnostics::new();
    let replan =
        GpuFabric.plan(&ctx, PlanRequest { prior: &fabric, proposed: &fabric_config, config: &fabric_config, prior_private: &[] }, &mut d);
    assert_eq!(replan.planned, fabric, "no false drift");
    assert!(replan.requires_replace.is_empty());
    // A3 High: 4 GPU VPCs; no host VPC of ours; the policy with its max distance.
    let networks = get(&ep, "global/networks");
    let names: Vec<&str> = networks["items"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["corp-vpc", "est-gpu-0", "est-gpu-1", "est-gpu-2", "est-gpu-3"]);
    // maxDistance exists in Compute Engine's beta API only: the policy was made there, and v1 shows none.
    let policy = get_at(&ep, "/compute/beta/projects/ml-prod/regions/us-central1/resourcePolicies/est-placement");
    assert_eq!(policy["groupPlacementPolicy"]["maxDistance"], 2, "{policy}");
    assert_eq!(policy["status"], "READY");
    let v1 = get(&ep, "regions/us-central1/resourcePolicies/est-placement");
    assert!(v1["groupPlacementPolicy"].get("maxDistance").is_none(), "{v1}");

    // Spot nodes join the estate's network on nic0.
    let config = value(
        &GpuCluster,
        json!({"name": "spot", "fabric": FABRIC_REF(), "node_count": 2, "capacity_type": "spot", "ssh_public_key": "ssh-ed25519 AAAA ml@x",
               "user_data": "#!/bin/sh\necho hi\n", "tags": {"team": "ml"}}),
    );
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    let node = get(&ep, "zones/us-central1-a/instances/spot-0");
    assert!(node["networkInterfaces"][0]["network"].as_str().unwrap().ends_with("/global/networks/corp-vpc"), "{node}");
    assert_eq!(node["networkInterfaces"].as_array().unwrap().len(), 5);
    assert_eq!(node["scheduling"]["provisioningModel"], "SPOT");
    assert_eq!(node["scheduling"]["instanceTerminationAction"], "DELETE");
    assert_eq!(node["reservationAffinity"]["consumeReservationType"], "NO_RESERVATION");
    assert_eq!(node["labels"]["team"], "ml");
    // Import gives back exactly the created state.
    let mut d = Diagnostics::new();
    let imported = GpuCluster.import(&ctx, "gcp/us-central1-a/spot", &mut d).await.unwrap();
    let imported = match GpuCluster.read(&ctx, &imported, &[], &mut d).await {
        hpc_provider::framework::ReadOutcome::Found { state, .. } => state,
        _ => panic!("gone"),
    };
    assert_eq!(imported, cluster);
    let imported_fabric = GpuFabric.import(&ctx, "gcp/us-central1-a/est", &mut d).await.unwrap();
    assert_eq!(imported_fabric.get("vpc_id"), fabric.get("vpc_id"));

    // No capacity in the zone: the diagnostic names the zone and the machine type, and nothing is lost.
    admin(&ep, "POST", "faults", Some(json!({"service": "compute", "operation": "instances.bulkInsert", "kind": "capacity", "times": 1})));
    let more = value(&GpuCluster, json!({"name": "more", "fabric": FABRIC_REF(), "node_count": 3}));
    let (_, state, diags) = apply(&ctx, &GpuCluster, &Value::Null, &more).await;
    // One capacity diagnostic (the shared layer's), naming the zone, the machine type and Compute Engine's code.
    let failure =
        diags.iter().find(|d| d.starts_with("Not enough a3-highgpu-8g capacity in us-central1-a")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("3 x a3-highgpu-8g in us-central1-a") && failure.contains("ZONE_RESOURCE_POOL_EXHAUSTED"), "{failure}");
    assert_eq!(state.get("node_count"), &Value::int(0));

    // Rate limits are retried (403 rateLimitExceeded twice), then the list succeeds.
    admin(&ep, "POST", "faults", Some(json!({"service": "compute", "operation": "instances.list", "kind": "throttle", "times": 2})));
    let mut d = Diagnostics::new();
    assert!(matches!(GpuCluster.read(&ctx, &cluster, &[], &mut d).await, hpc_provider::framework::ReadOutcome::Found { .. }));
    assert!(!d.has_errors(), "{:?}", d.iter().collect::<Vec<_>>());

    // A tag change reaches the nodes that exist (setLabels with their fingerprints).
    let mut relabelled = config.as_map().unwrap().clone();
    relabelled.insert("tags".into(), Value::Map([("team".to_owned(), Value::from("research"))].into()));
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &cluster, &Value::Map(relabelled)).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    for n in ["spot-0", "spot-1"] {
        assert_eq!(get(&ep, &format!("zones/us-central1-a/instances/{n}"))["labels"]["team"], "research");
    }

    // A node stopped outside is unhealthy (status TERMINATED), not missing; the repair makes it again under
    // its own name.
    let stopped = json!({"action": "stop_instance", "id": "projects/ml-prod/zones/us-central1-a/instances/spot-1"});
    admin(&ep, "POST", "out-of-band", Some(stopped));
    let mut d = Diagnostics::new();
    let refreshed = match GpuCluster.read(&ctx, &cluster, &[], &mut d).await {
        hpc_provider::framework::ReadOutcome::Found { state, .. } => state,
        _ => panic!("gone"),
    };
    assert_eq!(refreshed.get("node_names"), &Value::list([Value::from("spot-0"), Value::from("spot-1")]));
    assert_eq!(refreshed.get("unhealthy_nodes").get("spot-1").as_str(), Some("status TERMINATED"));
    let current = value(
        &GpuCluster,
        json!({"name": "spot", "fabric": FABRIC_REF(), "node_count": 2, "capacity_type": "spot", "ssh_public_key": "ssh-ed25519 AAAA ml@x",
               "user_data": "#!/bin/sh\necho hi\n", "tags": {"team": "research"}}),
    );
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &refreshed, &current).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(get(&ep, "zones/us-central1-a/instances/spot-1")["status"], "RUNNING");

    // Teardown leaves the estate's network and nothing of ours.
    let mut d = Diagnostics::new();
    for (r, s) in [(&GpuCluster as &dyn Resource, &cluster), (&GpuFabric, &fabric)] {
        let out = r.apply(&ctx, ApplyRequest { prior: s, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
        assert!(out.new_state.is_null(), "{:?}", d.iter().collect::<Vec<_>>());
    }
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["resources"]["compute"]["networks"], json!(["projects/ml-prod/global/networks/corp-vpc"]), "{inv}");
    assert_eq!(inv["resources"]["compute"]["instances"], json!([]), "{inv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_lustre_through_private_service_access_by_project_number() {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let ep = start_gcp();
    let ctx = context(&ep);
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "lfab", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g",
               "cidr_block": "10.20.0.0/16"}),
    );
    let (_, fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let fabric_ref = json!({"id": "gcp/us-central1-a/lfab", "name": "lfab", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                            "instance_type": "a3-highgpu-8g", "placement": "cluster"});
    let fs_config = |name: &str| {
        value(
            &ParallelFilesystem,
            json!({"name": name, "fabric": fabric_ref, "capacity_gib": 18000, "throughput_per_tib": 500, "data_repository": "gs://ml-datasets/tokenized"}),
        )
    };
    let (_, fs, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config("lfs")).await;
    assert!(diags.is_empty(), "{diags:?}");
    // Service Networking names the network by the project's number (Cloud Resource Manager's answer).
    let number = get_at(&ep, "/v3/projects/ml-prod")["name"].as_str().unwrap().trim_start_matches("projects/").to_owned();
    let snapshot = admin(&ep, "GET", "snapshot", None);
    let network = format!("projects/{number}/global/networks/lfab-vpc");
    assert_eq!(snapshot["servicenetworking"][&network]["reservedPeeringRanges"], json!(["lfs-psa"]), "{}", snapshot["servicenetworking"]);
    // Managed Lustre keeps the project id, and imports from a path that ends with '/'.
    let instance = &snapshot["lustre"]["projects/ml-prod/locations/us-central1-a/instances/lfs"];
    assert_eq!(instance["network"], "projects/ml-prod/global/networks/lfab-vpc");
    assert_eq!(instance["_imported_from"], "gs://ml-datasets/tokenized/");

    // A connection change that fails in its operation is an error that says why.
    admin(
        &ep,
        "POST",
        "faults",
        Some(json!({"service": "servicenetworking", "operation": "connections.write", "kind": "capacity", "times": 1})),
    );
    let (_, failed, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config("lfs2")).await;
    assert!(diags.iter().any(|d| d.contains("Allocated IP range exhausted")), "{diags:?}");

    // Destroy: the last range leaves with deleteConnection; nothing of the filesystem stays.
    let mut d = Diagnostics::new();
    for (r, s) in [(&ParallelFilesystem as &dyn Resource, &failed), (&ParallelFilesystem, &fs), (&GpuFabric, &fabric)] {
        if s.is_null() {
            continue;
        }
        let out = r.apply(&ctx, ApplyRequest { prior: s, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
        assert!(out.new_state.is_null(), "{:?}", d.iter().collect::<Vec<_>>());
    }
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// A Lustre fabric and the configuration of filesystem `name` on it: (fabric state, config maker).
async fn lustre_fabric(ctx: &Context, name: &str) -> (Value, impl Fn(&str) -> Value) {
    let fabric_config = value(
        &GpuFabric,
        json!({"name": name, "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g",
               "cidr_block": "10.20.0.0/16"}),
    );
    let (_, fabric, diags) = apply(ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let name = name.to_owned();
    (fabric, move |fs: &str| lustre_config(&name, fs))
}

/// The configuration of filesystem `fs` on the Lustre fabric `fabric` (in us-central1-a).
fn lustre_config(fabric: &str, fs: &str) -> Value {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let fabric_ref = json!({"id": format!("gcp/us-central1-a/{fabric}"), "name": fabric, "cloud": "gcp", "region": "us-central1",
                            "zone": "us-central1-a", "instance_type": "a3-highgpu-8g", "placement": "cluster"});
    value(&ParallelFilesystem, json!({"name": fs, "fabric": fabric_ref, "capacity_gib": 18000, "throughput_per_tib": 500}))
}

async fn destroy_all(ctx: &Context, states: &[(&dyn Resource, &Value)]) {
    let mut d = Diagnostics::new();
    for (r, s) in states {
        let out = r.apply(ctx, ApplyRequest { prior: s, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
        assert!(out.new_state.is_null(), "{:?}", d.iter().collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lustre_create_whose_answer_was_lost_is_retried_under_its_request_id_and_made_once() {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let ep = start_gcp();
    let ctx = context(&ep);
    let (fabric, fs_config) = lustre_fabric(&ctx, "rfab").await;
    // The service makes the instance, but its answer is lost: the provider asks again.
    admin(&ep, "POST", "faults", Some(json!({"service": "lustre", "operation": "instances.create", "kind": "answer_lost", "times": 1})));
    let (_, fs, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config("rfs")).await;
    assert!(diags.is_empty(), "the retry is answered with the first create's operation, not ALREADY_EXISTS: {diags:?}");
    let instances = admin(&ep, "GET", "snapshot", None)["lustre"].as_object().cloned().unwrap_or_default();
    assert_eq!(instances.keys().filter(|k| k.contains("/instances/")).count(), 1, "{instances:?}");
    destroy_all(&ctx, &[(&ParallelFilesystem, &fs), (&GpuFabric, &fabric)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_filesystems_on_one_network_made_at_once_both_keep_their_private_service_access_ranges() {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let ep = start_gcp();
    let ctx = context(&ep);
    let (fabric, fs_config) = lustre_fabric(&ctx, "pfab").await;
    // Service Networking's connection has no etag: two edits of it at once must not drop each other's range.
    let (a, b) = (fs_config("pfa"), fs_config("pfb"));
    let ((_, fa, da), (_, fb, db)) =
        tokio::join!(apply(&ctx, &ParallelFilesystem, &Value::Null, &a), apply(&ctx, &ParallelFilesystem, &Value::Null, &b));
    assert!(da.is_empty() && db.is_empty(), "{da:?} {db:?}");
    let number = get_at(&ep, "/v3/projects/ml-prod")["name"].as_str().unwrap().trim_start_matches("projects/").to_owned();
    let network = format!("projects/{number}/global/networks/pfab-vpc");
    let snapshot = admin(&ep, "GET", "snapshot", None);
    let mut ranges: Vec<String> = serde_json::from_value(snapshot["servicenetworking"][&network]["reservedPeeringRanges"].clone()).unwrap();
    ranges.sort();
    assert_eq!(ranges, ["pfa-psa", "pfb-psa"], "{}", snapshot["servicenetworking"]);
    destroy_all(&ctx, &[(&ParallelFilesystem, &fa), (&ParallelFilesystem, &fb), (&GpuFabric, &fabric)]).await;
}

/// The reserved ranges on `network`'s private service access connection, sorted.
fn connection_ranges(ep: &str, network: &str) -> Vec<String> {
    let snapshot = admin(ep, "GET", "snapshot", None);
    let mut ranges: Vec<String> =
        serde_json::from_value(snapshot["servicenetworking"][network]["reservedPeeringRanges"].clone()).unwrap_or_default();
    ranges.sort();
    ranges
}

/// Runs `jobs` at once, each in a provider process of its own (this test binary running [`psa_child`]), as
/// two Terraform states applying at the same time would: the state each ends with, in order.
fn in_processes(jobs: &[Json]) -> Vec<Value> {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<std::process::Child> = jobs
        .iter()
        .map(|job| {
            std::process::Command::new(&exe)
                .args(["psa_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
                .env("HPC_PSA_CHILD_JOB", job.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ty = ParallelFilesystem.schema().value_type();
    children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "a provider process failed:\n{stdout}\n{stderr}");
            let state =
                stdout.lines().find_map(|l| l.split_once("state: ").map(|(_, s)| s)).unwrap_or_else(|| panic!("no state in:\n{stdout}"));
            decode_json(state.as_bytes(), &ty).unwrap()
        })
        .collect()
}

/// One provider process's part in the two-process tests below, run only as their child: the job in
/// `HPC_PSA_CHILD_JOB` is `{"endpoint", "fabric", "create": <filesystem>}` or `{"endpoint", "destroy":
/// <state>}`; the state it ends with is printed after `state: `.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the two-process tests below"]
async fn psa_child() {
    use hpc_provider::framework::codec::encode_json;
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let Ok(job) = std::env::var("HPC_PSA_CHILD_JOB") else { return };
    let job: Json = serde_json::from_str(&job).unwrap();
    let ctx = context(job["endpoint"].as_str().unwrap());
    let ty = ParallelFilesystem.schema().value_type();
    let state = match (job["create"].as_str(), job.get("destroy")) {
        (Some(fs), _) => {
            let (_, state, diags) =
                apply(&ctx, &ParallelFilesystem, &Value::Null, &lustre_config(job["fabric"].as_str().unwrap(), fs)).await;
            assert!(diags.is_empty(), "{diags:?}");
            state
        }
        (None, Some(prior)) => {
            let prior = decode_json(prior.to_string().as_bytes(), &ty).unwrap();
            let mut d = Diagnostics::new();
            let req = ApplyRequest { prior: &prior, planned: &Value::Null, config: &Value::Null, private: &[] };
            let out = ParallelFilesystem.apply(&ctx, req, &mut d).await;
            assert!(d.is_empty(), "{:?}", d.iter().collect::<Vec<_>>());
            out.new_state
        }
        _ => panic!("a job creates or destroys: {job}"),
    };
    println!("\nstate: {}", String::from_utf8(encode_json(&state, &ty).unwrap()).unwrap());
}

/// A Lustre fabric (`name`) whose host network's private service access connection already holds another
/// service's range (`sql-psa`, a database's, say): the fabric's state and the network as Service Networking
/// names it.
async fn shared_connection(ctx: &Context, ep: &str, name: &str) -> (Value, String) {
    let (fabric, _) = lustre_fabric(ctx, name).await;
    let number = get_at(ep, "/v3/projects/ml-prod")["name"].as_str().unwrap().trim_start_matches("projects/").to_owned();
    let network = format!("projects/{number}/global/networks/{name}-vpc");
    post_at(
        ep,
        "/v1/services/servicenetworking.googleapis.com/connections",
        json!({"network": network, "reservedPeeringRanges": ["sql-psa"]}),
    );
    (fabric, network)
}

/// The next writes to the connection are held, in the order they come, `held[0]` ms, `held[1]` ms, ...;
/// those after land at once. Two writers starting at once both read the ranges before either write lands, so
/// the list that lands last was made without the other's change, and the other has read its change back by
/// then.
fn hold_writes(ep: &str, held: &[u64]) {
    admin(ep, "DELETE", "faults", None);
    for ms in held {
        let rule =
            json!({"service": "servicenetworking", "operation": "connections.write", "kind": "latency", "latency_ms": ms, "times": 1});
        admin(ep, "POST", "faults", Some(rule));
    }
}

/// Two Terraform states, so two provider processes, each add a filesystem's range to one network's private
/// service access connection at once. A patch has no etag and a process's lock does not reach another
/// process: the list that lands second was read before the first landed. An addition is sent without
/// `force`, so Service Networking refuses a list that would drop a range; the refused writer must make its
/// change again from a fresh read instead of failing its apply. Both filesystems are made, both ranges are
/// on the connection, and another service's range stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_provider_processes_adding_ranges_to_one_connection_at_once_both_succeed() {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let ep = start_gcp();
    let ctx = context(&ep);
    let (fabric, network) = shared_connection(&ctx, &ep, "xfab").await;
    let started = std::time::Instant::now();
    hold_writes(&ep, &[1500]);
    let made = in_processes(&[
        json!({"endpoint": ep, "fabric": "xfab", "create": "xa"}),
        json!({"endpoint": ep, "fabric": "xfab", "create": "xb"}),
    ]);
    eprintln!("two provider processes: {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(connection_ranges(&ep, &network), ["sql-psa", "xa-psa", "xb-psa"]);
    destroy_all(&ctx, &[(&ParallelFilesystem, &made[0]), (&ParallelFilesystem, &made[1]), (&GpuFabric, &fabric)]).await;
    assert_eq!(connection_ranges(&ep, &network), ["sql-psa"], "the other service's range outlives the filesystems");
}

/// One provider process destroys a filesystem while another makes one on the same network, both editing the
/// connection at once. Taking a range off needs `force`, so a list read before the other writer's range
/// landed drops that range when it lands last; the list that adds a range, read before the destroyed one was
/// taken off, brings that one back when it lands last. Either way both applies succeed. Two rounds: in the
/// first the second write to come lands last, in the second the first, so each writer's list lands last
/// once (whichever process writes first). The new filesystem's range must be on the connection at the end,
/// the destroyed one's gone, every other range kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroy_and_a_create_in_two_provider_processes_at_once_lose_no_range() {
    use hpc_provider::framework::codec::encode_json;
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let ep = start_gcp();
    let ctx = context(&ep);
    let (fabric, network) = shared_connection(&ctx, &ep, "yfab").await;
    let (_, ya, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &lustre_config("yfab", "ya")).await;
    assert!(diags.is_empty(), "{diags:?}");
    let (_, yb, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &lustre_config("yfab", "yb")).await;
    assert!(diags.is_empty(), "{diags:?}");
    let ty = ParallelFilesystem.schema().value_type();
    let as_json = |state: &Value| serde_json::from_slice::<Json>(&encode_json(state, &ty).unwrap()).unwrap();
    let started = std::time::Instant::now();
    let mut made = Vec::new();
    for (gone, new, held, kept) in
        [(&ya, "yc", &[1500, 3000][..], ["sql-psa", "yb-psa", "yc-psa"]), (&yb, "yd", &[3000][..], ["sql-psa", "yc-psa", "yd-psa"])]
    {
        hold_writes(&ep, held);
        let done =
            in_processes(&[json!({"endpoint": ep, "destroy": as_json(gone)}), json!({"endpoint": ep, "fabric": "yfab", "create": new})]);
        assert!(done[0].is_null());
        assert_eq!(connection_ranges(&ep, &network), kept, "destroying one filesystem while {new} is made");
        made.push(done[1].clone());
    }
    eprintln!("two rounds of two provider processes: {:.1} s", started.elapsed().as_secs_f64());
    destroy_all(&ctx, &[(&ParallelFilesystem, &made[0]), (&ParallelFilesystem, &made[1]), (&GpuFabric, &fabric)]).await;
    assert_eq!(connection_ranges(&ep, &network), ["sql-psa"], "the other service's range outlives the filesystems");
}

#[tokio::test]
async fn default_tags_that_cannot_be_google_labels_are_refused_at_plan() {
    let provider = json!({"default_tags": {"CostCenter": "ML-42"}, "gcp": {"project": "ml-prod", "endpoint": "http://127.0.0.1:9"}});
    let config = decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&config, "test"))));
    let fabric = value(
        &GpuFabric,
        json!({"name": "lbl", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g",
               "cidr_block": "10.20.0.0/16"}),
    );
    let mut diags = Diagnostics::new();
    GpuFabric.plan(&ctx, PlanRequest { prior: &Value::Null, proposed: &fabric, config: &fabric, prior_private: &[] }, &mut diags);
    let found: Vec<String> = diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect();
    assert!(
        found.iter().any(|d| d.contains("Invalid Google Cloud label") && d.contains("default_tags") && d.contains("CostCenter")),
        "{found:?}"
    );
}

/// A refresh as the CLI asks for one: the state found.
async fn read(ctx: &Context, resource: &dyn Resource, state: &Value) -> Value {
    let mut d = Diagnostics::new();
    match resource.read(ctx, state, &[], &mut d).await {
        hpc_provider::framework::ReadOutcome::Found { state, .. } => state,
        _ => panic!("gone: {:?}", d.iter().collect::<Vec<_>>()),
    }
}

/// Each node of a cluster as the emulator has it: name -> (its resource policy, its sub-block).
fn placed(ep: &str) -> std::collections::BTreeMap<String, (String, String)> {
    let nodes = get(ep, "zones/us-central1-a/instances");
    nodes["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|n| {
            let policy = n["resourcePolicies"][0].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_owned();
            let subblock = n["resourceStatus"]["physicalHostTopology"]["subblock"].as_str().unwrap_or_default().to_owned();
            (n["name"].as_str().unwrap().to_owned(), (policy, subblock))
        })
        .collect()
}

/// The domain policies that exist: name -> gpuTopology.
fn domain_policies(ep: &str) -> Vec<(String, String)> {
    let list = get(ep, "regions/us-central1/resourcePolicies");
    list["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p["groupPlacementPolicy"]["gpuTopology"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Every node `gb-<i>` in its NVLink domain's policy `gb-nvl<i/18>` and that domain's sub-block.
fn assert_in_domains(ep: &str, count: u32) {
    let found = placed(ep);
    let expected: std::collections::BTreeMap<String, (String, String)> =
        (0..count).map(|i| (format!("gb-{i}"), (format!("gb-nvl{}", i / 18), format!("gb-nvl{}-sb", i / 18)))).collect();
    assert_eq!(found, expected);
}

fn piece<'a>(state: &'a Value, kind: &str, name: &str) -> &'a Value {
    let pieces = state.get("expansion").as_list().unwrap();
    pieces
        .iter()
        .find(|p| p.get("kind").as_str() == Some(kind) && p.get("name").as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a4x_cluster_puts_each_nvlink_domain_in_a_policy_of_its_own() {
    let ep = start_gcp();
    let ctx = context(&ep);
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "gbf", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a4x-highgpu-4g",
               "cidr_block": "10.30.0.0/16", "placement": "cluster"}),
    );
    let (_, fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    // The fabric: 4 RDMA subnets for 4 MRDMA NICs, and no compact policy of its own (its clusters make them).
    let subnets = get(&ep, "regions/us-central1/subnetworks");
    let rdma = subnets["items"].as_array().unwrap().iter().filter(|s| s["name"].as_str().unwrap().starts_with("gbf-rdma-")).count();
    assert_eq!(rdma, 4);
    assert_eq!(domain_policies(&ep), []);

    let fabric_ref = json!({"id": "gcp/us-central1-a/gbf", "name": "gbf", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                            "instance_type": "a4x-highgpu-4g", "placement": "cluster"});
    let config = |nodes: u32| {
        value(
            &GpuCluster,
            json!({"name": "gb", "fabric": fabric_ref, "node_count": nodes, "capacity_type": "reservation", "reservation_id": "gb200-res",
                   "image": "projects/ml-prod/global/images/gb200-arm64"}),
        )
    };
    // Two domains: a policy each (gpuTopology 1x72), each domain's 18 nodes in theirs, bound to the reservation.
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config(36)).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(domain_policies(&ep), [("gb-nvl0".to_owned(), "1x72".to_owned()), ("gb-nvl1".to_owned(), "1x72".to_owned())]);
    assert_in_domains(&ep, 36);
    let policy = get(&ep, "regions/us-central1/resourcePolicies/gb-nvl1");
    assert_eq!(policy["groupPlacementPolicy"], json!({"collocation": "COLLOCATED", "gpuTopology": "1x72"}));
    let owner = cluster.get("owner").as_str().unwrap().to_owned();
    assert!(policy["description"].as_str().unwrap().ends_with(&format!("owner={owner}")), "{policy}");
    let node = get(&ep, "zones/us-central1-a/instances/gb-20");
    assert_eq!(
        node["reservationAffinity"],
        json!({"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name", "values": ["gb200-res"]})
    );
    let nics: Vec<&str> = node["networkInterfaces"].as_array().unwrap().iter().map(|n| n["nicType"].as_str().unwrap()).collect();
    assert_eq!(nics, ["GVNIC", "GVNIC", "MRDMA", "MRDMA", "MRDMA", "MRDMA"]);
    assert!(node["networkInterfaces"][5]["subnetwork"].as_str().unwrap().ends_with("/subnetworks/gbf-rdma-3"), "{node}");
    assert_eq!(piece(&cluster, "google_compute_instance", "gb-nvl1").get("settings").get("names").as_str(), Some("gb-18 .. gb-35"));

    // A refresh is one instances.list and one resourcePolicies.list, nothing per node or per domain, and
    // finds nothing to change.
    admin(&ep, "DELETE", "counters", None);
    let refreshed = read(&ctx, &GpuCluster, &cluster).await;
    assert_eq!(admin(&ep, "GET", "counters", None)["counters"], json!({"compute:instances.list": 1, "compute:resourcePolicies.list": 1}));
    assert_eq!(refreshed, cluster);

    // Scale to three domains: the third domain's policy and nodes.
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &refreshed, &config(54)).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(domain_policies(&ep).len(), 3);
    assert_in_domains(&ep, 54);
    admin(&ep, "DELETE", "counters", None);
    assert_eq!(read(&ctx, &GpuCluster, &cluster).await, cluster);
    assert_eq!(admin(&ep, "GET", "counters", None)["counters"], json!({"compute:instances.list": 1, "compute:resourcePolicies.list": 1}));

    // A node lost: its domain is one short, and the repair puts it back into its own domain's policy.
    admin(&ep, "POST", "out-of-band", Some(json!({"action": "delete", "id": "projects/ml-prod/zones/us-central1-a/instances/gb-20"})));
    let refreshed = read(&ctx, &GpuCluster, &cluster).await;
    let short = piece(&refreshed, "google_compute_instance", "gb-nvl1");
    assert_eq!(short.get("count"), &Value::int(17));
    assert_eq!(piece(&refreshed, "google_compute_instance", "gb-nvl0").get("count"), &Value::int(18));
    assert_eq!(refreshed.get("node_count"), &Value::int(53));
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &refreshed, &config(54)).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_in_domains(&ep, 54);
    assert_eq!(read(&ctx, &GpuCluster, &cluster).await, cluster);

    // A domain's policy gone is drift, and apply makes it again.
    admin(
        &ep,
        "POST",
        "out-of-band",
        Some(json!({"action": "delete", "id": "projects/ml-prod/regions/us-central1/resourcePolicies/gb-nvl2"})),
    );
    let refreshed = read(&ctx, &GpuCluster, &cluster).await;
    assert!(piece(&refreshed, "google_compute_resource_policy", "gb-nvl2").get("settings").get("missing").is_present());
    assert!(!piece(&refreshed, "google_compute_resource_policy", "gb-nvl1").get("settings").get("missing").is_present());
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &refreshed, &config(54)).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(domain_policies(&ep).len(), 3);
    assert_eq!(read(&ctx, &GpuCluster, &cluster).await, cluster);

    // Back to two domains: the third's nodes, then its policy.
    let (_, cluster, diags) = apply(&ctx, &GpuCluster, &cluster, &config(36)).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_in_domains(&ep, 36);
    assert_eq!(domain_policies(&ep).len(), 2);
    // Import gives back exactly the state apply made.
    let mut d = Diagnostics::new();
    let imported =
        GpuCluster.import(&ctx, "gcp/us-central1-a/gb", &mut d).await.unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    assert_eq!(read(&ctx, &GpuCluster, &imported).await, cluster);

    // Destroy: the nodes, then the domain policies; a policy made by hand with a domain's name is not ours.
    post(&ep, "regions/us-central1/resourcePolicies", json!({"name": "gb-nvl7", "groupPlacementPolicy": {"collocation": "COLLOCATED"}}));
    let mut d = Diagnostics::new();
    for (r, s) in [(&GpuCluster as &dyn Resource, &cluster), (&GpuFabric, &fabric)] {
        let out = r.apply(&ctx, ApplyRequest { prior: s, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
        assert!(out.new_state.is_null(), "{:?}", d.iter().collect::<Vec<_>>());
    }
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(
        inv["resources"]["compute"]["resourcePolicies"],
        json!(["projects/ml-prod/regions/us-central1/resourcePolicies/gb-nvl7"]),
        "{inv}"
    );
    admin(
        &ep,
        "POST",
        "out-of-band",
        Some(json!({"action": "delete", "id": "projects/ml-prod/regions/us-central1/resourcePolicies/gb-nvl7"})),
    );
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

// ------------------------------------------------------------------------------------------------ day 2

const D2_ZONE: &str = "projects/ml-prod/zones/us-central1-a/instances";

/// Plans and applies as the CLI would, from a refreshed `prior`: the new state, with no error on the way.
async fn apply_ok(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    assert!(!diags.has_errors(), "plan: {:?}", diags.iter().collect::<Vec<_>>());
    let warnings: Vec<String> = diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect();
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    assert!(!diags.has_errors(), "apply: {:?}", diags.iter().collect::<Vec<_>>());
    (out.new_state, warnings)
}

/// What a plan from `prior` proposes, and whether it is empty.
fn replan(ctx: &Context, prior: &Value, config: &Value) -> (Value, bool) {
    let mut d = Diagnostics::new();
    let plan = GpuCluster.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut d);
    assert!(!d.has_errors(), "{:?}", d.iter().collect::<Vec<_>>());
    let same = plan.planned == *prior && plan.requires_replace.is_empty();
    (plan.planned, same)
}

/// A fabric with compact placement and the day-2 cluster `d2` of `nodes` A3 High nodes on it.
async fn d2_cluster(ctx: &Context, nodes: u32, extra: Json) -> (Value, Value, Json) {
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "d2f", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g",
               "cidr_block": "10.40.0.0/16", "placement": "cluster"}),
    );
    let (fabric, _) = apply_ok(ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    let mut config = json!({"name": "d2", "node_count": nodes, "tags": {"team": "ml"},
                            "fabric": {"id": "gcp/us-central1-a/d2f", "name": "d2f", "cloud": "gcp", "region": "us-central1",
                                       "zone": "us-central1-a", "instance_type": "a3-highgpu-8g", "placement": "cluster"}});
    config.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    let (cluster, _) = apply_ok(ctx, &GpuCluster, &Value::Null, &value(&GpuCluster, config.clone())).await;
    (fabric, cluster, config)
}

/// User data carrying the boot-time self-check as `data "hpc_gpu_selfcheck"` opens it, for a cluster that
/// waits for its verdict (the tests publish the verdicts themselves).
fn selfcheck_user_data() -> String {
    format!("#!/bin/bash\n{} (data \"hpc_gpu_selfcheck\").\n", hpc_provider::clouds::user_data::SELFCHECK_MARKER)
}

/// The cluster's nodes as Compute Engine lists them, by name.
fn live(ep: &str) -> std::collections::BTreeMap<String, Json> {
    let list = get(ep, "zones/us-central1-a/instances");
    list["items"].as_array().cloned().unwrap_or_default().into_iter().map(|i| (i["name"].as_str().unwrap().to_owned(), i)).collect()
}

/// Each node's Compute Engine id (a node made again has a new one).
fn ids(ep: &str) -> std::collections::BTreeMap<String, String> {
    live(ep).into_iter().map(|(n, i)| (n, i["id"].as_str().unwrap().to_owned())).collect()
}

/// What the node's boot-time self-check does with its service account: read its labels and their
/// fingerprint, and set them again with its verdict.
fn publish(ep: &str, node: &str, verdict: &str) {
    let i = get(ep, &format!("zones/us-central1-a/instances/{node}"));
    let mut labels = i["labels"].clone();
    labels["hpc-selfcheck"] = json!(verdict);
    post(
        ep,
        &format!("zones/us-central1-a/instances/{node}/setLabels"),
        json!({"labels": labels, "labelFingerprint": i["labelFingerprint"]}),
    );
}

fn impair(ep: &str, node: &str, what: Json) {
    let mut change = json!({"action": "impair", "id": format!("{D2_ZONE}/{node}")});
    change.as_object_mut().unwrap().extend(what.as_object().cloned().unwrap());
    admin(ep, "POST", "out-of-band", Some(change));
}

fn shared_with(v: &Value, name: &str, value: Value) -> Value {
    hpc_provider::clouds::shared::with_attr(v, name, value)
}

fn strings(v: &Value) -> Json {
    serde_json::to_value(v.as_map().map(|m| {
        m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect::<std::collections::BTreeMap<_, _>>()
    }))
    .unwrap()
}

/// Compute Engine's optimistic locking: setLabels replaces every label and carries the labels' fingerprint
/// ("Provide the latest fingerprint value when making a request to add or change labels"). The node's
/// self-check publishing its verdict between the provider's read and its setLabels makes the fingerprint
/// stale: 412 conditionNotMet, and the provider reads the node again and relabels it from what it is now,
/// so the verdict is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verdict_published_between_the_relabels_read_and_write_is_kept() {
    let ep = start_gcp();
    let ctx = context(&ep);
    let (_, cluster, mut config) = d2_cluster(&ctx, 1, json!({})).await;
    // The provider's setLabels is held on the way for 1.5 s, after its read; the node publishes meanwhile.
    admin(
        &ep,
        "POST",
        "faults",
        Some(json!({"service": "compute", "operation": "instances.setLabels", "kind": "latency", "latency_ms": 1500, "times": 1})),
    );
    admin(&ep, "DELETE", "counters", None);
    config["tags"] = json!({"team": "research"});
    let node = async {
        while admin(&ep, "GET", "counters", None)["counters"]["compute:instances.setLabels"].as_u64().unwrap_or(0) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        publish(&ep, "d2-0", "ok");
    };
    let config = value(&GpuCluster, config);
    let ((_, diags), ()) = tokio::join!(apply_ok(&ctx, &GpuCluster, &cluster, &config), node);
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    let labels = &live(&ep)["d2-0"]["labels"];
    assert_eq!(labels["team"], "research");
    assert_eq!(labels["hpc-selfcheck"], "ok", "the verdict written meanwhile is kept: {labels}");
    // The provider's stale write refused, then made again from a second read; the node's own write.
    assert_eq!(admin(&ep, "GET", "counters", None)["counters"]["compute:instances.setLabels"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_self_check_verdicts_of_every_node_come_with_the_one_list() {
    let ep = start_gcp();
    let ctx = context(&ep);
    let (_, cluster, _) = d2_cluster(&ctx, 6, json!({})).await;
    let revision = cluster.get("revision").as_str().unwrap().to_owned();
    // Every node made carries the revision it was made with.
    for (name, node) in live(&ep) {
        assert_eq!(node["labels"]["hpc-revision"], revision.as_str(), "{name}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    impair(&ep, "d2-1", json!({"status": "TERMINATED"}));
    impair(&ep, "d2-2", json!({"maintenance": {"type": "SCHEDULED", "windowStartTime": "2026-12-04T16:00:00.000-08:00"}}));
    publish(&ep, "d2-3", "fail-gpus-7-of-8");
    publish(&ep, "d2-4", "ok");

    admin(&ep, "DELETE", "counters", None);
    let refreshed = read(&ctx, &GpuCluster, &cluster).await;
    assert_eq!(admin(&ep, "GET", "counters", None)["counters"], json!({"compute:instances.list": 1}), "one list, whatever the count");
    assert_eq!(strings(refreshed.get("unhealthy_nodes")), json!({"d2-1": "status TERMINATED", "d2-3": "self-check: 7 of 8 GPUs"}));
    assert_eq!(strings(refreshed.get("scheduled_maintenance")), json!({"d2-2": "upcoming scheduled maintenance from 2026-12-05T00:00Z"}));
    assert_eq!(strings(refreshed.get("selfcheck")), json!({"d2-3": "fail-gpus-7-of-8", "d2-4": "ok"}));
    let all: Json = (0..6).map(|i| (format!("d2-{i}"), json!(revision))).collect::<serde_json::Map<_, _>>().into();
    assert_eq!(strings(refreshed.get("node_revisions")), all);
    // A stopped node is there, unhealthy, not missing.
    assert_eq!(refreshed.get("node_count"), &Value::int(6));

    // Neither label is the user's: an import gives back the tags, not them.
    let mut d = Diagnostics::new();
    let imported =
        GpuCluster.import(&ctx, "gcp/us-central1-a/d2", &mut d).await.unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    let imported = read(&ctx, &GpuCluster, &imported).await;
    assert_eq!(strings(imported.get("tags")), json!({"team": "ml"}));
    for attr in ["unhealthy_nodes", "scheduled_maintenance", "selfcheck", "node_revisions", "revision", "nodes"] {
        assert_eq!(imported.get(attr), refreshed.get(attr), "{attr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_node_is_replaced_under_its_name_in_its_placement_and_reboot_restarts_in_place() {
    let ep = start_gcp();
    let ctx = context(&ep);
    // Maintenance is remade ahead of its window only when asked.
    let (_, cluster, config) = d2_cluster(&ctx, 4, json!({"on_maintenance": "replace"})).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let before = ids(&ep);
    impair(&ep, "d2-2", json!({"maintenance": {"type": "UNSCHEDULED", "windowStartTime": "2026-12-01T10:02:00Z"}}));
    let refreshed = read(&ctx, &GpuCluster, &cluster).await;
    assert_eq!(strings(refreshed.get("scheduled_maintenance")), json!({"d2-2": "upcoming unscheduled maintenance from 2026-12-01T10:02Z"}));

    // Replace (the default): exactly that node is made again, under its name, in the fabric's compact
    // policy, with the cluster's revision; the others keep running untouched.
    admin(&ep, "DELETE", "counters", None);
    let (state, warnings) = apply_ok(&ctx, &GpuCluster, &refreshed, &value(&GpuCluster, config.clone())).await;
    assert!(warnings.iter().any(|w| w.contains("d2-2: upcoming unscheduled maintenance from 2026-12-01T10:02Z")), "{warnings:?}");
    let counters = admin(&ep, "GET", "counters", None)["counters"].clone();
    assert_eq!(
        (counters["compute:instances.delete"].as_u64(), counters["compute:instances.bulkInsert"].as_u64()),
        (Some(1), Some(1)),
        "{counters}"
    );
    let after = ids(&ep);
    for n in ["d2-0", "d2-1", "d2-3"] {
        assert_eq!(after[n], before[n], "{n} untouched");
    }
    assert_ne!(after["d2-2"], before["d2-2"], "d2-2 made again");
    let node = &live(&ep)["d2-2"];
    assert!(node["resourcePolicies"][0].as_str().unwrap().ends_with("/resourcePolicies/d2f-placement"), "{node}");
    assert_eq!(node["labels"]["hpc-revision"], cluster.get("revision").as_str().unwrap());
    assert!(node.get("resourceStatus").is_none_or(|r| r.get("upcomingMaintenance").is_none()), "{node}");
    let refreshed = read(&ctx, &GpuCluster, &state).await;
    assert_eq!(strings(refreshed.get("unhealthy_nodes")), json!({}));
    assert!(replan(&ctx, &refreshed, &value(&GpuCluster, config.clone())).1, "the re-plan is empty");

    // Reboot: a stopped node is started, a running one with a failed self-check reset (its stale verdict
    // taken off), nothing is deleted or made.
    let mut reboot = config.clone();
    reboot["repair"] = json!("reboot");
    reboot["max_repairs"] = json!("2");
    let (state, _) = apply_ok(&ctx, &GpuCluster, &refreshed, &value(&GpuCluster, reboot.clone())).await;
    // The day-2 settings live in the nodes' metadata (an import gives them back), written onto them when
    // they change, the node's other metadata kept.
    for (name, node) in live(&ep) {
        let items = node["metadata"]["items"].as_array().unwrap().clone();
        let day2 = items.iter().find(|m| m["key"] == "hpc-day2").unwrap_or_else(|| panic!("{name}: {items:?}"));
        let settings: Json = serde_json::from_str(day2["value"].as_str().unwrap()).unwrap();
        assert_eq!((settings["repair"].as_str(), settings["max_repairs"].as_str()), (Some("reboot"), Some("2")), "{name}");
        assert!(items.iter().any(|m| m["key"] == "hpc-workload"), "{name}: {items:?}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    impair(&ep, "d2-1", json!({"status": "TERMINATED"}));
    publish(&ep, "d2-3", "fail-rdma-6-of-8");
    let before = ids(&ep);
    let refreshed = read(&ctx, &GpuCluster, &state).await;
    assert_eq!(strings(refreshed.get("unhealthy_nodes")), json!({"d2-1": "status TERMINATED", "d2-3": "self-check: 6 of 8 RDMA devices"}));
    admin(&ep, "DELETE", "counters", None);
    let (state, _) = apply_ok(&ctx, &GpuCluster, &refreshed, &value(&GpuCluster, reboot.clone())).await;
    let counters = admin(&ep, "GET", "counters", None)["counters"].clone();
    assert_eq!(
        (counters["compute:instances.start"].as_u64(), counters["compute:instances.reset"].as_u64()),
        (Some(1), Some(1)),
        "{counters}"
    );
    assert!(counters.get("compute:instances.delete").is_none() && counters.get("compute:instances.bulkInsert").is_none(), "{counters}");
    assert_eq!(ids(&ep), before, "rebooted in place");
    let nodes = live(&ep);
    assert!(nodes.values().all(|n| n["status"] == "RUNNING"), "{nodes:?}");
    assert!(nodes["d2-3"]["labels"].get("hpc-selfcheck").is_none(), "{}", nodes["d2-3"]);
    assert_eq!(nodes["d2-3"]["labels"]["hpc-revision"], cluster.get("revision").as_str().unwrap(), "its own labels kept");
    let refreshed = read(&ctx, &GpuCluster, &state).await;
    assert_eq!(strings(refreshed.get("unhealthy_nodes")), json!({}));
    assert!(replan(&ctx, &refreshed, &value(&GpuCluster, reboot)).1, "the re-plan is empty");

    // A tag change relabels the nodes and keeps their own labels.
    publish(&ep, "d2-0", "ok");
    let mut retag = config.clone();
    retag["tags"] = json!({"team": "research"});
    let refreshed = read(&ctx, &GpuCluster, &refreshed).await;
    apply_ok(&ctx, &GpuCluster, &refreshed, &value(&GpuCluster, retag)).await;
    let node = &live(&ep)["d2-0"];
    assert_eq!((node["labels"]["team"].as_str(), node["labels"]["hpc-selfcheck"].as_str()), (Some("research"), Some("ok")), "{node}");
    assert_eq!(node["labels"]["hpc-revision"], cluster.get("revision").as_str().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_change_rolls_the_nodes_in_batches_with_the_new_revision() {
    let ep = start_gcp();
    let ctx = context(&ep);
    let strategy = json!({"image": "projects/ml-prod/global/images/node-v1", "update_strategy": {"batch_size": "2"}});
    let (_, cluster, mut config) = d2_cluster(&ctx, 4, strategy).await;
    let before = ids(&ep);
    config["image"] = json!("projects/ml-prod/global/images/node-v2");
    let refreshed = read(&ctx, &GpuCluster, &cluster).await;
    let (planned, same) = replan(&ctx, &refreshed, &value(&GpuCluster, config.clone()));
    assert!(!same);
    let new_revision = planned.get("revision").as_str().expect("the revision is known at plan").to_owned();
    assert_ne!(Some(new_revision.as_str()), cluster.get("revision").as_str());
    admin(&ep, "DELETE", "counters", None);
    let (state, warnings) = apply_ok(&ctx, &GpuCluster, &refreshed, &value(&GpuCluster, config.clone())).await;
    assert!(warnings.iter().any(|w| w.contains("batch 1: d2-0, d2-1") && w.contains("batch 2: d2-2, d2-3")), "{warnings:?}");
    // Two batches: two deletes and one bulkInsert each.
    let counters = admin(&ep, "GET", "counters", None)["counters"].clone();
    assert_eq!(
        (counters["compute:instances.delete"].as_u64(), counters["compute:instances.bulkInsert"].as_u64()),
        (Some(4), Some(2)),
        "{counters}"
    );
    let after = ids(&ep);
    for (name, node) in live(&ep) {
        assert_ne!(after[&name], before[&name], "{name} made again");
        assert_eq!(node["labels"]["hpc-revision"], new_revision.as_str(), "{name}");
        let image = node["metadata"]["items"].as_array().unwrap().iter().find(|m| m["key"] == "hpc-image").unwrap()["value"].clone();
        assert_eq!(image, "projects/ml-prod/global/images/node-v2", "{name}");
        assert!(node["resourcePolicies"][0].as_str().unwrap().ends_with("/resourcePolicies/d2f-placement"), "{name}");
        assert_eq!(node["labels"]["team"], "ml");
    }
    let all: Json = (0..4).map(|i| (format!("d2-{i}"), json!(new_revision))).collect::<serde_json::Map<_, _>>().into();
    assert_eq!(strings(state.get("node_revisions")), all);
    let refreshed = read(&ctx, &GpuCluster, &state).await;
    assert_eq!(strings(refreshed.get("node_revisions")), all);
    assert!(replan(&ctx, &refreshed, &value(&GpuCluster, config)).1, "the re-plan is empty");
    // Import gives back the state a refresh makes, and the backend's reconstructed configuration the update
    // strategy (kept in the nodes' metadata).
    let mut d = Diagnostics::new();
    let imported =
        GpuCluster.import(&ctx, "gcp/us-central1-a/d2", &mut d).await.unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    let imported = read(&ctx, &GpuCluster, &imported).await;
    let without_blocks = |v: &Value| shared_with(v, "update_strategy", Value::Null);
    assert_eq!(without_blocks(&imported), without_blocks(&refreshed));
    let census = hpc_provider::ownership::Census::adopting();
    let defaults = std::collections::BTreeMap::new();
    let step = hpc_provider::clouds::backend::Step {
        ctx: &ctx,
        census: &census,
        default_tags: &defaults,
        timeout: std::time::Duration::from_secs(60),
    };
    let backend = hpc_provider::clouds::backend::cluster(hpc_provider::catalog::Cloud::Gcp);
    let Ok(found) = backend.import(&step, "gcp/us-central1-a/d2").await else { panic!("the backend's import failed") };
    assert_eq!(found.config.get("update_strategy").get("batch_size").as_str(), Some("2"));
    assert_eq!((found.config.get("repair").as_str(), found.config.get("max_repairs").as_str()), (Some("replace"), Some("20%")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_nodes_and_reboot_nodes_touch_only_the_named_nodes_the_census_admits() {
    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::backend::{self, Step};
    use hpc_provider::ownership::{Census, Owner};
    let ep = start_gcp();
    let ctx = context(&ep);
    let (_, cluster, config) = d2_cluster(&ctx, 4, json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    // Another owner's node with the cluster's labels beside ours.
    let foreign = json!({"action": "copy", "id": format!("{D2_ZONE}/d2-0"), "name": "d2-9", "labels": {"hpc_owner": "20260101t000000z-0000000000000000"}});
    admin(&ep, "POST", "out-of-band", Some(foreign));
    let mut d = Diagnostics::new();
    let spec = hpc_provider::planner::spec::parse_cluster(&value(&GpuCluster, config), &mut d)
        .unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    let census = Census::owned(Owner::parse(cluster.get("owner").as_str().unwrap()).unwrap());
    let defaults = std::collections::BTreeMap::new();
    let step = Step { ctx: &ctx, census: &census, default_tags: &defaults, timeout: std::time::Duration::from_secs(60) };
    let gcp = backend::cluster(Cloud::Gcp);
    let before = ids(&ep);

    admin(&ep, "DELETE", "counters", None);
    gcp.remove_nodes(&step, &spec, &["d2-1".into(), "d2-9".into(), "d2-7".into()]).await.unwrap();
    let after = ids(&ep);
    assert_eq!(after.keys().collect::<Vec<_>>(), ["d2-0", "d2-2", "d2-3", "d2-9"], "only d2-1 went");
    assert!(after.iter().all(|(n, id)| before[n] == *id));
    assert_eq!(admin(&ep, "GET", "counters", None)["counters"]["compute:instances.delete"], 1);

    impair(&ep, "d2-9", json!({"status": "TERMINATED"}));
    impair(&ep, "d2-2", json!({"status": "SUSPENDED"}));
    admin(&ep, "DELETE", "counters", None);
    gcp.reboot_nodes(&step, &spec, &["d2-0".into(), "d2-2".into(), "d2-9".into()]).await.unwrap();
    let counters = admin(&ep, "GET", "counters", None)["counters"].clone();
    assert_eq!(
        (
            counters["compute:instances.reset"].as_u64(),
            counters["compute:instances.resume"].as_u64(),
            counters.get("compute:instances.start")
        ),
        (Some(1), Some(1), None),
        "{counters}"
    );
    let nodes = live(&ep);
    assert_eq!((nodes["d2-0"]["status"].as_str(), nodes["d2-2"]["status"].as_str()), (Some("RUNNING"), Some("RUNNING")));
    assert_eq!(nodes["d2-9"]["status"], "TERMINATED", "not ours: not started");
    // Nothing named that is ours: nothing to do.
    gcp.reboot_nodes(&step, &spec, &["d2-9".into()]).await.unwrap();
    gcp.remove_nodes(&step, &spec, &[]).await.unwrap();
}

// ------------------------------------------------------------------------------------- quota and capacity

/// The spec of cluster `cap` of `nodes` `machine` nodes on fabric `capfab`, under `capacity`.
fn cap_spec(machine: &str, nodes: u32, capacity: &str) -> hpc_provider::model::ClusterSpec {
    let mut config = json!({"name": "cap", "node_count": nodes, "capacity_type": capacity,
                            "fabric": {"id": "gcp/us-central1-a/capfab", "name": "capfab", "cloud": "gcp", "region": "us-central1",
                                       "zone": "us-central1-a", "instance_type": machine, "placement": "cluster"}});
    if capacity == "reservation" {
        config["reservation_id"] = json!("res-1");
    }
    let mut d = Diagnostics::new();
    hpc_provider::planner::spec::parse_cluster(&value(&GpuCluster, config), &mut d)
        .unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()))
}

#[test]
fn every_catalog_machine_type_maps_to_the_regional_gpu_quota_regions_get_reports() {
    use hpc_provider::catalog::Cloud;
    let gcp = hpc_provider::clouds::backend::cluster(Cloud::Gcp);
    let family = |machine: &str, capacity: &str| gcp.quota(&cap_spec(machine, 2, capacity)).map(|f| (f.id, f.scope, f.unit, f.per_node));
    let l4 = |id: &str| Some((id.to_owned(), "us-central1".to_owned(), "GPUs", 1));
    assert_eq!(family("g2-standard-4", "on-demand"), l4("NVIDIA_L4_GPUS"));
    assert_eq!(family("g2-standard-4", "spot"), l4("PREEMPTIBLE_NVIDIA_L4_GPUS"));
    assert_eq!(family("g2-standard-4", "flex-start"), l4("PREEMPTIBLE_NVIDIA_L4_GPUS"), "flex-start draws on preemptible quota");
    assert_eq!(family("g2-standard-4", "reservation"), None, "the reservation bounds it");
    assert_eq!(family("a3-highgpu-8g", "spot"), Some(("PREEMPTIBLE_NVIDIA_H100_GPUS".into(), "us-central1".into(), "GPUs", 8)));
    assert_eq!(family("a3-highgpu-8g", "reservation"), None);
    // On-demand H100 and the newer families are Cloud Quotas' GPU-family quota, which regions.get does not
    // report: nothing is read for them.
    for machine in ["a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"] {
        assert_eq!(family(machine, "on-demand"), None, "{machine}");
        assert_eq!(gcp.quota(&cap_spec(machine, 2, "reservation")), None, "{machine}");
    }
    for machine in ["a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"] {
        assert_eq!(family(machine, "spot"), None, "{machine}");
    }
    let f = gcp.quota(&cap_spec("g2-standard-4", 2, "on-demand")).unwrap();
    assert_eq!(f.name, "NVIDIA L4 GPUs");
    assert!(f.request.contains("NVIDIA-L4-GPUS-per-project-region") && f.request.contains("region=us-central1"), "{}", f.request);
    // Compute Engine's code for a zone without capacity, as an operation's error carries it.
    let op = |code: &str| hpc_provider::clouds::gcp::api::operation_error(code, "creating 4 x g2-standard-4 in us-central1-a failed");
    assert_eq!(op("ZONE_RESOURCE_POOL_EXHAUSTED").capacity_code(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert_eq!(op("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS").capacity_code(), Some("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"));
    assert_eq!(op("QUOTA_EXCEEDED").capacity_code(), None);
}

/// The fabric `capfab` (g2-standard-4, compact placement), made through the resource.
async fn cap_fabric(ctx: &Context) {
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "capfab", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "g2-standard-4",
               "cidr_block": "10.50.0.0/16", "placement": "cluster"}),
    );
    apply_ok(ctx, &GpuFabric, &Value::Null, &fabric_config).await;
}

/// Cluster `cap`'s nodes as Compute Engine lists them, by name.
fn cap_nodes(ep: &str) -> Vec<String> {
    let list = get(ep, "zones/us-central1-a/instances");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["labels"]["hpc_cluster"] == "cap")
        .map(|i| i["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

async fn converge(ctx: &Context, spec: &hpc_provider::model::ClusterSpec) -> Result<(), hpc_provider::clouds::CloudError> {
    use hpc_provider::clouds::gcp::{api, cluster};
    let client = api::connect(ctx).await?;
    let labels =
        std::collections::BTreeMap::from([("hpc_cluster".to_owned(), "cap".to_owned()), ("hpc_fabric".to_owned(), "capfab".to_owned())]);
    let options =
        cluster::Options { labels: &labels, relabel: false, day2: None, redescribe: false, timeout: std::time::Duration::from_secs(60) };
    cluster::converge(ctx, &client, spec, &options, &hpc_provider::ownership::Census::reading()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_quota_reports_the_limit_and_what_the_live_nodes_use_in_one_regions_get() {
    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::quota::QuotaReading;
    let ep = start_gcp();
    let ctx = context(&ep);
    let gcp = hpc_provider::clouds::backend::cluster(Cloud::Gcp);
    let spec = cap_spec("g2-standard-4", 3, "on-demand");
    let family = gcp.quota(&spec).unwrap();
    // Before any node: the default limit, nothing used.
    assert_eq!(gcp.read_quota(&ctx, &family).await.unwrap(), QuotaReading { limit: 100_000, used: 0 });
    admin(&ep, "POST", "quota", Some(json!({"id": "NVIDIA_L4_GPUS", "scope": "us-central1", "limit": 6})));
    cap_fabric(&ctx).await;
    converge(&ctx, &spec).await.unwrap();
    admin(&ep, "DELETE", "counters", None);
    assert_eq!(gcp.read_quota(&ctx, &family).await.unwrap(), QuotaReading { limit: 6, used: 3 });
    assert_eq!(admin(&ep, "GET", "counters", None)["counters"]["compute:regions.get"], 1, "one call per family and region");
    // Spot nodes draw on the preemptible quota, not this one.
    let spot = gcp.quota(&cap_spec("g2-standard-4", 3, "spot")).unwrap();
    assert_eq!(gcp.read_quota(&ctx, &spot).await.unwrap(), QuotaReading { limit: 100_000, used: 0 });
    // Another region's quota is its own.
    let mut elsewhere = family.clone();
    elsewhere.scope = "europe-west4".into();
    assert_eq!(gcp.read_quota(&ctx, &elsewhere).await.unwrap(), QuotaReading { limit: 100_000, used: 0 });
    // A metric the region does not report: an error naming the call, for the check's warning.
    let mut unknown = family.clone();
    unknown.id = "NVIDIA_T4_GPUS".into();
    let e = gcp.read_quota(&ctx, &unknown).await.unwrap_err().message;
    assert!(e.contains("regions.get") && e.contains("NVIDIA_T4_GPUS"), "{e}");
    // Past the limit, Compute Engine refuses the create.
    let more = cap_spec("g2-standard-4", 7, "on-demand");
    let e = converge(&ctx, &more).await.unwrap_err();
    assert!(e.message.contains("QUOTA_EXCEEDED") && e.message.contains("NVIDIA_L4_GPUS"), "{e}");
    assert_eq!((&e.kind, e.capacity_code()), (&hpc_provider::clouds::ErrorKind::Quota, None), "a quota is not a shortage: {e}");
    assert_eq!(cap_nodes(&ep).len(), 3, "nothing made past the quota");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_capacity_limit_bulk_insert_min_count_follows_the_capacity_policy() {
    use hpc_provider::model::CapacityPolicy;
    let ep = start_gcp();
    let ctx = context(&ep);
    cap_fabric(&ctx).await;
    admin(&ep, "POST", "capacity", Some(json!({"zone": "us-central1-a", "instance_type": "g2-standard-4", "available": 3})));
    let mut spec = cap_spec("g2-standard-4", 4, "on-demand");

    // All or nothing: minCount 4, the zone has 3: Compute Engine makes none.
    spec.capacity_policy = CapacityPolicy::AllOrNothing;
    let e = converge(&ctx, &spec).await.unwrap_err();
    assert_eq!(e.capacity_code(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"), "{e}");
    assert!(cap_nodes(&ep).is_empty(), "{:?}", cap_nodes(&ep));

    // At least 2: minCount 2, the zone makes the 3 it has, and the converge fails naming the code.
    spec.capacity_policy = CapacityPolicy::AtLeast(2);
    let e = converge(&ctx, &spec).await.unwrap_err();
    assert!(e.message.contains("made 3 of 4") && e.message.contains("minCount 2"), "{e}");
    assert_eq!(e.capacity_code(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"), "{e}");
    assert_eq!(cap_nodes(&ep), ["cap-0", "cap-1", "cap-2"]);

    // The zone is full: even keep-partial's minCount 1 gets nothing, and the nodes there stay.
    spec.capacity_policy = CapacityPolicy::KeepPartial;
    let e = converge(&ctx, &spec).await.unwrap_err();
    assert_eq!(e.capacity_code(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"), "{e}");
    assert_eq!(cap_nodes(&ep), ["cap-0", "cap-1", "cap-2"]);

    // The limit lifted: the remainder comes, and all-or-nothing over the missing one succeeds.
    admin(&ep, "POST", "capacity", Some(json!({"zone": "us-central1-a", "instance_type": "g2-standard-4", "available": null})));
    spec.capacity_policy = CapacityPolicy::AllOrNothing;
    converge(&ctx, &spec).await.unwrap();
    assert_eq!(cap_nodes(&ep), ["cap-0", "cap-1", "cap-2", "cap-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_a_gpu_family_machine_type_warns_that_its_quota_is_not_read() {
    let ep = start_gcp();
    let ctx = context(&ep);
    let fabric = json!({"id": "gcp/us-central1-a/mega", "name": "mega", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                        "instance_type": "a3-megagpu-8g", "placement": "cluster"});
    let config = value(&GpuCluster, json!({"name": "m", "fabric": fabric, "node_count": 2}));
    let mut d = Diagnostics::new();
    let request = || PlanRequest { prior: &Value::Null, proposed: &config, config: &config, prior_private: &[] };
    let planned = GpuCluster.plan(&ctx, request(), &mut d).planned;
    GpuCluster.check_plan(&ctx, request(), &planned, &mut d).await;
    let said: Vec<String> = d.iter().map(|x| format!("{}: {}", x.summary, x.detail)).collect();
    let warning = said.iter().find(|w| w.starts_with("Quota not checked")).unwrap_or_else(|| panic!("no warning in {said:?}"));
    assert!(warning.contains("GPUS-PER-GPU-FAMILY-per-project-region") && warning.contains("adds 2 node(s)"), "{warning}");
    assert!(!d.has_errors(), "{said:?}");
    // A machine type regions.get reports (L4) is read, not warned about.
    let l4 = json!({"id": "gcp/us-central1-a/l4", "name": "l4", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
                    "instance_type": "g2-standard-4", "placement": "none"});
    let config = value(&GpuCluster, json!({"name": "l", "fabric": l4, "node_count": 2, "workload": "inference"}));
    let mut d = Diagnostics::new();
    let planned = GpuCluster.plan(&ctx, request_for(&config), &mut d).planned;
    GpuCluster.check_plan(&ctx, request_for(&config), &planned, &mut d).await;
    assert!(d.iter().all(|x| x.summary != "Quota not checked"), "{:?}", d.iter().collect::<Vec<_>>());
}

fn request_for(config: &Value) -> PlanRequest<'_> {
    PlanRequest { prior: &Value::Null, proposed: config, config, prior_private: &[] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_identity_is_the_nodes_service_account_and_an_import_gives_it_back() {
    let ep = start_gcp();
    let ctx = context(&ep);
    let email = "hpc-selfcheck@ml-prod.iam.gserviceaccount.com";
    let (_, cluster, _) = d2_cluster(
        &ctx,
        2,
        json!({"node_identity": email, "update_strategy": {"wait_for_selfcheck": true}, "user_data": selfcheck_user_data()}),
    )
    .await;
    for (name, node) in live(&ep) {
        assert_eq!(node["serviceAccounts"][0]["email"], email, "{name}: the self-check labels its node as this account");
    }
    let mut d = Diagnostics::new();
    let imported =
        GpuCluster.import(&ctx, "gcp/us-central1-a/d2", &mut d).await.unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    let imported = read(&ctx, &GpuCluster, &imported).await;
    assert_eq!(imported.get("node_identity"), &Value::from(email));
    assert_eq!(imported.get("revision"), cluster.get("revision"), "the identity is part of the node configuration");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_delete_whose_operation_fails_says_why_at_once_and_the_node_stays() {
    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::backend::{self, Step};
    use hpc_provider::ownership::{Census, Owner};
    let ep = start_gcp();
    let ctx = context(&ep);
    let (_, cluster, config) = d2_cluster(&ctx, 2, json!({})).await;
    let mut d = Diagnostics::new();
    let spec = hpc_provider::planner::spec::parse_cluster(&value(&GpuCluster, config), &mut d)
        .unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    let census = Census::owned(Owner::parse(cluster.get("owner").as_str().unwrap()).unwrap());
    let defaults = std::collections::BTreeMap::new();
    // A timeout long enough that a wait for the node to go, rather than for its operation, ends in it.
    let step = Step { ctx: &ctx, census: &census, default_tags: &defaults, timeout: std::time::Duration::from_secs(20) };
    // Compute accepts the delete; its operation ends DONE with an error, the node untouched.
    admin(
        &ep,
        "POST",
        "faults",
        Some(json!({"service": "compute", "operation": "instances.delete", "kind": "operation_error", "times": 1})),
    );
    let err = backend::cluster(Cloud::Gcp).remove_nodes(&step, &spec, &["d2-1".into()]).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("INTERNAL_ERROR") && text.contains("deleting node d2-1"), "the operation's own error, not a timeout: {text}");
    assert_eq!(live(&ep).keys().collect::<Vec<_>>(), ["d2-0", "d2-1"], "nothing was deleted");
}
