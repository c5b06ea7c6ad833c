//! `hpc_gpu_node_pool` (issue 37), its schema and plan: GPU nodes on a fabric joined to a Kubernetes cluster
//! made elsewhere, expanded into the cloud's pool (EKS node group with our launch template, GKE node pool,
//! AKS agent pool, self-managed OKE workers) and the in-cluster half (device plugin or operator, Kueue
//! topology, NCCL test Job) as text. Made, read, updated, imported and deleted through the one lifecycle
//! (`lifecycle::Kind`) over the cloud's pool backend: on AWS the EKS node group and its launch template, on
//! Azure the AKS agent pool, on Google Cloud the GKE node pool, on OCI self-managed workers made as a
//! cluster's nodes that join with `oke-install.sh` (`clouds/<cloud>/node_pool.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::common::{self, fabric_ref_type};
use super::lifecycle::{Kind, Parts, Timeouts};
use crate::clouds::backend;
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, AttributePath, Block, Context, Diagnostics, NestedBlock, PlanRequest, PlanResponse,
    ReadOutcome, Resource, Schema, Type, Value,
};
use crate::model::NodePoolSpec;
use crate::planner::{self, expansion_type, expansion_value, spec};

pub const KIND: common::Kind = common::Kind { type_name: "hpc_gpu_node_pool", noun: "GPU node pool" };

pub fn schema() -> Schema {
    let timeouts = Block::new("How long create, update and delete may take (e.g. `90m`).")
        .attribute(Attribute::optional("create", Type::String, "Default 60m."))
        .attribute(Attribute::optional("update", Type::String, "Default 60m."))
        .attribute(Attribute::optional("delete", Type::String, "Default 30m."));
    let autoscaling = Block::new("Let the cloud's cluster autoscaler size the pool between two bounds (EKS, GKE and AKS pools).")
        .attribute(Attribute::required("min_count", Type::Number, "Fewest nodes (0 lets an idle pool cost nothing)."))
        .attribute(Attribute::required("max_count", Type::Number, "Most nodes."));
    let taint = Block::new("A Kubernetes taint on every node of the pool.")
        .attribute(Attribute::required("key", Type::String, "Taint key (e.g. `nvidia.com/gpu`)."))
        .attribute(Attribute::optional("value", Type::String, "Taint value (may be empty)."))
        .attribute(Attribute::required("effect", Type::String, "`NoSchedule`, `PreferNoSchedule` or `NoExecute`."));
    let update_strategy = Block::new("How a change to the node configuration reaches the nodes.").attribute(Attribute::optional(
        "batch_size",
        Type::String,
        "Nodes changed at a time, as the cloud's pool upgrade takes it (max unavailable, no surge): a count (`2`) or a share (`\"25%\"`). Default `25%`.",
    ));
    let computed = |name: &str, t: Type, doc: &str| Attribute::computed(name, t, doc);
    Schema::new(
        1,
        Block::new(
            "GPU nodes on a fabric, joined as a node pool to a Kubernetes cluster made elsewhere (EKS, GKE, AKS or OKE): the node type's \
             RDMA interfaces and the fabric's placement in the cloud's pool, and the in-cluster half (RDMA device plugin or operator, \
             topology labels for Kueue, an NCCL test Job) as outputs. The Kubernetes cluster is only read, never changed. The \
             pool is an EKS node group, a GKE node pool, an AKS agent pool, or self-managed OKE workers in the fabric's compute cluster or \
             cluster network.",
        )
        .attribute(Attribute::required("name", Type::String, "Pool name (on AKS 1-12 lowercase letters and digits).").requires_replace())
        .attribute(
            Attribute::required("fabric", fabric_ref_type(), "The fabric the nodes are placed on: `fabric = hpc_gpu_fabric.<name>`.")
                .requires_replace(),
        )
        .attribute(
            Attribute::required(
                "kubernetes_cluster",
                Type::String,
                "The Kubernetes cluster the pool joins: the EKS cluster's name, the GKE cluster's id \
                 (`projects/<p>/locations/<l>/clusters/<c>`), the AKS cluster's resource id, or the OKE cluster's OCID.",
            )
            .requires_replace(),
        )
        .attribute(Attribute::optional("kubernetes_version", Type::String, "Kubelet minor version (`1.33`); the cluster's when unset."))
        .attribute(Attribute::required("node_count", Type::Number, "Nodes (with `autoscaling`, the size the pool starts at)."))
        .attribute(Attribute::optional(
            "capacity_type",
            Type::String,
            "`on-demand` (default), `spot`, `reservation`, `capacity-block` (AWS) or `flex-start` (Google Cloud).",
        ))
        .attribute(Attribute::optional("reservation_id", Type::String, "The reservation or capacity block for reserved capacity."))
        .attribute(Attribute::optional(
            "image",
            Type::String,
            "EKS: an AMI (default: the EKS accelerated AMI). GKE: the node image type (`COS_CONTAINERD`, `UBUNTU_CONTAINERD`). OKE: \
             required, an OKE worker image's OCID. AKS: not used.",
        ))
        .attribute(Attribute::optional("user_data", Type::String, "More first-boot user data, after the cloud's own join (a change rolls the pool). Kept in state, marked sensitive.").sensitive())
        .attribute(Attribute::optional("ssh_public_key", Type::String, "SSH public key for the nodes' default user."))
        .attribute(Attribute::optional(
            "node_role",
            Type::String,
            "EKS: the node IAM role's ARN (required). GKE: the nodes' service account email. Not used on AKS and OKE.",
        ))
        .attribute(Attribute::optional("repair", Type::String, "`replace` (default) lets the cloud's auto-repair remake unhealthy nodes; `report` turns it off."))
        .attribute(Attribute::optional("labels", Type::map(Type::String), "Kubernetes labels on every node."))
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every cloud piece, after the provider's `default_tags`."))
        .attribute(Attribute::optional_computed(
            "rdma_interfaces",
            Type::Number,
            "RDMA interfaces per node. AWS: EFA interfaces, one per network card (default: all). Elsewhere fixed by the node type.",
        ))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the pool, assigned when it is created.").assigned_at_apply())
        .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC).assigned_at_apply())
        .attribute(computed("instance_type", Type::String, "Node type, from the fabric."))
        .attribute(computed("gpu_model", Type::String, "GPU model of the nodes."))
        .attribute(computed("gpus_total", Type::Number, "GPUs in the pool at node_count."))
        .attribute(computed("expansion", expansion_type(), "The vendor pieces this pool is made of, as planned."))
        .attribute(computed("node_labels", Type::map(Type::String), "The Kubernetes labels every node carries: `labels` and the pool's."))
        .attribute(computed(
            "topology_labels",
            Type::list(Type::String),
            "The node labels that say where a node sits, widest first, ending with `kubernetes.io/hostname`: the levels of `kueue_topology`.",
        ))
        .attribute(computed("kueue_topology", Type::String, "Kueue's `Topology` object over `topology_labels`, for topology-aware scheduling."))
        .attribute(computed(
            "device_plugin",
            Type::String,
            "The cloud's RDMA device plugin or operator for these nodes, as Helm values or manifests, with how to apply them.",
        ))
        .attribute(computed("device_resources", Type::map(Type::Number), "The extended resources (RDMA devices) each pod of a job across the pool requests."))
        .attribute(computed("node_environment", Type::map(Type::String), "NCCL environment for jobs on these nodes."))
        .attribute(computed(
            "nccl_test_kubernetes",
            Type::String,
            "An NCCL all-reduce indexed Job across the pool (one pod per node) with `device_resources` in its limits.",
        ))
        .block(NestedBlock::single("autoscaling", autoscaling))
        .block(NestedBlock::list("taint", taint, 0))
        .block(NestedBlock::single("update_strategy", update_strategy))
        .block(NestedBlock::single("timeouts", timeouts)),
    )
}

/// The planner's computed attributes of a configuration.
pub fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_node_pool(config, diags)?;
    let plan = planner::node_pool::plan(&spec, &common::defaults(ctx), diags)?;
    let c = &spec.nodes;
    let text = |s: &str| Value::from(s);
    let strings = |m: &BTreeMap<String, String>| Value::Map(m.iter().map(|(k, v)| (k.clone(), text(v))).collect());
    let mut out = BTreeMap::new();
    out.insert("rdma_interfaces".into(), Value::int(i64::from(c.rdma_interfaces)));
    out.insert("instance_type".into(), text(c.fabric.sku.name));
    out.insert("gpu_model".into(), text(c.fabric.sku.gpu_model));
    out.insert("gpus_total".into(), Value::int(i64::from(c.node_count * c.fabric.sku.gpu_count)));
    out.insert("expansion".into(), expansion_value(&plan.pieces));
    out.insert("node_labels".into(), strings(&plan.node_labels));
    out.insert("topology_labels".into(), Value::list(plan.in_cluster.topology_levels.iter().map(|l| text(l))));
    out.insert("kueue_topology".into(), text(&plan.kueue_topology));
    out.insert("device_plugin".into(), text(&plan.in_cluster.device_plugin));
    out.insert(
        "device_resources".into(),
        Value::Map(plan.in_cluster.device_resources.iter().map(|(k, v)| (k.clone(), Value::int(i64::from(*v)))).collect()),
    );
    out.insert("node_environment".into(), strings(&planner::node_environment(c.fabric.sku)));
    out.insert("nccl_test_kubernetes".into(), plan.nccl_test.map_or(Value::Null, Value::from));
    Some(out)
}

/// The plan of a pool.
pub fn plan(ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
    common::plan(&schema(), req, diags, |config, diags| derive(ctx, config, diags))
}

/// What the nodes are made from: a change is an update in place of the pool, but the cloud replaces its
/// nodes (EKS rolls the node group to a new launch template version, GKE upgrades the pool's nodes in
/// batches, AKS reimages the agent pool).
const REMAKES_NODES: [&str; 7] =
    ["image", "user_data", "ssh_public_key", "rdma_interfaces", "kubernetes_version", "capacity_type", "reservation_id"];

/// A plan that replaces the pool's nodes says so, though it shows no replacement of the resource.
fn warn_rolling(prior: &Value, planned: &Value, diags: &mut Diagnostics) {
    if prior.is_null() {
        return;
    }
    let changed: Vec<&str> = REMAKES_NODES.into_iter().filter(|a| prior.get(a) != planned.get(a)).collect();
    let Some(first) = changed.first() else { return };
    diags.warning_at(
        AttributePath::attr(first),
        "The pool's nodes are replaced",
        format!(
            "{} change what the nodes are made from: the cloud replaces every node of the pool, a batch at a time \
             (update_strategy.batch_size, default 25%), draining each first so that its pods move. The pool itself is updated in place.",
            changed.join(", ")
        ),
    );
}

pub struct NodePool;

#[async_trait]
impl Resource for NodePool {
    fn type_name(&self) -> &'static str {
        KIND.type_name
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(spec) = spec::parse_node_pool(config, diags) {
            planner::node_pool::plan(&spec, &Default::default(), diags);
        }
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let prior = req.prior.clone();
        let resp = plan(ctx, req, diags);
        if !resp.planned.is_null() {
            warn_rolling(&prior, &resp.planned, diags);
        }
        resp
    }

    /// After the pure plan: the plan's reads of the cloud (the Kubernetes cluster, quota).
    async fn check_plan(&self, ctx: &Context, req: PlanRequest<'_>, planned: &Value, diags: &mut Diagnostics) {
        if let Some(spec) = spec::parse_node_pool(req.config, &mut Diagnostics::new()) {
            LIFECYCLE.plan_reads(ctx, &spec, &req, planned, diags).await;
        }
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        LIFECYCLE.apply(ctx, &req, diags).await
    }

    async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome {
        LIFECYCLE.read(ctx, state, private, diags).await
    }

    async fn import(&self, ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        LIFECYCLE.import(ctx, id, "aws/us-east-1/ml-prod/gpu", diags).await
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        common::upgrade_owner(KIND, version, state)
    }
}

const SIXTY_MINUTES: Duration = Duration::from_secs(60 * 60);

/// A pool's lifecycle: its schema, parser, derivation and tag keys over the cloud's pool backend.
pub(crate) static LIFECYCLE: Kind<NodePoolSpec> = Kind {
    kind: KIND,
    schema,
    parse: spec::parse_node_pool,
    parse_state: |v| spec::parse_node_pool(v, &mut Diagnostics::new()),
    with_prior: |spec, _| spec,
    derive: |ctx, config, _, diags| derive(ctx, config, diags),
    ours: |v| {
        let name = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        vec![("hpc:node-pool", name(v.get("name"))), ("hpc:fabric", name(v.get("fabric").get("name")))]
    },
    backend: |cloud| backend::node_pool(cloud) as &dyn backend::Backend<NodePoolSpec>,
    timeouts: Timeouts { create: SIXTY_MINUTES, update: SIXTY_MINUTES, delete: Duration::from_secs(30 * 60) },
    kept: "What was made so far is kept in state; apply again to finish, or destroy.",
    left: "What is left stays in state; run destroy again.",
    parts: &PoolParts,
};

/// What a pool adds to the lifecycle's steps: the plan's reads of the cloud (the Kubernetes cluster it
/// joins, and the quota its new nodes draw on, as a cluster's).
struct PoolParts;

#[async_trait]
impl Parts<NodePoolSpec> for PoolParts {
    async fn plan_reads(&self, ctx: &Context, spec: &NodePoolSpec, req: &PlanRequest<'_>, planned: &Value, diags: &mut Diagnostics) {
        // The cluster is read when the pool is made or its cluster or version changes; the quota when it grows.
        let changed = |a: &str| req.prior.is_null() || req.prior.get(a) != planned.get(a);
        if changed("kubernetes_cluster") || changed("kubernetes_version") {
            check_cluster(ctx, spec, diags).await;
        }
        if planned.get("node_count").is_wholly_known() {
            super::capacity::check_quota(ctx, req.prior, &spec.nodes, diags).await;
        }
    }
}

/// The Kubernetes cluster can host the pool: it exists in the fabric's region, and the pool's version is
/// within Kubernetes' skew of its control plane. Nothing is read without credentials; a read that fails is a
/// warning, since the apply reads it again.
async fn check_cluster(ctx: &Context, spec: &NodePoolSpec, diags: &mut Diagnostics) {
    let backend = backend::node_pool(spec.nodes.fabric.cloud);
    if backend.configured(ctx).await.is_err() {
        return;
    }
    let facts = match backend.cluster_facts(ctx, spec).await {
        Ok(Some(facts)) => facts,
        Ok(None) => return,
        Err(e) => {
            diags.warning_at(
                AttributePath::attr("kubernetes_cluster"),
                "Kubernetes cluster not checked",
                format!("Reading {} failed ({}); the apply reads it again before it makes anything.", spec.kubernetes_cluster, e.message),
            );
            return;
        }
    };
    for (attr, summary, detail) in facts.refusals {
        diags.error_at(AttributePath::attr(attr), summary, detail);
    }
    if let (Some(pool), Some(cluster)) = (spec.kubernetes_version, facts.version)
        && let Some(why) = crate::clouds::kubernetes::version_skew(pool, cluster)
    {
        diags.error_at(AttributePath::attr("kubernetes_version"), "Version outside the cluster's skew", why);
    }
}
