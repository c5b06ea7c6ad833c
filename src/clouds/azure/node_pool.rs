//! An AKS agent pool of GPU nodes (azure-mgmt-containerservice, `agentPools`): one virtual machine scale
//! set, in the fabric's proximity placement group and subnet, with the GPU driver left to the NVIDIA
//! operators (`gpuProfile.driver = None`). InfiniBand connects the VMs of one scale set only, so a pool is
//! one InfiniBand fabric and is never split. The in-cluster half is the NVIDIA Network Operator's
//! `NicClusterPolicy` with the RDMA shared device plugin over the InfiniBand ports.

use std::collections::BTreeMap;

use crate::catalog::{Fabric, limits::AZURE_VMSS_MAX_IB_NODES};
use crate::clouds::kubernetes::{InCluster, NODE_LABEL, network_operator, pool_tags, taint_string};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Defaults, NodeAmount, NodePoolSpec, Piece, Placement, tag_string};

/// `/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name>`.
fn managed_cluster_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('/').collect();
    parts.len() == 9
        && parts[0].is_empty()
        && parts[1].eq_ignore_ascii_case("subscriptions")
        && parts[3].eq_ignore_ascii_case("resourceGroups")
        && parts[5].eq_ignore_ascii_case("providers")
        && parts[6].eq_ignore_ascii_case("Microsoft.ContainerService")
        && parts[7].eq_ignore_ascii_case("managedClusters")
        && [2, 4, 8].iter().all(|i| !parts[*i].is_empty())
}

/// Linux agent pool names: 1-12 lowercase letters and digits, starting with a letter.
fn agent_pool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b.len() <= 12 && b[0].is_ascii_lowercase() && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

pub fn fits(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let c = &spec.nodes;
    if !agent_pool_name(&c.name) {
        diags.error_at(
            AttributePath::attr("name"),
            "Invalid AKS agent pool name",
            format!(
                "{:?} cannot name an AKS Linux agent pool: 1 to 12 lowercase letters and digits, starting with a letter (e.g. \"gpu1\").",
                c.name
            ),
        );
        ok = false;
    }
    if !managed_cluster_id(&spec.kubernetes_cluster) {
        diags.error_at(
            AttributePath::attr("kubernetes_cluster"),
            "Invalid AKS cluster id",
            format!(
                "{:?} is not an AKS cluster's resource id: /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<name> (azurerm_kubernetes_cluster.<x>.id).",
                spec.kubernetes_cluster
            ),
        );
        ok = false;
    }
    if spec.node_role.is_some() {
        diags.error_at(
            AttributePath::attr("node_role"),
            "Node role not used on AKS",
            "An AKS agent pool's nodes run as the cluster's kubelet identity: remove node_role.",
        );
        ok = false;
    }
    for (attr, set, why) in [
        ("image", c.image.is_some(), "AKS boots its own node image for the cluster's version"),
        ("ssh_public_key", c.ssh_public_key.is_some(), "AKS nodes take the key of the cluster's Linux profile"),
        ("user_data", c.user_data.is_some(), "AKS agent pools take no user data"),
    ] {
        if set {
            diags.error_at(AttributePath::attr(attr), "Not used on AKS", format!("{why}: remove {attr}."));
            ok = false;
        }
    }
    let largest = spec.autoscaling.map_or(c.node_count, |(_, max)| max);
    if c.fabric.sku.fabric == Fabric::InfiniBand && largest > AZURE_VMSS_MAX_IB_NODES {
        diags.error_at(
            AttributePath::attr(if spec.autoscaling.is_some() { "autoscaling" } else { "node_count" }),
            "Pool larger than one InfiniBand fabric",
            format!(
                "An AKS agent pool is one scale set, and InfiniBand joins at most {AZURE_VMSS_MAX_IB_NODES} VMs of one scale set; this pool \
                 could hold {largest}. Keep it to {AZURE_VMSS_MAX_IB_NODES} nodes and make a second pool for more: jobs must then keep \
                 to one pool (its InfiniBand does not reach the other)."
            ),
        );
        ok = false;
    }
    ok
}

pub fn node_pool(spec: &NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
    let c = &spec.nodes;
    let n = &c.name;
    let f = &c.fabric;
    let tags = tag_string(&pool_tags(spec, d));
    let taints: Vec<String> = spec.taints.iter().map(taint_string).collect();
    let pool = Piece::new("azurerm_kubernetes_cluster_node_pool", n.as_str())
        .set("kubernetes_cluster_id", &spec.kubernetes_cluster)
        .set("vm_size", f.sku.name)
        .set("node_count", c.node_count)
        .set("auto_scaling_enabled", spec.autoscaling.is_some())
        .set_opt("min_count", spec.autoscaling.map(|(min, _)| min))
        .set_opt("max_count", spec.autoscaling.map(|(_, max)| max))
        .set_opt("orchestrator_version", spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}")))
        .set("os_sku", "Ubuntu")
        .set("vnet_subnet_id", c.network_label("subnet"))
        .set("requires", "the fabric's virtual network is the AKS cluster's (Azure CNI), or peered with it")
        .set(
            "proximity_placement_group_id",
            if f.placement == Placement::Cluster { format!("azurerm_proximity_placement_group.{}-ppg", f.name) } else { "(none)".into() },
        )
        .set("gpu_driver", "None (the NVIDIA GPU Operator installs it)")
        .set("priority", if c.capacity == CapacityType::Spot { "Spot, eviction_policy = Delete" } else { "Regular" })
        .set_opt("capacity_reservation_group_id", c.reservation_id.as_deref())
        .set("node_labels", tag_string(labels))
        .set("node_taints", if taints.is_empty() { "(none)".into() } else { taints.join(", ") })
        .set(
            "upgrade_settings",
            format!(
                "max_surge = 0, max_unavailable = {}",
                match c.day2.batch_size {
                    NodeAmount::Count(k) => k.to_string(),
                    NodeAmount::Percent(p) => format!("{p}%"),
                }
            ),
        )
        .set("tags", &tags);
    vec![pool]
}

pub fn kubernetes(spec: &NodePoolSpec) -> InCluster {
    // No Azure API names a VM's rack or switch: the pool (one scale set, one InfiniBand fabric) is the level.
    network_operator(spec, "infiniband", &[NODE_LABEL, "kubernetes.io/hostname"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names() {
        assert!(managed_cluster_id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/ml"));
        assert!(!managed_cluster_id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/ml"));
        assert!(agent_pool_name("gpu1"));
        assert!(!agent_pool_name("gpu-pool"));
        assert!(!agent_pool_name("averylongpoolname"));
    }
}
