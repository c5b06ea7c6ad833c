//! The vendors' own clients on every emulator: OpenTofu applies a small cluster case (fabric, 2 nodes,
//! filesystem), then the cloud's own SDK, in Python (`acceptance/vendor_clients/<cloud>.py`), reads back
//! what the provider made and checks it is what the real cloud would show (names, counts, addresses, the
//! owner marker on every piece), makes and deletes a piece of its own through the same emulator, and
//! prints a JSON summary that the test compares with the CLI's outputs; then a destroy leaves the emulator
//! empty. Google: google-api-python-client (Compute v1 from its bundled discovery document) and
//! google-cloud-lustre's REST transport; Azure: azure-mgmt-* with their real LRO pollers; OCI: the oci SDK
//! with its own request signer (and a request changed after signing refused); AWS: boto3.
//!
//! The SDKs run from the conformance virtualenv (`HPC_CONFORMANCE_PYTHON`) and, for boto3, moto's
//! (`HPC_MOTO_PYTHON`), both set by `./scripts/test.sh`. Under `HPC_CONFORMANCE=strict` the emulators judge
//! the SDKs' requests too: a refusal of one is a bug in the judge or the emulator, and fails the test.

use std::collections::BTreeMap;
use std::path::Path;

use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use serde_json::{Value, json};

use crate::cli::{Cli, Workdir, assert_nodes, state_values};

/// What a vendor script printed: its JSON summary, and the problems it found (mismatches with what the
/// real cloud would show, and the SDK's exceptions: refusals, answers it could not parse).
pub(crate) struct Vendor {
    script: &'static str,
    pub(crate) summary: Value,
    stderr: String,
}

impl Vendor {
    /// Asserts the vendor client found no problem; called last, after the test's own checks of the
    /// summary and the destroy, so that one run shows everything.
    pub(crate) fn found_nothing_wrong(&self) {
        let problems = self.summary["problems"].as_array().cloned().unwrap_or_default();
        let listed: Vec<String> = problems.iter().map(|p| format!("  - {}", p.as_str().unwrap_or_default())).collect();
        assert!(
            problems.is_empty(),
            "{}: the vendor's client found {} problem(s) on the emulator:\n{}\n--- stderr\n{}",
            self.script,
            problems.len(),
            listed.join("\n"),
            self.stderr
        );
    }
}

/// Runs `acceptance/vendor_clients/<script>` with the python named by `python_var`. It exits 1 when it
/// found problems, and prints its summary either way; anything else (no summary) fails here.
pub(crate) fn vendor(python_var: &str, script: &'static str, args: &[(&str, &str)]) -> Vendor {
    let python = std::env::var(python_var).unwrap_or_else(|_| {
        panic!("{python_var} is not set: run the acceptance tests through ./scripts/test.sh, which installs the vendors' SDKs")
    });
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("acceptance/vendor_clients").join(script);
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(&path);
    for (flag, value) in args {
        cmd.arg(format!("--{flag}")).arg(value);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("running {python} {}: {e}", path.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("{script} exited {:?} with no JSON summary ({e})\n--- stderr\n{stderr}\n--- stdout\n{stdout}", out.status.code())
    });
    let problems = summary["problems"].as_array().map_or(0, Vec::len);
    assert_eq!(out.status.success(), problems == 0, "{script} exited {:?} with {problems} problem(s)\n{stderr}", out.status.code());
    if problems > 0 {
        // Shown before any assertion of the test's own fails on a summary the problems left incomplete.
        eprintln!("{script} found problems on the emulator:\n{stderr}");
    }
    Vendor { script, summary, stderr }
}

/// The owner markers the state records: (fabric, cluster, filesystem).
fn owners(w: &Workdir) -> (String, String, String) {
    let state = state_values(w);
    let owner = |address: &str| {
        state[address]["owner"].as_str().filter(|o| !o.is_empty()).unwrap_or_else(|| panic!("{address} has no owner: {state:?}")).to_owned()
    };
    (owner("hpc_gpu_fabric.f"), owner("hpc_gpu_cluster.c"), owner("hpc_parallel_filesystem.fs"))
}

/// Applies `case` at 2 nodes; the CLI's outputs and the nodes (name, id, address) in index order.
fn apply(w: &Workdir, names: &[&str]) -> (Value, Vec<(String, String, String)>) {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let nodes = assert_nodes(&out, names);
    (out, nodes)
}

/// The vendor's nodes, `key` (name or id) -> private IP, as its summary lists them.
fn vendor_addresses(summary: &Value, key: &str) -> BTreeMap<String, String> {
    summary["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes in the summary: {summary}"))
        .iter()
        .map(|n| {
            (n[key].as_str().unwrap_or_else(|| panic!("{key}: {n}")).to_owned(), n["private_ip"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

fn small(cli: &Cli, case: &str) -> Workdir {
    let w = Workdir::new(cli, case);
    w.write("terraform.tfvars", "node_count = 2\n");
    w
}

#[test]
fn google_clients_read_the_gcp_cluster_and_make_a_firewall() {
    let ep = start_gcp();
    let w = small(&Cli::tofu(), "gcp_cluster").env("TF_VAR_endpoint", &ep);
    let (out, nodes) = apply(&w, &["acc-0", "acc-1"]);
    let (fabric, cluster, filesystem) = owners(&w);
    let v = vendor(
        "HPC_CONFORMANCE_PYTHON",
        "gcp.py",
        &[
            ("endpoint", &ep),
            ("project", "ml-prod"),
            ("region", "us-central1"),
            ("zone", "us-central1-a"),
            ("fabric", "accfab"),
            ("cluster", "acc"),
            ("filesystem", "accfs"),
            ("gpu-networks", "8"),
            ("owner-fabric", &fabric),
            ("owner-cluster", &cluster),
            ("owner-filesystem", &filesystem),
        ],
    );
    let summary = &v.summary;
    // The nodes the client lists by label are the CLI's, at the same addresses, on the host VPC plus the
    // 8 GPU VPCs, in the compact placement policy, with the cluster's labels.
    let wanted: BTreeMap<String, String> = nodes.iter().map(|(n, _, ip)| (n.clone(), ip.clone())).collect();
    assert_eq!(vendor_addresses(summary, "name"), wanted, "{summary}");
    for n in summary["nodes"].as_array().unwrap() {
        assert_eq!(n["nics"], 9, "{n}");
        assert_eq!(n["network"], "accfab-vpc", "{n}");
        assert_eq!(n["resource_policies"], json!(["accfab-placement"]), "{n}");
        assert_eq!(n["labels"]["team"], "ml", "{n}");
        assert_eq!(n["labels"]["hpc_owner"], cluster.as_str(), "{n}");
        assert_eq!(n["machine_type"], "a3-megagpu-8g", "{n}");
    }
    assert_eq!(summary["fabric"]["gpu_networks"], json!((0..8).map(|i| format!("accfab-gpu-{i}")).collect::<Vec<_>>()), "{summary}");
    assert_eq!(summary["fabric"]["owner"], fabric.as_str());
    assert_eq!(summary["resource_policy"]["placement"]["collocation"], "COLLOCATED", "{summary}");
    assert_eq!(summary["own"]["deleted"], true, "{summary}");
    // Managed Lustre as the Lustre client reads it: what the mount command names.
    let fs = &summary["filesystem"];
    assert_eq!(fs["name"], "projects/ml-prod/locations/us-central1-a/instances/accfs", "{summary}");
    assert_eq!(fs["capacity_gib"], 36000, "{summary}");
    assert_eq!(fs["state"], "ACTIVE", "{summary}");
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(mount.contains(&format!(" {} ", fs["mount_point"].as_str().unwrap())), "{mount} vs {fs}");
    assert!(fs["mount_point"].as_str().unwrap().ends_with(&format!("@tcp:/{}", fs["filesystem"].as_str().unwrap())), "{fs}");
    // The client's firewall is gone again; the destroy leaves nothing.
    let inv = admin(&ep, "GET", "inventory", None);
    assert!(!inv.to_string().contains("vendor-client-fw"), "{inv}");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
    v.found_nothing_wrong();
}

#[test]
fn azure_sdks_read_the_azure_cluster_and_make_a_group_and_vnet() {
    let (ep, pem) = start_azure();
    let pem_path = pem.display().to_string();
    let w = small(&Cli::tofu(), "azure_cluster").env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem_path);
    let (out, nodes) = apply(&w, &["acc-0", "acc-1"]);
    let (fabric, cluster, filesystem) = owners(&w);
    let v = vendor(
        "HPC_CONFORMANCE_PYTHON",
        "azure.py",
        &[
            ("endpoint", &ep),
            ("ca", &pem_path),
            ("subscription", "00000000-0000-0000-0000-000000000001"),
            ("group", "accfab-rg"),
            ("fabric", "accfab"),
            ("cluster", "acc"),
            ("filesystem", "accfs"),
            ("owner-fabric", &fabric),
            ("owner-cluster", &cluster),
            ("owner-filesystem", &filesystem),
        ],
    );
    let summary = &v.summary;
    // The scale set's VMs are the CLI's nodes (by id), each at its NIC's address.
    let wanted: BTreeMap<String, String> = nodes.iter().map(|(_, id, ip)| (id.clone(), ip.clone())).collect();
    assert_eq!(vendor_addresses(summary, "id"), wanted, "{summary}");
    let sets = summary["scale_sets"].as_array().unwrap();
    assert_eq!(sets.len(), 1, "{summary}");
    assert_eq!(sets[0]["name"], "acc-0");
    assert_eq!(sets[0]["sku"], "Standard_ND96isr_H100_v5");
    assert_eq!((sets[0]["capacity"].clone(), sets[0]["vms"].clone(), sets[0]["nics"].clone()), (json!(2), json!(2), json!(2)), "{summary}");
    assert!(
        sets[0]["proximity_placement_group"].as_str().is_some_and(|p| p.ends_with("/proximityPlacementGroups/accfab-ppg")),
        "{summary}"
    );
    assert_eq!(summary["fabric"]["owner"], fabric.as_str());
    assert!(summary["fabric"]["nsg"].as_str().is_some_and(|n| n.ends_with("/networkSecurityGroups/accfab-nsg")), "{summary}");
    assert_eq!(summary["filesystem"]["mount_command"], out["mount_command"]["value"], "{summary}");
    assert_eq!(summary["filesystem"]["capacity_tib"], 8.0, "{summary}");
    assert_eq!(summary["own"]["vnet_deleted"], true, "{summary}");
    assert_eq!(summary["own"]["group_deleted"], true, "{summary}");
    let inv = azure_admin(&ep, &pem, "GET", "inventory", None);
    assert!(!inv.to_string().to_lowercase().contains("vendor-client-rg"), "{inv}");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = azure_admin(&ep, &pem, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
    v.found_nothing_wrong();
}

#[test]
fn oci_sdk_reads_the_oci_cluster_signs_and_makes_a_vcn() {
    let (ep, key) = start_oci();
    let key_path = key.private_key_path.display().to_string();
    let w = small(&Cli::tofu(), "oci_cluster")
        .env("TF_VAR_endpoint", &ep)
        .env("TF_VAR_key_path", &key_path)
        .env("TF_VAR_fingerprint", &key.fingerprint);
    let (out, nodes) = apply(&w, &["acc-0", "acc-1"]);
    let (fabric, cluster, filesystem) = owners(&w);
    let v = vendor(
        "HPC_CONFORMANCE_PYTHON",
        "oci.py",
        &[
            ("endpoint", &ep),
            ("tenancy", &key.tenancy),
            ("user", &key.user),
            ("fingerprint", &key.fingerprint),
            ("key-file", &key_path),
            ("region", "us-ashburn-1"),
            ("compartment", "ocid1.compartment.oc1..acceptance"),
            ("fabric", "accfab"),
            ("cluster", "acc"),
            ("filesystem", "accfs"),
            ("owner-fabric", &fabric),
            ("owner-cluster", &cluster),
            ("owner-filesystem", &filesystem),
        ],
    );
    let summary = &v.summary;
    let wanted: BTreeMap<String, String> = nodes.iter().map(|(n, _, ip)| (n.clone(), ip.clone())).collect();
    assert_eq!(vendor_addresses(summary, "name"), wanted, "{summary}");
    let ids: Vec<&str> = summary["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(ids, nodes.iter().map(|n| n.1.as_str()).collect::<Vec<_>>(), "{summary}");
    for n in summary["nodes"].as_array().unwrap() {
        assert_eq!((n["shape"].clone(), n["state"].clone()), (json!("BM.GPU.H100.8"), json!("RUNNING")), "{n}");
    }
    // The BM.GPU.H100.8 nodes are in the fabric's compute cluster.
    assert_eq!(summary["placement"]["members"], json!(["acc-0", "acc-1"]), "{summary}");
    assert_eq!(summary["fabric"]["owner"], fabric.as_str());
    assert_eq!(summary["fabric"]["vcn"], out["ids"]["value"]["vcn"], "{summary}");
    let fs = &summary["filesystem"];
    assert_eq!(
        (fs["name"].clone(), fs["capacity_gbs"].clone(), fs["state"].clone()),
        (json!("train"), json!(31200), json!("ACTIVE")),
        "{summary}"
    );
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(mount.contains(&format!("{}@tcp:/train", fs["mgs_address"].as_str().unwrap())), "{mount} vs {fs}");
    assert_eq!(summary["signatures"], json!({"signed": 200, "tampered_body": 401, "tampered_query": 401, "unsigned": 401}), "{summary}");
    assert_eq!(summary["own"]["terminated"], true, "{summary}");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
    v.found_nothing_wrong();
}

#[test]
fn boto3_reads_the_aws_cluster_and_makes_a_security_group() {
    let emulator = start_aws();
    let ep = emulator.endpoint.clone();
    let w = small(&Cli::tofu(), "aws_cluster").env("TF_VAR_endpoint", &ep);
    let (out, nodes) = apply(&w, &["acc-0", "acc-1"]);
    let (fabric, cluster, filesystem) = owners(&w);
    let v = vendor(
        "HPC_MOTO_PYTHON",
        "aws.py",
        &[
            ("endpoint", &ep),
            ("region", "us-east-1"),
            ("fabric", "accfab"),
            ("cluster", "acc"),
            ("filesystem", "accfs"),
            ("owner-fabric", &fabric),
            ("owner-cluster", &cluster),
            ("owner-filesystem", &filesystem),
        ],
    );
    let summary = &v.summary;
    let wanted: BTreeMap<String, String> = nodes.iter().map(|(n, _, ip)| (n.clone(), ip.clone())).collect();
    assert_eq!(vendor_addresses(summary, "name"), wanted, "{summary}");
    for n in summary["nodes"].as_array().unwrap() {
        assert_eq!(n["placement_group"], "accfab-pg", "{n}");
        assert_eq!(n["efa_interfaces"], 32, "{n}");
    }
    assert_eq!(summary["fabric"]["owner"], fabric.as_str());
    assert_eq!(summary["fabric"]["placement_strategy"], "cluster");
    let fs = &summary["filesystem"];
    assert_eq!((fs["type"].clone(), fs["state"].clone()), (json!("LUSTRE"), json!("AVAILABLE")), "{summary}");
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(
        mount.contains(&format!("{}@tcp:/{}", fs["dns_name"].as_str().unwrap(), fs["mount_name"].as_str().unwrap())),
        "{mount} vs {fs}"
    );
    assert_eq!(summary["own"]["deleted"], true, "{summary}");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
    v.found_nothing_wrong();
}
