//! What the plan renders, asked of a real Slurm with `sbatch --test-only` (no slurmd needed) and, for the GPU
//! device files, a real slurmd: every NCCL job a plan can give is one sbatch takes, on Debian 12's 22.05 and
//! Debian 13's 24.11; nodes that share no RDMA are never given one job; a partly filled NVLink domain does not
//! make a whole domain's segments refused; an MI300X node registers with its render nodes; and what the plan
//! takes as a partition's `max_time` slurmctld starts with and reads as the plan does.

use hpc_provider::catalog::{Fabric, Sku};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use serde_json::json;

use super::common::{self, value};
use super::harness::{Install, Slurm};
use super::*;

/// The nodes of an `hpc_gpu_cluster` of `count` nodes of `sku` named `cluster`, as its plan gives them to a
/// partition: its node names, the placement groups the cloud's expander makes (Azure's scale sets, the fabric's
/// placement group or compute cluster) and its NVLink domains.
fn planned(sku: &'static Sku, cluster: &str, count: u32) -> SlurmNodes {
    let (region, zone) = match sku.cloud {
        Cloud::Aws => ("us-east-1", Some("us-east-1a")),
        Cloud::Azure => ("eastus", None),
        Cloud::Gcp => ("us-central1", Some("us-central1-a")),
        Cloud::Oci => ("us-ashburn-1", Some("Uocm:US-ASHBURN-AD-2")),
    };
    // Node types without RDMA are placed nowhere in particular; AWS's GB200 UltraServers come in Capacity Blocks.
    let ultraserver = sku.cloud == Cloud::Aws && sku.nvlink_domain.is_some();
    let placement = if sku.fabric == Fabric::None || sku.rdma_interfaces.is_none() || ultraserver { "none" } else { "cluster" };
    let fabric = json!({"id": "f", "name": "f", "cloud": sku.cloud.as_str(), "region": region, "zone": zone,
                        "instance_type": sku.name, "placement": placement});
    let mut config = json!({"name": cluster, "fabric": fabric, "node_count": count});
    // What each node type needs besides, as the planner goldens give it: an SSH key on Azure, an Arm64 image for
    // Grace, a GRID image for Azure's A10, the capacity AWS and Google Cloud sell rack-scale types as.
    if sku.cloud == Cloud::Azure {
        config["ssh_public_key"] = json!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x");
    }
    let image = match sku.cloud {
        Cloud::Aws => "ami-0arm64",
        Cloud::Azure => "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/arm64-hpc",
        Cloud::Gcp => "projects/p/global/images/arm64-gpu",
        Cloud::Oci => "ocid1.image.oc1..arm64gpu",
    };
    if sku.arm64() || sku.name == "Standard_NV36ads_A10_v5" {
        config["image"] = json!(image);
    }
    if ultraserver {
        (config["capacity_type"], config["reservation_id"]) = (json!("capacity-block"), json!("cb-0123"));
    }
    if sku.cloud == Cloud::Gcp && sku.nvlink_domain.is_some() {
        (config["capacity_type"], config["reservation_id"]) = (json!("reservation"), json!("a4x-block"));
    }
    let config = value(&GpuCluster, config);
    let mut d = Diagnostics::new();
    let spec = hpc_provider::planner::spec::parse_cluster(&config, &mut d)
        .unwrap_or_else(|| panic!("{} x {count}: {:?}", sku.name, common::lines(&d)));
    let group = |(name, nodes): (String, Vec<String>)| NodeGroup { name, nodes };
    let placement_groups = hpc_provider::clouds::expander(sku.cloud)
        .placement_groups(&spec)
        .into_iter()
        .map(|(name, nodes)| group((name, nodes.into_iter().map(|i| hpc_provider::nodes::node_name(cluster, i)).collect())))
        .collect();
    let nvlink_domains = hpc_provider::planner::rack::domain_rows(&spec).into_iter().map(|(name, nodes, _)| group((name, nodes))).collect();
    SlurmNodes { cluster: cluster.into(), sku, names: names(cluster, count), placement_groups, nvlink_domains }
}

/// A Slurm cluster of `version` on `sku`'s cloud, a partition per cluster.
fn slurm_on(sku: &'static Sku, version: &str, clusters: Vec<SlurmNodes>) -> SlurmSpec {
    let mut s = spec(
        clusters
            .into_iter()
            .map(|nodes| Partition { name: format!("p{}", nodes.names.len()), default: false, max_time: "INFINITE".into(), nodes })
            .collect(),
    );
    s.version = catalog::slurm::find(version).unwrap();
    s.fabric.cloud = sku.cloud;
    s.fabric.sku = sku;
    s
}

/// Every plan to try on a version: per node type, its clusters as partitions of one Slurm cluster (1, 4 and 130
/// nodes), and a rack-scale type's whole domains (18, 36, and 108: on Azure two scale sets) one Slurm cluster each.
fn plans(version: &str) -> Vec<(String, SlurmSpec)> {
    let mut out = Vec::new();
    for sku in catalog::SKUS {
        let what = format!("{} {} on {version}", sku.cloud, sku.name);
        if sku.nvlink_domain.is_some() {
            for n in [18, 36, 108] {
                out.push((format!("{what}, {n} nodes"), slurm_on(sku, version, vec![planned(sku, &format!("c{n}"), n)])));
            }
        } else {
            let clusters = [1, 4, 130].into_iter().map(|n| planned(sku, &format!("c{n}"), n)).collect();
            out.push((format!("{what}, 1, 4 and 130 nodes"), slurm_on(sku, version, clusters)));
        }
    }
    out
}

/// Each NCCL job of each plan, submitted with `sbatch --test-only` to a slurmctld running that plan's files.
fn every_nccl_job_is_accepted(install: &Install, version: &str) {
    let mut refused = Vec::new();
    let mut jobs = 0;
    for (what, spec) in plans(version) {
        let mut d = Diagnostics::new();
        let plan = slurm::plan(&spec, &mut d).unwrap_or_else(|| panic!("{what}: {:?}", common::lines(&d)));
        assert!(plan.nccl_tests.len() >= spec.partitions.len(), "{what}: a job per partition at least");
        let slurm = Slurm::start_with(install, &rendered(&plan));
        for (key, script) in &plan.nccl_tests {
            jobs += 1;
            match slurm.test_only(key, script) {
                Ok(said) if said.contains("to start") => {}
                other => refused.push(format!("{what}: nccl_tests[{key:?}]: {other:?}\n{script}")),
            }
        }
    }
    assert!(refused.is_empty(), "{} of {jobs} NCCL jobs refused:\n{}", refused.len(), refused.join("\n\n"));
    assert!(jobs > 2 * catalog::SKUS.len(), "{jobs} jobs");
}

#[test]
fn every_nccl_job_a_plan_can_give_is_accepted_by_sbatch_on_slurm_22_05() {
    every_nccl_job_is_accepted(&Install::Host, "22.05");
}

#[test]
fn every_nccl_job_a_plan_can_give_is_accepted_by_sbatch_on_slurm_24_11() {
    every_nccl_job_is_accepted(&Install::slurm_24_11(), "24.11");
}

/// A 130-node ND H100 v5 cluster is two scale sets, each its own InfiniBand fabric: Slurm never gives one job
/// nodes of both, and each fabric's NCCL job runs.
fn two_scale_sets_are_two_fabrics(install: &Install, version: &str) {
    let sku = catalog::find_sku(Cloud::Azure, "Standard_ND96isr_H100_v5").unwrap();
    let nodes = planned(sku, "nd", 130);
    assert_eq!(nodes.placement_groups.iter().map(|g| g.nodes.len()).collect::<Vec<_>>(), [65, 65]);
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&slurm_on(sku, version, vec![nodes]), &mut d).expect("a plan");
    let slurm = Slurm::start_with(install, &rendered(&plan));
    let job =
        |args: &[&str]| slurm.run("sbatch", &[&["--test-only", "-p", "p130", "--exclusive"][..], args, &["--wrap", "hostname"]].concat());
    let within = job(&["-N", "65"]);
    assert!(within.as_ref().is_ok_and(|o| o.contains("to start")), "{within:?}");
    for across in [job(&["-N", "66"]), job(&["-N", "2", "-w", "nd-0,nd-100"]), job(&["-N", "130"])] {
        assert!(across.as_ref().is_err_and(|e| e.contains("Requested node configuration is not available")), "{across:?}");
    }
    assert_eq!(plan.nccl_tests.keys().collect::<Vec<_>>(), ["p130", "p130/nd-1"]);
    for (key, script) in &plan.nccl_tests {
        let said = slurm.test_only(key, script);
        assert!(said.as_ref().is_ok_and(|o| o.contains("to start")), "{key}: {said:?}");
    }
    // And the plan says so, naming the fabrics.
    let said = common::lines(&d);
    assert!(said.iter().any(|l| l.starts_with("Partition on several RDMA fabrics") && l.contains("nd-0 (65 nodes")), "{said:?}");
}

#[test]
fn azure_scale_sets_share_no_job_on_slurm_22_05() {
    two_scale_sets_are_two_fabrics(&Install::Host, "22.05");
}

#[test]
fn azure_scale_sets_share_no_job_on_slurm_24_11() {
    two_scale_sets_are_two_fabrics(&Install::slurm_24_11(), "24.11");
}

/// 27 GB200 nodes fill one NVLink domain and half of another. On 24.11 a block below the base block size stops
/// slurmctld, and a base size lowered to the short block refuses `--segment` of a whole domain: the plan makes it a
/// tree, on which a whole domain's job and the NCCL job are placed.
#[test]
fn on_slurm_24_11_a_partly_filled_nvlink_domain_does_not_refuse_a_whole_domains_segments() {
    let sku = catalog::find_sku(Cloud::Aws, "p6e-gb200.36xlarge").unwrap();
    let all = names("gb", 27);
    let nodes = SlurmNodes {
        cluster: "gb".into(),
        sku,
        names: all.clone(),
        placement_groups: vec![NodeGroup { name: "f-pg".into(), nodes: all.clone() }],
        nvlink_domains: vec![
            NodeGroup { name: "gb-nvl0".into(), nodes: all[..18].to_vec() },
            NodeGroup { name: "gb-nvl1".into(), nodes: all[18..].to_vec() },
        ],
    };
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&slurm_on(sku, "24.11", vec![nodes]), &mut d).expect("a plan");
    let slurm = Slurm::start_with(&Install::slurm_24_11(), &rendered(&plan));
    let whole = slurm.run("sbatch", &["--test-only", "-p", "p27", "-N", "18", "--segment=18", "--exclusive", "--wrap", "hostname"]);
    assert!(whole.as_ref().is_ok_and(|o| o.contains("to start") && o.contains("gb-[0-17]")), "{whole:?}");
    let said = slurm.test_only("nccl", &plan.nccl_tests["p27"]);
    assert!(said.as_ref().is_ok_and(|o| o.contains("to start")), "{said:?}");
    // And the plan says why it is a tree, and what makes it blocks.
    let said = common::lines(&d);
    assert!(said.iter().any(|l| l.contains("gb-nvl1 has 9 of 18") && l.contains("multiple of 18")), "{said:?}");
}

/// An 8 x MI300X node's GPUs are render nodes eight minor numbers apart (renderD128, renderD136, ...): a real slurmd
/// with those device files, and no others, registers with its 8 GPUs and runs a job on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mi300x_node_registers_with_its_render_nodes_and_runs_a_job_on_its_gpus() {
    let sku = catalog::find_sku(Cloud::Azure, "Standard_ND96isr_MI300X_v5").unwrap();
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&slurm_on(sku, "22.05", vec![planned(sku, "mi", 2)]), &mut d).expect("a plan");
    let mut slurm = Slurm::start(&rendered(&plan));
    // The self-check's view of the GPUs: `amd-smi list`, one `GPU: <n>` line each.
    let node = FakeNode::new("azure", sku.name, 8).await;
    node.write(
        "bin/amd-smi",
        &format!(
            "#!/bin/sh\n[ \"$1\" = list ] || exit 9\ni=0\nwhile [ $i -lt $(cat {}) ]; do echo \"GPU: $i\"; i=$((i+1)); done\n",
            node.dir.path().join("gpus").display()
        ),
    );
    slurm.slurmd("mi-1", &node.env());
    let up = slurm.wait_node("mi-1", "registered and idle", |s| field(s, "State").starts_with("IDLE") && !s.contains("POWERED_DOWN"));
    assert!(!field(&up, "State").contains("DRAIN"), "{up}");
    assert_eq!(field(&up, "Gres"), "gpu:mi300x:8", "{up}");
    assert_eq!(slurm.job(&["-p", "p2", "-w", "mi-1", "--gres=gpu:mi300x:8", "--wrap", "hostname"]), "COMPLETED");
}

/// `scontrol show partition`'s MaxTime (`UNLIMITED`, `[D-]HH:MM:SS`) in minutes.
fn shown_minutes(shown: &str) -> Option<u32> {
    if shown == "UNLIMITED" {
        return None;
    }
    let (days, hms) = shown.split_once('-').map_or((0, shown), |(d, rest)| (d.parse::<u32>().unwrap(), rest));
    let parts: Vec<u32> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    let [h, m, s] = parts[..] else { panic!("MaxTime={shown}") };
    Some(days * 1440 + h * 60 + m + s.div_ceil(60))
}

/// Every form of time limit the plan takes (the same list the unit test reads), each a partition's `max_time` over
/// one cluster: slurmctld starts with them all and reads each as the plan did; what the plan refuses is refused at
/// the partition's `max_time`. The rest of what the plan writes from values (TreeWidth over 50 nodes before 23.11,
/// the node's sockets, cores and threads, DefMemPerGPU) is what slurmctld reads too.
#[test]
fn what_the_plan_takes_slurmctld_starts_with_and_reads_as_the_plan_does() {
    let sku = catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
    let forms = ["INFINITE", "unlimited", "-1", "0", "90", "90:30", "1:30:00", "36:00:00", "7-0", "2-12", "1-00:30", "7-00:00:00", "3-"];
    let nodes = planned(sku, "h100", 130);
    let partitions: Vec<Partition> = forms
        .iter()
        .enumerate()
        .map(|(i, t)| Partition { name: format!("t{i}"), default: i == 0, max_time: (*t).into(), nodes: nodes.clone() })
        .collect();
    let mut s = spec(partitions);
    s.health_check_interval = 65_535;
    let mut d = Diagnostics::new();
    let plan = slurm::plan(&s, &mut d).unwrap_or_else(|| panic!("{:?}", common::lines(&d)));
    let slurm = Slurm::start(&rendered(&plan));
    for (i, t) in forms.iter().enumerate() {
        let shown = slurm.ok("scontrol", &["show", "partition", &format!("t{i}")]);
        let minutes = hpc_provider::clock::slurm_time_limit_minutes(t).expect("taken");
        assert_eq!(shown_minutes(field(&shown, "MaxTime")), minutes, "{t}: {shown}");
        assert_eq!(field(&shown, "JobDefaults"), "DefMemPerGPU=249036", "{shown}");
    }
    let config = slurm.ok("scontrol", &["show", "config"]);
    assert!(config.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["TreeWidth", "=", "130"]), "{config}");
    let node = slurm.ok("scontrol", &["show", "node", "h100-7"]);
    assert_eq!((field(&node, "Sockets"), field(&node, "CoresPerSocket"), field(&node, "ThreadsPerCore")), ("2", "48", "2"), "{node}");
    // What slurmctld would stop at ("Bad value \"forever\" for MaxTime") the plan refuses.
    let mut bad = spec(vec![Partition { name: "h100".into(), default: true, max_time: "forever".into(), nodes }]);
    bad.version = catalog::slurm::find("22.05").unwrap();
    let mut d = Diagnostics::new();
    assert!(slurm::plan(&bad, &mut d).is_none());
    let e = d.iter().find(|x| x.summary == "Invalid max_time").expect("refused");
    assert_eq!(e.path.as_ref().map(|p| p.to_string()).as_deref(), Some("partition[0].max_time"));
}
