//! `resource "hpc_gpu_cluster"`: N GPU nodes on a fabric, with the node environment they need.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::common::{self, PlanShape, fabric_ref_type};
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, Block, Context, Diagnostics, NestedBlock, PlanRequest, PlanResponse, ReadOutcome, Resource,
    Schema, Type, Value,
};
use crate::planner::{self, expansion_type, expansion_value, spec};

pub struct GpuCluster;

const SHAPE: PlanShape = PlanShape {
    assigned: &["id"],
    replace: &["name", "fabric", "capacity_type", "reservation_id", "image", "user_data", "ssh_public_key", "rdma_interfaces"],
};

pub fn schema() -> Schema {
    let timeouts = Block::new("How long create, update and delete may take (e.g. `90m`, `2h`); GPU capacity can take long to arrive.")
        .attribute(Attribute::optional("create", Type::String, "Default 60m."))
        .attribute(Attribute::optional("update", Type::String, "Default 60m."))
        .attribute(Attribute::optional("delete", Type::String, "Default 30m."));
    Schema::new(
        0,
        Block::new("GPU nodes on a fabric: the node type's RDMA interfaces, placement and capacity, expanded into the cloud's own pieces in the plan.")
            .attribute(Attribute::required("name", Type::String, "Name; nodes are named `<name>-0` .. `<name>-<n-1>`."))
            .attribute(Attribute::required("fabric", fabric_ref_type(), "The fabric to build on: `fabric = hpc_gpu_fabric.<name>`."))
            .attribute(Attribute::required("node_count", Type::Number, "Number of nodes. Changes in place."))
            .attribute(Attribute::optional_computed(
                "capacity_type",
                Type::String,
                "`on-demand` (default), `spot`, `reservation`, `capacity-block` (AWS) or `flex-start` (GCP).",
            ))
            .attribute(Attribute::optional("reservation_id", Type::String, "Reservation to launch into, for `reservation` and `capacity-block`."))
            .attribute(Attribute::optional("image", Type::String, "Image (AMI, image URN, image self link, image OCID); the cloud's GPU image by default."))
            .attribute(Attribute::optional("user_data", Type::String, "Cloud-init or script passed to every node unchanged.").sensitive())
            .attribute(Attribute::optional("ssh_public_key", Type::String, "SSH public key for the nodes' default user."))
            .attribute(Attribute::optional_computed(
                "workload",
                Type::String,
                "`pretraining` (default), `finetuning` or `inference`; drives the plan-time checklist warnings.",
            ))
            .attribute(Attribute::optional_computed(
                "rdma_interfaces",
                Type::Number,
                "RDMA interfaces per node. AWS: EFA interfaces, one per network card (default: all). Elsewhere fixed by the node type.",
            ))
            .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
            .attribute(Attribute::computed("id", Type::String, "Identifier of the cluster, assigned when it is created."))
            .attribute(Attribute::computed("instance_type", Type::String, "Node type (from the fabric)."))
            .attribute(Attribute::computed("gpu_model", Type::String, "GPU model of the nodes."))
            .attribute(Attribute::computed("gpus_total", Type::Number, "GPUs in the cluster."))
            .attribute(Attribute::computed("node_names", Type::list(Type::String), "Names of the nodes."))
            .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this cluster is made of, as planned."))
            .attribute(Attribute::computed(
                "node_environment",
                Type::map(Type::String),
                "NCCL/libfabric environment for jobs on these nodes (cloud and node type specific).",
            ))
            .attribute(Attribute::computed(
                "expected_busbw_gbs",
                Type::Number,
                "Published all-reduce bus bandwidth threshold (GB/s) for this node type, where one exists.",
            ))
            .attribute(Attribute::computed("expected_busbw_source", Type::String, "Source and scope of `expected_busbw_gbs`."))
            .block(NestedBlock::single("timeouts", timeouts)),
    )
}

fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_cluster(config, diags)?;
    let plan = planner::plan_cluster(spec, &common::defaults(ctx), diags);
    let s = &plan.spec;
    let mut out = BTreeMap::new();
    out.insert("capacity_type".into(), Value::from(s.capacity.as_str()));
    out.insert("workload".into(), Value::from(s.workload.as_str()));
    out.insert("rdma_interfaces".into(), Value::int(i64::from(s.rdma_interfaces)));
    out.insert("instance_type".into(), Value::from(s.fabric.sku.name));
    out.insert("gpu_model".into(), Value::from(s.fabric.sku.gpu_model));
    out.insert("gpus_total".into(), Value::int(i64::from(plan.gpus_total)));
    out.insert("node_names".into(), Value::list(plan.node_names.iter().map(|n| Value::from(n.as_str()))));
    out.insert("expansion".into(), expansion_value(&plan.pieces));
    out.insert(
        "node_environment".into(),
        Value::Map(plan.node_environment.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect()),
    );
    out.insert("expected_busbw_gbs".into(), plan.expected_busbw.map_or(Value::Null, |b| Value::float(b.gbytes_per_sec)));
    out.insert(
        "expected_busbw_source".into(),
        plan.expected_busbw.map_or(Value::Null, |b| Value::from(format!("{} ({})", b.source, b.scope))),
    );
    Some(out)
}

#[async_trait]
impl Resource for GpuCluster {
    fn type_name(&self) -> &'static str {
        "hpc_gpu_cluster"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        spec::parse_cluster(config, diags);
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        common::plan(&schema(), &SHAPE, req, diags, |config, diags| derive(ctx, config, diags))
    }

    async fn apply(&self, _ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        ApplyResponse { new_state: common::apply_not_available("this cluster", &req, diags), private: Vec::new() }
    }

    async fn read(&self, _ctx: &Context, state: &Value, private: &[u8], _diags: &mut Diagnostics) -> ReadOutcome {
        ReadOutcome::Found { state: state.clone(), private: private.to_vec() }
    }

    async fn import(&self, _ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        diags.error(
            "Import not available yet",
            format!("Importing cluster {id:?} needs the cloud API clients, which are not part of this release."),
        );
        None
    }
}
