//! The configuration `hpc_slurm_cluster` renders, run by a real Slurm (Debian's 22.05 slurmctld and slurmd on
//! 127.0.0.1, `harness.rs`): the topology Slurm reads is the fabric's placement, each partition has its
//! nodes, a node has its type's GPUs, a real slurmd registers (configless) and runs a job to COMPLETED, and
//! the health check program drains a node whose self-check fails, with the self-check's reason.

#[path = "../common/mod.rs"]
mod common;
mod harness;
mod jobs;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{destroy, provider_context, value};
use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use hpc_provider::framework::{ApplyRequest, PlanRequest, Resource};
use hpc_provider::resources::{gpu_cluster::GpuCluster, gpu_fabric::GpuFabric, slurm_cluster::SlurmCluster};
use serde_json::{Value as Json, json};

use harness::{Install, Rendered, Slurm};
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
        // Google's GPUDirect-TCPX NICs: network interfaces driven by gve (the GPU NICs and the host's).
        let drv = p.join("sys/bus/pci/drivers/gve");
        std::fs::create_dir_all(&drv).unwrap();
        for i in 0..rdma.min(16) {
            let dev = p.join(format!("sys/class/net/eth{i}/device"));
            std::fs::create_dir_all(&dev).unwrap();
            std::os::unix::fs::symlink(&drv, dev.join("driver")).unwrap();
        }
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
        // `nvidia-smi -L`, and `-q` with each GPU's NVLink Fabric section (rack-scale types): the first `joined`
        // GPUs have joined the domain's fabric, the others are still in progress.
        node.write(
            "bin/nvidia-smi",
            &format!(
                "#!/bin/sh\nn=$(cat {gpus})\nj=$(cat {joined})\ni=0\nwhile [ $i -lt $n ]; do\n  case \"$1\" in\n\
                 -L) echo \"GPU $i: NVIDIA GPU (UUID: GPU-$i)\" ;;\n\
                 -q) echo \"GPU 0000000$i:01:00.0\"; echo '    Fabric'; if [ $i -lt $j ]; then echo '        State : Completed'; \
                 else echo '        State : In Progress'; fi; echo '        Status : Success'; \
                 echo '        ClusterUUID : 2c6d2e1f-0000-4000-8000-00000000a001'; echo '        CliqueId : 7' ;;\n\
                 *) exit 9 ;;\n  esac\n  i=$((i+1))\ndone\n",
                gpus = p.join("gpus").display(),
                joined = p.join("joined").display()
            ),
        );
        // NVIDIA's IMEX service is installed (a rack-scale node's self-check asks for it; under Slurm its domain is set
        // per job by the prolog) and runs.
        node.write("bin/nvidia-imex", "#!/bin/sh\nexit 0\n");
        node.write("bin/systemctl", "#!/bin/sh\n[ \"$1 $2 $3\" = 'is-active --quiet nvidia-imex' ]\n");
        node.gpus(8);
        node.joined(8);
        node
    }

    fn joined(&self, n: u32) {
        std::fs::write(self.dir.path().join("joined"), n.to_string()).unwrap();
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
        topology_yaml: plan.topology.yaml.clone(),
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
        custom_settings: Default::default(),
        accounting: false,
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

/// A partition of 36 GB200 NVL72 nodes (`gb-0` to `gb-35`) in one placement group, two NVLink domains of 18.
fn gb200_two_domains() -> Partition {
    let sku = catalog::find_sku(Cloud::Aws, "p6e-gb200.36xlarge").unwrap();
    let all = names("gb", 36);
    Partition {
        name: "gb200".into(),
        default: true,
        max_time: "INFINITE".into(),
        nodes: SlurmNodes {
            cluster: "gb".into(),
            sku,
            names: all.clone(),
            placement_groups: vec![NodeGroup { name: "f-pg".into(), nodes: all.clone() }],
            nvlink_domains: vec![
                NodeGroup { name: "gb-nvl0".into(), nodes: all[..18].to_vec() },
                NodeGroup { name: "gb-nvl1".into(), nodes: all[18..].to_vec() },
            ],
        },
    }
}

/// On Slurm 24.11 (Debian 13's, in the root the test command makes with mmdebstrap) the same partition is
/// `topology/block`: one block per NVLink domain with exactly its 18 nodes, as `scontrol show topology` reads
/// them; a job asking for segments of a domain's size is placed, one asking for more than a domain is
/// refused; a GB200 node registers and runs a job on its 4 GPUs.
#[test]
fn on_slurm_24_11_a_gb200_nvl72_partition_of_two_domains_is_a_block_per_domain() {
    let mut s = spec(vec![gb200_two_domains()]);
    s.version = catalog::slurm::find("24.11").unwrap();
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&s, &mut d).expect("a plan");
    assert!(d.is_empty(), "{:?}", common::lines(&d));
    assert_eq!(plan.topology.kind, "topology/block");
    let mut slurm = Slurm::start_with(&Install::slurm_24_11(), &rendered(&plan));
    let version = slurm.ok("scontrol", &["--version"]);
    assert!(version.contains(" 24.11."), "{version}");
    let shown = slurm.ok("scontrol", &["show", "topology"]);
    let blocks: Vec<(&str, &str, &str)> = shown
        .lines()
        .filter(|l| l.starts_with("BlockName="))
        .map(|l| (field(l, "BlockName"), field(l, "Nodes"), field(l, "BlockSize")))
        .collect();
    assert_eq!(blocks, [("gb-nvl0", "gb-[0-17]", "18"), ("gb-nvl1", "gb-[18-35]", "18")], "{shown}");
    assert_eq!(slurm.ok("sinfo", &["-h", "-o", "%P %D"]).trim(), "gb200* 36");
    // Segments of a whole domain fit the blocks; a segment of 19 nodes fits none.
    let whole = slurm.run("sbatch", &["--test-only", "-p", "gb200", "-N", "36", "--segment=18", "--wrap", "hostname"]);
    assert!(whole.as_ref().is_ok_and(|o| o.contains("to start")), "{whole:?}");
    let over = slurm.run("sbatch", &["--test-only", "-p", "gb200", "-N", "19", "--segment=19", "--wrap", "hostname"]);
    assert!(over.as_ref().is_err_and(|e| e.contains("Requested node configuration is not available")), "{over:?}");
    // The same 19 nodes without segments span both blocks.
    let spanning = slurm.run("sbatch", &["--test-only", "-p", "gb200", "-N", "19", "--wrap", "hostname"]);
    assert!(spanning.as_ref().is_ok_and(|o| o.contains("to start")), "{spanning:?}");
    slurm.slurmd("gb-20", &[]);
    slurm.wait_node("gb-20", "registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    let shown = slurm.ok("scontrol", &["show", "node", "gb-20"]);
    assert_eq!((field(&shown, "Gres"), field(&shown, "CPUTot")), ("gpu:gb200:4", "144"));
    assert_eq!(slurm.job(&["-p", "gb200", "-w", "gb-20", "--gres=gpu:gb200:4", "--wrap", "hostname"]), "COMPLETED");
}

/// On Debian testing's Slurm (26.05), `topology.yaml`: a cluster of an H100 partition and a GB200 NVL72
/// partition of two domains gets a tree for the first and blocks of the domains for the second, each partition
/// naming its own topology; slurmctld starts with them and places segments of a whole domain within the domains of
/// the rack partition, while the H100 partition takes a job over its nodes.
#[test]
fn on_slurm_26_05_topology_yaml_gives_the_rack_partition_blocks_and_the_other_a_tree() {
    let h100 = catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
    let four = names("h100", 4);
    let tree = Partition {
        name: "h100".into(),
        default: true,
        max_time: "INFINITE".into(),
        nodes: SlurmNodes {
            cluster: "h100".into(),
            sku: h100,
            names: four.clone(),
            placement_groups: vec![NodeGroup { name: "f-pg".into(), nodes: four }],
            nvlink_domains: vec![],
        },
    };
    let mut rack = gb200_two_domains();
    rack.default = false;
    let mut s = spec(vec![tree, rack]);
    s.version = catalog::slurm::find("26.05").unwrap();
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&s, &mut d).expect("a plan");
    assert!(d.is_empty(), "{:?}", common::lines(&d));
    assert_eq!((plan.topology.kind, plan.topology.conf.is_none()), ("topology.yaml", true));
    let slurm = Slurm::start_with(&Install::slurm_testing(), &rendered(&plan));
    let version = slurm.ok("scontrol", &["--version"]);
    assert!(version.contains(" 26.05."), "{version}");
    assert_eq!(slurm.ok("sinfo", &["-h", "-o", "%P %D"]).trim(), "h100* 4\ngb200 36");
    let partition = slurm.ok("scontrol", &["show", "partition", "gb200"]);
    assert!(partition.contains("Topology=block"), "{partition}");
    let whole = slurm.run("sbatch", &["--test-only", "-p", "gb200", "-N", "36", "--segment=18", "--wrap", "hostname"]);
    assert!(whole.as_ref().is_ok_and(|o| o.contains("to start")), "{whole:?}");
    // A segment of a domain's size is placed within one domain. (26.05 places a larger segment over two blocks,
    // as the aggregated block levels of its block_sizes allow; 24.11 refused it.)
    let one = slurm.run("sbatch", &["--test-only", "-p", "gb200", "-N", "18", "--segment=18", "--wrap", "hostname"]);
    assert!(one.as_ref().is_ok_and(|o| o.contains("on nodes gb-[0-17] ") || o.contains("on nodes gb-[18-35] ")), "{one:?}");
    let h100_job = slurm.run("sbatch", &["--test-only", "-p", "h100", "-N", "4", "--wrap", "hostname"]);
    assert!(h100_job.as_ref().is_ok_and(|o| o.contains("to start")), "{h100_job:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gb200_nvl72_partition_of_two_domains_is_a_leaf_switch_per_domain_and_a_node_off_its_nvlink_fabric_is_drained() {
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&spec(vec![gb200_two_domains()]), &mut d).expect("a plan");
    // 22.05 has no topology/block: a tree, said in the plan.
    assert!(common::lines(&d).iter().any(|l| l.contains("Tree topology for rack-scale nodes")), "{:?}", common::lines(&d));
    assert_eq!(plan.topology.kind, "topology/tree");
    let mut slurm = Slurm::start(&rendered(&plan));
    // What Slurm reads: one leaf switch per NVLink domain with exactly its 18 nodes, under one spine.
    let shown = slurm.ok("scontrol", &["show", "topology"]);
    let expected = [("gb-nvl0", "gb-[0-17]"), ("gb-nvl1", "gb-[18-35]"), ("ml-spine", "gb-[0-35]")];
    assert_eq!(switches(&shown), expected.map(|(a, b)| (a.to_owned(), b.to_owned())), "{shown}");
    assert!(shown.lines().any(|l| l.starts_with("SwitchName=ml-spine") && l.contains("Level=1")), "{shown}");
    assert_eq!(slurm.ok("sinfo", &["-h", "-o", "%P %D"]).trim(), "gb200* 36");
    let shown = slurm.ok("scontrol", &["show", "node", "gb-20"]);
    assert_eq!((field(&shown, "Gres"), field(&shown, "CPUTot")), ("gpu:gb200:4", "144"));
    let node = FakeNode::new("aws", "p6e-gb200.36xlarge", 16).await;
    node.gpus(4);
    slurm.slurmd("gb-20", &node.env());
    slurm.wait_node("gb-20", "registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    assert_eq!(slurm.job(&["-p", "gb200", "-w", "gb-20", "--gres=gpu:gb200:4", "--wrap", "hostname"]), "COMPLETED");
    // One GPU drops out of the rack's NVLink fabric: the next health check drains the node with that reason.
    node.joined(3);
    let drained = slurm.wait_node("gb-20", "drained", |s| field(s, "State").contains("DRAIN"));
    let reason = drained.lines().find_map(|l| l.trim().strip_prefix("Reason=")).unwrap_or_default();
    assert!(reason.starts_with("hpc-selfcheck: NVLink fabric not completed: 3 of 4 GPUs"), "{drained}");
}

// ------------------------------------------------------------------ applied on each cloud's emulator

/// Plan and apply as the CLI does; panics on an error.
async fn apply_ok(ctx: &Context, r: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let mut d = Diagnostics::new();
    let planned = r.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut d).planned;
    assert!(!d.has_errors(), "{} plan: {:?}", r.type_name(), common::lines(&d));
    let out = r.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut d).await;
    assert!(!d.has_errors(), "{} apply: {:?}", r.type_name(), common::lines(&d));
    (out.new_state, common::lines(&d))
}

/// Whether a plan from `prior` changes nothing.
fn plans_nothing(ctx: &Context, r: &dyn Resource, prior: &Value, config: &Value) -> bool {
    let mut d = Diagnostics::new();
    let plan = r.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut d);
    plan.planned == *prior && plan.requires_replace.is_empty()
}

fn json_of(v: &Value) -> Json {
    match v {
        Value::Null | Value::Unknown => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Number(n) => n.as_i64().map_or_else(|| json!(n.as_f64()), |i| json!(i)),
        Value::String(s) => json!(s),
        Value::List(items) => Json::Array(items.iter().map(json_of).collect()),
        Value::Map(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), json_of(v))).collect()),
    }
}

/// The fabric reference a resource on it is given (`fabric = hpc_gpu_fabric.f`), with `extra` attributes.
fn fabric_ref(fabric: &Value, extra: &[&str]) -> Json {
    let mut keys = vec!["id", "name", "cloud", "region", "zone", "instance_type", "placement"];
    keys.extend(extra);
    Json::Object(keys.into_iter().map(|k| (k.to_owned(), json_of(fabric.get(k)))).collect())
}

/// What a partition's `cluster = hpc_gpu_cluster.x` carries.
fn cluster_ref(cluster: &Value) -> Json {
    let keys = ["name", "instance_type", "node_names", "placement_groups", "nvlink_domains"];
    let mut out: serde_json::Map<String, Json> = keys.into_iter().map(|k| (k.to_owned(), json_of(cluster.get(k)))).collect();
    out.insert("fabric".into(), json_of(cluster.get("fabric")));
    Json::Object(out)
}

struct OnCloud {
    ctx: Context,
    fabric: Json,
    /// What a cluster needs besides (an SSH key on Azure).
    extra: Json,
    inventory: Box<dyn Fn() -> Json>,
    snapshot: Box<dyn Fn() -> Json>,
}

/// A snapshot with each state a host passes through on its own as time goes by (Google's PROVISIONING and
/// STAGING, OCI's PROVISIONING and STARTING, EC2's pending) read as the state it settles into: a host that
/// boots on between two snapshots is not a change an apply made, while one stopped or made again still is.
fn settled(mut snapshot: Json) -> Json {
    fn walk(v: &mut Json) {
        match v {
            Json::Object(map) => {
                for (key, value) in map.iter_mut() {
                    let settles = match (key.as_str(), value.as_str()) {
                        ("status", Some("PROVISIONING" | "STAGING")) | ("lifecycleState", Some("PROVISIONING" | "STARTING")) => {
                            Some("RUNNING")
                        }
                        ("Name", Some("pending")) => Some("running"),
                        _ => None,
                    };
                    match settles {
                        Some(state) => *value = Json::from(state),
                        None => walk(value),
                    }
                }
            }
            Json::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut snapshot);
    snapshot
}

/// The tags (Google: labels) of the host named `host` in an emulator's snapshot.
fn host_tags(cloud: &str, snapshot: &Json, host: &str) -> Json {
    type Matches<'a> = &'a dyn Fn(&str, &Json) -> bool;
    let (all, key, name): (&Json, &str, Matches<'_>) = match cloud {
        "aws" => (&snapshot["resources"], "tags", &|_, v| v["kind"] == "instance" && v["tags"]["Name"] == host),
        "gcp" => (&snapshot["compute"], "labels", &|k, v| k.contains("/instances/") && v["name"] == host),
        "azure" => (&snapshot["arm"], "tags", &|k, _| k.ends_with(&format!("/virtualmachines/{host}"))),
        _ => (&snapshot["resources"], "freeformTags", &|_, v| v["displayName"] == host && v["shape"].is_string()),
    };
    all.as_object().into_iter().flatten().find(|(k, v)| name(k, v)).map(|(_, v)| v[key].clone()).unwrap_or(Json::Null)
}

/// A Slurm cluster's configuration with its one partition's cluster now `cluster`.
fn slurm_config_for(config: &Value, cluster: &Value) -> Value {
    let mut c = json_of(config);
    c["partition"][0]["cluster"] = cluster_ref(cluster);
    value(&SlurmCluster, c)
}

/// The host named `host` in an emulator's snapshot: its identity (another one if it were made again), and
/// what its instance metadata service serves it by key: AWS its tags (and a session token), Google Cloud
/// its metadata items, Azure its userData, OCI its metadata.
fn host_in(cloud: &str, snapshot: &Json, host: &str) -> (String, BTreeMap<String, String>) {
    let strings = |m: &Json| -> BTreeMap<String, String> {
        m.as_object().into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()
    };
    let missing = || panic!("no {host} in the {cloud} snapshot: {snapshot}");
    match cloud {
        "aws" => {
            let (id, i) = snapshot["resources"]
                .as_object()
                .into_iter()
                .flatten()
                .find(|(_, v)| v["kind"] == "instance" && v["tags"]["Name"] == host)
                .unwrap_or_else(missing);
            let mut files = strings(&i["tags"]);
            files.insert("token".into(), "tok".into());
            (id.clone(), files)
        }
        "gcp" => {
            let (_, i) = snapshot["compute"]
                .as_object()
                .into_iter()
                .flatten()
                .find(|(p, v)| p.contains("/instances/") && v["name"] == host)
                .unwrap_or_else(missing);
            let items = i["metadata"]["items"].as_array().into_iter().flatten();
            (i["id"].to_string(), items.filter_map(|m| Some((m["key"].as_str()?.to_owned(), m["value"].as_str()?.to_owned()))).collect())
        }
        "azure" => {
            let (_, vm) = snapshot["arm"]
                .as_object()
                .into_iter()
                .flatten()
                .find(|(k, _)| k.ends_with(&format!("/virtualmachines/{host}")))
                .unwrap_or_else(missing);
            let user_data = vm["properties"]["userData"].as_str().unwrap_or_default().to_owned();
            (vm["properties"]["vmId"].as_str().unwrap_or_default().to_owned(), [("userData".to_owned(), user_data)].into())
        }
        _ => {
            let (id, i) = snapshot["resources"]
                .as_object()
                .into_iter()
                .flatten()
                .find(|(_, v)| v["displayName"] == host && v["shape"].is_string() && v["lifecycleState"] != "TERMINATED")
                .unwrap_or_else(missing);
            (id.clone(), strings(&i["metadata"]))
        }
    }
}

/// A fabric with slurm = true, a 2-node GPU cluster that joins it, and a Slurm cluster over it, applied on
/// the emulator; then the Slurm cluster's rendered configuration run on a real Slurm: its topology is the
/// cluster's placement, its partition has the cluster's nodes, and a node registers and runs a job.
async fn applied_slurm_runs_on_a_real_slurm(cloud: OnCloud, instance_type: &str) {
    let ctx = &cloud.ctx;
    let mut fabric_config = cloud.fabric.clone();
    fabric_config["slurm"] = json!(true);
    let (fabric, _) = apply_ok(ctx, &GpuFabric, &Value::Null, &value(&GpuFabric, fabric_config.clone())).await;
    let join = fabric.get("slurm_join");
    assert_eq!(join.get("controller_addresses"), &Value::list([Value::from("10.0.255.244"), Value::from("10.0.255.245")]));
    assert!(join.get("key").as_str().is_some_and(|k| k.len() >= 64), "a generated key: {join:?}");

    let cloud_name = fabric.get("cloud").as_str().unwrap().to_owned();
    let cluster_config = |nodes: u32| {
        let mut c = json!({"name": "gpu", "fabric": fabric_ref(&fabric, &[]), "node_count": nodes, "slurm": json_of(join)});
        c.as_object_mut().unwrap().extend(cloud.extra.as_object().cloned().unwrap_or_default());
        value(&GpuCluster, c)
    };
    let (cluster, _) = apply_ok(ctx, &GpuCluster, &Value::Null, &cluster_config(2)).await;

    let slurm_config = |cluster: &Value| {
        let mut c = json!({
            "name": "ml",
            "fabric": fabric_ref(&fabric, &["cidr_block", "slurm_join"]),
            "slurm_version": "22.05",
            "partition": [{"name": "gpu", "cluster": cluster_ref(cluster), "default": true, "max_time": null}],
        });
        if let Some(key) = cloud.extra.get("ssh_public_key") {
            c["ssh_public_key"] = key.clone();
        }
        value(&SlurmCluster, c)
    };
    let slurm_config = slurm_config(&cluster);
    let (state, _) = apply_ok(ctx, &SlurmCluster, &Value::Null, &slurm_config).await;
    assert_eq!(state.get("controller_address").as_str(), Some("10.0.255.244"));
    let login = state.get("login_command").as_str().unwrap_or_default().to_owned();
    assert!(login.starts_with("ssh ") && login.contains("@10.0.255."), "{login}");
    let found = common::read_found(ctx, &SlurmCluster, &state).await;
    assert!(plans_nothing(ctx, &SlurmCluster, &found, &slurm_config), "the re-plan is empty: {found:?}");

    // Imported from its id (as another state would): what the cloud holds comes back, and the first plan fills
    // in the fabric and the partition in place. Its apply changes nothing on the cloud (the configuration's
    // revision is the one the hosts carry), and the re-plan after it is empty.
    let id = state.get("id").as_str().unwrap().to_owned();
    let mut d = Diagnostics::new();
    let imported = SlurmCluster.import(ctx, &id, &mut d).await.unwrap_or_else(|| panic!("import {id}: {:?}", common::lines(&d)));
    for attr in ["slurm_conf", "gres_conf", "topology_conf", "config_revision", "slurm_version", "controller_address", "owner"] {
        assert_eq!(imported.get(attr), state.get(attr), "{attr}");
    }
    assert_eq!(
        (imported.get("login_nodes").as_number().and_then(|n| n.as_i64()), imported.get("backup_controller")),
        (Some(1), &Value::Null)
    );
    let imported = common::read_found(ctx, &SlurmCluster, &imported).await;
    let plan = SlurmCluster.plan(
        ctx,
        PlanRequest { prior: &imported, proposed: &slurm_config, config: &slurm_config, prior_private: &[] },
        &mut d,
    );
    assert!(plan.requires_replace.is_empty() && !d.has_errors(), "in place: {:?} {:?}", plan.requires_replace, common::lines(&d));
    let before = (cloud.snapshot)();
    let out = SlurmCluster
        .apply(ctx, ApplyRequest { prior: &imported, planned: &plan.planned, config: &slurm_config, private: &[] }, &mut d)
        .await;
    assert!(!d.has_errors(), "{:?}", common::lines(&d));
    assert_eq!(settled((cloud.snapshot)()), settled(before), "the apply after the import changes nothing on the cloud");
    let state = out.new_state;
    let found = common::read_found(ctx, &SlurmCluster, &state).await;
    assert!(plans_nothing(ctx, &SlurmCluster, &found, &slurm_config), "the re-plan after the import is empty: {found:?}");

    // The applied configuration, on a real Slurm.
    let text = |k: &str| state.get(k).as_str().map(str::to_owned);
    let rendered = Rendered {
        slurm_conf: text("slurm_conf").unwrap(),
        gres_conf: text("gres_conf").unwrap(),
        cgroup_conf: text("cgroup_conf").unwrap(),
        topology_conf: text("topology_conf"),
        topology_yaml: text("topology_yaml"),
        healthcheck: text("healthcheck_program").unwrap(),
    };
    let mut slurm = Slurm::start(&rendered);
    let groups = cluster.get("placement_groups").as_list().unwrap_or_default().to_vec();
    let expected: Vec<(String, String)> = groups
        .iter()
        .map(|g| {
            let nodes: Vec<String> =
                g.get("nodes").as_list().unwrap_or_default().iter().filter_map(|n| n.as_str().map(str::to_owned)).collect();
            (g.get("name").as_str().unwrap_or_default().to_owned(), hpc_provider::nodes::compress(&nodes))
        })
        .collect();
    assert!(!expected.is_empty(), "the cluster is placed together: {:?}", cluster.get("placement_groups"));
    assert_eq!(switches(&slurm.ok("scontrol", &["show", "topology"])), expected, "Slurm's topology is the cloud's placement");
    assert_eq!(slurm.ok("sinfo", &["-h", "-o", "%P %D"]).trim(), "gpu* 2");
    let gres = format!(
        "gpu:{}:",
        hpc_provider::catalog::find_sku(hpc_provider::catalog::Cloud::parse(fabric.get("cloud").as_str().unwrap()).unwrap(), instance_type)
            .unwrap()
            .gpu_model
            .to_lowercase()
    );
    assert!(field(&slurm.ok("scontrol", &["show", "node", "gpu-1"]), "Gres").starts_with(&gres));
    let node = FakeNode::new(fabric.get("cloud").as_str().unwrap(), instance_type, 32).await;
    slurm.slurmd("gpu-0", &node.env());
    slurm.wait_node("gpu-0", "registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    assert_eq!(slurm.job(&["-p", "gpu", "-w", "gpu-0", "--wrap", "hostname"]), "COMPLETED");

    // A third node. The cluster grows, and the Slurm cluster changes in place: nothing is made again, the
    // apply writes the new configuration into the controller's metadata, and the controller's sync program
    // takes it from there and restarts slurmctld with it. The node that ran stays; the new one registers.
    let (controller, _) = host_in(&cloud_name, &(cloud.snapshot)(), "ml-controller");
    let (cluster, _) = apply_ok(ctx, &GpuCluster, &cluster, &cluster_config(3)).await;
    let grown = slurm_config_for(&slurm_config, &cluster);
    let mut d = Diagnostics::new();
    let plan = SlurmCluster.plan(ctx, PlanRequest { prior: &found, proposed: &grown, config: &grown, prior_private: &[] }, &mut d);
    assert!(plan.requires_replace.is_empty() && !d.has_errors(), "an update in place: {:?}", common::lines(&d));
    assert_ne!(plan.planned.get("config_revision"), found.get("config_revision"));
    assert!(common::lines(&d).iter().any(|l| l.contains("The Slurm configuration changes") && l.contains("Nothing is made again")));
    let out = SlurmCluster.apply(ctx, ApplyRequest { prior: &found, planned: &plan.planned, config: &grown, private: &[] }, &mut d).await;
    assert!(!d.has_errors(), "{:?}", common::lines(&d));
    let state = out.new_state;
    let (after, metadata) = host_in(&cloud_name, &(cloud.snapshot)(), "ml-controller");
    assert_eq!(after, controller, "the controller is the host it was");
    let found = common::read_found(ctx, &SlurmCluster, &state).await;
    assert!(plans_nothing(ctx, &SlurmCluster, &found, &grown), "the re-plan is empty: {found:?}");
    // Tags: onto the hosts as they are; one taken out of the configuration leaves them.
    let mut tagged = json_of(&grown);
    tagged["tags"] = json!({"team": "ml-infra", "cost-center": "4711"});
    let tagged = value(&SlurmCluster, tagged);
    let (retagged, _) = apply_ok(ctx, &SlurmCluster, &found, &tagged).await;
    let found = common::read_found(ctx, &SlurmCluster, &retagged).await;
    let mut tagged = json_of(&grown);
    tagged["tags"] = json!({"team": "ml-infra"});
    let tagged = value(&SlurmCluster, tagged);
    let (retagged, _) = apply_ok(ctx, &SlurmCluster, &found, &tagged).await;
    for host in ["ml-controller", "ml-login0"] {
        let tags = host_tags(&cloud_name, &(cloud.snapshot)(), host);
        assert_eq!(tags["team"], "ml-infra", "{host}");
        assert!(tags.get("cost-center").is_none(), "the tag taken out of the configuration is still on {host}: {tags}");
    }
    assert_eq!(host_in(&cloud_name, &(cloud.snapshot)(), "ml-controller").0, controller, "retagged, not made again");
    let found = common::read_found(ctx, &SlurmCluster, &retagged).await;
    assert!(plans_nothing(ctx, &SlurmCluster, &found, &tagged), "the re-plan is empty: {found:?}");

    // What the controller's hpc-slurm-sync writes from what the cloud now holds for it (booted hosts run the
    // program itself: acceptance, slurm_boots_<cloud>).
    let payload = match cloud_name.as_str() {
        "aws" => hpc_provider::clouds::slurm::aws_payload(&metadata).expect("the configuration's chunks in the tags"),
        "gcp" => metadata[hpc_provider::clouds::slurm::channel::GCP_KEY].clone(),
        "azure" => metadata["userData"].clone(),
        _ => metadata[hpc_provider::clouds::slurm::channel::OCI_KEY].clone(),
    };
    let (_, files) = hpc_provider::clouds::slurm::config_of_payload(&payload).expect("the payload decodes");
    let text = |k: &str| state.get(k).as_str().map(str::to_owned);
    assert_eq!(files.get("slurm.conf"), text("slurm_conf").as_ref());
    let written = |f: &str| files.get(f).cloned();
    slurm.reconfigure(&Rendered {
        slurm_conf: written("slurm.conf").unwrap(),
        gres_conf: written("gres.conf").unwrap(),
        cgroup_conf: written("cgroup.conf").unwrap(),
        topology_conf: written("topology.conf"),
        topology_yaml: written("topology.yaml"),
        healthcheck: text("healthcheck_program").unwrap(),
    });
    assert_eq!(slurm.ok("sinfo", &["-h", "-o", "%P %D"]).trim(), "gpu* 3");
    let topology = switches(&slurm.ok("scontrol", &["show", "topology"]));
    assert!(topology.iter().any(|(_, nodes)| nodes == "gpu-[0-2]"), "the new node in its placement group: {topology:?}");
    slurm.wait_node("gpu-0", "still registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    slurm.stop_slurmds();
    slurm.slurmd("gpu-2", &node.env());
    slurm.wait_node("gpu-2", "registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    assert_eq!(slurm.job(&["-p", "gpu", "-w", "gpu-2", "--wrap", "hostname"]), "COMPLETED");
    drop(slurm);

    destroy(ctx, &SlurmCluster, &state).await;
    destroy(ctx, &GpuCluster, &cluster).await;
    destroy(ctx, &GpuFabric, &fabric).await;
    let inventory = (cloud.inventory)();
    assert_eq!(inventory["empty"], true, "{inventory}");
}

fn run(test: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(test);
}

#[test]
fn aws_applied_slurm_runs_on_a_real_slurm() {
    run(async {
        let emulator = start_aws();
        let ctx =
            provider_context(json!({"aws": {"region": "us-east-1", "endpoint": emulator.endpoint, "access_key": "t", "secret_key": "t"}}));
        let ep = emulator.endpoint.clone();
        let fabric = json!({"name": "f", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5.48xlarge"});
        let ep2 = ep.clone();
        let on = OnCloud {
            ctx,
            fabric,
            extra: json!({}),
            inventory: Box::new(move || admin(&ep, "GET", "inventory", None)),
            snapshot: Box::new(move || admin(&ep2, "GET", "snapshot", None)),
        };
        applied_slurm_runs_on_a_real_slurm(on, "p5.48xlarge").await;
    });
}

#[test]
fn gcp_applied_slurm_runs_on_a_real_slurm() {
    run(async {
        let ep = start_gcp();
        let ctx = provider_context(json!({"gcp": {"project": "ml-prod", "endpoint": ep}}));
        let fabric =
            json!({"name": "f", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g"});
        let ep2 = ep.clone();
        let on = OnCloud {
            ctx,
            fabric,
            extra: json!({}),
            inventory: Box::new(move || admin(&ep, "GET", "inventory", None)),
            snapshot: Box::new(move || admin(&ep2, "GET", "snapshot", None)),
        };
        applied_slurm_runs_on_a_real_slurm(on, "a3-highgpu-8g").await;
    });
}

#[test]
fn azure_applied_slurm_runs_on_a_real_slurm() {
    run(async {
        let (ep, pem) = start_azure();
        // SAFETY: the one Azure test of this binary sets it before it builds an ARM client; nothing else
        // here reads or writes the environment meanwhile.
        unsafe { std::env::set_var("HPC_AZURE_CA_FILE", &pem) };
        let ctx = provider_context(json!({"azure": {"subscription_id": "00000000-0000-0000-0000-0000000000aa", "endpoint": ep}}));
        let fabric = json!({"name": "f", "cloud": "azure", "region": "eastus", "instance_type": "Standard_ND96isr_H100_v5"});
        let extra = json!({"ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x"});
        let (ep2, pem2) = (ep.clone(), pem.clone());
        let on = OnCloud {
            ctx,
            fabric,
            extra,
            inventory: Box::new(move || azure_admin(&ep, &pem, "GET", "inventory", None)),
            snapshot: Box::new(move || azure_admin(&ep2, &pem2, "GET", "snapshot", None)),
        };
        applied_slurm_runs_on_a_real_slurm(on, "Standard_ND96isr_H100_v5").await;
    });
}

#[test]
fn oci_applied_slurm_runs_on_a_real_slurm() {
    run(async {
        let (ep, key) = start_oci();
        let ctx = provider_context(json!({"oci": {"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint,
                                                   "private_key": key.private_key_pem, "region": "us-ashburn-1", "endpoint": ep}}));
        let fabric = json!({"name": "f", "cloud": "oci", "region": "us-ashburn-1", "zone": "Uocm:US-ASHBURN-AD-2",
                            "compartment_id": "ocid1.compartment.oc1..lib", "instance_type": "BM.GPU.H100.8"});
        let extra = json!({"timeouts": {"create": "60s", "update": "60s"}});
        let ep2 = ep.clone();
        let on = OnCloud {
            ctx,
            fabric,
            extra,
            inventory: Box::new(move || admin(&ep, "GET", "inventory", None)),
            snapshot: Box::new(move || admin(&ep2, "GET", "snapshot", None)),
        };
        applied_slurm_runs_on_a_real_slurm(on, "BM.GPU.H100.8").await;
    });
}

/// GB200 IMEX per job (NVIDIA's recommendation for Slurm): the rendered configuration runs the nodes' prolog at
/// allocation and gives each node its NVLink domain as a feature; the prolog, run as slurmd runs it for a job on
/// gb-[16-19] on gb-16, asks the real slurmctld and makes gb-16's IMEX domain of the job's nodes in its NVLink
/// domain only (gb-16 and gb-17, not gb-18 and gb-19 across the rack boundary), then starts the service and waits
/// for it; the epilog stops it and empties the list. Stand-ins, for NVIDIA's software only: `nvidia-imex`,
/// `nvidia-imex-ctl` (READY) and `systemctl` (records what it is asked).
#[test]
fn the_prolog_makes_a_jobs_imex_domain_of_its_nodes_in_one_nvlink_domain() {
    let plan = slurm::plan(&spec(vec![gb200_two_domains()]), &mut Diagnostics::new()).expect("a plan");
    assert!(
        plan.slurm_conf.contains("Prolog=/usr/local/sbin/hpc-slurm-prolog\nEpilog=/usr/local/sbin/hpc-slurm-epilog\nPrologFlags=Alloc\n"),
        "{}",
        plan.slurm_conf
    );
    assert!(
        plan.slurm_conf.contains("NodeName=gb-[0-17] ") && plan.slurm_conf.contains("Features=gb,gb200,nvlink-gb-nvl0 "),
        "{}",
        plan.slurm_conf
    );
    let slurm = Slurm::start(&rendered(&plan));
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tool = |name: &str, body: &str| {
        std::fs::write(bin.join(name), format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let calls = dir.path().join("calls");
    tool("nvidia-imex", "exit 0");
    tool("nvidia-imex-ctl", "echo 'Nodes: READY'");
    tool("systemctl", &format!("echo \"systemctl $*\" >> {}", calls.display()));
    let nodes_config = dir.path().join("nodes_config.cfg");
    let run = |program: &str| {
        let script = dir.path().join(program.rsplit('/').next().unwrap());
        let text = if program.ends_with("prolog") {
            hpc_provider::clouds::slurm::prolog_program()
        } else {
            hpc_provider::clouds::slurm::epilog_program()
        };
        // As slurmd runs it: its own PATH (the stand-ins first), the job's nodes, this node's name.
        let text = text.replace("PATH=/usr/sbin:/usr/bin:/sbin:/bin", &format!("PATH={}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()));
        std::fs::write(&script, text).unwrap();
        let out = std::process::Command::new("bash")
            .arg(&script)
            .env("SLURM_JOB_NODELIST", "gb-[16-19]")
            .env("SLURMD_NODENAME", "gb-16")
            .env("SLURM_JOB_ID", "7")
            .env("SLURM_CONF", slurm.conf())
            .env("HPC_IMEX_NODES_CONFIG", &nodes_config)
            .env("HPC_IMEX_WAIT_SECONDS", "5")
            .output()
            .unwrap();
        assert!(out.status.success(), "{program}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run("hpc-slurm-prolog");
    let mut peers: Vec<String> = std::fs::read_to_string(&nodes_config).unwrap().lines().map(str::to_owned).collect();
    peers.sort();
    // Unregistered nodes' addresses are their names (NodeAddr).
    assert_eq!(peers, ["gb-16", "gb-17"]);
    assert_eq!(std::fs::read_to_string(&calls).unwrap(), "systemctl restart nvidia-imex\n");
    run("hpc-slurm-epilog");
    assert_eq!(std::fs::read_to_string(&nodes_config).unwrap(), "");
    assert!(std::fs::read_to_string(&calls).unwrap().ends_with("systemctl stop nvidia-imex\n"));
}
