//! Azure on the project's ARM emulator (HTTPS, its certificate trusted through HPC_AZURE_CA_FILE) with the
//! real CLIs: fabric, an ND H100 v5 cluster and Azure Managed Lustre created, an empty re-plan, scale 4 -> 6 in place, a VM
//! deleted outside shown and repaired, one VM list per scale set on refresh, a 150-node plan with two
//! scale sets, import of all three, destroy to an empty inventory.

use hpc_emulators::harness::{azure_admin, azure_call, start_azure};
use serde_json::{Value, json};

use crate::cli::{Cli, Run, Workdir, assert_nodes};

const GROUP: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/accfab-rg";

fn apply(w: &Workdir) -> Run {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"])
}

fn plan(w: &Workdir, code: i32) -> Run {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code)
}

pub fn nd_h100_cluster_lifecycle(cli: &Cli) {
    let (ep, pem) = start_azure();
    let admin = |method: &str, route: &str, body: Option<Value>| azure_admin(&ep, &pem, method, route, body);
    let w = Workdir::new(cli, "azure_cluster").env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string());
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(mount.contains("mount -t lustre") && mount.contains("@tcp:/lustrefs"), "{mount}");
    let vmss = format!("{GROUP}/providers/Microsoft.Compute/virtualMachineScaleSets/acc-0");
    for (i, (_, id, _)) in assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3"]).into_iter().enumerate() {
        assert_eq!(id, format!("{vmss}/virtualMachines/{i}"));
    }
    let inv = admin("GET", "inventory", None);
    let fs = format!("{GROUP}/providers/Microsoft.StorageCache/amlFilesystems/accfs");
    assert_eq!(inv["resources"]["arm"]["amlFilesystems"], json!([fs]), "{inv}");
    let arm = &inv["resources"]["arm"];
    assert_eq!(
        arm["proximityPlacementGroups"],
        json!([format!("{GROUP}/providers/Microsoft.Compute/proximityPlacementGroups/accfab-ppg")]),
        "{inv}"
    );
    assert_eq!(
        arm["virtualMachineScaleSets"],
        json!([format!("{GROUP}/providers/Microsoft.Compute/virtualMachineScaleSets/acc-0")]),
        "{inv}"
    );
    assert_eq!(arm["virtualMachines"].as_array().map(Vec::len), Some(4), "{inv}");

    // Refresh: one VM list per scale set, the same at 4 and 6 nodes.
    admin("DELETE", "counters", None);
    plan(&w, 0);
    let at_4 = admin("GET", "counters", None);
    assert_eq!(at_4["counters"]["arm:virtualMachines.list"], 1, "{at_4}");

    w.write("terraform.tfvars", "node_count = 6\n");
    let scale = plan(&w, 2).stdout;
    assert!(crate::cli::fold(&scale).contains("node_count = 4 -> 6") && scale.contains("0 to destroy"), "{scale}");
    apply(&w).expect_code(0);
    admin("DELETE", "counters", None);
    plan(&w, 0);
    assert_eq!(admin("GET", "counters", None), at_4, "refresh calls grew with the node count");

    // A VM deleted outside: the plan shows a node missing, the apply scales the set back out.
    admin(
        "POST",
        "out-of-band",
        Some(
            json!({"action": "delete", "id": format!("{GROUP}/providers/Microsoft.Compute/virtualMachineScaleSets/acc-0/virtualMachines/3")}),
        ),
    );
    // The node that went is the one planned back, under its own name (Azure numbers the new VM 6; the provider
    // keeps which VM is which node on the scale set, so no other node is renamed).
    let drift = plan(&w, 2).stdout;
    assert!(crate::cli::fold(&drift).contains("node_count = 5 -> 6") && drift.contains("+ \"acc-3\""), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    assert_eq!(admin("GET", "inventory", None)["resources"]["arm"]["virtualMachines"].as_array().map(Vec::len), Some(6));
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3", "acc-4", "acc-5"]);

    // 150 nodes do not fit one InfiniBand scale set: the running set fills to 100 and a second one takes 50
    // (the 6 that run are not resized the other way).
    w.write("terraform.tfvars", "node_count = 150\n");
    let big = plan(&w, 2).stdout;
    let folded = crate::cli::fold(&big);
    assert!(big.contains(r#"name     = "acc-1""#) && folded.contains(r#""instances" = "50""#), "{big}");
    assert!(folded.contains(r#"-> "100""#), "{big}");
    w.write("terraform.tfvars", "node_count = 6\n");

    // Import equals the created state, for all three.
    let created = crate::cli::state_values(&w);
    w.run(&["state", "rm", "hpc_gpu_fabric.f", "hpc_gpu_cluster.c", "hpc_parallel_filesystem.fs"]).expect_code(0);
    for (address, id) in [
        ("hpc_gpu_fabric.f", "azure/accfab-rg/accfab"),
        ("hpc_gpu_cluster.c", "azure/accfab-rg/acc"),
        ("hpc_parallel_filesystem.fs", "azure/accfab-rg/accfs"),
    ] {
        w.run(&["import", "-no-color", "-input=false", address, id]).expect_code(0);
    }
    assert_eq!(crate::cli::state_values(&w), created);

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// Inference on Azure's NVadsA10 v5 without a fabric: Ethernet NCCL settings, the cluster's own resource
/// group and VNet, no proximity placement group, nodes listed; import and destroy.
pub fn nv_a10_inference_cluster(cli: &Cli) {
    let (ep, pem) = start_azure();
    let w = Workdir::new(cli, "azure_nv_inference").env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string());
    let check = |out: &Value| {
        assert_eq!(out["node_environment"]["value"], json!({"NCCL_SOCKET_IFNAME": "eth0"}));
        assert!(
            out["network"]["value"]["vpc_id"]
                .as_str()
                .unwrap()
                .ends_with("/resourceGroups/serve-rg/providers/Microsoft.Network/virtualNetworks/serve-vpc"),
            "{out}"
        );
        let inv = azure_admin(&ep, &pem, "GET", "inventory", None);
        assert!(inv["resources"]["arm"]["proximityPlacementGroups"].is_null(), "{inv}");
    };
    let empty = || azure_admin(&ep, &pem, "GET", "inventory", None)["empty"] == true;
    crate::cli::own_network_lifecycle(&w, "hpc_gpu_cluster.c", "azure/serve-rg/serve", &["serve-0", "serve-1", "serve-2"], check, empty);
}

// ------------------------------------------------------------------------------------------------ day 2
//
// The day-2 flow (acceptance/day2.rs) reaches the ARM emulator over HTTPS: besides its endpoint, each
// function takes the PEM file of the emulator's certificate (`start_azure` gives both). The case
// (`acceptance/cases/day2_azure`) puts cluster `d2` in fabric `d2fab`, in resource group `d2fab-rg`.

const DAY2_GROUP: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/d2fab-rg";
const DAY2_COMPUTE_API: &str = "api-version=2026-04-01";

/// Marks the node unhealthy the way Azure would: its Application Health extension reports it Unhealthy
/// (admin out-of-band `impair`); returns the words the plan's reason contains.
pub fn day2_impair(endpoint: &str, pem: &std::path::Path, node_id: &str) -> String {
    azure_admin(endpoint, pem, "POST", "out-of-band", Some(json!({"action": "impair", "id": node_id, "health": "unhealthy"})));
    "Application Health extension reports the node unhealthy since".into()
}

/// Publishes a self-check verdict as the node does: its health endpoint answers the Application Health
/// extension's probe (Rich Health States) with the verdict in `customMetrics`. The probe is local to the VM
/// (no ARM call carries it), so the emulator takes the answer through its admin API (`probe`).
pub fn day2_publish_selfcheck(endpoint: &str, pem: &std::path::Path, _node_name: &str, node_id: &str, verdict: &str) {
    let state = if verdict.starts_with("fail") { "Unhealthy" } else { "Healthy" };
    let metrics = json!({ hpc_provider::clouds::azure::cluster::SELFCHECK_METRIC: verdict }).to_string();
    let answer = json!({"ApplicationHealthState": state, "customMetrics": metrics});
    azure_admin(endpoint, pem, "POST", "out-of-band", Some(json!({"action": "probe", "id": node_id, "response": answer})));
}

/// The live nodes of cluster `cluster` as ARM lists them (per scale set: its GET for the revision tags, one
/// VM list): (name, VM id, revision). A VM with its scale set's latest model applied runs the model's
/// revision (`hpc:revision`), unless the set is marked `hpc:remaking` (then it is not known yet); one
/// without runs the revision before (`hpc:previous-revision`).
pub fn day2_live_nodes(endpoint: &str, pem: &std::path::Path, cluster: &str) -> Vec<(String, String, Option<String>)> {
    live_nodes_in(endpoint, pem, DAY2_GROUP, cluster)
}

/// [`day2_live_nodes`] of a cluster in the resource group `group` (its id).
fn live_nodes_in(endpoint: &str, pem: &std::path::Path, group: &str, cluster: &str) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    for set in 0.. {
        let id = format!("{group}/providers/Microsoft.Compute/virtualMachineScaleSets/{cluster}-{set}");
        let got = azure_call(endpoint, pem, "GET", &format!("{id}?{DAY2_COMPUTE_API}"), None, &[]);
        if got["status"] != 200 {
            break;
        }
        let tag = |k: &str| got["body"]["tags"][k].as_str().map(str::to_owned);
        let remaking = tag(hpc_provider::clouds::azure::cluster::REMAKING_TAG).is_some();
        let listed = azure_call(endpoint, pem, "GET", &format!("{id}/virtualMachines?{DAY2_COMPUTE_API}"), None, &[]);
        let mut vms = listed["body"]["value"].as_array().cloned().unwrap_or_default();
        vms.sort_by_key(|vm| vm["instanceId"].as_str().and_then(|i| i.parse::<u64>().ok()));
        let offset = out.len();
        for (k, vm) in vms.iter().enumerate() {
            let revision = match vm["properties"]["latestModelApplied"].as_bool() {
                Some(false) => tag(hpc_provider::clouds::azure::cluster::PREVIOUS_REVISION_TAG),
                _ if remaking => None,
                _ => tag(hpc_provider::clouds::shared::REVISION_TAG),
            };
            out.push((format!("{cluster}-{}", offset + k), vm["id"].as_str().unwrap_or_default().to_owned(), revision));
        }
    }
    out
}

/// How often the node was remade in place (reimaged or redeployed), by the emulator's count: on Azure a
/// replaced node keeps its VM id, so this is how a test sees that it was replaced.
pub fn day2_remade(endpoint: &str, pem: &std::path::Path, node_id: &str) -> u64 {
    let actions = &azure_admin(endpoint, pem, "GET", "snapshot", None)["vm_actions"][node_id.to_lowercase()];
    ["reimage", "redeploy"].iter().filter_map(|a| actions[*a].as_u64()).sum()
}

// ---------------------------------------------------------------------------------------------- capacity

/// The capacity case (`acceptance/cases/capacity_azure`): cluster `cap` of Standard_NV36ads_A10_v5 (36 vCPUs
/// each, the StandardNVADSA10v5Family usage) in fabric `capfab`, resource group `capfab-rg`, location eastus
/// (no zone: the capacity limit is the location's).
pub fn capacity_setup(cli: &Cli) -> crate::capacity::Capacity {
    let (ep, pem) = start_azure();
    let (a, pa) = (ep.clone(), pem.clone());
    let (l, pl) = (ep.clone(), pem.clone());
    let w = Workdir::new(cli, "capacity_azure").env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string());
    const GROUP: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/capfab-rg";
    crate::capacity::Capacity {
        w,
        admin: Box::new(move |m, r, b| azure_admin(&a, &pa, m, r, b)),
        quota_id: "StandardNVADSA10v5Family".into(),
        quota_scope: "eastus".into(),
        quota_name: "Standard NVADSA10v5 Family vCPUs".into(),
        per_node: 36,
        zone: "eastus".into(),
        instance_type: "Standard_NV36ads_A10_v5".into(),
        live: Box::new(move || live_nodes_in(&l, &pl, GROUP, "cap").into_iter().map(|(name, _, _)| name).collect()),
        _keep: Box::new(()),
    }
}

/// Writes a Slurm configuration into a VM's userData through ARM (a PATCH of the VM), as whoever may write
/// the VM could. `vm` is its resource id.
pub fn forge_slurm_config(endpoint: &str, pem: &std::path::Path, vm: &str, config: &hpc_provider::clouds::slurm::SlurmConfig) {
    // The emulator's snapshot names resources in lower case; its API routes by ARM's spelling of the types.
    let canonical: Vec<String> = vm
        .split('/')
        .map(|seg| match seg.to_ascii_lowercase().as_str() {
            "subscriptions" => "subscriptions".to_owned(),
            "resourcegroups" => "resourceGroups".to_owned(),
            "microsoft.compute" => "Microsoft.Compute".to_owned(),
            "virtualmachines" => "virtualMachines".to_owned(),
            _ => seg.to_owned(),
        })
        .collect();
    let body = json!({"properties": {"userData": config.payload}});
    let got = azure_call(endpoint, pem, "PATCH", &format!("{}?{DAY2_COMPUTE_API}", canonical.join("/")), Some(body), &[]);
    assert!(matches!(got["status"].as_u64(), Some(200 | 202)), "{got}");
}
