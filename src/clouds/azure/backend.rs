//! Azure as a lifecycle backend: each step takes the ARM client of the provider's `azure` block and
//! converges, deletes, observes or reconstructs through `fabric`, `cluster` and `filesystem`. A fabric
//! lives in its resource group (`azure/<group>/<name>`); a cluster or filesystem in its fabric's, which
//! only the fabric's id names, so their ids are made in `apply` from the planned `fabric.id`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::api::{self, Arm};
use super::cluster::SCALE_SET;
use super::{cluster, fabric, filesystem, quota};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec, Network};

/// The Azure backend of every resource kind.
pub struct Azure;

/// What a cluster or filesystem whose fabric has no Azure id says; [`UNKNOWN_FABRIC_SUMMARY`] is its summary.
const UNKNOWN_FABRIC: &str = "its fabric has no Azure id (azure/<resource group>/<name>): apply the fabric first";
const UNKNOWN_FABRIC_SUMMARY: &str = "Unknown fabric";

fn unknown_fabric_summary(detail: &str) -> Option<&'static str> {
    detail.contains(UNKNOWN_FABRIC).then_some(UNKNOWN_FABRIC_SUMMARY)
}

/// The resource group of the fabric a cluster or filesystem state (or plan) names.
fn group_of(v: &Value) -> Option<String> {
    v.get("fabric").get("id").as_str().and_then(cluster::group_of_fabric)
}

/// `in <resource group>` for a cluster or filesystem, as their messages always said.
fn group_place(v: &Value) -> String {
    group_of(v).map_or_else(|| "on Azure".to_owned(), |g| format!("in {g}"))
}

/// The names of the nodes a state lists.
fn prior_nodes(state: &Value) -> Vec<String> {
    state.get("nodes").as_list().unwrap_or_default().iter().filter_map(|n| n.get("name").as_str().map(str::to_owned)).collect()
}

/// The scale-set sizes a state was planned with (from its expansion).
fn azure_sizes(state: &Value) -> Vec<u32> {
    state
        .get("expansion")
        .as_list()
        .unwrap_or_default()
        .iter()
        .filter(|p| p.get("kind").as_str() == Some(SCALE_SET))
        .filter_map(|p| p.get("settings").get("instances").as_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// A filesystem state brought to what exists.
fn azure_refreshed(state: &Value, fs: &serde_json::Value) -> Value {
    let (capacity, tier) = filesystem::size_of(fs);
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(capacity * tier / 1024));
    out.insert("mount_target".into(), Value::from(filesystem::mount_target(fs)));
    out.insert("mount_command".into(), Value::from(filesystem::mount_command(fs)));
    Value::Map(out)
}

/// The scale sets the refresh did not find, marked missing in the expansion (the next apply recreates them).
fn with_gone_sets(state: Value, cluster: &str, live: &[Option<cluster::SetLive>]) -> Value {
    let gone: Vec<String> =
        live.iter().enumerate().filter(|(_, l)| l.is_none()).map(|(i, _)| cluster::scale_set_name(cluster, i)).collect();
    if gone.is_empty() {
        return state;
    }
    let marked = Value::list(state.get("expansion").as_list().unwrap_or_default().iter().map(|p| {
        let missing = p.get("name").as_str().is_some_and(|n| gone.iter().any(|g| g == n));
        if missing && p.get("kind").as_str().is_some() { shared::marked_missing(p) } else { p.clone() }
    }));
    shared::with_attr(&state, "expansion", marked)
}

/// The resource group of a cluster's fabric, from its spec.
fn spec_group(spec: &ClusterSpec) -> String {
    let given = spec.own_fabric.as_ref().and_then(|o| o.resource_group.as_deref());
    fabric::group_name(&spec.fabric.name, given)
}

async fn arm(ctx: &Context) -> Result<Arm, String> {
    api::connect(ctx).await
}

// ------------------------------------------------------------------------------------------ fabric

#[async_trait]
impl Backend<FabricSpec> for Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        api::connect(ctx).await.map(|_| ())
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&fabric::group_name(&spec.name, spec.resource_group.as_deref()), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let ids = fabric::ids(&arm, spec);
        let mut state = change.state.clone();
        if let Network::Create { .. } = &spec.network {
            state = shared::with_attr(&state, "vpc_id", Value::from(ids.vnet.as_str()));
            state = shared::with_attr(&state, "subnet_id", Value::from(ids.subnet.as_str()));
        }
        let gpu = change.config.get("gpu").as_str();
        let done = fabric::converge(step.ctx, &arm, spec, gpu, change.tags, change.retag(), step.timeout, step.census).await;
        // The state is the planned one whether or not the fabric is complete: what was made stays in it.
        Outcome { state, error: done.err() }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, spec: Option<&FabricSpec>) -> Outcome {
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let Some(spec) = spec else {
            return Outcome::failed(prior.clone(), "its state does not describe a fabric this provider can read");
        };
        let done = fabric::delete(step.ctx, &arm, spec, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, spec: Option<&FabricSpec>) -> Result<Option<Value>, String> {
        let Some(spec) = spec else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let ids = fabric::ids(&arm, spec);
        let live = fabric::observe(step.ctx, &arm, &ids, step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        Ok(Some(shared::with_missing(state, fabric::present(&live, &ids))))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure fabric id: give \"azure/<resource group>/<fabric name>\", e.g. \"azure/train-rg/train\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::Failed)?;
        let nsg_id = format!("{}/providers/Microsoft.Network/networkSecurityGroups/{name}-nsg", arm.group_id(group));
        let config = match arm.get(step.ctx, &nsg_id, fabric::NETWORK_API).await {
            Ok(Some(nsg)) => {
                step.census.admit(
                    "azurerm_network_security_group",
                    &format!("{name}-nsg"),
                    crate::ownership::marker_in_json(&nsg["tags"]),
                    None,
                );
                let ours = group == format!("{name}-rg");
                fabric::imported_config(group, name, &nsg, !ours, step.default_tags)
            }
            Ok(None) => Err(format!("no fabric named {name:?} in resource group {group}: no security group {name}-nsg")),
            Err(e) => Err(e),
        }
        .map_err(ImportError::Failed)?;
        Ok(Imported { config, assigned: BTreeMap::from([("id".to_owned(), Value::from(id))]) })
    }

    /// A network the fabric created has the ids its names give.
    async fn imported(&self, step: &Step<'_>, spec: &FabricSpec, found: &mut Imported) -> Result<(), ImportError> {
        if let Network::Create { .. } = &spec.network {
            let arm = arm(step.ctx).await.map_err(ImportError::Failed)?;
            let ids = fabric::ids(&arm, spec);
            found.assigned.insert("vpc_id".into(), Value::from(ids.vnet.as_str()));
            found.assigned.insert("subnet_id".into(), Value::from(ids.subnet.as_str()));
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------------------------- cluster

#[async_trait]
impl Backend<ClusterSpec> for Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        api::connect(ctx).await.map(|_| ())
    }

    /// Only the fabric's id names the resource group: `apply` makes the id.
    fn id(&self, _spec: &ClusterSpec) -> Option<String> {
        None
    }

    fn place(&self, v: &Value) -> String {
        group_place(v)
    }

    fn summary(&self, detail: &str) -> Option<&'static str> {
        unknown_fabric_summary(detail)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let arm = match arm(ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let Some(group) = group_of(change.planned) else { return Outcome::failed(change.prior.clone(), UNKNOWN_FABRIC) };
        let previous_sets = azure_sizes(change.prior).len();
        let id = api::resource_id(&group, &spec.name);
        census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        let sizes = super::cluster_scale_sets(spec);
        match cluster::converge(ctx, &arm, spec, &group, change.tags, previous_sets, step.timeout, census).await {
            Ok(()) => {
                // What the plan left to the apply: the nodes and what they run and report (a known value in
                // the plan is kept as planned).
                let computed = ["nodes", "node_revisions", "unhealthy_nodes", "selfcheck"];
                if !computed.iter().any(|a| change.planned.get(a).is_unknown()) {
                    return Outcome::done(state);
                }
                // A failed lookup leaves them null: the next refresh fills them in.
                match cluster::observe(ctx, &arm, &group, &spec.name, sizes.len(), census).await {
                    Ok(live) => {
                        let nodes = cluster::nodes(&spec.name, &sizes, &live, change.prior.get("node_revisions"));
                        let mut found = shared::node_day2(change.prior, &nodes);
                        found.insert("nodes".into(), shared::nodes_value(&nodes));
                        let state = computed
                            .iter()
                            .filter(|a| change.planned.get(a).is_unknown())
                            .fold(state, |s, a| shared::with_attr(&s, a, found.remove(*a).unwrap_or(Value::Null)));
                        Outcome::done(state)
                    }
                    Err(_) => Outcome::done(state),
                }
            }
            Err(mut e) => {
                let mut live = cluster::observe(ctx, &arm, &group, &spec.name, sizes.len(), census).await;
                // Fewer nodes came than the policy keeps (no capacity, most often): the VMs this apply made are
                // deleted from their scale sets before the apply fails. A node is otherwise remade in place on
                // Azure, never deleted, so the lifecycle's release by `remove_nodes` would keep them.
                if let Ok(found) = &live {
                    let nodes = cluster::nodes(&spec.name, &sizes, found, change.prior.get("node_revisions"));
                    if !spec.capacity_policy.keeps(nodes.len() as u32, spec.node_count) {
                        let had = prior_nodes(change.prior);
                        let made = cluster::made_since(&spec.name, &sizes, found, &had);
                        match cluster::release(ctx, &arm, &group, &spec.name, &made, step.timeout).await {
                            Ok(0) => {}
                            Ok(n) => {
                                e = format!(
                                    "{e}; {n} of the {} nodes came, fewer than capacity_policy = \"{}\" keeps, and were deleted again",
                                    spec.node_count,
                                    spec.capacity_policy.as_str()
                                );
                                live = cluster::observe(ctx, &arm, &group, &spec.name, sizes.len(), census).await;
                            }
                            Err(r) => e = format!("{e}; deleting the VMs that came failed: {r}"),
                        }
                    }
                }
                let kept = match live {
                    Ok(live) => {
                        let nodes = cluster::nodes(&spec.name, &sizes, &live, change.prior.get("node_revisions"));
                        shared::with_nodes(&state, Cloud::Azure, SCALE_SET, &nodes)
                    }
                    Err(_) => state,
                };
                Outcome::failed(kept, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let Some(group) = group_of(prior) else { return Outcome::failed(prior.clone(), UNKNOWN_FABRIC) };
        let previous_sets = azure_sizes(prior).len();
        let name = prior.get("name").as_str().unwrap_or_default();
        let done = cluster::delete(step.ctx, &arm, &group, name, previous_sets, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, String> {
        let name = state.get("name").as_str().unwrap_or_default();
        let Some(group) = group_of(state) else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let sizes = azure_sizes(state);
        let live = cluster::observe(step.ctx, &arm, &group, name, sizes.len(), step.census).await?;
        if live.iter().all(Option::is_none) {
            return Ok(None);
        }
        let nodes = cluster::nodes(name, &sizes, &live, state.get("node_revisions"));
        // Each scale set keeps its planned size in the expansion (no piece is of this kind).
        let out = shared::with_nodes(state, Cloud::Azure, "(scale sets keep their planned sizes)", &nodes);
        Ok(Some(with_gone_sets(out, name, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure cluster id: give \"azure/<resource group>/<cluster name>\", e.g. \"azure/train-rg/train\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::Failed)?;
        let config =
            cluster::imported_config(step.ctx, &arm, group, name, step.default_tags, step.census).await.map_err(ImportError::Failed)?;
        Ok(Imported { config, assigned: BTreeMap::from([("id".to_owned(), Value::from(id))]) })
    }
}

#[async_trait]
impl ClusterBackend for Azure {
    /// On Azure a node is remade in place, never deleted: a VM made again would get a new instance id at
    /// its scale set's end and move every later node's name. The scale set model is brought to the spec
    /// and the named VMs upgraded to it and reimaged (redeployed first when broken); the apply that follows
    /// finds nothing missing.
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        cluster::remake(step.ctx, &arm, spec, &group, names, step.timeout, step.census).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), String> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        cluster::reboot(step.ctx, &arm, spec, &group, names, step.timeout, step.census).await
    }

    fn node_piece(&self) -> &'static str {
        SCALE_SET
    }

    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        quota::family(spec)
    }

    /// One `Usage_List` of the location per family.
    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, String> {
        let arm = arm(ctx).await?;
        quota::read(ctx, &arm, family).await
    }

    fn capacity_code(&self, detail: &str) -> Option<&'static str> {
        crate::clouds::quota::first_code(detail, &quota::CAPACITY_CODES)
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), String> {
        let arm = arm(step.ctx).await?;
        let group = spec_group(spec);
        let sets = super::cluster_scale_sets(spec).len();
        // The census notes another owner's scale sets; the caller's look ahead refuses them.
        cluster::observe(step.ctx, &arm, &group, &spec.name, sets, step.census).await.map(|_| ())
    }
}

// -------------------------------------------------------------------------------------- filesystem

#[async_trait]
impl Backend<FilesystemSpec> for Azure {
    async fn configured(&self, ctx: &Context) -> Result<(), String> {
        api::connect(ctx).await.map(|_| ())
    }

    /// Only the fabric's id names the resource group: `apply` makes the id.
    fn id(&self, _spec: &FilesystemSpec) -> Option<String> {
        None
    }

    fn place(&self, v: &Value) -> String {
        group_place(v)
    }

    fn summary(&self, detail: &str) -> Option<&'static str> {
        unknown_fabric_summary(detail)
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let name = change.planned.get("name").as_str().unwrap_or_default();
        let arm = match arm(ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let Some(group) = group_of(change.planned) else { return Outcome::failed(change.prior.clone(), UNKNOWN_FABRIC) };
        let id = api::resource_id(&group, name);
        census.set_import_id(&id);
        let state = shared::with_attr(change.state, "id", Value::from(id));
        match filesystem::converge(ctx, &arm, spec, &group, change.tags, step.timeout, census).await {
            Ok(fs) => {
                let state = shared::with_attr(&state, "mount_target", Value::from(filesystem::mount_target(&fs)));
                Outcome::done(shared::with_attr(&state, "mount_command", Value::from(filesystem::mount_command(&fs))))
            }
            Err(e) => {
                let kept = match filesystem::observe(ctx, &arm, &group, name, census).await {
                    Ok(Some(fs)) => azure_refreshed(&state, &fs),
                    _ if change.creating() => Value::Null,
                    _ => change.prior.clone(),
                };
                Outcome::failed(kept, e)
            }
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let name = prior.get("name").as_str().unwrap_or_default();
        let arm = match arm(step.ctx).await {
            Ok(a) => a,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let Some(group) = group_of(prior) else { return Outcome::failed(prior.clone(), UNKNOWN_FABRIC) };
        let done = filesystem::delete(step.ctx, &arm, &group, name, step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, String> {
        let name = state.get("name").as_str().unwrap_or_default();
        let Some(group) = group_of(state) else { return Ok(Some(state.clone())) };
        let arm = arm(step.ctx).await?;
        let found = filesystem::observe(step.ctx, &arm, &group, name, step.census).await?;
        Ok(found.map(|fs| azure_refreshed(state, &fs)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((group, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an Azure filesystem id: give \"azure/<resource group>/<name>\", e.g. \"azure/train-rg/scratch\"."
            )));
        };
        let arm = arm(step.ctx).await.map_err(ImportError::Failed)?;
        let fs = filesystem::observe(step.ctx, &arm, group, name, step.census)
            .await
            .and_then(|found| found.ok_or_else(|| format!("no Azure Managed Lustre filesystem {name} in {group}")))
            .map_err(ImportError::Failed)?;
        let config = filesystem::imported_config(step.ctx, &arm, group, &fs, step.default_tags).await.map_err(ImportError::Failed)?;
        let assigned = BTreeMap::from([
            ("id".to_owned(), Value::from(id)),
            ("mount_target".to_owned(), Value::from(filesystem::mount_target(&fs))),
            ("mount_command".to_owned(), Value::from(filesystem::mount_command(&fs))),
        ]);
        Ok(Imported { config, assigned })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clouds::azure::scale_set_sizes;

    fn set(name: &str, instances: &str) -> Value {
        Value::object([
            ("kind", Value::from(SCALE_SET)),
            ("name", Value::from(name)),
            ("settings", Value::object([("instances", Value::from(instances)), ("sku", Value::from("Standard_ND96isr_H100_v5"))])),
        ])
    }

    fn piece(kind: &str, name: &str) -> Value {
        Value::object([
            ("kind", Value::from(kind)),
            ("name", Value::from(name)),
            ("settings", Value::object([("tags", Value::from("{}"))])),
        ])
    }

    #[test]
    fn scale_sets_hold_at_most_100_nodes_and_differ_by_at_most_one() {
        assert_eq!(scale_set_sizes(101), vec![51, 50]);
        assert_eq!(scale_set_sizes(300), vec![100, 100, 100]);
        assert_eq!(scale_set_sizes(0), vec![0], "an empty cluster still plans one (empty) scale set");
        for nodes in 1..=1000u32 {
            let sizes = scale_set_sizes(nodes);
            assert_eq!(sizes.iter().sum::<u32>(), nodes, "{nodes}");
            assert!(sizes.iter().all(|s| *s <= 100), "{nodes}: {sizes:?}");
            assert_eq!(sizes.len() as u32, nodes.div_ceil(100), "{nodes}: as few sets as the limit allows");
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{nodes}: {sizes:?}");
        }
    }

    #[test]
    fn sizes_are_read_back_from_the_scale_sets_of_the_expansion_in_order() {
        let state = Value::object([(
            "expansion",
            Value::list([piece("azurerm_resource_group", "big-rg"), set("big-0", "75"), set("big-1", "74"), piece("other", "x")]),
        )]);
        assert_eq!(azure_sizes(&state), vec![75, 74]);
        let unreadable = Value::object([("expansion", Value::list([set("big-0", "many"), set("big-1", "3")]))]);
        assert_eq!(azure_sizes(&unreadable), vec![3], "a size that is not a number is skipped");
        assert!(azure_sizes(&Value::Null).is_empty());
        assert!(azure_sizes(&Value::object([("expansion", Value::Null)])).is_empty());
    }

    #[test]
    fn the_group_of_a_fabric_comes_from_its_azure_id() {
        assert_eq!(cluster::group_of_fabric("azure/ml-rg/train"), Some("ml-rg".to_owned()));
        assert_eq!(cluster::group_of_fabric("aws/us-east-1/train"), None);
        assert_eq!(cluster::group_of_fabric("azure/train"), None);
        assert_eq!(cluster::group_of_fabric("azure//train"), None);
        let state = Value::object([("fabric", Value::object([("id", Value::from("azure/ml-rg/train"))]))]);
        assert_eq!(group_place(&state), "in ml-rg");
        assert_eq!(group_place(&Value::object([("fabric", Value::object([("id", Value::Null)]))])), "on Azure");
    }

    #[test]
    fn computer_name_prefixes_fit_azure_s_15_characters_and_differ_per_set() {
        assert_eq!(cluster::computer_name_prefix("train", 0), "train-0-");
        assert_eq!(cluster::computer_name_prefix("averyveryverylongname", 12), "averyveryve-12-");
        // A cut that ends on a hyphen does not double it.
        assert_eq!(cluster::computer_name_prefix("abcdefghijk-lmn", 0), "abcdefghijk-0-");
        let prefixes: Vec<String> = (0..120).map(|i| cluster::computer_name_prefix("a-rather-long-cluster-name", i)).collect();
        assert!(prefixes.iter().all(|p| (1..=15).contains(&p.len())), "{prefixes:?}");
        let distinct: std::collections::BTreeSet<&String> = prefixes.iter().collect();
        assert_eq!(distinct.len(), prefixes.len());
    }

    #[test]
    fn an_imported_fabric_keeps_a_user_tag_named_name() {
        let nsg = serde_json::json!({
            "location": "eastus",
            "tags": {"hpc:instance-type": "Standard_ND96isr_H100_v5", "hpc:placement": "cluster", "hpc:cidr": "10.0.0.0/16",
                     "hpc:owner": "o-1", "hpc:fabric": "train", "Name": "x", "team": "ml", "env": "prod"},
        });
        let defaults = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let config = fabric::imported_config("train-rg", "train", &nsg, false, &defaults).unwrap();
        let tags = config.get("tags");
        assert_eq!(tags.get("Name").as_str(), Some("x"), "{tags:?}");
        assert_eq!(tags.get("team").as_str(), Some("ml"));
        assert!(tags.get("env").is_null() && tags.get("hpc:owner").is_null(), "defaults and the provider's keys are left out: {tags:?}");
    }

    #[test]
    fn a_scale_set_deleted_outside_is_marked_missing() {
        let state = Value::object([("expansion", Value::list([set("c-0", "2"), set("c-1", "2")]))]);
        let vm = cluster::Vm { id: "vm".into(), ..Default::default() };
        let set = cluster::SetLive { vms: vec![vm.clone(), vm], ..Default::default() };
        let out = with_gone_sets(state.clone(), "c", &[Some(set), None]);
        let pieces = out.get("expansion").as_list().unwrap().to_vec();
        assert!(pieces[0].get("settings").get("missing").is_null());
        assert_eq!(pieces[1].get("settings").get("missing").as_str(), Some(shared::MISSING));
        assert_eq!(with_gone_sets(state.clone(), "c", &[Some(Default::default()), Some(Default::default())]), state);
    }

    #[test]
    fn an_unknown_fabric_keeps_its_own_summary() {
        let detail = format!("Cluster c on Azure: {UNKNOWN_FABRIC}.");
        assert_eq!(unknown_fabric_summary(&detail), Some("Unknown fabric"));
        assert_eq!(unknown_fabric_summary("Cluster c in rg: AllocationFailed: no capacity."), None);
    }
}
