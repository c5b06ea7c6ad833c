//! AWS as a lifecycle backend: each step connects to the region's EC2/FSx clients and converges, deletes,
//! observes or reconstructs through `fabric`, `cluster` and `filesystem`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::{api, cluster, fabric, filesystem, quota};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec};

/// The AWS backend of every resource kind.
pub struct Aws;

/// The existing network a fabric joins, from a state or configuration (none when it made its own).
fn given_network(v: &Value) -> Option<(&str, &str)> {
    if v.get("cidr_block").is_present() {
        return None;
    }
    Some((v.get("vpc_id").as_str()?, v.get("subnet_id").as_str()?))
}

fn region_and_name(v: &Value) -> (&str, &str) {
    (v.get("region").as_str().unwrap_or_default(), v.get("name").as_str().unwrap_or_default())
}

#[async_trait]
impl Backend<FabricSpec> for Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&spec.region, &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.region).await;
        let stale = change.stale_tags();
        let gpu = change.config.get("gpu").as_str();
        let (ids, error) = match fabric::converge(&client, spec, gpu, change.tags, &stale, step.census).await {
            Ok(ids) => (ids, None),
            Err((ids, e)) => (ids, Some(e)),
        };
        let mut state = change.state.clone();
        if let Some(v) = ids.vpc_id {
            state = shared::with_attr(&state, "vpc_id", Value::from(v));
        }
        if let Some(s) = ids.subnet_id {
            state = shared::with_attr(&state, "subnet_id", Value::from(s));
        }
        Outcome { state, error }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FabricSpec>) -> Outcome {
        let (region, name) = region_and_name(prior);
        let client = api::connect(step.ctx, region).await;
        let done = fabric::delete(step.ctx, &client, name, given_network(prior), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FabricSpec>) -> Result<Option<Value>, String> {
        let (region, name) = region_and_name(state);
        let client = api::connect(step.ctx, region).await;
        let live = fabric::observe(&client, name, given_network(state), step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        let kinds = fabric::present_kinds(&live);
        Ok(Some(shared::with_missing(state, |k| kinds.contains(&k))))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS fabric id: give \"aws/<region>/<fabric name>\", e.g. \"aws/us-east-1/train\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = fabric::observe(&client, name, None, step.census).await.map_err(ImportError::Failed)?;
        let config = fabric::imported_config(region, name, &live, step.default_tags).map_err(ImportError::Failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        if let Some((vpc, _, _)) = &live.vpc {
            assigned.insert("vpc_id".to_owned(), Value::from(vpc.as_str()));
        }
        if let Some((subnet, _)) = &live.subnet {
            assigned.insert("subnet_id".to_owned(), Value::from(subnet.as_str()));
        }
        Ok(Imported { config, assigned })
    }
}

// ------------------------------------------------------------------------------------------ clusters

/// The node piece of a cluster's expansion.
const NODES: &str = "aws_instance";

/// The region a cluster or filesystem lives in, from its fabric reference.
fn fabric_region(v: &Value) -> &str {
    v.get("fabric").get("region").as_str().unwrap_or_default()
}

/// A cluster state brought to what exists: node count, names and GPUs as found (on an UltraServer node
/// type, each NVLink domain's node piece with its own nodes); a launch template that is gone (with its
/// interfaces) marked missing.
fn refreshed_cluster(state: &Value, live: &cluster::ClusterLive) -> Value {
    let nodes = live.addresses();
    let out = with_domain_nodes(&shared::with_nodes(state, Cloud::Aws, NODES, &nodes), &nodes);
    if live.has_template {
        return out;
    }
    shared::with_missing(&out, |k| !k.starts_with("aws_launch_template"))
}

/// Nodes per NVLink domain of a cluster state whose node type is an UltraServer's (one piece per domain).
fn domain_nodes(state: &Value) -> Option<u32> {
    let sku = crate::catalog::find_sku(Cloud::Aws, state.get("instance_type").as_str()?)?;
    super::ultraserver_type(sku)?;
    sku.nvlink_domain.map(|d| d.nodes)
}

/// On an UltraServer node type, each domain's node piece (`<cluster>-nvl<k>`) counts and names the nodes of
/// that domain that exist, and is marked missing when none does; other states are returned as they are.
fn with_domain_nodes(state: &Value, nodes: &[shared::NodeAddress]) -> Value {
    let Some(per) = domain_nodes(state) else { return state.clone() };
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let Some(pieces) = state.get("expansion").as_list() else { return state.clone() };
    let index = |node: &str| crate::nodes::node_index(&name, node);
    let domain = |piece: &str| crate::nodes::domain_index(&name, piece);
    let pieces: Vec<Value> = pieces
        .iter()
        .map(|p| {
            let k = p.get("name").as_str().and_then(domain);
            let (Some(k), Some(NODES)) = (k, p.get("kind").as_str()) else { return p.clone() };
            let mut mine: Vec<u32> =
                nodes.iter().filter_map(|n| index(&n.name)).filter(|i| crate::nodes::domain_of(*i, per) == k).collect();
            mine.sort_unstable();
            mine.dedup();
            let whole: Vec<u32> = crate::nodes::whole_domain(k, per).collect();
            let names = if mine == whole {
                crate::nodes::node_range(&name, &mine)
            } else {
                mine.iter().map(|i| crate::nodes::node_name(&name, *i)).collect::<Vec<_>>().join(", ")
            };
            let patched = shared::patch_piece(&Value::list([p.clone()]), NODES, Some(mine.len() as i64), &[("names", names)]);
            let patched = patched.as_list().and_then(|l| l.first().cloned()).unwrap_or_else(|| p.clone());
            if mine.is_empty() { shared::marked_missing(&patched) } else { patched }
        })
        .collect();
    shared::with_attr(state, "expansion", Value::list(pieces))
}

/// The state after a successful apply: where the plan left `nodes` (or the day-2 maps: `node_revisions`,
/// `unhealthy_nodes`, `selfcheck`) unknown, the nodes as they now are.
fn with_addresses(state: &Value, planned: &Value, nodes: &[shared::NodeAddress]) -> Value {
    let mut out = state.clone();
    if planned.get("nodes").is_unknown() {
        out = shared::with_attr(&out, "nodes", shared::nodes_value(nodes));
    }
    for (attr, value) in shared::node_day2(state, nodes) {
        if planned.get(&attr).is_unknown() {
            out = shared::with_attr(&out, &attr, value);
        }
    }
    out
}

#[async_trait]
impl Backend<ClusterSpec> for Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    fn id(&self, spec: &ClusterSpec) -> Option<String> {
        Some(api::resource_id(&spec.fabric.region, &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", fabric_region(v))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        let stale = change.stale_tags();
        let options = cluster::Options { tags: change.tags, stale_tags: &stale, retag: change.retag(), timeout: step.timeout };
        match cluster::converge(step.ctx, &client, spec, &options, step.census).await {
            Ok(converged) => {
                let live = cluster::ClusterLive { has_template: true, nodes: converged.nodes, ..Default::default() };
                Outcome::done(with_addresses(change.state, change.planned, &live.addresses()))
            }
            // The nodes that exist are kept in state.
            Err(e) => match cluster::observe(&client, &spec.name, step.census).await {
                Ok(live) => Outcome::failed(refreshed_cluster(change.state, &live), e),
                Err(_) => Outcome::failed(change.state.clone(), e),
            },
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let name = prior.get("name").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, fabric_region(prior)).await;
        let Err(e) = cluster::delete(step.ctx, &client, name, step.timeout, step.census).await else {
            return Outcome::done(Value::Null);
        };
        // What is left stays in state.
        let left = match cluster::observe(&client, name, step.census).await {
            Ok(live) if live.is_empty() => Value::Null,
            Ok(live) => refreshed_cluster(prior, &live),
            Err(_) => prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, String> {
        let name = state.get("name").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, fabric_region(state)).await;
        let live = cluster::refresh(&client, name, step.census).await?;
        Ok((!live.is_empty()).then(|| refreshed_cluster(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS cluster id: give \"aws/<region>/<cluster name>\", e.g. \"aws/us-east-1/train-nodes\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = cluster::observe(&client, name, step.census).await.map_err(ImportError::Failed)?;
        let (config, _) = cluster::imported_config(&client, name, &live, step.default_tags).await.map_err(ImportError::Failed)?;
        Ok(Imported { config, assigned: BTreeMap::from([("id".to_owned(), Value::from(id))]) })
    }
}

#[async_trait]
impl ClusterBackend for Aws {
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        cluster::remove(step.ctx, &client, &spec.name, names, step.timeout, step.census).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        cluster::reboot(step.ctx, &client, &spec.name, names, step.timeout, step.census).await
    }

    fn node_piece(&self) -> &'static str {
        NODES
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), String> {
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        cluster::find(&client, &spec.name, step.census).await.map(|_| ())
    }

    fn upgrade(&self, version: i64, state: Value) -> Value {
        without_public_ip_flag(version, state)
    }

    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        quota::family(spec)
    }

    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, String> {
        let client = api::connect(ctx, &family.scope).await;
        quota::read(&client, family).await
    }

    fn capacity_code(&self, detail: &str) -> Option<&'static str> {
        crate::clouds::quota::first_code(detail, &quota::CAPACITY_CODES)
    }
}

/// State written before schema version 1 describes an AWS launch template whose primary interface sets
/// associate_public_ip_address beside the EFA interfaces; EC2 refuses that, this release sends no such flag
/// (and gives an existing template a new version without it), so the description loses it too.
fn without_public_ip_flag(version: i64, state: Value) -> Value {
    if version >= 1 {
        return state;
    }
    let Value::Map(mut map) = state else { return state };
    let Some(Value::List(pieces)) = map.get("expansion").cloned() else { return Value::Map(map) };
    let several = pieces.iter().filter(|p| p.get("kind").as_str() == Some("aws_launch_template.network_interfaces")).count() > 1;
    if !several {
        return Value::Map(map);
    }
    let pieces = pieces
        .into_iter()
        .map(|p| match p {
            Value::Map(mut piece) => {
                if let Some(Value::Map(settings)) = piece.get_mut("settings") {
                    settings.remove("associate_public_ip_address");
                }
                Value::Map(piece)
            }
            other => other,
        })
        .collect();
    map.insert("expansion".into(), Value::List(pieces));
    Value::Map(map)
}

// --------------------------------------------------------------------------------------- filesystems

/// The FSx file system id in a filesystem state's `aws/<region>/<fs id>`.
fn fs_id_of(state: &Value) -> Option<String> {
    api::parse_id(state.get("id").as_str()?).map(|(_, id)| id.to_owned())
}

/// A filesystem state brought to what exists: capacity, tier and mount point as found; a vanished data
/// repository association marked missing.
fn refreshed_filesystem(state: &Value, live: &filesystem::FsLive) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    let capacity = live.capacity();
    let tier = live.throughput_per_tib().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1024));
    out.insert("filesystem_name".into(), Value::from(live.mount_name()));
    out.insert("mount_target".into(), Value::from(live.dns()));
    out.insert("mount_command".into(), Value::from(live.mount_command()));
    if state.get("metadata_iops").is_present() {
        out.insert("metadata_iops".into(), Value::from(live.metadata_iops()));
    }
    let mut expansion = shared::patch_piece(
        state.get("expansion"),
        "aws_fsx_lustre_file_system",
        None,
        &[("storage_capacity", capacity.to_string()), ("per_unit_storage_throughput", tier.to_string())],
    );
    if live.dra.is_none() {
        expansion = shared::mark_missing(&expansion, |k| k != "aws_fsx_data_repository_association");
    } else if let Some(path) = live.dra.as_ref().and_then(|d| d.data_repository_path()) {
        out.insert("data_repository".into(), Value::from(path));
        expansion =
            shared::patch_piece(&expansion, "aws_fsx_data_repository_association", None, &[("data_repository_path", path.to_owned())]);
    }
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

/// What FSx assigned: the id, the mount name, the DNS name and the mount command made of them.
fn assigned_by_fsx(region: &str, live: &filesystem::FsLive) -> [(&'static str, Value); 4] {
    [
        ("id", Value::from(api::resource_id(region, live.id()))),
        ("filesystem_name", Value::from(live.mount_name())),
        ("mount_target", Value::from(live.dns())),
        ("mount_command", Value::from(live.mount_command())),
    ]
}

#[async_trait]
impl Backend<FilesystemSpec> for Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), String> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    /// FSx assigns the id; `apply` writes it.
    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        None
    }

    fn place(&self, v: &Value) -> String {
        match fs_id_of(v) {
            Some(fs_id) => format!("({fs_id}) in {}", fabric_region(v)),
            None => format!("in {}", fabric_region(v)),
        }
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let spec = change.spec;
        let region = spec.fabric.region.as_str();
        let client = api::connect(step.ctx, region).await;
        let stale = change.stale_tags();
        let options = filesystem::Options { tags: change.tags, stale_tags: &stale, timeout: step.timeout };
        let known = fs_id_of(change.prior);
        match filesystem::converge(step.ctx, &client, spec, known.as_deref(), &options, step.census).await {
            Ok(live) => {
                let state = assigned_by_fsx(region, &live).into_iter().fold(change.state.clone(), |s, (k, v)| shared::with_attr(&s, k, v));
                Outcome::done(state)
            }
            Err((id, e)) => {
                let state = match id {
                    // Keep track of what exists: a failed create is tainted and replaced by the next apply.
                    Some(fs_id) => {
                        let state = shared::with_attr(change.state, "id", Value::from(api::resource_id(region, &fs_id)));
                        match filesystem::observe(&client, &fs_id, step.census).await {
                            Ok(Some(live)) => refreshed_filesystem(&state, &live),
                            _ => state,
                        }
                    }
                    None if change.creating() => Value::Null,
                    None => change.prior.clone(),
                };
                Outcome::failed(state, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let client = api::connect(step.ctx, fabric_region(prior)).await;
        let Some(fs_id) = fs_id_of(prior) else { return Outcome::done(Value::Null) };
        let done = filesystem::delete(step.ctx, &client, &fs_id, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, String> {
        let Some(fs_id) = fs_id_of(state) else { return Ok(None) };
        let client = api::connect(step.ctx, fabric_region(state)).await;
        let live = filesystem::observe(&client, &fs_id, step.census).await?;
        Ok(live.map(|live| refreshed_filesystem(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, key)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS filesystem id: give \"aws/<region>/<file system id or name>\", e.g. \"aws/us-east-1/fs-0123456789abcdef0\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let fs_id = if key.starts_with("fs-") {
            Some(key.to_owned())
        } else {
            filesystem::find_by_name(&client, key, step.census).await.map_err(ImportError::Failed)?
        };
        let live = match fs_id {
            Some(fs_id) => filesystem::observe(&client, &fs_id, step.census).await.map_err(ImportError::Failed)?,
            None => None,
        };
        let Some(live) = live else {
            return Err(ImportError::Failed(format!("no such FSx for Lustre file system in {region}")));
        };
        let config = filesystem::imported_config(&client, &live, step.default_tags).await.map_err(ImportError::Failed)?;
        let assigned = assigned_by_fsx(region, &live).into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        Ok(Imported { config, assigned })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(kind: &str, name: &str) -> Value {
        Value::object([
            ("kind", Value::from(kind)),
            ("name", Value::from(name)),
            ("count", Value::int(1)),
            ("settings", Value::object([("names", Value::from("x")), ("data_repository_path", Value::from("s3://old"))])),
        ])
    }

    fn missing(state: &Value) -> Vec<String> {
        let pieces = state.get("expansion").as_list().unwrap_or_default().to_vec();
        pieces
            .iter()
            .filter(|p| p.get("settings").get("missing").is_present())
            .map(|p| p.get("kind").as_str().unwrap().to_owned())
            .collect()
    }

    fn cluster_state() -> Value {
        Value::object([
            ("name", Value::from("train")),
            ("fabric", Value::object([("region", Value::from("us-east-1"))])),
            ("instance_type", Value::from("p5.48xlarge")),
            ("node_count", Value::int(3)),
            (
                "expansion",
                Value::list([
                    piece("aws_key_pair", "train-key"),
                    piece("aws_launch_template", "train-lt"),
                    piece("aws_launch_template.network_interfaces", "train-lt card 0"),
                    piece("aws_instance", "train"),
                ]),
            ),
        ])
    }

    fn live(has_template: bool) -> cluster::ClusterLive {
        let node = |i: u32| cluster::Node {
            id: format!("i-{i}"),
            name: format!("train-{i}"),
            index: Some(i),
            private_ip: Some(format!("10.0.0.{i}")),
            ..Default::default()
        };
        cluster::ClusterLive { has_template, nodes: vec![node(1), node(0)], ..Default::default() }
    }

    #[test]
    fn a_cluster_refresh_marks_a_deleted_launch_template_and_its_interfaces_missing() {
        let out = refreshed_cluster(&cluster_state(), &live(false));
        assert_eq!(missing(&out), ["aws_launch_template", "aws_launch_template.network_interfaces"]);
        assert_eq!(out.get("node_count"), &Value::int(2));
        let names: Vec<&str> = out.get("node_names").as_list().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert_eq!(names, ["train-0", "train-1"]);
        let instances = &out.get("expansion").as_list().unwrap()[3];
        assert_eq!(instances.get("count"), &Value::int(2));
        assert_eq!(instances.get("settings").get("names").as_str(), Some("train-0 .. train-1"));
    }

    #[test]
    fn a_cluster_refresh_with_its_launch_template_marks_nothing() {
        let out = refreshed_cluster(&cluster_state(), &live(true));
        assert!(missing(&out).is_empty(), "{:?}", missing(&out));
        assert_eq!(out.get("nodes").as_list().unwrap()[0].get("id").as_str(), Some("i-0"));
    }

    #[test]
    fn an_ultraserver_cluster_refresh_counts_each_nvlink_domains_own_nodes() {
        let state = Value::object([
            ("name", Value::from("gb")),
            ("instance_type", Value::from("p6e-gb200.36xlarge")),
            (
                "expansion",
                Value::list([piece("aws_launch_template", "gb-lt"), piece("aws_instance", "gb-nvl0"), piece("aws_instance", "gb-nvl1")]),
            ),
        ]);
        let node = |i: u32| cluster::Node { id: format!("i-{i}"), name: format!("gb-{i}"), index: Some(i), ..Default::default() };
        let pieces = |nodes: Vec<cluster::Node>| {
            let out = refreshed_cluster(&state, &cluster::ClusterLive { has_template: true, nodes, ..Default::default() });
            out.get("expansion").as_list().unwrap()[1..]
                .iter()
                .map(|p| (p.get("count").clone(), p.get("settings").get("names").as_str().unwrap().to_owned()))
                .collect::<Vec<_>>()
        };
        // Node gb-20 lost: its domain shows 17, the other its whole 18.
        let found = pieces((0..36).filter(|i| *i != 20).map(node).collect());
        assert_eq!(found[0], (Value::int(18), "gb-0 .. gb-17".to_owned()));
        assert_eq!(found[1].0, Value::int(17));
        assert!(found[1].1.starts_with("gb-18, gb-19, gb-21"), "{:?}", found[1]);
        // A domain with no node left is missing.
        let out = refreshed_cluster(
            &state,
            &cluster::ClusterLive { has_template: true, nodes: (0..18).map(node).collect(), ..Default::default() },
        );
        assert_eq!(missing(&out), ["aws_instance"]);
        assert_eq!(out.get("node_count"), &Value::int(18));
    }

    #[test]
    fn nodes_are_filled_in_only_where_the_plan_left_them_unknown() {
        let nodes = live(true).addresses();
        let state = Value::object([("nodes", Value::Null)]);
        let unknown = Value::object([("nodes", Value::Unknown)]);
        assert_eq!(with_addresses(&state, &unknown, &nodes).get("nodes").as_list().map(<[Value]>::len), Some(2));
        assert_eq!(with_addresses(&state, &state, &nodes), state);
        // The day-2 maps likewise: each node's revision, its health and its self-check verdict.
        let mut nodes = nodes;
        nodes[0].revision = Some("r2".into());
        nodes[0].health = Some("system status check impaired since 2026-12-01T10:02Z".into());
        nodes[1].selfcheck = Some("ok".into());
        let unknown =
            Value::object([("node_revisions", Value::Unknown), ("unhealthy_nodes", Value::Unknown), ("selfcheck", Value::Unknown)]);
        let out = with_addresses(&Value::object([("revision", Value::from("r1"))]), &unknown, &nodes);
        assert_eq!(out.get("node_revisions").get("train-0").as_str(), Some("r2"));
        assert_eq!(out.get("node_revisions").get("train-1").as_str(), Some("r1"), "a node without its own takes the state's");
        assert_eq!(out.get("unhealthy_nodes").as_map().map(|m| m.keys().cloned().collect::<Vec<_>>()), Some(vec!["train-0".to_owned()]));
        assert_eq!(out.get("selfcheck").get("train-1").as_str(), Some("ok"));
    }

    #[test]
    fn the_fsx_id_comes_from_the_filesystem_id() {
        let state = |id: Value| Value::object([("id", id), ("fabric", Value::object([("region", Value::from("us-east-1"))]))]);
        assert_eq!(fs_id_of(&state(Value::from("aws/us-east-1/fs-0123"))), Some("fs-0123".to_owned()));
        for bad in [Value::Null, Value::Unknown, Value::from("fs-0123"), Value::from("gcp/us-east-1/fs-0123")] {
            assert_eq!(fs_id_of(&state(bad.clone())), None, "{bad:?}");
        }
        let fs: &dyn Backend<FilesystemSpec> = &Aws;
        assert_eq!(fs.place(&state(Value::from("aws/us-east-1/fs-0123"))), "(fs-0123) in us-east-1");
        assert_eq!(fs.place(&state(Value::Null)), "in us-east-1");
    }

    #[test]
    fn a_filesystem_refresh_takes_fsx_values_and_marks_a_vanished_association_missing() {
        use aws_sdk_fsx::types::{FileSystem, LustreFileSystemConfiguration};
        let fs = FileSystem::builder()
            .file_system_id("fs-0123")
            .storage_capacity(2400)
            .dns_name("fs-0123.fsx.us-east-1.amazonaws.com")
            .lustre_configuration(LustreFileSystemConfiguration::builder().mount_name("abcd").per_unit_storage_throughput(250).build())
            .build();
        let state = Value::object([
            ("capacity_gib", Value::int(1200)),
            ("metadata_iops", Value::Null),
            (
                "expansion",
                Value::list([piece("aws_fsx_lustre_file_system", "scratch"), piece("aws_fsx_data_repository_association", "scratch-dra")]),
            ),
        ]);
        let out = refreshed_filesystem(&state, &filesystem::FsLive { fs, dra: None });
        assert_eq!(out.get("capacity_gib"), &Value::int(2400));
        assert_eq!(out.get("throughput_mbps"), &Value::int(2400 * 250 / 1024));
        assert_eq!(out.get("filesystem_name").as_str(), Some("abcd"));
        assert_eq!(out.get("metadata_iops"), &Value::Null);
        assert_eq!(
            out.get("mount_command").as_str(),
            Some("sudo mkdir -p /fsx && sudo mount -t lustre -o relatime,flock fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcd /fsx")
        );
        assert_eq!(missing(&out), ["aws_fsx_data_repository_association"]);
    }
}
