//! OCI on the project's emulator (every request's signature verified) with the real CLIs: fabric with a
//! compute cluster, a 4-node BM.GPU.H100.8 cluster and File Storage with Lustre created; an empty re-plan;
//! one instance list per refresh at 4 and 6 nodes; scale 4 -> 6 in place; an instance terminated outside
//! shown and repaired; a wrong API key refused by the emulator and reported as an authentication failure;
//! import of all three; destroy to an empty inventory.

use hpc_emulators::harness::{admin, start_oci};
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
