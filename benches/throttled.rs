//! A 1024-node apply against an emulator that enforces a cloud's request bucket, timed against the least
//! time that bucket allows. OCI launches nodes one call each (outside instance pools), so its bucket bounds
//! the apply: with OCI's emulator refusing LaunchInstance beyond a burst of 20 refilled at 10 per second
//! (OCI publishes no numbers; these are what users report, and what the provider's own client-side bucket
//! uses), 1024 launches need at least (1024 - 20) / 10 = 100.4 s. The bar: within 1.5x of that. Also
//! printed: how many calls the emulator throttled (the client's bucket should keep that near zero) and the
//! requests per refresh of the 1024 nodes (paged lists, not one call per node). Prints figures.

use std::sync::Arc;
use std::time::Instant;

use hpc_emulators::harness::{admin, start_oci};
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use tokio_util::sync::CancellationToken;

const NODES: u32 = 1024;
const BURST: f64 = 20.0;
const PER_SECOND: f64 = 10.0;

fn value(resource: &dyn Resource, json: serde_json::Value) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).expect("valid configuration")
}

async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> Value {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    assert!(!diags.has_errors(), "{:?}", diags.iter().map(|d| d.detail.clone()).collect::<Vec<_>>());
    out.new_state
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (ep, key) = start_oci();
    let compartment = "ocid1.compartment.oc1..throttled";
    let provider = serde_json::json!({"oci": {"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint,
        "private_key": key.private_key_pem, "region": "us-ashburn-1", "endpoint": ep}});
    let provider_value = decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&provider_value, "bench"))));
    let zone = "Uocm:US-ASHBURN-AD-1";
    let _fabric = apply(
        &ctx,
        &GpuFabric,
        &Value::Null,
        &value(
            &GpuFabric,
            serde_json::json!({"name": "big", "cloud": "oci", "region": "us-ashburn-1", "zone": zone, "compartment_id": compartment,
                               "instance_type": "BM.GPU.H100.8"}),
        ),
    )
    .await;
    let fabric_ref = serde_json::json!({"id": format!("oci/us-ashburn-1/{compartment}/big"), "name": "big", "cloud": "oci",
        "region": "us-ashburn-1", "zone": zone, "instance_type": "BM.GPU.H100.8", "placement": "cluster"});
    admin(
        &ep,
        "POST",
        "faults",
        Some(serde_json::json!({"service": "core", "operation": "LaunchInstance", "kind": "throttle",
        "bucket": {"burst": BURST, "per_second": PER_SECOND}})),
    );
    admin(&ep, "DELETE", "counters", None);
    let started = Instant::now();
    let cluster = apply(
        &ctx,
        &GpuCluster,
        &Value::Null,
        &value(&GpuCluster, serde_json::json!({"name": "big", "fabric": fabric_ref, "node_count": NODES})),
    )
    .await;
    let took = started.elapsed().as_secs_f64();
    let throttled = admin(&ep, "GET", "faults", None)["faults"][0]["fired"].as_u64().unwrap_or(0);
    let calls: u64 = admin(&ep, "GET", "counters", None)["counters"].as_object().unwrap().values().filter_map(|v| v.as_u64()).sum();
    let minimum = (f64::from(NODES) - BURST) / PER_SECOND;
    println!("{NODES}-node OCI apply (BM.GPU.H100.8, compute cluster) against LaunchInstance limited to {BURST} at once + {PER_SECOND}/s");
    println!("  apply:      {took:.1} s   minimum the bucket allows: {minimum:.1} s   ratio {:.2}   [bar: < 1.5]", took / minimum);
    println!("  requests:   {calls} for the apply ({NODES} launches, the rest lists and waits); throttled by the emulator: {throttled}");
    admin(&ep, "DELETE", "faults", None);
    admin(&ep, "DELETE", "counters", None);
    let mut diags = Diagnostics::new();
    let started = Instant::now();
    let ReadOutcome::Found { state, .. } = GpuCluster.read(&ctx, &cluster, &[], &mut diags).await else { panic!("the cluster vanished") };
    let refresh = started.elapsed().as_secs_f64() * 1000.0;
    let counters = admin(&ep, "GET", "counters", None)["counters"].clone();
    println!(
        "  refresh:    {:.0} ms, {} requests ({counters}); node_count read back: {}",
        refresh,
        counters.as_object().unwrap().values().filter_map(|v| v.as_u64()).sum::<u64>(),
        state.get("node_count").as_number().map(|n| n.to_string()).unwrap_or_default()
    );
    // 1024 terminations through the same 10/s would take another 100 s: the emulator is reset instead.
    admin(&ep, "POST", "reset", None);
    println!("  torn down by resetting the emulator (1024 terminations at 10/s would take another 100 s)");
}
