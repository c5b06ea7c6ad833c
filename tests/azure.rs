//! The Azure resources through the provider's own Resource implementations against the ARM emulator
//! (HTTPS, trusted through HPC_AZURE_CA_FILE): 429 with Retry-After honoured, an allocation failure
//! reported with ARM's code and kept in state, the scale-set split the plan promised, imports keeping a
//! user's tag named `Name`, and another owner's piece at a fabric's id left alone.

use std::sync::Arc;

use hpc_emulators::harness::{azure_admin, start_azure};
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;

fn value(resource: &dyn Resource, json: Json) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).unwrap()
}

async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    (out.new_state, diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_allocation_failures_and_the_scale_set_split() {
    let (ep, pem) = start_azure();
    // SAFETY: this test binary has one test; the variable is set before any client reads it.
    unsafe { std::env::set_var("HPC_AZURE_CA_FILE", &pem) };
    let admin = |method: &str, route: &str, body: Option<Json>| azure_admin(&ep, &pem, method, route, body);
    let provider = json!({"azure": {"subscription_id": "00000000-0000-0000-0000-0000000000aa", "endpoint": ep}});
    let config = decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&config, "test"))));

    // ARM throttles the first security-group write (429, Retry-After: 1): honoured, then created.
    admin("POST", "faults", Some(json!({"service": "arm", "operation": "networkSecurityGroups.put", "kind": "throttle", "times": 1})));
    // Right after the write, ARM reads the security group as not found twice: waited out, not "vanished".
    admin("POST", "faults", Some(json!({"service": "arm", "operation": "networkSecurityGroups.get", "kind": "not_found", "times": 2})));
    let fabric_config =
        value(&GpuFabric, json!({"name": "az", "cloud": "azure", "region": "eastus", "instance_type": "Standard_ND96isr_H100_v5"}));
    let started = std::time::Instant::now();
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "Retry-After was not waited for");
    let faults = admin("GET", "faults", None);
    assert_eq!((&faults["faults"][0]["fired"], &faults["faults"][1]["fired"]), (&json!(1), &json!(2)), "{faults}");

    // 150 nodes: two scale sets of 75, as planned.
    let fabric_ref = json!({"id": "azure/az-rg/az", "name": "az", "cloud": "azure", "region": "eastus", "zone": null,
                            "instance_type": "Standard_ND96isr_H100_v5", "placement": "cluster"});
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x";
    let big =
        value(&GpuCluster, json!({"name": "big", "fabric": fabric_ref, "node_count": 150, "ssh_public_key": key, "tags": {"Name": "x"}}));
    let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &big).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    let inv = admin("GET", "inventory", None);
    let sets: Vec<String> = serde_json::from_value(inv["resources"]["arm"]["virtualMachineScaleSets"].clone()).unwrap();
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert_eq!(inv["resources"]["arm"]["virtualMachines"].as_array().map(Vec::len), Some(150));
    let mut d = Diagnostics::new();
    assert!(matches!(GpuCluster.read(&ctx, &cluster, &[], &mut d).await, ReadOutcome::Found { .. }));
    // Imported, the cluster keeps the user's own tag named Name (only AWS reserves that key).
    let imported = GpuCluster.import(&ctx, "azure/az-rg/big", &mut d).await.unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    assert_eq!(imported.get("tags").get("Name").as_str(), Some("x"), "{:?}", imported.get("tags"));

    // No capacity: the scale set's operation fails with AllocationFailed; the diagnostic says so.
    admin("POST", "faults", Some(json!({"service": "arm", "operation": "virtualMachineScaleSets.put", "kind": "capacity", "times": 1})));
    let small = value(&GpuCluster, json!({"name": "small", "fabric": fabric_ref, "node_count": 2, "ssh_public_key": key}));
    let (failed, diags) = apply(&ctx, &GpuCluster, &Value::Null, &small).await;
    let failure = diags.iter().find(|d| d.starts_with("Creating the cluster failed")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("AllocationFailed") && failure.contains("small-0"), "{failure}");

    // Another owner's piece where the fabric's own was (its security group deleted outside, another
    // fabric's copied to that id): the next apply does not PUT over it, says whose it is, and leaves it.
    let other = value(
        &GpuFabric,
        json!({"name": "bz", "cloud": "azure", "region": "eastus", "instance_type": "Standard_ND96isr_H100_v5", "tags": {"Name": "x"}}),
    );
    let (other_state, diags) = apply(&ctx, &GpuFabric, &Value::Null, &other).await;
    assert!(diags.is_empty(), "{diags:?}");
    // Imported, the fabric keeps the user's own tag named Name too.
    let mut d = Diagnostics::new();
    let imported = GpuFabric.import(&ctx, "azure/bz-rg/bz", &mut d).await.unwrap_or_else(|| panic!("{:?}", d.iter().collect::<Vec<_>>()));
    assert_eq!(imported.get("tags").get("Name").as_str(), Some("x"), "{:?}", imported.get("tags"));
    let groups = "/subscriptions/00000000-0000-0000-0000-0000000000aa/resourceGroups";
    let ours = format!("{groups}/az-rg/providers/Microsoft.Network/networkSecurityGroups/az-nsg");
    admin("POST", "out-of-band", Some(json!({"action": "delete", "id": ours})));
    let theirs = format!("{groups}/bz-rg/providers/Microsoft.Network/networkSecurityGroups/bz-nsg");
    admin("POST", "out-of-band", Some(json!({"action": "copy", "id": theirs, "to": ours})));
    let before = admin("GET", "snapshot", None)["arm"][ours.to_lowercase()].clone();
    assert!(before["tags"]["hpc:owner"] == other_state.get("owner").as_str().unwrap_or_default(), "{before}");
    let (_, diags) = apply(&ctx, &GpuFabric, &fabric, &fabric_config).await;
    assert!(diags.iter().any(|d| d.contains("networkSecurityGroups/az-nsg belong to another owner and were left alone")), "{diags:?}");
    assert_eq!(admin("GET", "snapshot", None)["arm"][ours.to_lowercase()], before, "the other owner's security group changed");
    admin("POST", "out-of-band", Some(json!({"action": "delete", "id": ours})));

    // Teardown: the clusters (the failed one is in state too, as the CLI keeps it tainted), then the
    // resource groups, which hold nothing of anyone else by then.
    let mut d = Diagnostics::new();
    for (r, s) in [(&GpuCluster as &dyn Resource, &cluster), (&GpuCluster, &failed), (&GpuFabric, &fabric), (&GpuFabric, &other_state)] {
        let out = r.apply(&ctx, ApplyRequest { prior: s, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
        assert!(out.new_state.is_null(), "{:?}", d.iter().collect::<Vec<_>>());
    }
    assert_eq!(admin("GET", "inventory", None)["empty"], true);
}
