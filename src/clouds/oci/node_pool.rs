//! OKE GPU workers with RDMA: managed OKE node pools cannot join a cluster network or a compute cluster
//! (`NodePoolPlacementConfigDetails` names neither), so the pool is self-managed nodes: the instance
//! configuration and cluster network (or compute cluster) an `hpc_gpu_cluster` makes, booting an OKE image
//! whose cloud-init runs `oke-install.sh` with the cluster's API endpoint and CA, read from the cluster at
//! apply. The cluster is only read. The in-cluster half is the NVIDIA Network Operator's `NicClusterPolicy`
//! over the RoCE ports, and the RDMA topology labels OKE sets on nodes of a dedicated capacity pool.

use std::collections::BTreeMap;

use crate::clouds::kubernetes::{InCluster, network_operator, taint_string};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{Defaults, NodePoolSpec, Piece};

fn cluster_ocid(id: &str) -> bool {
    id.starts_with("ocid1.cluster.") && id.split('.').count() >= 5 && id.rsplit('.').next().is_some_and(|u| !u.is_empty())
}

pub fn fits(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    if !cluster_ocid(&spec.kubernetes_cluster) {
        diags.error_at(
            AttributePath::attr("kubernetes_cluster"),
            "Invalid OKE cluster id",
            format!(
                "{:?} is not an OKE cluster's OCID: ocid1.cluster.<realm>.<region>.<unique id> (oci_containerengine_cluster.<x>.id).",
                spec.kubernetes_cluster
            ),
        );
        ok = false;
    }
    if spec.autoscaling.is_some() {
        diags.error_at(
            AttributePath::attr("autoscaling"),
            "Autoscaling self-managed OKE nodes",
            "RDMA workers on OKE are self-managed nodes in a cluster network or compute cluster, which the Kubernetes cluster autoscaler \
             does not scale: remove autoscaling and change node_count to grow or shrink the pool.",
        );
        ok = false;
    }
    if spec.nodes.image.is_none() {
        diags.error_at(
            AttributePath::attr("image"),
            "Missing OKE worker image",
            "Self-managed OKE nodes boot an image that carries /etc/oke/oke-install.sh for the cluster's Kubernetes version (an Oracle \
             Linux or Ubuntu OKE image, with the GPU driver and the RDMA packages for GPU shapes): set image to its OCID.",
        );
        ok = false;
    }
    if spec.node_role.is_some() {
        diags.error_at(
            AttributePath::attr("node_role"),
            "Node role not used on OKE",
            "Self-managed OKE nodes join as members of a dynamic group the cluster's policy lets join (CLUSTER_JOIN): remove node_role.",
        );
        ok = false;
    }
    ok
}

pub fn node_pool(spec: &NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
    let c = &spec.nodes;
    let mut out = vec![
        Piece::new("oci_containerengine_cluster", spec.kubernetes_cluster.as_str())
            .set("read", "found, never created or changed: its API endpoint and CA certificate for the nodes' cloud-init")
            .set(
                "requires",
                "a policy statement: Allow dynamic-group <the pool's instances> to {CLUSTER_JOIN} in compartment <the cluster's>",
            ),
    ];
    let label_arg = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let taint_arg = spec.taints.iter().map(taint_string).collect::<Vec<_>>().join(",");
    let mut kubelet = format!("--node-labels={label_arg}");
    if !taint_arg.is_empty() {
        kubelet.push_str(&format!(" --register-with-taints={taint_arg}"));
    }
    let join = format!(
        "oke-install.sh --apiserver-endpoint <the cluster's private endpoint> --kubelet-ca-cert <its CA> --kubelet-extra-args \"{kubelet}\"{}",
        c.user_data_summary().map(|s| format!(", then the user data ({s})")).unwrap_or_default()
    );
    out.extend(
        super::cluster(c, d)
            .into_iter()
            .map(|p| if p.kind == "oci_core_instance_configuration" { p.set("metadata.user_data", &join) } else { p }),
    );
    out
}

pub fn kubernetes(spec: &NodePoolSpec) -> InCluster {
    // OKE labels nodes of a dedicated capacity pool with a capacity topology by their RDMA network's tiers.
    let levels = [
        "oci.oraclecloud.com/rdma.hpc_island_id",
        "oci.oraclecloud.com/rdma.network_block_id",
        "oci.oraclecloud.com/rdma.local_block_id",
        "kubernetes.io/hostname",
    ];
    network_operator(spec, "ether", &levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ocids() {
        assert!(cluster_ocid("ocid1.cluster.oc1.iad.aaaaaaaexample"));
        assert!(!cluster_ocid("ocid1.instance.oc1.iad.aaaa"));
        assert!(!cluster_ocid("my-cluster"));
    }
}
