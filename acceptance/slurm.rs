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
        // The examples render for versions before topology.yaml.
        topology_yaml: None,
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

/// `examples/slurm/<cloud>` applied on the emulator and its hosts booted from their own user data
/// (`booted.rs`): the controller, the login node and two GPU nodes boot with Debian's systemd and cloud-init
/// against the emulator's metadata service, start munge, slurmctld and slurmd as the configuration renders
/// them, and a job submitted on the login node runs to COMPLETED on both GPU nodes. Then, through the
/// metadata service as on the cloud: a grow reaches the controller and the new node joins; a node deleted
/// outside is repaired under its name and rejoins; a changed partition reaches the controller. Destroy
/// leaves the emulator empty.
pub fn slurm_boots(cli: &Cli, cloud: &'static str) {
    let clouds = Emulators::start();
    let w = clouds.env(Workdir::for_path(cli, &format!("examples/slurm/{cloud}")));
    install(&w);
    let (image_of_cloud, version) = crate::booted::image_of(cloud);
    let var = if cloud == "aws" { "train_nodes" } else { "nodes" };
    w.write("terraform.tfvars", &format!("{var} = 2\nslurm_version = \"{version}\"\n"));
    // The node types are larger than this machine: Slurm's own setting for testing takes the configured CPUs and
    // memory instead of refusing the nodes (emulators/hosts/STAND-INS.md), set as a user would.
    // Debian 13's slurmdbd (24.11.5) stops at its first query through Debian 13's MariaDB 11.8 client library
    // (`_check_mysql_concat_is_sane`, reproduced in a plain chroot of the image, outside this project): the
    // clusters booted from it run without accounting, as a user of that image would have to.
    let accounting = image_of_cloud == 12;
    w.write(
        "booted_override.tf",
        &format!(
            "resource \"hpc_slurm_cluster\" \"ml\" {{\n  accounting = {accounting}\n  custom_settings = {{ SlurmdParameters = \"config_overrides\" }}\n}}\n"
        ),
    );
    if cloud == "aws" {
        // The GPU nodes boot with the self-check (data "hpc_gpu_selfcheck", its default failure action: power off),
        // which Slurm's health check runs again every 30 s.
        w.write("selfcheck.tf", "data \"hpc_gpu_selfcheck\" \"node\" {\n  cloud         = \"aws\"\n  instance_type = \"p5.48xlarge\"\n}\n");
        w.write(
            "selfcheck_override.tf",
            "resource \"hpc_gpu_cluster\" \"h100\" {\n  user_data = data.hpc_gpu_selfcheck.node.combined_user_data\n}\n\n\
             resource \"hpc_slurm_cluster\" \"ml\" {\n  health_check_interval = 30\n}\n",
        );
    }
    apply(&w).expect_code(0);
    plan(&w, 0);

    let mut hosts = crate::booted::Booted::new(&clouds, cloud, "10.0.0.0/16");
    let gpus = Some(hpc_emulators::hosts::Gpus { count: 8, amd: false, rdma: rdma_of(cloud) });
    hosts.boot("ml-controller", "ml-controller", None);
    hosts.boot("ml-login0", "ml-login0", None);
    for i in 0..2 {
        let node = format!("train-{i}");
        hosts.boot(&node, &gpu_instance(cloud, i), gpus);
    }
    hosts.wait_booted();
    let setup = hosts.host("ml-controller").read("/var/log/hpc-slurm-setup.log").unwrap_or_default();
    assert!(setup.contains("HPC SLURM READY: ml-controller"), "{setup}\n{}", hosts.host("ml-controller").diagnosis());
    for i in 0..2 {
        let h = hosts.host(&format!("train-{i}"));
        let join = h.read("/var/log/hpc-slurm-join.log").unwrap_or_default();
        assert!(join.contains(&format!("HPC SLURM JOINED: train-{i}")), "{join}\n{}", h.diagnosis());
    }
    let login = hosts.host("ml-login0");
    // How to log in names the login node's address (on Azure it named the controller's, with login_addresses null).
    let out = outputs(&w);
    assert_eq!(out["login"]["value"].as_str(), Some(format!("ssh {}@{}", login_user(cloud), login.address).as_str()), "{out}");
    let said = login.read("/var/log/hpc-slurm-setup.log").unwrap_or_default();
    assert!(said.contains("HPC SLURM READY: ml-login0"), "{said}\n{}", login.diagnosis());
    // On the login node, as its user: the partitions, and a job over both GPU nodes.
    let sinfo = login.sh_as("debian", "sinfo -h -o '%P %D %t'").unwrap_or_else(|e| panic!("{e}"));
    assert!(sinfo.contains("h100*"), "{sinfo}");
    let shown = job(&hosts, "-p h100 -N 2 -w train-[0-1] --wrap 'srun hostname'");
    assert!(shown.contains("JobState=COMPLETED"), "{shown}");
    if accounting {
        accounted(&hosts, &shown);
    }

    metadata_is_root_only(&hosts);

    if cloud == "aws" {
        health_check_drains_and_never_powers_off(&hosts);
    }

    // A grow: the controller takes the new configuration from its metadata (hpc-slurm-sync, every minute), and
    // the new node boots, joins and runs a job. The new node boots before the controller has that configuration
    // (its sync held back until the node's slurmd was refused once), as it does whenever the node is quicker
    // than the sync: the join waits for the controller instead of failing.
    let controller = hosts.host("ml-controller");
    controller.sh("systemctl stop hpc-slurm-sync.timer").unwrap_or_else(|e| panic!("{e}"));
    w.write("terraform.tfvars", &format!("{var} = 3\nslurm_version = \"{version}\"\n"));
    apply(&w).expect_code(0);
    plan(&w, 0);
    let grown = gpu_instance(cloud, 2);
    hosts.boot("train-2", &grown, gpus);
    refused_once(hosts.host("train-2"));
    // The timer runs the sync at once (its last run is over a minute old), and every minute after.
    hosts.host("ml-controller").sh("systemctl start hpc-slurm-sync.timer").unwrap_or_else(|e| panic!("{e}"));
    joins(&hosts, "train-2");
    runs_on(&hosts, "train-2");

    // A repair: train-1 goes behind the tool's back; the plan shows it, the apply makes it again under its name,
    // and the new instance joins as train-1.
    hosts.lose("train-1", &gpu_instance(cloud, 1));
    let drift = plan(&w, 2);
    assert!(drift.contains("train-1"), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let remade = if cloud == "azure" { hosts.unbooted_vm("train-0") } else { gpu_instance(cloud, 1) };
    hosts.boot("train-1", &remade, gpus);
    joins(&hosts, "train-1");
    runs_on(&hosts, "train-1");

    // A configuration written into the controller's metadata by someone else (whoever may write its tags or
    // metadata, without the cluster's key) is refused, loudly, and the running one kept.
    forged_configuration_is_refused(&clouds, cloud, hosts.host("ml-controller"));

    // A changed configuration reaches the running controller through its metadata, with nothing made again.
    w.write(
        "booted_override.tf",
        &format!(
            "resource \"hpc_slurm_cluster\" \"ml\" {{\n  accounting = {accounting}\n  custom_settings = {{ SlurmdParameters = \
             \"config_overrides\", SchedulerParameters = \"bf_continue\" }}\n}}\n"
        ),
    );
    let change = plan(&w, 2);
    assert!(change.contains("0 to add, 1 to change, 0 to destroy"), "{change}");
    apply(&w).expect_code(0);
    let controller = hosts.host("ml-controller");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let config = controller.sh("scontrol show config | grep -i '^SchedulerParameters'").unwrap_or_default();
        if config.contains("bf_continue") {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the new configuration did not reach the controller: {config}\n{}",
            controller.diagnosis()
        );
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    runs_on(&hosts, "train-0");
    drop(hosts);

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    clouds.assert_empty(&format!("examples/slurm/{cloud}"));
}

/// The job `shown` (`scontrol show job`) is in the accounting: `sacct`, as the login node's user, shows it
/// COMPLETED (slurmctld sends the record to slurmdbd on the controller, which writes it to MariaDB).
fn accounted(hosts: &crate::booted::Booted, shown: &str) {
    let id = shown.split_whitespace().find_map(|w| w.strip_prefix("JobId=")).unwrap_or_default();
    let login = hosts.host("ml-login0");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let said = login.sh_as("debian", &format!("sacct -X -n -P -j {id} -o JobID,State,NNodes")).unwrap_or_else(|e| e);
        if said.lines().any(|l| l.trim() == format!("{id}|COMPLETED|2")) {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "sacct does not show job {id} COMPLETED on 2 nodes: {said}\n{}",
            hosts
                .host("ml-controller")
                .sh("tail -n 20 /var/log/slurm/slurmdbd.log; tail -n 20 /var/log/hpc-slurm-setup.log")
                .unwrap_or_else(|e| e)
        );
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
}

/// Only root reaches the metadata service (the host's user data and credentials) on the Slurm hosts: a login
/// user on the login node and a job on a GPU node are refused at once, root on either is answered, the lock
/// is enabled for every boot, and the munge key is root's alone.
fn metadata_is_root_only(hosts: &crate::booted::Booted) {
    let probe = "curl -s -m 10 -o /dev/null http://169.254.169.254/; echo \"curl exit $?\"";
    let login = hosts.host("ml-login0");
    let as_user = login.sh_as("debian", probe).unwrap_or_else(|e| e);
    assert!(as_user.contains("curl exit 7"), "a login user reached the metadata service: {as_user}");
    let key = login.sh_as("debian", "cat /etc/munge/munge.key >/dev/null 2>&1; echo \"cat exit $?\"").unwrap_or_else(|e| e);
    assert!(key.contains("cat exit 1"), "a login user read the munge key: {key}");
    for host in ["ml-login0", "ml-controller", "train-0"] {
        let h = hosts.host(host);
        let as_root = h.sh(probe).unwrap_or_else(|e| e);
        assert!(as_root.contains("curl exit 0"), "root on {host} does not reach the metadata service: {as_root}");
        let enabled = h.sh("systemctl is-enabled hpc-metadata-lock.service").unwrap_or_else(|e| e);
        assert_eq!(enabled.trim(), "enabled", "{host}");
    }
    let shown = job(hosts, &format!("-N 1 -w train-0 --output=/tmp/hpc-metadata-%j.out --wrap '{probe}'"));
    assert!(shown.contains("JobState=COMPLETED"), "{shown}");
    let id = shown.split_whitespace().find_map(|w| w.strip_prefix("JobId=")).unwrap_or_default();
    let out = hosts.host("train-0").read(&format!("/tmp/hpc-metadata-{id}.out")).unwrap_or_else(|e| e.to_string());
    assert!(out.contains("curl exit 7"), "a job reached the metadata service: {out}");
}

/// Writes a configuration with a `Prolog` of its own into the controller's metadata through the cloud's API
/// (its MAC made without the cluster's key) and runs the controller's hpc-slurm-sync: it refuses it, says so
/// in the system log, and slurm.conf is what it was.
fn forged_configuration_is_refused(clouds: &Emulators, cloud: &str, controller: &hpc_emulators::hosts::Host) {
    let before = controller.read("/etc/slurm/slurm.conf").unwrap_or_else(|e| panic!("{e}"));
    let forged = format!("{before}Prolog=/tmp/hpc-forged-prolog\n");
    let config = hpc_provider::clouds::slurm::config_payload(&[("slurm.conf", forged)], b"a key that is not the cluster's");
    let id = &controller.instance_id;
    match cloud {
        "aws" => crate::aws::forge_slurm_config(&clouds.aws.endpoint, id, &config),
        "gcp" => crate::gcp::forge_slurm_config(&clouds.gcp, id, &config),
        "azure" => crate::azure::forge_slurm_config(&clouds.azure.0, &clouds.azure.1, id, &config),
        _ => crate::oci::forge_slurm_config(&clouds.oci.0, id, &config),
    }
    let said = controller.sh("/usr/local/sbin/hpc-slurm-sync 2>&1; echo \"exit $?\"").unwrap_or_else(|e| e);
    assert!(said.contains("REFUSED") && said.contains("does not verify") && said.contains("exit 1"), "{said}");
    let logged = controller.sh("journalctl -t hpc-slurm-sync -p crit --no-pager -o cat").unwrap_or_else(|e| e);
    assert!(logged.contains("REFUSED configuration"), "not in the system log: {logged}");
    let after = controller.read("/etc/slurm/slurm.conf").unwrap_or_default();
    assert_eq!(after, before, "the refused configuration changed slurm.conf");
}

/// The cloud's name of GPU node `i` of the example's `train` cluster (Azure: its scale-set VM).
fn gpu_instance(cloud: &str, i: u32) -> String {
    match cloud {
        "azure" => format!("train-0_{i}"),
        _ => format!("train-{i}"),
    }
}

/// The RDMA adapters of the example's node type on `cloud` (p5.48xlarge: 32 EFA; ND H100 v5, A3 Mega's GPU
/// NICs and BM.GPU.H100.8: 8 or 16 HCAs), from the catalog.
fn rdma_of(cloud: &str) -> u32 {
    let (c, sku) = match cloud {
        "aws" => (hpc_provider::catalog::Cloud::Aws, "p5.48xlarge"),
        "gcp" => (hpc_provider::catalog::Cloud::Gcp, "a3-megagpu-8g"),
        "azure" => (hpc_provider::catalog::Cloud::Azure, "Standard_ND96isr_H100_v5"),
        _ => (hpc_provider::catalog::Cloud::Oci, "BM.GPU.H100.8"),
    };
    hpc_provider::catalog::find_sku(c, sku).and_then(|s| s.rdma_interfaces).unwrap_or(0)
}

/// The booted node `node` said it joined (its join log), with what it saw when it did not.
fn joins(hosts: &crate::booted::Booted, node: &str) {
    hosts.wait_booted();
    let h = hosts.host(node);
    let join = h.read("/var/log/hpc-slurm-join.log").unwrap_or_default();
    assert!(join.contains(&format!("HPC SLURM JOINED: {node}")), "{join}\n{}", h.diagnosis());
}

/// Waits until `node`'s slurmd has been refused by the controller at least once (systemd has restarted it):
/// the node booted before the controller had the configuration that names it.
fn refused_once(node: &hpc_emulators::hosts::Host) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(420);
    loop {
        let restarts = node.sh("systemctl show -p NRestarts --value slurmd").unwrap_or_default();
        if restarts.trim().parse::<u32>().unwrap_or(0) > 0 {
            return;
        }
        assert!(std::time::Instant::now() < until, "slurmd was never refused: {restarts}\n{}", node.diagnosis());
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
}

/// A one-node job on `node`, submitted on the login node as its user, runs to COMPLETED.
fn runs_on(hosts: &crate::booted::Booted, node: &str) {
    let shown = job(hosts, &format!("-N 1 -w {node} --wrap hostname"));
    assert!(shown.contains("JobState=COMPLETED") && shown.contains(&format!("NodeList={node}")), "{shown}");
}

/// A job submitted on the login node as its user (`sbatch <args>`), followed until it ends (three minutes at
/// most, with what the controller and the nodes said when it does not): `scontrol show job` of it then. A
/// submission the controller did not answer within Slurm's MessageTimeout (10 s; this machine runs four
/// clusters' hosts and the other suites on two cores) is sent again, up to three times, as a user would.
fn job(hosts: &crate::booted::Booted, args: &str) -> String {
    let login = hosts.host("ml-login0");
    let controller = hosts.host("ml-controller");
    let mut attempt = 1;
    let id = loop {
        match login.sh_as("debian", &format!("cd /tmp && sbatch --parsable {args}")) {
            Ok(id) => break id,
            Err(e) if attempt < 3 && e.contains("Socket timed out") => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_secs(10));
            }
            Err(e) => panic!("{e}\n{}", controller.diagnosis()),
        }
    };
    let id = id.trim();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let shown = login.sh(&format!("scontrol show job {id}")).unwrap_or_else(|e| e);
        let state = shown.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or("");
        if !matches!(state, "PENDING" | "CONFIGURING" | "RUNNING" | "COMPLETING" | "") {
            return shown;
        }
        if std::time::Instant::now() > until {
            let nodes = login.sh("sinfo -N -l; scontrol show nodes").unwrap_or_else(|e| e);
            panic!("job {id} ({args}) did not end in 180 s:\n{shown}\n{nodes}\n{}", controller.diagnosis());
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// The user the cloud's images log in as, which `login_command` names.
fn login_user(cloud: &str) -> &'static str {
    match cloud {
        "aws" => "ubuntu",
        "gcp" => "hpc",
        "azure" => "azureuser",
        _ => "opc",
    }
}

/// A GPU of train-0 falls off the bus while a job runs there: Slurm's health check (the boot self-check run
/// again, whose own failure action is to power off) drains the node with the self-check's reason; the job runs
/// on to COMPLETED and the host stays up; once the GPU is back, the health check resumes the node.
fn health_check_drains_and_never_powers_off(hosts: &crate::booted::Booted) {
    let login = hosts.host("ml-login0");
    let node = hosts.host("train-0");
    let selfcheck = node.read("/var/log/hpc-selfcheck.log").unwrap_or_default();
    assert!(selfcheck.contains("HPC SELFCHECK PASSED"), "{selfcheck}\n{}", node.diagnosis());
    let job = login
        .sh_as("debian", "cd /tmp && sbatch --parsable -N 1 -w train-0 --wrap 'sleep 45'")
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_owned();
    wait_for(login, &format!("scontrol show job {job}"), |s| s.contains("JobState=RUNNING"), 60);
    node.sh(&format!("echo 7 > {}", hpc_emulators::hosts::GPU_COUNT_FILE)).unwrap();
    let drained = wait_for(login, "scontrol show node train-0", |s| s.contains("DRAIN"), 120);
    assert!(drained.contains("Reason=hpc-selfcheck:") && drained.contains("7"), "{drained}");
    assert_eq!(node.sh("systemctl is-system-running || true").unwrap_or_default().trim(), "running", "the host is up");
    wait_for(login, &format!("scontrol show job {job}"), |s| s.contains("JobState=COMPLETED"), 120);
    node.sh(&format!("echo 8 > {}", hpc_emulators::hosts::GPU_COUNT_FILE)).unwrap();
    let resumed = wait_for(login, "scontrol show node train-0", |s| !s.contains("DRAIN"), 120);
    assert!(resumed.contains("State=IDLE"), "{resumed}");
}

/// Runs `command` on `host` until `done` holds for its output, at most `seconds`; the last output.
fn wait_for(host: &hpc_emulators::hosts::Host, command: &str, done: impl Fn(&str) -> bool, seconds: u64) -> String {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        let out = host.sh(command).unwrap_or_else(|e| e);
        if done(&out) {
            return out;
        }
        assert!(std::time::Instant::now() < until, "{command} after {seconds} s:\n{out}\n{}", host.diagnosis());
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// The emulator's log of what it did to nodes, for `cloud`.
fn node_events(clouds: &Emulators, cloud: &str) -> Value {
    use hpc_emulators::harness::{admin, azure_admin};
    let answer = match cloud {
        "aws" => admin(&clouds.aws.endpoint, "GET", "events", None),
        "gcp" => admin(&clouds.gcp, "GET", "events", None),
        "azure" => azure_admin(&clouds.azure.0, &clouds.azure.1, "GET", "events", None),
        _ => admin(&clouds.oci.0, "GET", "events", None),
    };
    answer["events"].clone()
}

/// `examples/slurm/<cloud>` adopted by import, as a team taking over a running cluster would: its fabric, GPU
/// cluster(s) and Slurm cluster removed from state and imported by the ids they had. The import takes what
/// the pieces carry (the Slurm key included), the next plan is empty, an apply changes nothing on the cloud
/// (the emulator logs no node event), and the example's outputs are what they were.
pub fn slurm_import_changes_nothing(cli: &Cli, cloud: &str) {
    let clouds = Emulators::start();
    let w = clouds.env(Workdir::for_path(cli, &format!("examples/slurm/{cloud}")));
    install(&w);
    apply(&w).expect_code(0);
    let before = outputs(&w);
    let states = crate::cli::state_values(&w);
    let addresses: Vec<String> = states.keys().filter(|a| a.starts_with("hpc_")).cloned().collect();
    let mut args = vec!["state", "rm"];
    args.extend(addresses.iter().map(String::as_str));
    w.run(&args).expect_code(0);
    let events_before = node_events(&clouds, cloud);
    // Fabric first, then the clusters, then Slurm: each import reads what the earlier ones hold.
    let order = |a: &String| {
        if a.starts_with("hpc_gpu_fabric") {
            0
        } else if a.starts_with("hpc_gpu_cluster") {
            1
        } else {
            2
        }
    };
    let mut sorted = addresses.clone();
    sorted.sort_by_key(order);
    for address in &sorted {
        let id = states[address]["id"].as_str().unwrap_or_default().to_owned();
        w.run(&["import", "-no-color", "-input=false", address, &id]).expect_code(0);
    }
    let replan = w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
    assert_eq!(replan.code, Some(0), "the plan after import is not empty:\n{}", replan.output());
    apply(&w).expect_code(0);
    let events_after = node_events(&clouds, cloud);
    assert_eq!(events_after, events_before, "the apply after import did something to nodes");
    let after = outputs(&w);
    assert_eq!(after, before, "the outputs changed through the import");
    let imported = crate::cli::state_values(&w);
    for address in &addresses {
        assert_eq!(imported[address], states[address], "{address} imported differs from what the apply made");
    }
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    clouds.assert_empty(&format!("examples/slurm/{cloud}"));
}
