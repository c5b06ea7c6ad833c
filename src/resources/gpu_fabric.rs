//! `resource "hpc_gpu_fabric"`: the inter-node tier (network, placement, RDMA security) for one node type.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::common::{self, PlanShape};
use crate::catalog::Cloud;
use crate::clouds::{aws, azure, gcp, oci};
use crate::framework::{
    ApplyRequest, ApplyResponse, Attribute, Block, Context, Diagnostics, PlanRequest, PlanResponse, ReadOutcome, Resource, Schema, Type,
    Value,
};
use crate::ownership::Census;
use crate::planner::{self, Network, expansion_type, expansion_value, spec};

pub struct GpuFabric;

const SHAPE: PlanShape = PlanShape {
    assigned: &["id", "owner", "vpc_id", "subnet_id"],
    replace: &[
        "name",
        "cloud",
        "region",
        "zone",
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
        1,
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
        .attribute(Attribute::optional_computed("cidr_block", Type::String, "Address range of a created network (/16 to /24; default 10.0.0.0/16)."))
        .attribute(Attribute::optional_computed("placement", Type::String, "`cluster` (default: proximity placement), `none`, or on OCI `cluster-network`."))
        .attribute(Attribute::optional("max_distance", Type::Number, "GCP compact placement: maximum distance 1-3 (1 not allowed for A3 Ultra/A4)."))
        .attribute(Attribute::optional("resource_group", Type::String, "Azure: existing resource group to build in; otherwise one is created."))
        .attribute(Attribute::optional("compartment_id", Type::String, "OCI: compartment OCID to build in. Required on OCI."))
        .attribute(Attribute::optional("tags", Type::map(Type::String), "Tags on every piece, after the provider's `default_tags`."))
        .attribute(Attribute::computed("id", Type::String, "Identifier of the fabric, assigned when it is created."))
        .attribute(Attribute::computed("owner", Type::String, common::OWNER_DOC))
        .attribute(Attribute::computed("expansion", expansion_type(), "The vendor pieces this fabric is made of, as planned.")),
    )
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
        plan(ctx, req, diags)
    }

    async fn apply(&self, ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        common::apply_with(common::FABRIC, &req, diags, async |cloud, census, d| apply_in(ctx, &req, cloud, census, d).await).await
    }

    async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome {
        common::read_with(common::FABRIC, state, private, diags, async |cloud, census, d| {
            read_in(ctx, state, private, cloud, census, d).await
        })
        .await
    }

    async fn import(&self, ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        common::import_with(common::FABRIC, "aws/us-east-1/train", id, diags, async |cloud, census, d| {
            import_in(ctx, id, cloud, census, d).await
        })
        .await
    }

    fn upgrade(&self, version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        common::upgrade_owner(common::FABRIC, version, state)
    }
}

/// Creates, updates or destroys a fabric as `census`'s owner; also how a cluster without a fabric builds
/// and removes the network it makes for itself, under the cluster's owner.
pub(crate) async fn apply_in(ctx: &Context, req: &ApplyRequest<'_>, cloud: Cloud, census: &Census, d: &mut Diagnostics) -> Value {
    match cloud {
        Cloud::Aws => aws_apply(ctx, req, census, d).await,
        Cloud::Gcp => gcp_apply(ctx, req, census, d).await,
        Cloud::Azure => azure_apply(ctx, req, census, d).await,
        Cloud::Oci => oci_apply(ctx, req, census, d).await,
    }
}

/// Refreshes a fabric, admitting only `census`'s owner's pieces.
pub(crate) async fn read_in(
    ctx: &Context,
    state: &Value,
    private: &[u8],
    cloud: Cloud,
    census: &Census,
    d: &mut Diagnostics,
) -> ReadOutcome {
    match cloud {
        Cloud::Aws => aws_read(ctx, state, private, census, d).await,
        Cloud::Gcp => gcp_read(ctx, state, private, census, d).await,
        Cloud::Azure => azure_read(ctx, state, private, census, d).await,
        Cloud::Oci => oci_read(ctx, state, private, census, d).await,
    }
}

/// Imports a fabric, noting in `census` the markers its pieces carry.
pub(crate) async fn import_in(ctx: &Context, id: &str, cloud: Cloud, census: &Census, d: &mut Diagnostics) -> Option<Value> {
    match cloud {
        Cloud::Aws => aws_import(ctx, id, census, d).await,
        Cloud::Gcp => gcp_import(ctx, id, census, d).await,
        Cloud::Azure => azure_import(ctx, id, census, d).await,
        Cloud::Oci => oci_import(ctx, id, census, d).await,
    }
}

/// Plans a fabric; also how a cluster without a fabric plans the one it makes for itself.
pub(crate) fn plan(ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
    common::plan(&schema(), &SHAPE, req, diags, |config, diags| derive(ctx, config, diags))
}

/// On Google Cloud an Ethernet fabric with no placement on an existing network has no piece of its own
/// (no network, GPU NIC VPCs or placement policy), so nothing would record for its clusters which network
/// it joined: refused, pointing at the cluster's own network settings.
fn check_something_to_build(spec: &spec::FabricSpec, diags: &mut Diagnostics) {
    if spec.cloud == Cloud::Gcp
        && matches!(spec.network, Network::Existing { .. })
        && spec.placement == planner::Placement::None
        && spec.sku.fabric == crate::catalog::Fabric::None
    {
        diags.error_at(
            crate::framework::AttributePath::attr("vpc_id"),
            "Nothing for this fabric to build",
            format!(
                "A Google Cloud fabric for {} (Ethernet) with placement = \"none\" on an existing network makes nothing. Leave the \
                 fabric out and give the hpc_gpu_cluster cloud, region, zone, gpu, vpc_id and subnet_id itself (inference and media \
                 need no fabric).",
                spec.sku.name
            ),
        );
    }
}

/// The existing network a fabric joins, from a state or configuration.
fn given_network(v: &Value) -> Option<(String, String)> {
    if v.get("cidr_block").is_present() {
        return None;
    }
    Some((v.get("vpc_id").as_str()?.to_owned(), v.get("subnet_id").as_str()?.to_owned()))
}

fn all_tags(ctx: &Context, name: &str, own: &Value, census: &Census) -> BTreeMap<String, String> {
    common::owned_tags(ctx, own, &[("hpc:fabric", name)], census)
}

async fn aws_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    if req.planned.is_null() {
        let (region, name) = (req.prior.get("region").as_str().unwrap_or_default(), req.prior.get("name").as_str().unwrap_or_default());
        let client = aws::api::connect(ctx, region).await;
        let network = given_network(req.prior);
        let timeout = std::time::Duration::from_secs(30 * 60);
        let network = network.as_ref().map(|(v, s)| (v.as_str(), s.as_str()));
        return match aws::fabric::delete(ctx, &client, name, network, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                diags.error(
                    "Deleting the fabric failed",
                    format!("Fabric {name} in {region}: {e}. What is left stays in state; run destroy again."),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_fabric(req.config, diags) else { return req.prior.clone() };
    let client = aws::api::connect(ctx, &spec.region).await;
    let tags = all_tags(ctx, &spec.name, req.config.get("tags"), census);
    let stale = if req.prior.is_present() {
        common::stale_tags(&all_tags(ctx, &spec.name, req.prior.get("tags"), census), &tags)
    } else {
        Vec::new()
    };
    let id = aws::api::resource_id(&spec.region, &spec.name);
    census.set_import_id(&id);
    let result = aws::fabric::converge(&client, &spec, req.config.get("gpu").as_str(), &tags, &stale, census).await;
    let (ids, error) = match result {
        Ok(ids) => (ids, None),
        Err((ids, e)) => (ids, Some(e)),
    };
    let mut learned = BTreeMap::new();
    learned.insert("id".to_owned(), Value::from(id));
    if let Some(v) = ids.vpc_id {
        learned.insert("vpc_id".to_owned(), Value::from(v));
    }
    if let Some(s) = ids.subnet_id {
        learned.insert("subnet_id".to_owned(), Value::from(s));
    }
    if let Some(e) = error {
        diags.error(
            if req.prior.is_null() { "Creating the fabric failed" } else { "Updating the fabric failed" },
            format!(
                "Fabric {} in {}: {e}. The pieces created so far are kept in state; apply again to finish, or destroy.",
                spec.name, spec.region
            ),
        );
    }
    common::fill(req.planned, &learned)
}

async fn aws_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let (region, name) = (state.get("region").as_str().unwrap_or_default(), state.get("name").as_str().unwrap_or_default());
    let client = aws::api::connect(ctx, region).await;
    let network = given_network(state);
    let live = match aws::fabric::observe(&client, name, network.as_ref().map(|(v, s)| (v.as_str(), s.as_str())), census).await {
        Ok(live) => live,
        Err(e) => {
            diags.error("Reading the fabric failed", format!("Fabric {name} in {region}: {e}."));
            return ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
        }
    };
    if live.is_empty() {
        return ReadOutcome::Gone;
    }
    let kinds = aws::fabric::present_kinds(&live);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("expansion".into(), common::mark_missing(state.get("expansion"), |k| kinds.contains(&k)));
    ReadOutcome::Found { state: Value::Map(out), private: private.to_vec() }
}

async fn aws_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let Some((region, name)) = aws::api::parse_id(id) else {
        diags.error(
            "Invalid import id",
            format!("{id:?} is not an AWS fabric id: give \"aws/<region>/<fabric name>\", e.g. \"aws/us-east-1/train\"."),
        );
        return None;
    };
    let client = aws::api::connect(ctx, region).await;
    let found = match aws::fabric::observe(&client, name, None, census).await {
        Ok(live) => aws::fabric::imported_config(region, name, &live, &common::defaults(ctx).default_tags).map(|c| (c, live)),
        Err(e) => Err(e),
    };
    let (config, live) = match found {
        Ok(found) => found,
        Err(e) => {
            diags.error("Cannot import the fabric", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let mut assigned = BTreeMap::new();
    assigned.insert("id".to_owned(), Value::from(id));
    if let Some((vpc, _, _)) = &live.vpc {
        assigned.insert("vpc_id".to_owned(), Value::from(vpc.as_str()));
    }
    if let Some((subnet, _)) = &live.subnet {
        assigned.insert("subnet_id".to_owned(), Value::from(subnet.as_str()));
    }
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
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

/// `us-central1-a` -> `us-central1`.
fn gcp_region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

async fn gcp_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let timeout = std::time::Duration::from_secs(30 * 60);
    let Some(client) = gcp::api::connect_or_report(ctx, diags).await else { return req.prior.clone() };
    if req.planned.is_null() {
        let Some(spec) = spec::parse_fabric(&config_of_state(req.prior), diags) else { return req.prior.clone() };
        return match gcp::fabric::delete(ctx, &client, &spec, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                diags.error(
                    "Deleting the fabric failed",
                    format!("Fabric {} in {}: {e}. What is left stays in state; run destroy again.", spec.name, spec.region),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_fabric(req.config, diags) else { return req.prior.clone() };
    let zone = spec.zone.clone().unwrap_or_default();
    let id = gcp::api::resource_id(&zone, &spec.name);
    census.set_import_id(&id);
    let mut learned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
    let result = gcp::fabric::converge(ctx, &client, &spec, req.config.get("gpu").as_str(), timeout, census).await;
    let live = match &result {
        Ok(live) => Some(live.clone()),
        Err(_) => gcp::fabric::observe(ctx, &client, &spec.name, &spec.region, census).await.ok(),
    };
    if let (Network::Create { .. }, Some(live)) = (&spec.network, &live) {
        use gcp::fabric::Kind;
        for (attr, kind, name) in
            [("vpc_id", Kind::Network, format!("{}-vpc", spec.name)), ("subnet_id", Kind::Subnetwork, format!("{}-subnet", spec.name))]
        {
            if let Some(link) = live.self_links.get(&(kind, name)) {
                learned.insert(attr.to_owned(), Value::from(link.as_str()));
            }
        }
    }
    if let Err(e) = result {
        diags.error(
            if req.prior.is_null() { "Creating the fabric failed" } else { "Updating the fabric failed" },
            format!("Fabric {} in {zone}: {e}. The pieces created so far are kept in state; apply again to finish, or destroy.", spec.name),
        );
    }
    common::fill(req.planned, &learned)
}

async fn gcp_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let unchanged = || ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
    let mut quiet = Diagnostics::new();
    let Some(spec) = spec::parse_fabric(&config_of_state(state), &mut quiet) else { return unchanged() };
    let Some(client) = gcp::api::connect_or_report(ctx, diags).await else { return unchanged() };
    match gcp::fabric::observe(ctx, &client, &spec.name, &spec.region, census).await {
        Ok(live) if live.found.is_empty() => ReadOutcome::Gone,
        Ok(live) => {
            let mut out = state.as_map().cloned().unwrap_or_default();
            out.insert("expansion".into(), gcp::fabric::refreshed_expansion(state.get("expansion"), &spec, &client.project, &live));
            ReadOutcome::Found { state: Value::Map(out), private: private.to_vec() }
        }
        Err(e) => {
            diags.error("Reading the fabric failed", format!("Fabric {} in {}: {e}.", spec.name, spec.region));
            unchanged()
        }
    }
}

async fn gcp_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let Some((zone, name)) = gcp::api::parse_id(id) else {
        diags.error(
            "Invalid import id",
            format!("{id:?} is not a Google Cloud fabric id: give \"gcp/<zone>/<fabric name>\", e.g. \"gcp/us-central1-a/train\"."),
        );
        return None;
    };
    let region = gcp_region_of(zone);
    let client = gcp::api::connect_or_report(ctx, diags).await?;
    let found = match gcp::fabric::observe(ctx, &client, name, region, census).await {
        Ok(live) => gcp::fabric::imported_config(zone, name, region, &live).map(|c| (c, live)),
        Err(e) => Err(e),
    };
    let (config, live) = match found {
        Ok(f) => f,
        Err(e) => {
            diags.error("Cannot import the fabric", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
    use gcp::fabric::Kind;
    for (attr, kind, piece) in [("vpc_id", Kind::Network, format!("{name}-vpc")), ("subnet_id", Kind::Subnetwork, format!("{name}-subnet"))]
    {
        if let Some(link) = live.self_links.get(&(kind, piece)) {
            assigned.insert(attr.to_owned(), Value::from(link.as_str()));
        }
    }
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}

async fn azure_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let timeout = std::time::Duration::from_secs(30 * 60);
    let Some(arm) = azure::api::connect_or_report(ctx, diags).await else { return req.prior.clone() };
    if req.planned.is_null() {
        let Some(spec) = spec::parse_fabric(&config_of_state(req.prior), diags) else { return req.prior.clone() };
        return match azure::fabric::delete(ctx, &arm, &spec, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                diags.error(
                    "Deleting the fabric failed",
                    format!("Fabric {} in {}: {e}. What is left stays in state; run destroy again.", spec.name, spec.region),
                );
                req.prior.clone()
            }
        };
    }
    let Some(spec) = spec::parse_fabric(req.config, diags) else { return req.prior.clone() };
    let tags = all_tags(ctx, &spec.name, req.config.get("tags"), census);
    let retag = req.prior.is_present() && req.prior.get("tags") != req.config.get("tags");
    let group = azure::fabric::group_name(&spec.name, spec.resource_group.as_deref());
    let ids = azure::fabric::ids(&arm, &spec);
    let id = azure::api::resource_id(&group, &spec.name);
    census.set_import_id(&id);
    let mut learned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
    if let Network::Create { .. } = &spec.network {
        learned.insert("vpc_id".into(), Value::from(ids.vnet.as_str()));
        learned.insert("subnet_id".into(), Value::from(ids.subnet.as_str()));
    }
    if let Err(e) = azure::fabric::converge(ctx, &arm, &spec, req.config.get("gpu").as_str(), &tags, retag, timeout, census).await {
        diags.error(
            if req.prior.is_null() { "Creating the fabric failed" } else { "Updating the fabric failed" },
            format!(
                "Fabric {} in {}: {e}. The pieces created so far are kept in state; apply again to finish, or destroy.",
                spec.name, spec.region
            ),
        );
    }
    common::fill(req.planned, &learned)
}

async fn azure_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let unchanged = || ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
    let mut quiet = Diagnostics::new();
    let Some(spec) = spec::parse_fabric(&config_of_state(state), &mut quiet) else { return unchanged() };
    let Some(arm) = azure::api::connect_or_report(ctx, diags).await else { return unchanged() };
    let ids = azure::fabric::ids(&arm, &spec);
    match azure::fabric::observe(ctx, &arm, &ids, census).await {
        Ok(live) if live.is_empty() => ReadOutcome::Gone,
        Ok(live) => {
            let mut out = state.as_map().cloned().unwrap_or_default();
            out.insert("expansion".into(), common::mark_missing(state.get("expansion"), azure::fabric::present(&live, &ids)));
            ReadOutcome::Found { state: Value::Map(out), private: private.to_vec() }
        }
        Err(e) => {
            diags.error("Reading the fabric failed", format!("Fabric {} in {}: {e}.", spec.name, spec.region));
            unchanged()
        }
    }
}

async fn azure_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let Some((group, name)) = azure::api::parse_id(id) else {
        diags.error(
            "Invalid import id",
            format!("{id:?} is not an Azure fabric id: give \"azure/<resource group>/<fabric name>\", e.g. \"azure/train-rg/train\"."),
        );
        return None;
    };
    let arm = azure::api::connect_or_report(ctx, diags).await?;
    let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{name}-nsg", arm.group_id(group));
    let found = match arm.get(ctx, &nsg_id, azure::fabric::NETWORK_API).await {
        Ok(Some(nsg)) => {
            census.admit("azurerm_network_security_group", &format!("{name}-nsg"), crate::ownership::marker_in_json(&nsg["tags"]), None);
            let ours = group == format!("{name}-rg");
            azure::fabric::imported_config(group, name, &nsg, !ours, &common::defaults(ctx).default_tags)
        }
        Ok(None) => Err(format!("no fabric named {name:?} in resource group {group}: no security group {name}-nsg")),
        Err(e) => Err(e),
    };
    let config = match found {
        Ok(c) => c,
        Err(e) => {
            diags.error("Cannot import the fabric", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let spec = spec::parse_fabric(&config, diags)?;
    let ids = azure::fabric::ids(&arm, &spec);
    let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
    if let Network::Create { .. } = &spec.network {
        assigned.insert("vpc_id".into(), Value::from(ids.vnet.as_str()));
        assigned.insert("subnet_id".into(), Value::from(ids.subnet.as_str()));
    }
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}

async fn oci_apply(ctx: &Context, req: &ApplyRequest<'_>, census: &Census, diags: &mut Diagnostics) -> Value {
    let timeout = std::time::Duration::from_secs(30 * 60);
    let source = if req.planned.is_null() { config_of_state(req.prior) } else { req.config.clone() };
    let Some(spec) = spec::parse_fabric(&source, diags) else { return req.prior.clone() };
    let compartment = spec.compartment_id.clone().unwrap_or_default();
    let Some(client) = oci::api::connect_or_report(ctx, &spec.region, diags) else { return req.prior.clone() };
    if req.planned.is_null() {
        return match oci::fabric::delete(ctx, &client, &spec, &compartment, timeout, census).await {
            Ok(()) => Value::Null,
            Err(e) => {
                let detail = format!("Fabric {} in {}: {e}. What is left stays in state; run destroy again.", spec.name, spec.region);
                oci::api::report(diags, "Deleting the fabric failed", detail);
                req.prior.clone()
            }
        };
    }
    let tags = all_tags(ctx, &spec.name, req.config.get("tags"), census);
    let id = oci::api::resource_id(&spec.region, &compartment, &spec.name);
    census.set_import_id(&id);
    let mut learned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
    match oci::fabric::converge(ctx, &client, &spec, &compartment, req.config.get("gpu").as_str(), &tags, timeout, census).await {
        Ok(done) => {
            learned.insert("vpc_id".into(), Value::from(done.vcn));
            learned.insert("subnet_id".into(), Value::from(done.subnet));
            common::fill(req.planned, &learned)
        }
        Err(e) => {
            let detail = format!(
                "Fabric {} in {}: {e}. The pieces created so far are kept in state; apply again to finish, or destroy.",
                spec.name, spec.region
            );
            oci::api::report(diags, if req.prior.is_null() { "Creating the fabric failed" } else { "Updating the fabric failed" }, detail);
            if req.prior.is_null() && oci::fabric::observe(ctx, &client, &spec, &compartment, census).await.is_ok_and(|l| l.is_empty()) {
                return Value::Null;
            }
            common::fill(req.planned, &learned)
        }
    }
}

async fn oci_read(ctx: &Context, state: &Value, private: &[u8], census: &Census, diags: &mut Diagnostics) -> ReadOutcome {
    let unchanged = || ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
    let mut quiet = Diagnostics::new();
    let Some(spec) = spec::parse_fabric(&config_of_state(state), &mut quiet) else { return unchanged() };
    let compartment = spec.compartment_id.clone().unwrap_or_default();
    let Some(client) = oci::api::connect_or_report(ctx, &spec.region, diags) else { return unchanged() };
    match oci::fabric::observe(ctx, &client, &spec, &compartment, census).await {
        Ok(live) if live.is_empty() => ReadOutcome::Gone,
        Ok(live) => {
            let mut out = state.as_map().cloned().unwrap_or_default();
            out.insert("expansion".into(), common::mark_missing(state.get("expansion"), oci::fabric::present(&live)));
            ReadOutcome::Found { state: Value::Map(out), private: private.to_vec() }
        }
        Err(e) => {
            oci::api::report(diags, "Reading the fabric failed", format!("Fabric {} in {}: {e}.", spec.name, spec.region));
            unchanged()
        }
    }
}

async fn oci_import(ctx: &Context, id: &str, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
    let (region, compartment, name) = common::oci_import_id(id, "fabric", "train", diags)?;
    let client = oci::api::connect_or_report(ctx, region, diags)?;
    let found = match oci::fabric::find_nsg(ctx, &client, compartment, name, census).await {
        Ok(Some(nsg)) => oci::fabric::imported_config(region, compartment, name, &nsg, &common::defaults(ctx).default_tags),
        Ok(None) => Err(format!("no fabric named {name:?} in the compartment: no network security group {name}-nsg")),
        Err(e) => Err(e),
    };
    let config = match found {
        Ok(c) => c,
        Err(e) => {
            oci::api::report(diags, "Cannot import the fabric", format!("{id}: {e}."));
            return None;
        }
    };
    let derived = derive(ctx, &config, diags)?;
    let spec = spec::parse_fabric(&config, diags)?;
    let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
    if let Network::Create { .. } = &spec.network {
        match oci::fabric::observe(ctx, &client, &spec, compartment, census).await {
            Ok(live) => {
                for (attr, piece) in [("vpc_id", &live.vcn), ("subnet_id", &live.subnet)] {
                    if let Some(ocid) = piece.as_ref().and_then(|p| p["id"].as_str()) {
                        assigned.insert(attr.to_owned(), Value::from(ocid));
                    }
                }
            }
            Err(e) => {
                oci::api::report(diags, "Cannot import the fabric", format!("{id}: {e}."));
                return None;
            }
        }
    }
    Some(common::imported_state(&schema(), &config, &derived, &assigned))
}
