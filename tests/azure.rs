//! The Azure resources through the provider's own Resource implementations against the ARM emulator
//! (HTTPS, trusted through HPC_AZURE_CA_FILE): 429 with Retry-After honoured, an allocation failure
//! reported with ARM's code and kept in state, the scale-set split the plan promised, imports keeping a
//! user's tag named `Name`, another owner's piece at a fabric's id left alone, and ARM's write semantics
//! (a tag change PATCHes the tags alone, so a subnet in use and rules added outside stay; a create is
//! create-only, so another writer's piece made at the same moment is not overwritten), and node names that
//! hold across repairs, scale-in and scale-out, each VM told its own through its userData.
//!
//! The behaviours every cloud keeps (create, grow, shrink, drift, import, ownership, capacity policies, repair,
//! rolling updates, destroy) are in `contract.rs`; this file keeps what only Azure has.
//!
//! One emulator serves every test of this binary (the certificate the provider trusts is named by an
//! environment variable, read whenever an ARM client is built), so each test names its own pieces. Faults
//! and assertions about the whole emulator (counts, "nothing left") need it alone: such a test holds
//! [`alone`], the others [`beside_others`].

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::{apply, destroy, diagnostic, import, provider_context, read, value};
use hpc_emulators::harness::{azure_admin, azure_call, start_azure};
use hpc_provider::framework::{Context, ReadOutcome, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use serde_json::{Value as Json, json};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

const SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000aa";
const SKU: &str = "Standard_ND96isr_H100_v5";
const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x";

/// The binary's ARM emulator: its endpoint and the PEM file of its certificate.
struct Emulator {
    ep: String,
    pem: PathBuf,
}

static EMULATOR: LazyLock<Emulator> = LazyLock::new(|| {
    let (ep, pem) = start_azure();
    // SAFETY: set once, when the first test starts and before any ARM client is built; nothing else in this
    // binary writes the environment.
    unsafe { std::env::set_var("HPC_AZURE_CA_FILE", &pem) };
    Emulator { ep, pem }
});

/// One runtime for every test: the provider keeps one ARM client per configuration for the whole process,
/// and its pooled connections belong to the runtime that opened them, which a runtime per test would drop
/// under the next test.
static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap());

/// Held for writing by a test that needs the emulator to itself, for reading by the others.
static TURN: RwLock<()> = RwLock::const_new(());

fn run(test: impl Future<Output = ()>) {
    LazyLock::force(&EMULATOR);
    RUNTIME.block_on(test);
}

/// The emulator to this test alone, emptied first; the faults it injects are cleared when it ends, even
/// when it fails.
struct Alone {
    _turn: RwLockWriteGuard<'static, ()>,
}

impl Drop for Alone {
    fn drop(&mut self) {
        // Not `admin`: a failed call must not panic again while a failed test unwinds.
        let _ = std::panic::catch_unwind(|| azure_call(&EMULATOR.ep, &EMULATOR.pem, "DELETE", "/_admin/faults", None, &[]));
    }
}

async fn alone() -> Alone {
    let turn = TURN.write().await;
    admin("POST", "reset", None);
    Alone { _turn: turn }
}

/// The emulator shared with the other tests that touch only their own pieces.
async fn beside_others() -> RwLockReadGuard<'static, ()> {
    TURN.read().await
}

fn admin(method: &str, route: &str, body: Option<Json>) -> Json {
    azure_admin(&EMULATOR.ep, &EMULATOR.pem, method, route, body)
}

fn context() -> Context {
    provider_context(json!({"azure": {"subscription_id": SUBSCRIPTION, "endpoint": EMULATOR.ep}}))
}

fn fabric_config(name: &str, tags: Json) -> Value {
    value(&GpuFabric, json!({"name": name, "cloud": "azure", "region": "eastus", "instance_type": SKU, "tags": tags}))
}

fn fabric_ref(name: &str) -> Json {
    json!({"id": format!("azure/{name}-rg/{name}"), "name": name, "cloud": "azure", "region": "eastus", "zone": null,
           "instance_type": SKU, "placement": "cluster"})
}

/// A fabric named `name`, created without a diagnostic.
async fn fabric(ctx: &Context, name: &str) -> Value {
    let (fabric, diags) = apply(ctx, &GpuFabric, &Value::Null, &fabric_config(name, Json::Null)).await;
    assert!(diags.is_empty(), "{diags:?}");
    fabric
}

/// The id of a fabric's network security group.
fn security_group(name: &str) -> String {
    format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{name}-rg/providers/Microsoft.Network/networkSecurityGroups/{name}-nsg")
}

fn assert_empty() {
    assert_eq!(admin("GET", "inventory", None)["empty"], true);
}

#[test]
fn a_throttled_security_group_write_is_retried_after_retry_after() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        // ARM throttles the first security-group write (429, Retry-After: 1): honoured, then created.
        admin("POST", "faults", Some(json!({"service": "arm", "operation": "networkSecurityGroups.put", "kind": "throttle", "times": 1})));
        let started = Instant::now();
        let fabric = fabric(&ctx, "throttled").await;
        assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was not waited for");
        let faults = admin("GET", "faults", None);
        assert_eq!(faults["faults"][0]["fired"], json!(1), "{faults}");
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn a_security_group_read_as_not_found_right_after_its_write_is_waited_out() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        // Right after the write, ARM reads the security group as not found twice: waited out, not "vanished".
        admin("POST", "faults", Some(json!({"service": "arm", "operation": "networkSecurityGroups.get", "kind": "not_found", "times": 2})));
        let fabric = fabric(&ctx, "lagging").await;
        let faults = admin("GET", "faults", None);
        assert_eq!(faults["faults"][0]["fired"], json!(2), "{faults}");
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn a_cluster_of_n_nodes_is_split_into_scale_sets_as_planned() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let fabric = fabric(&ctx, "split").await;
        // 150 nodes: two scale sets of 75, as planned.
        let big = value(
            &GpuCluster,
            json!({"name": "big", "fabric": fabric_ref("split"), "node_count": 150, "ssh_public_key": KEY, "tags": {"Name": "x"}}),
        );
        let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &big).await;
        assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
        let inv = admin("GET", "inventory", None);
        let sets: Vec<String> = serde_json::from_value(inv["resources"]["arm"]["virtualMachineScaleSets"].clone()).unwrap();
        assert_eq!(sets.len(), 2, "{sets:?}");
        assert_eq!(inv["resources"]["arm"]["virtualMachines"].as_array().map(Vec::len), Some(150));
        assert!(matches!(read(&ctx, &GpuCluster, &cluster).await.0, ReadOutcome::Found { .. }));
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn an_allocation_failure_is_reported_with_arms_code_and_kept_in_state() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let fabric = fabric(&ctx, "full").await;
        // No capacity: the scale set's operation fails with AllocationFailed; the diagnostic says so.
        admin(
            "POST",
            "faults",
            Some(json!({"service": "arm", "operation": "virtualMachineScaleSets.put", "kind": "capacity", "times": 1})),
        );
        let small = value(&GpuCluster, json!({"name": "small", "fabric": fabric_ref("full"), "node_count": 2, "ssh_public_key": KEY}));
        let (failed, diags) = apply(&ctx, &GpuCluster, &Value::Null, &small).await;
        // One diagnostic in the cloud's words (the policy, all-or-nothing for pre-training, keeps nothing).
        let failure = diagnostic(&diags, "Not enough Standard_ND96isr_H100_v5 capacity in eastus");
        assert!(failure.contains("AllocationFailed") && failure.contains("small-0"), "{failure}");
        // The failed cluster is in state (the CLI keeps it tainted), and its destroy takes what it made.
        assert!(!failed.is_null(), "the failed cluster is not in state");
        destroy(&ctx, &GpuCluster, &failed).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn an_imported_cluster_keeps_the_users_tag_called_name() {
    run(async {
        let _beside_others = beside_others().await;
        let ctx = context();
        let fabric = fabric(&ctx, "tagged").await;
        let config = value(
            &GpuCluster,
            json!({"name": "tagged-nodes", "fabric": fabric_ref("tagged"), "node_count": 2, "ssh_public_key": KEY, "tags": {"Name": "x"}}),
        );
        let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
        assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
        // Imported, the cluster keeps the user's own tag named Name (only AWS reserves that key).
        let (imported, _) = import(&ctx, &GpuCluster, "azure/tagged-rg/tagged-nodes").await;
        assert_eq!(imported.get("tags").get("Name").as_str(), Some("x"), "{:?}", imported.get("tags"));
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
    });
}

#[test]
fn an_imported_fabric_keeps_the_users_tag_called_name() {
    run(async {
        let _beside_others = beside_others().await;
        let ctx = context();
        let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config("named", json!({"Name": "x"}))).await;
        assert!(diags.is_empty(), "{diags:?}");
        // Imported, the fabric keeps the user's own tag named Name too.
        let (imported, _) = import(&ctx, &GpuFabric, "azure/named-rg/named").await;
        assert_eq!(imported.get("tags").get("Name").as_str(), Some("x"), "{:?}", imported.get("tags"));
        destroy(&ctx, &GpuFabric, &fabric).await;
    });
}

#[test]
fn another_owners_security_group_at_the_fabrics_id_is_left_alone() {
    run(async {
        let _beside_others = beside_others().await;
        let ctx = context();
        let ours_config = fabric_config("ours", Json::Null);
        let (ours_state, diags) = apply(&ctx, &GpuFabric, &Value::Null, &ours_config).await;
        assert!(diags.is_empty(), "{diags:?}");
        let other_state = fabric(&ctx, "theirs").await;
        // Another owner's piece where the fabric's own was (its security group deleted outside, another
        // fabric's copied to that id): the next apply does not PUT over it, says whose it is, and leaves it.
        let ours = security_group("ours");
        admin("POST", "out-of-band", Some(json!({"action": "delete", "id": ours})));
        admin("POST", "out-of-band", Some(json!({"action": "copy", "id": security_group("theirs"), "to": ours})));
        let before = admin("GET", "snapshot", None)["arm"][ours.to_lowercase()].clone();
        assert!(before["tags"]["hpc:owner"] == other_state.get("owner").as_str().unwrap_or_default(), "{before}");
        let (_, diags) = apply(&ctx, &GpuFabric, &ours_state, &ours_config).await;
        assert!(
            diags.iter().any(|d| d.contains("networkSecurityGroups/ours-nsg belong to another owner and were left alone")),
            "{diags:?}"
        );
        assert_eq!(admin("GET", "snapshot", None)["arm"][ours.to_lowercase()], before, "the other owner's security group changed");
        admin("POST", "out-of-band", Some(json!({"action": "delete", "id": ours})));
        // The resource groups hold nothing of anyone else by then.
        destroy(&ctx, &GpuFabric, &ours_state).await;
        destroy(&ctx, &GpuFabric, &other_state).await;
    });
}

// ------------------------------------------------------------------------------------------------ day 2

/// Plans and applies as the CLI would, from a refreshed `prior`: the new state and the plan's warnings,
/// with no error on the way.
async fn apply_ok(ctx: &Context, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    use hpc_provider::framework::{ApplyRequest, Diagnostics, PlanRequest, Resource};
    let mut diags = Diagnostics::new();
    let planned = GpuCluster.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    assert!(!diags.has_errors(), "plan: {:?}", diags.iter().collect::<Vec<_>>());
    let warnings: Vec<String> = diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect();
    let out = GpuCluster.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    assert!(!diags.has_errors(), "apply: {:?}", diags.iter().collect::<Vec<_>>());
    (out.new_state, warnings)
}

/// Whether a plan from `prior` changes nothing.
fn plans_nothing(ctx: &Context, prior: &Value, config: &Value) -> bool {
    use hpc_provider::framework::{Diagnostics, PlanRequest, Resource};
    let mut d = Diagnostics::new();
    let plan = GpuCluster.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut d);
    assert!(!d.has_errors(), "{:?}", d.iter().collect::<Vec<_>>());
    plan.planned == *prior && plan.requires_replace.is_empty()
}

async fn refreshed(ctx: &Context, state: &Value) -> Value {
    match read(ctx, &GpuCluster, state).await.0 {
        ReadOutcome::Found { state, .. } => state,
        ReadOutcome::Gone => panic!("the cluster is gone"),
    }
}

fn d2_config(fabric: &str, name: &str, nodes: u32, extra: Json) -> Json {
    let mut config = json!({"name": name, "fabric": fabric_ref(fabric), "node_count": nodes, "ssh_public_key": KEY,
                            "image": "microsoft-dsvm:ubuntu-hpc:2204:22.04.1", "tags": {"team": "ml"}});
    config.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    config
}

/// A fabric and a day-2 cluster on it: (fabric, cluster, the cluster's configuration).
async fn d2_cluster(ctx: &Context, fabric_name: &str, name: &str, nodes: u32, extra: Json) -> (Value, Value, Json) {
    let f = fabric(ctx, fabric_name).await;
    let config = d2_config(fabric_name, name, nodes, extra);
    let (cluster, _) = apply_ok(ctx, &Value::Null, &value(&GpuCluster, config.clone())).await;
    (f, cluster, config)
}

fn vm_id(fabric: &str, cluster: &str, i: u32) -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION}/resourceGroups/{fabric}-rg/providers/Microsoft.Compute/virtualMachineScaleSets/{cluster}-0/virtualMachines/{i}"
    )
}

fn out_of_band(change: Json) {
    admin("POST", "out-of-band", Some(change));
}

/// What the node's self-check answers the Application Health extension's probe.
fn probe(id: &str, verdict: &str) {
    let state = if verdict.starts_with("fail") { "Unhealthy" } else { "Healthy" };
    let answer = json!({"ApplicationHealthState": state, "customMetrics": json!({"hpcSelfcheck": verdict}).to_string()});
    out_of_band(json!({"action": "probe", "id": id, "response": answer}));
}

/// How often each scale set action reached each VM of the emulator, by lowercased VM id.
fn vm_actions() -> Json {
    admin("GET", "snapshot", None)["vm_actions"].clone()
}

fn strings(v: &Value) -> Json {
    let m = v.as_map().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect::<BTreeMap<_, _>>());
    serde_json::to_value(m).unwrap()
}

/// Each node's VM id, by name, from a state.
fn node_ids(state: &Value) -> BTreeMap<String, String> {
    state
        .get("nodes")
        .as_list()
        .unwrap_or_default()
        .iter()
        .map(|n| (n.get("name").as_str().unwrap_or_default().to_owned(), n.get("id").as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Lets VMs just made or booted settle (the emulator's long-running operations and Initializing state).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(700)).await;
}

#[test]
fn health_and_self_check_verdicts_of_every_node_come_with_one_list_per_scale_set() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let (f, cluster, _) = d2_cluster(&ctx, "health", "hl", 6, json!({})).await;
        settle().await;
        let revision = cluster.get("revision").as_str().unwrap().to_owned();
        let vm = |i| vm_id("health", "hl", i);
        out_of_band(json!({"action": "impair", "id": vm(1), "health": "unhealthy"}));
        out_of_band(
            json!({"action": "impair", "id": vm(2), "maintenance": {"start": "2026-12-05T00:00:00Z", "end": "2026-12-05T04:00:00Z"}}),
        );
        probe(&vm(3), "fail-gpus-7-of-8");
        probe(&vm(4), "ok");
        out_of_band(json!({"action": "impair", "id": vm(5), "health": "deallocated"}));

        admin("DELETE", "counters", None);
        let state = refreshed(&ctx, &cluster).await;
        let counters = admin("GET", "counters", None)["counters"].clone();
        assert_eq!(
            counters,
            json!({"arm:virtualMachineScaleSets.get": 1, "arm:virtualMachines.list": 1, "arm:networkInterfaces.list": 1}),
            "one list of the VMs with their instance views per scale set, whatever the count"
        );
        let unhealthy = strings(state.get("unhealthy_nodes"));
        let app = unhealthy["hl-1"].as_str().unwrap();
        assert!(app.starts_with("Application Health extension reports the node unhealthy since 20") && app.ends_with('Z'), "{unhealthy}");
        assert_eq!(unhealthy["hl-3"], "self-check: 7 of 8 GPUs");
        assert_eq!(unhealthy["hl-5"], "VM deallocated");
        assert_eq!(unhealthy.as_object().unwrap().len(), 3, "{unhealthy}");
        assert_eq!(
            strings(state.get("scheduled_maintenance")),
            json!({"hl-2": "scheduled for maintenance from 2026-12-05T00:00Z to 2026-12-05T04:00Z"}),
            "a maintenance is reported with its window, not repaired"
        );
        assert_eq!(strings(state.get("selfcheck")), json!({"hl-3": "fail-gpus-7-of-8", "hl-4": "ok"}));
        let all: Json = (0..6).map(|i| (format!("hl-{i}"), json!(revision))).collect::<serde_json::Map<_, _>>().into();
        assert_eq!(strings(state.get("node_revisions")), all);
        assert_eq!(state.get("node_count"), &Value::int(6), "a deallocated node is there, unhealthy, not missing");

        // The provider's revision tags are not the user's: an import gives back the user's tags only.
        let (imported, _) = import(&ctx, &GpuCluster, "azure/health-rg/hl").await;
        assert_eq!(strings(imported.get("tags")), json!({"team": "ml"}));
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
        assert_empty();
    });
}

#[test]
fn an_unhealthy_node_is_remade_in_place_under_its_name_and_the_others_are_not_touched() {
    run(async {
        let _others = beside_others().await;
        let ctx = context();
        let (f, cluster, config) = d2_cluster(&ctx, "repair", "rp", 4, json!({})).await;
        settle().await;
        let vm = |i| vm_id("repair", "rp", i);
        let before = node_ids(&cluster);
        out_of_band(json!({"action": "impair", "id": vm(2), "health": "unhealthy"}));
        let state = refreshed(&ctx, &cluster).await;
        // Replace (the default): the broken VM is moved off its host, brought to the model and reimaged.
        let (state, warnings) = apply_ok(&ctx, &state, &value(&GpuCluster, config.clone())).await;
        assert!(warnings.iter().any(|w| w.contains("rp-2: Application Health extension reports the node unhealthy")), "{warnings:?}");
        let actions = vm_actions();
        assert_eq!(actions[vm(2).to_lowercase()], json!({"redeploy": 1, "manualupgrade": 1, "reimage": 1}), "{actions}");
        for i in [0, 1, 3] {
            assert!(actions.get(vm(i).to_lowercase()).is_none(), "rp-{i} was touched: {actions}");
        }
        assert_eq!(node_ids(&state), before, "names and VM ids hold");
        let state = refreshed(&ctx, &state).await;
        assert_eq!(strings(state.get("unhealthy_nodes")), json!({}));
        assert!(plans_nothing(&ctx, &state, &value(&GpuCluster, config.clone())), "the re-plan is empty");

        // Reboot: a deallocated VM is started, a running one with a failed self-check restarted.
        let mut reboot = config.clone();
        reboot["repair"] = json!("reboot");
        reboot["max_repairs"] = json!("2");
        let (state, _) = apply_ok(&ctx, &state, &value(&GpuCluster, reboot.clone())).await;
        settle().await;
        out_of_band(json!({"action": "impair", "id": vm(1), "health": "deallocated"}));
        probe(&vm(3), "fail-rdma-6-of-8");
        let state = refreshed(&ctx, &state).await;
        assert_eq!(strings(state.get("unhealthy_nodes")), json!({"rp-1": "VM deallocated", "rp-3": "self-check: 6 of 8 RDMA devices"}));
        let (state, _) = apply_ok(&ctx, &state, &value(&GpuCluster, reboot.clone())).await;
        let actions = vm_actions();
        assert_eq!(actions[vm(1).to_lowercase()], json!({"start": 1}), "{actions}");
        assert_eq!(actions[vm(3).to_lowercase()], json!({"restart": 1}), "{actions}");
        assert!(actions.get(vm(0).to_lowercase()).is_none(), "{actions}");
        assert_eq!(node_ids(&state), before);
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
    });
}

#[test]
fn an_image_change_rolls_the_nodes_in_batches_onto_the_new_model_in_place() {
    run(async {
        let _others = beside_others().await;
        let ctx = context();
        let (f, cluster, mut config) = d2_cluster(&ctx, "rolling", "rl", 4, json!({"update_strategy": {"batch_size": "2"}})).await;
        settle().await;
        let before = node_ids(&cluster);
        let old = cluster.get("revision").as_str().unwrap().to_owned();
        config["image"] = json!("microsoft-dsvm:ubuntu-hpc:2204:22.04.2");
        let state = refreshed(&ctx, &cluster).await;
        let (state, warnings) = apply_ok(&ctx, &state, &value(&GpuCluster, config.clone())).await;
        assert!(warnings.iter().any(|w| w.contains("batch 1: rl-0, rl-1") && w.contains("batch 2: rl-2, rl-3")), "{warnings:?}");
        let new = state.get("revision").as_str().unwrap().to_owned();
        assert_ne!(new, old);
        let actions = vm_actions();
        for i in 0..4 {
            let a = &actions[vm_id("rolling", "rl", i).to_lowercase()];
            assert_eq!(a, &json!({"manualupgrade": 1, "reimage": 1}), "rl-{i} remade once, in place, on its host: {actions}");
        }
        assert_eq!(node_ids(&state), before, "names and VM ids hold");
        let set = &admin("GET", "snapshot", None)["arm"][format!(
            "/subscriptions/{SUBSCRIPTION}/resourceGroups/rolling-rg/providers/Microsoft.Compute/virtualMachineScaleSets/rl-0"
        )
        .to_lowercase()];
        assert_eq!(set["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]["version"], "22.04.2");
        assert_eq!(
            (set["tags"]["hpc:revision"].as_str(), set["tags"]["hpc:previous-revision"].as_str()),
            (Some(new.as_str()), Some(old.as_str()))
        );
        assert!(set["tags"].get("hpc:remaking").is_none(), "{}", set["tags"]);
        let all: Json = (0..4).map(|i| (format!("rl-{i}"), json!(new))).collect::<serde_json::Map<_, _>>().into();
        let state = refreshed(&ctx, &state).await;
        assert_eq!(strings(state.get("node_revisions")), all);
        assert!(plans_nothing(&ctx, &state, &value(&GpuCluster, config)), "the re-plan is empty");
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
    });
}

#[test]
fn remove_nodes_and_reboot_nodes_touch_only_the_named_nodes_of_the_census() {
    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::backend::{self, Step};
    use hpc_provider::framework::Diagnostics;
    use hpc_provider::ownership::{Census, Owner};
    run(async {
        let _others = beside_others().await;
        let ctx = context();
        let (f, cluster, mut config) = d2_cluster(&ctx, "backend", "bk", 4, json!({})).await;
        settle().await;
        let vm = |i| vm_id("backend", "bk", i);
        let old = cluster.get("revision").as_str().unwrap().to_owned();
        // The model changes (what the apply's converge does before the first batch): no VM runs it yet.
        config["user_data"] = json!("#!/bin/sh\necho v2\n");
        let mut d = Diagnostics::new();
        let spec = hpc_provider::planner::spec::parse_cluster(&value(&GpuCluster, config.clone()), &mut d)
            .unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
        let census = Census::owned(Owner::parse(cluster.get("owner").as_str().unwrap()).unwrap());
        let defaults = BTreeMap::new();
        let step = Step { ctx: &ctx, census: &census, default_tags: &defaults, timeout: Duration::from_secs(60) };
        let azure = backend::cluster(Cloud::Azure);
        azure.remove_nodes(&step, &spec, &["bk-1".into(), "bk-7".into()]).await.unwrap();
        let actions = vm_actions();
        assert_eq!(actions[vm(1).to_lowercase()], json!({"manualupgrade": 1, "reimage": 1}), "{actions}");
        assert!([0, 2, 3].iter().all(|i| actions.get(vm(*i).to_lowercase()).is_none()), "{actions}");
        // Between batches, the refresh tells which node runs which revision.
        let state = refreshed(&ctx, &cluster).await;
        let revisions = strings(state.get("node_revisions"));
        assert_eq!(revisions["bk-1"], json!(spec.revision()));
        for n in ["bk-0", "bk-2", "bk-3"] {
            assert_eq!(revisions[n], json!(old), "{revisions}");
        }

        out_of_band(json!({"action": "impair", "id": vm(2), "health": "stopped"}));
        out_of_band(json!({"action": "impair", "id": vm(3), "maintenance": "2026-12-05T00:00:00Z"}));
        azure.reboot_nodes(&step, &spec, &["bk-0".into(), "bk-2".into(), "bk-3".into(), "bk-9".into()]).await.unwrap();
        let actions = vm_actions();
        assert_eq!(actions[vm(0).to_lowercase()], json!({"restart": 1}), "{actions}");
        assert_eq!(actions[vm(2).to_lowercase()], json!({"start": 1}), "a stopped VM is started, not restarted: {actions}");
        assert_eq!(actions[vm(3).to_lowercase()], json!({"redeploy": 1}), "a maintenance on its host: moved off it: {actions}");
        assert_eq!(actions[vm(1).to_lowercase()], json!({"manualupgrade": 1, "reimage": 1}), "{actions}");
        let state = refreshed(&ctx, &state).await;
        assert_eq!(strings(state.get("unhealthy_nodes")), json!({}));

        // Another owner's census admits none of it: nothing is touched.
        let stranger = Census::owned(Owner::mint());
        let step = Step { ctx: &ctx, census: &stranger, default_tags: &defaults, timeout: Duration::from_secs(60) };
        azure.remove_nodes(&step, &spec, &["bk-0".into()]).await.unwrap();
        azure.reboot_nodes(&step, &spec, &["bk-0".into()]).await.unwrap();
        assert_eq!(vm_actions()[vm(0).to_lowercase()], json!({"restart": 1}));
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
    });
}

// ------------------------------------------------------------------------------------------ capacity

/// The spec of a cluster configuration, as the planner reads it.
fn spec_of(config: &Value) -> hpc_provider::model::ClusterSpec {
    let mut diags = hpc_provider::framework::Diagnostics::new();
    hpc_provider::planner::spec::parse_cluster(config, &mut diags).unwrap_or_else(|| panic!("{:?}", common::lines(&diags)))
}

fn live_vms() -> usize {
    admin("GET", "inventory", None)["resources"]["arm"]["virtualMachines"].as_array().map_or(0, Vec::len)
}

#[test]
fn the_quota_of_a_cluster_is_read_from_the_usages_of_its_location_and_a_plan_short_of_it_is_refused() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let backend = hpc_provider::clouds::backend::cluster(hpc_provider::catalog::Cloud::Azure);
        let fabric = fabric(&ctx, "quota").await;
        admin("POST", "quota", Some(json!({"id": "standardNDSH100v5Family", "scope": "eastus", "limit": 384})));
        let config =
            |n: u32| value(&GpuCluster, json!({"name": "q", "fabric": fabric_ref("quota"), "node_count": n, "ssh_public_key": KEY}));
        let family = backend.quota(&spec_of(&config(2))).expect("an H100 cluster draws on its family");
        assert_eq!((family.id.as_str(), family.scope.as_str(), family.per_node), ("standardNDSH100v5Family", "eastus", 96));
        assert_eq!(backend.read_quota(&ctx, &family).await, Ok(hpc_provider::clouds::quota::QuotaReading { limit: 384, used: 0 }));

        let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config(2)).await;
        assert!(diags.is_empty(), "{diags:?}");
        let reading = backend.read_quota(&ctx, &family).await.unwrap();
        assert_eq!((reading.limit, reading.used), (384, 192), "two VMs of 96 vCPUs run");

        // 2 -> 5 adds 288 vCPUs where 192 are free: refused at plan time, with the figures.
        let mut d = hpc_provider::framework::Diagnostics::new();
        let grown = config(5);
        let request = || hpc_provider::framework::PlanRequest { prior: &cluster, proposed: &grown, config: &grown, prior_private: &[] };
        let planned = hpc_provider::framework::Resource::plan(&GpuCluster, &ctx, request(), &mut d).planned;
        hpc_provider::framework::Resource::check_plan(&GpuCluster, &ctx, request(), &planned, &mut d).await;
        let said = common::lines(&d);
        let refused = diagnostic(&said, "Not enough Azure quota for q");
        for part in [
            "\"Standard NDSH100v5 Family vCPUs\" (standardNDSH100v5Family)",
            "The quota is 384 vCPUs, 192 in use, 192 free",
            "az quota update",
        ] {
            assert!(refused.contains(part), "{part}: {refused}");
        }
        assert_eq!(live_vms(), 2, "the plan made nothing");

        // A usages list the emulator cannot give (a server error each time) is a warning, not a failure.
        admin("POST", "faults", Some(json!({"service": "arm", "operation": "usages.list", "kind": "server_error"})));
        let failed = backend.read_quota(&ctx, &family).await.unwrap_err();
        assert!(failed.message.contains("Usage_List") && failed.message.contains("InternalServerError"), "{failed}");
        admin("DELETE", "faults", None);
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn a_plan_the_family_has_room_for_but_the_regional_total_has_not_is_held_to_cores_from_the_same_one_usages_list() {
    use hpc_provider::framework::{AttributePath, Diagnostics, PlanRequest, Resource, Severity};
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let fabric = fabric(&ctx, "regional").await;
        // The family is ample (its default 100000); the location's total of Regular vCPUs is 200.
        admin("POST", "quota", Some(json!({"id": "cores", "scope": "eastus", "limit": 200})));
        let config = |name: &str, n: u32| {
            value(&GpuCluster, json!({"name": name, "fabric": fabric_ref("regional"), "node_count": n, "ssh_public_key": KEY}))
        };
        let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config("rc", 1)).await;
        assert!(diags.is_empty(), "{diags:?}");
        let plan = |ctx: Context, prior: Value, config: Value| async move {
            let mut d = Diagnostics::new();
            let request = || PlanRequest { prior: &prior, proposed: &config, config: &config, prior_private: &[] };
            let planned = GpuCluster.plan(&ctx, request(), &mut d).planned;
            GpuCluster.check_plan(&ctx, request(), &planned, &mut d).await;
            d
        };

        // 1 -> 3 adds 192 vCPUs: the family has room, the regional total (96 of 200 in use) has 104.
        admin("DELETE", "counters", None);
        let run_ctx = context();
        let d = plan(run_ctx.clone(), cluster.clone(), config("rc", 3)).await;
        let short: Vec<_> = d.iter().filter(|d| d.summary == "Not enough Azure quota for rc").collect();
        assert_eq!(short.len(), 1, "the regional total alone is short: {:?}", common::lines(&d));
        let (error, detail) = (short[0], &short[0].detail);
        assert_eq!((error.severity, &error.path), (Severity::Error, &Some(AttributePath::attr("node_count"))));
        for part in [
            "adds 2 x Standard_ND96isr_H100_v5 in eastus: 192 vCPUs of the quota \"Total Regional vCPUs\" (cores), at 96 vCPUs a node",
            "The quota is 200 vCPUs, 96 in use, 104 free",
            "Ask for at least 288 vCPUs: a regional vCPU quota increase",
            "az quota update --resource-name cores --scope /subscriptions/<subscription id>/providers/Microsoft.Compute/locations/eastus",
            "value=288",
            "or plan node_count = 2 (what fits)",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
        assert!(!detail.contains("standardNDSH100v5Family"), "{detail}");

        // A second cluster of the same plan claims from the same total, and the location is not listed again.
        let d = plan(run_ctx.clone(), Value::Null, config("rc2", 1)).await;
        let other = diagnostic(&common::lines(&d), "Not enough Azure quota for rc2").to_owned();
        assert!(other.contains("104 free, 192 of which other clusters in this plan take"), "{other}");
        let counters = admin("GET", "counters", None)["counters"].clone();
        assert_eq!(counters["arm:usages.list"], 1, "one Usage_List for the location in the run: {counters}");

        // quota_check = "warning": the same words, as a warning.
        let warning_ctx =
            provider_context(json!({"quota_check": "warning", "azure": {"subscription_id": SUBSCRIPTION, "endpoint": EMULATOR.ep}}));
        let d = plan(warning_ctx, cluster.clone(), config("rc", 3)).await;
        let warned = d.iter().find(|d| d.summary == "Not enough Azure quota for rc").expect("a warning");
        assert_eq!((warned.severity, &warned.detail), (Severity::Warning, detail));
        assert!(!d.has_errors(), "{:?}", common::lines(&d));

        // Within both (1 -> 2: 96 more of 104 free): no diagnostic.
        let d = plan(context(), cluster.clone(), config("rc", 2)).await;
        assert!(d.is_empty(), "{:?}", common::lines(&d));
        assert_eq!(live_vms(), 1, "the plans made nothing");
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn under_a_capacity_limit_at_least_keeps_what_came_and_all_or_nothing_deletes_it_again() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let fabric = fabric(&ctx, "capped").await;
        admin("POST", "capacity", Some(json!({"zone": "eastus", "instance_type": SKU, "available": 3})));
        let config = |policy: Json| {
            let mut c = json!({"name": "cap", "fabric": fabric_ref("capped"), "node_count": 4, "ssh_public_key": KEY});
            c.as_object_mut().unwrap().extend(policy.as_object().unwrap().clone());
            value(&GpuCluster, c)
        };

        // all-or-nothing: 3 of 4 came; they are deleted from the scale set and the state lists none.
        let (failed, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config(json!({"capacity_policy": "all-or-nothing"}))).await;
        let shortage = diagnostic(&diags, "Not enough Standard_ND96isr_H100_v5 capacity in eastus");
        assert!(shortage.contains("(AllocationFailed)") && shortage.contains("keeps none of them"), "{shortage}");
        assert!(shortage.contains("3 of 4 nodes exist") && shortage.contains("the 3 launched were released"), "{shortage}");
        assert_eq!(live_vms(), 0, "the VMs that came were deleted");
        assert!(failed.get("nodes").as_list().unwrap_or_default().is_empty(), "{failed:?}");
        let counters = admin("GET", "counters", None);
        assert!(counters["counters"]["arm:virtualMachineScaleSets.deleteInstances"].as_u64() >= Some(1), "{counters}");

        // at-least 2 (a new cluster): the 3 that come are kept, with a warning.
        destroy(&ctx, &GpuCluster, &failed).await;
        let (kept, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config(json!({"capacity_policy": "at-least", "min_nodes": 2}))).await;
        let short = diagnostic(&diags, "3 of 4 nodes: capacity short");
        assert!(short.contains("AllocationFailed"), "{short}");
        assert!(diags.iter().all(|d| !d.starts_with("Not enough")), "{diags:?}");
        assert_eq!(live_vms(), 3);
        assert_eq!(kept.get("nodes").as_list().map(|n| n.len()), Some(3), "{kept:?}");
        destroy(&ctx, &GpuCluster, &kept).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

#[test]
fn a_release_that_fails_says_so_and_never_reimages_the_vms_instead() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let fabric = fabric(&ctx, "unrel").await;
        admin("POST", "capacity", Some(json!({"zone": "eastus", "instance_type": SKU, "available": 3})));
        // Every DeleteInstances fails: the 3 VMs that came cannot be released.
        admin(
            "POST",
            "faults",
            Some(json!({"service": "arm", "operation": "virtualMachineScaleSets.deleteInstances", "kind": "server_error"})),
        );
        let config = value(
            &GpuCluster,
            json!({"name": "unrel", "fabric": fabric_ref("unrel"), "node_count": 4, "ssh_public_key": KEY, "capacity_policy": "all-or-nothing"}),
        );
        let (failed, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
        let shortage = diagnostic(&diags, "Not enough Standard_ND96isr_H100_v5 capacity in eastus");
        assert!(shortage.contains("releasing the 3 launched failed"), "{shortage}");
        assert!(!shortage.contains("were released"), "{shortage}");
        let reimaged: Vec<String> =
            vm_actions().as_object().into_iter().flatten().filter(|(_, a)| a.get("reimage").is_some()).map(|(id, _)| id.clone()).collect();
        assert!(reimaged.is_empty(), "a release is a delete, never a reimage: {reimaged:?}");
        assert_eq!(live_vms(), 3);
        assert_eq!(failed.get("nodes").as_list().map(|n| n.len()), Some(3), "the state keeps what runs: {failed:?}");
        admin("DELETE", "faults", None);
        destroy(&ctx, &GpuCluster, &failed).await;
        destroy(&ctx, &GpuFabric, &fabric).await;
        assert_empty();
    });
}

/// The scale sets a state's expansion lays the cluster out in, with their sizes.
fn scale_set_sizes(state: &Value) -> Vec<u32> {
    let pieces = state.get("expansion").as_list().unwrap_or_default().to_vec();
    pieces
        .iter()
        .filter(|p| p.get("kind").as_str() == Some("azurerm_linux_virtual_machine_scale_set"))
        .filter_map(|p| p.get("settings").get("instances").as_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// A cluster of `sku` grown from `from` to `to` nodes: every VM that ran keeps its id under its name, the
/// new nodes come in the sets `grown_sets` says, the re-plan is empty, and an import reads the same layout.
async fn grow_keeps_every_vm(sku: &str, from: u32, to: u32, grown_sets: &[u32]) {
    let _alone = alone().await;
    let ctx = context();
    let f = value(&GpuFabric, json!({"name": "grow", "cloud": "azure", "region": "eastus", "instance_type": sku}));
    let (f, diags) = apply(&ctx, &GpuFabric, &Value::Null, &f).await;
    assert!(diags.is_empty(), "{diags:?}");
    let mut reference = fabric_ref("grow");
    reference["instance_type"] = json!(sku);
    // Grace (Arm64) node types need an arm64 image; the others take the default.
    let image = sku.contains("GB").then_some(
        "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/hpc/images/ubuntu-hpc-arm64",
    );
    let config =
        |n: u32| value(&GpuCluster, json!({"name": "g", "fabric": reference, "node_count": n, "ssh_public_key": KEY, "image": image}));
    let (state, _) = apply_ok(&ctx, &Value::Null, &config(from)).await;
    settle().await;
    let prior = refreshed(&ctx, &state).await;
    let before = node_ids(&prior);
    assert_eq!(before.len(), from as usize);
    let (grown, _) = apply_ok(&ctx, &prior, &config(to)).await;
    assert_eq!(scale_set_sizes(&grown), grown_sets, "the planned layout");
    settle().await;
    let now = refreshed(&ctx, &grown).await;
    let after = node_ids(&now);
    assert_eq!(after.len(), to as usize);
    for (name, id) in &before {
        assert_eq!(after.get(name), Some(id), "{name} kept running under its name");
    }
    assert!(plans_nothing(&ctx, &now, &config(to)), "the re-plan after the grow is empty");
    let (imported, _) = import(&ctx, &GpuCluster, now.get("id").as_str().unwrap()).await;
    assert_eq!(scale_set_sizes(&imported), grown_sets, "an import reads the sets as they run");
    destroy(&ctx, &GpuCluster, &now).await;
    destroy(&ctx, &GpuFabric, &f).await;
    assert_empty();
}

#[test]
fn growing_100_nodes_to_101_adds_a_scale_set_of_one_and_keeps_every_vm_by_id_and_name() {
    // An even split (51 + 50) would delete 49 running VMs and move the names of the rest.
    run(grow_keeps_every_vm(SKU, 100, 101, &[100, 1]));
}

#[test]
fn growing_a_gb200_cluster_from_90_to_108_adds_a_rack_and_keeps_every_vm_by_id_and_name() {
    // An even split (54 + 54) would delete 36 running VMs.
    run(grow_keeps_every_vm("Standard_ND128isr_NDR_GB200_v6", 90, 108, &[90, 18]));
}

#[test]
fn a_shrink_deletes_the_highest_named_vms_by_id_and_resizes_only_the_last_set() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let f = fabric(&ctx, "shrink").await;
        let config = |n: u32| value(&GpuCluster, d2_config("shrink", "s", n, json!({})));
        let (state, _) = apply_ok(&ctx, &Value::Null, &config(5)).await;
        settle().await;
        let prior = refreshed(&ctx, &state).await;
        let before = node_ids(&prior);
        admin("DELETE", "counters", None);
        let (shrunk, _) = apply_ok(&ctx, &prior, &config(3)).await;
        let counters = admin("GET", "counters", None)["counters"].clone();
        settle().await;
        let now = refreshed(&ctx, &shrunk).await;
        let kept: BTreeMap<String, String> = before.into_iter().filter(|(n, _)| ["s-0", "s-1", "s-2"].contains(&n.as_str())).collect();
        assert_eq!(node_ids(&now), kept, "s-3 and s-4 went; the others run as they were");
        assert_eq!(counters["arm:virtualMachineScaleSets.deleteInstances"], 1, "the two highest VMs were deleted by id: {counters}");
        assert!(plans_nothing(&ctx, &now, &config(3)));
        destroy(&ctx, &GpuCluster, &now).await;
        destroy(&ctx, &GpuFabric, &f).await;
        assert_empty();
    });
}

// ------------------------------------------------------------------------------------------ node names

/// The node name a scale-set VM's own userData says (`hpc-node-name=<name>`), read as the VM reads it: ARM
/// gives a VM's userData only to a GET with `$expand=userData`.
fn name_told(vm_id: &str) -> Option<String> {
    use base64::Engine;
    let got = azure_call(&EMULATOR.ep, &EMULATOR.pem, "GET", &format!("{vm_id}?$expand=userData&api-version=2026-04-01"), None, &[]);
    assert_eq!(got["status"], 200, "{got}");
    let encoded = got["body"]["properties"]["userData"].as_str()?;
    let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).ok()?).ok()?;
    text.lines().find_map(|l| l.strip_prefix("hpc-node-name=")).map(str::to_owned)
}

/// Each node of a state with the name its VM was told: what a node registers with Slurm under.
fn names_told(state: &Value) -> BTreeMap<String, Option<String>> {
    node_ids(state).into_iter().map(|(name, id)| (name, name_told(&id))).collect()
}

/// The slurm.conf a Slurm cluster with one partition on this cluster renders: it lists the cluster's
/// `node_names` as the state has them.
fn slurm_conf(cluster: &Value) -> String {
    use hpc_provider::catalog::{self, Cloud};
    use hpc_provider::model::{FabricRef, Partition, Placement, SlurmNodes, SlurmSpec, TopologyChoice};
    let sku = catalog::find_sku(Cloud::Azure, SKU).unwrap();
    let names: Vec<String> =
        cluster.get("node_names").as_list().unwrap_or_default().iter().filter_map(|n| n.as_str().map(str::to_owned)).collect();
    let nodes = SlurmNodes {
        cluster: cluster.get("name").as_str().unwrap().to_owned(),
        sku,
        names,
        placement_groups: vec![],
        nvlink_domains: vec![],
    };
    let spec = SlurmSpec {
        name: "ml".into(),
        fabric: FabricRef {
            name: "f".into(),
            cloud: Cloud::Azure,
            region: "eastus".into(),
            zone: None,
            sku,
            placement: Placement::Cluster,
        },
        cidr: "10.0.0.0/16".into(),
        version: catalog::slurm::find("22.05").unwrap(),
        controller_type: "Standard_D8s_v5".into(),
        backup: false,
        state_save_location: "/var/spool/slurmctld".into(),
        login_type: "Standard_D8s_v5".into(),
        login_nodes: 1,
        partitions: vec![Partition { name: "gpu".into(), default: true, max_time: "INFINITE".into(), nodes }],
        topology: TopologyChoice::Auto,
        health_check_interval: 300,
        image: None,
        ssh_public_key: None,
        tags: Default::default(),
        key: None,
        custom_settings: Default::default(),
        accounting: false,
    };
    let mut d = hpc_provider::framework::Diagnostics::new();
    hpc_provider::planner::slurm::plan(&spec, &mut d).unwrap_or_else(|| panic!("{:?}", common::lines(&d))).slurm_conf
}

/// Every node of a refreshed state was told its own name, and slurm.conf lists exactly the names the
/// nodes were told: each node registers under a name the controller knows.
fn every_node_knows_its_name(state: &Value) {
    let told = names_told(state);
    for (name, said) in &told {
        assert_eq!(said.as_deref(), Some(name.as_str()), "{name}'s VM says another name: {told:?}");
    }
    let names: Vec<String> = told.into_keys().collect();
    let conf = slurm_conf(state);
    let line = format!("NodeName={} ", hpc_provider::nodes::compress(&names));
    assert!(conf.contains(&line), "slurm.conf has no {line:?}:\n{conf}");
}

#[test]
fn a_vm_deleted_outside_is_repaired_under_its_own_name_and_learns_it_from_its_user_data() {
    run(async {
        let _others = beside_others().await;
        let ctx = context();
        let (f, cluster, config) = d2_cluster(&ctx, "mend", "md", 4, json!({})).await;
        settle().await;
        let state = refreshed(&ctx, &cluster).await;
        let before = node_ids(&state);
        every_node_knows_its_name(&state);
        // md-1's VM (instance id 1) is deleted outside.
        out_of_band(json!({"action": "delete", "id": vm_id("mend", "md", 1)}));
        let state = refreshed(&ctx, &cluster).await;
        let seen = node_ids(&state);
        assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), ["md-0", "md-2", "md-3"], "md-1 is missing and no other name moved");
        for n in ["md-0", "md-2", "md-3"] {
            assert_eq!(seen[n], before[n], "{n} is the VM it was");
        }
        // The apply makes the set whole again: Azure gives the new VM a new instance id; it is md-1.
        let (state, _) = apply_ok(&ctx, &state, &value(&GpuCluster, config.clone())).await;
        settle().await;
        let state = refreshed(&ctx, &state).await;
        let after = node_ids(&state);
        assert_eq!(after.keys().cloned().collect::<Vec<_>>(), ["md-0", "md-1", "md-2", "md-3"]);
        for n in ["md-0", "md-2", "md-3"] {
            assert_eq!(after[n], before[n], "{n} kept its VM");
        }
        assert!(after["md-1"].ends_with("/virtualMachines/4"), "the repaired node is a new VM: {after:?}");
        every_node_knows_its_name(&state);
        assert!(plans_nothing(&ctx, &state, &value(&GpuCluster, config)), "the re-plan is empty");
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
    });
}

#[test]
fn after_a_scale_in_and_out_no_two_nodes_swap_names() {
    run(async {
        let _others = beside_others().await;
        let ctx = context();
        let (f, cluster, _) = d2_cluster(&ctx, "swap", "sw", 4, json!({})).await;
        let config = |n: u32| value(&GpuCluster, d2_config("swap", "sw", n, json!({})));
        settle().await;
        // Every name each VM was ever given, by VM: one each, or two nodes swapped names.
        let mut history: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        let mut record = |state: &Value| {
            for (name, id) in node_ids(state) {
                history.entry(id).or_default().insert(name);
            }
        };
        let state = refreshed(&ctx, &cluster).await;
        record(&state);
        // sw-1's VM is lost and repaired (the new VM has the set's highest instance id), then the cluster shrinks
        // to two nodes and grows back to four.
        out_of_band(json!({"action": "delete", "id": vm_id("swap", "sw", 1)}));
        let state = refreshed(&ctx, &state).await;
        record(&state);
        let mut state = state;
        for n in [4, 2, 4] {
            let (applied, _) = apply_ok(&ctx, &state, &config(n)).await;
            settle().await;
            state = refreshed(&ctx, &applied).await;
            record(&state);
            let names: Vec<String> = node_ids(&state).into_keys().collect();
            assert_eq!(names, (0..n).map(|i| format!("sw-{i}")).collect::<Vec<_>>(), "{n} nodes");
            every_node_knows_its_name(&state);
        }
        let swapped: Vec<(&String, &std::collections::BTreeSet<String>)> = history.iter().filter(|(_, names)| names.len() > 1).collect();
        assert!(swapped.is_empty(), "VMs that changed names: {swapped:?}");
        // The shrink took the highest names (sw-2, sw-3), not the highest instance ids (sw-1's new VM stayed).
        let ids = node_ids(&state);
        assert!(ids["sw-1"].ends_with("/virtualMachines/4"), "{ids:?}");
        assert!(plans_nothing(&ctx, &state, &config(4)), "the re-plan is empty");
        // An import reads the same names back from the scale set.
        let (imported, _) = import(&ctx, &GpuCluster, state.get("id").as_str().unwrap()).await;
        assert_eq!(scale_set_sizes(&imported), [4]);
        let imported = refreshed(&ctx, &imported).await;
        assert_eq!(node_ids(&imported), ids, "the import names every VM as the state does");
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
    });
}

// ------------------------------------------------------------------------------ ARM write semantics

/// Plans and applies as the CLI would; the new state and the diagnostics themselves (with their causes).
async fn apply_diagnosed(
    ctx: &Context,
    resource: &dyn hpc_provider::framework::Resource,
    prior: &Value,
    config: &Value,
) -> (Value, hpc_provider::framework::Diagnostics) {
    use hpc_provider::framework::{ApplyRequest, Diagnostics, PlanRequest};
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    (out.new_state, diags)
}

/// A direct ARM call from outside the provider (another tool); `{"status", "body"}`.
fn arm_call(method: &str, path: &str, body: Option<Json>) -> Json {
    azure_call(&EMULATOR.ep, &EMULATOR.pem, method, &format!("{path}?api-version=2026-03-01"), body, &[])
}

fn group_id(fabric: &str) -> String {
    format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{fabric}-rg")
}

#[test]
fn a_tag_change_updates_tags_alone_and_keeps_the_subnet_in_use_and_rules_added_outside() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let before = json!({"team": "ml"});
        let (f, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config("retag", before.clone())).await;
        assert!(diags.is_empty(), "{diags:?}");
        // A cluster whose scale set's NICs are in the fabric's subnet.
        let (cluster, _) = apply_ok(&ctx, &Value::Null, &value(&GpuCluster, d2_config("retag", "rt", 2, json!({})))).await;
        // Another tool adds a rule to the fabric's security group (a PUT of the group with its rules).
        let nsg = security_group("retag");
        let found = arm_call("GET", &nsg, None)["body"].clone();
        let rule = json!({"name": "bastion-ssh", "properties": {"protocol": "Tcp", "access": "Allow", "direction": "Inbound",
            "priority": 200, "sourceAddressPrefix": "10.9.0.0/24", "sourcePortRange": "*", "destinationAddressPrefix": "*",
            "destinationPortRange": "22"}});
        let added = arm_call(
            "PUT",
            &nsg,
            Some(json!({"location": found["location"], "tags": found["tags"], "properties": {"securityRules": [rule]}})),
        );
        assert_eq!(added["status"], 200, "{added}");

        admin("DELETE", "counters", None);
        let after = json!({"team": "ml", "env": "prod"});
        let (f, diags) = apply(&ctx, &GpuFabric, &f, &fabric_config("retag", after)).await;
        assert!(diags.is_empty(), "the tag change failed: {diags:?}");
        let counters = admin("GET", "counters", None)["counters"].clone();
        for op in ["resourceGroups", "virtualNetworks", "networkSecurityGroups", "proximityPlacementGroups"] {
            assert_eq!(counters[format!("arm:{op}.patch")], 1, "{op} retagged through its UpdateTags/Update: {counters}");
            assert!(counters.get(format!("arm:{op}.put")).is_none(), "{op} PUT again: {counters}");
        }

        let snapshot = admin("GET", "snapshot", None)["arm"].clone();
        let vnet = format!("{}/providers/Microsoft.Network/virtualNetworks/retag-vpc", group_id("retag"));
        let subnet = &snapshot[format!("{vnet}/subnets/retag-subnet").to_lowercase()];
        assert!(subnet["properties"]["networkSecurityGroup"]["id"].as_str().is_some_and(|id| id.eq_ignore_ascii_case(&nsg)), "{subnet}");
        let listed = arm_call("GET", &vnet, None)["body"]["properties"]["subnets"].clone();
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "the network still lists its subnet: {listed}");
        let group = &snapshot[nsg.to_lowercase()];
        let rules: Vec<&str> =
            group["properties"]["securityRules"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(rules, ["bastion-ssh"], "the rule added outside stays");
        for id in [group_id("retag"), vnet.clone(), nsg.clone()] {
            let tags = &snapshot[id.to_lowercase()]["tags"];
            assert_eq!((tags["team"].as_str(), tags["env"].as_str()), (Some("ml"), Some("prod")), "{id}: {tags}");
        }
        assert_eq!(group["tags"]["hpc:fabric"], "retag", "the security group keeps the configuration it records: {}", group["tags"]);
        assert_eq!(live_vms(), 2, "the cluster's nodes run as they did");
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
        assert_empty();
    });
}

#[test]
fn a_create_racing_another_writer_is_refused_instead_of_overwriting_theirs() {
    use hpc_provider::clouds::{CloudError, ErrorKind};
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let nsg = security_group("race");
        // The provider's create of the security group is held in ARM for a moment; meanwhile another writer
        // (another state making the same names) creates a group of that name with tags of its own.
        admin(
            "POST",
            "faults",
            Some(json!({"service": "arm", "operation": "networkSecurityGroups.put", "kind": "latency", "latency_ms": 3000, "times": 1})),
        );
        let theirs = json!({"location": "eastus", "tags": {"writer": "theirs"}, "properties": {}});
        let other_writer = async {
            let started = Instant::now();
            while admin("GET", "counters", None)["counters"]["arm:networkSecurityGroups.put"].as_u64().unwrap_or(0) == 0 {
                assert!(started.elapsed() < Duration::from_secs(60), "the provider never wrote the security group");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            arm_call("PUT", &nsg, Some(theirs.clone()))
        };
        let config = fabric_config("race", Json::Null);
        let ((failed, diags), made) = tokio::join!(apply_diagnosed(&ctx, &GpuFabric, &Value::Null, &config), other_writer);
        assert_eq!(made["status"], 201, "the other writer's create: {made}");
        let error = diags.iter().find(|d| d.severity == hpc_provider::framework::Severity::Error).expect("the create failed");
        let cause = error.cause::<CloudError>().unwrap_or_else(|| panic!("no typed cause: {} {}", error.summary, error.detail));
        assert_eq!(cause.kind, ErrorKind::Conflict, "{cause}");
        assert!(error.detail.contains("networkSecurityGroups/race-nsg") && error.detail.contains("another writer"), "{}", error.detail);
        let now = admin("GET", "snapshot", None)["arm"][nsg.to_lowercase()].clone();
        assert_eq!(now["tags"], theirs["tags"], "their security group was overwritten: {now}");
        // Theirs gone, the failed create's destroy takes what it made.
        admin("POST", "out-of-band", Some(json!({"action": "delete", "id": nsg})));
        destroy(&ctx, &GpuFabric, &failed).await;
        assert_empty();
    });
}

#[test]
fn a_filesystem_tag_change_updates_its_tags_alone() {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let f = fabric(&ctx, "lustre").await;
        let config = |tags: Json| {
            value(
                &ParallelFilesystem,
                json!({"name": "scratch", "fabric": fabric_ref("lustre"), "capacity_gib": 8192, "throughput_per_tib": 500,
                       "maintenance_window": "Saturday 23:00", "tags": tags}),
            )
        };
        let (fs, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &config(json!({"team": "ml"}))).await;
        assert!(diags.is_empty(), "{diags:?}");
        admin("DELETE", "counters", None);
        let (retagged, diags) = apply(&ctx, &ParallelFilesystem, &fs, &config(json!({"team": "ml", "env": "prod"}))).await;
        assert!(diags.is_empty(), "{diags:?}");
        let counters = admin("GET", "counters", None)["counters"].clone();
        assert_eq!(counters["arm:amlFilesystems.patch"], 1, "AmlFilesystems_Update: {counters}");
        assert!(counters.get("arm:amlFilesystems.put").is_none(), "the filesystem was PUT again: {counters}");
        let id = format!("{}/providers/Microsoft.StorageCache/amlFilesystems/scratch", group_id("lustre"));
        let live = &admin("GET", "snapshot", None)["arm"][id.to_lowercase()];
        assert_eq!((live["tags"]["team"].as_str(), live["tags"]["env"].as_str()), (Some("ml"), Some("prod")), "{}", live["tags"]);
        assert_eq!(retagged.get("mount_target"), fs.get("mount_target"));
        destroy(&ctx, &ParallelFilesystem, &retagged).await;
        destroy(&ctx, &GpuFabric, &f).await;
        assert_empty();
    });
}

/// A change another tool makes to the user's subnet while the fabric sets its security group on it (between
/// the fabric's read and its write) is kept: the write goes under the subnet's etag (`If-Match`), the stale
/// one is refused with 412, and the change is made again from a second read. Without the etag the write,
/// made from the first read, would put the subnet back as it was read.
#[test]
fn a_change_to_the_users_subnet_between_the_fabrics_read_and_write_is_kept() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let group = format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/corp-rg");
        let vnet = format!("{group}/providers/Microsoft.Network/virtualNetworks/corp-vnet");
        let subnet = format!("{vnet}/subnets/gpu");
        let made = azure_call(
            &EMULATOR.ep,
            &EMULATOR.pem,
            "PUT",
            &format!("{group}?api-version=2025-04-01"),
            Some(json!({"location": "eastus"})),
            &[],
        );
        assert_eq!(made["status"], 201, "{made}");
        let body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.40.0.0/16"]}}});
        assert_eq!(arm_call("PUT", &vnet, Some(body))["status"], 201);
        assert_eq!(arm_call("PUT", &subnet, Some(json!({"properties": {"addressPrefix": "10.40.1.0/24"}})))["status"], 201);
        wait_settled(&subnet).await;

        // The fabric's write of the subnet is held on its way for 1.5 s, after its read; another tool changes
        // the subnet meanwhile (its private endpoint network policies).
        admin(
            "POST",
            "faults",
            Some(json!({"service": "arm", "operation": "subnets.put", "kind": "latency", "latency_ms": 1500, "times": 1})),
        );
        admin("DELETE", "counters", None);
        let config = value(
            &GpuFabric,
            json!({"name": "corp", "cloud": "azure", "region": "eastus", "instance_type": SKU, "resource_group": "corp-rg",
                   "vpc_id": vnet, "subnet_id": subnet}),
        );
        let other_tool = async {
            while admin("GET", "counters", None)["counters"]["arm:subnets.put"].as_u64().unwrap_or(0) == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let body = json!({"properties": {"addressPrefix": "10.40.1.0/24", "privateEndpointNetworkPolicies": "Disabled"}});
            let changed = tokio::task::spawn_blocking(move || arm_call("PUT", &subnet_id(), Some(body))).await.unwrap();
            assert_eq!(changed["status"], 200, "{changed}");
        };
        let ((fabric, diags), ()) = tokio::join!(apply(&ctx, &GpuFabric, &Value::Null, &config), other_tool);
        assert!(diags.is_empty(), "{diags:?}");

        let found = arm_call("GET", &subnet, None)["body"].clone();
        let nsg = found["properties"]["networkSecurityGroup"]["id"].as_str().unwrap_or_default();
        assert!(nsg.eq_ignore_ascii_case(&security_group_in("corp-rg", "corp")), "the fabric's security group is set: {found}");
        assert_eq!(found["properties"]["privateEndpointNetworkPolicies"], "Disabled", "the other tool's change is kept: {found}");
        let counters = admin("GET", "counters", None)["counters"].clone();
        // The fabric's stale write (refused), the other tool's, and the fabric's again from a second read.
        assert_eq!(counters["arm:subnets.put"], 3, "{counters}");

        // The destroy takes the security group off the user's subnet the same way and leaves the rest.
        destroy(&ctx, &GpuFabric, &fabric).await;
        let found = arm_call("GET", &subnet, None)["body"].clone();
        assert!(found["properties"]["networkSecurityGroup"].is_null(), "{found}");
        assert_eq!(found["properties"]["privateEndpointNetworkPolicies"], "Disabled", "{found}");
        let gone = azure_call(&EMULATOR.ep, &EMULATOR.pem, "DELETE", &format!("{group}?api-version=2025-04-01"), None, &[]);
        assert_eq!(gone["status"], 202, "{gone}");
        assert_empty();
    });
}

fn subnet_id() -> String {
    format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/corp-rg/providers/Microsoft.Network/virtualNetworks/corp-vnet/subnets/gpu")
}

fn security_group_in(group: &str, fabric: &str) -> String {
    format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Network/networkSecurityGroups/{fabric}-nsg")
}

/// Until a network piece's provisioning has settled.
async fn wait_settled(id: &str) {
    for _ in 0..50 {
        if arm_call("GET", id, None)["body"]["properties"]["provisioningState"] == "Succeeded" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{id} did not settle");
}

/// An apply writes each scale set it changes under the set's etag: a resize another writer makes between
/// the apply's read and its write (an autoscale rule, another tool, after the plan was made) is read again,
/// and the write keeps the VMs it added instead of scaling the set back in. Without the etag the write, made
/// from the older read at the planned capacity, would delete the VM just added, which no plan announced; with
/// it the next plan shows the extra node.
#[test]
fn a_resize_made_outside_between_an_applys_read_and_write_is_not_undone() {
    run(async {
        let _alone = alone().await;
        let ctx = context();
        let (f, cluster, config) = d2_cluster(&ctx, "etag", "et", 2, json!({})).await;
        settle().await;
        let compute = move |method: &str, body: Option<Json>| {
            let set =
                format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/etag-rg/providers/Microsoft.Compute/virtualMachineScaleSets/et-0");
            azure_call(&EMULATOR.ep, &EMULATOR.pem, method, &format!("{set}?api-version=2026-04-01"), body, &[])
        };
        // A tag change: the apply writes the set's model again. That write is held on its way for 1.5 s;
        // meanwhile another writer grows the set to three VMs (a PUT of the set as it reads it).
        admin(
            "POST",
            "faults",
            Some(json!({"service": "arm", "operation": "virtualMachineScaleSets.put", "kind": "latency", "latency_ms": 1500, "times": 1})),
        );
        admin("DELETE", "counters", None);
        admin("DELETE", "events", None);
        let other_writer = async {
            while admin("GET", "counters", None)["counters"]["arm:virtualMachineScaleSets.put"].as_u64().unwrap_or(0) == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut grown = compute("GET", None)["body"].clone();
            grown["sku"]["capacity"] = json!(3);
            for read_only in ["etag", "id", "name", "type"] {
                grown.as_object_mut().map(|o| o.remove(read_only));
            }
            grown["properties"].as_object_mut().map(|p| p.remove("provisioningState"));
            let answer = tokio::task::spawn_blocking(move || compute("PUT", Some(grown))).await.unwrap();
            assert_eq!(answer["status"], 200, "{answer}");
        };
        let mut retagged = config.clone();
        retagged["tags"] = json!({"team": "ml", "env": "prod"});
        let retagged = value(&GpuCluster, retagged);
        let ((state, _), ()) = tokio::join!(apply_ok(&ctx, &cluster, &retagged), other_writer);
        let found = compute("GET", None)["body"].clone();
        assert_eq!(found["tags"]["env"], "prod", "the apply's change is made: {}", found["tags"]);
        assert_eq!(found["sku"]["capacity"], 3, "the other writer's resize stands: {}", found["sku"]);
        let events = admin("GET", "events", None)["events"].clone();
        let deleted: Vec<&Json> = events.as_array().into_iter().flatten().filter(|e| e["event"] == "deleted").collect();
        assert!(deleted.is_empty(), "no VM deleted: {events}");
        let counters = admin("GET", "counters", None)["counters"].clone();
        // The apply's stale write (refused with 412), the other writer's, and the apply's again.
        assert_eq!(counters["arm:virtualMachineScaleSets.put"], 3, "{counters}");
        // The next plan shows the node the apply did not make, under its Azure name, and no other node
        // renamed; the apply after it deletes that VM alone, and the plan after that is empty.
        let state = refreshed(&ctx, &state).await;
        let names: Vec<&str> = state.get("node_names").as_list().unwrap_or_default().iter().filter_map(|n| n.as_str()).collect();
        assert_eq!(names, ["et-0", "et-1", "et-0_2"], "{:?}", state.get("nodes"));
        assert_eq!(state.get("node_count").as_number().and_then(|n| n.as_i64()), Some(3));
        assert!(!plans_nothing(&ctx, &state, &retagged), "the extra VM shows in the next plan");
        admin("DELETE", "events", None);
        let (state, _) = apply_ok(&ctx, &state, &retagged).await;
        let events = admin("GET", "events", None)["events"].clone();
        let touched: Vec<(&str, &str)> =
            events.as_array().into_iter().flatten().filter_map(|e| Some((e["event"].as_str()?, e["node"].as_str()?))).collect();
        assert_eq!(touched, [("deleted", "et-0_2")], "{events}");
        let state = refreshed(&ctx, &state).await;
        assert!(plans_nothing(&ctx, &state, &retagged), "the re-plan is empty");
        destroy(&ctx, &GpuCluster, &cluster).await;
        destroy(&ctx, &GpuFabric, &f).await;
        assert_empty();
    });
}
