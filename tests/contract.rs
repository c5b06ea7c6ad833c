//! The contract every cloud's cluster backend keeps, written once and run against each cloud's emulator
//! with the same test names (`aws::grow_keeps_the_running_nodes_and_adds_the_new`,
//! `gcp::grow_keeps_the_running_nodes_and_adds_the_new`, ...): create, a refresh that costs the same at one
//! node as at four, grow, shrink, a node lost outside made again, import, another owner's cluster of the
//! same name refused, a capacity shortfall under each `capacity_policy`, the repair of an unhealthy node, a
//! rolling image change in the planned batches, and a destroy that leaves nothing of its own and another
//! owner's cluster as it was.
//!
//! What differs per cloud is the [`Cloud`] trait: how its emulator starts, an H100-class fabric and
//! cluster there, how its nodes are listed, and how a node is lost or broken behind the provider's back.
//! A cloud gets the whole suite with one `contract!` line. The per-cloud files (`aws.rs`, `azure.rs`,
//! `gcp.rs`, `oci.rs`) keep what only that cloud has.
//!
//! Every test starts its own emulator, except Azure's: the certificate the provider trusts is named by a
//! process-wide environment variable and ARM clients live for the process, so Azure's tests share one
//! emulator and one runtime and take it in turns, each from a reset.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use common::{destroy, import_and_read, node_names, provider_context, read, read_found, value};
use hpc_emulators::harness::{AwsEmulator, OciKey, admin, azure_admin, azure_call, start_aws, start_azure, start_gcp, start_oci};
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Severity, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use serde_json::{Value as Json, json};

/// A node as the cloud shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    /// The cloud's id for it, in the form the state's `nodes` carries.
    id: String,
    /// What tells this node from one made again under its name (the same as `id` where a new node gets
    /// a new id).
    incarnation: String,
    /// The name of the placement it runs in (placement group, resource policy, compute cluster,
    /// proximity placement group), if any.
    placement: Option<String>,
    /// The RDMA interfaces the cloud shows on the node; `None` where they come with the node type and
    /// the cloud lists none per node.
    rdma: Option<usize>,
    /// The node configuration revision the cloud records on the node itself, where it records one.
    revision: Option<String>,
}

/// What differs per cloud; everything else in this file is the contract.
trait Cloud: Sized {
    /// The H100-class node type the suite runs on.
    const SKU: &'static str;
    /// Where that capacity is counted (zone, availability domain or region), as capacity diagnostics name it.
    const ZONE: &'static str;
    /// The cloud's own word for "no capacity", as its capacity diagnostics quote it.
    const CAPACITY_CODE: &'static str;
    /// Two images, for a rolling update from the first to the second.
    const IMAGES: [&'static str; 2];
    /// Whether a repaired or updated node is remade in place (same id, reimaged), not replaced.
    const REMADE_IN_PLACE: bool = false;
    /// The node count at which the cloud's layout of a cluster splits (Azure's 100-VM scale sets, AWS's
    /// RunInstances and Google's bulkInsert batches): node-count changes are tried across it.
    const SPLIT: u32 = 100;

    /// This cloud's emulator, empty, and a provider configured for it.
    async fn start() -> Self;
    /// Runs one test.
    fn run(test: impl Future<Output = ()>) {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap().block_on(test);
    }
    fn ctx(&self) -> &Context;
    /// The emulator's admin API.
    fn admin(&self, method: &str, route: &str, body: Option<Json>) -> Json;
    /// A fabric's configuration, placement `cluster`.
    fn fabric(&self, name: &str) -> Json;
    /// The reference a cluster on that fabric gives.
    fn fabric_ref(&self, name: &str) -> Json;
    /// Anything else a cluster here needs (an SSH key on Azure, timeouts).
    fn cluster_extra(&self) -> Json {
        json!({})
    }
    /// The live nodes of `cluster`, by name.
    async fn nodes(&self, cluster: &str) -> BTreeMap<String, Node>;
    /// Deletes `node` behind the provider's back.
    fn vanish(&self, node: &Node);
    /// Makes the cloud report `node` unhealthy.
    fn impair(&self, node: &Node);
    /// Makes the cloud schedule maintenance on `node` (in a window from 2026-12-05T00:00Z); returns the
    /// words the provider reports it with.
    fn schedule_maintenance(&self, node: &Node) -> String;
    /// Lets nodes just made, stopped or deleted reach a steady state.
    async fn settle(&self) {}
}

// ------------------------------------------------------------------------------------------ the contract

/// An apply as the CLI makes it (plan, then apply): the new state and the plan's and apply's errors and
/// warnings as `summary: detail`.
struct Applied {
    state: Value,
    errors: Vec<String>,
    warnings: Vec<String>,
}

async fn apply_to(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> Applied {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    let said = |s: Severity| diags.iter().filter(|d| d.severity == s).map(|d| format!("{}: {}", d.summary, d.detail)).collect();
    Applied { state: out.new_state, errors: said(Severity::Error), warnings: said(Severity::Warning) }
}

/// An apply that must succeed: its state and warnings.
async fn apply_ok<C: Cloud>(c: &C, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let a = apply_to(c.ctx(), resource, prior, config).await;
    assert!(a.errors.is_empty(), "{}: {:?}", resource.type_name(), a.errors);
    (a.state, a.warnings)
}

async fn make_fabric<C: Cloud>(c: &C, name: &str) -> Value {
    apply_ok(c, &GpuFabric, &Value::Null, &value(&GpuFabric, c.fabric(name))).await.0
}

/// Cluster `name` of `nodes` nodes on fabric `fabric`, on the first image, with `extra` settings.
fn config<C: Cloud>(c: &C, fabric: &str, name: &str, nodes: u32, extra: Json) -> Value {
    let mut config = json!({"name": name, "fabric": c.fabric_ref(fabric), "node_count": nodes, "image": C::IMAGES[0]});
    for more in [c.cluster_extra(), extra] {
        config.as_object_mut().unwrap().extend(more.as_object().cloned().unwrap_or_default());
    }
    value(&GpuCluster, config)
}

fn names(cluster: &str, indexes: std::ops::Range<u32>) -> Vec<String> {
    indexes.map(|i| format!("{cluster}-{i}")).collect()
}

fn incarnations(nodes: &BTreeMap<String, Node>) -> BTreeMap<String, String> {
    nodes.iter().map(|(n, node)| (n.clone(), node.incarnation.clone())).collect()
}

/// A string map attribute of a state.
fn strings(v: &Value) -> BTreeMap<String, String> {
    v.as_map().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect()).unwrap_or_default()
}

/// The ids in a state's `nodes`, by name.
fn state_ids(state: &Value) -> BTreeMap<String, String> {
    state
        .get("nodes")
        .as_list()
        .unwrap_or_default()
        .iter()
        .map(|n| (n.get("name").as_str().unwrap_or_default().to_owned(), n.get("id").as_str().unwrap_or_default().to_lowercase()))
        .collect()
}

/// The attributes in which two states differ, each with both values.
fn differences(a: &Value, b: &Value) -> Vec<String> {
    let (a, b) = (a.as_map().cloned().unwrap_or_default(), b.as_map().cloned().unwrap_or_default());
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).map(|k| format!("{k}: {:?} / {:?}", a.get(k), b.get(k))).collect()
}

/// A fabric `f` and on it cluster `c` of `nodes` nodes with `extra` settings, settled: (config, state).
async fn cluster_of<C: Cloud>(c: &C, nodes: u32, extra: Json) -> (Value, Value) {
    make_fabric(c, "f").await;
    let config = config(c, "f", "c", nodes, extra);
    let (state, _) = apply_ok(c, &GpuCluster, &Value::Null, &config).await;
    c.settle().await;
    (config, state)
}

async fn create_makes_the_nodes_by_name_with_the_node_types_rdma_and_placement<C: Cloud>() {
    let c = C::start().await;
    let fabric = make_fabric(&c, "f").await;
    let (state, _) = apply_ok(&c, &GpuCluster, &Value::Null, &config(&c, "f", "c", 3, json!({}))).await;
    c.settle().await;
    assert_eq!(node_names(&state), names("c", 0..3));
    let live = c.nodes("c").await;
    assert_eq!(live.keys().cloned().collect::<Vec<_>>(), names("c", 0..3), "{live:?}");
    let by_name: BTreeMap<String, String> = live.iter().map(|(n, node)| (n.clone(), node.id.to_lowercase())).collect();
    assert_eq!(state_ids(&state), by_name, "the state's node ids are the cloud's");
    // Each node has the node type's RDMA interfaces (where the cloud lists them per node) and runs in the
    // fabric's placement.
    let rdma = state.get("rdma_interfaces").as_number().and_then(|n| n.as_i64()).unwrap();
    assert_eq!(Some(rdma), hpc_provider::catalog::find_sku(cloud_of(&state), C::SKU).unwrap().rdma_interfaces.map(i64::from));
    let placements: Vec<String> =
        fabric.get("expansion").as_list().unwrap_or_default().iter().filter_map(|p| p.get("name").as_str().map(str::to_owned)).collect();
    for (name, node) in &live {
        if let Some(n) = node.rdma {
            assert_eq!(n as i64, rdma, "{name}: {node:?}");
        }
        let placement = node.placement.as_deref().unwrap_or_else(|| panic!("{name} runs in no placement: {node:?}"));
        assert!(placements.iter().any(|p| p == placement), "{name} runs in {placement}, not one of the fabric's {placements:?}");
    }
}

fn cloud_of(state: &Value) -> hpc_provider::catalog::Cloud {
    hpc_provider::catalog::Cloud::parse(state.get("fabric").get("cloud").as_str().unwrap()).unwrap()
}

async fn a_refresh_makes_the_same_calls_at_one_node_as_at_four<C: Cloud>() {
    let c = C::start().await;
    make_fabric(&c, "f").await;
    let (one, _) = apply_ok(&c, &GpuCluster, &Value::Null, &config(&c, "f", "one", 1, json!({}))).await;
    let (four, _) = apply_ok(&c, &GpuCluster, &Value::Null, &config(&c, "f", "four", 4, json!({}))).await;
    c.settle().await;
    let mut calls = Vec::new();
    for (state, n) in [(&one, 1), (&four, 4)] {
        c.admin("DELETE", "counters", None);
        let found = read_found(c.ctx(), &GpuCluster, state).await;
        assert_eq!(node_names(&found).len(), n);
        calls.push(c.admin("GET", "counters", None)["counters"].clone());
    }
    assert!(calls[0].as_object().is_some_and(|m| !m.is_empty()), "{calls:?}");
    assert_eq!(calls[0], calls[1], "the calls of a refresh at 1 node, then at 4");
}

async fn grow_keeps_the_running_nodes_and_adds_the_new<C: Cloud>() {
    let c = C::start().await;
    let (_, state) = cluster_of(&c, 2, json!({})).await;
    let before = incarnations(&c.nodes("c").await);
    let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
    let (grown, _) = apply_ok(&c, &GpuCluster, &refreshed, &config(&c, "f", "c", 4, json!({}))).await;
    c.settle().await;
    assert_eq!(node_names(&grown), names("c", 0..4));
    let after = incarnations(&c.nodes("c").await);
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), names("c", 0..4), "{after:?}");
    for n in names("c", 0..2) {
        assert_eq!(after[&n], before[&n], "{n} kept running");
    }
}

async fn shrink_removes_the_highest_numbered_nodes<C: Cloud>() {
    let c = C::start().await;
    let (_, state) = cluster_of(&c, 4, json!({})).await;
    let before = incarnations(&c.nodes("c").await);
    let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
    let (shrunk, _) = apply_ok(&c, &GpuCluster, &refreshed, &config(&c, "f", "c", 2, json!({}))).await;
    c.settle().await;
    assert_eq!(node_names(&shrunk), names("c", 0..2));
    let after = incarnations(&c.nodes("c").await);
    assert_eq!(after, before.into_iter().filter(|(n, _)| names("c", 0..2).contains(n)).collect(), "c-0 and c-1 stay as they were");
    assert_eq!(node_names(&read_found(c.ctx(), &GpuCluster, &shrunk).await), names("c", 0..2));
}

async fn a_node_deleted_outside_is_seen_by_the_refresh_and_made_again_by_the_next_apply<C: Cloud>() {
    let c = C::start().await;
    let (config, state) = cluster_of(&c, 3, json!({})).await;
    let before = c.nodes("c").await;
    c.vanish(&before["c-1"]);
    c.settle().await;
    let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
    // The refresh sees two nodes, the survivors (by id; by name too where names do not follow positions).
    let survivors: Vec<String> = ["c-0", "c-2"].iter().map(|n| before[*n].id.to_lowercase()).collect();
    let mut seen: Vec<String> = state_ids(&refreshed).into_values().collect();
    seen.sort();
    let mut expected = survivors.clone();
    expected.sort();
    assert_eq!(seen, expected, "the refresh lists the nodes that are left");
    assert_eq!(node_names(&refreshed), ["c-0", "c-2"], "no name moved");
    let (repaired, _) = apply_ok(&c, &GpuCluster, &refreshed, &config).await;
    c.settle().await;
    assert_eq!(node_names(&repaired), names("c", 0..3));
    let after = c.nodes("c").await;
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), names("c", 0..3));
    let ids: Vec<String> = after.values().map(|n| n.id.to_lowercase()).collect();
    for id in &survivors {
        assert!(ids.contains(id), "survivor {id} is still there: {after:?}");
    }
    assert_eq!((&after["c-0"].incarnation, &after["c-2"].incarnation), (&before["c-0"].incarnation, &before["c-2"].incarnation));
    assert_ne!(after["c-1"].incarnation, before["c-1"].incarnation, "c-1 is a new node");
}

async fn an_import_by_id_gives_the_state_the_apply_gave<C: Cloud>() {
    let c = C::start().await;
    let fabric = make_fabric(&c, "f").await;
    let (cluster, _) = apply_ok(&c, &GpuCluster, &Value::Null, &config(&c, "f", "c", 2, json!({}))).await;
    c.settle().await;
    let imported = import_and_read(c.ctx(), &GpuCluster, cluster.get("id").as_str().unwrap()).await;
    // The `timeouts` block is the configuration's alone (the cloud keeps no trace of it).
    let untimed = |v: &Value| hpc_provider::clouds::shared::with_attr(v, "timeouts", Value::Null);
    assert_eq!(
        differences(&untimed(&imported), &untimed(&cluster)),
        Vec::<String>::new(),
        "the imported cluster is the one the apply made"
    );
    let imported = import_and_read(c.ctx(), &GpuFabric, fabric.get("id").as_str().unwrap()).await;
    assert_eq!(differences(&imported, &fabric), Vec::<String>::new(), "the imported fabric");
}

async fn another_owners_cluster_of_the_same_name_is_refused_and_left_untouched<C: Cloud>() {
    let c = C::start().await;
    let (config, theirs) = cluster_of(&c, 2, json!({})).await;
    let before = c.admin("GET", "snapshot", None);
    let their_state = read_found(c.ctx(), &GpuCluster, &theirs).await;
    // Another state (a fresh create, so another owner) with the same name.
    let refused = apply_to(c.ctx(), &GpuCluster, &Value::Null, &config).await;
    let error = refused.errors.iter().find(|e| e.starts_with("Name already in use")).unwrap_or_else(|| panic!("{:?}", refused.errors));
    assert!(error.contains("\"c\" cannot be created") && error.contains("belong to another owner"), "{error}");
    assert!(error.contains("c-0"), "the diagnostic names the pieces: {error}");
    assert!(node_names(&refused.state).is_empty(), "{:?}", refused.state);
    assert_eq!(c.admin("GET", "snapshot", None), before, "nothing of the other owner's changed");
    let refreshed = read_found(c.ctx(), &GpuCluster, &theirs).await;
    assert_eq!(differences(&refreshed, &their_state), Vec::<String>::new(), "their cluster reads as before");
    assert_eq!(node_names(&refreshed), names("c", 0..2));
}

/// Capacity for 3 of the node type where a cluster of 4 is created under `policy`: what the apply gave,
/// the configuration and the fabric.
async fn short_of_capacity<C: Cloud>(c: &C, policy: Json) -> (Applied, Value, Value) {
    let fabric = make_fabric(c, "f").await;
    c.admin("POST", "capacity", Some(json!({"zone": C::ZONE, "instance_type": C::SKU, "available": 3})));
    let config = config(c, "f", "c", 4, policy);
    let applied = apply_to(c.ctx(), &GpuCluster, &Value::Null, &config).await;
    c.settle().await;
    (applied, config, fabric)
}

/// Capacity back: the next apply from `state` makes the cluster whole, the nodes there kept; its destroy
/// leaves nothing.
async fn capacity_back<C: Cloud>(c: &C, fabric: &Value, state: &Value, config: &Value) {
    let before = incarnations(&c.nodes("c").await);
    c.admin("POST", "capacity", Some(json!({"zone": C::ZONE, "instance_type": C::SKU, "available": null})));
    let refreshed = match read(c.ctx(), &GpuCluster, state).await.0 {
        ReadOutcome::Found { state, .. } => state,
        ReadOutcome::Gone => Value::Null,
    };
    let (whole, warnings) = apply_ok(c, &GpuCluster, &refreshed, config).await;
    assert!(warnings.iter().all(|w| !w.contains("capacity")), "no shortfall is left: {warnings:?}");
    c.settle().await;
    assert_eq!(node_names(&whole), names("c", 0..4));
    let after = incarnations(&c.nodes("c").await);
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), names("c", 0..4));
    for (n, id) in before {
        assert_eq!(after[&n], id, "{n} kept");
    }
    destroy(c.ctx(), &GpuCluster, &whole).await;
    destroy(c.ctx(), &GpuFabric, fabric).await;
    c.settle().await;
    let inventory = c.admin("GET", "inventory", None);
    assert_eq!(inventory["empty"], true, "{inventory}");
}

/// Three of the four nodes came, and the state keeps exactly those. Which three is the cloud's doing: nodes
/// launched at once (OCI launches each on its own) take the capacity in the order they reach it.
async fn came_and_kept<C: Cloud>(c: &C, state: &Value) {
    let live: Vec<String> = c.nodes("c").await.keys().cloned().collect();
    assert_eq!(live.len(), 3, "{live:?}");
    assert!(live.iter().all(|n| names("c", 0..4).contains(n)), "{live:?}");
    let mut kept = node_names(state);
    kept.sort();
    assert_eq!(kept, live, "the state keeps what came");
}

/// The one capacity diagnostic: the node type, where, and the cloud's code.
fn shortage<C: Cloud>(errors: &[String]) -> &str {
    let summary = format!("Not enough {} capacity in {}", C::SKU, C::ZONE);
    let said = errors.iter().find(|e| e.starts_with(&summary)).unwrap_or_else(|| panic!("no {summary:?} in {errors:?}"));
    assert!(said.contains(&format!("({})", C::CAPACITY_CODE)), "{said}");
    said
}

async fn short_of_capacity_all_or_nothing_releases_what_came<C: Cloud>() {
    let c = C::start().await;
    let (applied, config, fabric) = short_of_capacity(&c, json!({"capacity_policy": "all-or-nothing"})).await;
    let said = shortage::<C>(&applied.errors);
    assert!(said.contains("capacity_policy = \"all-or-nothing\" keeps none of them"), "{said}");
    // The cloud's all-or-nothing launch made none, or what came was released.
    assert!(said.contains("nothing was launched") || said.contains("launched were released"), "{said}");
    assert!(node_names(&applied.state).is_empty(), "the state keeps none: {:?}", applied.state);
    assert_eq!(c.nodes("c").await, BTreeMap::new(), "nothing of the cluster runs");
    capacity_back(&c, &fabric, &applied.state, &config).await;
}

async fn short_of_capacity_at_least_keeps_what_came_with_a_warning<C: Cloud>() {
    let c = C::start().await;
    let (applied, config, fabric) = short_of_capacity(&c, json!({"capacity_policy": "at-least", "min_nodes": 2})).await;
    assert!(applied.errors.is_empty(), "{:?}", applied.errors);
    let warning = applied.warnings.iter().find(|w| w.starts_with("3 of 4 nodes: capacity short")).expect("the shortfall's warning");
    assert!(warning.contains("min_nodes = 2") && warning.contains(&format!("({})", C::CAPACITY_CODE)), "{warning}");
    // The state names the planned nodes (the next plan adds the missing one); a refresh finds the three.
    came_and_kept::<C>(&c, &read_found(c.ctx(), &GpuCluster, &applied.state).await).await;
    capacity_back(&c, &fabric, &applied.state, &config).await;
}

async fn short_of_capacity_keep_partial_keeps_what_came_and_fails<C: Cloud>() {
    let c = C::start().await;
    let (applied, config, fabric) = short_of_capacity(&c, json!({"capacity_policy": "keep-partial"})).await;
    let said = shortage::<C>(&applied.errors);
    assert!(said.contains("keep-partial") && said.contains("3 of 4 nodes exist"), "{said}");
    came_and_kept::<C>(&c, &applied.state).await;
    capacity_back(&c, &fabric, &applied.state, &config).await;
}

/// After an apply of the three-node cluster `c`: the same names run, c-0 and c-2 as they were, c-1 remade.
async fn only_c1_remade<C: Cloud>(c: &C, before: &BTreeMap<String, Node>) {
    c.settle().await;
    let after = c.nodes("c").await;
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), names("c", 0..3));
    for n in ["c-0", "c-2"] {
        assert_eq!(after[n].incarnation, before[n].incarnation, "{n} untouched");
    }
    assert_eq!(after["c-1"].incarnation == before["c-1"].incarnation, C::REMADE_IN_PLACE, "c-1 remade: {after:?}");
}

async fn an_unhealthy_node_is_repaired_and_the_others_are_left_alone<C: Cloud>() {
    let c = C::start().await;
    let (config, state) = cluster_of(&c, 3, json!({})).await;
    let before = c.nodes("c").await;
    c.impair(&before["c-1"]);
    let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
    assert_eq!(strings(refreshed.get("unhealthy_nodes")).into_keys().collect::<Vec<_>>(), ["c-1"]);
    let (repaired, warnings) = apply_ok(&c, &GpuCluster, &refreshed, &config).await;
    assert!(warnings.iter().any(|w| w.contains("c-1: ")), "the plan names the node it repairs: {warnings:?}");
    only_c1_remade(&c, &before).await;
    let refreshed = read_found(c.ctx(), &GpuCluster, &repaired).await;
    assert_eq!(strings(refreshed.get("unhealthy_nodes")), BTreeMap::new());
    assert_eq!(node_names(&refreshed), names("c", 0..3));
}

async fn maintenance_is_reported_and_left_alone_unless_on_maintenance_replaces_it<C: Cloud>() {
    let c = C::start().await;
    let (base, state) = cluster_of(&c, 3, json!({})).await;
    let before = c.nodes("c").await;
    let words = c.schedule_maintenance(&before["c-1"]);
    let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
    assert_eq!(strings(refreshed.get("scheduled_maintenance")), BTreeMap::from([("c-1".to_owned(), words.clone())]));
    assert_eq!(strings(refreshed.get("unhealthy_nodes")), BTreeMap::new(), "maintenance is no repair reason");
    // The default: the plan warns of it with its window, and the apply touches no node.
    let (kept, warnings) = apply_ok(&c, &GpuCluster, &refreshed, &base).await;
    assert!(
        warnings.iter().any(|w| w.starts_with("1 node with maintenance scheduled by the cloud") && w.contains(&format!("c-1: {words}"))),
        "{warnings:?}"
    );
    c.settle().await;
    assert_eq!(incarnations(&c.nodes("c").await), incarnations(&before), "no node touched for a maintenance");
    let refreshed = read_found(c.ctx(), &GpuCluster, &kept).await;
    assert_eq!(strings(refreshed.get("scheduled_maintenance")).len(), 1);
    // Asked for: that node alone is remade ahead of the window, under its name, and the maintenance is gone.
    let replace = config(&c, "f", "c", 3, json!({"on_maintenance": "replace"}));
    let (moved, warnings) = apply_ok(&c, &GpuCluster, &refreshed, &replace).await;
    assert!(
        warnings.iter().any(|w| w.starts_with("1 node to remake ahead of scheduled maintenance") && w.contains("c-1: ")),
        "{warnings:?}"
    );
    only_c1_remade(&c, &before).await;
    let refreshed = read_found(c.ctx(), &GpuCluster, &moved).await;
    assert_eq!(strings(refreshed.get("scheduled_maintenance")), BTreeMap::new(), "the maintenance went with the old host");
    let mut d = Diagnostics::new();
    let plan =
        GpuCluster.plan(c.ctx(), PlanRequest { prior: &refreshed, proposed: &replace, config: &replace, prior_private: &[] }, &mut d);
    assert_eq!(differences(&plan.planned, &refreshed), Vec::<String>::new(), "the re-plan is empty");
}

async fn an_image_change_rolls_the_nodes_in_the_planned_batches<C: Cloud>() {
    let c = C::start().await;
    let strategy = json!({"update_strategy": {"batch_size": "2"}});
    let (_, state) = cluster_of(&c, 4, strategy.clone()).await;
    let before = c.nodes("c").await;
    let old = state.get("revision").as_str().unwrap().to_owned();
    let mut extra = strategy;
    extra["image"] = json!(C::IMAGES[1]);
    let new_config = config(&c, "f", "c", 4, extra);
    let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
    let (rolled, warnings) = apply_ok(&c, &GpuCluster, &refreshed, &new_config).await;
    assert!(warnings.iter().any(|w| w.contains("batch 1: c-0, c-1") && w.contains("batch 2: c-2, c-3")), "{warnings:?}");
    let new = rolled.get("revision").as_str().unwrap().to_owned();
    assert_ne!(new, old);
    c.settle().await;
    let after = c.nodes("c").await;
    assert_eq!(after.keys().cloned().collect::<Vec<_>>(), names("c", 0..4));
    for (n, node) in &after {
        assert_eq!(node.incarnation == before[n].incarnation, C::REMADE_IN_PLACE, "{n} remade");
        if let Some(r) = &node.revision {
            assert_eq!(r, &new, "{n} runs the new revision");
        }
    }
    let refreshed = read_found(c.ctx(), &GpuCluster, &rolled).await;
    let revisions = strings(refreshed.get("node_revisions"));
    assert_eq!(revisions, names("c", 0..4).into_iter().map(|n| (n, new.clone())).collect(), "every node runs the new revision");
}

async fn destroy_leaves_nothing_of_its_own_and_another_owners_cluster_as_it_was<C: Cloud>() {
    let c = C::start().await;
    // Another owner's fabric and cluster, made before.
    make_fabric(&c, "o").await;
    let (theirs, _) = apply_ok(&c, &GpuCluster, &Value::Null, &config(&c, "o", "o", 1, json!({}))).await;
    c.settle().await;
    let inventory = c.admin("GET", "inventory", None);
    let their_nodes = c.nodes("o").await;
    let their_state = read_found(c.ctx(), &GpuCluster, &theirs).await;

    let fabric = make_fabric(&c, "f").await;
    let (cluster, _) = apply_ok(&c, &GpuCluster, &Value::Null, &config(&c, "f", "c", 2, json!({}))).await;
    c.settle().await;
    destroy(c.ctx(), &GpuCluster, &cluster).await;
    destroy(c.ctx(), &GpuFabric, &fabric).await;
    c.settle().await;
    assert_eq!(c.admin("GET", "inventory", None), inventory, "all that is left is what was there before");
    assert_eq!(c.nodes("o").await, their_nodes);
    assert_eq!(read_found(c.ctx(), &GpuCluster, &theirs).await, their_state);
}

/// A change a user makes to a running cluster, for the plan-honesty properties.
#[derive(Clone, Debug)]
enum Change {
    /// `node_count`.
    Nodes(u32),
    /// `tags = {team = ...}`: no node is touched (its tags or labels change in place).
    Tags(&'static str),
    /// `image` (one of the cloud's two): a rolling update in the planned batches.
    Image(usize),
    /// `capacity_policy` (with `min_nodes` for `at-least`): nothing runs differently.
    Policy(&'static str),
    /// The cloud reports node `k % node_count` unhealthy: the plan names its repair.
    Impair(u32),
}

/// The configuration the changes so far describe.
#[derive(Clone, Debug)]
struct Settings {
    nodes: u32,
    team: &'static str,
    image: usize,
    policy: &'static str,
}

impl Settings {
    fn config<C: Cloud>(&self, c: &C) -> Value {
        let mut extra = json!({"tags": {"team": self.team}, "image": C::IMAGES[self.image], "capacity_policy": self.policy});
        if self.policy == "at-least" {
            extra["min_nodes"] = json!(1);
        }
        config(c, "f", "c", self.nodes, extra)
    }
}

/// The node names a plan announces it acts on: the ones it adds or removes, and the ones its day-2
/// warnings name (a repair, a rolling update's batches, a remake ahead of maintenance).
fn announced(prior: &[String], planned: &[String], warnings: &[String]) -> std::collections::BTreeSet<String> {
    let mut out: std::collections::BTreeSet<String> =
        prior.iter().filter(|n| !planned.contains(n)).chain(planned.iter().filter(|n| !prior.contains(n))).cloned().collect();
    let acting = ["unhealthy node to repair", "unhealthy nodes to repair", "Rolling update of", "ahead of scheduled maintenance"];
    for w in warnings.iter().filter(|w| acting.iter().any(|a| w.contains(a))) {
        out.extend(
            w.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-')).filter(|t| prior.iter().any(|n| n == t)).map(str::to_owned),
        );
    }
    out
}

/// One sequence of changes applied in turn, each planned and applied as the CLI does, checked against the
/// cloud's lifecycle event log (`GET /_admin/events`: every node the cloud created, deleted, reimaged,
/// restarted, redeployed, started or stopped on the provider's calls): after every apply each node event
/// is on a node the plan announced, the cloud runs exactly the nodes the plan named, each node the plan
/// did not announce runs as it did (same incarnation), and the next plan is empty. `Err` says what broke.
async fn changes_touch_only_what_the_plan_names<C: Cloud>(changes: Vec<Change>) -> Result<(), String> {
    let c = C::start().await;
    let fabric = make_fabric(&c, "f").await;
    let mut state = Value::Null;
    let mut settings = Settings { nodes: 1, team: "ml", image: 0, policy: "all-or-nothing" };
    for (step, change) in changes.iter().cloned().enumerate() {
        let at = format!("step {step} ({change:?})");
        let live = c.nodes("c").await;
        match change {
            Change::Nodes(n) => settings.nodes = n,
            Change::Tags(t) => settings.team = t,
            Change::Image(i) => settings.image = i,
            Change::Policy(p) => settings.policy = p,
            Change::Impair(k) => {
                if let Some(node) = live.get(&format!("c-{}", k % settings.nodes)) {
                    c.impair(node);
                }
            }
        }
        let config = settings.config(&c);
        let prior = if state.is_null() { Value::Null } else { read_found(c.ctx(), &GpuCluster, &state).await };
        let before = incarnations(&live);
        let mut diags = Diagnostics::new();
        let plan =
            GpuCluster.plan(c.ctx(), PlanRequest { prior: &prior, proposed: &config, config: &config, prior_private: &[] }, &mut diags);
        if !plan.requires_replace.is_empty() {
            return Err(format!("{at}: the plan replaces the cluster ({:?})", plan.requires_replace));
        }
        let warnings: Vec<String> = diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect();
        let planned: Vec<String> = node_names(&plan.planned);
        let named = announced(&node_names(&prior), &planned, &warnings);
        c.admin("DELETE", "events", None);
        let applied = apply_to(c.ctx(), &GpuCluster, &prior, &config).await;
        if !applied.errors.is_empty() {
            return Err(format!("{at}: {:?}", applied.errors));
        }
        c.settle().await;
        let now = c.nodes("c").await;
        // Each event on a node the plan did not announce: by id (as the cloud's event log names it),
        // through the nodes before and after.
        let by_id: BTreeMap<String, String> =
            live.iter().chain(now.iter()).map(|(name, node)| (node.id.to_lowercase(), name.clone())).collect();
        let mut created = std::collections::BTreeSet::new();
        for e in c.admin("GET", "events", None)["events"].as_array().cloned().unwrap_or_default() {
            let Some(id) = e["id"].as_str() else { continue };
            let node = by_id.get(&id.to_lowercase()).cloned().unwrap_or_else(|| format!("{id} (not a node of c)"));
            if !named.contains(&node) {
                return Err(format!("{at}: {} {node}, which the plan did not announce (it named {named:?})", e["event"]));
            }
            if e["event"] == "created" {
                created.insert(node);
            }
        }
        // The log is what the check stands on: every node the plan adds is in it.
        let prior_names = node_names(&prior);
        if let Some(missing) = planned.iter().find(|n| !prior_names.contains(n) && !created.contains(*n)) {
            return Err(format!("{at}: the plan adds {missing}, and the cloud's event log shows no such node created"));
        }
        let after = incarnations(&now);
        let running: Vec<String> = after.keys().cloned().collect();
        let mut wanted = planned.clone();
        wanted.sort();
        if running != wanted {
            return Err(format!("{at}: the plan named {} nodes, {} run", planned.len(), running.len()));
        }
        for (name, was) in &before {
            match after.get(name) {
                Some(now) if now != was && !named.contains(name) => {
                    return Err(format!("{at}: {name} was not announced, and is now {now} (was {was})"));
                }
                _ => {}
            }
        }
        state = applied.state;
        let refreshed = read_found(c.ctx(), &GpuCluster, &state).await;
        let mut quiet = Diagnostics::new();
        let replan =
            GpuCluster.plan(c.ctx(), PlanRequest { prior: &refreshed, proposed: &config, config: &config, prior_private: &[] }, &mut quiet);
        let changes = differences(&replan.planned, &refreshed);
        if !changes.is_empty() {
            return Err(format!("{at}: the plan after the apply is not empty: {changes:?}"));
        }
    }
    destroy(c.ctx(), &GpuCluster, &state).await;
    destroy(c.ctx(), &GpuFabric, &fabric).await;
    Ok(())
}

/// Runs a property over seeded, shrinking cases of `strategy`, each checked by `check`.
fn property<S: proptest::strategy::Strategy, F: std::future::Future<Output = Result<(), String>>>(
    strategy: S,
    cases: u32,
    check: impl Fn(S::Value) -> F,
) {
    use futures::FutureExt;
    use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
    let config = Config { cases, max_shrink_iters: 8, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let handle = tokio::runtime::Handle::current();
    let outcome = runner.run(&strategy, |value| {
        let run = std::panic::AssertUnwindSafe(check(value)).catch_unwind();
        match tokio::task::block_in_place(|| handle.block_on(run)) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(TestCaseError::fail(e)),
            Err(panic) => Err(TestCaseError::fail(panic.downcast_ref::<String>().cloned().unwrap_or_else(|| "a panic".into()))),
        }
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// Plan honesty as a property: sequences of node counts around the cloud's split (1, S-1, S, S+1), seeded
/// and shrinking, each checked by [`changes_touch_only_what_the_plan_names`]; first the sequence every
/// cloud must get right, a grow past the split and a shrink below it.
async fn node_count_changes_touch_only_the_nodes_the_plan_names<C: Cloud>() {
    let s = C::SPLIT;
    let fixed = vec![Change::Nodes(s), Change::Nodes(s + 1), Change::Nodes(s - 1)];
    if let Err(e) = changes_touch_only_what_the_plan_names::<C>(fixed).await {
        panic!("{s} -> {} -> {}: {e}", s + 1, s - 1);
    }
    let counts = proptest::collection::vec(proptest::sample::select(vec![1, s - 1, s, s + 1]), 2..=3);
    property(counts, 2, |counts| changes_touch_only_what_the_plan_names::<C>(counts.into_iter().map(Change::Nodes).collect()));
}

/// Plan honesty over everything a user changes on a small cluster: node counts, tags, the image (a rolling
/// update), the capacity policy and a node the cloud finds unhealthy (a repair), in random order.
async fn any_change_touches_only_the_nodes_the_plan_names<C: Cloud>() {
    use proptest::prelude::*;
    let change = prop_oneof![
        (1u32..=4).prop_map(Change::Nodes),
        proptest::sample::select(vec!["ml", "research"]).prop_map(Change::Tags),
        (0usize..2).prop_map(Change::Image),
        proptest::sample::select(vec!["all-or-nothing", "at-least", "keep-partial"]).prop_map(Change::Policy),
        (0u32..4).prop_map(Change::Impair),
    ];
    let sequence = (1u32..=3, proptest::collection::vec(change, 3..=5))
        .prop_map(|(first, rest)| std::iter::once(Change::Nodes(first)).chain(rest).collect::<Vec<_>>());
    property(sequence, 3, changes_touch_only_what_the_plan_names::<C>);
}

/// Every behaviour of the contract as a test of `$cloud`, in module `$module`.
macro_rules! contract {
    ($module:ident, $cloud:ty) => {
        mod $module {
            use super::*;

            contract!(@tests $cloud;
                create_makes_the_nodes_by_name_with_the_node_types_rdma_and_placement,
                a_refresh_makes_the_same_calls_at_one_node_as_at_four,
                grow_keeps_the_running_nodes_and_adds_the_new,
                shrink_removes_the_highest_numbered_nodes,
                a_node_deleted_outside_is_seen_by_the_refresh_and_made_again_by_the_next_apply,
                an_import_by_id_gives_the_state_the_apply_gave,
                another_owners_cluster_of_the_same_name_is_refused_and_left_untouched,
                short_of_capacity_all_or_nothing_releases_what_came,
                short_of_capacity_at_least_keeps_what_came_with_a_warning,
                short_of_capacity_keep_partial_keeps_what_came_and_fails,
                an_unhealthy_node_is_repaired_and_the_others_are_left_alone,
                maintenance_is_reported_and_left_alone_unless_on_maintenance_replaces_it,
                an_image_change_rolls_the_nodes_in_the_planned_batches,
                destroy_leaves_nothing_of_its_own_and_another_owners_cluster_as_it_was,
                node_count_changes_touch_only_the_nodes_the_plan_names,
                any_change_touches_only_the_nodes_the_plan_names,
            );
        }
    };
    (@tests $cloud:ty; $($behaviour:ident),* $(,)?) => {
        $(
            #[test]
            fn $behaviour() {
                <$cloud as Cloud>::run(super::$behaviour::<$cloud>());
            }
        )*
    };
}

contract!(aws, Aws);
contract!(azure, Azure);
contract!(gcp, Gcp);
contract!(oci, Oci);

// ------------------------------------------------------------------------------------------------- AWS

struct Aws {
    emulator: AwsEmulator,
    ctx: Context,
}

impl Aws {
    fn ec2(&self) -> aws_sdk_ec2::Client {
        let config = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .credentials_provider(aws_credential_types::Credentials::new("t", "t", None, None, "static"))
            .endpoint_url(&self.emulator.endpoint)
            .build();
        aws_sdk_ec2::Client::from_conf(config)
    }
}

impl Cloud for Aws {
    const SKU: &'static str = "p5.48xlarge";
    const CAPACITY_CODE: &'static str = "InsufficientInstanceCapacity";
    const ZONE: &'static str = "us-east-1a";
    const IMAGES: [&'static str; 2] = ["ami-12c6146b", "ami-1e749f67"];

    async fn start() -> Self {
        let emulator = start_aws();
        let ctx =
            provider_context(json!({"aws": {"region": "us-east-1", "endpoint": emulator.endpoint, "access_key": "t", "secret_key": "t"}}));
        Aws { emulator, ctx }
    }

    fn ctx(&self) -> &Context {
        &self.ctx
    }

    fn admin(&self, method: &str, route: &str, body: Option<Json>) -> Json {
        admin(&self.emulator.endpoint, method, route, body)
    }

    fn fabric(&self, name: &str) -> Json {
        json!({"name": name, "cloud": "aws", "region": "us-east-1", "zone": Self::ZONE, "instance_type": Self::SKU, "placement": "cluster"})
    }

    fn fabric_ref(&self, name: &str) -> Json {
        let mut r = self.fabric(name);
        r["id"] = json!(format!("aws/us-east-1/{name}"));
        r
    }

    async fn nodes(&self, cluster: &str) -> BTreeMap<String, Node> {
        let filter = |k: &str, v: &str| aws_sdk_ec2::types::Filter::builder().name(k).values(v).build();
        let out = self
            .ec2()
            .describe_instances()
            .filters(filter("tag:hpc:cluster", cluster))
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("pending").values("running").build())
            .send()
            .await
            .unwrap();
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| {
                let tag = |k: &str| i.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()).map(str::to_owned);
                let id = i.instance_id().unwrap().to_owned();
                let node = Node {
                    incarnation: id.clone(),
                    id,
                    placement: i.placement().and_then(|p| p.group_name()).filter(|g| !g.is_empty()).map(str::to_owned),
                    rdma: Some(i.network_interfaces().len()),
                    revision: tag("hpc:revision"),
                };
                (tag("hpc:node").unwrap_or_default(), node)
            })
            .collect()
    }

    fn vanish(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": node.id})));
    }

    fn impair(&self, node: &Node) {
        self.admin(
            "POST",
            "out-of-band",
            Some(json!({"action": "impair", "id": node.id, "check": "system", "since": "2026-12-01T10:02:00Z"})),
        );
    }

    fn schedule_maintenance(&self, node: &Node) -> String {
        let event = json!({"action": "impair", "id": node.id, "event": "system-maintenance", "not_before": "2026-12-05T00:00:00Z"});
        self.admin("POST", "out-of-band", Some(event));
        "scheduled system-maintenance from 2026-12-05T00:00Z to 2026-12-05T02:00Z".into()
    }
}

// ----------------------------------------------------------------------------------------------- Azure

const AZURE_SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000aa";

/// The one ARM emulator of this binary: its endpoint and the PEM file of its certificate.
static ARM: LazyLock<(String, PathBuf)> = LazyLock::new(|| {
    let (ep, pem) = start_azure();
    // SAFETY: set once, before any ARM client is built; nothing else in this binary writes the environment.
    unsafe { std::env::set_var("HPC_AZURE_CA_FILE", &pem) };
    (ep, pem)
});

/// The runtime of every Azure test: the provider keeps one ARM client per configuration for the process,
/// and its pooled connections belong to the runtime that opened them.
static ARM_RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap());

/// Held by the Azure test that has the emulator.
static ARM_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Azure {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    ctx: Context,
}

impl Drop for Azure {
    fn drop(&mut self) {
        // Not `admin`: a failed call must not panic again while a failed test unwinds.
        let _ = std::panic::catch_unwind(|| azure_call(&ARM.0, &ARM.1, "DELETE", "/_admin/faults", None, &[]));
    }
}

impl Cloud for Azure {
    const SKU: &'static str = "Standard_ND96isr_H100_v5";
    const CAPACITY_CODE: &'static str = "AllocationFailed";
    const ZONE: &'static str = "eastus";
    const IMAGES: [&'static str; 2] = ["microsoft-dsvm:ubuntu-hpc:2204:22.04.1", "microsoft-dsvm:ubuntu-hpc:2204:22.04.2"];
    const REMADE_IN_PLACE: bool = true;

    async fn start() -> Self {
        LazyLock::force(&ARM);
        let turn = ARM_TURN.lock().await;
        azure_admin(&ARM.0, &ARM.1, "POST", "reset", None);
        let ctx = provider_context(json!({"azure": {"subscription_id": AZURE_SUBSCRIPTION, "endpoint": ARM.0}}));
        Azure { _turn: turn, ctx }
    }

    fn run(test: impl Future<Output = ()>) {
        ARM_RUNTIME.block_on(test);
    }

    fn ctx(&self) -> &Context {
        &self.ctx
    }

    fn admin(&self, method: &str, route: &str, body: Option<Json>) -> Json {
        azure_admin(&ARM.0, &ARM.1, method, route, body)
    }

    fn fabric(&self, name: &str) -> Json {
        json!({"name": name, "cloud": "azure", "region": "eastus", "instance_type": Self::SKU, "placement": "cluster"})
    }

    fn fabric_ref(&self, name: &str) -> Json {
        json!({"id": format!("azure/{name}-rg/{name}"), "name": name, "cloud": "azure", "region": "eastus", "zone": null,
               "instance_type": Self::SKU, "placement": "cluster"})
    }

    fn cluster_extra(&self) -> Json {
        json!({"ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x"})
    }

    /// A scale set's VMs are the nodes their own userData names (`hpc-node-name=<name>`, what the node joins
    /// Slurm under); a VM told no name is `<scale set>_<instance id>`.
    async fn nodes(&self, cluster: &str) -> BTreeMap<String, Node> {
        use base64::Engine;
        let arm = self.admin("GET", "snapshot", None)["arm"].clone();
        let arm = arm.as_object().cloned().unwrap_or_default();
        let prefix = format!("/virtualmachinescalesets/{}-", cluster.to_lowercase());
        let mut out = BTreeMap::new();
        for (id, vm) in &arm {
            let Some((_, rest)) = id.split_once(&prefix) else { continue };
            let Some((set, instance)) = rest.split_once("/virtualmachines/") else { continue };
            if instance.contains('/') {
                continue;
            }
            let set_id = id.split("/virtualmachines/").next().unwrap().to_owned();
            let placement = arm.get(&set_id).and_then(|s| s.pointer("/properties/proximityPlacementGroup/id")).and_then(Json::as_str);
            let told = vm["properties"]["userData"]
                .as_str()
                .and_then(|u| base64::engine::general_purpose::STANDARD.decode(u).ok())
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|text| text.lines().find_map(|l| l.strip_prefix("hpc-node-name=")).map(str::to_owned));
            let node = Node {
                id: id.clone(),
                incarnation: id.clone(),
                placement: placement.and_then(|p| p.rsplit('/').next()).map(str::to_owned),
                rdma: None,
                revision: None,
            };
            out.insert(told.unwrap_or_else(|| format!("{cluster}-{set}_{instance}")), node);
        }
        out
    }

    fn vanish(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "delete", "id": node.id})));
    }

    fn impair(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": node.id, "health": "unhealthy"})));
    }

    fn schedule_maintenance(&self, node: &Node) -> String {
        let window = json!({"start": "2026-12-05T00:00:00Z", "end": "2026-12-05T04:00:00Z"});
        self.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": node.id, "maintenance": window})));
        "scheduled for maintenance from 2026-12-05T00:00Z to 2026-12-05T04:00Z".into()
    }

    async fn settle(&self) {
        // The emulator's long-running operations and a new VM's Initializing state.
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}

// ------------------------------------------------------------------------------------------ Google Cloud

struct Gcp {
    ep: String,
    ctx: Context,
}

impl Gcp {
    /// A GET on the emulator's Compute API.
    fn get(&self, path: &str) -> Json {
        use std::io::{Read, Write};
        let host = self.ep.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(host).unwrap();
        write!(s, "GET /compute/v1/projects/ml-prod/{path} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer t\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap()
    }
}

impl Cloud for Gcp {
    const SKU: &'static str = "a3-highgpu-8g";
    const CAPACITY_CODE: &'static str = "ZONE_RESOURCE_POOL_EXHAUSTED";
    const ZONE: &'static str = "us-central1-a";
    const IMAGES: [&'static str; 2] = ["projects/ml-prod/global/images/node-v1", "projects/ml-prod/global/images/node-v2"];

    async fn start() -> Self {
        let ep = start_gcp();
        let ctx = provider_context(json!({"gcp": {"project": "ml-prod", "endpoint": ep}}));
        Gcp { ep, ctx }
    }

    fn ctx(&self) -> &Context {
        &self.ctx
    }

    fn admin(&self, method: &str, route: &str, body: Option<Json>) -> Json {
        admin(&self.ep, method, route, body)
    }

    fn fabric(&self, name: &str) -> Json {
        json!({"name": name, "cloud": "gcp", "region": "us-central1", "zone": Self::ZONE, "instance_type": Self::SKU, "placement": "cluster"})
    }

    fn fabric_ref(&self, name: &str) -> Json {
        let mut r = self.fabric(name);
        r["id"] = json!(format!("gcp/us-central1-a/{name}"));
        r
    }

    async fn nodes(&self, cluster: &str) -> BTreeMap<String, Node> {
        let list = self.get("zones/us-central1-a/instances");
        list["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|i| i["labels"]["hpc_cluster"] == cluster)
            .map(|i| {
                let name = i["name"].as_str().unwrap().to_owned();
                let node = Node {
                    id: format!("projects/ml-prod/zones/us-central1-a/instances/{name}"),
                    incarnation: i["id"].as_str().unwrap().to_owned(),
                    placement: i["resourcePolicies"][0].as_str().and_then(|p| p.rsplit('/').next()).map(str::to_owned),
                    // nic0 is the host network's; the others are the GPU NICs.
                    rdma: i["networkInterfaces"].as_array().map(|n| n.len() - 1),
                    revision: i["labels"]["hpc-revision"].as_str().map(str::to_owned),
                };
                (name, node)
            })
            .collect()
    }

    fn vanish(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "delete", "id": node.id})));
    }

    fn impair(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": node.id, "status": "TERMINATED"})));
    }

    fn schedule_maintenance(&self, node: &Node) -> String {
        let maintenance = json!({"type": "SCHEDULED", "windowStartTime": "2026-12-05T00:00:00Z"});
        self.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": node.id, "maintenance": maintenance})));
        "upcoming scheduled maintenance from 2026-12-05T00:00Z".into()
    }

    async fn settle(&self) {
        // New instances go PROVISIONING, STAGING, RUNNING.
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
}

// ------------------------------------------------------------------------------------------------- OCI

const OCI_COMPARTMENT: &str = "ocid1.compartment.oc1..lib";
const OCI_AD: &str = "Uocm:US-ASHBURN-AD-2";

struct Oci {
    ep: String,
    _key: OciKey,
    ctx: Context,
}

impl Cloud for Oci {
    const SKU: &'static str = "BM.GPU.H100.8";
    const CAPACITY_CODE: &'static str = "Out of host capacity";
    const ZONE: &'static str = OCI_AD;
    const IMAGES: [&'static str; 2] = ["ocid1.image.oc1.iad.emulator-ol8-gpu", "ocid1.image.oc1.iad.emulator-ubuntu-gpu"];

    async fn start() -> Self {
        let (ep, key) = start_oci();
        let ctx = provider_context(json!({"oci": {"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint,
                                                   "private_key": key.private_key_pem, "region": "us-ashburn-1", "endpoint": ep}}));
        Oci { ep, _key: key, ctx }
    }

    fn ctx(&self) -> &Context {
        &self.ctx
    }

    fn admin(&self, method: &str, route: &str, body: Option<Json>) -> Json {
        admin(&self.ep, method, route, body)
    }

    fn fabric(&self, name: &str) -> Json {
        json!({"name": name, "cloud": "oci", "region": "us-ashburn-1", "zone": OCI_AD, "compartment_id": OCI_COMPARTMENT,
               "instance_type": Self::SKU, "placement": "cluster"})
    }

    fn fabric_ref(&self, name: &str) -> Json {
        json!({"id": format!("oci/us-ashburn-1/{OCI_COMPARTMENT}/{name}"), "name": name, "cloud": "oci", "region": "us-ashburn-1",
               "zone": OCI_AD, "instance_type": Self::SKU, "placement": "cluster"})
    }

    fn cluster_extra(&self) -> Json {
        json!({"timeouts": {"create": "60s", "update": "60s"}})
    }

    async fn nodes(&self, cluster: &str) -> BTreeMap<String, Node> {
        let snapshot = self.admin("GET", "snapshot", None)["resources"].clone();
        let all = snapshot.as_object().cloned().unwrap_or_default();
        // An Instance does not say which compute cluster it is in; each compute cluster's instance list does.
        let client = hpc_provider::clouds::oci::api::connect(&self.ctx, "us-ashburn-1").unwrap();
        let mut placed = BTreeMap::new();
        for (cc, body) in all.iter().filter(|(id, _)| id.starts_with("ocid1.computecluster.")) {
            let q = format!("compartmentId={OCI_COMPARTMENT}&computeClusterId={cc}");
            for i in client.list(&self.ctx, hpc_provider::clouds::oci::api::Service::Core, "instances", &q).await.unwrap() {
                placed.insert(i["id"].as_str().unwrap_or_default().to_owned(), body["displayName"].as_str().unwrap_or_default().to_owned());
            }
        }
        all.iter()
            .filter(|(id, i)| {
                id.starts_with("ocid1.instance.")
                    && i["freeformTags"]["hpc:cluster"] == cluster
                    && !matches!(i["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED"))
            })
            .map(|(id, i)| {
                let node = Node {
                    id: id.clone(),
                    incarnation: id.clone(),
                    placement: placed.get(id).cloned(),
                    rdma: None,
                    revision: i["freeformTags"]["hpc:revision"].as_str().map(str::to_owned),
                };
                (i["displayName"].as_str().unwrap_or_default().to_owned(), node)
            })
            .collect()
    }

    fn vanish(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": node.id})));
    }

    fn impair(&self, node: &Node) {
        self.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": node.id, "state": "STOPPED"})));
    }

    fn schedule_maintenance(&self, node: &Node) -> String {
        let due = json!({"action": "impair", "id": node.id, "maintenance_reboot_due": "2026-12-05T00:00:00.000Z"});
        self.admin("POST", "out-of-band", Some(due));
        "maintenance reboot due 2026-12-05T00:00Z".into()
    }

    async fn settle(&self) {
        // Instances terminating go TERMINATED.
        tokio::time::sleep(Duration::from_millis(800)).await;
    }
}
