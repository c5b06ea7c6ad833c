//! OCI as a lifecycle backend: each step connects to the region's Core and Lustre endpoints and converges,
//! deletes, observes or reconstructs through `fabric`, `cluster` and `filesystem`. A fabric's region and
//! compartment are its own settings; a cluster or filesystem finds them in its fabric's id
//! (`oci/<region>/<compartment>/<name>`), so their ids are known only once `apply` has read that.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{api, cluster, fabric, filesystem, limits, memory};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::quota::{self, QuotaFamily, QuotaReading};
use crate::clouds::shared::{self, NodeAddress};
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec, Network, Placement};

/// The OCI backend of every resource kind.
pub struct Oci;

/// The node piece of a cluster's expansion.
pub(super) const NODES: &str = "oci_core_instance";
const CONFIGURATION: &str = "oci_core_instance_configuration";
const LUSTRE: &str = "oci_lustre_file_storage_lustre_file_system";

/// Any region: a client's configuration (API key, profile) does not depend on it, only its endpoints do.
const SOME_REGION: &str = "us-ashburn-1";

/// What a cluster or filesystem whose fabric has no OCI id says (and [`summary`] recognises).
const NO_FABRIC_ID: &str = "fabric has no OCI id (oci/<region>/<compartment>/<name>): apply the fabric first";

fn no_fabric_id(what: &str) -> String {
    format!("the {what}'s {NO_FABRIC_ID}")
}

/// Whether the provider's `oci` block (or the config file profile it names) makes a client.
fn configured(ctx: &Context) -> Result<(), String> {
    api::connect(ctx, SOME_REGION).map(|_| ())
}

/// Authentication failures under their own summary; a fabric without an id as "Unknown fabric".
fn summary(detail: &str) -> Option<&'static str> {
    if detail.contains(api::AUTH_FAILED) {
        Some("OCI authentication failed")
    } else if detail.contains(NO_FABRIC_ID) {
        Some("Unknown fabric")
    } else {
        None
    }
}

/// `(region, compartment, name)` of an import id, or the id's right form with an example.
fn import_id<'a>(id: &'a str, what: &str, example: &str) -> Result<(&'a str, &'a str, &'a str), ImportError> {
    api::parse_id(id).ok_or_else(|| {
        ImportError::BadId(format!(
            "{id:?} is not an OCI {what} id: give \"oci/<region>/<compartment OCID>/<{what} name>\", e.g. \
             \"oci/us-ashburn-1/ocid1.compartment.oc1..aaaa/{example}\"."
        ))
    })
}

fn name_of(v: &Value) -> &str {
    v.get("name").as_str().unwrap_or_default()
}

/// Region and compartment of the fabric a cluster or filesystem is on, from the fabric's id.
fn fabric_place(v: &Value) -> Option<(String, String)> {
    api::parse_id(v.get("fabric").get("id").as_str()?).map(|(r, c, _)| (r.to_owned(), c.to_owned()))
}

/// The region of a cluster's or filesystem's fabric for messages: from its id, else as the reference says.
fn fabric_region(v: &Value) -> String {
    fabric_place(v).map_or_else(|| v.get("fabric").get("region").as_str().unwrap_or_default().to_owned(), |(r, _)| r)
}

// ------------------------------------------------------------------------------------------ fabric

fn compartment_of(spec: &FabricSpec) -> &str {
    spec.compartment_id.as_deref().unwrap_or_default()
}

#[async_trait]
impl Backend<FabricSpec> for Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        configured(ctx)
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&spec.region, compartment_of(spec), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    fn summary(&self, detail: &str) -> Option<&'static str> {
        summary(detail)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let compartment = compartment_of(spec);
        let client = match api::connect(step.ctx, &spec.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let gpu = change.config.get("gpu").as_str();
        match fabric::converge(step.ctx, &client, spec, compartment, gpu, change.tags, step.timeout, step.census).await {
            Ok(done) => {
                let state = shared::with_attr(change.state, "vpc_id", Value::from(done.vcn));
                Outcome::done(shared::with_attr(&state, "subnet_id", Value::from(done.subnet)))
            }
            Err(e) => {
                // A create that left nothing behind leaves nothing in state either.
                if change.creating() && fabric::observe(step.ctx, &client, spec, compartment, step.census).await.is_ok_and(|l| l.is_empty())
                {
                    return Outcome::failed(Value::Null, e);
                }
                Outcome::failed(change.state.clone(), e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, spec: Option<&FabricSpec>) -> Outcome {
        let Some(spec) = spec else {
            return Outcome::failed(prior.clone(), "the state does not describe a fabric this provider can read");
        };
        let client = match api::connect(step.ctx, &spec.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let done = fabric::delete(step.ctx, &client, spec, compartment_of(spec), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&FabricSpec>) -> Result<Option<Value>, String> {
        let Some(spec) = spec else { return Ok(Some(state.clone())) };
        let client = api::connect(step.ctx, &spec.region)?;
        let live = fabric::observe(step.ctx, &client, spec, compartment_of(spec), step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        Ok(Some(shared::with_missing(state, fabric::present(&live))))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "fabric", "train")?;
        let client = api::connect(step.ctx, region).map_err(ImportError::Failed)?;
        let config = match fabric::find_nsg(step.ctx, &client, compartment, name, step.census).await {
            Ok(Some(nsg)) => fabric::imported_config(region, compartment, name, &nsg, step.default_tags),
            Ok(None) => Err(format!("no fabric named {name:?} in the compartment: no network security group {name}-nsg")),
            Err(e) => Err(e),
        }
        .map_err(ImportError::Failed)?;
        Ok(Imported { config, assigned: BTreeMap::from([("id".to_owned(), Value::from(id))]) })
    }

    /// A network the fabric created: its VCN and subnet OCIDs, as they are found.
    async fn imported(&self, step: &Step<'_>, spec: &FabricSpec, found: &mut Imported) -> Result<(), ImportError> {
        if let Network::Create { .. } = &spec.network {
            let client = api::connect(step.ctx, &spec.region).map_err(ImportError::Failed)?;
            let live = fabric::observe(step.ctx, &client, spec, compartment_of(spec), step.census).await.map_err(ImportError::Failed)?;
            for (attr, piece) in [("vpc_id", &live.vcn), ("subnet_id", &live.subnet)] {
                if let Some(ocid) = piece.as_ref().and_then(|p| p["id"].as_str()) {
                    found.assigned.insert(attr.to_owned(), Value::from(ocid));
                }
            }
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------------------------- cluster

/// Where an OCI cluster lives, from its fabric reference.
#[derive(Debug, PartialEq, Eq)]
struct Site {
    region: String,
    compartment: String,
    /// The availability domain.
    zone: String,
    placement: Placement,
    /// Nodes per NVLink domain of a GB200/GB300 cluster (its domains are GPU memory clusters).
    per_domain: Option<u32>,
}

impl Site {
    fn at<'a>(&'a self, name: &'a str) -> cluster::Location<'a> {
        cluster::Location { compartment: &self.compartment, zone: &self.zone, name, placement: self.placement, per_domain: self.per_domain }
    }
}

/// The site of a cluster (planned or in state): region and compartment from its fabric's id, availability
/// domain and placement as the fabric reference says; None without an OCI fabric id.
fn location(v: &Value) -> Option<Site> {
    let fabric = v.get("fabric");
    let (region, compartment) = fabric_place(v)?;
    let placement = fabric.get("placement").as_str().and_then(Placement::parse).unwrap_or(Placement::Cluster);
    let shape = v.get("instance_type").as_str().or(fabric.get("instance_type").as_str()).unwrap_or_default();
    let zone = fabric.get("zone").as_str().unwrap_or_default().to_owned();
    Some(Site { region, compartment, zone, placement, per_domain: cluster::per_domain(shape) })
}

/// What the day-2 core asks of a cluster's nodes besides the converge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Day2Work {
    Remove,
    Reboot,
}

/// Day-2 work asked for before the cluster's compartment was known here, to be done by the apply that
/// follows on the same census (see [`day2_nodes`]).
struct Deferred {
    census: (usize, String),
    cluster: String,
    work: Day2Work,
    names: Vec<String>,
}

static DEFERRED: std::sync::Mutex<Vec<Deferred>> = std::sync::Mutex::new(Vec::new());

/// The census's address and its owner's marker: the one operation the core passes to both calls.
fn census_key(step: &Step<'_>) -> (usize, String) {
    (std::ptr::from_ref(step.census) as usize, step.census.owner().marker().to_owned())
}

/// Where a cluster's day-2 calls go: the spec gives region, availability domain and placement; the
/// compartment is its own fabric's or, for a cluster on a fabric, the one in the cluster's id
/// (`oci/<region>/<compartment>/<name>`), which the census holds once an apply has set it. `None` when
/// neither is known.
fn day2_site(step: &Step<'_>, spec: &ClusterSpec) -> Option<Site> {
    let f = &spec.fabric;
    let from_id = || {
        let id = step.census.import_id()?;
        let (region, compartment, name) = api::parse_id(&id)?;
        (region == f.region && name == spec.name).then(|| compartment.to_owned())
    };
    let compartment = spec.own_fabric.as_ref().and_then(|o| o.compartment_id.clone()).or_else(from_id)?;
    Some(Site {
        region: f.region.clone(),
        compartment,
        zone: f.zone.clone().unwrap_or_default(),
        placement: f.placement,
        per_domain: spec.nvlink_domain_nodes(),
    })
}

async fn day2_at(step: &Step<'_>, site: &Site, name: &str, work: Day2Work, names: &[String]) -> Result<(), String> {
    let client = api::connect(step.ctx, &site.region)?;
    let at = site.at(name);
    match work {
        Day2Work::Remove => cluster::remove_nodes(step.ctx, &client, &at, names, step.timeout, step.census).await,
        Day2Work::Reboot => cluster::reboot_nodes(step.ctx, &client, &at, names, step.timeout, step.census).await,
    }
}

/// Removes or reboots the named nodes. The spec carries no compartment for a cluster on a fabric (it is in
/// the fabric's and the cluster's ids, in the plan): when the census does not know it yet (a repair comes
/// before the apply that sets it), the work is deferred to that apply, which does it first, on the same
/// census, before it converges.
async fn day2_nodes(step: &Step<'_>, spec: &ClusterSpec, names: &[String], work: Day2Work) -> Result<(), String> {
    match day2_site(step, spec) {
        Some(site) => day2_at(step, &site, &spec.name, work, names).await,
        None => {
            let mut deferred = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
            deferred.push(Deferred { census: census_key(step), cluster: spec.name.clone(), work, names: names.to_vec() });
            Ok(())
        }
    }
}

/// Does the day-2 work deferred to this apply (same census, same cluster), in the order it was asked.
async fn deferred_day2(step: &Step<'_>, site: &Site, name: &str) -> Result<(), String> {
    let mine: Vec<Deferred> = {
        let mut deferred = DEFERRED.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest) = std::mem::take(&mut *deferred).into_iter().partition(|d| d.census == census_key(step) && d.cluster == name);
        *deferred = rest;
        mine
    };
    for d in mine {
        day2_at(step, site, name, d.work, &d.names).await?;
    }
    Ok(())
}

/// The cluster's live nodes with their addresses.
async fn live_nodes(step: &Step<'_>, client: &api::Oci, at: &cluster::Location<'_>) -> Result<Vec<NodeAddress>, String> {
    let nodes = cluster::observe(step.ctx, client, at, step.census).await?;
    cluster::addresses(step.ctx, client, at, &nodes).await
}

/// A cluster state brought to its nodes and, for GB200/GB300, to each NVLink domain's GPU memory cluster
/// (`clusters`, `None` when not read).
fn with_found(
    state: &Value,
    at: &cluster::Location<'_>,
    nodes: &[NodeAddress],
    clusters: Option<&BTreeMap<String, serde_json::Value>>,
) -> Value {
    let out = shared::with_nodes(state, Cloud::Oci, NODES, nodes);
    match at.per_domain {
        Some(per) => memory::with_domains(&out, nodes, clusters, per),
        None => out,
    }
}

/// The cluster's own GPU memory clusters (one list), for a GB200/GB300 cluster only.
async fn memory_clusters(
    step: &Step<'_>,
    client: &api::Oci,
    at: &cluster::Location<'_>,
) -> Result<Option<BTreeMap<String, serde_json::Value>>, String> {
    match at.per_domain {
        Some(_) => memory::clusters(step.ctx, client, at, step.census).await.map(Some),
        None => Ok(None),
    }
}

/// `state` brought to the nodes that exist, or as it is when they cannot be listed.
async fn with_live(step: &Step<'_>, client: &api::Oci, at: &cluster::Location<'_>, state: &Value) -> Value {
    let clusters = memory_clusters(step, client, at).await.ok().flatten();
    match live_nodes(step, client, at).await {
        Ok(nodes) => with_found(state, at, &nodes, clusters.as_ref()),
        Err(_) => state.clone(),
    }
}

#[async_trait]
impl Backend<ClusterSpec> for Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        configured(ctx)
    }

    fn id(&self, _spec: &ClusterSpec) -> Option<String> {
        // The compartment is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    /// `in us-ashburn-1 (Uocm:US-ASHBURN-AD-2)`: region and availability domain of the fabric.
    fn place(&self, v: &Value) -> String {
        let region = fabric_region(v);
        match v.get("fabric").get("zone").as_str() {
            Some(zone) if !zone.is_empty() => format!("in {region} ({zone})"),
            _ => format!("in {region}"),
        }
    }

    fn summary(&self, detail: &str) -> Option<&'static str> {
        summary(detail)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let Some(site) = location(change.planned) else { return Outcome::failed(change.prior.clone(), no_fabric_id("cluster")) };
        let client = match api::connect(step.ctx, &site.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let spec = change.spec;
        let at = site.at(name_of(change.planned));
        let id = api::resource_id(&site.region, &site.compartment, &spec.name);
        step.census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        if let Err(e) = deferred_day2(step, &site, &spec.name).await {
            return Outcome::failed(with_live(step, &client, &at, &state).await, e);
        }
        let settings = cluster::day2_settings(change.config);
        match cluster::converge(step.ctx, &client, spec, &site.compartment, change.tags, &settings, step.timeout, step.census).await {
            // Where the plan left `nodes` unknown, the nodes as they now are; a failed lookup leaves it null
            // for the next refresh.
            Ok(()) if change.planned.get("nodes").is_unknown() => match live_nodes(step, &client, &at).await {
                Ok(nodes) => Outcome::done(shared::with_attr(&state, "nodes", shared::nodes_value(&nodes))),
                Err(_) => Outcome::done(state),
            },
            Ok(()) => Outcome::done(state),
            Err(e) => Outcome::failed(with_live(step, &client, &at, &state).await, e),
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let Some(site) = location(prior) else { return Outcome::failed(prior.clone(), no_fabric_id("cluster")) };
        let client = match api::connect(step.ctx, &site.region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let at = site.at(name_of(prior));
        match cluster::delete(step.ctx, &client, &at, step.timeout, step.census).await {
            Ok(()) => Outcome::done(Value::Null),
            Err(e) => Outcome::failed(with_live(step, &client, &at, prior).await, e),
        }
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, String> {
        let Some(site) = location(state) else { return Ok(Some(state.clone())) };
        let name = name_of(state);
        let client = api::connect(step.ctx, &site.region)?;
        let at = site.at(name);
        // One ListInstances (and for GB200/GB300 one ListComputeGpuMemoryClusters), whatever the size.
        let nodes = cluster::observe(step.ctx, &client, &at, step.census).await;
        let config = cluster::find_configuration(step.ctx, &client, &site.compartment, name, step.census).await;
        let clusters = memory_clusters(step, &client, &at).await?;
        match (nodes, config) {
            (Ok(nodes), Ok(None)) if nodes.is_empty() && clusters.as_ref().is_none_or(BTreeMap::is_empty) => Ok(None),
            (Ok(nodes), Ok(config)) => {
                let nodes = cluster::addresses(step.ctx, &client, &at, &nodes).await?;
                let out = with_found(state, &at, &nodes, clusters.as_ref());
                Ok(Some(if config.is_none() { shared::with_missing(&out, |k| k != CONFIGURATION) } else { out }))
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "cluster", "train")?;
        let client = api::connect(step.ctx, region).map_err(ImportError::Failed)?;
        let (config, _) = cluster::imported_config(step.ctx, &client, compartment, name, step.default_tags, step.census)
            .await
            .map_err(ImportError::Failed)?;
        Ok(Imported { config, assigned: BTreeMap::from([("id".to_owned(), Value::from(id))]) })
    }
}

#[async_trait]
impl ClusterBackend for Oci {
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        day2_nodes(step, spec, names, Day2Work::Remove).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        day2_nodes(step, spec, names, Day2Work::Reboot).await
    }

    fn node_piece(&self) -> &'static str {
        NODES
    }

    /// The Compute service limit of the shape's GPUs in the fabric's availability domain.
    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        limits::family(spec)
    }

    /// One GetResourceAvailability on the region's Limits endpoint, for the tenancy.
    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, String> {
        let client = api::connect(ctx, &limits::region_of(family))?;
        limits::read(ctx, &client, family).await
    }

    fn capacity_code(&self, detail: &str) -> Option<&'static str> {
        quota::first_code(detail, limits::CAPACITY_CODES)
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), String> {
        let f = &spec.fabric;
        let zone = f.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx, &f.region)?;
        let compartment = spec.own_fabric.as_ref().and_then(|o| o.compartment_id.clone()).unwrap_or_default();
        let at = cluster::Location {
            compartment: &compartment,
            zone: &zone,
            name: &spec.name,
            placement: f.placement,
            per_domain: spec.nvlink_domain_nodes(),
        };
        cluster::observe(step.ctx, &client, &at, step.census).await?;
        if at.per_domain.is_some() {
            memory::clusters(step.ctx, &client, &at, step.census).await?;
        }
        cluster::find_configuration(step.ctx, &client, &compartment, &spec.name, step.census).await.map(|_| ())
    }
}

// -------------------------------------------------------------------------------------- filesystem

/// A filesystem state brought to what exists: capacity, tier and mount point as found.
fn refreshed(state: &Value, fs: &serde_json::Value) -> Value {
    let (capacity, tier) = filesystem::size_of(fs);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1000));
    out.insert("mount_target".into(), Value::from(filesystem::mount_target(fs)));
    out.insert("mount_command".into(), Value::from(filesystem::mount_command(fs)));
    let expansion = shared::patch_piece(
        state.get("expansion"),
        LUSTRE,
        None,
        &[("capacity_in_gbs", capacity.to_string()), ("performance_tier", format!("MBPS_PER_TB_{tier}"))],
    );
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

/// The attributes OCI assigns a filesystem besides its id.
fn mount_of(fs: &serde_json::Value) -> [(&'static str, Value); 2] {
    [("mount_target", Value::from(filesystem::mount_target(fs))), ("mount_command", Value::from(filesystem::mount_command(fs)))]
}

#[async_trait]
impl Backend<FilesystemSpec> for Oci {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        configured(ctx)
    }

    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        // The compartment is in the fabric's id, which the spec does not carry: `apply` assigns it.
        None
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", fabric_region(v))
    }

    fn summary(&self, detail: &str) -> Option<&'static str> {
        summary(detail)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let name = name_of(change.planned);
        let Some((region, compartment)) = fabric_place(change.planned) else {
            return Outcome::failed(change.prior.clone(), no_fabric_id("filesystem"));
        };
        let client = match api::connect(step.ctx, &region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let id = api::resource_id(&region, &compartment, name);
        step.census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        match filesystem::converge(step.ctx, &client, change.spec, &compartment, change.tags, step.timeout, step.census).await {
            Ok(fs) => Outcome::done(mount_of(&fs).into_iter().fold(state, |s, (k, v)| shared::with_attr(&s, k, v))),
            Err(e) => {
                let left = match filesystem::observe(step.ctx, &client, &compartment, name, step.census).await {
                    Ok(Some(fs)) => refreshed(&state, &fs),
                    _ if change.creating() => Value::Null,
                    _ => change.prior.clone(),
                };
                Outcome::failed(left, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let Some((region, compartment)) = fabric_place(prior) else {
            return Outcome::failed(prior.clone(), no_fabric_id("filesystem"));
        };
        let client = match api::connect(step.ctx, &region) {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let done = filesystem::delete(step.ctx, &client, &compartment, name_of(prior), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, String> {
        let Some((region, compartment)) = fabric_place(state) else { return Ok(Some(state.clone())) };
        let client = api::connect(step.ctx, &region)?;
        Ok(filesystem::observe(step.ctx, &client, &compartment, name_of(state), step.census).await?.map(|fs| refreshed(state, &fs)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let (region, compartment, name) = import_id(id, "filesystem", "scratch")?;
        let client = api::connect(step.ctx, region).map_err(ImportError::Failed)?;
        let (config, fs) = match filesystem::observe(step.ctx, &client, compartment, name, step.census).await {
            Ok(Some(fs)) => filesystem::imported_config(step.ctx, &client, compartment, &fs, step.default_tags).await.map(|c| (c, fs)),
            Ok(None) => Err(format!("no Lustre file system named {name} in the compartment")),
            Err(e) => Err(e),
        }
        .map_err(ImportError::Failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        assigned.extend(mount_of(&fs).map(|(k, v)| (k.to_owned(), v)));
        Ok(Imported { config, assigned })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const COMPARTMENT: &str = "ocid1.compartment.oc1..lib";

    /// A state or configuration written as JSON.
    fn value(j: serde_json::Value) -> Value {
        match j {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::from(b),
            serde_json::Value::Number(n) => Value::int(n.as_i64().unwrap()),
            serde_json::Value::String(s) => Value::from(s),
            serde_json::Value::Array(items) => Value::list(items.into_iter().map(value)),
            serde_json::Value::Object(m) => Value::object(m.into_iter().map(|(k, v)| (k, value(v)))),
        }
    }

    fn on_fabric(fabric: serde_json::Value) -> Value {
        value(json!({"name": "lib", "fabric": fabric}))
    }

    fn fabric_ref(placement: Option<&str>) -> serde_json::Value {
        json!({"id": format!("oci/us-ashburn-1/{COMPARTMENT}/lib"), "region": "us-ashburn-1", "zone": "Uocm:US-ASHBURN-AD-2",
               "placement": placement})
    }

    #[test]
    fn a_cluster_lives_where_its_fabric_id_says() {
        let site = location(&on_fabric(fabric_ref(Some("cluster-network")))).unwrap();
        assert_eq!(
            site,
            Site {
                region: "us-ashburn-1".into(),
                compartment: COMPARTMENT.into(),
                zone: "Uocm:US-ASHBURN-AD-2".into(),
                placement: Placement::ClusterNetwork,
                per_domain: None
            }
        );
        assert_eq!(location(&on_fabric(fabric_ref(Some("none")))).unwrap().placement, Placement::None);
        // Without a placement (or an unknown one) the fabric's default: a compute cluster.
        assert_eq!(location(&on_fabric(fabric_ref(None))).unwrap().placement, Placement::Cluster);
        assert_eq!(location(&on_fabric(fabric_ref(Some("spread")))).unwrap().placement, Placement::Cluster);
    }

    #[test]
    fn a_fabric_without_an_oci_id_places_nothing() {
        for id in [json!(null), json!("oci/us-ashburn-1/lib"), json!("oci/us-ashburn-1/not-an-ocid/lib"), json!("aws/us-east-1/lib")] {
            let v = on_fabric(json!({"id": id, "region": "us-ashburn-1"}));
            assert_eq!(location(&v), None, "{id}");
            assert_eq!(fabric_place(&v), None, "{id}");
            // Messages still name the region the reference gives.
            assert_eq!(fabric_region(&v), "us-ashburn-1");
        }
        assert_eq!(fabric_place(&on_fabric(fabric_ref(None))), Some(("us-ashburn-1".into(), COMPARTMENT.into())));
    }

    #[test]
    fn messages_place_a_cluster_in_its_region_and_availability_domain() {
        let cluster: &dyn Backend<ClusterSpec> = &Oci;
        let fs: &dyn Backend<FilesystemSpec> = &Oci;
        let v = on_fabric(fabric_ref(None));
        assert_eq!(cluster.place(&v), "in us-ashburn-1 (Uocm:US-ASHBURN-AD-2)");
        assert_eq!(fs.place(&v), "in us-ashburn-1");
        assert_eq!(cluster.place(&on_fabric(json!({"id": null, "region": "us-phoenix-1"}))), "in us-phoenix-1");
    }

    #[test]
    fn authentication_failures_and_missing_fabric_ids_have_their_own_summaries() {
        let auth = format!("Fabric lib in us-ashburn-1: {}: NotAuthenticated: no. The API key ...", api::AUTH_FAILED);
        assert_eq!(summary(&auth), Some("OCI authentication failed"));
        let unknown = format!("Cluster lib in us-ashburn-1: {}.", no_fabric_id("cluster"));
        assert_eq!(summary(&unknown), Some("Unknown fabric"));
        assert_eq!(summary("Fabric lib in us-ashburn-1: creating VCN lib-vpc: LimitExceeded: too many."), None);
    }

    #[test]
    fn import_ids_need_a_compartment_ocid() {
        assert_eq!(
            import_id(&format!("oci/us-ashburn-1/{COMPARTMENT}/train"), "cluster", "train").ok(),
            Some(("us-ashburn-1", COMPARTMENT, "train"))
        );
        let Err(ImportError::BadId(text)) = import_id("oci/us-ashburn-1/train", "filesystem", "scratch") else { panic!("accepted") };
        assert_eq!(
            text,
            "\"oci/us-ashburn-1/train\" is not an OCI filesystem id: give \"oci/<region>/<compartment OCID>/<filesystem name>\", \
             e.g. \"oci/us-ashburn-1/ocid1.compartment.oc1..aaaa/scratch\"."
        );
    }

    #[test]
    fn fabric_ids_match_what_clusters_reference() {
        let fabric: &dyn Backend<FabricSpec> = &Oci;
        let spec = FabricSpec {
            name: "lib".into(),
            cloud: Cloud::Oci,
            region: "us-ashburn-1".into(),
            zone: Some("Uocm:US-ASHBURN-AD-2".into()),
            sku: crate::catalog::find_sku(Cloud::Oci, "BM.GPU.H100.8").unwrap(),
            network: Network::Create { cidr: "10.0.0.0/16".into() },
            placement: Placement::Cluster,
            max_distance: None,
            resource_group: None,
            compartment_id: Some(COMPARTMENT.into()),
            tags: BTreeMap::new(),
        };
        let id = fabric.id(&spec).unwrap();
        assert_eq!(id, format!("oci/us-ashburn-1/{COMPARTMENT}/lib"));
        assert_eq!(fabric_place(&on_fabric(json!({"id": id}))), Some(("us-ashburn-1".into(), COMPARTMENT.into())));
    }

    #[test]
    fn a_refreshed_filesystem_shows_its_live_size_and_mount() {
        let expansion = json!([{"kind": LUSTRE, "name": "scratch", "count": 1,
                                "settings": {"capacity_in_gbs": "31200", "performance_tier": "MBPS_PER_TB_125", "file_system_name": "scr"}}]);
        let state = value(json!({"name": "scratch", "capacity_gib": 31200, "throughput_per_tib": 125, "expansion": expansion}));
        let fs = json!({"capacityInGBs": 41600, "performanceTier": "MBPS_PER_TB_500", "managementServiceAddress": "10.0.0.9",
                        "lnet": "tcp", "fileSystemName": "scr"});
        let out = refreshed(&state, &fs);
        assert_eq!((out.get("capacity_gib"), out.get("throughput_mbps")), (&Value::int(41_600), &Value::int(20_800)));
        assert_eq!(out.get("mount_target").as_str(), Some("10.0.0.9@tcp:/scr"));
        let settings = out.get("expansion").as_list().unwrap()[0].get("settings").clone();
        assert_eq!(settings.get("capacity_in_gbs").as_str(), Some("41600"));
        assert_eq!(settings.get("performance_tier").as_str(), Some("MBPS_PER_TB_500"));
        assert_eq!(settings.get("file_system_name").as_str(), Some("scr"));
    }
}
