//! What makes a rack-scale NVLink domain (GB200/GB300 NVL72) usable once the nodes exist: the Slurm
//! block topology (one block per domain), Kubernetes node labels naming each node's domain, and the NCCL
//! settings for NVLink across nodes. PURE: the planned domains in, text and maps out.
//!
//! Every cloud's backend places domain k's nodes in domain k's own piece (an UltraServer's capacity
//! reservation, a compact placement policy with GPU topology 1x72, a GPU memory cluster), so the planned
//! layout is the one the cloud builds; on Azure, where no API picks a rack, the scale set's VMs are in
//! racks Azure chooses and the boot-time self-check logs the domain each node joined.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::{ClusterSpec, NvlinkDomainPlan};
use crate::nodes::{self, hostlist};

/// The label every node of a cluster gets with its NVLink domain's name (the cluster's own label is
/// [`super::nccl::NODE_LABEL`]).
pub const DOMAIN_LABEL: &str = "hpc-platform/nvlink-domain";

/// Slurm's `topology.conf` for the block plugin: one block per NVLink domain, and the block size. `None`
/// for a node type whose NVLink stays inside the node.
pub fn topology_conf(spec: &ClusterSpec) -> Option<String> {
    let per = spec.nvlink_domain_nodes()?;
    let domains = spec.nvlink_domains();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# topology.conf for Slurm's topology/block plugin (slurm.conf: TopologyPlugin=topology/block), from terraform-provider-hpc."
    );
    let _ = writeln!(
        s,
        "# {}: {} NVLink domain(s) of {per} nodes ({} GPUs each); one block per domain.",
        spec.fabric.sku.name,
        domains.len(),
        spec.fabric.sku.nvlink_domain_gpus()
    );
    for d in &domains {
        let _ = writeln!(s, "BlockName={} Nodes={}", d.name, hostlist(&spec.name, &d.nodes));
    }
    let _ = writeln!(s, "BlockSizes={per}");
    Some(s)
}

/// The `slurm.conf` lines the cluster needs besides its node definitions: the block topology plugin.
pub fn slurm_conf(spec: &ClusterSpec) -> Option<String> {
    spec.nvlink_domain_nodes()?;
    Some(format!(
        "# slurm.conf lines for {} (terraform-provider-hpc); topology.conf is slurm_topology_conf.\n\
         TopologyPlugin=topology/block\n\
         # Jobs keep to whole domains with sbatch --segment=<nodes per domain or a divisor of it>.\n\
         NodeName={} Gres=gpu:{}\n",
        spec.name,
        hostlist(&spec.name, &(0..spec.node_count).collect::<Vec<_>>()),
        spec.fabric.sku.gpu_count
    ))
}

/// Labels per node for Kubernetes: the cluster label, and for rack-scale node types the domain's name.
pub fn node_labels(spec: &ClusterSpec) -> BTreeMap<String, BTreeMap<String, String>> {
    let per = spec.nvlink_domain_nodes();
    (0..spec.node_count)
        .map(|i| {
            let mut labels = BTreeMap::from([(super::nccl::NODE_LABEL.to_owned(), spec.name.clone())]);
            if let Some(per) = per {
                labels.insert(DOMAIN_LABEL.to_owned(), nodes::domain_name(&spec.name, nodes::domain_of(i, per)));
            }
            (nodes::node_name(&spec.name, i), labels)
        })
        .collect()
}

/// NCCL settings for NVLink across the nodes of a domain (multi-node NVLink, NCCL 2.23 and later): MNNVL
/// on, which needs NCCL's cuMem allocator. Added to the cloud's own environment for rack-scale types.
pub fn mnnvl_environment() -> [(&'static str, &'static str); 2] {
    [("NCCL_MNNVL_ENABLE", "1"), ("NCCL_CUMEM_ENABLE", "1")]
}

/// The domains as `hpc_gpu_cluster.nvlink_domains` lists them: name, node names, GPUs.
pub fn domain_rows(spec: &ClusterSpec) -> Vec<(String, Vec<String>, u32)> {
    spec.nvlink_domains()
        .into_iter()
        .map(|NvlinkDomainPlan { name, nodes, .. }| {
            let gpus = nodes.len() as u32 * spec.fabric.sku.gpu_count;
            (name, nodes.iter().map(|i| crate::nodes::node_name(&spec.name, *i)).collect(), gpus)
        })
        .collect()
}
