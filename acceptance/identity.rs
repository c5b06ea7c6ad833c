//! Resource identity on every cloud, with a CLI that has it: each resource's identity is recorded in the
//! state, and `import` blocks naming an identity (`identity = { cloud = ..., location = ..., name = ... }`)
//! instead of an id adopt the fabric, the cluster and the filesystem into the same state a create made.

use crate::cli::{Cli, state_values};
use crate::emulated::target;

const ADDRESSES: [&str; 3] = ["hpc_gpu_fabric.f", "hpc_gpu_cluster.c", "hpc_parallel_filesystem.fs"];

/// An `identity = { ... }` object for an import id.
fn identity_of(id: &str) -> String {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        ["oci", region, compartment, name] => {
            format!(
                "{{\n    cloud          = \"oci\"\n    location       = \"{region}\"\n    compartment_id = \"{compartment}\"\n    name           = \"{name}\"\n  }}"
            )
        }
        [cloud, location, name] => {
            format!("{{\n    cloud    = \"{cloud}\"\n    location = \"{location}\"\n    name     = \"{name}\"\n  }}")
        }
        _ => panic!("not an import id: {id}"),
    }
}

pub fn import_blocks_by_identity(cli: &Cli, cloud: &str) {
    if !cli.has_import_identity() {
        eprintln!("{} {:?} has no import by identity (OpenTofu 1.12 or Terraform 1.12 needed): skipped", cli.name, cli.version);
        return;
    }
    let t = target(cli, cloud);
    let w = t.w.env("TF_VAR_node_count", "1");
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let created = state_values(&w);
    // The state records each resource's identity.
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(w.path().join("terraform.tfstate")).unwrap()).unwrap();
    for r in state["resources"].as_array().unwrap().iter().filter(|r| r["mode"] == "managed") {
        let instance = &r["instances"][0];
        let id = instance["attributes"]["id"].as_str().unwrap();
        assert_eq!(instance["identity"]["cloud"], cloud, "{}: {instance}", r["type"]);
        assert_eq!(instance["identity"]["name"].as_str(), id.rsplit('/').next(), "{}: {instance}", r["type"]);
    }
    w.run(&["state", "rm", ADDRESSES[0], ADDRESSES[1], ADDRESSES[2]]).expect_code(0);
    let blocks: String = ADDRESSES
        .iter()
        .map(|a| {
            let id = created[*a]["id"].as_str().unwrap();
            format!("import {{\n  to       = {a}\n  identity = {}\n}}\n", identity_of(id))
        })
        .collect();
    w.write("imports.tf", &blocks);
    let planned = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(planned.contains("3 to import, 0 to add, 0 to change, 0 to destroy"), "{planned}");
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_eq!(state_values(&w), created, "{cloud}: imported by identity");
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
    // An identity that names no cloud is refused with the valid values.
    std::fs::remove_file(w.path().join("imports.tf")).unwrap();
    w.run(&["state", "rm", ADDRESSES[0]]).expect_code(0);
    w.write("imports.tf", "import {\n  to       = hpc_gpu_fabric.f\n  identity = {\n    cloud    = \"gpc\"\n    location = \"x\"\n    name     = \"accfab\"\n  }\n}\n");
    let bad = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
    assert!(bad.contains("Invalid import identity") && bad.contains("\"aws\", \"azure\", \"gcp\" or \"oci\""), "{bad}");
    std::fs::remove_file(w.path().join("imports.tf")).unwrap();
    w.run(&["import", "-no-color", "-input=false", ADDRESSES[0], created[ADDRESSES[0]]["id"].as_str().unwrap()]).expect_code(0);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert!((t.empty)(), "{cloud}: the emulator still holds something after destroy");
}
