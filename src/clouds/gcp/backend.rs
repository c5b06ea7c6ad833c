//! Google Cloud as a lifecycle backend: each step takes the project's clients (`api::connect`, built once
//! per configuration) and converges, deletes, observes or reconstructs through `fabric`, `cluster` and
//! `filesystem`. Ids are `gcp/<zone>/<name>`; node and filesystem labels are the step's tags with `:` made
//! `_` (`api::labels`).

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;

use super::{api, cluster, fabric, filesystem, quota};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec, Network};
use crate::ownership::Census;

/// The Google Cloud backend of every resource kind.
pub struct Gcp;

/// The kind of the node piece in a cluster's expansion.
const NODE_PIECE: &str = "google_compute_instance";

/// `us-central1-a` -> `us-central1`.
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

async fn configured(ctx: &Context) -> Result<(), String> {
    api::connect(ctx).await.map(|_| ())
}

/// `in us-central1-a`: the zone of a fabric (`zone`) or of what lives on one (`fabric.zone`).
fn in_zone(zone: &Value) -> String {
    format!("in {}", zone.as_str().unwrap_or_default())
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
impl Backend<FabricSpec> for Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
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

    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&FabricSpec>) -> Result<Option<Value>, String> {
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
        let client = api::connect(step.ctx).await.map_err(ImportError::Failed)?;
        let live = fabric::observe(step.ctx, &client, name, region, step.census).await.map_err(ImportError::Failed)?;
        let config = fabric::imported_config(zone, name, region, &live).map_err(ImportError::Failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        assigned.extend(created_network(name, &live).into_iter().map(|(attr, link)| (attr.to_owned(), link)));
        Ok(Imported { config, assigned })
    }
}

/// A cluster's zone and name, from a state.
fn zone_and_name(v: &Value) -> (&str, &str) {
    (v.get("fabric").get("zone").as_str().unwrap_or_default(), v.get("name").as_str().unwrap_or_default())
}

/// The cluster's nodes with their addresses, revisions, self-check verdicts and health (a stopped node is
/// there, unhealthy: `status TERMINATED`).
async fn live_nodes(ctx: &Context, client: &api::Gcp, zone: &str, name: &str, census: &Census) -> Result<Vec<shared::NodeAddress>, String> {
    let live = cluster::nodes(ctx, client, zone, name, census).await?;
    Ok(cluster::addresses(&client.project, zone, name, &live))
}

/// Nodes per NVLink domain of a cluster state whose machine type places each domain in a policy of its own
/// (A4X), `None` otherwise.
fn domain_nodes(state: &Value) -> Option<u32> {
    let sku = crate::catalog::find_sku(Cloud::Gcp, state.get("instance_type").as_str()?)?;
    super::topology::gpu_topology(sku)?;
    sku.nvlink_domain.map(|d| d.nodes)
}

/// A cluster state brought to the nodes that exist ([`shared::with_nodes`]) and, on A4X, to each NVLink
/// domain: a domain's node piece counts and names its own nodes that are up (missing when none is), and its
/// policy piece is marked missing when the policy is gone. `policies` is `None` when they were not read.
fn with_domain_nodes(state: &Value, nodes: &[shared::NodeAddress], policies: Option<&BTreeSet<String>>) -> Value {
    let out = shared::with_nodes(state, Cloud::Gcp, NODE_PIECE, nodes);
    let Some(per) = domain_nodes(state) else { return out };
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let Some(pieces) = out.get("expansion").as_list() else { return out };
    let pieces: Vec<Value> = pieces
        .iter()
        .map(|p| {
            let Some(k) = p.get("name").as_str().and_then(|n| crate::nodes::domain_index(&name, n)) else { return p.clone() };
            match p.get("kind").as_str() {
                Some("google_compute_resource_policy") => match policies {
                    Some(found) if !found.contains(p.get("name").as_str().unwrap_or_default()) => shared::marked_missing(p),
                    _ => p.clone(),
                },
                Some(NODE_PIECE) => {
                    let mut mine: Vec<u32> = nodes
                        .iter()
                        .map(|n| crate::nodes::order(&name, &n.name))
                        .filter(|i| *i != u32::MAX && crate::nodes::domain_of(*i, per) == k)
                        .collect();
                    mine.sort_unstable();
                    let whole: Vec<u32> = crate::nodes::whole_domain(k, per).collect();
                    let names = if mine == whole {
                        crate::nodes::node_range(&name, &mine)
                    } else {
                        mine.iter().map(|i| crate::nodes::node_name(&name, *i)).collect::<Vec<_>>().join(", ")
                    };
                    let patched = shared::patch_piece(&Value::list([p.clone()]), NODE_PIECE, Some(mine.len() as i64), &[("names", names)]);
                    let patched = patched.as_list().and_then(|l| l.first().cloned()).unwrap_or_else(|| p.clone());
                    if mine.is_empty() { shared::marked_missing(&patched) } else { patched }
                }
                _ => p.clone(),
            }
        })
        .collect();
    shared::with_attr(&out, "expansion", Value::list(pieces))
}

/// The cluster's NVLink domain policies, read (one list) only for a machine type that has them.
async fn live_policies(ctx: &Context, client: &api::Gcp, state: &Value, census: &Census) -> Result<Option<BTreeSet<String>>, String> {
    if domain_nodes(state).is_none() {
        return Ok(None);
    }
    let (zone, name) = zone_and_name(state);
    cluster::domain_policies_live(ctx, client, region_of(zone), name, census).await.map(Some)
}

#[async_trait]
impl Backend<ClusterSpec> for Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        configured(ctx).await
    }

    fn id(&self, spec: &ClusterSpec) -> Option<String> {
        Some(api::resource_id(spec.fabric.zone.as_deref().unwrap_or_default(), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        in_zone(v.get("fabric").get("zone"))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let labels = api::labels(change.tags);
        let relabel = !change.creating() && api::labels(change.prior_tags) != labels;
        let day2 = cluster::day2_settings(change.planned);
        let redescribe = !change.creating() && cluster::day2_settings(change.prior) != day2;
        let options = cluster::Options { labels: &labels, relabel, day2: Some(&day2), redescribe, timeout: step.timeout };
        let state = change.state.clone();
        match cluster::converge(ctx, &client, spec, &options, census).await {
            Ok(()) => {
                if !change.planned.get("nodes").is_unknown() {
                    return Outcome::done(state);
                }
                // A failed lookup leaves it null: the next refresh fills it in.
                match live_nodes(ctx, &client, &zone, &spec.name, census).await {
                    Ok(nodes) => Outcome::done(shared::with_attr(&state, "nodes", shared::nodes_value(&nodes))),
                    Err(_) => Outcome::done(state),
                }
            }
            Err(e) => {
                let policies = live_policies(ctx, &client, &state, census).await.ok().flatten();
                let state = match live_nodes(ctx, &client, &zone, &spec.name, census).await {
                    Ok(nodes) => with_domain_nodes(&state, &nodes, policies.as_ref()),
                    Err(_) => state,
                };
                Outcome::failed(state, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let (ctx, census) = (step.ctx, step.census);
        let (zone, name) = zone_and_name(prior);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let rack = domain_nodes(prior).is_some();
        let Err(e) = cluster::delete(ctx, &client, zone, name, rack, step.timeout, census).await else { return Outcome::done(Value::Null) };
        let policies = live_policies(ctx, &client, prior, census).await;
        let left = match (cluster::nodes(ctx, &client, zone, name, census).await, policies) {
            // Nothing left (not even an NVLink domain policy): the cluster is gone.
            (Ok(live), Ok(p)) if live.is_empty() && p.as_ref().is_none_or(BTreeSet::is_empty) => Value::Null,
            (Ok(live), p) => with_domain_nodes(prior, &cluster::addresses(&client.project, zone, name, &live), p.ok().flatten().as_ref()),
            _ => prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, String> {
        let (zone, name) = zone_and_name(state);
        let client = api::connect(step.ctx).await?;
        // One instances.list, and on A4X one resourcePolicies.list, whatever the size.
        let live = cluster::nodes(step.ctx, &client, zone, name, step.census).await?;
        let policies = live_policies(step.ctx, &client, state, step.census).await?;
        if live.is_empty() && policies.as_ref().is_none_or(BTreeSet::is_empty) {
            return Ok(None);
        }
        // Health, revisions and self-check verdicts come with the same list: nothing per node.
        let nodes = cluster::addresses(&client.project, zone, name, &live);
        Ok(Some(with_domain_nodes(state, &nodes, policies.as_ref())))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((zone, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud cluster id: give \"gcp/<zone>/<cluster name>\", e.g. \"gcp/us-central1-a/train\"."
            )));
        };
        let client = api::connect(step.ctx).await.map_err(ImportError::Failed)?;
        let defaults = api::labels(step.default_tags);
        let live = cluster::nodes(step.ctx, &client, zone, name, step.census).await.map_err(ImportError::Failed)?;
        let config = cluster::imported_config(step.ctx, &client, zone, name, &live, &defaults).await.map_err(ImportError::Failed)?;
        Ok(Imported { config, assigned: BTreeMap::from([("id".to_owned(), Value::from(id))]) })
    }
}

#[async_trait]
impl ClusterBackend for Gcp {
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx).await?;
        cluster::remove(step.ctx, &client, &zone, &spec.name, names, step.timeout, step.census).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx).await?;
        cluster::reboot(step.ctx, &client, &zone, &spec.name, names, step.timeout, step.census).await
    }

    fn node_piece(&self) -> &'static str {
        NODE_PIECE
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), String> {
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let client = api::connect(step.ctx).await?;
        cluster::nodes(step.ctx, &client, &zone, &spec.name, step.census).await.map(|_| ())
    }

    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        quota::family(spec)
    }

    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, String> {
        let client = api::connect(ctx).await?;
        read_quota(ctx, &client, family).await
    }

    fn capacity_code(&self, detail: &str) -> Option<&'static str> {
        crate::clouds::quota::first_code(detail, &quota::CAPACITY_CODES)
    }
}

/// One `regions.get` of the family's region: its `quotas[]` entry for the family's metric.
pub async fn read_quota(ctx: &Context, client: &api::Gcp, family: &QuotaFamily) -> Result<QuotaReading, String> {
    let region = family.scope.as_str();
    let what = format!("reading the quotas of region {region} (regions.get)");
    let found = api::call(ctx, &what, || client.regions.get().set_project(&client.project).set_region(region).send())
        .await
        .map_err(String::from)?;
    let entry = found.quotas.iter().find(|q| q.metric.as_ref().and_then(|m| m.name()) == Some(family.id.as_str()));
    let Some(q) = entry else {
        // Compute Engine answers without quotas when it cannot read them (quotaStatusWarning says why).
        let why = found
            .quota_status_warning
            .as_ref()
            .and_then(|w| w.message.clone())
            .map_or_else(|| format!("it lists no quota {}", family.id), |m| format!("no quotas: {m}"));
        return Err(format!("{what}: {why}"));
    };
    let whole = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v.round() as u64);
    match (whole(q.limit), whole(q.usage)) {
        (Some(limit), Some(used)) => Ok(QuotaReading { limit, used }),
        _ => Err(format!("{what}: quota {} has no limit or usage ({:?}, {:?})", family.id, q.limit, q.usage)),
    }
}

/// A filesystem state brought to what exists: capacity, tier and mount point as found; the private service
/// access pieces that are gone marked missing.
fn refreshed(state: &Value, live: &filesystem::FsLive) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    let (capacity, tier) = (live.instance.capacity_gib, live.instance.per_unit_storage_throughput);
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1024));
    out.insert("mount_target".into(), Value::from(live.mount_point()));
    out.insert("mount_command".into(), Value::from(live.mount_command()));
    let mut expansion = shared::patch_piece(
        state.get("expansion"),
        "google_lustre_instance",
        None,
        &[("capacity_gib", capacity.to_string()), ("per_unit_storage_throughput", tier.to_string())],
    );
    expansion = shared::mark_missing(&expansion, |k| match k {
        "google_compute_global_address" => live.address,
        "google_service_networking_connection" => live.peered,
        _ => true,
    });
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

#[async_trait]
impl Backend<FilesystemSpec> for Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        configured(ctx).await
    }

    fn id(&self, spec: &FilesystemSpec) -> Option<String> {
        Some(api::resource_id(spec.fabric.zone.as_deref().unwrap_or_default(), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        in_zone(v.get("fabric").get("zone"))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let name = &spec.name;
        let labels = api::labels(change.tags);
        let options = filesystem::Options { labels: &labels, timeout: step.timeout };
        let state = change.state.clone();
        let e = match filesystem::converge(ctx, &client, spec, &options, census).await {
            Ok(live) => {
                let state = shared::with_attr(&state, "mount_target", Value::from(live.mount_point()));
                return Outcome::done(shared::with_attr(&state, "mount_command", Value::from(live.mount_command())));
            }
            Err(e) => e,
        };
        let creating = change.creating();
        let left = match filesystem::observe(ctx, &client, &zone, name, None, census).await {
            Ok(Some(live)) => refreshed(&state, &live),
            // The instance does not exist, but its reserved range may: keep the state (the CLI taints it)
            // so that the next apply or a destroy finds and removes what was made.
            _ if creating && filesystem::range_exists(ctx, &client, name, census).await != Some(false) => state,
            _ if creating => Value::Null,
            _ => change.prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let ctx = step.ctx;
        let (zone, name) = zone_and_name(prior);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let fabric = prior.get("fabric").get("name").as_str().unwrap_or_default();
        let network = filesystem::host_network(ctx, &client, fabric, region_of(zone)).await.ok();
        let done = filesystem::delete(ctx, &client, zone, name, network.as_deref(), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, String> {
        let (ctx, census) = (step.ctx, step.census);
        let (zone, name) = zone_and_name(state);
        let client = api::connect(ctx).await?;
        match filesystem::observe(ctx, &client, zone, name, None, census).await? {
            Some(live) => Ok(Some(refreshed(state, &live))),
            // Only the reserved range is left (a create that failed part-way): still ours to remove.
            None if filesystem::range_exists(ctx, &client, name, census).await == Some(true) => {
                Ok(Some(shared::with_missing(state, |k| k != "google_lustre_instance")))
            }
            None => Ok(None),
        }
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((zone, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud filesystem id: give \"gcp/<zone>/<name>\", e.g. \"gcp/us-central1-a/scratch\"."
            )));
        };
        let ctx = step.ctx;
        let client = api::connect(ctx).await.map_err(ImportError::Failed)?;
        let live = match filesystem::observe(ctx, &client, zone, name, None, step.census).await.map_err(ImportError::Failed)? {
            Some(live) => live,
            None => return Err(ImportError::Failed(format!("no Managed Lustre instance {name} in {zone}"))),
        };
        let region = region_of(zone);
        let described = fabric::parse_description(&live.instance.description).unwrap_or_default();
        let Some(fabric_name) = described.get("fabric").cloned() else {
            return Err(ImportError::Failed(
                "the instance's description does not name its fabric (it was not made by this provider)".into(),
            ));
        };
        let found = fabric::observe(ctx, &client, &fabric_name, region, &Census::reading()).await.map_err(ImportError::Failed)?;
        let d = found.description().unwrap_or_default();
        let fabric_ref = fabric::fabric_ref(zone, region, &fabric_name, &d);
        let defaults = api::labels(step.default_tags);
        let mut config = filesystem::imported_config(zone, &live, fabric_ref, &defaults);
        if let Some(cluster_name) = live.instance.labels.get("hpc_cluster") {
            let nodes = cluster::nodes(ctx, &client, zone, cluster_name, &Census::reading()).await.map_err(ImportError::Failed)?;
            let per_node =
                d.get("instance_type").and_then(|t| crate::catalog::find_sku(Cloud::Gcp, t)).map_or(0, |s| i64::from(s.gpu_count));
            let workload =
                nodes.first().and_then(|n| cluster::metadata(&n.instance, "hpc-workload")).unwrap_or_else(|| "pretraining".into());
            config = shared::with_attr(
                &config,
                "cluster",
                Value::object([
                    ("id", Value::from(api::resource_id(zone, cluster_name))),
                    ("name", Value::from(cluster_name.as_str())),
                    ("gpus_total", Value::int(nodes.len() as i64 * per_node)),
                    ("workload", Value::from(workload)),
                ]),
            );
        }
        let assigned = BTreeMap::from([
            ("id".to_owned(), Value::from(id)),
            ("mount_target".to_owned(), Value::from(live.mount_point())),
            ("mount_command".to_owned(), Value::from(live.mount_command())),
        ]);
        Ok(Imported { config, assigned })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_is_in_the_region_before_its_last_dash() {
        assert_eq!(region_of("us-central1-a"), "us-central1");
        assert_eq!(region_of("europe-west4-b"), "europe-west4");
        assert_eq!(region_of("nodash"), "nodash");
    }

    #[test]
    fn fabric_and_cluster_ids_name_the_zone() {
        let sku = crate::catalog::find_sku(Cloud::Gcp, "a3-highgpu-8g").unwrap();
        let spec = FabricSpec {
            name: "train".into(),
            cloud: Cloud::Gcp,
            region: "us-central1".into(),
            zone: Some("us-central1-a".into()),
            sku,
            network: Network::Create { cidr: "10.0.0.0/16".into() },
            placement: crate::model::Placement::Cluster,
            max_distance: None,
            resource_group: None,
            compartment_id: None,
            tags: Default::default(),
        };
        assert_eq!(Backend::<FabricSpec>::id(&Gcp, &spec).as_deref(), Some("gcp/us-central1-a/train"));
        let state =
            Value::object([("zone", Value::from("us-central1-a")), ("fabric", Value::object([("zone", Value::from("us-central1-b"))]))]);
        assert_eq!(Backend::<FabricSpec>::place(&Gcp, &state), "in us-central1-a");
        assert_eq!(Backend::<ClusterSpec>::place(&Gcp, &state), "in us-central1-b");
        assert_eq!(Backend::<FilesystemSpec>::place(&Gcp, &state), "in us-central1-b");
    }
}
