//! OCI on the project's emulator (every request's signature verified) with the real CLIs: fabric with a
//! compute cluster, a 4-node BM.GPU.H100.8 cluster and File Storage with Lustre created; an empty re-plan;
//! one instance list per refresh at 4 and 6 nodes; scale 4 -> 6 in place; an instance terminated outside
//! shown and repaired; a wrong API key refused by the emulator and reported as an authentication failure;
//! import of all three; destroy to an empty inventory. Also the day-2 adapter `acceptance/day2.rs` drives
//! (`day2_impair`, `day2_publish_selfcheck`, `day2_live_nodes`), through the emulator's admin API and its
//! signed OCI API.

use hpc_emulators::harness::{OciKey, admin, start_oci};
use serde_json::{Value, json};

use crate::cli::{Cli, Run, Workdir, assert_nodes};

const COMPARTMENT: &str = "ocid1.compartment.oc1..acceptance";

fn apply(w: &Workdir) -> Run {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"])
}

fn plan(w: &Workdir, code: i32) -> Run {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code)
}

/// A PEM API key OCI does not know (same key id, another key).
fn stranger_key(dir: &std::path::Path) -> String {
    use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
    use base64::Engine;
    let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(AsDer::<Pkcs8V1Der>::as_der(&key).unwrap().as_ref());
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    let path = dir.join("stranger.pem");
    std::fs::write(&path, format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"))).unwrap();
    path.display().to_string()
}

pub fn h100_cluster_lifecycle(cli: &Cli) {
    let (ep, key) = start_oci();
    let admin = |method: &str, route: &str, body: Option<Value>| admin(&ep, method, route, body);
    let w = Workdir::new(cli, "oci_cluster")
        .env("TF_VAR_endpoint", &ep)
        .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
        .env("TF_VAR_fingerprint", &key.fingerprint);
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_eq!(out["node_names"]["value"], json!(["acc-0", "acc-1", "acc-2", "acc-3"]), "{out}");
    for (name, id, _) in assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3"]) {
        assert!(id.starts_with("ocid1.instance."), "{name}: {id}");
    }
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(mount.contains("mount -t lustre") && mount.contains("@tcp:/train"), "{mount}");
    let inv = admin("GET", "inventory", None);
    let core = &inv["resources"]["core"];
    for (kind, n) in
        [("vcn", 1), ("subnet", 1), ("networksecuritygroup", 1), ("computecluster", 1), ("instanceconfiguration", 1), ("instance", 4)]
    {
        assert_eq!(core[kind].as_array().map(Vec::len), Some(n), "{kind}: {inv}");
    }

    // Refresh: one instance list per refresh, the same at 4 and 6 nodes.
    admin("DELETE", "counters", None);
    plan(&w, 0);
    let at_4 = admin("GET", "counters", None);
    assert_eq!(at_4["counters"]["core:ListInstances"], 1, "{at_4}");

    w.write("terraform.tfvars", "node_count = 6\n");
    let scale = plan(&w, 2).stdout;
    assert!(crate::cli::fold(&scale).contains("node_count = 4 -> 6") && scale.contains("0 to destroy"), "{scale}");
    apply(&w).expect_code(0);
    admin("DELETE", "counters", None);
    plan(&w, 0);
    assert_eq!(admin("GET", "counters", None), at_4, "refresh calls grew with the node count");

    // An instance terminated outside: the plan shows it missing, the apply launches it again.
    let instances = admin("GET", "inventory", None)["resources"]["core"]["instance"].clone();
    let victim = instances[2].as_str().unwrap().to_owned();
    admin("POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": victim})));
    let drift = plan(&w, 2).stdout;
    assert!(crate::cli::fold(&drift).contains("node_count = 5 -> 6") && drift.contains("+ \"acc-"), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let live = admin("GET", "inventory", None)["resources"]["core"]["instance"].clone();
    assert_eq!(live.as_array().map(Vec::len), Some(6));
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let repaired = assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3", "acc-4", "acc-5"]);
    assert!(repaired.iter().all(|(_, id, _)| live.as_array().unwrap().contains(&json!(id))) && !repaired.iter().any(|n| n.1 == victim));

    // A key OCI does not know: the emulator refuses the signature and the user is told so.
    let stranger = stranger_key(w.path());
    let refused = w.run(&["plan", "-no-color", "-input=false", &format!("-var=key_path={stranger}")]).expect_code(1).output();
    assert!(refused.contains("OCI authentication failed") && refused.contains("NotAuthenticated"), "{refused}");

    // Import equals the created state, for all three.
    let created = crate::cli::state_values(&w);
    w.run(&["state", "rm", "hpc_gpu_fabric.f", "hpc_gpu_cluster.c", "hpc_parallel_filesystem.fs"]).expect_code(0);
    for (address, name) in [("hpc_gpu_fabric.f", "accfab"), ("hpc_gpu_cluster.c", "acc"), ("hpc_parallel_filesystem.fs", "accfs")] {
        w.run(&["import", "-no-color", "-input=false", address, &format!("oci/us-ashburn-1/{COMPARTMENT}/{name}")]).expect_code(0);
    }
    assert_eq!(crate::cli::state_values(&w), created);
    // No resource changes after the import (Terraform 1.0 may still offer to re-save an output after `state rm`).
    let after = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(!after.contains("Plan:") && !after.contains("will be"), "{after}");

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// Media on OCI's A10 VM shape without a fabric: the cluster's own VCN, no compute cluster, the RDMA agent
/// plugins left off, Ethernet NCCL settings; import and destroy.
pub fn a10_media_cluster_on_ethernet(cli: &Cli) {
    let (ep, key) = start_oci();
    let w = Workdir::new(cli, "oci_a10_media")
        .env("TF_VAR_endpoint", &ep)
        .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
        .env("TF_VAR_fingerprint", &key.fingerprint);
    let planned = crate::cli::fold(&plan(&w, 2).stdout);
    assert!(planned.contains(r#""agent_config.plugins_config" = "(agent defaults: no RDMA NICs)""#), "{planned}");
    assert!(planned.contains(r#"kind = "oci_core_vcn""#) && planned.contains("Plan: 1 to add"), "{planned}");
    assert!(!planned.contains("oci_core_compute_cluster") && !planned.contains("Warning: No proximity"), "{planned}");
    let check = |out: &Value| {
        assert!(out["network"]["value"]["vpc_id"].as_str().unwrap().starts_with("ocid1.vcn."), "{out}");
        let inv = admin(&ep, "GET", "inventory", None);
        assert_eq!(inv["resources"]["core"]["computecluster"].as_array().map(Vec::len).unwrap_or(0), 0, "{inv}");
    };
    let empty = || admin(&ep, "GET", "inventory", None)["empty"] == true;
    let id = format!("oci/us-ashburn-1/{COMPARTMENT}/transcode");
    crate::cli::own_network_lifecycle(&w, "hpc_gpu_cluster.c", &id, &["transcode-0", "transcode-1"], check, empty);
}

// ------------------------------------------------------------------------------------------ day 2

/// The API key `start_oci` registered with the emulator at `endpoint`: the harness's fixed tenancy, user and
/// fingerprint, and the private key it wrote for this process and port (`hpc-oci-key-<pid>-<port>.pem` in
/// the temporary directory). For an emulator started otherwise, use the `_with_key` functions.
fn harness_key(endpoint: &str) -> OciKey {
    let port = endpoint.rsplit(':').next().unwrap_or_default();
    let private_key_path = std::env::temp_dir().join(format!("hpc-oci-key-{}-{port}.pem", std::process::id()));
    let private_key_pem = std::fs::read_to_string(&private_key_path)
        .unwrap_or_else(|e| panic!("no API key for the OCI emulator at {endpoint} ({}: {e})", private_key_path.display()));
    OciKey {
        tenancy: "ocid1.tenancy.oc1..emulator".into(),
        user: "ocid1.user.oc1..emulator".into(),
        fingerprint: "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0".into(),
        private_key_pem,
        private_key_path,
    }
}

/// One request to the emulator's OCI API, signed with `key` as OCI's SDKs sign it; (status, JSON body).
fn signed(endpoint: &str, key: &OciKey, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use hpc_provider::clouds::oci::signing::{Request, Signer};
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let signer = Signer::from_pem(&key.private_key_pem, &key.tenancy, &key.user, &key.fingerprint).unwrap();
    let payload = body.map(|b| b.to_string().into_bytes());
    let date = hpc_provider::clock::http_date(std::time::SystemTime::now());
    let request = Request { method, host, path_and_query: path, date: &date, body: payload.as_deref(), content_type: "application/json" };
    let headers = signer.sign(&request).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\naccept: application/json\r\n");
    for (k, v) in &headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if payload.is_none() && !headers.iter().any(|(k, _)| k == "content-length") {
        head.push_str("content-length: 0\r\n");
    }
    head.push_str("\r\n");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(payload.as_deref().unwrap_or_default()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Marks the node unhealthy the way OCI shows it (the instance `STOPPED` outside the provider, set through
/// the emulator's admin `impair`); returns the words the plan's reason contains. (A maintenance reboot OCI
/// schedules is maintenance, reported and not repaired.)
pub fn day2_impair(endpoint: &str, node_id: &str) -> String {
    admin(endpoint, "POST", "out-of-band", Some(json!({"action": "impair", "id": node_id, "state": "STOPPED"})));
    "state STOPPED".into()
}

/// Publishes a self-check verdict as the node does: UpdateInstance with its freeform tags and
/// `hpc:selfcheck` (the call replaces the whole map, so the tags are read first). The emulator's key is the
/// one `start_oci` registered (see [`day2_publish_selfcheck_with_key`]).
pub fn day2_publish_selfcheck(endpoint: &str, node_name: &str, node_id: &str, verdict: &str) {
    day2_publish_selfcheck_with_key(endpoint, &harness_key(endpoint), node_name, node_id, verdict);
}

/// [`day2_publish_selfcheck`] signed with a given API key.
pub fn day2_publish_selfcheck_with_key(endpoint: &str, key: &OciKey, node_name: &str, node_id: &str, verdict: &str) {
    let path = format!("/20160918/instances/{node_id}");
    let (status, me) = signed(endpoint, key, "GET", &path, None);
    assert_eq!(status, 200, "reading {node_name} ({node_id}): {me}");
    let mut tags = me["freeformTags"].clone();
    tags["hpc:selfcheck"] = json!(verdict);
    let (status, out) = signed(endpoint, key, "PUT", &path, Some(&json!({"freeformTags": tags})));
    assert_eq!(status, 200, "publishing {verdict} for {node_name}: {out}");
}

/// The live nodes of cluster `cluster` as ListInstances has them (its `hpc:cluster` tag; terminating and
/// terminated instances left out), in name order: (display name, OCID, `hpc:revision` tag).
pub fn day2_live_nodes(endpoint: &str, cluster: &str) -> Vec<(String, String, Option<String>)> {
    day2_live_nodes_with_key(endpoint, &harness_key(endpoint), cluster)
}

/// [`day2_live_nodes`] signed with a given API key.
pub fn day2_live_nodes_with_key(endpoint: &str, key: &OciKey, cluster: &str) -> Vec<(String, String, Option<String>)> {
    let (status, listed) = signed(endpoint, key, "GET", &format!("/20160918/instances?compartmentId={COMPARTMENT}&limit=1000"), None);
    assert_eq!(status, 200, "{listed}");
    let mut nodes: Vec<(String, String, Option<String>)> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| {
            i["freeformTags"]["hpc:cluster"] == cluster && !matches!(i["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED"))
        })
        .map(|i| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&i["displayName"]), text(&i["id"]), i["freeformTags"]["hpc:revision"].as_str().map(str::to_owned))
        })
        .collect();
    nodes.sort();
    nodes
}

// ----------------------------------------------------------------------------------- capacity

/// The capacity case on OCI (`acceptance/cases/capacity_oci`): its own emulator, whose admin API sets the
/// Compute GPU limit the BM.GPU.L40S.4 nodes count against (`gpu-l40s-count`, 4 GPUs a node, in the fabric's
/// availability domain) and the host capacity of the shape there.
pub fn capacity_setup(cli: &Cli) -> crate::capacity::Capacity {
    const AD: &str = "Uocm:US-ASHBURN-AD-1";
    const SHAPE: &str = "BM.GPU.L40S.4";
    let (ep, key) = start_oci();
    let w = Workdir::new(cli, "capacity_oci")
        .env("TF_VAR_endpoint", &ep)
        .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
        .env("TF_VAR_fingerprint", &key.fingerprint);
    let (a, l) = (ep.clone(), ep.clone());
    crate::capacity::Capacity {
        w,
        admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
        quota_id: "gpu-l40s-count".into(),
        quota_scope: AD.into(),
        quota_name: "GPUs for shapes in the BM.GPU.L40S series".into(),
        per_node: 4,
        zone: AD.into(),
        instance_type: SHAPE.into(),
        live: Box::new(move || day2_live_nodes(&l, "cap").into_iter().map(|(name, _, _)| name).collect()),
        _keep: Box::new(key),
    }
}

/// Writes a Slurm configuration into an instance's metadata through OCI's API (UpdateInstance), as whoever
/// may update the instance could.
pub fn forge_slurm_config(endpoint: &str, instance_id: &str, config: &hpc_provider::clouds::slurm::SlurmConfig) {
    let key = harness_key(endpoint);
    let path = format!("/20160918/instances/{instance_id}");
    let (status, me) = signed(endpoint, &key, "GET", &path, None);
    assert_eq!(status, 200, "{me}");
    let mut metadata = me["metadata"].clone();
    metadata[hpc_provider::clouds::slurm::channel::OCI_KEY] = json!(config.payload);
    let (status, out) = signed(endpoint, &key, "PUT", &path, Some(&json!({"metadata": metadata})));
    assert_eq!(status, 200, "{out}");
}
