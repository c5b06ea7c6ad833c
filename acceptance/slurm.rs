//! `examples/slurm/<cloud>` with the real CLIs, on each cloud's emulator: a fabric with `slurm = true`, GPU
//! clusters that join it and `hpc_slurm_cluster` over them plan with the controller, login node and
//! configuration in the plan, apply and re-plan empty; the configuration the apply made runs on a real Slurm
//! (Debian's slurmctld and slurmd, `tests/slurm/harness.rs`): the topology is the clusters' placement, each
//! partition has its nodes, a node registers and runs a job. Then a grow re-renders the configuration, which
//! the plan shows as an update in place that destroys nothing, and destroy leaves the emulators empty.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cli::{Cli, Workdir, fold};
use crate::examples::{Emulators, apply, install, outputs};

// The real Slurm of tests/slurm; this suite uses part of it.
#[allow(dead_code)]
#[path = "../tests/slurm/harness.rs"]
mod harness;

fn plan(w: &Workdir, code: i32) -> String {
    fold(&w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code).stdout)
}

/// The example's rendered configuration, as its outputs give it.
fn rendered(out: &Value) -> harness::Rendered {
    let text = |k: &str| out[k]["value"].as_str().map(str::to_owned);
    harness::Rendered {
        slurm_conf: text("slurm_conf").expect("slurm_conf"),
        gres_conf: text("gres_conf").expect("gres_conf"),
        // This machine runs no cgroup plugins (harness.rs), so nothing reads it.
        cgroup_conf: String::new(),
        topology_conf: text("topology_conf"),
        healthcheck: text("healthcheck_program").expect("healthcheck_program"),
    }
}

/// `scontrol show topology`'s leaf switches, by name, with their nodes.
fn leaves(shown: &str) -> BTreeMap<String, String> {
    shown
        .lines()
        .filter(|l| l.contains("Level=0"))
        .filter_map(|l| {
            let word = |k: &str| l.split_whitespace().find_map(|w| w.strip_prefix(k)).map(str::to_owned);
            Some((word("SwitchName=")?, word("Nodes=")?))
        })
        .collect()
}

/// The placement groups the clusters report, merged by name (two clusters in one placement group), each
/// with its nodes as Slurm writes a host list.
fn placement(out: &Value) -> BTreeMap<String, String> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in out["placement_groups"]["value"].as_array().into_iter().flatten() {
        let nodes = g["nodes"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(str::to_owned));
        groups.entry(g["name"].as_str().unwrap_or_default().to_owned()).or_default().extend(nodes);
    }
    groups.into_iter().map(|(k, v)| (k, hpc_provider::nodes::compress(&v))).collect()
}

pub fn slurm_lifecycle(cli: &Cli, cloud: &str) {
    let clouds = Emulators::start();
    let w = clouds.env(Workdir::for_path(cli, &format!("examples/slurm/{cloud}")));
    install(&w);
    let planned = plan(&w, 2);
    // The pieces and the configuration are in the first plan; the key is not.
    assert!(planned.contains("ml-controller") && planned.contains("10.0.255.244") && planned.contains("SwitchName="), "{planned}");
    assert!(planned.contains("slurm_join") && planned.contains("(sensitive value)"), "{planned}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out = outputs(&w);
    let conf = out["slurm_conf"]["value"].as_str().unwrap();
    assert!(conf.contains("SlurmctldHost=ml-controller(10.0.255.244)"), "{conf}");
    assert!(out["login"]["value"].as_str().unwrap().starts_with("ssh "), "{out}");
    let (nccl_key, first) = if cloud == "aws" { ("nccl_test_h100", "train-0") } else { ("nccl_test", "train-0") };
    assert!(out[nccl_key]["value"].as_str().unwrap().contains("#SBATCH --partition=h100"), "{out}");

    // What the apply made, on a real Slurm: the topology is the placement, the partitions have their nodes.
    let mut slurm = harness::Slurm::start(&rendered(&out));
    let placed = placement(&out);
    assert!(!placed.is_empty(), "{out}");
    assert_eq!(leaves(&slurm.ok("scontrol", &["show", "topology"])), placed, "Slurm's topology is the cloud's placement");
    let partitions = slurm.ok("sinfo", &["-h", "-o", "%P %D"]);
    let expected = if cloud == "aws" { "h100* 8\ndev 2" } else { "h100* 2" };
    assert_eq!(partitions.trim(), expected);
    slurm.slurmd(first, &[]);
    slurm.wait_node(first, "registered and idle", |s| s.contains("State=IDLE") && !s.contains("POWERED_DOWN"));
    assert_eq!(slurm.job(&["-p", "h100", "-w", first, "--wrap", "hostname"]), "COMPLETED");
    drop(slurm);

    // A node more: the cluster grows in place, and the Slurm configuration with it, also in place (the
    // controller and login node take it from their metadata): the plan says so, and destroys nothing.
    let (var, grown) = if cloud == "aws" { ("train_nodes", 9) } else { ("nodes", 3) };
    w.write("terraform.tfvars", &format!("{var} = {grown}\n"));
    let grow = plan(&w, 2);
    assert!(grow.contains("The Slurm configuration changes") && grow.contains("Nothing is made again"), "{grow}");
    assert!(grow.contains("hpc_slurm_cluster.ml will be updated in-place") && !grow.contains("must be replaced"), "{grow}");
    assert!(grow.contains(&format!("node_count = {} -> {grown}", grown - 1)) && grow.contains("0 to destroy"), "{grow}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let conf = outputs(&w)["slurm_conf"]["value"].as_str().unwrap().to_owned();
    assert!(conf.contains(&format!("NodeName=train-[0-{}]", grown - 1)), "{conf}");

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    clouds.assert_empty(&format!("examples/slurm/{cloud}"));
}
