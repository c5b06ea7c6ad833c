//! What the three unified resources share: the object types they reference each other by, and the plan
//! mechanics that keep every plan valid for the CLI (only null-in-config computed attributes are set;
//! cloud-assigned ids are unknown on create and kept on update; everything else is known).

use std::collections::BTreeMap;

use crate::config::ProviderConfig;
use crate::framework::{AttributePath, Change, Context, Diagnostics, PlanRequest, PlanResponse, Schema, Type, Value};
use crate::ownership::Census;
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
    Defaults { prices: config.prices.clone(), default_tags: config.default_tags.clone(), gcp_project: config.gcp_project() }
}

/// Plans a create, update or destroy by the schema's plan modifiers: a computed attribute the
/// configuration leaves null is assigned at apply (unknown on create, kept on update) or derived, and an
/// update replaces the object where an attribute's change requires it. `derive` computes the planner's
/// attributes from a wholly known configuration; it returns `None` when something is still unknown (those
/// attributes are then planned unknown) or invalid (diagnostics say why).
pub fn plan(
    schema: &Schema,
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
        let value = if attr.assigned_at_apply {
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
        for attr in &schema.block.attributes {
            let name = attr.name.as_str();
            let change = Change {
                resource: req.config,
                prior: req.prior.get(name),
                config: req.config.get(name),
                planned: planned.get(name).unwrap_or(&Value::Null),
            };
            if attr.forces_replacement(&change) {
                requires_replace.push(AttributePath::attr(name));
            }
        }
    }
    PlanResponse { planned: Value::Map(planned), requires_replace, private: Vec::new() }
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

/// A whole state for an imported object: the configuration an import reconstructed (its attributes and
/// blocks), what the planner derives from it, and what the cloud assigned. Attributes and blocks the schema
/// has and nothing set are null.
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
    // Blocks as the import reconstructed them (a pool's autoscaling bounds, its taints); an empty list of
    // blocks is none.
    for block in &schema.block.blocks {
        let given = config.get(&block.type_name);
        let kept = given.is_present() && given.as_list().is_none_or(|l| !l.is_empty());
        out.insert(block.type_name.clone(), if kept { given.clone() } else { Value::Null });
    }
    Value::Map(out)
}

/// Which managed resource a lifecycle step serves: its type name and how diagnostics name it.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    pub type_name: &'static str,
    pub noun: &'static str,
}

pub const FABRIC: Kind = Kind { type_name: "hpc_gpu_fabric", noun: "Fabric" };
pub const CLUSTER: Kind = Kind { type_name: "hpc_gpu_cluster", noun: "Cluster" };
pub const FILESYSTEM: Kind = Kind { type_name: "hpc_parallel_filesystem", noun: "Filesystem" };

/// The journal's key for a create: the resource type, where it lives and its name.
fn journal_key(kind: Kind, planned: &Value) -> String {
    let fabric = planned.get("fabric");
    let parts = [
        planned.get("cloud"),
        planned.get("region"),
        planned.get("zone"),
        planned.get("resource_group"),
        planned.get("compartment_id"),
        fabric.get("id"),
        planned.get("name"),
    ];
    let parts: Vec<&str> = parts.iter().map(|v| v.as_str().unwrap_or_default()).collect();
    format!("{}|{}", kind.type_name, parts.join("|"))
}

/// What the `owner` attribute says in the docs.
pub const OWNER_DOC: &str = "The marker every piece of this resource carries (tag or label `hpc:owner`): this state changes and deletes only \
     pieces with it, so a same-named resource of another state, workspace or configuration is never touched. Assigned when it is \
     created; `import` takes over the marker the pieces carry.";

/// The tags every piece gets: the provider's `default_tags`, the resource's `tags`, the provider's own
/// (`ours`) and the owner's marker.
pub fn owned_tags(ctx: &Context, own: &Value, ours: &[(&str, &str)], census: &Census) -> BTreeMap<String, String> {
    let mut ours = ours.to_vec();
    if let Some(marker) = census.marker() {
        ours.push((crate::ownership::KEY, marker));
    }
    defaults(ctx).tags(&crate::clouds::shared::string_map(own), &ours)
}

/// State upgrade to schema version 1: state written before owner markers records the legacy owner of its
/// id, which owns the unmarked pieces it always had; nothing in the cloud changes and nothing is planned.
pub fn upgrade_owner(kind: Kind, version: i64, state: Value) -> Value {
    if version >= 1 || state.get(crate::ownership::ATTRIBUTE).is_present() {
        return state;
    }
    let Value::Map(mut map) = state else { return state };
    if let Some(id) = map.get("id").and_then(Value::as_str).map(str::to_owned) {
        let owner = crate::ownership::Owner::legacy(kind.type_name, &id);
        map.insert(crate::ownership::ATTRIBUTE.into(), Value::from(owner.marker()));
    }
    Value::Map(map)
}

/// The state with the owner's marker recorded.
pub fn with_owner(state: Value, owner: &crate::ownership::Owner) -> Value {
    match state {
        Value::Map(mut m) => {
            m.insert(crate::ownership::ATTRIBUTE.into(), Value::from(owner.marker()));
            Value::Map(m)
        }
        other => other,
    }
}

/// One apply (create, update or destroy) through the cloud's API client, under the ownership rule: the
/// owner comes from the prior state, or for a create from the journal (an interrupted create resumes) or
/// freshly minted; `client` admits only that owner's pieces (a [`Census`]) and gates every create; a
/// refused create says at `name` what exists and how out, and nothing is made; what another owner has is
/// left alone, with a warning; the new state records the owner.
pub async fn apply_with(
    kind: Kind,
    req: &crate::framework::ApplyRequest<'_>,
    diags: &mut Diagnostics,
    client: impl AsyncFnOnce(crate::catalog::Cloud, &Census, &mut Diagnostics) -> Value,
) -> crate::framework::ApplyResponse {
    use crate::ownership::{Owner, journal};
    let target = if req.planned.is_null() { req.prior } else { req.planned };
    let Some(cloud) = cloud_of(target) else {
        // Planned, so the cloud was valid: only a state with no cloud at all (nothing was ever made) gets here.
        return crate::framework::ApplyResponse { new_state: Value::Null, private: Vec::new() };
    };
    let creating = req.prior.is_null() && req.planned.is_present();
    let key = journal_key(kind, target);
    let census = if creating {
        let (owner, start) = journal::earlier(&key).unwrap_or_else(|| (Owner::mint(), crate::ownership::Start::Fresh));
        // Pending from now until the state is handed back, a resumed create too (it may be killed again).
        if let Err(e) = journal::begin(&key, &owner) {
            diags.warning(
                "Create not journalled",
                format!(
                    "{e}. The create goes on; if the provider is killed before it finishes, the next apply cannot resume it and says so."
                ),
            );
        }
        Census::creating(owner, start)
    } else {
        Census::owned(Owner::of_state(kind.type_name, req.prior))
    };
    let mut inner = Diagnostics::new();
    let mut new_state = client(cloud, &census, &mut inner).await;
    let name = target.get("name").as_str().unwrap_or_default();
    let failed = inner.has_errors();
    if census.refused() {
        // The cloud step's own error says less than this; its warnings still stand.
        for d in inner.0.into_iter().filter(|d| d.severity != crate::framework::Severity::Error) {
            diags.push(d);
        }
        diags.error_at(AttributePath::attr("name"), "Name already in use", census.refusal(kind.noun, name));
        if !census.made_before_refusal() {
            new_state = Value::Null;
        }
    } else {
        diags.extend(inner);
        if let Some(text) = census.left_alone(kind.noun, name) {
            diags.warning("Pieces of another owner left alone", text);
        }
    }
    if creating {
        // Handed back: forgotten, or kept for the replacement of a failed (tainted) object.
        journal::end(&key, census.owner(), failed && new_state.is_present());
    } else if req.planned.is_null() && new_state.is_null() {
        journal::deleted(&key, census.owner());
    }
    crate::framework::ApplyResponse { new_state: with_owner(new_state, census.owner()), private: Vec::new() }
}

/// Refresh through the cloud's API client for objects it created, admitting only the state's owner's
/// pieces; anything else reads as it is.
pub async fn read_with(
    kind: Kind,
    state: &Value,
    private: &[u8],
    diags: &mut Diagnostics,
    client: impl AsyncFnOnce(crate::catalog::Cloud, &Census, &mut Diagnostics) -> crate::framework::ReadOutcome,
) -> crate::framework::ReadOutcome {
    match cloud_of(state) {
        Some(cloud) if state.get("id").is_present() => {
            let census = Census::owned(crate::ownership::Owner::of_state(kind.type_name, state));
            match client(cloud, &census, diags).await {
                crate::framework::ReadOutcome::Found { state, private } => {
                    crate::framework::ReadOutcome::Found { state: with_owner(state, census.owner()), private }
                }
                gone => gone,
            }
        }
        _ => crate::framework::ReadOutcome::Found { state: state.clone(), private: private.to_vec() },
    }
}

/// Import by `<cloud>/<location>/<name>` through the cloud's API client, with clear answers otherwise.
/// Import is the one way to adopt pieces another state made: the imported state records the marker they
/// carry (the legacy owner of the id when they carry none), and refuses when several owners' pieces answer
/// to the id.
pub async fn import_with(
    kind: Kind,
    example: &str,
    id: &str,
    diags: &mut Diagnostics,
    client: impl AsyncFnOnce(crate::catalog::Cloud, &Census, &mut Diagnostics) -> Option<Value>,
) -> Option<Value> {
    let what = kind.noun.to_lowercase();
    match cloud_of_id(id) {
        Some(cloud) => {
            let census = Census::adopting();
            let state = client(cloud, &census, diags).await?;
            let owner = adopted_owner(kind, id, &census, diags)?;
            Some(with_owner(state, &owner))
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

/// The owner an import takes over: the one marker the pieces carry, or the legacy owner of the id when
/// they carry none; a diagnostic when pieces of several owners answer to the id.
pub fn adopted_owner(kind: Kind, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<crate::ownership::Owner> {
    match census.adopted() {
        Ok(Some(marker)) => crate::ownership::Owner::parse(&marker).or_else(|| Some(crate::ownership::Owner::legacy(kind.type_name, id))),
        Ok(None) => Some(crate::ownership::Owner::legacy(kind.type_name, id)),
        Err(markers) => {
            let listed: Vec<String> = markers.iter().map(|m| m.clone().unwrap_or_else(|| "(no owner marker)".to_owned())).collect();
            diags.error(
                "Several owners",
                format!(
                    "Pieces of {} owners answer to {id:?} ({}), so import cannot tell which {} to adopt. Delete or rename the pieces that \
                     do not belong to it, then import again.",
                    listed.len(),
                    listed.join(", "),
                    kind.noun.to_lowercase()
                ),
            );
            None
        }
    }
}

// ------------------------------------------------------------------------------------------- identity

/// The identity of every managed resource: the parts of its import id (`<cloud>/<location>/<name>`, on
/// OCI `oci/<region>/<compartment OCID>/<name>`), so an `import` block can say
/// `identity = { cloud = "aws", location = "us-east-1", name = "train" }`.
pub fn identity_schema() -> crate::framework::IdentitySchema {
    use crate::framework::IdentityAttribute as A;
    let attr = |name, required_for_import, description| A { name, ty: Type::String, required_for_import, description };
    crate::framework::IdentitySchema {
        version: 0,
        attributes: vec![
            attr("cloud", true, "`aws`, `azure`, `gcp` or `oci`."),
            attr("location", true, "AWS and OCI: the region; Google Cloud: the zone; Azure: the resource group."),
            attr("compartment_id", false, "OCI only: the compartment OCID."),
            attr("name", true, "The resource's name (an AWS filesystem: its name or its file system id)."),
        ],
    }
}

/// The identity of the object a state describes, read from its id; `None` until the id is known.
pub fn identity(state: &Value) -> Option<Value> {
    let id = state.get("id").as_str()?;
    let parts: Vec<&str> = id.split('/').collect();
    let cloud = crate::catalog::Cloud::parse(parts.first()?)?;
    let (location, compartment, name) = match (crate::clouds::id_has_compartment(cloud), parts.as_slice()) {
        (true, [_, region, compartment, name]) => (*region, Value::from(*compartment), *name),
        (false, [_, location, name]) => (*location, Value::Null, *name),
        _ => return None,
    };
    Some(Value::object([
        ("cloud", Value::from(cloud.as_str())),
        ("location", Value::from(location)),
        ("compartment_id", compartment),
        ("name", Value::from(name)),
    ]))
}

/// The import id an identity stands for.
pub fn import_id(identity: &Value) -> Result<String, String> {
    let part = |k: &str| identity.get(k).as_str().filter(|v| !v.is_empty() && !v.contains('/'));
    let missing = |k: &str| format!("identity.{k} must be set, without a \"/\"");
    let cloud = part("cloud").ok_or_else(|| missing("cloud"))?;
    let Some(cloud) = crate::catalog::Cloud::parse(cloud) else {
        return Err(format!(
            "identity.cloud {cloud:?} is not a cloud this provider supports; valid values are {}",
            crate::framework::one_of(&crate::catalog::Cloud::NAMES)
        ));
    };
    let location = part("location").ok_or_else(|| missing("location"))?;
    let name = part("name").ok_or_else(|| missing("name"))?;
    match (crate::clouds::id_has_compartment(cloud), part("compartment_id")) {
        (true, Some(c)) => Ok(format!("{}/{location}/{c}/{name}", cloud.as_str())),
        (true, None) => Err(missing("compartment_id")),
        (false, None) => Ok(format!("{}/{location}/{name}", cloud.as_str())),
        (false, Some(_)) => Err(format!("identity.compartment_id is for OCI only; leave it out on {}", cloud.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an import reconstructs in blocks (a pool's autoscaling bounds and taints, a batch size) is in the
    /// imported state: left out, the next plan would add it back, and the import would not equal what the
    /// apply made.
    #[test]
    fn an_imported_state_keeps_the_blocks_the_import_reconstructed() {
        let schema = crate::resources::node_pool::schema();
        let config = Value::object([
            ("name", Value::from("gpu")),
            ("autoscaling", Value::object([("min_count", Value::int(0)), ("max_count", Value::int(8))])),
            (
                "taint",
                Value::list([Value::object([
                    ("key", Value::from("k")),
                    ("value", Value::from("v")),
                    ("effect", Value::from("NoSchedule")),
                ])]),
            ),
        ]);
        let state = imported_state(&schema, &config, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(state.get("autoscaling").get("max_count"), &Value::int(8));
        assert_eq!(state.get("taint").as_list().map(|l| l.len()), Some(1));
        assert_eq!(state.get("update_strategy"), &Value::Null, "a block the import did not set is null");
        assert_eq!(state.get("timeouts"), &Value::Null);
    }

    #[test]
    fn an_identity_and_its_import_id_stand_for_each_other() {
        for id in
            ["aws/us-east-1/train", "gcp/us-central1-a/train", "azure/train-rg/train", "oci/us-ashburn-1/ocid1.compartment.oc1..x/train"]
        {
            let identity = identity(&Value::object([("id", Value::from(id))])).unwrap_or_else(|| panic!("{id}"));
            assert_eq!(import_id(&identity).as_deref(), Ok(id));
        }
        assert!(identity(&Value::object([("id", Value::Unknown)])).is_none(), "no identity before the id is known");
        assert!(identity(&Value::object([("id", Value::from("oci/us-ashburn-1/train"))])).is_none());
        let bare = |c: &str, comp: Value| {
            Value::object([("cloud", Value::from(c)), ("location", Value::from("r")), ("compartment_id", comp), ("name", Value::from("n"))])
        };
        assert!(import_id(&bare("oci", Value::Null)).unwrap_err().contains("compartment_id must be set"));
        assert!(import_id(&bare("aws", Value::from("c"))).unwrap_err().contains("for OCI only"));
        assert!(import_id(&bare("gpc", Value::Null)).unwrap_err().contains("\"aws\", \"azure\", \"gcp\" or \"oci\""));
    }
}
