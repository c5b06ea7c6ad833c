//! What every cloud's Kubernetes node pool shares, naming no cloud: the in-cluster half a cloud's expander
//! gives the planner, the node label the pool's jobs select, taints as the APIs spell them, tolerations, and
//! the NVIDIA Network Operator's `NicClusterPolicy` for clouds whose RDMA NICs are NVIDIA's (vendor 15b3).

use std::collections::{BTreeMap, BTreeSet};

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

/// A taint as (key, value, effect), the effect as the configuration writes it (`NoSchedule`); an empty
/// value is none.
pub type LiveTaint = (String, String, String);

/// A `taint` block of a pool's state.
pub fn taint_block((key, value, effect): LiveTaint) -> crate::framework::Value {
    use crate::framework::Value;
    Value::object([
        ("key", Value::from(key)),
        ("value", if value.is_empty() { Value::Null } else { Value::from(value) }),
        ("effect", Value::from(effect)),
    ])
}

/// `key=value:Effect` (AKS's form) as a taint.
pub fn parse_taint(t: &str) -> Option<LiveTaint> {
    let (kv, effect) = t.rsplit_once(':')?;
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    Some((key.to_owned(), value.to_owned(), effect.to_owned()))
}

/// The labels a configuration sets of those a pool's nodes carry: without the pool's own reserved keys.
pub fn user_labels(live: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    live.iter().filter(|(k, _)| !reserved_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// A pool's state with the labels and taints its nodes carry as the cloud reports them: `node_labels`
/// whole, `labels` the user's part of them (null kept when there are none), `taint` when the set differs.
pub fn with_live_labels_and_taints(
    state: &crate::framework::Value,
    labels: &BTreeMap<String, String>,
    taints: BTreeSet<LiveTaint>,
) -> crate::framework::Value {
    use crate::clouds::shared::with_attr;
    use crate::framework::Value;
    let text = |m: &BTreeMap<String, String>| Value::Map(m.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect());
    let mut out = state.clone();
    if state.get("node_labels").as_map().is_some() {
        out = with_attr(&out, "node_labels", text(labels));
    }
    let user = user_labels(labels);
    if !(user.is_empty() && state.get("labels").is_null()) {
        out = with_attr(&out, "labels", text(&user));
    }
    let known: BTreeSet<LiveTaint> = state
        .get("taint")
        .as_list()
        .unwrap_or_default()
        .iter()
        .map(|t| {
            let s = |k: &str| t.get(k).as_str().unwrap_or_default().to_owned();
            (s("key"), s("value"), s("effect"))
        })
        .collect();
    if taints != known {
        out = with_attr(&out, "taint", Value::list(taints.into_iter().map(taint_block)));
    }
    out
}

/// `1.33` or `1.33.2` as (1, 33).
pub fn minor_version(v: &str) -> Option<(u32, u32)> {
    let mut parts = v.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Kubernetes' version skew policy for a node of `pool` under a control plane of `cluster`: the kubelet
/// may not be newer than the API server, and at most three minor versions older. The refusal's detail
/// when it breaks it.
pub fn version_skew(pool: (u32, u32), cluster: (u32, u32)) -> Option<String> {
    let (p, c) = (pool, cluster);
    let oldest = c.1.saturating_sub(3);
    if p.0 != c.0 || p.1 > c.1 {
        return Some(format!(
            "kubernetes_version {}.{} is newer than the cluster's control plane {}.{}: a kubelet may not be newer than its API server \
             (Kubernetes' version skew policy). Use {}.{} or older (down to {}.{}), or upgrade the cluster first.",
            p.0, p.1, c.0, c.1, c.0, c.1, c.0, oldest
        ));
    }
    if p.1 < oldest {
        return Some(format!(
            "kubernetes_version {}.{} is more than three minor versions older than the cluster's control plane {}.{} (Kubernetes' \
             version skew policy allows {}.{} to {}.{}). Use one of those, or leave kubernetes_version out for the cluster's.",
            p.0, p.1, c.0, c.1, c.0, oldest, c.0, c.1
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Value;

    fn state(labels: Value, taints: Vec<Value>) -> Value {
        Value::object([("labels", labels), ("node_labels", Value::Map(BTreeMap::new())), ("taint", Value::list(taints))])
    }

    #[test]
    fn a_refresh_shows_labels_and_taints_changed_outside_and_nothing_else() {
        let ours = BTreeMap::from([(NODE_LABEL.to_owned(), "gpu".to_owned())]);
        let taint = taint_block(("nvidia.com/gpu".into(), "present".into(), "NoSchedule".into()));
        // Only the pool's own label, the taint as configured: labels stays null, the taint as it was.
        let s = state(Value::Null, vec![taint.clone()]);
        let live = BTreeSet::from([parse_taint("nvidia.com/gpu=present:NoSchedule").unwrap()]);
        let out = with_live_labels_and_taints(&s, &ours, live);
        assert!(out.get("labels").is_null());
        assert_eq!(out.get("taint"), s.get("taint"));
        assert_eq!(out.get("node_labels").get(NODE_LABEL).as_str(), Some("gpu"));
        // A label added and the taint removed outside: both show.
        let mut more = ours.clone();
        more.insert("example.com/team".into(), "other".into());
        let out = with_live_labels_and_taints(&s, &more, BTreeSet::new());
        assert_eq!(out.get("labels").get("example.com/team").as_str(), Some("other"));
        assert!(out.get("labels").get(NODE_LABEL).is_null(), "the pool's own label is not the user's");
        assert_eq!(out.get("taint").as_list().map(|l| l.len()), Some(0));
        // A taint without a value, in AKS's form.
        assert_eq!(parse_taint("dedicated:NoExecute"), Some(("dedicated".into(), String::new(), "NoExecute".into())));
        assert_eq!(parse_taint("no-effect"), None);
    }

    #[test]
    fn the_version_skew_policy() {
        assert_eq!(minor_version("1.33.2"), Some((1, 33)));
        assert_eq!(minor_version("v1.31"), Some((1, 31)));
        assert_eq!(minor_version("latest"), None);
        assert_eq!(version_skew((1, 33), (1, 33)), None);
        assert_eq!(version_skew((1, 30), (1, 33)), None);
        assert!(version_skew((1, 34), (1, 33)).unwrap().contains("newer than the cluster's control plane 1.33"));
        assert!(version_skew((1, 29), (1, 33)).unwrap().contains("allows 1.30 to 1.33"));
    }
}
