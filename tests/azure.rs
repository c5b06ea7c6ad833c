//! The Azure resources through the provider's own Resource implementations against the ARM emulator
//! (HTTPS, trusted through HPC_AZURE_CA_FILE): 429 with Retry-After honoured, an allocation failure
//! reported with ARM's code and kept in state, the scale-set split the plan promised, imports keeping a
//! user's tag named `Name`, and another owner's piece at a fabric's id left alone.
//!
//! One emulator serves every test of this binary (the certificate the provider trusts is named by an
//! environment variable, read whenever an ARM client is built), so each test names its own pieces. Faults
//! and assertions about the whole emulator (counts, "nothing left") need it alone: such a test holds
//! [`alone`], the others [`beside_others`].

mod common;

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
        let failure = diagnostic(&diags, "Creating the cluster failed");
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
