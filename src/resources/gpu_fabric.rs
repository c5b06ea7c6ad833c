//! `resource "hpc_gpu_fabric"`: the inter-node tier (network, placement, RDMA security) for one node type.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::common;
use std::time::Duration;

use super::lifecycle::{Kind, NoParts, Timeouts};
use crate::clouds::backend;
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, Block, Context, Diagnostics, PlanRequest, PlanResponse, ReadOutcome, Resource, Schema, Type,
    Value,
};
use crate::planner::{self, FabricSpec, Network, expansion_type, expansion_value, spec};

pub struct GpuFabric;

pub fn schema() -> Schema {
    Schema::new(
        1,
        Block::new(
            "The inter-node tier of a GPU cluster: the network nodes join (existing or created), proximity placement, and the RDMA fabric's \
             security rules, expanded into the cloud's own pieces in the plan.",
        )
        .attribute(Attribute::required("name", Type::String, "Name, used as the prefix of every piece (1-40 lowercase letters, digits, hyphens).").requires_replace())
        .attribute(Attribute::required("cloud", Type::String, "`aws`, `azure`, `gcp` or `oci`.").requires_replace())
        .attribute(Attribute::required("region", Type::String, "Region (Azure: location).").requires_replace())
        .attribute(Attribute::optional("zone", Type::String, "Availability zone (GCP zone, OCI availability domain). Required except on Azure.").requires_replace())
        .attribute(Attribute::optional("gpu", Type::String, "GPU model the fabric serves, resolved through the catalog to the best-connected node type."))
        .attribute(Attribute::optional_computed("instance_type", Type::String, "Node type the fabric serves; set it, or set `gpu` and read it here.").requires_replace())
        .attribute(Attribute::computed("gpu_model", Type::String, "GPU model of the node type."))
        .attribute(Attribute::optional_computed("vpc_id", Type::String, "Existing VPC/VNet/VCN to join (with `subnet_id`); otherwise the one created.").requires_replace().assigned_at_apply())
        .attribute(Attribute::optional_computed("subnet_id", Type::String, "Existing subnet to join (with `vpc_id`); otherwise the one created.").requires_replace().assigned_at_apply())
        .attribute(Attribute::optional_computed("cidr_block", Type::String, "Address range of a created network (/16 to /24; default 10.0.0.0/16).").requires_replace())
        .attribute(Attribute::optional_computed("placement", Type::String, "`cluster` (default: proximity placement), `none`, or on OCI `cluster-network`.").requires_replace())
        .attribute(Attribute::optional("max_distance", Type::Number, "GCP compact placement: maximum distance 1-3 (1 not allowed for A3 Ultra/A4).").requires_replace())
        .attribute(Attribute::optional("resource_group", Type::String, "Azure: existing resource group to build in; otherwise one is created.").requires_replace())
        .attribute(Attribute::optional("compartment_id", Type::String, "OCI: compartment OCID to build in. Required on OCI.").requires_replace())
        .attribute(Attribute::optional(
            "slurm",
            Type::Bool,
            "Host a Slurm cluster (`hpc_slurm_cluster`) on this fabric: the last /28 of its network is set aside for the controllers and \
             login nodes, and the fabric holds the key the cluster's daemons share, which its GPU clusters join with \
             (`slurm = hpc_gpu_fabric.<name>.slurm_join`). Needs a created network of /23 or wider.",
        ))
        .attribute(Attribute::computed(
            "slurm_join",
            slurm_join_type(),
            "With `slurm = true`: what a node needs to join the fabric's Slurm cluster, the controllers' addresses \
             (`controller_addresses`, primary first) and the key the cluster's daemons authenticate with (`key`, made by the apply \
             that first sets `slurm = true`, kept from then on; sensitive). Give it to `hpc_gpu_cluster.slurm`.",
        )
        .sensitive())
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the fabric, assigned when it is created.").assigned_at_apply())
        .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC).assigned_at_apply())
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this fabric is made of, as planned.")),
    )
}

/// `slurm_join`: the controllers' addresses and the cluster's key.
pub fn slurm_join_type() -> Type {
    Type::object([("controller_addresses", Type::list(Type::String)), ("key", Type::String)])
}

/// A new key for a Slurm cluster's daemons (munge's, at least 32 bytes; here 64 random bytes, base64).
fn new_slurm_key() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 64];
    let _ = aws_lc_rs::rand::fill(&mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `slurm_join` as planned: the controllers' addresses from the created network, the key the prior state
/// holds (or one the apply makes: unknown). Null without `slurm = true`, or when the network is unknown.
fn planned_slurm_join(config: &Value, planned: &Value, prior: &Value, diags: &mut Diagnostics) -> Value {
    if config.get("slurm").as_bool() != Some(true) {
        return Value::Null;
    }
    let cidr = planned.get("cidr_block");
    if cidr.is_unknown() {
        return Value::Unknown;
    }
    let Some(addresses) = cidr.as_str().and_then(planner::slurm::controller_addresses) else {
        let why = match cidr.as_str() {
            Some(c) => format!("its network {c} leaves no room beside the GPU subnet: use a cidr_block of /23 or wider"),
            None => {
                "it joins an existing network (vpc_id, subnet_id), where no room can be set aside: let the fabric create its network".into()
            }
        };
        diags.error_at(
            crate::framework::AttributePath::attr("slurm"),
            "No room for a Slurm cluster",
            format!(
                "A fabric with slurm = true sets aside the last /28 of its network for the Slurm controllers and login nodes, and {why}."
            ),
        );
        return Value::Null;
    };
    // Made by the apply that first asks for it (a plan is made again at apply, so it cannot be random).
    let key = match prior.get("slurm_join").get("key").as_str() {
        Some(k) => Value::from(k),
        None => Value::Unknown,
    };
    Value::object([("controller_addresses", Value::list(addresses.into_iter().map(Value::from))), ("key", key)])
}

pub(crate) fn derive(ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Option<BTreeMap<String, Value>> {
    let spec = spec::parse_fabric(config, diags)?;
    let plan = planner::plan_fabric(spec, &common::defaults(ctx), diags)?;
    let s = &plan.spec;
    let mut out = BTreeMap::new();
    out.insert("instance_type".into(), Value::from(s.sku.name));
    out.insert("gpu_model".into(), Value::from(s.sku.gpu_model));
    out.insert("placement".into(), Value::from(s.placement.as_str()));
    out.insert(
        "cidr_block".into(),
        match &s.network {
            Network::Create { cidr } => Value::from(cidr.as_str()),
            Network::Existing { .. } => Value::Null,
        },
    );
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
        if let Some(spec) = spec::parse_fabric(config, diags) {
            check_something_to_build(&spec, diags);
        }
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let mut quiet = Diagnostics::new();
        if let Some(spec) = spec::parse_fabric(req.config, &mut quiet) {
            check_something_to_build(&spec, diags);
        }
        let (config, prior) = (req.config, req.prior);
        let mut resp = plan(ctx, req, diags);
        if let Value::Map(planned) = &mut resp.planned {
            let join = planned_slurm_join(config, &Value::Map(planned.clone()), prior, diags);
            planned.insert("slurm_join".into(), join);
        }
        resp
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        let mut resp = LIFECYCLE.apply(ctx, &req, diags).await;
        // The Slurm key is the fabric's own, made here once: kept as planned, or generated where it is unknown.
        let join = req.planned.get("slurm_join");
        if let Value::Map(state) = &mut resp.new_state
            && join.is_present()
        {
            let key = match join.get("key").as_str() {
                Some(k) => k.to_owned(),
                None => new_slurm_key(),
            };
            state.insert(
                "slurm_join".into(),
                Value::object([("controller_addresses", join.get("controller_addresses").clone()), ("key", Value::from(key))]),
            );
        }
        resp
    }

    async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome {
        LIFECYCLE.read(ctx, state, private, diags).await
    }

    fn identity_schema(&self) -> Option<crate::framework::IdentitySchema> {
        Some(common::identity_schema())
    }

    fn identity(&self, state: &Value) -> Option<Value> {
        common::identity(state)
    }

    fn import_id(&self, identity: &Value) -> Result<String, String> {
        common::import_id(identity)
    }

    async fn import(&self, ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        LIFECYCLE.import(ctx, id, "aws/us-east-1/train", diags).await
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        common::upgrade_owner(common::FABRIC, version, state)
    }
}

/// Plans a fabric; also how a cluster without a fabric plans the one it makes for itself.
pub(crate) fn plan(ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
    common::plan(&schema(), req, diags, |config, diags| derive(ctx, config, diags))
}

/// A fabric whose expansion is empty (on Google Cloud: Ethernet, no placement, an existing network: no
/// network, GPU NIC VPCs or placement policy) has no piece of its own, so nothing would record for its
/// clusters which network it joined: refused, pointing at the cluster's own network settings.
fn check_something_to_build(spec: &spec::FabricSpec, diags: &mut Diagnostics) {
    let mut quiet = Diagnostics::new();
    let empty = planner::plan_fabric(spec.clone(), &planner::Defaults::default(), &mut quiet).is_some_and(|p| p.pieces.is_empty());
    if empty {
        let ethernet = if spec.sku.fabric == crate::catalog::Fabric::None { " (Ethernet)" } else { "" };
        diags.error_at(
            crate::framework::AttributePath::attr("vpc_id"),
            "Nothing for this fabric to build",
            format!(
                "A {} fabric for {}{ethernet} with placement = \"{}\" on an existing network makes nothing. Leave the fabric out and \
                 give the hpc_gpu_cluster cloud, region, zone, gpu, vpc_id and subnet_id itself (inference and media need no fabric).",
                spec.cloud.display_name(),
                spec.sku.name,
                spec.placement.as_str(),
            ),
        );
    }
}

/// The configuration a state was made from, for parsing: a created network's ids are outputs, not inputs.
fn config_of_state(state: &Value) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    if state.get("cidr_block").is_present() {
        out.insert("vpc_id".into(), Value::Null);
        out.insert("subnet_id".into(), Value::Null);
    }
    Value::Map(out)
}

/// A fabric's lifecycle: its schema, parser, derivation and tag keys over the cloud's fabric backend.
pub(crate) static LIFECYCLE: Kind<FabricSpec> = Kind {
    kind: common::FABRIC,
    schema,
    parse: spec::parse_fabric,
    parse_state: |v| spec::parse_fabric(&config_of_state(v), &mut Diagnostics::new()),
    with_prior: |spec, _| spec,
    derive: |ctx, config, _, diags| derive(ctx, config, diags),
    ours: |v| vec![("hpc:fabric", v.get("name").as_str().unwrap_or_default().to_owned())],
    backend: backend::fabric,
    timeouts: Timeouts { create: THIRTY_MINUTES, update: THIRTY_MINUTES, delete: THIRTY_MINUTES },
    kept: "The pieces created so far are kept in state; apply again to finish, or destroy.",
    left: "What is left stays in state; run destroy again.",
    parts: &NoParts,
};

const THIRTY_MINUTES: Duration = Duration::from_secs(30 * 60);
