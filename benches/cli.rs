//! The provider as users run it: OpenTofu (`HPC_TOFU`, set by `./scripts/bench.sh`) applying, re-planning
//! and destroying 1, 10 and 100 clusters of 64 nodes each on the Google Cloud emulator (in this process),
//! with `-parallelism` at its default, timed end to end and counted in API requests. Then the same 64 nodes
//! written the way the raw vendor resources force (one resource per node: here 64 one-node clusters, the
//! stand-in for `aws_instance` x 64, since no build of the official providers is served to this machine),
//! against one 64-node cluster: plan and refresh time and requests, and the ratios. Prints figures.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hpc_emulators::harness::{admin, start_gcp};

struct Work {
    dir: tempfile::TempDir,
    tofu: PathBuf,
    endpoint: String,
}

impl Work {
    fn new(tofu: &Path, endpoint: &str) -> Work {
        let dir = tempfile::Builder::new().prefix("hpc-bench-cli-").tempdir().unwrap();
        let provider_dir = Path::new(env!("CARGO_BIN_EXE_terraform-provider-hpc")).parent().unwrap().to_path_buf();
        let rc = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"hpc-platform/hpc\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            provider_dir.display()
        );
        std::fs::write(dir.path().join("cli.tfrc"), rc).unwrap();
        Work { dir, tofu: tofu.to_path_buf(), endpoint: endpoint.to_owned() }
    }

    /// `tofu <args>`, timed; panics with the output when it fails.
    fn run(&self, args: &[&str]) -> Duration {
        let started = Instant::now();
        let out = Command::new(&self.tofu)
            .args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("cli.tfrc"))
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_VAR_endpoint", &self.endpoint)
            .output()
            .unwrap();
        let took = started.elapsed();
        // With -detailed-exitcode, 0 also means the re-plan found nothing to change.
        assert!(
            out.status.success(),
            "tofu {args:?} exited {:?}\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        took
    }
}

const HEADER: &str = r#"
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}
variable "endpoint" { type = string }
provider "hpc" {
  gcp {
    project  = "bench-project"
    endpoint = var.endpoint
  }
}
resource "hpc_gpu_fabric" "f" {
  name          = "bench"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = "a3-megagpu-8g"
}
"#;

/// `clusters` clusters of `nodes` nodes each on one fabric.
fn config(clusters: usize, nodes: u32) -> String {
    let mut text = HEADER.to_owned();
    text.push_str(&format!(
        "resource \"hpc_gpu_cluster\" \"c\" {{\n  count      = {clusters}\n  name       = \"c${{count.index}}\"\n  fabric     = hpc_gpu_fabric.f\n  node_count = {nodes}\n}}\n"
    ));
    text
}

fn requests(endpoint: &str) -> u64 {
    admin(endpoint, "GET", "counters", None)["counters"].as_object().map(|m| m.values().filter_map(|v| v.as_u64()).sum()).unwrap_or(0)
}

/// Apply, re-plan (a refresh of everything) and destroy `clusters` x `nodes`; (apply, plan, destroy, plan
/// requests). Without `timed_destroy` the emulator is reset instead of destroying through the CLI.
fn cycle(work: &Work, clusters: usize, nodes: u32, timed_destroy: bool) -> (Duration, Duration, Option<Duration>, u64) {
    std::fs::write(work.dir.path().join("main.tf"), config(clusters, nodes)).unwrap();
    let apply = work.run(&["apply", "-no-color", "-input=false", "-auto-approve"]);
    admin(&work.endpoint, "DELETE", "counters", None);
    let plan = work.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
    let plan_requests = requests(&work.endpoint);
    let destroy = if timed_destroy {
        Some(work.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]))
    } else {
        admin(&work.endpoint, "POST", "reset", None);
        std::fs::remove_file(work.dir.path().join("terraform.tfstate")).unwrap();
        None
    };
    (apply, plan, destroy, plan_requests)
}

fn main() {
    let Ok(tofu) = std::env::var("HPC_TOFU") else {
        println!("benches/cli.rs: set HPC_TOFU (./scripts/bench.sh does) to time tofu plan and apply; skipped");
        return;
    };
    let endpoint = start_gcp();
    let work = Work::new(Path::new(&tofu), &endpoint);
    println!("tofu on the Google Cloud emulator: N clusters x 64 a3-megagpu-8g nodes, one fabric, default -parallelism");
    println!("{:>9} {:>7} {:>10} {:>10} {:>10} {:>14}", "clusters", "nodes", "apply", "re-plan", "destroy", "plan requests");
    for clusters in [1usize, 10, 100] {
        // 6400 nodes take 6400 single-VM deletes (Compute has no batch delete): over 5 minutes at the ~20/s
        // mutation rate the client keeps to, so the largest case is torn down by resetting the emulator.
        let (apply, plan, destroy, plan_requests) = cycle(&work, clusters, 64, clusters < 100);
        println!(
            "{clusters:>9} {:>7} {:>9.1}s {:>9.1}s {:>10} {plan_requests:>14}",
            clusters * 64,
            apply.as_secs_f64(),
            plan.as_secs_f64(),
            destroy.map_or_else(|| "(reset)".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()))
        );
    }
    let inventory = admin(&endpoint, "GET", "inventory", None);
    assert_eq!(inventory["empty"], true, "{inventory}");

    println!();
    println!("64 nodes as one cluster vs one resource per node (64 one-node clusters: the raw-resources stand-in)");
    let (one_apply, one_plan, _, one_requests) = cycle(&work, 1, 64, true);
    let (many_apply, many_plan, _, many_requests) = cycle(&work, 64, 1, true);
    println!("{:<28} {:>10} {:>10} {:>14}", "", "apply", "re-plan", "plan requests");
    println!("{:<28} {:>9.1}s {:>9.1}s {one_requests:>14}", "one 64-node cluster", one_apply.as_secs_f64(), one_plan.as_secs_f64());
    println!("{:<28} {:>9.1}s {:>9.1}s {many_requests:>14}", "64 one-node resources", many_apply.as_secs_f64(), many_plan.as_secs_f64());
    println!(
        "ratios (per-node resources / one cluster): apply {:.1}x, re-plan {:.1}x, plan requests {:.1}x",
        many_apply.as_secs_f64() / one_apply.as_secs_f64(),
        many_plan.as_secs_f64() / one_plan.as_secs_f64(),
        many_requests as f64 / one_requests.max(1) as f64
    );
}
