//! `resource "hpc_gpu_fabric"`: the inter-node tier (network, placement, RDMA security) for one node type.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::common::{self, PlanShape};
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, Block, Context, Diagnostics, PlanRequest, PlanResponse, ReadOutcome, Resource, Schema, Type,
    Value,
};
use crate::planner::{self, expansion_type, expansion_value, spec};

pub struct GpuFabric;

const SHAPE: PlanShape = PlanShape {
    assigned: &["id", "vpc_id", "subnet_id"],
    replace: &[
        "name",
        "cloud",
        "region",
        "zone",
        "gpu",
        "instance_type",
        "vpc_id",
        "subnet_id",
        "cidr_block",
        "placement",
        "max_distance",
        "resource_group",
        "compartment_id",
    ],
};

pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "The inter-node tier of a GPU cluster: the network nodes join (existing or created), proximity placement, and the RDMA fabric's \
             security rules, expanded into the cloud's own pieces in the plan.",
        )
        .attribute(Attribute::required("name", Type::String, "Name, used as the prefix of every piece (1-40 lowercase letters, digits, hyphens)."))
        .attribute(Attribute::required("cloud", Type::String, "`aws`, `azure`, `gcp` or `oci`."))
        .attribute(Attribute::required("region", Type::String, "Region (Azure: location)."))
        .attribute(Attribute::optional("zone", Type::String, "Availability zone (GCP zone, OCI availability domain). Required except on Azure."))
        .attribute(Attribute::optional("gpu", Type::String, "GPU model the fabric serves, resolved through the catalog to the best-connected node type."))
        .attribute(Attribute::optional_computed("instance_type", Type::String, "Node type the fabric serves; set it, or set `gpu` and read it here."))
        .attribute(Attribute::computed("gpu_model", Type::String, "GPU model of the node type."))
        .attribute(Attribute::optional_computed("vpc_id", Type::String, "Existing VPC/VNet/VCN to join (with `subnet_id`); otherwise the one created."))
        .attribute(Attribute::optional_computed("subnet_id", Type::String, "Existing subnet to join (with `vpc_id`); otherwise the one created."))
        .attribute(Attribute::optional("cidr_block", Type::String, "Address range of a created network (/16 to /24; default 10.0.0.0/16)."))
        .attribute(Attribute::optional_computed("placement", Type::String, "`cluster` (default: proximity placement), `none`, or on OCI `cluster-network`."))
        .attribute(Attribute::optional("max_distance", Type::Number, "GCP compact placement: maximum distance 1-3 (1 not allowed for A3 Ultra/A4)."))
        .attribute(Attribute::optional("resource_group", Type::String, "Azure: existing resource group to build in; otherwise one is created."))
        .attribute(Attribute::optional("compartment_id", Type::String, "OCI: compartment OCID to build in. Required on OCI."))
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the fabric, assigned when it is created."))
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this fabric is made of, as planned.")),
    )
}

fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_fabric(config, diags)?;
    let plan = planner::plan_fabric(spec, &common::defaults(ctx), diags)?;
    let s = &plan.spec;
    let mut out = BTreeMap::new();
    out.insert("instance_type".into(), Value::from(s.sku.name));
    out.insert("gpu_model".into(), Value::from(s.sku.gpu_model));
    out.insert("placement".into(), Value::from(s.placement.as_str()));
    out.insert("expansion".into(), expansion_value(&plan.pieces));
    Some(out)
}

#[async_trait]
impl Resource for GpuFabric {
    fn type_name(&self) -> &'static str {
        "hpc_gpu_fabric"
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        spec::parse_fabric(config, diags);
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        common::plan(&schema(), &SHAPE, req, diags, |config, diags| derive(ctx, config, diags))
    }

    async fn apply(&self, _ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        ApplyResponse { new_state: common::apply_not_available("this fabric", &req, diags), private: Vec::new() }
    }

    async fn read(&self, _ctx: &Context, state: &Value, private: &[u8], _diags: &mut Diagnostics) -> ReadOutcome {
        ReadOutcome::Found { state: state.clone(), private: private.to_vec() }
    }

    async fn import(&self, _ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        diags.error(
            "Import not available yet",
            format!("Importing fabric {id:?} needs the cloud API clients, which are not part of this release."),
        );
        None
    }
}
