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
//!   kind of partition where the version reads it (25.05). Where block is wanted and cannot be had (no
//!   plugin, a partly filled NVLink domain before 25.05, domains on several fabrics), the plan says that
//!   tree is used and why.
//! - Nodes that share no RDMA (an Azure scale set, an OCI cluster network: `catalog::rdma_scope`) are
//!   never joined under a switch, so Slurm keeps every job within one fabric; the plan names the fabrics,
//!   and the NCCL test runs on each apart.
//! - A node's CPUs, memory and GPUs are the node type's, from the catalog (with its sources): sockets,
//!   cores and threads, so a job gets whole cores; `RealMemory` leaves the operating system its share, a
//!   job without `--mem` gets its GPUs' share of it; the GPUs are `gres` with their type and device files.
//! - Every value written into the files is checked the way Slurm reads it (one bad value stops slurmctld),
//!   and refused at its attribute.
//! - Nodes are made by Terraform and join by themselves (configless `slurmd --conf-server`): they are
//!   `State=CLOUD` and start powered down, come up when they register (their address from the
//!   registration, so no DNS is needed), and are never suspended (`SuspendExcParts` names every partition).
//! - Every version-specific setting follows the version's own changelog (`catalog::slurm`).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::catalog::slurm::{BlockSyntax, SlurmVersion, TREE_WIDTH_MAX};
use crate::catalog::{RdmaScope, Sku};
pub use crate::clouds::slurm::{
    DRAIN_PREFIX, HEALTHCHECK_PATH, HEALTHCHECK_SETTINGS, SELFCHECK_PATH, SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT, healthcheck_program,
};
pub use crate::clouds::slurm::{EPILOG_PATH, NVLINK_FEATURE_PREFIX, PROLOG_PATH};
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
/// The Slurm `Gres` type of a GPU model: `h100`, `gb200`, `mi300x`.
pub fn gres_type(sku: &Sku) -> String {
    sku.gpu_model.to_ascii_lowercase()
}

/// The device files of a node type's GPUs: NVIDIA's `/dev/nvidia<i>`; AMD's render nodes, eight minor numbers
/// apart (the driver keeps eight per GPU for its partitions, so GPU i is `renderD<128 + 8 i>`: AMD SMI docs, GPU
/// partitioning, "the next physical GPU's ... start at renderD128 + (8 x gpu_index)"; an 8 x MI300X node in SPX
/// mode lists renderD128, renderD136, ..., renderD184).
fn gpu_files(sku: &Sku) -> String {
    let n = sku.gpu_count.max(1);
    let amd = sku.gpu_model.starts_with("MI");
    match (amd, n) {
        (false, 1) => "/dev/nvidia0".into(),
        (false, n) => format!("/dev/nvidia[0-{}]", n - 1),
        (true, 1) => "/dev/dri/renderD128".into(),
        (true, n) => format!("/dev/dri/renderD[{}]", (0..n).map(|i| (128 + 8 * i).to_string()).collect::<Vec<_>>().join(",")),
    }
}

/// `RealMemory` of a node type, in MiB: its memory less the operating system's share (5%, at least 2 GiB),
/// so that a node is never drained for reporting less than it was declared with.
pub fn real_memory(sku: &Sku) -> u32 {
    let total = sku.memory_mib;
    total.saturating_sub((total / 20).max(2048))
}

/// `DefMemPerGPU` of a node type, in MiB: its `RealMemory` shared among its GPUs, so that a job asking for GPUs
/// and no memory gets its GPUs' share instead of the whole node's memory.
pub fn mem_per_gpu(sku: &Sku) -> u32 {
    real_memory(sku) / sku.gpu_count.max(1)
}

/// A name Slurm takes for a partition, switch, block or feature: letters, digits, `-`, `_` and `.`.
fn slurm_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The valid forms of a `max_time`, for messages.
const TIME_FORMS: &str = "minutes (\"90\"), minutes:seconds (\"90:00\"), hours:minutes:seconds (\"36:00:00\"), days-hours \
                          (\"7-0\"), days-hours:minutes (\"7-00:00\"), days-hours:minutes:seconds (\"7-00:00:00\"), or \"INFINITE\" \
                          (also \"UNLIMITED\")";

/// A path Slurm and the controllers' first-boot script take as `StateSaveLocation`: absolute, of letters, digits and
/// `/ . _ -` (slurm.conf ends a value at a space and starts a comment at `#`), naming a directory below the root
/// (no `.` or `..` component, no empty one: the first boot gives the directory to slurm with `chown -R`, which on
/// `//` or `/..` would be the whole machine).
fn state_path(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').skip(1).collect();
    s.starts_with('/')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
        && !parts.is_empty()
        && parts.iter().all(|p| !p.is_empty() && *p != "." && *p != "..")
}

/// `HealthCheckInterval` is a 16-bit number in slurm.conf (read_config.c: `S_P_UINT16`; above 65535 slurmctld stops).
const HEALTH_CHECK_INTERVAL: std::ops::RangeInclusive<u32> = 30..=65_535;

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
        let mine: std::collections::BTreeSet<&String> = n.names.iter().collect();
        for g in groups {
            let members: Vec<String> = g.nodes.into_iter().filter(|x| mine.contains(x)).collect();
            match out.iter_mut().find(|l| l.name == g.name) {
                Some(leaf) => {
                    let had: std::collections::BTreeSet<String> = leaf.nodes.iter().cloned().collect();
                    leaf.nodes.extend(members.into_iter().filter(|m| !had.contains(m)));
                }
                None => out.push(NodeGroup { name: g.name, nodes: members }),
            }
        }
        // Nodes the groups do not name (a VM outside its set's planned size) get a leaf of their own.
        let placed: std::collections::BTreeSet<&String> = out.iter().flat_map(|l| &l.nodes).collect();
        let rest: Vec<String> = n.names.iter().filter(|x| !placed.contains(x)).cloned().collect();
        if !rest.is_empty() {
            out.push(NodeGroup { name: format!("{}-unplaced", n.cluster), nodes: rest });
        }
    }
    out.retain(|l| !l.nodes.is_empty());
    out
}

/// Nodes that share one RDMA network, and the leaf switches they are under. Two islands share no RDMA: no switch
/// of the topology joins them, so Slurm (topology/tree keeps a job within one connected tree) never places one job
/// across them.
#[derive(Clone, Debug)]
struct Island {
    name: String,
    leaves: Vec<NodeGroup>,
}

impl Island {
    fn nodes(&self) -> impl Iterator<Item = &String> {
        self.leaves.iter().flat_map(|l| &l.nodes)
    }
}

/// The RDMA islands of the leaves, in order of first appearance. Where the cloud's RDMA reaches every node on the
/// fabric's network there is one; where it reaches one placement group only (an Azure scale set, an OCI cluster
/// network or compute cluster) each group is one, a leaf going with the group of its nodes (a leaf over several
/// groups joins them), and a leaf of nodes in no group is one of its own.
fn islands(spec: &SlurmSpec, leaves: &[NodeGroup]) -> Vec<Island> {
    if crate::catalog::rdma_scope(spec.fabric.cloud).0 == RdmaScope::Network {
        return vec![Island { name: spec.fabric.name.clone(), leaves: leaves.to_vec() }];
    }
    let mut group_of: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &spec.partitions {
        for g in &p.nodes.placement_groups {
            for n in &g.nodes {
                group_of.entry(n.as_str()).or_insert(g.name.as_str());
            }
        }
    }
    // Each leaf's islands (the groups of its nodes, or its own name), merged where a leaf names several.
    let mut keys: Vec<Vec<String>> = Vec::new();
    for leaf in leaves {
        let mut mine: Vec<String> = Vec::new();
        for n in &leaf.nodes {
            let key = group_of.get(n.as_str()).map_or_else(|| leaf.name.clone(), |g| (*g).to_owned());
            if !mine.contains(&key) {
                mine.push(key);
            }
        }
        keys.push(mine);
    }
    let mut out: Vec<(Vec<String>, Island)> = Vec::new();
    for (leaf, mine) in leaves.iter().zip(keys) {
        let joined: Vec<usize> = out.iter().enumerate().filter(|(_, (k, _))| k.iter().any(|x| mine.contains(x))).map(|(i, _)| i).collect();
        match joined.split_first() {
            None => out.push((mine.clone(), Island { name: mine[0].clone(), leaves: vec![leaf.clone()] })),
            Some((&first, rest)) => {
                for &i in rest.iter().rev() {
                    let (k, island) = out.remove(i);
                    out[first].0.extend(k);
                    out[first].1.leaves.extend(island.leaves);
                }
                out[first].0.extend(mine);
                out[first].1.leaves.push(leaf.clone());
            }
        }
    }
    out.into_iter().map(|(_, island)| island).collect()
}

/// A partition's nodes by island, in the partition's order: (island name, nodes).
fn partition_islands(p: &Partition, islands: &[Island]) -> Vec<(String, Vec<String>)> {
    let island_of: BTreeMap<&str, &str> = islands.iter().flat_map(|i| i.nodes().map(|n| (n.as_str(), i.name.as_str()))).collect();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for n in &p.nodes.names {
        let island = island_of.get(n.as_str()).map_or(p.nodes.cluster.as_str(), |i| *i).to_owned();
        match out.iter_mut().find(|(name, _)| *name == island) {
            Some((_, nodes)) => nodes.push(n.clone()),
            None => out.push((island, vec![n.clone()])),
        }
    }
    out
}

/// What a partition makes of a block topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RackFit {
    /// Not rack-scale: no NVLink domain spans its nodes.
    NotRack,
    /// One block per NVLink domain.
    Blocks,
    /// Before 25.05: a domain the partition fills only in part would be a block smaller than the others, which
    /// Slurm refuses; `domain` nodes make a whole one.
    Partial { domain: u32 },
    /// Its domains are on several RDMA islands, which blocks cannot keep apart (a job may span blocks).
    SeveralFabrics,
}

/// The nodes of an NVLink domain of the partition's node type (the largest block where the catalog has none).
fn domain_nodes(p: &Partition) -> u32 {
    p.nodes
        .sku
        .nvlink_domain
        .map(|d| d.nodes)
        .unwrap_or_else(|| p.nodes.nvlink_domains.iter().map(|d| d.nodes.len() as u32).max().unwrap_or(1))
}

fn rack_fit(spec: &SlurmSpec, p: &Partition, islands: &[Island]) -> RackFit {
    if p.nodes.nvlink_domains.is_empty() {
        return RackFit::NotRack;
    }
    if partition_islands(p, islands).len() > 1 {
        return RackFit::SeveralFabrics;
    }
    let domain = domain_nodes(p);
    let partial = p.nodes.nvlink_domains.iter().any(|d| d.nodes.iter().filter(|x| p.nodes.names.contains(x)).count() as u32 != domain);
    if partial && !spec.version.short_blocks { RackFit::Partial { domain } } else { RackFit::Blocks }
}

/// The NVLink domains of the partitions that are blocks, as blocks.
fn blocks(partitions: &[Partition], fits: &[RackFit]) -> Vec<NodeGroup> {
    let mut out: Vec<NodeGroup> = Vec::new();
    for (p, fit) in partitions.iter().zip(fits) {
        if *fit != RackFit::Blocks {
            continue;
        }
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

/// Why a rack-scale partition cannot be blocks, and what makes it one; None when it can.
fn not_blocks(spec: &SlurmSpec, p: &Partition, fit: RackFit, islands: &[Island]) -> Option<String> {
    match fit {
        RackFit::NotRack | RackFit::Blocks => None,
        RackFit::Partial { domain } => {
            let n = p.nodes.names.len() as u32;
            let down = n / domain * domain;
            let sizes: Vec<String> = p
                .nodes
                .nvlink_domains
                .iter()
                .map(|d| (d, d.nodes.iter().filter(|x| p.nodes.names.contains(x)).count()))
                .filter(|(_, k)| *k as u32 != domain)
                .map(|(d, k)| format!("{} has {k}", d.name))
                .collect();
            Some(format!(
                "partition {:?}: cluster {}'s {n} nodes leave an NVLink domain partly filled ({} of {domain}). Before 25.05 Slurm's \
                 topology/block takes no block smaller than the others (23.11 stops at a block of another size, 24.x at one below \
                 BlockSizes, and lowering BlockSizes to it makes --segment of a whole domain refused). Use a node_count that is a \
                 multiple of {domain} ({}{}), or slurm_version 25.05 or later",
                p.name,
                p.nodes.cluster,
                sizes.join(", "),
                if down > 0 { format!("{down} or ") } else { String::new() },
                down + domain
            ))
        }
        RackFit::SeveralFabrics => {
            let names: Vec<String> = partition_islands(p, islands).into_iter().map(|(n, _)| n).collect();
            Some(format!(
                "partition {:?}: cluster {}'s NVLink domains are on {} RDMA fabrics that share no RDMA ({}), and topology/block lets a \
                 job span blocks of different fabrics. To have blocks, keep the cluster within one fabric ({})",
                p.name,
                p.nodes.cluster,
                names.len(),
                names.join(", "),
                crate::catalog::rdma_scope(spec.fabric.cloud).1
            ))
        }
    }
}

/// What the configuration's topology becomes for this version and these partitions, with a warning when
/// it is not what was asked (`auto`) or an error when it cannot be had at all (`block`).
fn choose(spec: &SlurmSpec, fits: &[RackFit], islands: &[Island], diags: &mut Diagnostics) -> Option<&'static str> {
    let v = spec.version;
    let parts = &spec.partitions;
    let racks: Vec<&str> = parts.iter().zip(fits).filter(|(_, f)| **f != RackFit::NotRack).map(|(p, _)| p.name.as_str()).collect();
    let all_racks = racks.len() == parts.len();
    let all_blocks = fits.iter().all(|f| *f == RackFit::Blocks);
    let refusals: Vec<String> = parts.iter().zip(fits).filter_map(|(p, f)| not_blocks(spec, p, *f, islands)).collect();
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
            if !refusals.is_empty() {
                for why in refusals {
                    diags.error_at(
                        at.clone(),
                        "NVLink domains Slurm cannot make blocks of",
                        format!("{}; or topology = \"auto\" (a tree, said in the plan) or \"tree\".", capitalized(&why)),
                    );
                }
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
                            &parts
                                .iter()
                                .zip(fits)
                                .filter(|(_, f)| **f == RackFit::NotRack)
                                .map(|(p, _)| p.name.as_str())
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
            // A partition that cannot be blocks is a tree whatever the version.
            for why in &refusals {
                diags.warning_at(
                    at.clone(),
                    "Tree topology for NVLink domains Slurm cannot make blocks of",
                    format!(
                        "{}. Its domains are leaf switches of a tree instead, and its jobs are not kept within whole domains (--segment).",
                        capitalized(why)
                    ),
                );
            }
            if v.yaml {
                return Some("topology.yaml");
            }
            if v.block.is_some() && all_blocks {
                return Some("topology/block");
            }
            let blockable: Vec<&str> =
                parts.iter().zip(fits).filter(|(_, f)| **f == RackFit::Blocks).map(|(p, _)| p.name.as_str()).collect();
            if blockable.is_empty() {
                return Some("topology/tree");
            }
            let why = if v.block.is_none() {
                format!("Slurm {} has no topology/block plugin (it came in 23.11)", v.version)
            } else if !all_racks {
                "before 25.05 one topology serves every partition, and not every partition is rack-scale".to_owned()
            } else {
                "before 25.05 one topology serves every partition, and not every partition's domains can be blocks".to_owned()
            };
            diags.warning_at(
                at,
                "Tree topology for rack-scale nodes",
                format!(
                    "Partitions {} are rack-scale (NVLink domains of several nodes): {why}, so each NVLink domain is a leaf switch of a \
                     tree instead of a block, and jobs are not kept within whole domains (--segment). Use slurm_version {} for blocks.",
                    crate::framework::one_of(&blockable),
                    if v.block.is_none() && all_racks { "23.11 or later" } else { "25.05 or later" }
                ),
            );
            Some("topology/tree")
        }
    }
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// The spine over an island's leaves: the cluster's when there is one island (a spine of the cluster), the
/// island's own when there are several.
fn spine(spec: &SlurmSpec, islands: &[Island], island: &Island) -> String {
    if islands.len() == 1 { format!("{}-spine", spec.name) } else { format!("{}-spine", island.name) }
}

/// topology.conf for the tree plugin: the leaves, and over each island's leaves a spine; no switch joins two
/// islands.
fn tree_conf(spec: &SlurmSpec, islands: &[Island]) -> String {
    let mut s =
        format!("# topology.conf for Slurm {} topology/tree, cluster {} (terraform-provider-hpc).\n", spec.version.version, spec.name);
    s.push_str("# One leaf switch per group of nodes the cloud places together (placement group, compact policy, scale set, compute\n");
    s.push_str("# cluster or cluster network; for rack-scale node types, one NVLink domain).\n");
    if islands.len() > 1 {
        let names: Vec<&str> = islands.iter().map(|i| i.name.as_str()).collect();
        let _ = writeln!(
            s,
            "# {} RDMA fabrics that share no RDMA ({}): no switch joins two of them, so Slurm keeps every job within one.",
            islands.len(),
            names.join(", ")
        );
    }
    for island in islands {
        for l in &island.leaves {
            let _ = writeln!(s, "SwitchName={} Nodes={}", l.name, compress(&l.nodes));
        }
    }
    for island in islands.iter().filter(|i| i.leaves.len() > 1) {
        let below: Vec<&str> = island.leaves.iter().map(|l| l.name.as_str()).collect();
        let _ = writeln!(s, "SwitchName={} Switches={}", spine(spec, islands, island), below.join(","));
    }
    s
}

/// The planning base block size: the NVLink domain's nodes. Before 25.05 no block may hold fewer, and a partition
/// that would have such a block is not made blocks of ([`RackFit::Partial`]).
fn block_size(spec: &SlurmSpec, fits: &[RackFit]) -> u32 {
    spec.partitions.iter().zip(fits).filter(|(_, f)| **f == RackFit::Blocks).map(|(p, _)| domain_nodes(p)).max().unwrap_or(1)
}

/// topology.conf for the block plugin: one block per NVLink domain.
fn block_conf(spec: &SlurmSpec, blocks: &[NodeGroup], size: u32, syntax: BlockSyntax) -> String {
    let mut s =
        format!("# topology.conf for Slurm {} topology/block, cluster {} (terraform-provider-hpc).\n", spec.version.version, spec.name);
    s.push_str("# One block per NVLink domain; jobs keep within whole domains with sbatch --segment=<nodes per domain or a divisor>.\n");
    for b in blocks {
        let _ = writeln!(s, "BlockName={} Nodes={}", b.name, compress(&b.nodes));
    }
    if syntax == BlockSyntax::Sizes {
        let _ = writeln!(s, "BlockSizes={size}");
    }
    s
}

/// topology.yaml (25.05): a tree of every node (a spine per RDMA island, none joining two), the cluster's default,
/// and where partitions are blocks a block topology of their domains, which those partitions name.
fn topology_yaml(spec: &SlurmSpec, islands: &[Island], blocks: &[NodeGroup], size: u32) -> String {
    let mut s = format!("# topology.yaml for Slurm {}, cluster {} (terraform-provider-hpc).\n---\n", spec.version.version, spec.name);
    let _ = writeln!(s, "- topology: tree\n  cluster_default: true\n  tree:\n    switches:");
    for island in islands.iter().filter(|i| i.leaves.len() > 1) {
        let children: Vec<String> = island.leaves.iter().map(|l| l.name.clone()).collect();
        let _ = writeln!(s, "      - switch: {}\n        children: {}", spine(spec, islands, island), compress(&children));
    }
    for l in islands.iter().flat_map(|i| &i.leaves) {
        let _ = writeln!(s, "      - switch: {}\n        nodes: {}", l.name, compress(&l.nodes));
    }
    if !blocks.is_empty() {
        let _ = writeln!(s, "- topology: block\n  cluster_default: false\n  block:\n    block_sizes:\n      - {size}\n    blocks:");
        for b in blocks {
            let _ = writeln!(s, "      - block: {}\n        nodes: {}", b.name, compress(&b.nodes));
        }
    }
    s
}

/// Every value the configuration writes from the spec, checked the way Slurm reads it: one bad value stops
/// slurmctld with the whole file.
fn check(spec: &SlurmSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    if spec.backup {
        diags.error_at(
            AttributePath::attr("backup_controller"),
            "Backup controller without shared state",
            format!(
                "A backup controller takes over with slurmctld's state from StateSaveLocation, so that state must be on storage both \
                 controllers mount. Here nothing mounts shared storage on the controllers: {} is a directory on each controller's own \
                 disk, and a failover would start from an empty state and drop every queued and running job. Remove backup_controller \
                 (or set it to false); a backup controller comes with shared state storage in a later release.",
                spec.state_save_location
            ),
        );
        ok = false;
    }
    if !state_path(&spec.state_save_location) {
        diags.error_at(
            AttributePath::attr("state_save_location"),
            "Invalid state save location",
            format!(
                "state_save_location {:?} is not a path Slurm's StateSaveLocation takes: an absolute path of letters, digits and \
                 '/', '.', '_', '-' (slurm.conf ends a value at a space and starts a comment at '#'), e.g. \"/var/spool/slurmctld\".",
                spec.state_save_location
            ),
        );
        ok = false;
    }
    if !HEALTH_CHECK_INTERVAL.contains(&spec.health_check_interval) {
        diags.error_at(
            AttributePath::attr("health_check_interval"),
            "Health check interval out of range",
            format!(
                "health_check_interval = {} seconds: Slurm reads HealthCheckInterval as a 16-bit number and stops at a larger one, and \
                 a check more often than every {} seconds keeps the nodes busy. Set it from {} to {} (about 18 hours); default 300.",
                spec.health_check_interval,
                HEALTH_CHECK_INTERVAL.start(),
                HEALTH_CHECK_INTERVAL.start(),
                HEALTH_CHECK_INTERVAL.end()
            ),
        );
        ok = false;
    }
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
        if !slurm_name(&p.name) || p.name.eq_ignore_ascii_case("default") {
            diags.error_at(
                at.clone().and_attr("name"),
                "Invalid partition name",
                format!(
                    "Partition name {:?} must be 1-64 letters, digits, '-', '_' or '.', and not \"default\" (PartitionName=DEFAULT sets \
                     the other partitions' defaults in slurm.conf, it makes no partition).",
                    p.name
                ),
            );
            ok = false;
        }
        if !names.insert(p.name.as_str()) {
            diags.error_at(at.clone().and_attr("name"), "Duplicate partition", format!("Partition {:?} is named twice.", p.name));
            ok = false;
        }
        if crate::clock::slurm_time_limit_minutes(&p.max_time).is_none() {
            diags.error_at(
                at.clone().and_attr("max_time"),
                "Invalid max_time",
                format!(
                    "Partition {:?}: max_time {:?} is not a time limit Slurm reads (slurmctld stops at it: Bad value for MaxTime). Write \
                     {TIME_FORMS}.",
                    p.name, p.max_time
                ),
            );
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
        if let Some(bad) = p.nodes.names.iter().find(|n| !slurm_name(n) || n.eq_ignore_ascii_case("default")) {
            diags.error_at(
                at.clone().and_attr("cluster"),
                "Node name Slurm does not take",
                format!("Partition {:?}: node {bad:?} of cluster {} is not a Slurm node name.", p.name, p.nodes.cluster),
            );
            ok = false;
        }
        // The cluster's name is a node feature, its groups' names are switches and blocks.
        let groups = p.nodes.placement_groups.iter().chain(&p.nodes.nvlink_domains).map(|g| g.name.as_str());
        if let Some(bad) = std::iter::once(p.nodes.cluster.as_str()).chain(groups).find(|n| !slurm_name(n)) {
            diags.error_at(
                at.clone().and_attr("cluster"),
                "Name Slurm does not take",
                format!(
                    "Partition {:?}: {bad:?} (cluster {}'s name, or one of its placement groups or NVLink domains) becomes a Slurm \
                     feature, switch or block name, which is 1-64 letters, digits, '-', '_' or '.'. Give the cluster its \
                     hpc_gpu_cluster's own name, placement_groups and nvlink_domains (cluster = hpc_gpu_cluster.<name>).",
                    p.name, p.nodes.cluster
                ),
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

/// What the plan says when the Slurm version cannot confine jobs, and when a partition's nodes are on several RDMA
/// islands.
fn warnings(spec: &SlurmSpec, islands: &[Island], kind: &str, diags: &mut Diagnostics) {
    let v = spec.version;
    if !v.cgroup_v2 {
        let with: Vec<&str> = crate::catalog::slurm::SLURM_VERSIONS.iter().filter(|x| x.cgroup_v2).map(|x| x.version).collect();
        diags.warning_at(
            AttributePath::attr("slurm_version"),
            "Jobs not confined to what they asked for",
            format!(
                "Slurm {} has only the cgroup v1 plugins, and the images that install it (Ubuntu 22.04) boot cgroup v2, where slurmd \
                 stops at proctrack/cgroup or task/cgroup. So the configuration tracks jobs by process (proctrack/linuxproc) and binds \
                 them to their cores (task/affinity), and cgroup.conf constrains nothing: a job can use more memory and other GPUs than it \
                 asked for. For jobs confined to their cores, memory and GPUs, set slurm_version to {} with images that run it (22.05 or \
                 later, e.g. Debian 12's).",
                v.version,
                crate::framework::one_of(&with)
            ),
        );
    }
    for (i, p) in spec.partitions.iter().enumerate() {
        let parts = partition_islands(p, islands);
        if parts.len() < 2 {
            continue;
        }
        let largest = parts.iter().map(|(_, n)| n.len()).max().unwrap_or(0);
        let listed: Vec<String> =
            parts.iter().map(|(name, nodes)| format!("{name} ({} nodes, {})", nodes.len(), compress(nodes))).collect();
        let keys: Vec<String> = parts
            .iter()
            .enumerate()
            .map(|(j, (name, _))| if j == 0 { format!("{:?}", p.name) } else { format!("\"{}/{name}\"", p.name) })
            .collect();
        let scheduling = if kind == "none" {
            "With topology = \"none\" Slurm does not know them apart and may place a job across two, where NCCL falls back to TCP: \
             use topology = \"auto\" or \"tree\" to keep jobs within one."
                .to_owned()
        } else {
            format!(
                "The topology joins no two of them under a switch, so Slurm places each job within one: a job of more than {largest} nodes never starts."
            )
        };
        diags.warning_at(
            AttributePath::attr("partition").and_index(i).and_attr("cluster"),
            "Partition on several RDMA fabrics",
            format!(
                "Partition {:?}: cluster {}'s {} nodes are on {} RDMA fabrics that share no RDMA ({}): {}. {scheduling} Its NCCL tests \
                 run on each fabric apart: nccl_tests[{}]. For one job over every node, keep the cluster within one fabric.",
                p.name,
                p.nodes.cluster,
                p.nodes.names.len(),
                parts.len(),
                crate::catalog::rdma_scope(spec.fabric.cloud).1,
                listed.join(", "),
                keys.join("], nccl_tests[")
            ),
        );
    }
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
    let leaves = leaves(&spec.partitions);
    let islands = islands(spec, &leaves);
    let fits: Vec<RackFit> = spec.partitions.iter().map(|p| rack_fit(spec, p, &islands)).collect();
    let kind = choose(spec, &fits, &islands, diags)?;
    warnings(spec, &islands, kind, diags);
    let [primary, backup] = controller_addresses(&spec.cidr)?;
    let mut controllers = vec![(controller_name(&spec.name, 0), primary)];
    if spec.backup {
        controllers.push((controller_name(&spec.name, 1), backup));
    }
    let blocks = blocks(&spec.partitions, &fits);
    let size = block_size(spec, &fits);
    let topology = match kind {
        "topology/tree" => Topology { kind, conf: Some(tree_conf(spec, &islands)), yaml: None },
        "topology/block" => {
            let syntax = spec.version.block.unwrap_or(BlockSyntax::Sizes);
            Topology { kind, conf: Some(block_conf(spec, &blocks, size, syntax)), yaml: None }
        }
        "topology.yaml" => Topology { kind, conf: None, yaml: Some(topology_yaml(spec, &islands, &blocks, size)) },
        _ => Topology { kind: "none", conf: None, yaml: None },
    };
    let slurm_conf = slurm_conf(spec, &controllers, &topology, &fits);
    if !check_custom_settings(spec, &slurm_conf, diags) {
        return None;
    }
    let slurmdbd_conf = spec.accounting.then(|| slurmdbd_conf(spec, &controllers[0].0));
    Some(SlurmPlan {
        control_subnet: subnet_text(subnet),
        logins: (0..spec.login_nodes).map(|i| login_name(&spec.name, i)).collect(),
        controllers,
        slurm_conf,
        gres_conf: gres_conf(spec),
        cgroup_conf: cgroup_conf(spec),
        slurmdbd_conf,
        topology,
        healthcheck: healthcheck_program(),
        nccl_tests: nccl_tests(spec, kind, &fits, &islands),
    })
}

/// `slurmdbd.conf` for job accounting on the primary controller `host`: its database is a MariaDB on the same
/// host, reached over its local socket (`StorageHost=localhost`) as the `slurm` user, whom the database knows by
/// that socket's peer (unix_socket authentication), so that no password exists anywhere.
fn slurmdbd_conf(spec: &SlurmSpec, host: &str) -> String {
    format!(
        "# slurmdbd.conf for Slurm {}, cluster {} (terraform-provider-hpc): job accounting on {host}, with its database\n\
         # (MariaDB) on the same host, reached over its local socket as the slurm user: no password.\n\
         DbdHost={host}\n\
         DbdPort={SLURMDBD_PORT}\n\
         SlurmUser=slurm\n\
         AuthType=auth/munge\n\
         LogFile=/var/log/slurm/slurmdbd.log\n\
         PidFile=/run/slurmdbd.pid\n\
         StorageType=accounting_storage/mysql\n\
         StorageHost=localhost\n\
         StorageLoc=slurm_acct_db\n\
         StorageUser=slurm\n",
        spec.version.version, spec.name
    )
}

/// `custom_settings`, checked as this version's slurm.conf parser reads them: a name it knows
/// (`catalog::slurm_keys`, without case), not one the provider writes itself (`rendered` holds them) nor a
/// node or partition line, and a value of one word with no comment sign in it.
fn check_custom_settings(spec: &SlurmSpec, rendered: &str, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let release = |v: &str| -> (u32, u32) {
        let mut it = v.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let version = release(spec.version.version);
    let ours: std::collections::BTreeSet<String> = rendered
        .lines()
        .take_while(|l| !l.starts_with("# custom_settings"))
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_ascii_lowercase()))
        .filter(|k| !k.contains(' '))
        .collect();
    let structural = ["nodename", "partitionname", "nodeset", "downnodes", "include", "frontendname", "switchname"];
    for (key, value) in &spec.custom_settings {
        let at = AttributePath::attr("custom_settings").and_key(key);
        let lower = key.to_ascii_lowercase();
        let known = crate::catalog::slurm_keys::SLURM_CONF_KEYS.iter().find(|(k, _, _)| k.eq_ignore_ascii_case(key));
        let problem = if structural.contains(&lower.as_str()) || ours.contains(&lower) {
            Some(format!(
                "{key} is written by the provider (from the fabric, the clusters, the partitions and this resource's attributes): set it through them, not custom_settings."
            ))
        } else {
            match known {
                None => Some(format!(
                    "{key:?} is not a slurm.conf parameter: slurmctld would stop at it (\"Parsing error at unrecognized key\"). See \
                     slurm.conf(5) for Slurm {}.",
                    spec.version.version
                )),
                Some((name, first, last)) if version < release(first) || last.is_some_and(|l| version > release(l)) => Some(format!(
                    "{name} is a slurm.conf parameter of Slurm {first}{}, not of {}: slurmctld {} would stop at it.",
                    last.map(|l| format!(" to {l}")).unwrap_or_else(|| " and later".into()),
                    spec.version.version,
                    spec.version.version
                )),
                Some(_) => None,
            }
        }
        .or_else(|| {
            let bad = value.is_empty() || value.len() > 1024 || value.chars().any(|c| c.is_whitespace() || c.is_control() || c == '#');
            bad.then(|| {
                format!(
                    "{key} = {value:?}: a slurm.conf value here is one word of at most 1024 characters, without spaces or `#` (which \
                     starts a comment)."
                )
            })
        });
        if let Some(detail) = problem {
            diags.error_at(at, "Invalid Slurm setting", detail);
            ok = false;
        }
    }
    ok
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

/// `TreeWidth` where the version's default would leave nodes unreached: before 23.11 slurmd forwards nothing to a
/// cloud node it has no address for, and these nodes have no DNS names, so the controller must reach every node
/// itself (at least the node count, at most what Slurm takes).
fn tree_width(v: &SlurmVersion, nodes: usize) -> Option<u16> {
    (!v.cloud_fanout && nodes > usize::from(v.tree_width_default)).then(|| nodes.min(usize::from(TREE_WIDTH_MAX)) as u16)
}

fn slurm_conf(spec: &SlurmSpec, controllers: &[(String, String)], topology: &Topology, fits: &[RackFit]) -> String {
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
         SlurmdLogFile=/var/log/slurm/slurmd.log\n",
    );
    if v.cgroup_v2 {
        s.push_str(
            "ProctrackType=proctrack/cgroup\n\
             TaskPlugin=task/cgroup,task/affinity\n",
        );
    } else {
        let _ = writeln!(
            s,
            "# Slurm {} has only cgroup v1, which the cgroup v2 images cannot mount: jobs are tracked by process and bound to\n\
             # their cores, not confined (22.05 or later confines them).\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/affinity",
            v.version
        );
    }
    s.push_str(
        "SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\n\
         GresTypes=gpu\n\
         ReturnToService=2\n",
    );
    if let Some(width) = tree_width(v, clusters(spec).iter().map(|(n, _)| n.names.len()).sum()) {
        let _ = writeln!(
            s,
            "# The nodes have no DNS names, and before 23.11 slurmd forwards no message to a cloud node it has no address for: the\n\
             # controller reaches every node itself (TreeWidth at least the node count).\n\
             TreeWidth={width}"
        );
    }
    if v.private_data_cloud {
        s.push_str("PrivateData=cloud\n");
    }
    if spec.accounting {
        let (host, addr) = &controllers[0];
        let _ = writeln!(
            s,
            "# Job accounting: slurmdbd on the primary controller ({host}), its database beside it (slurmdbd.conf); sacct and\n\
             # sreport read it from every host.\n\
             AccountingStorageType=accounting_storage/slurmdbd\n\
             AccountingStorageHost={addr}\n\
             AccountingStoragePort={SLURMDBD_PORT}\n\
             JobAcctGatherType=jobacct_gather/linux\n\
             JobAcctGatherFrequency=30"
        );
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
        "# A failing node self-check drains the node with its reason (a drain lets running jobs finish: the check only reads the\n\
         # node's devices, and never powers it off), on nodes in any state, spread over the interval (CYCLE); the cluster's next\n\
         # plan repairs a drained node.\n\
         HealthCheckProgram={HEALTHCHECK_PATH}\n\
         HealthCheckInterval={}\n\
         HealthCheckNodeState=ANY,CYCLE",
        spec.health_check_interval
    );
    if spec.partitions.iter().any(|p| !p.nodes.nvlink_domains.is_empty()) {
        let _ = writeln!(
            s,
            "# Rack-scale nodes: a job's nodes of one NVLink domain share GPU memory through NVIDIA's IMEX, which the prolog starts\n\
             # for the job with those nodes (per job, as NVIDIA recommends for Slurm) and the epilog stops.\n\
             Prolog={PROLOG_PATH}\n\
             Epilog={EPILOG_PATH}\n\
             PrologFlags=Alloc"
        );
    }
    if !spec.custom_settings.is_empty() {
        s.push_str("# custom_settings (the configuration's own):\n");
        for (k, v) in &spec.custom_settings {
            let _ = writeln!(s, "{k}={v}");
        }
    }
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
        // Rack-scale nodes carry their NVLink domain as a feature (`nvlink-<domain>`), which the prolog reads: a line
        // per domain, and one for nodes in none.
        let mut lines: Vec<(Vec<String>, Vec<String>)> = nodes
            .nvlink_domains
            .iter()
            .map(|d| {
                let members: Vec<String> = d.nodes.iter().filter(|n| nodes.names.contains(n)).cloned().collect();
                let mut f = features.clone();
                f.push(format!("{NVLINK_FEATURE_PREFIX}{}", d.name));
                (members, f)
            })
            .filter(|(m, _)| !m.is_empty())
            .collect();
        let placed: Vec<&String> = lines.iter().flat_map(|(m, _)| m).collect();
        let rest: Vec<String> = nodes.names.iter().filter(|n| !placed.contains(n)).cloned().collect();
        if !rest.is_empty() {
            lines.push((rest, features.clone()));
        }
        for (members, f) in lines {
            let _ = writeln!(
                s,
                "NodeName={} CPUs={} Sockets={} CoresPerSocket={} ThreadsPerCore={} RealMemory={} Gres=gpu:{}:{} Features={} State=CLOUD",
                compress(&members),
                sku.vcpus,
                sku.cpu.sockets,
                sku.cpu.cores_per_socket,
                sku.cpu.threads_per_core,
                real_memory(sku),
                gres_type(sku),
                sku.gpu_count,
                f.join(",")
            );
        }
    }
    s.push_str("# A job asking for GPUs and no memory (--mem) gets its GPUs' share of the node's memory (DefMemPerGPU, MiB).\n");
    let first_default = !spec.partitions.iter().any(|p| p.default);
    for (i, p) in spec.partitions.iter().enumerate() {
        let default = p.default || (first_default && i == 0);
        let _ = write!(
            s,
            "PartitionName={} Nodes={} Default={} MaxTime={} DefMemPerGPU={} State=UP",
            p.name,
            compress(&p.nodes.names),
            if default { "YES" } else { "NO" },
            p.max_time,
            mem_per_gpu(p.nodes.sku)
        );
        if topology.kind == "topology.yaml" {
            let _ = write!(s, " Topology={}", if fits[i] == RackFit::Blocks { "block" } else { "tree" });
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

/// cgroup.conf: from 22.05 jobs are confined by the cgroup plugin the node has (v2 on the current images); before,
/// there is no cgroup plugin in use and nothing to constrain (and 21.08 does not know `CgroupPlugin=autodetect`'s v2).
fn cgroup_conf(spec: &SlurmSpec) -> String {
    let v = spec.version;
    if !v.cgroup_v2 {
        return format!(
            "# cgroup.conf for Slurm {} (terraform-provider-hpc): no cgroup plugin is in use (only cgroup v1 exists in {}, and the\n\
             # images boot cgroup v2), so nothing is constrained here. Slurm 22.05 or later confines jobs.\n",
            v.version, v.version
        );
    }
    format!(
        "# cgroup.conf for Slurm {} (terraform-provider-hpc): a job gets the cores, memory and GPUs it asked for, no more.\n\
         CgroupPlugin=autodetect\n\
         ConstrainCores=yes\n\
         ConstrainDevices=yes\n\
         ConstrainRAMSpace=yes\n",
        v.version
    )
}

/// An NCCL all-reduce job per partition over its nodes, submitted to that partition: over each RDMA island of it
/// apart (the first under the partition's name, the others under `<partition>/<island>`), and on a block topology
/// from 24.05 in segments of a whole NVLink domain.
fn nccl_tests(spec: &SlurmSpec, kind: &str, fits: &[RackFit], islands: &[Island]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let blocks = matches!(kind, "topology/block" | "topology.yaml");
    for (p, fit) in spec.partitions.iter().zip(fits) {
        let env = super::node_environment(p.nodes.sku);
        for (j, (island, nodes)) in partition_islands(p, islands).into_iter().enumerate() {
            let (key, name) = if j == 0 {
                (p.name.clone(), format!("{}-nccl", p.name))
            } else {
                (format!("{}/{island}", p.name), format!("{}-{island}-nccl", p.name))
            };
            let domain = domain_nodes(p);
            let segment = (blocks && *fit == RackFit::Blocks && spec.version.segment && (nodes.len() as u32).is_multiple_of(domain))
                .then_some(domain);
            let job = super::nccl::NcclJob {
                name: &name,
                nodes: &nodes,
                cluster: &p.nodes.cluster,
                gpus_per_node: p.nodes.sku.gpu_count,
                env: &env,
                expected_busbw_gbs: crate::catalog::expected_busbw(p.nodes.sku).map(|b| b.gbytes_per_sec),
                segment,
                partition: Some(&p.name),
                tolerate: &[],
            };
            if let Ok(script) = super::nccl::slurm_script(&job) {
                out.insert(key, script);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, Cloud, slurm};

    #[test]
    fn a_state_save_location_is_a_directory_below_the_root() {
        for good in ["/var/spool/slurmctld", "/shared/slurm.state", "/a"] {
            assert!(state_path(good), "{good}");
        }
        for bad in ["/", "//", "/.", "/..", "/var/../..", "/var//spool", "/var/spool/", "relative", "/var/sp ool", "/var/#x"] {
            assert!(!state_path(bad), "{bad}");
        }
    }
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
            custom_settings: Default::default(),
            accounting: false,
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

    /// A Slurm cluster on `cloud`'s fabric.
    fn on(cloud: Cloud, version: &str, partitions: Vec<Partition>) -> SlurmSpec {
        let mut s = spec(version, partitions);
        s.fabric.cloud = cloud;
        s
    }

    /// `n` nodes of `sku` named `<cluster>-<i>`, in placement groups of the given sizes (`<cluster>-<j>`).
    fn grouped(name: &str, cluster: &str, sku: &'static Sku, sizes: &[u32]) -> Partition {
        let n: u32 = sizes.iter().sum();
        let all = names(cluster, n);
        let mut first = 0usize;
        let groups = sizes
            .iter()
            .enumerate()
            .map(|(j, k)| {
                let g = NodeGroup { name: format!("{cluster}-{j}"), nodes: all[first..first + *k as usize].to_vec() };
                first += *k as usize;
                g
            })
            .collect();
        partition(name, cluster, sku, n, groups, vec![])
    }

    fn summaries(d: &Diagnostics) -> Vec<String> {
        d.iter().map(|x| format!("{} [{}]", x.summary, x.path.as_ref().map(|p| p.to_string()).unwrap_or_default())).collect()
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

    /// With accounting, slurm.conf sends the jobs' records to slurmdbd on the primary controller and the plan has
    /// its slurmdbd.conf, which names that controller and holds no password; without, neither.
    #[test]
    fn accounting_is_slurmdbd_on_the_primary_controller_with_no_password() {
        let mut d = Diagnostics::new();
        let mut s = spec("22.05", vec![h100(2)]);
        let off = plan(&s, &mut d).unwrap();
        assert!(off.slurmdbd_conf.is_none() && !off.slurm_conf.contains("AccountingStorage"), "{}", off.slurm_conf);
        s.accounting = true;
        let on = plan(&s, &mut d).unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert!(
            on.slurm_conf.contains(
                "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=10.0.255.244\nAccountingStoragePort=6819\n"
            ),
            "{}",
            on.slurm_conf
        );
        let dbd = on.slurmdbd_conf.unwrap();
        assert!(
            dbd.contains("DbdHost=ml-controller\n") && dbd.contains("StorageHost=localhost\n") && dbd.contains("StorageUser=slurm\n"),
            "{dbd}"
        );
        assert!(!dbd.contains("StoragePass"), "{dbd}");
        // A user's own AccountingStorageType is one the provider writes now.
        s.custom_settings.insert("AccountingStorageType".into(), "accounting_storage/none".into());
        assert!(plan(&s, &mut d).is_none());
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
        assert!(plan.slurm_conf.contains(
            "NodeName=h100-[0-15] CPUs=192 Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 RealMemory=1992295 Gres=gpu:h100:8 Features=h100 \
             State=CLOUD"
        ));
        assert!(plan.slurm_conf.contains("PartitionName=h100 Nodes=h100-[0-15] Default=YES MaxTime=INFINITE DefMemPerGPU=249036 State=UP"));
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
        let yaml = plan(&spec("25.05", vec![gb200(27)]), &mut Diagnostics::new()).unwrap().topology.yaml.unwrap();
        assert!(
            yaml.contains("block_sizes:\n      - 18\n") && yaml.contains("      - block: gb-nvl1\n        nodes: gb-[18-26]\n"),
            "{yaml}"
        );
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
        assert!(
            yaml.slurm_conf
                .contains("PartitionName=h100 Nodes=h100-[0-3] Default=YES MaxTime=INFINITE DefMemPerGPU=249036 State=UP Topology=tree\n")
        );
        assert!(
            yaml.slurm_conf
                .contains("PartitionName=gb200 Nodes=gb-[0-17] Default=NO MaxTime=INFINITE DefMemPerGPU=233472 State=UP Topology=block\n")
        );
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

    #[test]
    fn on_21_08_jobs_are_tracked_by_process_and_the_plan_says_they_are_not_confined() {
        let mut d = Diagnostics::new();
        let old = plan(&spec("21.08", vec![h100(2)]), &mut d).unwrap();
        assert!(old.slurm_conf.contains("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity\n"), "{}", old.slurm_conf);
        assert!(!old.slurm_conf.contains("cgroup\n") && !old.slurm_conf.contains("task/cgroup"), "{}", old.slurm_conf);
        // Nothing to constrain, and no CgroupPlugin=autodetect, which would pick cgroup/v2 that 21.08 has not.
        assert!(!old.cgroup_conf.lines().any(|l| !l.starts_with('#')), "{}", old.cgroup_conf);
        let warned: Vec<_> = d.iter().filter(|x| x.summary == "Jobs not confined to what they asked for").collect();
        assert_eq!(warned.len(), 1, "{d:?}");
        assert_eq!(warned[0].path.as_ref().map(|p| p.to_string()).as_deref(), Some("slurm_version"));
        assert!(warned[0].detail.contains("cgroup v2") && warned[0].detail.contains("22.05"), "{}", warned[0].detail);

        let mut d = Diagnostics::new();
        let new = plan(&spec("22.05", vec![h100(2)]), &mut d).unwrap();
        assert!(d.is_empty(), "{d:?}");
        assert!(new.slurm_conf.contains("ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"));
        assert!(new.cgroup_conf.contains("CgroupPlugin=autodetect\nConstrainCores=yes\nConstrainDevices=yes\nConstrainRAMSpace=yes\n"));
    }

    /// sbatch has `--segment` from 24.05, and from 24.05 refuses it with a node list over several segments.
    #[test]
    fn the_nccl_job_asks_for_segments_only_where_sbatch_has_them_and_then_names_no_nodes() {
        for (version, kind, segmented) in [
            ("22.05", "topology/tree", false),
            ("23.11", "topology/block", false),
            ("24.11", "topology/block", true),
            ("25.05", "topology.yaml", true),
        ] {
            let p = plan(&spec(version, vec![gb200(36)]), &mut Diagnostics::new()).unwrap();
            assert_eq!(p.topology.kind, kind, "{version}");
            let job = &p.nccl_tests["gb200"];
            assert_eq!(job.contains("#SBATCH --segment=18\n"), segmented, "{version}: {job}");
            assert_eq!(job.contains("#SBATCH --nodelist=gb-0,gb-1,"), !segmented, "{version}: {job}");
            assert!(job.contains("#SBATCH --nodes=36\n") && job.contains("#SBATCH --partition=gb200\n"), "{version}: {job}");
        }
        // A tree on 24.11 (topology = "tree"): no segments, the nodes by name.
        let mut tree = spec("24.11", vec![gb200(36)]);
        tree.topology = TopologyChoice::Tree;
        let job = &plan(&tree, &mut Diagnostics::new()).unwrap().nccl_tests["gb200"];
        assert!(!job.contains("--segment") && job.contains("--nodelist="), "{job}");
    }

    /// An ND H100 v5 cluster of 130 VMs is two scale sets, each its own InfiniBand fabric.
    #[test]
    fn azure_scale_sets_are_never_joined_under_a_switch_and_the_nccl_test_runs_in_each() {
        let sku = catalog::find_sku(Cloud::Azure, "Standard_ND96isr_H100_v5").unwrap();
        let mut d = Diagnostics::new();
        let p = plan(&on(Cloud::Azure, "22.05", vec![grouped("nd", "nd", sku, &[65, 65])]), &mut d).unwrap();
        let conf = p.topology.conf.unwrap();
        assert!(conf.contains("SwitchName=nd-0 Nodes=nd-[0-64]\nSwitchName=nd-1 Nodes=nd-[65-129]\n"), "{conf}");
        assert!(!conf.contains("Switches="), "no switch joins the two fabrics: {conf}");
        let warned: Vec<_> = d.iter().filter(|x| x.summary == "Partition on several RDMA fabrics").collect();
        assert_eq!(warned.len(), 1, "{:?}", summaries(&d));
        assert_eq!(warned[0].path.as_ref().map(|p| p.to_string()).as_deref(), Some("partition[0].cluster"));
        let detail = &warned[0].detail;
        for words in ["nd-0 (65 nodes, nd-[0-64])", "nd-1 (65 nodes, nd-[65-129])", "more than 65 nodes never starts", "scale set"] {
            assert!(detail.contains(words), "{words}: {detail}");
        }
        // One NCCL test per fabric, each over its own nodes.
        assert_eq!(p.nccl_tests.keys().collect::<Vec<_>>(), ["nd", "nd/nd-1"]);
        assert!(p.nccl_tests["nd"].contains("#SBATCH --nodes=65\n") && p.nccl_tests["nd"].contains("nd-64\n"));
        assert!(!p.nccl_tests["nd"].contains("nd-65"), "{}", p.nccl_tests["nd"]);
        assert!(
            p.nccl_tests["nd/nd-1"].contains("#SBATCH --nodelist=nd-65,") && p.nccl_tests["nd/nd-1"].contains("--job-name=nd-nd-1-nccl")
        );

        // Within one scale set several leaves share a spine; AWS placement groups of one fabric share EFA: one spine.
        let aws = plan(&spec("22.05", vec![grouped("p5", "p5", catalog::find_sku(Cloud::Aws, "p5.48xlarge").unwrap(), &[8, 8])]), &mut d)
            .unwrap()
            .topology
            .conf
            .unwrap();
        assert!(aws.contains("SwitchName=ml-spine Switches=p5-0,p5-1\n"), "{aws}");
        // OCI: two clusters, each with its cluster network, are two fabrics; two on the fabric's compute cluster are one.
        let bm = catalog::find_sku(Cloud::Oci, "BM.GPU.H100.8").unwrap();
        let own = |c: &str, g: &str| partition(c, c, bm, 2, vec![NodeGroup { name: g.into(), nodes: names(c, 2) }], vec![]);
        let mut d = Diagnostics::new();
        let cn = plan(&on(Cloud::Oci, "22.05", vec![own("a", "a-cn"), own("b", "b-cn")]), &mut d).unwrap();
        assert!(!cn.topology.conf.unwrap().contains("Switches="));
        let cc = plan(&on(Cloud::Oci, "22.05", vec![own("a", "f-cc"), own("b", "f-cc")]), &mut d).unwrap();
        assert!(cc.topology.conf.unwrap().contains("SwitchName=f-cc Nodes=a-[0-1],b-[0-1]\n"));
        // Each partition within one fabric: nothing to warn of.
        assert!(d.is_empty(), "{:?}", summaries(&d));
    }

    #[test]
    fn nvlink_domains_on_two_scale_sets_are_a_tree_per_fabric_not_blocks() {
        let sku = catalog::find_sku(Cloud::Azure, "Standard_ND128isr_GB300_v6").unwrap();
        let all = names("gb", 108);
        let domains: Vec<NodeGroup> =
            (0..6).map(|d| NodeGroup { name: format!("gb-nvl{d}"), nodes: all[d * 18..(d + 1) * 18].to_vec() }).collect();
        let sets = vec![
            NodeGroup { name: "gb-0".into(), nodes: all[..54].to_vec() },
            NodeGroup { name: "gb-1".into(), nodes: all[54..].to_vec() },
        ];
        let p = partition("gb300", "gb", sku, 108, sets, domains);
        let mut d = Diagnostics::new();
        let tree = plan(&on(Cloud::Azure, "24.11", vec![p.clone()]), &mut d).unwrap();
        assert_eq!(tree.topology.kind, "topology/tree");
        let conf = tree.topology.conf.unwrap();
        assert!(
            conf.contains(
                "SwitchName=gb-0-spine Switches=gb-nvl0,gb-nvl1,gb-nvl2\nSwitchName=gb-1-spine Switches=gb-nvl3,gb-nvl4,gb-nvl5\n"
            ),
            "{conf}"
        );
        assert!(
            summaries(&d).contains(&"Tree topology for NVLink domains Slurm cannot make blocks of [topology]".to_owned()),
            "{:?}",
            summaries(&d)
        );
        let mut block = on(Cloud::Azure, "24.11", vec![p]);
        block.topology = TopologyChoice::Block;
        let mut d = Diagnostics::new();
        assert!(plan(&block, &mut d).is_none());
        assert!(
            d.iter().any(|x| x.summary == "NVLink domains Slurm cannot make blocks of" && x.detail.contains("2 RDMA fabrics")),
            "{d:?}"
        );
    }

    /// Before 25.05 a partly filled NVLink domain would be a short block: 23.11 stops at a block of another size,
    /// 24.x at one below BlockSizes (and a lower BlockSizes refuses --segment of a whole domain).
    #[test]
    fn a_partly_filled_nvlink_domain_is_a_tree_before_25_05_and_refused_as_blocks() {
        for version in ["23.11", "24.05", "24.11"] {
            let mut d = Diagnostics::new();
            let p = plan(&spec(version, vec![gb200(27)]), &mut d).unwrap();
            assert_eq!(p.topology.kind, "topology/tree", "{version}");
            let warned = d.iter().find(|x| x.summary == "Tree topology for NVLink domains Slurm cannot make blocks of").expect("a warning");
            assert!(
                warned.detail.contains("gb-nvl1 has 9 of 18") && warned.detail.contains("multiple of 18 (18 or 36)"),
                "{}",
                warned.detail
            );
            assert!(!p.nccl_tests["gb200"].contains("--segment"));
            let mut block = spec(version, vec![gb200(27)]);
            block.topology = TopologyChoice::Block;
            let mut d = Diagnostics::new();
            assert!(plan(&block, &mut d).is_none(), "{version}");
            let e = d.iter().find(|x| x.summary == "NVLink domains Slurm cannot make blocks of").expect("an error");
            assert!(e.detail.contains("25.05") && e.detail.contains("multiple of 18"), "{}", e.detail);
        }
        // Whole domains are blocks of the domain's size; 25.05 takes a short one.
        let whole = plan(&spec("24.11", vec![gb200(36)]), &mut Diagnostics::new()).unwrap();
        assert!(whole.topology.conf.unwrap().ends_with("BlockName=gb-nvl1 Nodes=gb-[18-35]\nBlockSizes=18\n"));
        let mut d = Diagnostics::new();
        assert_eq!(plan(&spec("25.05", vec![gb200(27)]), &mut d).unwrap().topology.kind, "topology.yaml");
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn mi300x_gpus_are_their_render_nodes_eight_apart() {
        for (cloud, name) in [(Cloud::Azure, "Standard_ND96isr_MI300X_v5"), (Cloud::Oci, "BM.GPU.MI300X.8")] {
            let sku = catalog::find_sku(cloud, name).unwrap();
            let p = plan(&on(cloud, "22.05", vec![partition("mi", "mi", sku, 2, vec![], vec![])]), &mut Diagnostics::new()).unwrap();
            assert_eq!(
                p.gres_conf.lines().last(),
                Some("NodeName=mi-[0-1] Name=gpu Type=mi300x File=/dev/dri/renderD[128,136,144,152,160,168,176,184]"),
                "{name}"
            );
        }
    }

    /// What slurmctld would refuse (and stop at) is refused at the attribute it comes from.
    #[test]
    fn every_value_written_into_slurms_files_is_checked_at_its_attribute() {
        type Change = fn(&mut SlurmSpec);
        let cases: [(&str, Change, &str, &str); 10] = [
            ("forever", |s| s.partitions[0].max_time = "forever".into(), "partition[0].max_time", "Invalid max_time"),
            ("7 days", |s| s.partitions[0].max_time = "7 days".into(), "partition[0].max_time", "Invalid max_time"),
            ("DEFAULT", |s| s.partitions[0].name = "DEFAULT".into(), "partition[0].name", "Invalid partition name"),
            ("a b", |s| s.partitions[0].name = "a b".into(), "partition[0].name", "Invalid partition name"),
            ("relative", |s| s.state_save_location = "var/spool/slurmctld".into(), "state_save_location", "Invalid state save location"),
            ("spaced", |s| s.state_save_location = "/var/spool/slurm ctld".into(), "state_save_location", "Invalid state save location"),
            ("a day", |s| s.health_check_interval = 86_400, "health_check_interval", "Health check interval out of range"),
            ("ten", |s| s.health_check_interval = 10, "health_check_interval", "Health check interval out of range"),
            (
                "group",
                |s| s.partitions[0].nodes.placement_groups[0].name = "pg#1".into(),
                "partition[0].cluster",
                "Name Slurm does not take",
            ),
            ("backup", |s| s.backup = true, "backup_controller", "Backup controller without shared state"),
        ];
        for (what, change, path, summary) in cases {
            let mut s = spec("22.05", vec![h100(2)]);
            change(&mut s);
            let mut d = Diagnostics::new();
            assert!(plan(&s, &mut d).is_none(), "{what}");
            let e = d.iter().find(|x| x.summary == summary).unwrap_or_else(|| panic!("{what}: {:?}", summaries(&d)));
            assert_eq!(e.path.as_ref().map(|p| p.to_string()).as_deref(), Some(path), "{what}");
        }
        let mut s = spec("22.05", vec![h100(2)]);
        s.partitions[0].max_time = "forever".into();
        let mut d = Diagnostics::new();
        plan(&s, &mut d);
        let detail = &d.iter().next().unwrap().detail;
        assert!(detail.contains("\"forever\"") && detail.contains("\"7-00:00:00\"") && detail.contains("\"INFINITE\""), "{detail}");
        // A backup controller is refused whatever the path: nothing mounts shared storage on the controllers.
        let mut s = spec("22.05", vec![h100(2)]);
        (s.backup, s.state_save_location) = (true, "/lustre/slurm/state".into());
        assert!(plan(&s, &mut Diagnostics::new()).is_none());
        // The bounds themselves are taken.
        for interval in [30, 65_535] {
            let mut s = spec("22.05", vec![h100(2)]);
            s.health_check_interval = interval;
            assert!(plan(&s, &mut Diagnostics::new()).is_some(), "{interval}");
        }
    }

    /// Before 23.11 slurmd forwards nothing to a cloud node it has no address for: the controller reaches every node.
    #[test]
    fn tree_width_is_the_node_count_before_23_11_over_the_default_50() {
        let width = |version: &str, n: u32| {
            let c = plan(&spec(version, vec![h100(n)]), &mut Diagnostics::new()).unwrap().slurm_conf;
            c.lines().find_map(|l| l.strip_prefix("TreeWidth=")).map(str::to_owned)
        };
        for version in ["21.08", "22.05", "23.02"] {
            assert_eq!(width(version, 130).as_deref(), Some("130"), "{version}");
            assert_eq!(width(version, 50), None, "{version}: the default reaches 50");
        }
        for version in ["23.11", "24.11", "25.05"] {
            assert_eq!(width(version, 130), None, "{version}");
        }
        // Capped at what Slurm takes.
        assert_eq!(tree_width(slurm::find("22.05").unwrap(), 70_000), Some(65_533));
    }

    #[test]
    fn custom_settings_are_written_as_slurm_reads_them_or_refused_at_their_key() {
        let mut ok = spec("22.05", vec![h100(2)]);
        ok.custom_settings = [("SlurmdParameters".to_owned(), "config_overrides".to_owned())].into();
        let mut d = Diagnostics::new();
        let conf = plan(&ok, &mut d).unwrap_or_else(|| panic!("{d:?}")).slurm_conf;
        assert!(d.is_empty(), "{d:?}");
        let at = conf.find("SlurmdParameters=config_overrides\n").expect("written");
        assert!(at < conf.find("NodeName=").unwrap(), "before the nodes: {conf}");
        for (key, value, why) in [
            ("SlurmdParamters", "config_overrides", "not a slurm.conf parameter"),
            ("clustername", "other", "written by the provider"),
            ("NodeName", "x", "written by the provider"),
            ("TLSType", "tls/s2n", "of Slurm 24.05 and later, not of 22.05"),
            ("SchedulerParameters", "bf_continue # comment", "one word"),
            ("SchedulerParameters", "", "one word"),
        ] {
            let mut bad = spec("22.05", vec![h100(2)]);
            bad.custom_settings = [(key.to_owned(), value.to_owned())].into();
            let mut d = Diagnostics::new();
            assert!(plan(&bad, &mut d).is_none(), "{key}={value:?} planned");
            let e = d.iter().find(|x| x.summary == "Invalid Slurm setting").unwrap_or_else(|| panic!("{key}: {d:?}"));
            assert!(e.detail.contains(why), "{key}: {}", e.detail);
            assert_eq!(e.path.as_ref().map(|p| p.to_string()), Some(format!("custom_settings[\"{key}\"]")), "{key}");
        }
        // Names are read without case, and a parameter that came later is taken from its release on.
        let mut later = spec("24.11", vec![h100(2)]);
        later.custom_settings = [("tlstype".to_owned(), "tls/s2n".to_owned())].into();
        assert!(plan(&later, &mut Diagnostics::new()).is_some());
    }
}
