//! `hpc_gpu_fabric` on Google Cloud: the host VPC (unless given), the GPU NIC VPCs of the machine family
//! (A3 High 4, A3 Mega 8 at MTU 8244; A3 Ultra/A4 a second gVNIC VPC and one RoCE VPC with the zone's
//! network profile and 8 subnets), intra-cluster firewall rules and the compact placement policy.
//! Networks carry no labels, so every piece has a deterministic name (`<fabric>-...`) and a description
//! recording the fabric and its owner's marker (`owner=`), which is how refresh and import find them: one
//! list call per kind. Only pieces the census admits are used, changed or deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use google_cloud_compute_v1::model;
use serde_json::{Value as Json, json};

use super::api::{self, Gcp, call};
use crate::catalog::Fabric;
use crate::framework::{Context, Value};
use crate::model::{FabricSpec, Network, Placement};
use crate::ownership::Census;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Network,
    Subnetwork,
    Firewall,
    Policy,
}

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

/// Every piece of the fabric, in creation order (networks before what lives in them).
pub fn desired(spec: &FabricSpec, project: &str, gpu: Option<&str>, owner: Option<&str>) -> Vec<Item> {
    let n = &spec.name;
    let desc = description(spec, gpu, owner);
    let net = |name: &str| format!("projects/{project}/global/networks/{name}");
    let sku = spec.sku;
    let roce = sku.fabric == Fabric::Roce;
    let mut out = Vec::new();
    let mut network = |piece: &str, name: String, mtu: i64, extra: Json| {
        let mut body = json!({"name": name, "description": desc, "autoCreateSubnetworks": false, "mtu": mtu});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        out.push(Item { kind: Kind::Network, name, piece: piece.to_owned(), body });
    };
    if let Network::Create { .. } = &spec.network {
        network(&format!("{n}-vpc"), format!("{n}-vpc"), if roce { 8896 } else { 8244 }, json!({}));
    }
    let gpu_vpcs = match sku.fabric {
        Fabric::GpuDirectTcpx | Fabric::GpuDirectTcpxo => sku.rdma_interfaces.unwrap_or(0),
        _ => 0,
    };
    for i in 0..gpu_vpcs {
        network(&format!("{n}-gpu"), format!("{n}-gpu-{i}"), 8244, json!({}));
    }
    if roce {
        network(&format!("{n}-gvnic-1"), format!("{n}-gvnic-1"), 8896, json!({}));
        network(
            &format!("{n}-rdma"),
            format!("{n}-rdma"),
            8896,
            json!({"networkProfile": super::roce_profile(project, spec.zone.as_deref().unwrap_or_default())}),
        );
    }
    // The region is in the request's path (the body's `region` is a URL, and set by the service).
    let mut subnet = |piece: String, name: String, network: String, range: String| {
        let body = json!({"name": name, "description": desc, "network": net(&network), "ipCidrRange": range});
        out.push(Item { kind: Kind::Subnetwork, name, piece, body });
    };
    if let Network::Create { cidr } = &spec.network {
        subnet(format!("{n}-subnet"), format!("{n}-subnet"), format!("{n}-vpc"), crate::clouds::first_subnet(cidr));
    }
    for i in 0..gpu_vpcs {
        subnet(format!("{n}-gpu"), format!("{n}-gpu-{i}"), format!("{n}-gpu-{i}"), format!("192.168.{i}.0/24"));
    }
    if roce {
        subnet(format!("{n}-gvnic-1"), format!("{n}-gvnic-1"), format!("{n}-gvnic-1"), "192.168.64.0/24".into());
        for i in 0..8 {
            subnet(format!("{n}-rdma"), format!("{n}-rdma-{i}"), format!("{n}-rdma"), format!("192.168.{}.0/24", 128 + i));
        }
    }
    let mut firewall = |piece: String, name: String, network: String, range: String| {
        let body = json!({"name": name, "description": desc, "network": net(&network), "direction": "INGRESS",
                          "allowed": [{"IPProtocol": "all"}], "sourceRanges": [range]});
        out.push(Item { kind: Kind::Firewall, name, piece, body });
    };
    if let Network::Create { cidr } = &spec.network {
        firewall(format!("{n}-internal"), format!("{n}-internal"), format!("{n}-vpc"), cidr.clone());
    }
    for i in 0..gpu_vpcs {
        firewall(format!("{n}-gpu-internal"), format!("{n}-gpu-{i}-internal"), format!("{n}-gpu-{i}"), "192.168.0.0/16".into());
    }
    if roce {
        firewall(format!("{n}-gvnic-1-internal"), format!("{n}-gvnic-1-internal"), format!("{n}-gvnic-1"), "192.168.64.0/24".into());
    }
    if spec.placement == Placement::Cluster {
        let mut group = json!({"collocation": "COLLOCATED"});
        if let Some(d) = spec.max_distance {
            group["maxDistance"] = json!(d);
        }
        out.push(Item {
            kind: Kind::Policy,
            name: format!("{n}-placement"),
            piece: format!("{n}-placement"),
            body: json!({"name": format!("{n}-placement"), "description": desc, "groupPlacementPolicy": group}),
        });
    }
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
pub async fn observe(ctx: &Context, gcp: &Gcp, name: &str, region: &str, census: &Census) -> Result<FabricLive, String> {
    let p = &gcp.project;
    let mut live = FabricLive::default();
    // Pages through one list call, keeping the items named `<fabric>-...`.
    macro_rules! list_all {
        ($kind:expr, $what:expr, |$t:ident| $request:expr) => {{
            let mut token = String::new();
            loop {
                let $t = token.clone();
                let page = call(ctx, $what, || $request).await?;
                for i in page.items {
                    let item = Listed { name: i.name, description: i.description, self_link: i.self_link, created: i.creation_timestamp };
                    keep(&mut live, $kind, name, item, census);
                }
                match page.next_page_token {
                    Some(next) if !next.is_empty() => token = next,
                    _ => break,
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

async fn insert(ctx: &Context, gcp: &Gcp, item: &Item, region: &str, timeout: Duration) -> Result<(), String> {
    let p = &gcp.project;
    let what = format!("creating {} {}", kind_word(item.kind), item.name);
    let bad = |e: serde_json::Error| format!("{what}: {e}");
    let op = match item.kind {
        Kind::Network => {
            let body: model::Network = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.networks.insert().set_project(p).set_body(body.clone()).send()).await?
        }
        Kind::Subnetwork => {
            let body: model::Subnetwork = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.subnetworks.insert().set_project(p).set_region(region).set_body(body.clone()).send()).await?
        }
        Kind::Firewall => {
            let body: model::Firewall = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.firewalls.insert().set_project(p).set_body(body.clone()).send()).await?
        }
        // maxDistance is a field of Compute Engine's beta API only (v1's group placement policy has none).
        Kind::Policy if item.body["groupPlacementPolicy"].get("maxDistance").is_some() => {
            let url = format!("{}/compute/beta/projects/{p}/regions/{region}/resourcePolicies", api::base(gcp, api::COMPUTE));
            let answer = api::rest(ctx, gcp, reqwest::Method::POST, &url, Some(&item.body), &what).await?;
            serde_json::from_value::<model::Operation>(answer).map_err(|e| format!("{what}: the answer is not an operation: {e}"))?
        }
        Kind::Policy => {
            let body: model::ResourcePolicy = serde_json::from_value(item.body.clone()).map_err(bad)?;
            call(ctx, &what, || gcp.policies.insert().set_project(p).set_region(region).set_body(body.clone()).send()).await?
        }
    };
    api::wait(ctx, gcp, op, &what, timeout).await
}

async fn remove(ctx: &Context, gcp: &Gcp, kind: Kind, name: &str, region: &str, timeout: Duration) -> Result<(), String> {
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
        Err(e) if e.not_found() => Ok(()),
        Err(e) => Err(e.to_string()),
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
) -> Result<FabricLive, String> {
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
pub async fn delete(ctx: &Context, gcp: &Gcp, spec: &FabricSpec, timeout: Duration, census: &Census) -> Result<(), String> {
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
    match kind {
        Kind::Network => "google_compute_network",
        Kind::Subnetwork => "google_compute_subnetwork",
        Kind::Firewall => "google_compute_firewall",
        Kind::Policy => "google_compute_resource_policy",
    }
}

fn piece_kind(kind: Option<&str>) -> Option<Kind> {
    Some(match kind? {
        "google_compute_network" => Kind::Network,
        "google_compute_subnetwork" => Kind::Subnetwork,
        "google_compute_firewall" => Kind::Firewall,
        "google_compute_resource_policy" => Kind::Policy,
        _ => return None,
    })
}

/// The configuration an import rebuilds from the pieces' descriptions.
pub fn imported_config(zone: &str, name: &str, region: &str, live: &FabricLive) -> Result<Value, String> {
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
