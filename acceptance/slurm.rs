//! Slurm on every cloud with the real CLIs: a fabric with `slurm = true`, a GPU cluster that joins it and
//! `hpc_slurm_cluster` over it plan with the controller, login node and configuration in the plan, apply,
//! re-plan empty, grow the cluster (the configuration changes in place, which the plan says), and destroy to
//! an inventory empty of everything the configuration made.

use std::any::Any;

use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use serde_json::Value;

use crate::cli::{Cli, Workdir, fold};

struct OnCloud {
    w: Workdir,
    inventory: Box<dyn Fn() -> Value>,
    _emulator: Box<dyn Any>,
}

fn on(cli: &Cli, cloud: &str) -> OnCloud {
    let case = format!("slurm_{cloud}");
    match cloud {
        "aws" => {
            let emulator = start_aws();
            let ep = emulator.endpoint.clone();
            let a = ep.clone();
            OnCloud {
                w: Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep),
                inventory: Box::new(move || admin(&a, "GET", "inventory", None)),
                _emulator: Box::new(emulator),
            }
        }
        "gcp" => {
            let ep = start_gcp();
            let a = ep.clone();
            OnCloud {
                w: Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep),
                inventory: Box::new(move || admin(&a, "GET", "inventory", None)),
                _emulator: Box::new(()),
            }
        }
        "azure" => {
            let (ep, pem) = start_azure();
            let (a, pa) = (ep.clone(), pem.clone());
            OnCloud {
                w: Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string()),
                inventory: Box::new(move || azure_admin(&a, &pa, "GET", "inventory", None)),
                _emulator: Box::new(()),
            }
        }
        "oci" => {
            let (ep, key) = start_oci();
            let a = ep.clone();
            OnCloud {
                w: Workdir::new(cli, &case)
                    .env("TF_VAR_endpoint", &ep)
                    .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
                    .env("TF_VAR_fingerprint", &key.fingerprint),
                inventory: Box::new(move || admin(&a, "GET", "inventory", None)),
                _emulator: Box::new(key),
            }
        }
        other => panic!("no cloud {other}"),
    }
}

fn plan(w: &Workdir, code: i32) -> String {
    fold(&w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code).stdout)
}

fn apply(w: &Workdir) {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
}

fn outputs(w: &Workdir) -> Value {
    serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap()
}

pub fn slurm_lifecycle(cli: &Cli, cloud: &str) {
    let c = on(cli, cloud);
    let w = &c.w;
    let planned = plan(w, 2);
    // The pieces and the configuration are in the first plan; the key is not.
    assert!(planned.contains("ml-controller") && planned.contains("10.0.255.244") && planned.contains("SwitchName="), "{planned}");
    assert!(planned.contains("slurm_join") && planned.contains("(sensitive value)"), "{planned}");
    apply(w);
    plan(w, 0);
    let out = outputs(w);
    let conf = out["slurm_conf"]["value"].as_str().unwrap();
    assert!(conf.contains("SlurmctldHost=ml-controller(10.0.255.244)") && conf.contains("NodeName=gpu-[0-1]"), "{conf}");
    assert!(conf.contains("PartitionName=gpu Nodes=gpu-[0-1] Default=YES"), "{conf}");
    let groups = out["placement_groups"]["value"].as_array().unwrap();
    let topology = out["topology_conf"]["value"].as_str().unwrap();
    for g in groups {
        assert!(topology.contains(&format!("SwitchName={} Nodes=gpu-[0-1]", g["name"].as_str().unwrap())), "{topology}");
    }
    assert!(out["login_command"]["value"].as_str().unwrap().starts_with("ssh "), "{out}");
    assert!(out["nccl_test"]["value"].as_str().unwrap().contains("#SBATCH --partition=gpu"), "{out}");

    // A third node: the cluster grows in place, and the Slurm configuration with it, also in place (the
    // controller and login node take it from their metadata): the plan says so, and destroys nothing.
    w.write("terraform.tfvars", "node_count = 3\n");
    let grow = plan(w, 2);
    assert!(grow.contains("The Slurm configuration changes") && grow.contains("Nothing is made again"), "{grow}");
    assert!(grow.contains("hpc_slurm_cluster.ml will be updated in-place") && !grow.contains("must be replaced"), "{grow}");
    assert!(grow.contains("node_count = 2 -> 3") && grow.contains("0 to destroy"), "{grow}");
    apply(w);
    plan(w, 0);
    assert!(outputs(w)["slurm_conf"]["value"].as_str().unwrap().contains("NodeName=gpu-[0-2]"));

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inventory = (c.inventory)();
    assert_eq!(inventory["empty"], true, "{inventory}");
}
