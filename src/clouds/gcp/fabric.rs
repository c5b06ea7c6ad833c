//! `hpc_gpu_fabric` on Google Cloud: the host VPC (unless given), the GPU NIC VPCs of the machine family
//! (A3 High 4, A3 Mega 8 at MTU 8244; A3 Ultra/A4/A4X a second gVNIC VPC and one RoCE VPC with the zone's
//! network profile and a subnet per MRDMA NIC, 8 or on A4X 4), intra-cluster firewall rules and the compact
//! placement policy (not on A4X: its clusters make one per NVLink domain, see `cluster::domain_policies`).
//! Networks carry no labels, so every piece has a deterministic name (`<fabric>-...`) and a description
//! recording the fabric and its owner's marker (`owner=`), which is how refresh and import find them: one
//! list call per kind. Only pieces the census admits are used, changed or deleted.
//! The lifecycle's backend for this kind, `Backend<FabricSpec>` on `backend::Gcp`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_compute_v1::model;
use serde_json::{Value as Json, json};

use super::api::{self, Gcp, call};
use super::backend::{self, configured, in_zone, region_of};
use super::fabric;
use super::topology::{Shape, topology};
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{FabricSpec, Network};
use crate::ownership::Census;

pub use super::topology::Kind;

/// One piece to exist: its kind, name, the expansion piece it belongs to, and its body.
#[derive(Clone, Debug)]
pub struct Item {
    pub kind: Kind,
    pub name: String,
    pub piece: String,
    pub body: Json,
}

/// What the description of every piece says, so an import can rebuild the fabric's configuration, and
/// whose it is (descriptions are fixed at creation, so the marker goes in with it).
pub fn description(spec: &FabricSpec, gpu: Option<&str>, owner: Option<&str>) -> String {
    let mut s = format!(
        "hpc-provider fabric={} instance_type={} zone={} placement={}",
        spec.name,
        spec.sku.name,
        spec.zone.as_deref().unwrap_or_default(),
        spec.placement.as_str()
    );
    if let Some(g) = gpu {
        s.push_str(&format!(" gpu={g}"));
    }
    if let Some(d) = spec.max_distance {
        s.push_str(&format!(" max_distance={d}"));
    }
    match &spec.network {
        Network::Create { cidr } => s.push_str(&format!(" cidr={cidr}")),
        Network::Existing { vpc_id, subnet_id } => s.push_str(&format!(" vpc={vpc_id} subnet={subnet_id}")),
    }
    if let Some(o) = owner {
        s.push_str(&format!(" owner={o}"));
    }
    s
}

/// Parses a description written by [`description`].
pub fn parse_description(text: &str) -> Option<BTreeMap<String, String>> {
    let rest = text.strip_prefix("hpc-provider ")?;
    Some(rest.split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
}

/// Every piece of the fabric, in creation order (networks before what lives in them): the fabric's
/// [`topology`](super::topology), each resource with its request body.
pub fn desired(spec: &FabricSpec, project: &str, gpu: Option<&str>, owner: Option<&str>) -> Vec<Item> {
    let desc = description(spec, gpu, owner);
    let net = |name: &str| format!("projects/{project}/global/networks/{name}");
    let mut out: Vec<Item> = topology(spec, project)
        .resources()
        .map(|(group, r)| {
            let name = r.name.clone();
            let body = match &r.shape {
                Shape::Network { mtu, profile } => {
                    let mut body = json!({"name": name, "description": desc, "autoCreateSubnetworks": false, "mtu": mtu});
                    if let Some(p) = profile {
                        body["networkProfile"] = json!(p);
                    }
                    body
                }
                // The region is in the request's path (the body's `region` is a URL, and set by the service).
                Shape::Subnetwork { network, range } => {
                    json!({"name": name, "description": desc, "network": net(network), "ipCidrRange": range})
                }
                Shape::Firewall { network, source } => json!({"name": name, "description": desc, "network": net(network),
                    "direction": "INGRESS", "allowed": [{"IPProtocol": "all"}], "sourceRanges": [source]}),
                Shape::Policy { max_distance } => {
                    let mut group = json!({"collocation": "COLLOCATED"});
                    if let Some(d) = max_distance {
                        group["maxDistance"] = json!(d);
                    }
                    json!({"name": name, "description": desc, "groupPlacementPolicy": group})
                }
            };
            Item { kind: group.kind, name, piece: group.piece.clone(), body }
        })
        .collect();
    // Kind by kind, each in the topology's order (a stable sort).
    out.sort_by_key(|i| i.kind);
    out
}

/// What exists with the fabric's name prefix: names and descriptions per kind (one list per kind).
#[derive(Clone, Debug, Default)]
pub struct FabricLive {
    pub found: BTreeMap<(Kind, String), Option<String>>,
    pub self_links: BTreeMap<(Kind, String), String>,
}

impl FabricLive {
    pub fn has(&self, kind: Kind, name: &str) -> bool {
        self.found.contains_key(&(kind, name.to_owned()))
    }

    /// The description of any piece of the fabric (they all carry the same).
    pub fn description(&self) -> Option<BTreeMap<String, String>> {
        self.found.values().flatten().find_map(|d| parse_description(d))
    }
}

/// Whether `name` is one a fabric called `fabric` gives its pieces (`<fabric>-vpc`, `<fabric>-gpu-3`, ...),
/// for pieces whose description does not say which fabric they belong to.
fn is_piece_name(fabric: &str, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(fabric).and_then(|r| r.strip_prefix('-')) else { return false };
    let numbered = |prefix: &str, suffix: &str| {
        rest.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(suffix))
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
    };
    matches!(rest, "vpc" | "subnet" | "internal" | "gvnic-1" | "gvnic-1-internal" | "rdma" | "placement")
        || numbered("gpu-", "")
        || numbered("gpu-", "-internal")
        || numbered("rdma-", "")
}

/// One listed item, as far as the census is concerned.
struct Listed {
    name: Option<String>,
    description: Option<String>,
    self_link: Option<String>,
    created: Option<String>,
}

fn keep(live: &mut FabricLive, kind: Kind, fabric: &str, item: Listed, census: &Census) {
    let Some(name) = item.name else { return };
    let described = item.description.as_deref().and_then(parse_description);
    // A piece of a fabric with a longer name (`train-nodes-vpc` is not fabric `train`'s) is nobody's
    // business here; one with our naming and no description of ours still takes the name.
    let named_for_us = match &described {
        Some(d) => d.get("fabric").map(String::as_str) == Some(fabric) && name.starts_with(&format!("{fabric}-")),
        None => is_piece_name(fabric, &name),
    };
    if !named_for_us {
        return;
    }
    let marker = described.as_ref().and_then(|d| d.get("owner")).map(String::as_str);
    if !census.admit(piece_name(kind), &name, marker, item.created.as_deref()) {
        return;
    }
    if let Some(link) = item.self_link {
        live.self_links.insert((kind, name.clone()), link);
    }
    live.found.insert((kind, name), item.description);
}

/// Lists what exists of fabric `name` in `region` and is the census's to use: networks, subnetworks,
/// firewalls, resource policies, one paginated list each.
pub async fn observe(ctx: &Context, gcp: &Gcp, name: &str, region: &str, census: &Census) -> Result<FabricLive, CloudError> {
    let p = &gcp.project;
    let mut live = FabricLive::default();
    // Pages through one list call, keeping the items named `<fabric>-...`.
    macro_rules! list_all {
        ($kind:expr, $what:expr, |$t:ident| $request:expr) => {{
            let mut token = String::new();
            let mut pages = crate::clouds::shared::Pages::new("Compute Engine", "nextPageToken");
            loop {
                let $t = token.clone();
                let page = call(ctx, $what, || $request).await?;
                for i in page.items {
                    let item = Listed { name: i.name, description: i.description, self_link: i.self_link, created: i.creation_timestamp };
                    keep(&mut live, $kind, name, item, census);
                }
                match pages.next(page.next_page_token.filter(|t| !t.is_empty()), $what)? {
                    Some(next) => token = next,
                    None => break,
                }
            }
        }};
    }
    list_all!(Kind::Network, "listing networks", |t| gcp.networks.list().set_project(p).set_page_token(&t).send());
    list_all!(Kind::Subnetwork, "listing subnetworks", |t| gcp
        .subnetworks
        .list()
        .set_project(p)
        .set_region(region)
        .set_page_token(&t)
        .send());
    list_all!(Kind::Firewall, "listing firewall rules", |t| gcp.firewalls.list().set_project(p).set_page_token(&t).send());
    list_all!(Kind::Policy, "listing resource policies", |t| gcp
        .policies
        .list()
        .set_project(p)
        .set_region(region)
        .set_page_token(&t)
        .send());
    Ok(live)
}

async fn insert(ctx: &Context, gcp: &Gcp, item: &Item, region: &str, timeout: Duration) -> Result<(), CloudError> {
    let p = &gcp.project;
    let what = format!("creating {} {}", kind_word(item.kind), item.name);
    let bad = |e: serde_json::Error| format!("{what}: {e}");
    // One request id for every attempt of this insert (Compute's `requestId`): a retry after a lost answer gets
    // the first attempt's operation, and nothing is made twice.
    let rid = api::request_id();
    let op = match item.kind {
        Kind::Network => {
            let body: model::Network = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.networks.insert().set_project(p).set_request_id(&rid).set_body(body.clone()).send()).await?
        }
        Kind::Subnetwork => {
            let body: model::Subnetwork = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || {
                gcp.subnetworks.insert().set_project(p).set_region(region).set_request_id(&rid).set_body(body.clone()).send()
            })
            .await?
        }
        Kind::Firewall => {
            let body: model::Firewall = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.firewalls.insert().set_project(p).set_request_id(&rid).set_body(body.clone()).send()).await?
        }
        // maxDistance is a field of Compute Engine's beta API only (v1's group placement policy has none).
        Kind::Policy if item.body["groupPlacementPolicy"].get("maxDistance").is_some() => {
            let url =
                format!("{}/compute/beta/projects/{p}/regions/{region}/resourcePolicies?requestId={rid}", api::base(gcp, api::COMPUTE));
            let answer = api::rest(ctx, gcp, reqwest::Method::POST, &url, Some(&item.body), &what).await?;
            serde_json::from_value::<model::Operation>(answer)
                .map_err(|e| CloudError::other(format!("{what}: the answer is not an operation: {e}")))?
        }
        Kind::Policy => {
            let body: model::ResourcePolicy = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.policies.insert().set_project(p).set_region(region).set_request_id(&rid).set_body(body.clone()).send())
                .await?
        }
    };
    api::wait(ctx, gcp, op, &what, timeout).await
}

async fn remove(ctx: &Context, gcp: &Gcp, kind: Kind, name: &str, region: &str, timeout: Duration) -> Result<(), CloudError> {
    let p = &gcp.project;
    let what = format!("deleting {} {name}", kind_word(kind));
    let sent = match kind {
        Kind::Network => call(ctx, &what, || gcp.networks.delete().set_project(p).set_network(name).send()).await,
        Kind::Subnetwork => {
            call(ctx, &what, || gcp.subnetworks.delete().set_project(p).set_region(region).set_subnetwork(name).send()).await
        }
        Kind::Firewall => call(ctx, &what, || gcp.firewalls.delete().set_project(p).set_firewall(name).send()).await,
        Kind::Policy => call(ctx, &what, || gcp.policies.delete().set_project(p).set_region(region).set_resource_policy(name).send()).await,
    };
    match sent {
        Ok(op) => api::wait(ctx, gcp, op, &what, timeout).await,
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

pub fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Network => "network",
        Kind::Subnetwork => "subnetwork",
        Kind::Firewall => "firewall rule",
        Kind::Policy => "resource policy",
    }
}

/// Creates what is missing. The host network of an existing estate must exist (by name or self link).
pub async fn converge(
    ctx: &Context,
    gcp: &Gcp,
    spec: &FabricSpec,
    gpu: Option<&str>,
    timeout: Duration,
    census: &Census,
) -> Result<FabricLive, CloudError> {
    let live = observe(ctx, gcp, &spec.name, &spec.region, census).await?;
    census.gate()?;
    if let Network::Existing { vpc_id, subnet_id } = &spec.network {
        let p = &gcp.project;
        let net = api::short_name(vpc_id);
        call(ctx, &format!("reading network {net} (vpc_id)"), || gcp.networks.get().set_project(p).set_network(net).send()).await?;
        let sub = api::short_name(subnet_id);
        call(ctx, &format!("reading subnetwork {sub} (subnet_id)"), || {
            gcp.subnetworks.get().set_project(p).set_region(&spec.region).set_subnetwork(sub).send()
        })
        .await?;
    }
    // Kind by kind (networks before what lives in them); the pieces of one kind are created together.
    let missing: Vec<Item> = desired(spec, &gcp.project, gpu, census.marker()).into_iter().filter(|i| !live.has(i.kind, &i.name)).collect();
    for kind in [Kind::Network, Kind::Subnetwork, Kind::Firewall, Kind::Policy] {
        let batch = missing.iter().filter(|i| i.kind == kind).map(|item| insert(ctx, gcp, item, &spec.region, timeout));
        futures::future::try_join_all(batch).await?;
    }
    observe(ctx, gcp, &spec.name, &spec.region, census).await
}

/// Deletes the fabric's pieces the census admits, in reverse order of creation.
pub async fn delete(ctx: &Context, gcp: &Gcp, spec: &FabricSpec, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let live = observe(ctx, gcp, &spec.name, &spec.region, census).await?;
    let items: Vec<Item> = desired(spec, &gcp.project, None, None).into_iter().filter(|i| live.has(i.kind, &i.name)).collect();
    for kind in [Kind::Policy, Kind::Firewall, Kind::Subnetwork, Kind::Network] {
        let batch = items.iter().filter(|i| i.kind == kind).map(|i| remove(ctx, gcp, i.kind, &i.name, &spec.region, timeout));
        futures::future::try_join_all(batch).await?;
    }
    Ok(())
}

/// The refreshed expansion: a piece with all of its resources gone is marked missing; one with some gone
/// counts only those that exist.
pub fn refreshed_expansion(expansion: &Value, spec: &FabricSpec, project: &str, live: &FabricLive) -> Value {
    let items = desired(spec, project, None, None);
    let Some(list) = expansion.as_list() else { return expansion.clone() };
    Value::list(list.iter().map(|p| {
        let piece = p.get("name").as_str().unwrap_or_default();
        let mine: Vec<&Item> = items.iter().filter(|i| i.piece == piece && piece_kind(p.get("kind").as_str()) == Some(i.kind)).collect();
        if mine.is_empty() {
            return p.clone();
        }
        let present = mine.iter().filter(|i| live.has(i.kind, &i.name)).count();
        if present == mine.len() {
            return p.clone();
        }
        let mut out = p.as_map().cloned().unwrap_or_default();
        if present == 0 {
            if let Some(Value::Map(settings)) = out.get_mut("settings") {
                settings.insert("missing".into(), Value::from(crate::clouds::shared::MISSING));
            }
        } else {
            out.insert("count".into(), Value::int(present as i64));
        }
        Value::Map(out)
    }))
}

/// The official provider's name for a kind of piece.
fn piece_name(kind: Kind) -> &'static str {
    kind.piece_kind()
}

fn piece_kind(kind: Option<&str>) -> Option<Kind> {
    Kind::of_piece(kind?)
}

/// The configuration an import rebuilds from the pieces' descriptions.
pub fn imported_config(zone: &str, name: &str, region: &str, live: &FabricLive) -> Result<Value, CloudError> {
    let d = live.description().ok_or_else(|| {
        format!("no fabric named {name:?} in {zone}: no network, firewall or policy named {name}-... made by this provider")
    })?;
    let get = |k: &str| d.get(k).map(|v| Value::from(v.as_str())).unwrap_or(Value::Null);
    let (vpc, subnet) = (get("vpc"), get("subnet"));
    Ok(Value::object([
        ("name", Value::from(name)),
        ("cloud", Value::from("gcp")),
        ("region", Value::from(region)),
        ("zone", Value::from(zone)),
        ("gpu", get("gpu")),
        ("instance_type", get("instance_type")),
        ("vpc_id", vpc),
        ("subnet_id", subnet),
        ("cidr_block", get("cidr")),
        ("placement", get("placement")),
        ("max_distance", d.get("max_distance").and_then(|m| m.parse::<i64>().ok()).map_or(Value::Null, Value::int)),
    ]))
}

/// The `fabric = hpc_gpu_fabric.x` object of a cluster or filesystem, rebuilt from a fabric's description.
pub fn fabric_ref(zone: &str, region: &str, name: &str, description: &BTreeMap<String, String>) -> Value {
    Value::object([
        ("id", Value::from(api::resource_id(zone, name))),
        ("cloud", Value::from("gcp")),
        ("region", Value::from(region)),
        ("zone", Value::from(zone)),
        ("name", Value::from(name)),
        ("instance_type", Value::from(description.get("instance_type").cloned())),
        ("placement", Value::from(description.get("placement").cloned())),
    ])
}

/// A fabric's created host network and subnetwork, as the self links found.
fn created_network(name: &str, live: &fabric::FabricLive) -> Vec<(&'static str, Value)> {
    use fabric::Kind;
    [("vpc_id", Kind::Network, format!("{name}-vpc")), ("subnet_id", Kind::Subnetwork, format!("{name}-subnet"))]
        .into_iter()
        .filter_map(|(attr, kind, piece)| live.self_links.get(&(kind, piece)).map(|link| (attr, Value::from(link.as_str()))))
        .collect()
}

#[async_trait]
impl Backend<FabricSpec> for backend::Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx).await
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(spec.zone.as_deref().unwrap_or_default(), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        in_zone(v.get("zone"))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let client = match api::connect(step.ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let gpu = change.config.get("gpu").as_str();
        let result = fabric::converge(step.ctx, &client, spec, gpu, step.timeout, step.census).await;
        let live = match &result {
            Ok(live) => Some(live.clone()),
            Err(_) => fabric::observe(step.ctx, &client, &spec.name, &spec.region, step.census).await.ok(),
        };
        let mut state = change.state.clone();
        if let (Network::Create { .. }, Some(live)) = (&spec.network, &live) {
            for (attr, link) in created_network(&spec.name, live) {
                state = shared::with_attr(&state, attr, link);
            }
        }
        Outcome { state, error: result.err() }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, spec: Option<&FabricSpec>) -> Outcome {
        let Some(spec) = spec else {
            return Outcome::failed(prior.clone(), "the state does not describe a Google Cloud fabric");
        };
        let client = match api::connect(step.ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let done = fabric::delete(step.ctx, &client, spec, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&FabricSpec>) -> Result<Option<Value>, CloudError> {
        let Some(spec) = spec else { return Ok(Some(state.clone())) };
        let client = api::connect(step.ctx).await?;
        let live = fabric::observe(step.ctx, &client, &spec.name, &spec.region, step.census).await?;
        if live.found.is_empty() {
            return Ok(None);
        }
        let expansion = fabric::refreshed_expansion(state.get("expansion"), spec, &client.project, &live);
        Ok(Some(shared::with_attr(state, "expansion", expansion)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((zone, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud fabric id: give \"gcp/<zone>/<fabric name>\", e.g. \"gcp/us-central1-a/train\"."
            )));
        };
        let region = region_of(zone);
        let client = api::connect(step.ctx).await.map_err(ImportError::failed)?;
        let live = fabric::observe(step.ctx, &client, name, region, step.census).await.map_err(ImportError::failed)?;
        let config = fabric::imported_config(zone, name, region, &live).map_err(ImportError::failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        assigned.extend(created_network(name, &live).into_iter().map(|(attr, link)| (attr.to_owned(), link)));
        // A fabric with a Slurm cluster: its join, key included, as its nodes carry it (never made anew).
        let join = slurm_join_of(step.ctx, &client, zone, name).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, assigned).with_slurm_join(join))
    }
}

/// The Slurm join the fabric's GPU nodes boot with (their `user-data` item), or null: one filtered list of
/// the zone's instances labelled with the fabric, one page.
async fn slurm_join_of(ctx: &Context, gcp: &Gcp, zone: &str, fabric: &str) -> Result<Value, CloudError> {
    let filter = format!("labels.hpc_fabric = \"{fabric}\"");
    let page = call(ctx, "listing the fabric's nodes", || {
        gcp.instances.list().set_project(&gcp.project).set_zone(zone).set_filter(&filter).set_max_results(500_u32).send()
    })
    .await?;
    Ok(page
        .items
        .iter()
        .map(|i| crate::clouds::slurm::join_value(super::cluster::metadata(i, "user-data").as_deref()))
        .find(Value::is_present)
        .unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Cloud;
    use crate::model::Placement;

    fn spec(network: Network, max_distance: Option<i64>) -> FabricSpec {
        FabricSpec {
            name: "train".into(),
            cloud: Cloud::Gcp,
            region: "us-central1".into(),
            zone: Some("us-central1-a".into()),
            sku: crate::catalog::find_sku(Cloud::Gcp, "a3-megagpu-8g").unwrap(),
            network,
            placement: Placement::Cluster,
            max_distance,
            resource_group: None,
            compartment_id: None,
            tags: Default::default(),
        }
    }

    fn live_with(description: String) -> FabricLive {
        let mut live = FabricLive::default();
        live.found.insert((Kind::Network, "train-gpu-0".into()), Some(description));
        live
    }

    #[test]
    fn a_description_reads_back_as_written() {
        let text = description(&spec(Network::Create { cidr: "10.20.0.0/16".into() }, Some(2)), Some("h100"), Some("o-1"));
        let d = parse_description(&text).unwrap();
        let expected = [
            ("fabric", "train"),
            ("instance_type", "a3-megagpu-8g"),
            ("zone", "us-central1-a"),
            ("placement", "cluster"),
            ("gpu", "h100"),
            ("max_distance", "2"),
            ("cidr", "10.20.0.0/16"),
            ("owner", "o-1"),
        ];
        assert_eq!(d, expected.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
        assert_eq!(parse_description("made by hand"), None);
    }

    #[test]
    fn an_import_rebuilds_the_configuration_from_the_description() {
        let given = Network::Existing { vpc_id: "projects/p/global/networks/corp".into(), subnet_id: "corp-gpu".into() };
        let live = live_with(description(&spec(given, None), None, None));
        let config = imported_config("us-central1-a", "train", "us-central1", &live).unwrap();
        assert_eq!(config.get("vpc_id").as_str(), Some("projects/p/global/networks/corp"));
        assert_eq!(config.get("subnet_id").as_str(), Some("corp-gpu"));
        assert!(config.get("cidr_block").is_null() && config.get("max_distance").is_null() && config.get("gpu").is_null());
        assert_eq!(config.get("instance_type").as_str(), Some("a3-megagpu-8g"));
        assert_eq!(config.get("placement").as_str(), Some("cluster"));

        let live = live_with(description(&spec(Network::Create { cidr: "10.20.0.0/16".into() }, Some(3)), Some("h100"), None));
        let config = imported_config("us-central1-a", "train", "us-central1", &live).unwrap();
        assert_eq!(config.get("cidr_block").as_str(), Some("10.20.0.0/16"));
        assert_eq!(config.get("max_distance"), &Value::int(3));
        assert_eq!(config.get("gpu").as_str(), Some("h100"));
        assert!(imported_config("us-central1-a", "train", "us-central1", &FabricLive::default()).is_err());
    }
}
