//! The configuration `hpc_slurm_cluster` renders, run by a real Slurm (Debian's 22.05 slurmctld and slurmd on
//! 127.0.0.1, `harness.rs`): the topology Slurm reads is the fabric's placement, each partition has its
//! nodes, a node has its type's GPUs, a real slurmd registers (configless) and runs a job to COMPLETED, and
//! the health check program drains a node whose self-check fails, with the self-check's reason.

mod harness;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use harness::{Rendered, Slurm};
use hpc_provider::catalog::{self, Cloud};
use hpc_provider::framework::{Context, DataSource, Diagnostics, Value};
use hpc_provider::model::{FabricRef, NodeGroup, Partition, Placement, SlurmNodes, SlurmSpec, TopologyChoice};
use hpc_provider::planner::slurm;
use hpc_provider::resources::gpu_selfcheck::GpuSelfcheck;
use tokio_util::sync::CancellationToken;

/// A node's self-check and the fakes it runs against: `gpus` GPUs for `nvidia-smi -L` (a file the test
/// rewrites), the node type's RDMA devices in a sysfs of its own.
struct FakeNode {
    dir: tempfile::TempDir,
}

impl FakeNode {
    async fn new(cloud: &str, instance_type: &str, rdma: u32) -> FakeNode {
        let node = FakeNode { dir: tempfile::tempdir().unwrap() };
        let p = node.dir.path();
        std::fs::create_dir_all(p.join("bin")).unwrap();
        for i in 0..rdma {
            std::fs::create_dir_all(p.join(format!("sys/class/infiniband/rdmap{i}s0/ports/1"))).unwrap();
        }
        std::fs::create_dir_all(p.join("sys/class/net")).unwrap();
        let config = Value::object([
            ("cloud", Value::from(cloud)),
            ("instance_type", Value::from(instance_type)),
            ("on_failure", Value::from("log")),
            ("publish_verdict", Value::from(false)),
        ]);
        let mut d = Diagnostics::new();
        let state = GpuSelfcheck.read(&Context::new(CancellationToken::new(), None), &config, &mut d).await;
        assert!(!d.has_errors(), "{d:?}");
        node.write("selfcheck.sh", state.get("script").as_str().expect("the self-check script"));
        node.write(
            "bin/nvidia-smi",
            &format!(
                "#!/bin/sh\n[ \"$1\" = -L ] || exit 9\nn=$(cat {})\ni=0\nwhile [ $i -lt $n ]; do echo \"GPU $i: NVIDIA GPU (UUID: GPU-$i)\"; i=$((i+1)); done\n",
                p.join("gpus").display()
            ),
        );
        node.gpus(8);
        node
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.dir.path().join(rel);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn gpus(&self, n: u32) {
        std::fs::write(self.dir.path().join("gpus"), n.to_string()).unwrap();
    }

    /// The environment slurmd hands its health check: the fakes first on PATH, the self-check's overrides.
    fn env(&self) -> Vec<(&'static str, String)> {
        let p = self.dir.path();
        vec![
            ("PATH", format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", p.join("bin").display())),
            ("HPC_SELFCHECK_PROGRAM", p.join("selfcheck.sh").display().to_string()),
            ("HPC_SELFCHECK_SYSFS", p.join("sys").display().to_string()),
            ("HPC_SELFCHECK_LOG", p.join("selfcheck.log").display().to_string()),
            ("HPC_SELFCHECK_DRY_RUN", "1".into()),
        ]
    }
}

fn rendered(plan: &slurm::SlurmPlan) -> Rendered {
    Rendered {
        slurm_conf: plan.slurm_conf.clone(),
        gres_conf: plan.gres_conf.clone(),
        cgroup_conf: plan.cgroup_conf.clone(),
        topology_conf: plan.topology.conf.clone(),
        healthcheck: plan.healthcheck.clone(),
    }
}

fn names(cluster: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| hpc_provider::nodes::node_name(cluster, i)).collect()
}

fn spec(partitions: Vec<Partition>) -> SlurmSpec {
    let sku = catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
    SlurmSpec {
        name: "ml".into(),
        fabric: FabricRef {
            name: "f".into(),
            cloud: Cloud::Aws,
            region: "us-east-1".into(),
            zone: None,
            sku,
            placement: Placement::Cluster,
        },
        cidr: "10.0.0.0/16".into(),
        version: catalog::slurm::find("22.05").unwrap(),
        controller_type: "m7i.2xlarge".into(),
        backup: false,
        state_save_location: "/var/spool/slurmctld".into(),
        login_type: "m7i.2xlarge".into(),
        login_nodes: 1,
        partitions,
        topology: TopologyChoice::Auto,
        health_check_interval: 300,
        image: None,
        ssh_public_key: None,
        tags: Default::default(),
        key: None,
    }
}

/// `scontrol show topology` as (switch, nodes or switches) pairs.
fn switches(shown: &str) -> Vec<(String, String)> {
    shown
        .lines()
        .filter_map(|l| {
            let name = l.split_whitespace().find_map(|w| w.strip_prefix("SwitchName="))?;
            let below = l.split_whitespace().find_map(|w| w.strip_prefix("Nodes=").or_else(|| w.strip_prefix("Switches=")))?;
            Some((name.to_owned(), below.to_owned()))
        })
        .collect()
}

fn field<'a>(shown: &'a str, key: &str) -> &'a str {
    shown.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}="))).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h100_partition_in_one_placement_group_runs_a_job_and_a_failing_self_check_drains_its_node() {
    let sku = catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
    let partition = Partition {
        name: "h100".into(),
        default: true,
        max_time: "INFINITE".into(),
        nodes: SlurmNodes {
            cluster: "train".into(),
            sku,
            names: names("train", 16),
            placement_groups: vec![NodeGroup { name: "f-pg".into(), nodes: names("train", 16) }],
            nvlink_domains: vec![],
        },
    };
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&spec(vec![partition]), &mut d).expect("a plan");
    let mut slurm = Slurm::start(&rendered(&plan));
    // The topology Slurm reads: one leaf switch, the placement group, with every node.
    assert_eq!(switches(&slurm.ok("scontrol", &["show", "topology"])), [("f-pg".to_owned(), "train-[0-15]".to_owned())]);
    // The partition with its 16 nodes, all powered down until they register.
    assert_eq!(slurm.ok("sinfo", &["-h", "-o", "%P %D"]).trim(), "h100* 16");
    let shown = slurm.ok("scontrol", &["show", "node", "train-3"]);
    assert_eq!((field(&shown, "Gres"), field(&shown, "CPUTot"), field(&shown, "RealMemory")), ("gpu:h100:8", "192", "1992295"));

    let node = FakeNode::new("aws", "p5.48xlarge", 32).await;
    slurm.slurmd("train-0", &node.env());
    let up = slurm.wait_node("train-0", "registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    assert_eq!(field(&up, "NodeAddr"), "127.0.0.1", "the address from the registration, no DNS: {up}");
    let state = slurm.job(&["-p", "h100", "-w", "train-0", "--gres=gpu:h100:8", "--wrap", "hostname"]);
    assert_eq!(state, "COMPLETED");

    // Two GPUs fall off the bus: the next health check drains the node with the self-check's reason.
    node.gpus(6);
    let drained = slurm.wait_node("train-0", "drained", |s| field(s, "State").contains("DRAIN"));
    let reason = drained.lines().find_map(|l| l.trim().strip_prefix("Reason=")).unwrap_or_default();
    assert!(reason.starts_with("hpc-selfcheck: expected 8 GPUs, found 6"), "{drained}");
    // Back to eight: the health check resumes the node it drained.
    node.gpus(8);
    slurm.wait_node("train-0", "resumed", |s| !field(s, "State").contains("DRAIN"));
    let _ = Path::new("/");
}
