//! What the three unified resources share: the object types they reference each other by, and the plan
//! mechanics that keep every plan valid for the CLI (only null-in-config computed attributes are set;
//! cloud-assigned ids are unknown on create and kept on update; everything else is known).

use std::collections::BTreeMap;

use crate::config::ProviderConfig;
use crate::framework::{AttributePath, Context, Diagnostics, PlanRequest, PlanResponse, Schema, Type, Value};
use crate::planner::Defaults;

/// `fabric = hpc_gpu_fabric.x`: the fabric attributes a cluster or filesystem needs, all known at plan
/// time except `id`. Every attribute listed must exist on the fabric (the CLI converts the object).
pub fn fabric_ref_type() -> Type {
    Type::object([
        ("id", Type::String),
        ("cloud", Type::String),
        ("region", Type::String),
        ("zone", Type::String),
        ("name", Type::String),
        ("instance_type", Type::String),
        ("placement", Type::String),
    ])
}

/// `cluster = hpc_gpu_cluster.x`, for the filesystem's throughput check.
pub fn cluster_ref_type() -> Type {
    Type::object([("id", Type::String), ("name", Type::String), ("gpus_total", Type::Number), ("workload", Type::String)])
}

pub fn defaults(ctx: &Context) -> Defaults {
    let Some(config) = ctx.configured::<ProviderConfig>() else { return Defaults::default() };
    Defaults {
        default_tags: config.default_tags.clone(),
        gcp_project: config.clouds.get(&crate::catalog::Cloud::Gcp).and_then(|g| g.settings.get("project").cloned()),
    }
}

/// How a resource's attributes behave in a plan.
pub struct PlanShape {
    /// Computed attributes the cloud assigns at apply: unknown on create, kept from prior state on update.
    pub assigned: &'static [&'static str],
    /// Attributes whose change replaces the resource (the rest update in place).
    pub replace: &'static [&'static str],
}

/// Plans a create, update or destroy. `derive` computes the planner's attributes from a wholly known
/// configuration; it returns `None` when something is still unknown (those attributes are then planned
/// unknown) or invalid (diagnostics say why).
pub fn plan(
    schema: &Schema,
    shape: &PlanShape,
    req: PlanRequest<'_>,
    diags: &mut Diagnostics,
    derive: impl FnOnce(&Value, &mut Diagnostics) -> Option<BTreeMap<String, Value>>,
) -> PlanResponse {
    if req.proposed.is_null() {
        return PlanResponse { planned: Value::Null, ..Default::default() };
    }
    let creating = req.prior.is_null();
    let derived = derive(req.config, diags);
    let mut planned: BTreeMap<String, Value> = req.proposed.as_map().cloned().unwrap_or_default();
    for attr in schema.block.attributes.iter().filter(|a| a.computed) {
        let name = attr.name.as_str();
        if attr.optional && !req.config.get(name).is_null() {
            continue; // the user's value stands, exactly as written
        }
        let value = if shape.assigned.contains(&name) {
            if creating { Value::Unknown } else { req.prior.get(name).clone() }
        } else {
            match &derived {
                Some(values) => values.get(name).cloned().unwrap_or(Value::Null),
                None => Value::Unknown,
            }
        };
        planned.insert(attr.name.clone(), value);
    }
    let mut requires_replace = Vec::new();
    if !creating {
        for attr in shape.replace {
            if req.prior.get(attr) != req.config.get(attr) && !(req.config.get(attr).is_null() && is_computed(schema, attr)) {
                requires_replace.push(AttributePath::attr(attr));
            }
        }
    }
    PlanResponse { planned: Value::Map(planned), requires_replace, private: Vec::new() }
}

fn is_computed(schema: &Schema, attr: &str) -> bool {
    schema.block.find_attribute(attr).is_some_and(|a| a.computed)
}

/// Apply is not available until the cloud's API client lands (issues #5 to #8): refuse clearly, create
/// nothing, and keep whatever state exists.
pub fn apply_not_available(kind: &str, req: &crate::framework::ApplyRequest<'_>, diags: &mut Diagnostics) -> Value {
    if req.planned.is_null() {
        // Destroying something this build never created: nothing exists in any cloud, drop it from state.
        return Value::Null;
    }
    let cloud = req.planned.get("cloud").as_str().or_else(|| req.planned.get("fabric").get("cloud").as_str()).unwrap_or("this cloud");
    diags.error(
        "Apply not available yet",
        format!(
            "This build of terraform-provider-hpc plans {kind} on {cloud} (see the expansion in the plan) but cannot create it yet: the {cloud} \
             API client is not part of this release. Nothing was created."
        ),
    );
    req.prior.clone()
}
