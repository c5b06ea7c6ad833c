//! Azure on the project's ARM emulator (HTTPS, its certificate trusted through HPC_AZURE_CA_FILE) with the
//! real CLIs: fabric, an ND H100 v5 cluster and Azure Managed Lustre created, an empty re-plan, scale 4 -> 6 in place, a VM
//! deleted outside shown and repaired, one VM list per scale set on refresh, a 150-node plan with two
//! scale sets, import of all three, destroy to an empty inventory.

use hpc_emulators::harness::{azure_admin, start_azure};
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
    let drift = plan(&w, 2).stdout;
    assert!(crate::cli::fold(&drift).contains("node_count = 5 -> 6") && drift.contains("+ \"acc-5\""), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    assert_eq!(admin("GET", "inventory", None)["resources"]["arm"]["virtualMachines"].as_array().map(Vec::len), Some(6));
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3", "acc-4", "acc-5"]);

    // 150 nodes do not fit one InfiniBand scale set: the plan shows a second one.
    w.write("terraform.tfvars", "node_count = 150\n");
    let big = plan(&w, 2).stdout;
    assert!(big.contains(r#"name     = "acc-1""#) && crate::cli::fold(&big).contains(r#""instances" = "75""#), "{big}");
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
