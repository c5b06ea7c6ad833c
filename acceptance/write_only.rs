//! Write-only user data on every cloud, through CLIs that support write-only arguments: the nodes get
//! the secret, no state, plan file or `show -json` ever holds it, a re-plan is empty, a new version rolls
//! new user data onto the nodes (and is again kept out), and destroy leaves the emulator empty. A CLI
//! without write-only arguments is refused at the argument before anything is planned.

use base64::Engine;

use crate::cli::{Cli, Workdir, fold};
use crate::emulated::target;

const SECRET: &str = "hf_wo_7Qx2Lm9Zr4Tn";
const ROTATED: &str = "hf_wo_rotated_K3vP8sWd";

/// The case's cluster with `user_data_wo` from a variable (`ephemeral` where the CLI has ephemeral
/// variables, so not even the plan file's variables hold it).
fn with_write_only_user_data(w: &Workdir, ephemeral: bool) {
    let case = std::fs::read_to_string(w.path().join("main.tf")).unwrap();
    let marker = "resource \"hpc_gpu_cluster\" \"c\" {\n";
    assert!(case.contains(marker), "the case has no cluster c");
    let edited = case.replace(
        marker,
        &format!("{marker}  user_data_wo         = \"#!/bin/sh\\nexport HF_TOKEN=${{var.hf_token}}\\n\"\n  user_data_wo_version = var.user_data_version\n"),
    ) + &format!(
        "\nvariable \"hf_token\" {{\n  type      = string\n  sensitive = true\n{}}}\n\nvariable \"user_data_version\" {{\n  type    = number\n  default = 1\n}}\n",
        if ephemeral { "  ephemeral = true\n" } else { "" }
    );
    w.write("main.tf", &edited);
}

/// Whether `text` holds the secret as written or as the clouds encode user data (base64).
fn holds(text: &str, secret: &str) -> bool {
    let script = format!("#!/bin/sh\nexport HF_TOKEN={secret}\n");
    text.contains(secret) || text.contains(&base64::engine::general_purpose::STANDARD.encode(&script))
}

fn assert_kept_out(w: &Workdir, secret: &str, when: &str) {
    let state = std::fs::read_to_string(w.path().join("terraform.tfstate")).unwrap();
    assert!(!holds(&state, secret), "{when}: the state file holds the write-only user data");
    let shown = w.run(&["show", "-json"]).expect_code(0).stdout;
    assert!(shown.contains("\"user_data_wo_version\""), "{when}: show -json has no cluster: {shown}");
    assert!(!holds(&shown, secret), "{when}: show -json holds the write-only user data");
}

pub fn user_data_stays_out_of_state_and_plan(cli: &Cli, cloud: &str) {
    if !cli.has_write_only() {
        eprintln!("{} {:?} has no write-only arguments: see write_only_user_data_is_refused_by_a_cli_without_it", cli.name, cli.version);
        return;
    }
    let t = target(cli, cloud);
    let w = t.w.env("TF_VAR_node_count", "1").env("TF_VAR_hf_token", SECRET);
    with_write_only_user_data(&w, true);
    // The plan file and its JSON form hold nothing of it.
    let planned = w.run(&["plan", "-no-color", "-input=false", "-out=create.tfplan"]).expect_code(0);
    assert!(!holds(&planned.output(), SECRET), "the plan output holds the write-only user data");
    let plan_json = w.run(&["show", "-json", "create.tfplan"]).expect_code(0).stdout;
    assert!(plan_json.contains("\"user_data_wo_version\""), "{plan_json}");
    assert!(!holds(&plan_json, SECRET), "the plan's JSON holds the write-only user data");
    let plan_file = std::fs::read(w.path().join("create.tfplan")).unwrap();
    assert!(!holds(&String::from_utf8_lossy(&plan_file), SECRET), "the plan file holds the write-only user data");
    // An ephemeral variable must be given again when a saved plan is applied.
    w.run(&["apply", "-no-color", "-input=false", "create.tfplan"]).expect_code(0);
    assert!(holds(&(t.snapshot)(), SECRET), "{cloud}: the nodes did not get the user data");
    assert_kept_out(&w, SECRET, "after create");
    // A refresh reads the nodes' user data back from the cloud; it stays out of state, and nothing changes.
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
    assert_kept_out(&w, SECRET, "after a refresh");
    // Imported again, the nodes' user data stays out of state: the import knows them for write-only user data
    // by their revision, keeps its version, and the next plan is empty.
    let id = crate::cli::state_values(&w)["hpc_gpu_cluster.c"]["id"].as_str().unwrap().to_owned();
    w.run(&["state", "rm", "hpc_gpu_cluster.c"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_gpu_cluster.c", &id]).expect_code(0);
    assert_kept_out(&w, SECRET, "after an import");
    assert_eq!(crate::cli::state_values(&w)["hpc_gpu_cluster.c"]["user_data_wo_version"], serde_json::json!(1));
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);

    // A new version rolls the new user data onto the nodes, remade in place of the cluster (no replacement).
    let w = w.env("TF_VAR_hf_token", ROTATED).env("TF_VAR_user_data_version", "2");
    let roll = fold(&w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(2).output());
    assert!(roll.contains("~ user_data_wo_version = 1 -> 2") && !roll.contains("forces replacement"), "{roll}");
    assert!(roll.contains("Rolling update of") && roll.contains("0 to add, 1 to change, 0 to destroy"), "{roll}");
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let snapshot = (t.snapshot)();
    assert!(holds(&snapshot, ROTATED) && !holds(&snapshot, SECRET), "{cloud}: the nodes were not rolled to the new user data");
    assert_kept_out(&w, ROTATED, "after the roll");
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert!((t.empty)(), "{cloud}: the emulator still holds something after destroy");
}

/// Terraform 1.0 does not know write-only arguments and would store the value: refused at the argument.
pub fn refused_by_a_cli_without_it(cli: &Cli) {
    assert!(!cli.has_write_only(), "{} {:?} has write-only arguments", cli.name, cli.version);
    let t = target(cli, "aws");
    let w = t.w.env("TF_VAR_hf_token", SECRET);
    with_write_only_user_data(&w, false);
    let out = fold(&w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output());
    assert!(out.contains("Error: Write-only argument not supported by this CLI"), "{out}");
    assert!(
        out.contains("user_data_wo is write-only")
            && out.contains("Use OpenTofu 1.11 or Terraform 1.11 or later, or set user_data instead"),
        "{out}"
    );
    assert!(out.contains("user_data_wo ="), "the error points at the argument: {out}");
    assert!(
        !w.path().join("terraform.tfstate").exists()
            || !holds(&std::fs::read_to_string(w.path().join("terraform.tfstate")).unwrap(), SECRET)
    );
    assert!((t.empty)(), "nothing was created");
}
