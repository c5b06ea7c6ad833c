//! Slurm for GPU clusters, rendered in the plan: the configuration files (`slurm.conf`, `gres.conf`,
//! `cgroup.conf`, and `topology.conf` or `topology.yaml`) from the same facts that placed the nodes, the
//! addresses the controllers take in the fabric's network, the health check program, and an NCCL test job
//! per partition. PURE: a spec in, text and diagnostics out.
//!
//! What the rendering holds to, because Slurm's users are bitten by each:
//! - A topology plugin is never named without its file, and a file never has an empty topology: tree
//!   with one leaf switch per placement group (the nodes the cloud keeps close: a placement group, a compact
//!   policy, a scale set, a compute cluster or cluster network, or one NVLink domain), block with one block
//!   per NVLink domain where the version has `topology/block` (23.11), `topology.yaml` with a topology per
//!   kind of partition where the version reads it (25.05). Where block is wanted and cannot be had, the
//!   plan says that tree is used and why.
//! - A node's CPUs, memory and GPUs are the node type's, from the catalog (with its sources): `RealMemory`
//!   leaves the operating system its share, and the GPUs are `gres` with their type and device files.
//! - Nodes are made by Terraform and join by themselves (configless `slurmd --conf-server`): they are
//!   `State=CLOUD` and start powered down, come up when they register (their address from the
//!   registration, so no DNS is needed), and are never suspended (`SuspendExcParts` names every partition).
//! - Every version-specific setting follows the version's own changelog (`catalog::slurm`).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::catalog::Sku;
use crate::catalog::slurm::BlockSyntax;
pub use crate::clouds::slurm::{
    DRAIN_PREFIX, HEALTHCHECK_PATH, HEALTHCHECK_SETTINGS, SELFCHECK_PATH, SLURMCTLD_PORT, SLURMD_PORT, healthcheck_program,
};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{NodeGroup, Partition, SlurmSpec, TopologyChoice};
pub use crate::model::{SlurmPlan, Topology};
use crate::nodes::compress;
use crate::nodes::{controller_name, login_name};

/// The last /28 of a created network, which the controllers and login nodes get as their subnet: no GPU
/// node is ever given an address there, so the controllers' fixed addresses are free. None for a network
/// too small to set one aside (/24 and longer: the GPU subnet is all of it).
pub fn control_subnet(cidr: &str) -> Option<(u32, u8)> {
    let (addr, prefix) = cidr.split_once('/')?;
    let prefix: u8 = prefix.parse().ok()?;
    let ip = ipv4(addr)?;
    if !(8..=23).contains(&prefix) {
        return None;
    }
    let base = ip & (u32::MAX << (32 - prefix));
    let last = base | !(u32::MAX << (32 - prefix));
    Some((last & !0xf, 28))
}

/// The controllers' addresses in the control subnet: the fifth and sixth, which no cloud reserves (AWS and
/// Azure keep the first four and the last, Google Cloud the first two and the last two, OCI the first two
/// and the last).
pub fn controller_addresses(cidr: &str) -> Option<[String; 2]> {
    let (base, _) = control_subnet(cidr)?;
    Some([dotted(base + 4), dotted(base + 5)])
}

fn subnet_text((base, prefix): (u32, u8)) -> String {
    format!("{}/{prefix}", dotted(base))
}

/// An IPv4 address's four decimal octets as a number.
fn ipv4(text: &str) -> Option<u32> {
    let octets: Vec<u32> = text.split('.').map(|o| o.parse::<u8>().ok().map(u32::from)).collect::<Option<_>>()?;
    (octets.len() == 4).then(|| octets.iter().fold(0, |a, o| (a << 8) | o))
}

/// A number as an IPv4 address's dotted octets.
fn dotted(ip: u32) -> String {
    format!("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff)
}

/// The Slurm `Gres` type of a GPU model: `h100`, `gb200`, `mi300x`.
pub fn gres_type(sku: &Sku) -> String {
    sku.gpu_model.to_ascii_lowercase()
}

/// The device files of a node type's GPUs: NVIDIA's `/dev/nvidia<i>`, AMD's render nodes.
fn gpu_files(sku: &Sku) -> String {
    let n = sku.gpu_count.max(1);
    let amd = sku.gpu_model.starts_with("MI");
    match (amd, n) {
        (false, 1) => "/dev/nvidia0".into(),
        (false, n) => format!("/dev/nvidia[0-{}]", n - 1),
        (true, 1) => "/dev/dri/renderD128".into(),
        (true, n) => format!("/dev/dri/renderD[128-{}]", 127 + n),
    }
}

/// `RealMemory` of a node type, in MiB: its memory less the operating system's share (5%, at least 2 GiB),
/// so that a node is never drained for reporting less than it was declared with.
pub fn real_memory(sku: &Sku) -> u32 {
    let total = sku.memory_mib;
    total.saturating_sub((total / 20).max(2048))
}

/// A name Slurm takes for a partition, switch, block or feature: letters, digits, `-`, `_` and `.`.
fn slurm_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The tree's leaf switches: one per placement group (groups of one name in several clusters, an AWS
/// fabric's placement group, are one switch), for a rack-scale node type one per NVLink domain, and for a
/// cluster with neither one for the cluster. In order of first appearance.
fn leaves(partitions: &[Partition]) -> Vec<NodeGroup> {
    let mut out: Vec<NodeGroup> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in partitions {
        let n = &p.nodes;
        if !seen.insert(n.cluster.clone()) {
            continue;
        }
        let groups: Vec<NodeGroup> = if !n.nvlink_domains.is_empty() {
            n.nvlink_domains.clone()
        } else if !n.placement_groups.is_empty() {
            n.placement_groups.clone()
        } else {
            vec![NodeGroup { name: n.cluster.clone(), nodes: n.names.clone() }]
        };
        for g in groups {
            let members: Vec<String> = g.nodes.into_iter().filter(|x| n.names.contains(x)).collect();
            match out.iter_mut().find(|l| l.name == g.name) {
                Some(leaf) => {
                    for m in members {
                        if !leaf.nodes.contains(&m) {
                            leaf.nodes.push(m);
                        }
                    }
                }
                None => out.push(NodeGroup { name: g.name, nodes: members }),
            }
        }
        // Nodes the groups do not name (a VM outside its set's planned size) get a leaf of their own.
        let placed: Vec<&String> = out.iter().flat_map(|l| &l.nodes).collect();
        let rest: Vec<String> = n.names.iter().filter(|x| !placed.contains(x)).cloned().collect();
        if !rest.is_empty() {
            out.push(NodeGroup { name: format!("{}-unplaced", n.cluster), nodes: rest });
        }
    }
    out.retain(|l| !l.nodes.is_empty());
    out
}

/// The NVLink domains of the rack-scale partitions, as blocks.
fn blocks(partitions: &[Partition]) -> Vec<NodeGroup> {
    let mut out: Vec<NodeGroup> = Vec::new();
    for p in partitions {
        for d in &p.nodes.nvlink_domains {
            if out.iter().all(|b| b.name != d.name) {
                let nodes: Vec<String> = d.nodes.iter().filter(|x| p.nodes.names.contains(x)).cloned().collect();
                if !nodes.is_empty() {
                    out.push(NodeGroup { name: d.name.clone(), nodes });
                }
            }
        }
    }
    out
}

/// What the configuration's topology becomes for this version and these partitions, with a warning when
/// it is not what was asked (`auto`) or an error when it cannot be had at all (`block`).
fn choose(spec: &SlurmSpec, diags: &mut Diagnostics) -> Option<&'static str> {
    let v = spec.version;
    let racks: Vec<&str> = spec.partitions.iter().filter(|p| !p.nodes.nvlink_domains.is_empty()).map(|p| p.name.as_str()).collect();
    let all_racks = racks.len() == spec.partitions.len();
    let with_block: Vec<&str> = crate::catalog::slurm::SLURM_VERSIONS.iter().filter(|x| x.block.is_some()).map(|x| x.version).collect();
    let at = AttributePath::attr("topology");
    match spec.topology {
        TopologyChoice::None => Some("none"),
        TopologyChoice::Tree => Some("topology/tree"),
        TopologyChoice::Block => {
            if v.block.is_none() {
                diags.error_at(
                    at,
                    "No block topology in this Slurm version",
                    format!(
                        "Slurm {} has no topology/block plugin (it came in 23.11). Set slurm_version to one of {}, or topology = \"tree\" \
                         (one leaf switch per NVLink domain).",
                        v.version,
                        crate::framework::one_of(&with_block)
                    ),
                );
                return None;
            }
            if racks.is_empty() {
                diags.error_at(
                    at,
                    "Nothing to make blocks of",
                    "topology = \"block\" makes one block per NVLink domain that spans nodes, and no partition's node type has one (GB200 \
                     and GB300 NVL72 do). Use topology = \"tree\" or \"auto\".",
                );
                return None;
            }
            if !all_racks && !v.yaml {
                diags.error_at(
                    at,
                    "Block topology for some partitions only",
                    format!(
                        "Before 25.05 one topology serves every partition, and partitions {} have no NVLink domain to make a block of. \
                         Use topology = \"auto\" (tree for all), or slurm_version 25.05 or later (topology.yaml: block for the rack-scale \
                         partitions, tree for the others).",
                        crate::framework::one_of(
                            &spec
                                .partitions
                                .iter()
                                .filter(|p| p.nodes.nvlink_domains.is_empty())
                                .map(|p| p.name.as_str())
                                .collect::<Vec<_>>()
                        )
                    ),
                );
                return None;
            }
            Some(if v.yaml { "topology.yaml" } else { "topology/block" })
        }
        TopologyChoice::Auto => {
            if racks.is_empty() {
                return Some(if v.yaml { "topology.yaml" } else { "topology/tree" });
            }
            if v.yaml {
                return Some("topology.yaml");
            }
            if v.block.is_some() && all_racks {
                return Some("topology/block");
            }
            let why = if v.block.is_none() {
                format!("Slurm {} has no topology/block plugin (it came in 23.11)", v.version)
            } else {
                "before 25.05 one topology serves every partition, and not every partition is rack-scale".to_owned()
            };
            diags.warning_at(
                at,
                "Tree topology for rack-scale nodes",
                format!(
                    "Partitions {} are rack-scale (NVLink domains of several nodes): {why}, so each NVLink domain is a leaf switch of a \
                     tree instead of a block, and jobs are not kept within whole domains (--segment). Use slurm_version {} for blocks.",
                    crate::framework::one_of(&racks),
                    if all_racks { "23.11 or later" } else { "25.05 or later" }
                ),
            );
            Some("topology/tree")
        }
    }
}

/// topology.conf for the tree plugin: the leaves, and one spine over them when there are several.
fn tree_conf(spec: &SlurmSpec, leaves: &[NodeGroup]) -> String {
    let mut s =
        format!("# topology.conf for Slurm {} topology/tree, cluster {} (terraform-provider-hpc).\n", spec.version.version, spec.name);
    s.push_str("# One leaf switch per group of nodes the cloud places together (placement group, compact policy, scale set, compute\n");
    s.push_str("# cluster or cluster network; for rack-scale node types, one NVLink domain).\n");
    for l in leaves {
        let _ = writeln!(s, "SwitchName={} Nodes={}", l.name, compress(&l.nodes));
    }
    if leaves.len() > 1 {
        let _ =
            writeln!(s, "SwitchName={}-spine Switches={}", spec.name, leaves.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(","));
    }
    s
}

/// The planning base block size: the NVLink domain's nodes, or (before 25.05, where no block may hold
/// fewer) the smallest block's.
fn block_size(spec: &SlurmSpec, blocks: &[NodeGroup]) -> usize {
    let domain = spec.partitions.iter().filter_map(|p| p.nodes.sku.nvlink_domain.map(|d| d.nodes as usize)).max().unwrap_or(1);
    let smallest = blocks.iter().map(|b| b.nodes.len()).min().unwrap_or(domain);
    if spec.version.short_blocks { domain } else { domain.min(smallest).max(1) }
}

/// topology.conf for the block plugin: one block per NVLink domain.
fn block_conf(spec: &SlurmSpec, blocks: &[NodeGroup], syntax: BlockSyntax) -> String {
    let mut s =
        format!("# topology.conf for Slurm {} topology/block, cluster {} (terraform-provider-hpc).\n", spec.version.version, spec.name);
    s.push_str("# One block per NVLink domain; jobs keep within whole domains with sbatch --segment=<nodes per domain or a divisor>.\n");
    for b in blocks {
        let _ = writeln!(s, "BlockName={} Nodes={}", b.name, compress(&b.nodes));
    }
    if syntax == BlockSyntax::Sizes {
        let _ = writeln!(s, "BlockSizes={}", block_size(spec, blocks));
    }
    s
}

/// topology.yaml (25.05): a tree of every node, the cluster's default, and where partitions are rack-scale a
/// block topology of their domains, which those partitions name.
fn topology_yaml(spec: &SlurmSpec, leaves: &[NodeGroup], blocks: &[NodeGroup]) -> String {
    let mut s = format!("# topology.yaml for Slurm {}, cluster {} (terraform-provider-hpc).\n---\n", spec.version.version, spec.name);
    let _ = writeln!(s, "- topology: tree\n  cluster_default: true\n  tree:\n    switches:");
    if leaves.len() > 1 {
        let children: Vec<String> = leaves.iter().map(|l| l.name.clone()).collect();
        let _ = writeln!(s, "      - switch: {}-spine\n        children: {}", spec.name, compress(&children));
    }
    for l in leaves {
        let _ = writeln!(s, "      - switch: {}\n        nodes: {}", l.name, compress(&l.nodes));
    }
    if !blocks.is_empty() {
        let _ = writeln!(
            s,
            "- topology: block\n  cluster_default: false\n  block:\n    block_sizes:\n      - {}\n    blocks:",
            block_size(spec, blocks)
        );
        for b in blocks {
            let _ = writeln!(s, "      - block: {}\n        nodes: {}", b.name, compress(&b.nodes));
        }
    }
    s
}

fn check(spec: &SlurmSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    if spec.partitions.is_empty() {
        diags.error_at(
            AttributePath::attr("partition"),
            "No partition",
            "A Slurm cluster needs at least one partition block, each with the hpc_gpu_cluster whose nodes it holds.",
        );
        return false;
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in spec.partitions.iter().enumerate() {
        let at = AttributePath::attr("partition").and_index(i);
        if !slurm_name(&p.name) {
            diags.error_at(
                at.clone().and_attr("name"),
                "Invalid partition name",
                format!("Partition name {:?} must be 1-64 letters, digits, '-', '_' or '.'.", p.name),
            );
            ok = false;
        }
        if !names.insert(p.name.as_str()) {
            diags.error_at(at.clone().and_attr("name"), "Duplicate partition", format!("Partition {:?} is named twice.", p.name));
            ok = false;
        }
        if p.nodes.names.is_empty() {
            diags.error_at(
                at.clone().and_attr("cluster"),
                "Partition without nodes",
                format!(
                    "Partition {:?}: cluster {} has no nodes. Give it node_count of at least 1, or leave it out.",
                    p.name, p.nodes.cluster
                ),
            );
            ok = false;
        }
        if let Some(bad) = p.nodes.names.iter().find(|n| !slurm_name(n)) {
            diags.error_at(
                at.clone().and_attr("cluster"),
                "Node name Slurm does not take",
                format!("Partition {:?}: node {bad:?} of cluster {} is not a Slurm node name.", p.name, p.nodes.cluster),
            );
            ok = false;
        }
    }
    let defaults: Vec<&str> = spec.partitions.iter().filter(|p| p.default).map(|p| p.name.as_str()).collect();
    if defaults.len() > 1 {
        diags.error_at(
            AttributePath::attr("partition"),
            "Several default partitions",
            format!("Partitions {} are each default = true; Slurm has one default partition.", crate::framework::one_of(&defaults)),
        );
        ok = false;
    }
    ok
}

/// The whole Slurm configuration of `spec`, or None with errors in `diags`.
pub fn plan(spec: &SlurmSpec, diags: &mut Diagnostics) -> Option<SlurmPlan> {
    let Some(subnet) = control_subnet(&spec.cidr) else {
        diags.error_at(
            AttributePath::attr("fabric"),
            "No room for the Slurm controllers",
            format!(
                "The controllers and login nodes get the last /28 of the fabric's network, and the fabric's cidr_block {} leaves none \
                 beside its GPU subnet. Give the fabric a network of /23 or wider (default 10.0.0.0/16).",
                spec.cidr
            ),
        );
        return None;
    };
    if !check(spec, diags) {
        return None;
    }
    let kind = choose(spec, diags)?;
    let [primary, backup] = controller_addresses(&spec.cidr)?;
    let mut controllers = vec![(controller_name(&spec.name, 0), primary)];
    if spec.backup {
        controllers.push((controller_name(&spec.name, 1), backup));
    }
    let leaves = leaves(&spec.partitions);
    let blocks = blocks(&spec.partitions);
    let topology = match kind {
        "topology/tree" => Topology { kind, conf: Some(tree_conf(spec, &leaves)), yaml: None },
        "topology/block" => {
            let syntax = spec.version.block.unwrap_or(BlockSyntax::Sizes);
            Topology { kind, conf: Some(block_conf(spec, &blocks, syntax)), yaml: None }
        }
        "topology.yaml" => Topology { kind, conf: None, yaml: Some(topology_yaml(spec, &leaves, &blocks)) },
        _ => Topology { kind: "none", conf: None, yaml: None },
    };
    let slurm_conf = slurm_conf(spec, &controllers, &topology);
    Some(SlurmPlan {
        control_subnet: subnet_text(subnet),
        logins: (0..spec.login_nodes).map(|i| login_name(&spec.name, i)).collect(),
        controllers,
        slurm_conf,
        gres_conf: gres_conf(spec),
        cgroup_conf: cgroup_conf(spec),
        topology,
        healthcheck: healthcheck_program(),
        nccl_tests: nccl_tests(spec),
    })
}

/// The clusters of the partitions, each once, with the partitions that hold them.
fn clusters(spec: &SlurmSpec) -> Vec<(&crate::model::SlurmNodes, Vec<&str>)> {
    let mut out: Vec<(&crate::model::SlurmNodes, Vec<&str>)> = Vec::new();
    for p in &spec.partitions {
        match out.iter_mut().find(|(n, _)| n.cluster == p.nodes.cluster) {
            Some((_, parts)) => parts.push(&p.name),
            None => out.push((&p.nodes, vec![&p.name])),
        }
    }
    out
}

fn slurm_conf(spec: &SlurmSpec, controllers: &[(String, String)], topology: &Topology) -> String {
    let v = spec.version;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# slurm.conf for Slurm {}, cluster {} on {} (terraform-provider-hpc).\n\
         # Configless: the controller serves this file and the others to the nodes (slurmd --conf-server).",
        v.version,
        spec.name,
        spec.fabric.cloud.display_name()
    );
    let _ = writeln!(s, "ClusterName={}", spec.name);
    for (host, addr) in controllers {
        let _ = writeln!(s, "SlurmctldHost={host}({addr})");
    }
    let mut params = vec!["enable_configless"];
    if v.cloud_reg_addrs_parameter {
        params.push("cloud_reg_addrs");
    }
    let _ = writeln!(s, "SlurmctldParameters={}", params.join(","));
    let _ = writeln!(s, "SlurmctldPort={SLURMCTLD_PORT}\nSlurmdPort={SLURMD_PORT}");
    s.push_str(
        "AuthType=auth/munge\n\
         CredType=cred/munge\n\
         SlurmUser=slurm\n",
    );
    let _ = writeln!(s, "StateSaveLocation={}", spec.state_save_location);
    s.push_str(
        "SlurmdSpoolDir=/var/spool/slurmd\n\
         SlurmctldPidFile=/run/slurmctld.pid\n\
         SlurmdPidFile=/run/slurmd.pid\n\
         SlurmctldLogFile=/var/log/slurm/slurmctld.log\n\
         SlurmdLogFile=/var/log/slurm/slurmd.log\n\
         ProctrackType=proctrack/cgroup\n\
         TaskPlugin=task/cgroup,task/affinity\n\
         SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\n\
         GresTypes=gpu\n\
         ReturnToService=2\n",
    );
    if v.private_data_cloud {
        s.push_str("PrivateData=cloud\n");
    }
    let parts: Vec<&str> = spec.partitions.iter().map(|p| p.name.as_str()).collect();
    let _ = writeln!(
        s,
        "# The nodes are made by Terraform and join by themselves: they start powered down (CLOUD), come up when their slurmd\n\
         # registers, and are never suspended (the programs do nothing; SuspendExcParts names every partition).\n\
         SuspendProgram=/bin/true\n\
         ResumeProgram=/bin/true\n\
         SuspendTime=3600\n\
         ResumeTimeout=1800\n\
         SuspendExcParts={}",
        parts.join(",")
    );
    match topology.kind {
        "topology/tree" | "topology/block" => {
            let _ = writeln!(s, "TopologyPlugin={}", topology.kind);
        }
        "topology.yaml" => s.push_str("# The topologies are in topology.yaml (a partition's Topology= names its own).\n"),
        _ => s.push_str("# No topology plugin: the nodes are scheduled as one flat network.\n"),
    }
    let _ = writeln!(
        s,
        "# A failing node self-check drains the node with its reason; the cluster's next plan repairs it.\n\
         HealthCheckProgram={HEALTHCHECK_PATH}\n\
         HealthCheckInterval={}\n\
         HealthCheckNodeState=ANY",
        spec.health_check_interval
    );
    for (nodes, _) in clusters(spec) {
        let sku = nodes.sku;
        let _ = writeln!(
            s,
            "# Cluster {}: {} x {} ({} {} GPUs, {} CPUs, {} MiB each)",
            nodes.cluster,
            nodes.names.len(),
            sku.name,
            sku.gpu_count,
            sku.gpu_model,
            sku.vcpus,
            sku.memory_mib
        );
        let mut features = vec![nodes.cluster.clone(), gres_type(sku)];
        features.dedup();
        let _ = writeln!(
            s,
            "NodeName={} CPUs={} RealMemory={} Gres=gpu:{}:{} Features={} State=CLOUD",
            compress(&nodes.names),
            sku.vcpus,
            real_memory(sku),
            gres_type(sku),
            sku.gpu_count,
            features.join(",")
        );
    }
    let first_default = !spec.partitions.iter().any(|p| p.default);
    for (i, p) in spec.partitions.iter().enumerate() {
        let default = p.default || (first_default && i == 0);
        let _ = write!(
            s,
            "PartitionName={} Nodes={} Default={} MaxTime={} State=UP",
            p.name,
            compress(&p.nodes.names),
            if default { "YES" } else { "NO" },
            p.max_time
        );
        if topology.kind == "topology.yaml" {
            let _ = write!(s, " Topology={}", if p.nodes.nvlink_domains.is_empty() { "tree" } else { "block" });
        }
        s.push('\n');
    }
    s
}

fn gres_conf(spec: &SlurmSpec) -> String {
    let mut s = format!(
        "# gres.conf for Slurm {}, cluster {} (terraform-provider-hpc): each node type's GPUs and their devices.\n",
        spec.version.version, spec.name
    );
    for (nodes, _) in clusters(spec) {
        let _ = writeln!(s, "NodeName={} Name=gpu Type={} File={}", compress(&nodes.names), gres_type(nodes.sku), gpu_files(nodes.sku));
    }
    s
}

fn cgroup_conf(spec: &SlurmSpec) -> String {
    format!(
        "# cgroup.conf for Slurm {} (terraform-provider-hpc): a job gets the cores, memory and GPUs it asked for, no more.\n\
         ConstrainCores=yes\n\
         ConstrainDevices=yes\n\
         ConstrainRAMSpace=yes\n",
        spec.version.version
    )
}

/// An NCCL all-reduce job per partition over all its nodes, submitted to that partition.
fn nccl_tests(spec: &SlurmSpec) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in &spec.partitions {
        let env = super::node_environment(p.nodes.sku);
        let name = format!("{}-nccl", p.name);
        let job = super::nccl::NcclJob {
            name: &name,
            nodes: &p.nodes.names,
            cluster: &p.nodes.cluster,
            gpus_per_node: p.nodes.sku.gpu_count,
            env: &env,
            expected_busbw_gbs: crate::catalog::expected_busbw(p.nodes.sku).map(|b| b.gbytes_per_sec),
            segment: p.nodes.sku.nvlink_domain.map(|d| d.nodes),
            partition: Some(&p.name),
            tolerate: &[],
        };
        if let Ok(script) = super::nccl::slurm_script(&job) {
            out.insert(p.name.clone(), script);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, Cloud, slurm};
    use crate::model::{FabricRef, Placement, SlurmNodes};

    fn names(prefix: &str, n: u32) -> Vec<String> {
        (0..n).map(|i| crate::nodes::node_name(prefix, i)).collect()
    }

    fn partition(name: &str, cluster: &str, sku: &'static Sku, n: u32, groups: Vec<NodeGroup>, domains: Vec<NodeGroup>) -> Partition {
        Partition {
            name: name.into(),
            default: false,
            max_time: "INFINITE".into(),
            nodes: SlurmNodes { cluster: cluster.into(), sku, names: names(cluster, n), placement_groups: groups, nvlink_domains: domains },
        }
    }

    fn spec(version: &str, partitions: Vec<Partition>) -> SlurmSpec {
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
            version: slurm::find(version).unwrap(),
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
            tags: BTreeMap::new(),
            key: None,
        }
    }

    fn h100(n: u32) -> Partition {
        let sku = catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
        partition("h100", "h100", sku, n, vec![NodeGroup { name: "f-pg".into(), nodes: names("h100", n) }], vec![])
    }

    fn gb200(n: u32) -> Partition {
        let sku = catalog::find_sku(Cloud::Aws, "p6e-gb200.36xlarge").unwrap();
        let domains = (0..n.div_ceil(18))
            .map(|d| NodeGroup {
                name: crate::nodes::domain_name("gb", d),
                nodes: (d * 18..((d + 1) * 18).min(n)).map(|i| crate::nodes::node_name("gb", i)).collect(),
            })
            .collect();
        partition("gb200", "gb", sku, n, vec![], domains)
    }

    #[test]
    fn the_control_subnet_is_the_last_28_of_the_network_and_the_controllers_take_its_fifth_and_sixth_address() {
        assert_eq!(control_subnet("10.0.0.0/16").map(subnet_text).as_deref(), Some("10.0.255.240/28"));
        assert_eq!(controller_addresses("10.0.0.0/16"), Some(["10.0.255.244".to_owned(), "10.0.255.245".to_owned()]));
        assert_eq!(control_subnet("10.8.0.0/23").map(subnet_text).as_deref(), Some("10.8.1.240/28"));
        assert_eq!(control_subnet("10.8.0.0/24"), None, "a /24 is all GPU subnet");
        // Outside the GPU subnet (the first /20 of a /16).
        assert!(!crate::clouds::first_subnet("10.0.0.0/16").starts_with("10.0.255"));
    }

    #[test]
    fn an_h100_cluster_in_one_placement_group_is_one_leaf_switch_with_the_node_types_cpus_memory_and_gpus() {
        let mut d = Diagnostics::new();
        let plan = plan(&spec("22.05", vec![h100(16)]), &mut d).unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(plan.topology.kind, "topology/tree");
        let conf = plan.topology.conf.unwrap();
        assert!(conf.contains("SwitchName=f-pg Nodes=h100-[0-15]\n") && !conf.contains("spine"), "{conf}");
        assert!(plan.slurm_conf.contains("TopologyPlugin=topology/tree\n"));
        assert!(plan.slurm_conf.contains("NodeName=h100-[0-15] CPUs=192 RealMemory=1992295 Gres=gpu:h100:8 Features=h100 State=CLOUD"));
        assert!(plan.slurm_conf.contains("PartitionName=h100 Nodes=h100-[0-15] Default=YES MaxTime=INFINITE State=UP"));
        assert!(plan.slurm_conf.contains("SlurmctldHost=ml-controller(10.0.255.244)\n"));
        assert!(
            plan.slurm_conf.contains("SlurmctldParameters=enable_configless,cloud_reg_addrs\n")
                && plan.slurm_conf.contains("PrivateData=cloud")
        );
        assert_eq!(plan.gres_conf.lines().last(), Some("NodeName=h100-[0-15] Name=gpu Type=h100 File=/dev/nvidia[0-7]"));
        assert!(plan.nccl_tests["h100"].contains("#SBATCH --partition=h100\n"));
    }

    #[test]
    fn a_gb200_cluster_of_two_domains_is_two_blocks_from_23_11_and_two_leaves_before_with_a_warning() {
        let mut d = Diagnostics::new();
        let old = plan(&spec("22.05", vec![gb200(36)]), &mut d).unwrap();
        assert_eq!(old.topology.kind, "topology/tree");
        let conf = old.topology.conf.unwrap();
        assert!(
            conf.contains(
                "SwitchName=gb-nvl0 Nodes=gb-[0-17]\nSwitchName=gb-nvl1 Nodes=gb-[18-35]\nSwitchName=ml-spine Switches=gb-nvl0,gb-nvl1\n"
            ),
            "{conf}"
        );
        assert!(d.iter().any(|x| x.summary == "Tree topology for rack-scale nodes" && x.detail.contains("no topology/block")), "{d:?}");

        let mut d = Diagnostics::new();
        let levels = plan(&spec("23.11", vec![gb200(36)]), &mut d).unwrap();
        assert!(d.is_empty(), "{d:?}");
        let conf = levels.topology.conf.unwrap();
        assert!(
            conf.contains("BlockName=gb-nvl0 Nodes=gb-[0-17]\nBlockName=gb-nvl1 Nodes=gb-[18-35]\n") && !conf.contains("BlockSizes"),
            "{conf}"
        );
        assert!(!levels.slurm_conf.contains("cloud_reg_addrs") && !levels.slurm_conf.contains("PrivateData"), "removed in 23.11 / 23.02");
        let sizes = plan(&spec("24.11", vec![gb200(36)]), &mut Diagnostics::new()).unwrap().topology.conf.unwrap();
        assert!(sizes.ends_with("BlockSizes=18\n"), "{sizes}");
        // Before 25.05 no block may hold fewer than the base size: a short last domain lowers it.
        let short = plan(&spec("24.11", vec![gb200(27)]), &mut Diagnostics::new()).unwrap().topology.conf.unwrap();
        assert!(short.ends_with("BlockSizes=9\n"), "{short}");
        let yaml = plan(&spec("25.05", vec![gb200(27)]), &mut Diagnostics::new()).unwrap().topology.yaml.unwrap();
        assert!(yaml.contains("block_sizes:\n      - 18\n"), "{yaml}");
    }

    #[test]
    fn mixed_partitions_get_a_tree_before_25_05_and_a_block_for_the_racks_in_topology_yaml_from_25_05() {
        let mut d = Diagnostics::new();
        let both = vec![h100(4), gb200(18)];
        let tree = plan(&spec("24.11", both.clone()), &mut d).unwrap();
        assert_eq!(tree.topology.kind, "topology/tree");
        assert!(d.iter().any(|x| x.detail.contains("not every partition is rack-scale")));
        let mut d = Diagnostics::new();
        let yaml = plan(&spec("25.05", both), &mut d).unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert_eq!((yaml.topology.kind, yaml.topology.conf.is_none()), ("topology.yaml", true));
        assert!(!yaml.slurm_conf.contains("TopologyPlugin"), "topology.yaml names the plugins");
        assert!(yaml.slurm_conf.contains("PartitionName=h100 Nodes=h100-[0-3] Default=YES MaxTime=INFINITE State=UP Topology=tree\n"));
        assert!(yaml.slurm_conf.contains("PartitionName=gb200 Nodes=gb-[0-17] Default=NO MaxTime=INFINITE State=UP Topology=block\n"));
        let y = yaml.topology.yaml.unwrap();
        assert!(
            y.contains("- topology: tree\n  cluster_default: true\n") && y.contains("      - block: gb-nvl0\n        nodes: gb-[0-17]\n"),
            "{y}"
        );
    }

    #[test]
    fn what_slurm_would_refuse_is_refused_at_its_attribute() {
        let mut block = spec("22.05", vec![gb200(18)]);
        block.topology = TopologyChoice::Block;
        let mut d = Diagnostics::new();
        assert!(plan(&block, &mut d).is_none());
        assert!(d.iter().any(|x| x.summary == "No block topology in this Slurm version" && x.detail.contains("23.11")), "{d:?}");
        let mut twice = spec("22.05", vec![h100(2), h100(2)]);
        twice.partitions[1].default = true;
        twice.partitions[0].default = true;
        let mut d = Diagnostics::new();
        assert!(plan(&twice, &mut d).is_none());
        let said: Vec<&str> = d.iter().map(|x| x.summary.as_str()).collect();
        assert!(said.contains(&"Duplicate partition") && said.contains(&"Several default partitions"), "{said:?}");
        let mut small = spec("22.05", vec![h100(2)]);
        small.cidr = "10.0.0.0/24".into();
        let mut d = Diagnostics::new();
        assert!(plan(&small, &mut d).is_none());
        assert!(d.iter().any(|x| x.summary == "No room for the Slurm controllers"));
        let mut d = Diagnostics::new();
        assert!(plan(&spec("22.05", vec![h100(0)]), &mut d).is_none());
        assert!(d.iter().any(|x| x.summary == "Partition without nodes"));
    }

    #[test]
    fn a_node_outside_its_groups_gets_a_leaf_of_its_own_and_no_leaf_is_empty() {
        let sku = catalog::find_sku(Cloud::Azure, "Standard_ND96isr_H100_v5").unwrap();
        let mut p = partition("nd", "et", sku, 2, vec![NodeGroup { name: "et-0".into(), nodes: names("et", 2) }], vec![]);
        p.nodes.names.push("et-0_2".into());
        let conf = plan(&spec("22.05", vec![p]), &mut Diagnostics::new()).unwrap().topology.conf.unwrap();
        assert!(conf.contains("SwitchName=et-0 Nodes=et-[0-1]\nSwitchName=et-unplaced Nodes=et-0_2\n"), "{conf}");
    }
}
