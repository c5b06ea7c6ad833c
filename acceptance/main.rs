//! Acceptance tests: the real OpenTofu and Terraform CLIs drive the freshly built provider through
//! dev_overrides. Every case runs with the two CLIs users run today, OpenTofu (the newest release the Go
//! module proxy serves) and the newest Terraform on the machine; Terraform 1.0.3, the oldest CLI supported,
//! runs a smoke set. Run through `./scripts/test.sh` (it installs the CLIs and sets HPC_TOFU,
//! HPC_TERRAFORM and HPC_TERRAFORM_OLDEST).

mod aws;
mod azure;
mod booted;
mod capacity;
mod cli;
mod day2;
mod emulated;
mod examples;
mod faults;
mod functions;
mod gcp;
mod identity;
mod install;
mod kubernetes;
mod logs;
mod oci;
mod ownership;
mod postgres;
mod rack_scale;
mod security;
mod slurm;
mod vendor_clients;
mod write_only;

use cli::{Cli, Workdir, example_dirs, fold};
use install::{
    install_from_a_network_mirror, install_from_the_registry, install_refuses_a_signature_by_another_key,
    install_refuses_a_tampered_archive,
};

/// The modern Terraform, or a note that the machine has none (the case then checks nothing more).
fn modern_terraform() -> Option<Cli> {
    let cli = Cli::terraform();
    if cli.is_none() {
        eprintln!("no Terraform 1.11 or later on this machine (HPC_TERRAFORM unset): this Terraform case is skipped");
    }
    cli
}

/// Every case runs with OpenTofu; those whose outcome depends on the CLI (its protocol client, rendering,
/// diagnostics, state backends, import and write-only handling, examples) also with the newest Terraform.
/// A case that drives the same provider calls whichever CLI sends them (day-2 work, capacity, rack-scale
/// layouts, networks a cluster owns) runs once per cloud, with OpenTofu.
macro_rules! for_the_clis {
    (both: [$($case:ident),* $(,)?], tofu_only: [$($only:ident),* $(,)?] $(,)?) => {
        mod tofu {
            $(#[test] fn $case() { super::$case(&super::Cli::tofu()); })*
            $(#[test] fn $only() { super::$only(&super::Cli::tofu()); })*
        }
        mod terraform {
            $(#[test] fn $case() { if let Some(cli) = super::modern_terraform() { super::$case(&cli); } })*
        }
    };
}

/// The oldest supported CLI: one lifecycle case per cloud, the examples' plans, and what it is refused.
macro_rules! for_the_oldest_cli {
    ($($case:ident),* $(,)?) => {
        mod terraform_oldest {
            $(#[test] fn $case() { super::$case(&super::Cli::terraform_oldest()); })*
        }
    };
}

for_the_oldest_cli!(
    handshake_and_mutual_tls_with_the_real_cli,
    every_example_validates_and_plans,
    aws_cluster_lifecycle_on_the_emulator,
    gcp_a3_mega_cluster_lifecycle,
    azure_nd_h100_cluster_lifecycle,
    oci_h100_cluster_lifecycle,
    functions_are_refused_by_a_cli_without_them,
    write_only_user_data_is_refused_by_a_cli_without_it,
    install_from_the_registry,
    install_refuses_a_signature_by_another_key,
);

for_the_clis!(
    both: [
        catalog_data_source_plans_applies_and_replans_empty,
        nccl_check_classifies_the_three_samples,
        bad_input_reports_each_error_at_its_attribute,
        bad_provider_config_points_into_the_provider_block,
        handshake_and_mutual_tls_with_the_real_cli,
        every_example_validates_and_plans,
        cloud_examples_show_their_vendor_expansion,
        validation_errors_point_at_their_attributes,
        plan_time_errors_point_at_their_attributes,
        checklist_warnings_reach_the_user,
        aws_cluster_lifecycle_on_the_emulator,
        aws_cloud_failures_reach_the_user_and_nothing_is_lost,
        gcp_a3_mega_cluster_lifecycle,
        gcp_a3_ultra_roce_layout,
        azure_nd_h100_cluster_lifecycle,
        oci_h100_cluster_lifecycle,
        secrets_stay_out_of_logs_and_state,
        every_example_applies_replans_empty_and_destroys,
        every_module_example_applies_replans_empty_and_destroys,
        the_plan_shows_the_estimated_hourly_cost,
        media_on_h100_is_refused_with_the_node_types_that_have_encoders,
        an_l4_inference_cluster_runs_on_ethernet,
        gpu_selfcheck_fragment_composes_with_user_data,
        teams_share_an_aws_account,
        teams_share_a_gcp_project,
        teams_share_an_azure_subscription,
        teams_share_an_oci_tenancy,
        aws_state_from_the_previous_release,
        gcp_state_from_the_previous_release,
        azure_state_from_the_previous_release,
        oci_state_from_the_previous_release,
        composition_example_with_an_existing_estate,
        import_example_adopts_an_existing_cluster,
        functions_compute_in_locals_validation_and_outputs,
        aws_write_only_user_data_stays_out_of_state_and_plan,
        gcp_write_only_user_data_stays_out_of_state_and_plan,
        azure_write_only_user_data_stays_out_of_state_and_plan,
        oci_write_only_user_data_stays_out_of_state_and_plan,
        aws_import_blocks_by_identity,
        gcp_import_blocks_by_identity,
        azure_import_blocks_by_identity,
        oci_import_blocks_by_identity,
        nvl72_mistakes_are_refused_at_plan_time,
        slurm_aws,
        slurm_gcp,
        slurm_azure,
        slurm_oci,
        aws_node_pool_lifecycle,
        gcp_node_pool_lifecycle,
        azure_node_pool_lifecycle,
        oci_node_pool_lifecycle,
        install_from_a_network_mirror,
        install_from_the_registry,
        install_refuses_a_tampered_archive,
        install_refuses_a_signature_by_another_key,
    ],
    tofu_only: [
        oci_a10_media_cluster_on_ethernet,
        azure_nv_a10_inference_cluster,
        gcp_l4_inference_without_a_fabric,
        own_network_is_kept_when_nodes_fail,
        lustre_on_a_clusters_own_network,
        azure_gb200_nvl72_cluster_lifecycle,
        gcp_gb200_nvl72_cluster_lifecycle,
        aws_gb200_nvl72_cluster_lifecycle,
        oci_gb200_nvl72_cluster_lifecycle,
        day2_aws,
        day2_gcp,
        day2_azure,
        day2_oci,
        capacity_aws,
        capacity_gcp,
        capacity_azure,
        capacity_oci,
        logs_aws,
        logs_gcp,
        logs_azure,
        logs_oci,
        slurm_boots_aws,
        slurm_boots_gcp,
        slurm_boots_azure,
        slurm_boots_oci,
        slurm_import_aws,
        slurm_import_gcp,
        slurm_import_azure,
        slurm_import_oci,
    ],
);

/// The ownership cases, one test per cloud.
macro_rules! on_cloud {
    ($($name:ident => $case:path, $cloud:literal;)*) => {
        $(fn $name(cli: &Cli) { $case(cli, $cloud); })*
    };
}

on_cloud! {
    teams_share_an_aws_account => ownership::teams_in_one_account, "aws";
    teams_share_a_gcp_project => ownership::teams_in_one_account, "gcp";
    teams_share_an_azure_subscription => ownership::teams_in_one_account, "azure";
    teams_share_an_oci_tenancy => ownership::teams_in_one_account, "oci";
    aws_state_from_the_previous_release => ownership::state_from_the_previous_release, "aws";
    gcp_state_from_the_previous_release => ownership::state_from_the_previous_release, "gcp";
    azure_state_from_the_previous_release => ownership::state_from_the_previous_release, "azure";
    oci_state_from_the_previous_release => ownership::state_from_the_previous_release, "oci";
    aws_write_only_user_data_stays_out_of_state_and_plan => write_only::user_data_stays_out_of_state_and_plan, "aws";
    gcp_write_only_user_data_stays_out_of_state_and_plan => write_only::user_data_stays_out_of_state_and_plan, "gcp";
    azure_write_only_user_data_stays_out_of_state_and_plan => write_only::user_data_stays_out_of_state_and_plan, "azure";
    oci_write_only_user_data_stays_out_of_state_and_plan => write_only::user_data_stays_out_of_state_and_plan, "oci";
    aws_import_blocks_by_identity => identity::import_blocks_by_identity, "aws";
    azure_gb200_nvl72_cluster_lifecycle => rack_scale::nvl72_cluster_lifecycle, "azure";
    gcp_gb200_nvl72_cluster_lifecycle => rack_scale::nvl72_cluster_lifecycle, "gcp";
    aws_gb200_nvl72_cluster_lifecycle => rack_scale::nvl72_cluster_lifecycle, "aws";
    oci_gb200_nvl72_cluster_lifecycle => rack_scale::nvl72_cluster_lifecycle, "oci";
    gcp_import_blocks_by_identity => identity::import_blocks_by_identity, "gcp";
    azure_import_blocks_by_identity => identity::import_blocks_by_identity, "azure";
    oci_import_blocks_by_identity => identity::import_blocks_by_identity, "oci";
    day2_aws => day2::node_lifecycle, "aws";
    day2_gcp => day2::node_lifecycle, "gcp";
    day2_azure => day2::node_lifecycle, "azure";
    day2_oci => day2::node_lifecycle, "oci";
    capacity_aws => capacity::quota_and_policies, "aws";
    capacity_gcp => capacity::quota_and_policies, "gcp";
    capacity_azure => capacity::quota_and_policies, "azure";
    capacity_oci => capacity::quota_and_policies, "oci";
    slurm_aws => slurm::slurm_lifecycle, "aws";
    slurm_gcp => slurm::slurm_lifecycle, "gcp";
    slurm_azure => slurm::slurm_lifecycle, "azure";
    slurm_oci => slurm::slurm_lifecycle, "oci";
    slurm_boots_aws => slurm::slurm_boots, "aws";
    slurm_boots_gcp => slurm::slurm_boots, "gcp";
    slurm_boots_azure => slurm::slurm_boots, "azure";
    slurm_boots_oci => slurm::slurm_boots, "oci";
    slurm_import_aws => slurm::slurm_import_changes_nothing, "aws";
    slurm_import_gcp => slurm::slurm_import_changes_nothing, "gcp";
    slurm_import_azure => slurm::slurm_import_changes_nothing, "azure";
    slurm_import_oci => slurm::slurm_import_changes_nothing, "oci";
    logs_aws => logs::logs_hold_each_call_retry_and_progress_and_no_secret, "aws";
    logs_gcp => logs::logs_hold_each_call_retry_and_progress_and_no_secret, "gcp";
    logs_azure => logs::logs_hold_each_call_retry_and_progress_and_no_secret, "azure";
    logs_oci => logs::logs_hold_each_call_retry_and_progress_and_no_secret, "oci";
}

fn aws_node_pool_lifecycle(cli: &Cli) {
    kubernetes::aws_node_pool_lifecycle(cli);
}

fn gcp_node_pool_lifecycle(cli: &Cli) {
    kubernetes::gcp_node_pool_lifecycle(cli);
}

fn azure_node_pool_lifecycle(cli: &Cli) {
    kubernetes::azure_node_pool_lifecycle(cli);
}

fn oci_node_pool_lifecycle(cli: &Cli) {
    kubernetes::oci_node_pool_lifecycle(cli);
}

fn azure_nv_a10_inference_cluster(cli: &Cli) {
    azure::nv_a10_inference_cluster(cli);
}

fn lustre_on_a_clusters_own_network(cli: &Cli) {
    aws::lustre_on_a_clusters_own_network(cli);
}

fn own_network_is_kept_when_nodes_fail(cli: &Cli) {
    aws::own_network_is_kept_when_nodes_fail(cli);
}

fn gcp_l4_inference_without_a_fabric(cli: &Cli) {
    gcp::l4_inference_without_a_fabric(cli);
}

fn oci_a10_media_cluster_on_ethernet(cli: &Cli) {
    oci::a10_media_cluster_on_ethernet(cli);
}

fn gpu_selfcheck_fragment_composes_with_user_data(cli: &Cli) {
    let w = Workdir::new(cli, "selfcheck");
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let out = w.run(&["output", "-json"]).expect_code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["expected_gpus"]["value"], 8);
    assert_eq!(json["expected_rdma_devices"]["value"], 32);
    let script = json["script"]["value"].as_str().unwrap_or_else(|| panic!("no script output: {json}"));
    assert_eq!(json["script"]["sensitive"], false);
    assert!(script.starts_with("#!/bin/bash\n") && script.contains("\nset -euo pipefail\n"), "{script}");
    assert!(script.contains("\nEXPECTED_GPUS=8\n") && script.contains("\nRDMA_MIN=32\n"), "{script}");
    assert!(script.contains("docker run -d --name hpc-dcgm-exporter --gpus all"), "{script}");
    let file = w.path().join("selfcheck.sh");
    std::fs::write(&file, script).unwrap();
    let syntax = std::process::Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(syntax.status.success(), "{}", String::from_utf8_lossy(&syntax.stderr));
    // The self-check plus the user's cloud-config, in one MIME document.
    let len = json["combined_user_data_length"]["value"].as_u64().unwrap_or_else(|| panic!("{json}"));
    assert!(len as usize > script.len() + "#cloud-config\npackages: [htop]\n".len(), "{json}");
    assert_eq!(json["combined_user_data_is_set"]["value"], true);
    // The data source reads the same on every run: the re-plan is empty.
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
}

fn media_on_h100_is_refused_with_the_node_types_that_have_encoders(cli: &Cli) {
    let w = Workdir::new(cli, "media_on_p5");
    let text = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
    assert_diagnostic(&w, &text, "No hardware video encoder", "workload   = \"media\"", "p5.48xlarge has H100 GPUs, which have no NVENC");
    assert!(fold(&text).contains("g6.xlarge (1x L4, 2 NVENC each)"), "{text}");
}

fn an_l4_inference_cluster_runs_on_ethernet(cli: &Cli) {
    aws::l4_inference_without_a_fabric(cli);
}

fn the_plan_shows_the_estimated_hourly_cost(cli: &Cli) {
    let w = Workdir::new(cli, "cost");
    let listed = fold(&w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout);
    assert!(listed.contains("+ estimated_hourly_cost_usd = 880.64"), "16 x $55.04:\n{listed}");
    assert!(listed.contains("16 x p5.48xlarge at $55.04/h on-demand list price (AWS EC2 On-Demand"), "{listed}");
    assert!(listed.contains("+ estimated_hourly_cost_usd = 1.43"), "7200 GiB x $0.145 / 730:\n{listed}");
    // Negotiated rates in the provider block replace the list prices.
    let own = w.run(&["plan", "-no-color", "-input=false", r#"-var=prices={"p5.48xlarge"=40,"aws-lustre-125"=0.1}"#]).expect_code(0);
    let own = fold(&own.stdout);
    assert!(own.contains("+ estimated_hourly_cost_usd = 640") && own.contains("from the provider's prices"), "{own}");
    assert!(own.contains("+ estimated_hourly_cost_usd = 0.99"), "7200 x 0.1 / 730:\n{own}");
    // Spot is not guessed at.
    let spot = fold(&w.run(&["plan", "-no-color", "-input=false", "-var=capacity_type=spot"]).expect_code(0).stdout);
    assert!(!spot.contains("estimated_hourly_cost_usd = 880.64"), "{spot}");
    assert!(spot.contains("Not estimated for spot capacity"), "{spot}");
    // A negative price is refused at the provider block.
    let bad = w.run(&["plan", "-no-color", "-input=false", r#"-var=prices={"p5.48xlarge"=-1}"#]).expect_code(1).output();
    assert!(bad.contains("Error: Invalid price") && bad.contains("in provider \"hpc\""), "{bad}");
}

/// The composition and import examples use terraform_data, moved and import blocks, which Terraform 1.0 lacks.
fn composition_example_with_an_existing_estate(cli: &Cli) {
    examples::composition_with_an_existing_estate(cli);
}

fn import_example_adopts_an_existing_cluster(cli: &Cli) {
    examples::import_blocks_adopt_an_existing_cluster(cli);
}

fn functions_compute_in_locals_validation_and_outputs(cli: &Cli) {
    functions::compute_in_locals_validation_and_outputs(cli);
}

fn functions_are_refused_by_a_cli_without_them(cli: &Cli) {
    functions::refused_by_a_cli_without_them(cli);
}

fn write_only_user_data_is_refused_by_a_cli_without_it(cli: &Cli) {
    write_only::refused_by_a_cli_without_it(cli);
}

/// The README's first command, as a fresh machine runs it (with the provider this test run built).
#[test]
fn main_job_runs_and_narrates() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // One stream, as a terminal shows it: the narration goes to stderr, the CLI's output to stdout.
    let out = std::process::Command::new("bash")
        .args(["-c", "bash \"$0\" 2>&1"])
        .arg(root.join("scripts/demo.sh"))
        .env("HPC_PROVIDER_DIR", cli::provider_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    // Installed as users install it: a signed release, from a registry, pinned in the lock file.
    let installed = format!("- Installed hpc-platform/hpc v{} (signed, key ID", env!("CARGO_PKG_VERSION"));
    let steps = [
        "==> scripts/release.sh: terraform-provider-hpc",
        // The main job asks for a demo release, which says so.
        "DEMO RELEASE: signed with a throwaway key",
        "_SHA256SUMS.sig",
        "services = { \"providers.v1\" = \"https://127.0.0.1:",
        installed.as_str(),
        "provider \"registry.opentofu.org/hpc-platform/hpc\" {",
        "==> tofu plan: the module's fabric, cluster and filesystem",
        "+ estimated_hourly_cost_usd = 110.08",
        "kind     = \"aws_placement_group\"",
        "Apply complete! Resources: 3 added, 0 changed, 0 destroyed.",
        // The provider's debug log of that apply: a line per request, and the nodes coming up.
        "==> the provider's log of that apply",
        "CreatePlacementGroup x1",
        "RunInstances x",
        "progress: train: 2/2 nodes running",
        " slots=8",
        "mount -t lustre",
        "\"FI_PROVIDER\" = \"efa\"",
        "train-1: i-",
        "found no differences, so no changes are needed.",
        "~ node_count       = 1 -> 2",
        "  exit code: 2",
        "Apply complete! Resources: 0 added, 1 changed, 0 destroyed.",
        "Error: Unsupported GPU model",
        "Destroy complete! Resources: 3 destroyed.",
        "  empty: True",
        // From the cluster to Slurm: the example's hosts booted from their user data, sinfo and a job on them.
        "==> Slurm: examples/slurm/aws",
        "Apply complete! Resources: 4 added",
        "READY ml-controller",
        "READY train-1",
        "HPC SLURM READY: ml-controller",
        "==> on the login node, as its user (debian): sinfo",
        "h100*",
        "JobState=COMPLETED",
        "NodeList=train-[0-1]",
        "==> tofu destroy (examples/slurm/aws)",
        "  empty: True",
        "==> done",
    ];
    // White space folded: the CLI aligns attribute names to the longest in the block.
    let folded = fold(&text);
    let mut rest = folded.as_str();
    for step in steps.map(fold) {
        let at = rest.find(&step).unwrap_or_else(|| panic!("{step:?} missing (or out of order) in the main job's output:\n{text}"));
        rest = &rest[at + step.len()..];
    }
    // The hostfile is printed after the apply and after the repair: train-0 kept its address; train-1 is a
    // new instance (its address comes from the subnet, and may be the one the old instance freed).
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("  ") && l.ends_with(" slots=8")).collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[0], lines[2], "{text}");
    // As many request lines as the emulator's calls is acceptance/logs.rs's; here the count is plausible.
    let requests = text.lines().find_map(|l| l.trim().split_once(" AWS requests: ")).unwrap_or_else(|| panic!("no request count:\n{text}"));
    assert!(requests.0.parse::<u32>().is_ok_and(|n| n >= 10), "{requests:?}");
    let repaired = text.lines().find_map(|l| l.trim().strip_prefix("train-1 is now ")).unwrap_or_else(|| panic!("no repair line:\n{text}"));
    let (new, old) = repaired.split_once(" (was ").unwrap_or_else(|| panic!("{repaired}"));
    assert!(new.starts_with("i-") && new != old.trim_end_matches(')'), "{repaired}");
}

fn every_example_applies_replans_empty_and_destroys(cli: &Cli) {
    let examples = examples::runnable_examples();
    for must in ["examples/quickstart", "examples/aws", "examples/gcp", "examples/azure", "examples/oci"] {
        assert!(examples.iter().any(|e| e == must), "{must} not found among {examples:?}");
    }
    for path in examples {
        let (out, created) = examples::lifecycle(cli, &path);
        let builds = !path.ends_with("gpu-catalog") && !path.ends_with("node-type-module");
        assert_eq!(created, builds, "{path}: created something = {created}");
        if builds {
            assert!(out["node_private_ips"]["value"].as_array().is_some_and(|ips| !ips.is_empty()), "{path}: {out}");
        }
    }
}

fn every_module_example_applies_replans_empty_and_destroys(cli: &Cli) {
    let examples = examples::module_examples();
    for m in ["training-cluster", "aws-training-cluster", "gcp-training-cluster", "azure-training-cluster", "oci-training-cluster"] {
        assert!(examples.contains(&format!("modules/{m}/examples/basic")), "modules/{m}/examples/basic missing: {examples:?}");
    }
    for path in examples {
        let (out, created) = examples::lifecycle(cli, &path);
        assert!(created, "{path} built nothing");
        // The hostfile has one `<address> slots=<GPUs>` line per node, in node order.
        let ips = out["node_private_ips"]["value"].as_array().cloned().unwrap_or_default();
        let hostfile = out["hostfile"]["value"].as_str().unwrap_or_else(|| panic!("{path}: no hostfile output: {out}"));
        let lines: Vec<&str> = hostfile.lines().collect();
        assert_eq!(lines.len(), ips.len(), "{path}: {hostfile}");
        for (line, ip) in lines.iter().zip(&ips) {
            assert!(line.starts_with(&format!("{} slots=", ip.as_str().unwrap())), "{path}: {line}");
        }
        assert!(out["nccl_environment"]["value"].as_object().is_some_and(|e| !e.is_empty()), "{path}: {out}");
        // The cloud-agnostic module's example puts its nodes in a Slurm cluster.
        if path == "modules/training-cluster/examples/basic" {
            let login = out["slurm_login_command"]["value"].as_str().unwrap_or_default();
            // On Google Cloud the key is the metadata's `hpc:<key>`, so the user is hpc.
            assert!(login.starts_with("ssh hpc@10."), "{path}: no Slurm login node: {out}");
        }
    }
}

/// The fault suite runs with OpenTofu only (the provider's behaviour under faults does not depend on the CLI;
/// `./scripts/test.sh` runs it on its own and prints its table).
#[test]
fn fault_suite() {
    faults::suite(&Cli::tofu());
}

/// The day-2 fault cases (throttling during a repair, a rolling update whose provider is killed), one test
/// per cloud so that they run in parallel; OpenTofu only, like the fault suite.
mod day2_faults {
    use super::{Cli, day2};
    #[test]
    fn aws() {
        day2::node_faults(&Cli::tofu(), "aws");
    }
    #[test]
    fn gcp() {
        day2::node_faults(&Cli::tofu(), "gcp");
    }
    #[test]
    fn azure() {
        day2::node_faults(&Cli::tofu(), "azure");
    }
    #[test]
    fn oci() {
        day2::node_faults(&Cli::tofu(), "oci");
    }
}

/// The fault suite's "partial capacity" for each capacity policy, one test per cloud; OpenTofu only.
mod partial_capacity {
    use super::{Cli, capacity};
    #[test]
    fn aws() {
        capacity::partial_capacity(&Cli::tofu(), "aws");
    }
    #[test]
    fn gcp() {
        capacity::partial_capacity(&Cli::tofu(), "gcp");
    }
    #[test]
    fn azure() {
        capacity::partial_capacity(&Cli::tofu(), "azure");
    }
    #[test]
    fn oci() {
        capacity::partial_capacity(&Cli::tofu(), "oci");
    }
}

fn secrets_stay_out_of_logs_and_state(cli: &Cli) {
    security::secrets_stay_out_of_logs_and_state(cli);
}

fn oci_h100_cluster_lifecycle(cli: &Cli) {
    oci::h100_cluster_lifecycle(cli);
}

fn azure_nd_h100_cluster_lifecycle(cli: &Cli) {
    azure::nd_h100_cluster_lifecycle(cli);
}

fn gcp_a3_mega_cluster_lifecycle(cli: &Cli) {
    gcp::a3_mega_cluster_lifecycle(cli);
}

fn gcp_a3_ultra_roce_layout(cli: &Cli) {
    gcp::a3_ultra_roce_layout(cli);
}

fn aws_cluster_lifecycle_on_the_emulator(cli: &Cli) {
    aws::cluster_lifecycle_on_the_emulator(cli);
}

fn aws_cloud_failures_reach_the_user_and_nothing_is_lost(cli: &Cli) {
    aws::cloud_failures_reach_the_user_and_nothing_is_lost(cli);
}

fn catalog_data_source_plans_applies_and_replans_empty(cli: &Cli) {
    let w = Workdir::new(cli, "catalog");
    let plan = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0);
    assert!(plan.stdout.contains("aws_h100"), "plan shows the outputs:\n{}", plan.stdout);
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);

    let out = w.run(&["output", "-json"]).expect_code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let p5 = &json["aws_h100"]["value"];
    assert_eq!(p5["name"], "p5.48xlarge");
    assert_eq!(p5["gpu_model"], "H100");
    assert_eq!(p5["gpu_count"], 8);
    assert_eq!(p5["gpu_memory_gb"], 80);
    assert_eq!(p5["rdma_fabric"], "efa");
    assert_eq!(p5["rdma_interfaces"], 32);
    assert_eq!(p5["network_bandwidth_gbps"], 3200);
    assert!(p5["sources"]["rdma_interfaces"].as_str().unwrap().contains("AWS"), "{p5}");
    assert_eq!(json["oci_rdma_interfaces"]["value"], 16);
    assert_eq!(json["gcp_gpu_models"]["value"], serde_json::json!(["B200", "GB200", "H100", "H200", "L4"]));

    // The data source reads the same on every run: the re-plan is empty.
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
}

fn bad_input_reports_each_error_at_its_attribute(cli: &Cli) {
    let w = Workdir::new(cli, "bad_input");
    let run = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1);
    let text = run.output();
    // The CLI wraps long details; compare those with white space folded.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cases = [
        ("Unsupported GPU model", "bad_gpu", "gpu   = \"H900\"", r#""A10G", "B200", "B300", "GB200", "H100", "H200", "L4" or "L40S""#),
        ("Unsupported cloud", "bad_cloud", "cloud = \"ibm\"", r#""aws", "azure", "gcp" or "oci""#),
        ("Unsupported instance type", "bad_shape", "instance_type = \"Standard_ND96asr_v4\"", "Standard_ND96isr_H100_v5"),
    ];
    for (summary, name, source_line, valid_values) in cases {
        assert!(text.contains(&format!("Error: {summary}")), "{summary} missing:\n{text}");
        // The attribute path lets the CLI point at the exact line of the offending attribute.
        let at = format!("on main.tf line {}, in data \"hpc_gpu_catalog\" \"{name}\":", w.line_of(source_line));
        assert!(text.contains(&at), "{at:?} missing:\n{text}");
        assert!(text.contains(source_line), "source line {source_line:?} not shown:\n{text}");
        assert!(flat.contains(valid_values), "valid values {valid_values} not listed:\n{text}");
    }
    assert!(!text.contains("panic") && !text.contains("rpc error"), "{text}");
}

fn bad_provider_config_points_into_the_provider_block(cli: &Cli) {
    let w = Workdir::new(cli, "bad_provider_config");
    let run = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1);
    let text = run.output();
    assert!(text.contains("Error: Invalid endpoint"), "{text}");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("\"localhost:4566\" does not start with http:// or https://"), "{text}");
    let at = format!("on main.tf line {}, in provider \"hpc\":", w.line_of("endpoint = \"localhost:4566\""));
    assert!(text.contains(&at), "{at:?} missing:\n{text}");
}

fn handshake_and_mutual_tls_with_the_real_cli(cli: &Cli) {
    let w = Workdir::new(cli, "catalog");
    let log = w.path().join("cli.log");
    let out = w.command(&["plan", "-no-color", "-input=false"]).env("TF_LOG", "debug").env("TF_LOG_PATH", &log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = std::fs::read_to_string(log).unwrap();
    // go-plugin negotiated protocol 6 with our binary...
    assert!(log.contains("using plugin: version=6"), "no protocol 6 negotiation in the CLI log");
    // ...and the CLI connected with its AutoMTLS certificate, which our verifier matched byte for byte
    // (a connection without it would have been refused and the plan would have failed).
    assert!(log.contains("mTLS: client certificate matches PLUGIN_CLIENT_CERT"), "the provider did not log a verified client certificate");
    // Our logs reach the CLI as structured entries at their level.
    assert!(log.contains("serving plugin protocol 6 over mutual TLS"));
    // The CLI ended each provider process through GRPCController/Shutdown, not by killing it.
    assert!(!log.contains("plugin failed to exit gracefully"), "a provider process had to be killed");
}

fn every_example_validates_and_plans(cli: &Cli) {
    let examples = example_dirs();
    assert!(examples.len() >= 4, "examples found: {examples:?}");
    // The composition and import examples need an estate; their own tests run them whole. The functions'
    // examples need a CLI with provider-defined functions (the oldest CLI's refusal is a case of its own).
    let runnable = |e: &String| !examples::needs_an_estate(e) && (cli.has_functions() || !e.starts_with("functions/"));
    for example in examples.into_iter().filter(runnable) {
        let w = Workdir::for_example(cli, &example);
        // Documentation snippets (examples/data-sources/...) leave out the terraform block, as registry
        // examples do; give them the one every configuration of this provider needs.
        let configs: String = std::fs::read_dir(w.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tf"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        if !configs.contains("required_providers") {
            let versions = "terraform {\n  required_providers {\n    hpc = {\n      source = \"hpc-platform/hpc\"\n    }\n  }\n}\n";
            std::fs::write(w.path().join("versions.tf"), versions).unwrap();
        }
        // A resource page's import examples (`import-by-string-id.tf`, `import-by-identity.tf`) would make the
        // plan import from the cloud, and need OpenTofu or Terraform 1.5 (1.12 by identity); `tests/lint.rs`
        // validates them with OpenTofu beside the page's example.
        for entry in std::fs::read_dir(w.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("import-by-")) {
                std::fs::remove_file(path).unwrap();
            }
        }
        // Local modules are installed with `get`; `init` would look the provider up in a registry,
        // which dev_overrides make unnecessary (and which is unreachable here).
        w.run(&["get", "-no-color"]).expect_code(0);
        let validate = w.run(&["validate", "-no-color"]).expect_code(0);
        assert!(validate.stdout.contains("The configuration is valid"), "{example}: {}", validate.output());
        // 0 = nothing to do, 2 = changes (outputs) to apply; 1 would be an error.
        let plan = w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
        assert!(matches!(plan.code, Some(0 | 2)), "{example}: plan failed\n{}", plan.output());
    }
}

fn cloud_examples_show_their_vendor_expansion(cli: &Cli) {
    let expectations: [(&str, &[&str]); 4] = [
        (
            "aws",
            &[
                r#"kind = "aws_placement_group""#,
                r#""strategy" = "cluster""#,
                r#"kind = "aws_vpc_security_group_ingress_rule""#,
                r#"name = "train-lt cards 1-31""#,
                r#""interface_type" = "efa-only""#,
                r#""network_card_index" = "0""#,
                r#"count = 4 + kind = "aws_instance""#,
                r#""deployment_type" = "PERSISTENT_2""#,
                r#"kind = "aws_fsx_data_repository_association""#,
                r#""FI_PROVIDER" = "efa""#,
            ],
        ),
        (
            "azure",
            &[
                r#"kind = "azurerm_proximity_placement_group""#,
                r#"kind = "azurerm_linux_virtual_machine_scale_set""#,
                r#""single_placement_group" = "true""#,
                r#""platform_fault_domain_count" = "1""#,
                r#""overprovision" = "false""#,
                r#""sku_name" = "AMLFS-Durable-Premium-125""#,
                r#""maintenance_window" = "Sunday 02:00 UTC""#,
            ],
        ),
        (
            "gcp",
            &[
                r#"count = 8 + kind = "google_compute_network""#,
                r#""mtu" = "8244""#,
                r#""group_placement_policy.collocation" = "COLLOCATED""#,
                r#""scheduling.on_host_maintenance" = "TERMINATE""#,
                r#""networks" = "train-gpu-0 .. train-gpu-7""#,
                "https://www.googleapis.com/compute/v1/projects/ml-platform-prod/global/networkProfiles/us-central1-b-vpc-roce",
                r#""names" = "ultra-rdma-0 .. ultra-rdma-7""#,
                r#"kind = "google_lustre_instance""#,
            ],
        ),
        (
            "oci",
            &[
                r#"kind = "oci_core_compute_cluster""#,
                "Compute HPC RDMA Authentication: ENABLED, Compute HPC RDMA Auto-Configuration: ENABLED, Compute RDMA GPU Monitoring: ENABLED",
                r#""compute_cluster_id" = "oci_core_compute_cluster.train-cc""#,
                r#""performance_tier" = "MBPS_PER_TB_250""#,
                r#""capacity_in_gbs" = "31200""#,
            ],
        ),
    ];
    for (cloud, lines) in expectations {
        let w = Workdir::for_example(cli, cloud);
        let plan = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0);
        let flat = fold(&plan.stdout);
        for line in lines {
            assert!(flat.contains(line), "{cloud}: {line:?} not in the plan:\n{}", plan.stdout);
        }
        // The very first plan is complete: only cloud-assigned ids wait for apply.
        for l in plan.stdout.lines().filter(|l| l.contains("(known after apply)")) {
            let attr = l.trim().trim_start_matches("+ ").split_whitespace().next().unwrap_or_default();
            // FSx for Lustre names the mount itself.
            let fsx_mount_name = cloud == "aws" && attr == "filesystem_name";
            assert!(
                fsx_mount_name
                    || ["id", "owner", "vpc_id", "subnet_id", "mount_target", "mount_command", "nodes", "node_private_ips"].contains(&attr),
                "{cloud}: {attr} is unknown at plan time: {l}"
            );
        }
        assert!(!plan.stdout.contains("Warning: Filesystem"), "{cloud}: the example should be checklist-clean");
    }
}

/// Asserts an error with `summary` is reported at the line holding `source_line`, with `detail` words.
fn assert_diagnostic(w: &Workdir, text: &str, summary: &str, source_line: &str, detail: &str) {
    let flat = fold(text);
    let line = w.line_of(source_line);
    let block = text.split("Error: ").find(|b| b.starts_with(summary) && b.contains(&format!("on main.tf line {line}")));
    assert!(block.is_some(), "no {summary:?} at main.tf line {line} ({source_line}):\n{text}");
    assert!(flat.contains(detail), "{summary}: detail {detail:?} missing:\n{text}");
}

fn validation_errors_point_at_their_attributes(cli: &Cli) {
    let w = Workdir::new(cli, "invalid_resources");
    let text = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
    // An absent attribute has no line of its own: the CLI points at the resource's first line.
    let cases = [
        ("Missing zone", "resource \"hpc_gpu_fabric\" \"no_zone\"", "a cluster placement group lives in one zone"),
        ("Unsupported GPU model", "gpu    = \"MI300X\"", r#"MI300X is offered on "azure" or "oci""#),
        ("Placement distance not allowed", "max_distance  = 1", "A3 Ultra and A4 accept 2 or 3"),
        ("Incomplete existing network", "resource \"hpc_gpu_fabric\" \"half_network\"", "vpc_id is set but subnet_id is not"),
        ("Invalid name", "name   = \"Train_Fabric\"", "lowercase letters, digits and hyphens"),
        ("Missing compartment", "resource \"hpc_gpu_fabric\" \"no_compartment\"", "compartment_id"),
        ("Placement not offered", "placement = \"cluster-network\"", r#"use "cluster" or "none""#),
        (
            "Unsupported capacity type",
            "capacity_type = \"preemptible\"",
            r#""on-demand", "spot", "reservation", "capacity-block" or "flex-start""#,
        ),
        ("Value out of range", "node_count = 0", "from 1 to 100000"),
        ("Unsupported workload", "workload   = \"training\"", r#""pretraining", "finetuning", "inference" or "media""#),
        ("Invalid duration", "create = \"2 hours\"", r#""90m", "2h", "1h30m""#),
        ("Invalid filesystem name", "filesystem_name    = \"scratch-01\"", "1 to 8 letters or digits"),
    ];
    for (summary, source_line, detail) in cases {
        assert_diagnostic(&w, &text, summary, source_line, detail);
    }
    assert!(!text.contains("panic") && !text.contains("rpc error"), "{text}");
}

fn plan_time_errors_point_at_their_attributes(cli: &Cli) {
    let w = Workdir::new(cli, "invalid_at_plan");
    let text = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
    let cases = [
        ("Unsupported RDMA interface count", "rdma_interfaces = 33", "rdma_interfaces can be 1 to 32"),
        ("Too many nodes for a capacity block", "node_count     = 65", "at most 64 instances"),
        ("Missing reservation", "resource \"hpc_gpu_cluster\" \"no_reservation\"", "set reservation_id to the capacity reservation id"),
        ("Reservation conflicts with InfiniBand", "capacity_type  = \"reservation\"", "single placement group"),
        ("Unsupported Lustre capacity", "capacity_gib       = 3000", r#"Nearest valid sizes: "2400" or "4800" GiB"#),
        ("Unsupported throughput tier", "throughput_per_tib = 1000", r#""40", "125", "250" or "500""#),
        ("Missing OKE worker image", "resource \"hpc_gpu_node_pool\" \"oke\"", "set image to its OCID"),
        ("Missing node role", "resource \"hpc_gpu_node_pool\" \"no_role\"", "set node_role to the role's ARN"),
    ];
    for (summary, source_line, detail) in cases {
        assert_diagnostic(&w, &text, summary, source_line, detail);
    }
}

fn checklist_warnings_reach_the_user(cli: &Cli) {
    let w = Workdir::for_example(cli, "aws");
    let main = w.path().join("main.tf");
    let text = std::fs::read_to_string(&main).unwrap();
    // Starve the filesystem and take placement away: both checklist warnings must show, and plan succeeds.
    let text = text
        .replace("throughput_per_tib = 500", "throughput_per_tib = 125")
        .replace("gpu    = \"H100\"", "gpu       = \"H100\"\n  placement = \"none\"");
    std::fs::write(&main, text).unwrap();
    let out = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).output();
    assert!(out.contains("Warning: No proximity placement"), "{out}");
    assert!(out.contains("Warning: Filesystem throughput too low for the cluster"), "{out}");
    assert!(
        fold(&out).contains("4800 GiB at 125 MB/s per TiB gives 585 MB/s, but 32 GPUs doing pretraining want at least 1600 MB/s"),
        "{out}"
    );
}

/// The nccl-tests samples the nccl cases read (tests/fixtures/nccl; generated in nccl-tests' format, not
/// captured from hardware), as an absolute path for `TF_VAR_samples`.
fn nccl_samples() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl").display().to_string()
}

fn nccl_check_classifies_the_three_samples(cli: &Cli) {
    let w = Workdir::new(cli, "nccl_check").env("TF_VAR_samples", &nccl_samples());
    // Everything is known at plan time, so the checks read during the plan and it shows the verdicts.
    let plan = fold(&w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout);
    for verdict in [r#"healthy = "healthy""#, r#"thirty_under = "placement-or-driver""#, r#"sixty_under = "fabric""#] {
        assert!(plan.contains(verdict), "{verdict} not in the plan:\n{plan}");
    }
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let out: serde_json::Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let verdicts = &out["verdicts"]["value"];
    assert_eq!(verdicts["healthy"], "healthy", "{out}");
    assert_eq!(verdicts["thirty_under"], "placement-or-driver", "{out}");
    assert_eq!(verdicts["sixty_under"], "fabric", "{out}");
    assert_eq!(verdicts["measured"], "placement-or-driver", "{out}");
    assert_eq!(
        out["healthy"]["value"],
        serde_json::json!({"healthy": true, "thirty_under": false, "sixty_under": false, "measured": false})
    );
    let checks = &out["checks"]["value"];
    // The busbw of the largest size (16 GiB), the better of out-of-place and in-place.
    for (name, busbw, ratio, shortfall) in [
        ("healthy", 363.14, 0.995, 0.5),
        ("thirty_under", 258.75, 0.709, 29.1),
        ("sixty_under", 145.71, 0.399, 60.1),
        ("measured", 331.2, 0.72, 28.0),
    ] {
        let c = &checks[name];
        assert_eq!(
            (c["busbw_gbs"].as_f64(), c["ratio"].as_f64(), c["shortfall_percent"].as_f64()),
            (Some(busbw), Some(ratio), Some(shortfall)),
            "{name}: {c}"
        );
        assert_eq!(c["wrong"], 0, "{name}: {c}");
    }
    // Each message names the shortfall and what to check on its cloud.
    let message = |name: &str| checks[name]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message("healthy").starts_with("Bandwidth healthy: the all-reduce bus bandwidth, 363.14 GB/s, is 99.5% of the 365 GB/s"));
    let aws = message("thirty_under");
    assert!(aws.starts_with("Placement or driver problem: the all-reduce bus bandwidth, 258.75 GB/s, is 29.1% short"), "{aws}");
    assert!(aws.contains("cluster placement group") && aws.contains("FI_PROVIDER=efa"), "{aws}");
    let gcp = message("sixty_under");
    assert!(gcp.starts_with("Fabric problem: the all-reduce bus bandwidth, 145.71 GB/s, is 60.1% short"), "{gcp}");
    assert!(gcp.contains("Using network Socket") && gcp.contains("compact placement policy"), "{gcp}");
    assert!(message("measured").contains("single placement group"));
    // The checks read the same on every run: the re-plan is empty.
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);

    // What is not nccl-tests output, and two measurements at once, are errors at their attributes (one at a
    // time: the first fails validation, the second is found when the check reads).
    let cases = [
        (
            "data \"hpc_nccl_check\" \"crashed\" {\n  expected_busbw_gbs = 365\n  nccl_tests_output  = \"Segmentation fault (core dumped)\"\n}\n",
            "Invalid nccl-tests output",
            "on bad.tf line 3, in data \"hpc_nccl_check\" \"crashed\":",
            "No nccl-tests result rows found; expected the output of an nccl-tests binary",
        ),
        (
            "data \"hpc_nccl_check\" \"both\" {\n  expected_busbw_gbs = 365\n  measured_busbw_gbs = 300\n  nccl_tests_output  = file(\"${var.samples}/healthy.txt\")\n}\n",
            "Conflicting measurements",
            "on bad.tf line 3, in data \"hpc_nccl_check\" \"both\":",
            "Set only one of measured_busbw_gbs and nccl_tests_output",
        ),
    ];
    for (config, summary, at, detail) in cases {
        w.write("bad.tf", config);
        let text = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
        assert!(
            text.contains(&format!("Error: {summary}")) && text.contains(at) && fold(&text).contains(detail),
            "{summary} at {at}:\n{text}"
        );
        assert!(!text.contains("panic") && !text.contains("rpc error"), "{text}");
    }
}

/// A postcondition on the check gates the training job's infrastructure (a terraform_data). OpenTofu
/// only: Terraform 1.0.3 has neither postconditions (Terraform 1.2) nor terraform_data (Terraform 1.4).
#[test]
fn nccl_gate_stops_the_apply_on_a_slow_fabric_and_creates_nothing() {
    let cli = Cli::tofu();
    let w = Workdir::new(&cli, "nccl_gate").env("TF_VAR_samples", &nccl_samples()).env("TF_VAR_sample", "sixty_under.txt");
    let text = w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(1).output();
    let flat = fold(&text);
    assert!(text.contains("Error: Resource postcondition failed"), "{text}");
    // The postcondition's error message is the check's message.
    assert!(flat.contains("Fabric problem: the all-reduce bus bandwidth, 145.71 GB/s, is 60.1% short of the 365 GB/s expected"), "{text}");
    assert!(flat.contains("cluster network or compute cluster"), "the OCI advice is missing:\n{text}");
    assert!(!text.contains("terraform_data.training_job: Creat") && !text.contains("Apply complete"), "{text}");
    let state = std::fs::read_to_string(w.path().join("terraform.tfstate")).unwrap_or_default();
    assert!(!state.contains("training_job"), "the training job's infrastructure was created:\n{state}");

    // A healthy fabric lets it through.
    let w = w.env("TF_VAR_sample", "healthy.txt");
    let text = w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0).output();
    assert!(text.contains("Apply complete! Resources: 1 added, 0 changed, 0 destroyed."), "{text}");
    let out: serde_json::Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_eq!(out["verdict"]["value"], "healthy");

    // A later run 30% short stops the next plan, and what exists stays.
    let w = w.env("TF_VAR_sample", "thirty_under.txt");
    let text = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
    assert!(fold(&text).contains("Placement or driver problem: the all-reduce bus bandwidth, 258.75 GB/s, is 29.1% short"), "{text}");
    assert!(w.run(&["state", "list"]).expect_code(0).stdout.contains("terraform_data.training_job"));
}

/// The registry page's example (OpenTofu: it has a postcondition) with the hpc_gpu_cluster page's cluster
/// beside it and a log: it validates, and plans with the check read once the cluster exists.
#[test]
fn nccl_check_doc_example_validates_and_plans() {
    let cli = Cli::tofu();
    let w = Workdir::for_example(&cli, "data-sources/hpc_nccl_check");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("examples/resources/hpc_gpu_cluster/resource.tf"), w.path().join("cluster.tf")).unwrap();
    std::fs::copy(root.join("tests/fixtures/nccl/healthy.txt"), w.path().join("allreduce.log")).unwrap();
    w.write("versions.tf", "terraform {\n  required_providers {\n    hpc = {\n      source = \"hpc-platform/hpc\"\n    }\n  }\n}\n");
    w.run(&["validate", "-no-color"]).expect_code(0);
    let plan = fold(&w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout);
    assert!(plan.contains("data.hpc_nccl_check.fabric will be read during apply"), "{plan}");
    assert!(plan.contains(r#"measured_verdict = "placement-or-driver""#), "{plan}");
}

fn nvl72_mistakes_are_refused_at_plan_time(cli: &Cli) {
    rack_scale::nvl72_mistakes_are_refused_at_plan_time(cli);
}
