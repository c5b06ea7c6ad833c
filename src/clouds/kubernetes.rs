//! What every cloud's Kubernetes node pool shares, naming no cloud: the in-cluster half a cloud's expander
//! gives the planner, the node label the pool's jobs select, taints as the APIs spell them, tolerations, and
//! the NVIDIA Network Operator's `NicClusterPolicy` for clouds whose RDMA NICs are NVIDIA's (vendor 15b3).

use std::collections::BTreeMap;

use crate::model::{NodePoolSpec, Taint, TaintEffect};

/// The label every node of a cluster or pool carries with its name; the NCCL test Job selects it.
pub const NODE_LABEL: &str = "hpc-platform/cluster";

/// The label keys a kubelet may not set on its own node (the NodeRestriction admission plugin), and ours.
pub fn reserved_key(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else { return false };
    let kubernetes = ["kubernetes.io", "k8s.io"].iter().any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")));
    let allowed = ["kubelet.kubernetes.io", "node.kubernetes.io"].contains(&prefix);
    (kubernetes && !allowed) || prefix == "hpc-platform"
}

/// What the cloud's Kubernetes side of a pool needs, from the cloud's expander.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InCluster {
    /// The node labels from the widest placement to the host, which the cloud (or this pool) sets on every
    /// node: the levels of Kueue's `Topology`.
    pub topology_levels: Vec<String>,
    /// Labels this pool sets on every node besides the user's and [`NODE_LABEL`].
    pub labels: BTreeMap<String, String>,
    /// The cloud's RDMA device plugin or operator: manifests or Helm values, with how to apply them.
    pub device_plugin: String,
    /// The extended resources each pod of a job across the pool requests (the RDMA devices).
    pub device_resources: BTreeMap<String, u32>,
}

/// Taints as most APIs write them, `key=value:Effect`.
pub fn taint_string(t: &Taint) -> String {
    if t.value.is_empty() { format!("{}:{}", t.key, t.effect.as_str()) } else { format!("{}={}:{}", t.key, t.value, t.effect.as_str()) }
}

/// EKS and GKE spell the effects in capitals: `NO_SCHEDULE`.
pub fn effect_constant(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NO_SCHEDULE",
        TaintEffect::PreferNoSchedule => "PREFER_NO_SCHEDULE",
        TaintEffect::NoExecute => "NO_EXECUTE",
    }
}

/// Tolerations, in a YAML list indented by `indent`, for every taint of the pool and the GPU taint the
/// clouds' GPU pools commonly carry.
pub fn tolerations_yaml(spec: &NodePoolSpec, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut keys: Vec<(&str, &str)> = vec![("nvidia.com/gpu", "NoSchedule")];
    for t in &spec.taints {
        if !keys.contains(&(t.key.as_str(), t.effect.as_str())) {
            keys.push((t.key.as_str(), t.effect.as_str()));
        }
    }
    keys.iter()
        .map(|(k, e)| {
            format!("{pad}- key: {}\n{pad}  operator: Exists\n{pad}  effect: {e}\n", serde_json::to_string(k).unwrap_or_default())
        })
        .collect()
}

/// The RDMA shared device plugin's resource on AKS and OKE nodes, under the `rdma/` prefix.
pub const RDMA_RESOURCE: &str = "rdma_shared_device";

/// The NVIDIA Network Operator's `NicClusterPolicy` running the RDMA shared device plugin on the pool's
/// nodes over the NVIDIA (vendor 15b3) ports of `link_type` (`infiniband`, `ether`).
pub fn nic_cluster_policy(spec: &NodePoolSpec, link_type: &str) -> String {
    let pool = serde_json::to_string(&spec.nodes.name).unwrap_or_default();
    let config = format!(
        "{{\"configList\": [{{\"resourceName\": \"{RDMA_RESOURCE}\", \"rdmaHcaMax\": 64, \"selectors\": {{\"vendors\": [\"15b3\"], \"linkTypes\": [\"{link_type}\"]}}}}]}}"
    );
    let mut y = String::new();
    y.push_str("# The NVIDIA Network Operator's NicClusterPolicy: the RDMA shared device plugin on this pool's nodes makes\n");
    y.push_str(&format!("# their {link_type} RDMA ports the resource rdma/{RDMA_RESOURCE}, which each pod of a job requests once.\n"));
    y.push_str("# Install the operator first (helm upgrade --install network-operator nvidia/network-operator\n");
    y.push_str("#   -n nvidia-network-operator --create-namespace), and the GPU Operator with driver.enabled=true.\n");
    y.push_str("# Set version to your Network Operator release's.\n");
    y.push_str("apiVersion: mellanox.com/v1alpha1\nkind: NicClusterPolicy\nmetadata:\n  name: nic-cluster-policy\nspec:\n");
    y.push_str("  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n");
    y.push_str(&format!(
        "        - matchExpressions:\n            - key: {NODE_LABEL}\n              operator: In\n              values: [{pool}]\n"
    ));
    y.push_str("  rdmaSharedDevicePlugin:\n    image: k8s-rdma-shared-dev-plugin\n    repository: nvcr.io/nvidia/mellanox\n");
    y.push_str("    version: network-operator-v25.7.0\n");
    y.push_str(&format!("    config: {}\n", serde_json::to_string(&config).unwrap_or_default()));
    y
}

/// The tags a pool's pieces carry: the provider's and the pool's, the pool's name and its fabric's.
pub fn pool_tags(spec: &NodePoolSpec, d: &crate::model::Defaults) -> BTreeMap<String, String> {
    d.tags(&spec.nodes.tags, &[("hpc:node-pool", &spec.nodes.name), ("hpc:fabric", &spec.nodes.fabric.name)])
}

/// The in-cluster half where the NVIDIA Network Operator runs the RDMA shared device plugin over the
/// nodes' `link_type` ports (none where the node type has no RDMA NICs), with the cloud's topology `levels`.
pub fn network_operator(spec: &NodePoolSpec, link_type: &str, levels: &[&str]) -> InCluster {
    let sku = spec.nodes.fabric.sku;
    let rdma = sku.rdma_interfaces.unwrap_or(0) > 0;
    InCluster {
        topology_levels: levels.iter().map(|l| (*l).to_owned()).collect(),
        labels: BTreeMap::new(),
        device_plugin: if rdma {
            nic_cluster_policy(spec, link_type)
        } else {
            format!("# {} has no RDMA NICs: no RDMA device plugin is needed; NCCL uses the node's Ethernet.\n", sku.name)
        },
        device_resources: if rdma { BTreeMap::from([(format!("rdma/{RDMA_RESOURCE}"), 1)]) } else { BTreeMap::new() },
    }
}
