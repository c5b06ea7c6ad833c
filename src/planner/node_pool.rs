//! A GPU node pool joined to an existing Kubernetes cluster (`hpc_gpu_node_pool`, issue 37): the rules every
//! cloud shares (the Kubernetes cluster's reference, version, autoscaling bounds, labels and taints), the
//! cloud's own refusals and pieces (`clouds::*::node_pool`), and the in-cluster half as text: the labels
//! Kueue's topology-aware scheduling reads and its `Topology`, the cloud's RDMA device plugin or operator,
//! and an NCCL test Job. PURE: no IO; the Kubernetes cluster is never read or changed here.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::clouds;
use crate::framework::{AttributePath, Diagnostics, one_of};
use crate::model::{Defaults, NodePoolSpec, Piece, Taint};
use crate::nodes::node_names;

pub use crate::clouds::kubernetes::{InCluster, NODE_LABEL as POOL_LABEL, reserved_key};

pub struct NodePoolPlan {
    pub pieces: Vec<Piece>,
    /// Every node's labels: the user's, the pool's and the cloud's placement labels.
    pub node_labels: BTreeMap<String, String>,
    pub in_cluster: InCluster,
    /// Kueue's `Topology` object over `in_cluster.topology_levels`.
    pub kueue_topology: String,
    /// The NCCL all-reduce Job across the pool's nodes, or why there is none.
    pub nccl_test: Result<String, String>,
}

/// Kubernetes label name: at most 63 characters, alphanumeric at both ends, `-`, `_`, `.` between.
fn label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS subdomain (a label key's prefix): at most 253 characters of dot-separated lowercase labels.
fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|p| {
            let b = p.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// A label or taint key: `[prefix/]name`.
pub fn qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && label_name(name),
        None => label_name(key),
    }
}

/// The rules every cloud's pool follows; false after an error.
fn check(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let count = spec.nodes.node_count;
    if let Some((min, max)) = spec.autoscaling
        && (min > max || count < min || count > max)
    {
        diags.error_at(
            AttributePath::attr("autoscaling"),
            "Node count outside the autoscaling bounds",
            format!(
                "min_count {min} <= node_count {count} <= max_count {max} must hold: node_count is the size the pool starts at and the \
                     autoscaler keeps it between the two. Change node_count or the bounds."
            ),
        );
        ok = false;
    }
    for (key, value) in &spec.labels {
        let path = AttributePath::attr("labels").and_key(key);
        if !qualified_name(key) {
            diags.error_at(
                path,
                "Invalid label key",
                format!(
                    "{key:?} is not a Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 letters, \
                     digits, `-`, `_` or `.`, starting and ending with a letter or digit (e.g. `example.com/team`)."
                ),
            );
            ok = false;
        } else if reserved_key(key) {
            diags.error_at(
                path,
                "Reserved label key",
                format!(
                    "{key:?} is in a namespace a node may not label itself with (kubernetes.io and k8s.io, except kubelet.kubernetes.io and \
                     node.kubernetes.io), or in hpc-platform/, which this provider sets. Use a prefix of your own (e.g. example.com/)."
                ),
            );
            ok = false;
        }
        if !value.is_empty() && !label_name(value) {
            diags.error_at(
                AttributePath::attr("labels").and_key(key),
                "Invalid label value",
                format!("{value:?} is not a Kubernetes label value: empty, or at most 63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit."),
            );
            ok = false;
        }
    }
    for (i, Taint { key, value, .. }) in spec.taints.iter().enumerate() {
        if !qualified_name(key) {
            diags.error_at(
                AttributePath::attr("taint").and_index(i).and_attr("key"),
                "Invalid taint key",
                format!("{key:?} is not a Kubernetes taint key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 letters, digits, `-`, `_` or `.`."),
            );
            ok = false;
        }
        if !value.is_empty() && !label_name(value) {
            diags.error_at(
                AttributePath::attr("taint").and_index(i).and_attr("value"),
                "Invalid taint value",
                format!("{value:?} is not a Kubernetes taint value: empty, or at most 63 letters, digits, `-`, `_` or `.`."),
            );
            ok = false;
        }
    }
    let sku = spec.nodes.fabric.sku;
    if sku.nvlink_domain.is_some() {
        let types: Vec<&str> = crate::catalog::skus(spec.nodes.fabric.cloud)
            .filter(|s| s.nvlink_domain.is_none() && s.gpu_count >= 8)
            .map(|s| s.name)
            .collect();
        diags.error_at(
            AttributePath::attr("fabric"),
            "Rack-scale node type in a node pool",
            format!(
                "{} is a rack-scale node type (NVLink across {} nodes). Node pools of rack-scale types are not supported yet: each NVLink \
                 domain needs its own reservation and placement, which an hpc_gpu_cluster makes. Use an hpc_gpu_cluster for these nodes, \
                 or a fabric with one of {}.",
                sku.name,
                sku.nvlink_domain.map_or(0, |d| d.nodes),
                one_of(&types)
            ),
        );
        ok = false;
    }
    ok
}

/// A pool's plan: the rules, the cloud's pieces and the in-cluster half. None after an error.
pub fn plan(spec: &NodePoolSpec, defaults: &Defaults, diags: &mut Diagnostics) -> Option<NodePoolPlan> {
    let cloud = spec.nodes.fabric.cloud;
    let expander = clouds::expander(cloud);
    let mut ok = check(spec, diags);
    ok &= expander.node_pool_fits(spec, diags);
    if !ok {
        return None;
    }
    let in_cluster = expander.kubernetes(spec);
    let mut node_labels = spec.labels.clone();
    node_labels.extend(in_cluster.labels.clone());
    node_labels.insert(POOL_LABEL.to_owned(), spec.nodes.name.clone());
    let pieces = expander.node_pool(spec, defaults, &node_labels);
    let kueue_topology = kueue_topology(&spec.nodes.name, &in_cluster.topology_levels);
    let name = format!("{}-nccl", spec.nodes.name);
    let nodes = node_names(&spec.nodes.name, spec.nodes.node_count);
    let env = super::node_environment(spec.nodes.fabric.sku);
    let job = super::nccl::NcclJob {
        name: &name,
        nodes: &nodes,
        cluster: &spec.nodes.name,
        gpus_per_node: spec.nodes.fabric.sku.gpu_count,
        env: &env,
        expected_busbw_gbs: crate::catalog::expected_busbw(spec.nodes.fabric.sku).map(|b| b.gbytes_per_sec),
        segment: None,
        partition: None,
        tolerate: &spec.taints,
    };
    let nccl_test = super::nccl::kubernetes_job(&job, None, &in_cluster.device_resources);
    Some(NodePoolPlan { pieces, node_labels, in_cluster, kueue_topology, nccl_test })
}

/// Kueue's `Topology` (kueue.x-k8s.io/v1beta2, Kueue 0.15 and later) over the pool's levels, widest first.
pub fn kueue_topology(pool: &str, levels: &[String]) -> String {
    let mut y = String::new();
    y.push_str("# Kueue topology-aware scheduling over this pool's node labels, widest first (Kueue 0.15 and later;\n");
    y.push_str("# on Kueue 0.14 write apiVersion kueue.x-k8s.io/v1beta1). A ResourceFlavor names it in spec.topologyName.\n");
    y.push_str("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n");
    let _ = writeln!(y, "  name: {}", serde_json::to_string(pool).unwrap_or_default());
    y.push_str("spec:\n  levels:\n");
    for level in levels {
        let _ = writeln!(y, "    - nodeLabel: {}", serde_json::to_string(level).unwrap_or_default());
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_follow_kubernetes_rules() {
        for good in ["team", "example.com/team", "a.b-c/x_y.z", "node.kubernetes.io/pool"] {
            assert!(qualified_name(good), "{good}");
        }
        for bad in ["", "-team", "team-", "Example.com/team", "a/b/c", &"x".repeat(64), "exa mple.com/x"] {
            assert!(!qualified_name(bad), "{bad}");
        }
        assert!(reserved_key("kubernetes.io/hostname"));
        assert!(reserved_key("node-role.kubernetes.io/gpu"));
        assert!(reserved_key("hpc-platform/cluster"));
        assert!(!reserved_key("node.kubernetes.io/pool"));
        assert!(!reserved_key("example.com/team"));
    }

    #[test]
    fn kueue_topology_lists_levels_widest_first() {
        let y = kueue_topology("gpu", &["a/block".into(), "kubernetes.io/hostname".into()]);
        assert!(y.contains("kind: Topology\n"));
        let block = y.find("\"a/block\"").unwrap();
        let host = y.find("\"kubernetes.io/hostname\"").unwrap();
        assert!(block < host);
    }
}
