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
        prices: config.prices.clone(),
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
            let planned_value = planned.get(*attr).unwrap_or(&Value::Null);
            if req.prior.get(attr) != planned_value && !planned_value.is_unknown() {
                requires_replace.push(AttributePath::attr(attr));
            }
        }
    }
    PlanResponse { planned: Value::Map(planned), requires_replace, private: Vec::new() }
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

/// The cloud a resource (or the fabric it references) lives on.
pub fn cloud_of(v: &Value) -> Option<crate::catalog::Cloud> {
    v.get("cloud").as_str().or_else(|| v.get("fabric").get("cloud").as_str()).and_then(crate::catalog::Cloud::parse)
}

/// The cloud named by an import id's prefix (`aws/...`).
pub fn cloud_of_id(id: &str) -> Option<crate::catalog::Cloud> {
    id.split_once('/').and_then(|(c, _)| crate::catalog::Cloud::parse(c))
}

/// A state from the planned value: attributes still unknown take the value apply learned, or null
/// (a state may hold no unknowns).
pub fn fill(planned: &Value, learned: &BTreeMap<String, Value>) -> Value {
    let mut out = planned.as_map().cloned().unwrap_or_default();
    for (name, value) in out.iter_mut() {
        if let Some(v) = learned.get(name) {
            *value = v.clone();
        } else if value.is_unknown() {
            *value = Value::Null;
        }
    }
    Value::Map(out)
}

/// A whole state for an imported object: the configuration an import reconstructed, what the planner
/// derives from it, and what the cloud assigned. Attributes the schema has and nothing set are null.
pub fn imported_state(schema: &Schema, config: &Value, derived: &BTreeMap<String, Value>, assigned: &BTreeMap<String, Value>) -> Value {
    let mut out = BTreeMap::new();
    for attr in &schema.block.attributes {
        let name = attr.name.as_str();
        let value = assigned
            .get(name)
            .cloned()
            .or_else(|| config.get(name).is_present().then(|| config.get(name).clone()))
            .or_else(|| derived.get(name).cloned())
            .unwrap_or(Value::Null);
        out.insert(attr.name.clone(), value);
    }
    for block in &schema.block.blocks {
        out.insert(block.type_name.clone(), Value::Null);
    }
    Value::Map(out)
}

/// Keys of the tags a piece had before this change and no longer gets: removed from the cloud.
pub fn stale_tags(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    before.keys().filter(|k| !after.contains_key(*k)).cloned().collect()
}

/// A string map attribute as a BTreeMap.
pub fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_map().map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()).unwrap_or_default()
}

/// What a refresh writes into a piece that no longer exists; the plan then shows it going away again.
pub const MISSING: &str = "deleted outside; the next apply recreates it";

/// The expansion with the pieces whose kind `exists` rejects marked `missing`: what a refresh found.
/// Marking rather than dropping keeps the list aligned, so the plan shows exactly the missing pieces.
pub fn mark_missing(expansion: &Value, exists: impl Fn(&str) -> bool) -> Value {
    let Some(items) = expansion.as_list() else { return expansion.clone() };
    Value::list(items.iter().map(|p| {
        if p.get("kind").as_str().is_none_or(&exists) {
            return p.clone();
        }
        let mut piece = p.as_map().cloned().unwrap_or_default();
        if let Some(Value::Map(settings)) = piece.get_mut("settings") {
            settings.insert("missing".into(), Value::from(MISSING));
        }
        Value::Map(piece)
    }))
}

/// The expansion with one piece's `count` and settings replaced by what a refresh found.
pub fn patch_piece(expansion: &Value, kind: &str, count: Option<i64>, settings: &[(&str, String)]) -> Value {
    let Some(items) = expansion.as_list() else { return expansion.clone() };
    Value::list(items.iter().map(|p| {
        if p.get("kind").as_str() != Some(kind) {
            return p.clone();
        }
        let mut piece = p.as_map().cloned().unwrap_or_default();
        if let Some(n) = count {
            piece.insert("count".into(), Value::int(n));
        }
        if let Some(map) = piece.get_mut("settings").and_then(|s| match s {
            Value::Map(m) => Some(m),
            _ => None,
        }) {
            for (k, v) in settings {
                if map.contains_key(*k) {
                    map.insert((*k).to_owned(), Value::from(v.as_str()));
                }
            }
        }
        Value::Map(piece)
    }))
}

/// The clouds whose API clients this build has (every resource supports the same ones).
pub const LIVE: &[crate::catalog::Cloud] =
    &[crate::catalog::Cloud::Aws, crate::catalog::Cloud::Gcp, crate::catalog::Cloud::Azure, crate::catalog::Cloud::Oci];

/// Apply through the cloud's API client where this build has one ([`LIVE`]); elsewhere the "not available"
/// answer.
pub async fn apply_with(
    what: &str,
    req: &crate::framework::ApplyRequest<'_>,
    diags: &mut Diagnostics,
    client: impl AsyncFnOnce(crate::catalog::Cloud, &mut Diagnostics) -> Value,
) -> crate::framework::ApplyResponse {
    let target = if req.planned.is_null() { req.prior } else { req.planned };
    let new_state = match cloud_of(target) {
        Some(cloud) if LIVE.contains(&cloud) => client(cloud, diags).await,
        _ => apply_not_available(what, req, diags),
    };
    crate::framework::ApplyResponse { new_state, private: Vec::new() }
}

/// Refresh through the cloud's API client for objects it created; anything else reads as it is.
pub async fn read_with(
    state: &Value,
    private: &[u8],
    diags: &mut Diagnostics,
    client: impl AsyncFnOnce(crate::catalog::Cloud, &mut Diagnostics) -> crate::framework::ReadOutcome,
) -> crate::framework::ReadOutcome {
    match cloud_of(state) {
        Some(cloud) if LIVE.contains(&cloud) && state.get("id").is_present() => client(cloud, diags).await,
        _ => crate::framework::ReadOutcome::Found { state: state.clone(), private: private.to_vec() },
    }
}

/// Import by `<cloud>/<location>/<name>` through the cloud's API client, with clear answers otherwise.
pub async fn import_with(
    what: &str,
    example: &str,
    id: &str,
    diags: &mut Diagnostics,
    client: impl AsyncFnOnce(crate::catalog::Cloud, &mut Diagnostics) -> Option<Value>,
) -> Option<Value> {
    match cloud_of_id(id) {
        Some(cloud) if LIVE.contains(&cloud) => client(cloud, diags).await,
        Some(cloud) => {
            diags.error(
                "Import not available yet",
                format!("Importing a {what} on {cloud} needs its API client, which is not part of this release."),
            );
            None
        }
        None => {
            diags.error(
                "Invalid import id",
                format!("{id:?} is not a {what} id. They read \"<cloud>/<location>/<name>\", e.g. {example:?}."),
            );
            None
        }
    }
}

/// The `(region, compartment, name)` of an OCI import id, or a diagnostic showing the form.
pub fn oci_import_id<'a>(id: &'a str, what: &str, example: &str, diags: &mut Diagnostics) -> Option<(&'a str, &'a str, &'a str)> {
    let parsed = crate::clouds::oci::api::parse_id(id);
    if parsed.is_none() {
        diags.error(
            "Invalid import id",
            format!(
                "{id:?} is not an OCI {what} id: give \"oci/<region>/<compartment OCID>/<{what} name>\", e.g. \
                 \"oci/us-ashburn-1/ocid1.compartment.oc1..aaaa/{example}\"."
            ),
        );
    }
    parsed
}
