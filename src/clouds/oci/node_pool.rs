//! OKE GPU workers with RDMA: managed OKE node pools cannot join a cluster network or a compute cluster
//! (`NodePoolPlacementConfigDetails` names neither), so the pool is self-managed nodes: the instance
//! configuration and cluster network (or compute cluster) an `hpc_gpu_cluster` makes, booting an OKE image
//! whose cloud-init runs `oke-install.sh` with the cluster's API endpoint and CA, read from the cluster at
//! apply. The cluster is only read. The in-cluster half is the NVIDIA Network Operator's `NicClusterPolicy`
//! over the RoCE ports, and the RDMA topology labels OKE sets on nodes of a dedicated capacity pool.

use std::collections::BTreeMap;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{Value as Json, json};

use super::api::{self, Oci, Service};
use super::backend::{self, fabric_place, import_id, name_of, no_fabric_id};
use super::cluster::{self, Location};
use crate::clouds::backend::{Backend, Change, ClusterFacts, ImportError, Imported, NodePoolBackend, Outcome, Step};
use crate::clouds::error::{CloudError, ErrorKind};
use crate::clouds::kubernetes::{InCluster, network_operator, taint_string};
use crate::clouds::shared::with_attr;
use crate::framework::{AttributePath, Context, Diagnostics, Value};
use crate::model::{Defaults, NodePoolSpec, Piece, Placement};
use crate::redact::Secret;

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

// ------------------------------------------------------------------------------------------ backend

/// The part of the nodes' user data that joins them to the cluster (a MIME part of this name, before the
/// user's own `user_data`).
const JOIN_FILE: &str = "hpc-oke-join.sh";

/// The OKE cluster, if it exists.
async fn oke_cluster(ctx: &Context, oci: &Oci, id: &str) -> Result<Option<Json>, CloudError> {
    oci.get(ctx, Service::ContainerEngine, &format!("/clusters/{id}")).await
}

/// What keeps the cluster from taking the pool's nodes: not there, or not ACTIVE.
fn cluster_refusals(spec: &NodePoolSpec, cluster: Option<&Json>) -> Vec<(&'static str, String, String)> {
    let id = &spec.kubernetes_cluster;
    match cluster {
        None => vec![(
            "kubernetes_cluster",
            "No such OKE cluster".to_owned(),
            format!("No OKE cluster {id}: name an existing cluster by its OCID (oci_containerengine_cluster.<x>.id)."),
        )],
        Some(c) if c["lifecycleState"].as_str().is_some_and(|s| s != "ACTIVE") => vec![(
            "kubernetes_cluster",
            "OKE cluster not active".to_owned(),
            format!(
                "OKE cluster {id} is {}: nodes can join only an ACTIVE cluster. Wait for it, or name another.",
                c["lifecycleState"].as_str().unwrap_or_default()
            ),
        )],
        Some(_) => Vec::new(),
    }
}

/// What a node needs to join: the API server's private address and the cluster's CA certificate (base64,
/// as the kubeconfig carries it).
#[derive(Debug, PartialEq)]
struct JoinFacts {
    endpoint: String,
    ca: String,
}

/// The CA of the first cluster in a kubeconfig (`certificate-authority-data`).
fn kubeconfig_ca(kubeconfig: &str) -> Option<String> {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data:"))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
}

/// Reads the cluster's private endpoint and, from a kubeconfig for it (CreateKubeconfig), its CA.
async fn join_facts(ctx: &Context, oci: &Oci, id: &str, cluster: &Json) -> Result<JoinFacts, CloudError> {
    let private = cluster["endpoints"]["privateEndpoint"].as_str().unwrap_or_default();
    let endpoint = private.rsplit_once(':').map_or(private, |(host, _)| host).to_owned();
    if endpoint.is_empty() {
        return Err(CloudError::other(format!(
            "OKE cluster {id} has no private API endpoint (a VCN-native cluster has one): self-managed nodes join through it"
        )));
    }
    let body = json!({"tokenVersion": "2.0.0", "endpoint": "PRIVATE_ENDPOINT"});
    let reply =
        oci.send(ctx, reqwest::Method::POST, Service::ContainerEngine, &format!("/clusters/{id}/kubeconfig/content"), Some(&body)).await?;
    if reply.status != 200 {
        return Err(reply.failure(&format!("reading the kubeconfig of OKE cluster {id}")));
    }
    let ca = kubeconfig_ca(reply.text.expose())
        .ok_or_else(|| CloudError::other(format!("the kubeconfig of OKE cluster {id} has no certificate-authority-data")))?;
    Ok(JoinFacts { endpoint, ca })
}

/// The node's join: OKE's `oke-install.sh` on the worker image, with the API server, its CA, and the pool's
/// labels and taints as the kubelet's registration arguments. Its comments say which cluster and version,
/// for an import.
fn join_script(spec: &NodePoolSpec, facts: &JoinFacts, labels: &BTreeMap<String, String>) -> String {
    let label_arg = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
    let taint_arg = spec.taints.iter().map(taint_string).collect::<Vec<_>>().join(",");
    let mut kubelet = format!("--node-labels={label_arg}");
    if !taint_arg.is_empty() {
        kubelet.push_str(&format!(" --register-with-taints={taint_arg}"));
    }
    let version = spec.kubernetes_version.map(|(a, b)| format!("\n# kubernetes_version: {a}.{b}")).unwrap_or_default();
    format!(
        "#!/bin/bash\n# Joins this node to OKE cluster {cluster} (hpc_gpu_node_pool {pool}).\n# kubernetes_cluster: {cluster}{version}\n\
         set -euo pipefail\nbash /etc/oke/oke-install.sh --apiserver-endpoint '{endpoint}' --kubelet-ca-cert '{ca}' \\\n  \
         --kubelet-extra-args '{kubelet}'\n",
        cluster = spec.kubernetes_cluster,
        pool = spec.nodes.name,
        endpoint = facts.endpoint,
        ca = facts.ca,
    )
}

/// The nodes as a cluster's: the pool's, with the join before the user's own user data.
fn worker_spec(spec: &NodePoolSpec, facts: &JoinFacts, labels: &BTreeMap<String, String>) -> crate::model::ClusterSpec {
    let mut nodes = spec.nodes.clone();
    let script = join_script(spec, facts, labels);
    let user = spec.nodes.user_data.as_ref().map(|u| u.expose_str());
    nodes.user_data = Some(Secret::new(crate::clouds::user_data::combined_with(&script, JOIN_FILE, "HPC-OKE", user)));
    nodes
}

/// Where the pool's nodes live, from its fabric reference (region and compartment in the fabric's id).
struct Site {
    region: String,
    compartment: String,
    zone: String,
    placement: Placement,
}

fn site(v: &Value) -> Option<Site> {
    let (region, compartment) = fabric_place(v)?;
    let fabric = v.get("fabric");
    let placement = fabric.get("placement").as_str().and_then(Placement::parse).unwrap_or(Placement::Cluster);
    Some(Site { region, compartment, zone: fabric.get("zone").as_str().unwrap_or_default().to_owned(), placement })
}

impl Site {
    fn at<'a>(&'a self, name: &'a str) -> Location<'a> {
        Location { compartment: &self.compartment, zone: &self.zone, name, placement: self.placement, per_domain: None }
    }
}

/// The pool's tags on every piece: the lifecycle's, and `hpc:cluster` (how the cluster code finds nodes).
fn worker_tags(tags: &BTreeMap<String, String>, name: &str) -> BTreeMap<String, String> {
    let mut out = tags.clone();
    out.insert("hpc:cluster".into(), name.to_owned());
    out
}

/// A pool's state with the nodes found: their count and GPUs. (Labels and taints are the kubelet's, set
/// when a node registers; no OCI API reports them.)
fn with_count(state: &Value, nodes: usize) -> Value {
    let per_node = state
        .get("instance_type")
        .as_str()
        .and_then(|t| crate::catalog::find_sku(crate::catalog::Cloud::Oci, t))
        .map_or(0, |s| i64::from(s.gpu_count));
    let out = with_attr(state, "node_count", Value::int(nodes as i64));
    with_attr(&out, "gpus_total", Value::int(nodes as i64 * per_node))
}

/// The values a join script says: `# kubernetes_cluster: <id>`, the labels and the taints.
fn parse_join(script: &str) -> (Option<String>, Option<String>, BTreeMap<String, String>, Vec<String>) {
    let comment = |key: &str| script.lines().find_map(|l| l.strip_prefix(&format!("# {key}: "))).map(str::to_owned);
    let arg = |flag: &str| {
        script.split_whitespace().find_map(|w| w.trim_start_matches('\'').strip_prefix(flag)).map(|v| v.trim_end_matches('\'').to_owned())
    };
    let labels = arg("--node-labels=")
        .map(|l| l.split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
        .unwrap_or_default();
    let taints = arg("--register-with-taints=").map(|t| t.split(',').map(str::to_owned).collect()).unwrap_or_default();
    (comment("kubernetes_cluster"), comment("kubernetes_version"), labels, taints)
}

/// The user data of an instance configuration's launch details.
fn user_data_of(config: &Json) -> String {
    config["instanceDetails"]["launchDetails"]["metadata"]["user_data"]
        .as_str()
        .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

/// The join part of an instance configuration's user data (empty when it has none).
fn join_of(config: &Json) -> String {
    user_data_of(config).split(&format!("filename=\"{JOIN_FILE}\"")).nth(1).unwrap_or_default().to_owned()
}

/// The configuration of an imported pool: the nodes' as a cluster's, with what the join says.
async fn imported_config(
    ctx: &Context,
    oci: &Oci,
    compartment: &str,
    name: &str,
    defaults: &BTreeMap<String, String>,
    census: &crate::ownership::Census,
) -> Result<Value, CloudError> {
    let (nodes, _) = cluster::imported_config(ctx, oci, compartment, name, defaults, census).await?;
    let config = cluster::find_configuration(ctx, oci, compartment, name, census)
        .await?
        .ok_or_else(|| CloudError::other(format!("no node pool named {name:?}: no instance configuration {name}-ic")))?;
    let doc = user_data_of(&config);
    let (cluster_id, version, labels, taints) = parse_join(&join_of(&config));
    let cluster_id = cluster_id.ok_or_else(|| {
        CloudError::other(format!("the nodes of {name} carry no OKE join: they are a cluster's (import them as hpc_gpu_cluster)"))
    })?;
    let user = crate::clouds::kubernetes::user_labels(&labels);
    let taints: Vec<Value> =
        taints.iter().filter_map(|t| crate::clouds::kubernetes::parse_taint(t)).map(crate::clouds::kubernetes::taint_block).collect();
    let user_data = crate::clouds::user_data::without_part(&doc, JOIN_FILE);
    let map = |m: BTreeMap<String, String>| {
        if m.is_empty() { Value::Null } else { Value::Map(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }
    };
    let mut out = BTreeMap::new();
    for key in ["name", "fabric", "node_count", "capacity_type", "reservation_id", "image", "ssh_public_key", "tags", "repair"] {
        out.insert(key.to_owned(), nodes.get(key).clone());
    }
    if out.get("capacity_type") == Some(&Value::from("on-demand")) {
        out.insert("capacity_type".into(), Value::Null);
    }
    let batch = nodes.get("update_strategy").get("batch_size").clone();
    out.insert("update_strategy".into(), if batch.is_null() { Value::Null } else { Value::object([("batch_size", batch)]) });
    out.insert("kubernetes_cluster".into(), Value::from(cluster_id));
    out.insert("kubernetes_version".into(), Value::from(version));
    out.insert("labels".into(), map(user));
    out.insert("taint".into(), Value::list(taints));
    out.insert("user_data".into(), Value::from(user_data));
    Ok(Value::Map(out))
}

#[async_trait]
impl NodePoolBackend for backend::Oci {
    /// The OKE cluster, once: it exists and is ACTIVE; its version.
    async fn cluster_facts(&self, ctx: &Context, spec: &NodePoolSpec) -> Result<Option<ClusterFacts>, CloudError> {
        let oci = api::connect(ctx, &spec.nodes.fabric.region)?;
        let cluster = oke_cluster(ctx, &oci, &spec.kubernetes_cluster).await?;
        let version = cluster.as_ref().and_then(|c| c["kubernetesVersion"].as_str()).and_then(crate::clouds::kubernetes::minor_version);
        Ok(Some(ClusterFacts { version, refusals: cluster_refusals(spec, cluster.as_ref()) }))
    }
}

#[async_trait]
impl Backend<NodePoolSpec> for backend::Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        backend::configured(ctx)
    }

    fn id(&self, _spec: &NodePoolSpec) -> Option<String> {
        // The compartment is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    fn place(&self, v: &Value) -> String {
        format!("for OKE cluster {}", v.get("kubernetes_cluster").as_str().unwrap_or_default())
    }

    fn summary(&self, error: &CloudError) -> Option<&'static str> {
        backend::summary(error)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, NodePoolSpec>) -> Outcome {
        let Some(site) = site(change.planned) else { return Outcome::failed(change.prior.clone(), no_fabric_id("node pool")) };
        let oci = match api::connect(step.ctx, &site.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let spec = change.spec;
        let name = spec.nodes.name.as_str();
        let at = site.at(name);
        let id = api::resource_id(&site.region, &site.compartment, name);
        let state = with_attr(change.state, "id", Value::from(id));
        let labels = crate::clouds::shared::string_map(change.planned.get("node_labels"));
        let work = async {
            let invalid = |m: String| CloudError::new(ErrorKind::InvalidRequest { field: Some("kubernetes_cluster".into()) }, None, m);
            let cluster = oke_cluster(step.ctx, &oci, &spec.kubernetes_cluster).await?;
            if let Some((_, summary, detail)) = cluster_refusals(spec, cluster.as_ref()).into_iter().next() {
                return Err(invalid(format!("{summary}: {detail}")));
            }
            let cluster = cluster.unwrap_or_default();
            // The nodes reach the API server's private endpoint: the fabric's subnet must be in the cluster's VCN.
            let joined = super::fabric::join(step.ctx, &oci, &site.compartment, &spec.nodes.fabric.name, &site.zone, false).await?;
            let subnet = oci.get(step.ctx, Service::Core, &format!("/subnets/{}", joined.subnet)).await?.unwrap_or_default();
            let (vcn, cluster_vcn) = (subnet["vcnId"].as_str().unwrap_or_default(), cluster["vcnId"].as_str().unwrap_or_default());
            if vcn != cluster_vcn {
                return Err(CloudError::new(
                    ErrorKind::InvalidRequest { field: Some("fabric".into()) },
                    None,
                    format!(
                        "OKE cluster {} is in VCN {cluster_vcn}, the fabric's subnet in {vcn}: self-managed nodes join through the cluster's \
                         private endpoint. Give the fabric the cluster's VCN (vpc_id) and a subnet of it (subnet_id).",
                        spec.kubernetes_cluster
                    ),
                ));
            }
            let facts = join_facts(step.ctx, &oci, &spec.kubernetes_cluster, &cluster).await?;
            let workers = worker_spec(spec, &facts, &labels);
            let settings = cluster::day2_settings(change.config);
            let tags = worker_tags(change.tags, name);
            cluster::converge(step.ctx, &oci, &workers, &site.compartment, &tags, &settings, step.timeout, step.census).await
        };
        match work.await {
            Ok(()) => Outcome::done(state),
            Err(e) => match cluster::observe(step.ctx, &oci, &at, step.census).await {
                Ok(nodes) if nodes.is_empty() && change.creating() => {
                    // Nothing launched; what else the converge made (its instance configuration) stays in state.
                    Outcome::failed(with_count(&state, 0), e)
                }
                Ok(nodes) => Outcome::failed(with_count(&state, nodes.len()), e),
                Err(_) => Outcome::failed(change.prior.clone(), e),
            },
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&NodePoolSpec>) -> Outcome {
        let Some(site) = site(prior) else { return Outcome::failed(prior.clone(), no_fabric_id("node pool")) };
        let oci = match api::connect(step.ctx, &site.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let at = site.at(name_of(prior));
        match cluster::delete(step.ctx, &oci, &at, step.timeout, step.census).await {
            Ok(()) => Outcome::done(Value::Null),
            Err(e) => Outcome::failed(prior.clone(), e),
        }
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&NodePoolSpec>) -> Result<Option<Value>, CloudError> {
        let Some(site) = site(state) else { return Ok(Some(state.clone())) };
        let name = name_of(state);
        let oci = api::connect(step.ctx, &site.region)?;
        let nodes = cluster::observe(step.ctx, &oci, &site.at(name), step.census).await?;
        let config = cluster::find_configuration(step.ctx, &oci, &site.compartment, name, step.census).await?;
        let Some(config) = config else {
            return Ok(if nodes.is_empty() { None } else { Some(with_count(state, nodes.len())) });
        };
        // The labels and taints the nodes register with, as the instance configuration's join says.
        let (_, _, labels, taints) = parse_join(&join_of(&config));
        let taints = taints.iter().filter_map(|t| crate::clouds::kubernetes::parse_taint(t)).collect();
        let out = crate::clouds::kubernetes::with_live_labels_and_taints(state, &labels, taints);
        Ok(Some(with_count(&out, nodes.len())))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "node pool", "gpu")?;
        let oci = api::connect(step.ctx, region).map_err(ImportError::failed)?;
        let config =
            imported_config(step.ctx, &oci, compartment, name, step.default_tags, step.census).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_script_says_its_cluster_labels_and_taints_back() {
        let c = serde_json::json!({
            "name": "gpu", "node_count": 4, "kubernetes_cluster": "ocid1.cluster.oc1.iad.aaaa", "image": "ocid1.image.oc1.iad.x",
            "kubernetes_version": "1.33",
            "fabric": {"name": "train", "cloud": "oci", "region": "us-ashburn-1", "zone": "AD-1", "instance_type": "BM.GPU.H100.8",
                       "placement": "cluster"},
            "taint": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        });
        let ty = crate::resources::node_pool::schema().value_type();
        let v = crate::framework::codec::decode_json(c.to_string().as_bytes(), &ty).unwrap();
        let spec = crate::planner::spec::parse_node_pool(&v, &mut Diagnostics::new()).unwrap();
        let facts = JoinFacts { endpoint: "10.0.0.5".into(), ca: "Q0E=".into() };
        let labels = BTreeMap::from([("hpc-platform/cluster".to_owned(), "gpu".to_owned()), ("team".to_owned(), "llm".to_owned())]);
        let workers = worker_spec(&spec, &facts, &labels);
        let doc = workers.user_data.unwrap().into_exposed();
        assert!(doc.contains("--apiserver-endpoint '10.0.0.5' --kubelet-ca-cert 'Q0E='"), "{doc}");
        let script = doc.split(&format!("filename=\"{JOIN_FILE}\"")).nth(1).unwrap();
        let (cluster, version, got_labels, taints) = parse_join(script);
        assert_eq!(cluster.as_deref(), Some("ocid1.cluster.oc1.iad.aaaa"));
        assert_eq!(version.as_deref(), Some("1.33"));
        assert_eq!(got_labels, labels);
        assert_eq!(taints, ["nvidia.com/gpu=present:NoSchedule"]);
        let real = "#!/bin/bash\n# kubernetes_cluster: ocid1.cluster.oc1.iad.04\nset -euo pipefail\nbash /etc/oke/oke-install.sh --apiserver-endpoint '10.60.0.6' --kubelet-ca-cert 'LS0t' \\\n  --kubelet-extra-args '--node-labels=example.com/team=llm,hpc-platform/cluster=gpu --register-with-taints=nvidia.com/gpu=present:NoSchedule'\n\n--==HPC-OKE==--\n";
        let (_, _, l, t) = parse_join(real);
        assert_eq!((l.len(), t.len()), (2, 1), "{l:?} {t:?}");
        let parsed: Vec<_> = t.iter().filter_map(|t| crate::clouds::kubernetes::parse_taint(t)).collect();
        assert_eq!(parsed.len(), 1, "{parsed:?}");
        assert_eq!(kubeconfig_ca("clusters:\n- cluster:\n    certificate-authority-data: \"Q0E=\"\n").as_deref(), Some("Q0E="));
    }

    #[test]
    fn cluster_ocids() {
        assert!(cluster_ocid("ocid1.cluster.oc1.iad.aaaaaaaexample"));
        assert!(!cluster_ocid("ocid1.instance.oc1.iad.aaaa"));
        assert!(!cluster_ocid("my-cluster"));
    }
}
