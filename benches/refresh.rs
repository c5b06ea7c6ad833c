//! What a refresh of a cluster costs as it grows, on AWS (moto + our extension), Google Cloud, Azure and OCI
//! (our emulators): the provider's own ReadResource for the fabric, the cluster and the filesystem, counting the
//! API requests the emulator served (its admin counters) and timing them. The bar: the same number of
//! calls at 8 nodes as at 64. Needs the moto virtualenv (`HPC_MOTO_PYTHON`, which `./scripts/bench.sh`
//! sets). Prints figures.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
use tokio_util::sync::CancellationToken;

fn value(resource: &dyn Resource, json: serde_json::Value) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).expect("valid configuration")
}

/// Plans and applies `config` over `prior`, as the CLI would; returns the new state.
async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> Value {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    assert!(!diags.has_errors(), "{:?}", diags.iter().collect::<Vec<_>>());
    out.new_state
}

async fn read(ctx: &Context, resource: &dyn Resource, state: &Value) {
    let mut diags = Diagnostics::new();
    match resource.read(ctx, state, &[], &mut diags).await {
        ReadOutcome::Found { .. } => {}
        ReadOutcome::Gone => panic!("{} vanished", resource.type_name()),
    }
    assert!(!diags.has_errors());
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    aws().await;
    gcp().await;
    azure().await;
    oci().await;
}

/// Refreshes fabric, cluster and filesystem at 8 and at 64 nodes; prints the calls and time of each.
async fn measure(ctx: &Context, ep: &str, fabric: &Value, filesystem: &Value, cluster_config: impl Fn(u32) -> Value) -> Value {
    measure_with(ctx, &|method, route| admin(ep, method, route, None), fabric, filesystem, cluster_config).await
}

async fn measure_with(
    ctx: &Context,
    admin: &dyn Fn(&str, &str) -> serde_json::Value,
    fabric: &Value,
    filesystem: &Value,
    cluster_config: impl Fn(u32) -> Value,
) -> Value {
    println!("{:>6} {:>8} {:>10} {:>12} {:>10}  refresh calls by operation", "nodes", "refresh", "time", "apply calls", "apply time");
    let mut cluster = Value::Null;
    let mut totals = Vec::new();
    for nodes in [8u32, 64] {
        // The apply: a create of 8 nodes, then a scale from 8 to 64.
        admin("DELETE", "counters");
        let started = Instant::now();
        cluster = apply(ctx, &GpuCluster, &cluster, &cluster_config(nodes)).await;
        let apply_took = started.elapsed();
        let applied: BTreeMap<String, u64> = serde_json::from_value(admin("GET", "counters")["counters"].clone()).unwrap();
        let apply_calls: u64 = applied.values().sum();
        admin("DELETE", "counters");
        let started = Instant::now();
        read(ctx, &GpuFabric, fabric).await;
        read(ctx, &GpuCluster, &cluster).await;
        read(ctx, &ParallelFilesystem, filesystem).await;
        let took = started.elapsed();
        let counters: BTreeMap<String, u64> = serde_json::from_value(admin("GET", "counters")["counters"].clone()).unwrap();
        let total: u64 = counters.values().sum();
        totals.push(total);
        let detail: Vec<String> = counters.iter().map(|(op, n)| format!("{op}={n}")).collect();
        println!(
            "{nodes:>6} {total:>8} {:>8.1}ms {apply_calls:>12} {:>9.2}s  {}",
            took.as_secs_f64() * 1000.0,
            apply_took.as_secs_f64(),
            detail.join(" ")
        );
    }
    println!(
        "refresh calls at 64 nodes / at 8 nodes: {:.2} (1.00 means O(1) in the node count); apply calls: the create of 8, then the scale 8 -> 64",
        totals[1] as f64 / totals[0] as f64
    );
    cluster
}

async fn destroy(ctx: &Context, states: [(&dyn Resource, &Value); 3]) {
    let mut diags = Diagnostics::new();
    for (resource, state) in states {
        resource.apply(ctx, ApplyRequest { prior: state, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut diags).await;
    }
    assert!(!diags.has_errors(), "{:?}", diags.iter().collect::<Vec<_>>());
}

async fn gcp() {
    let ep = start_gcp();
    let provider = serde_json::json!({"gcp": {"project": "bench", "endpoint": ep}});
    let provider_value =
        decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).expect("provider configuration");
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&provider_value, "bench"))));
    let fabric_ref = serde_json::json!({"id": "gcp/us-central1-a/bench", "name": "bench", "cloud": "gcp", "region": "us-central1",
        "zone": "us-central1-a", "instance_type": "a3-megagpu-8g", "placement": "cluster"});
    let fabric = apply(
        &ctx,
        &GpuFabric,
        &Value::Null,
        &value(&GpuFabric, serde_json::json!({"name": "bench", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-megagpu-8g"})),
    )
    .await;
    let fs_config = value(
        &ParallelFilesystem,
        serde_json::json!({"name": "benchfs", "fabric": fabric_ref, "capacity_gib": 36000, "throughput_per_tib": 500}),
    );
    let filesystem = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config).await;
    println!();
    println!("refresh of fabric + cluster + filesystem on the Google Cloud emulator (a3-megagpu-8g, 9 NICs per node, Managed Lustre)");
    let cluster = measure(&ctx, &ep, &fabric, &filesystem, |n| {
        value(&GpuCluster, serde_json::json!({"name": "bench", "fabric": fabric_ref, "node_count": n}))
    })
    .await;
    destroy(&ctx, [(&ParallelFilesystem, &filesystem), (&GpuCluster, &cluster), (&GpuFabric, &fabric)]).await;
    println!("destroyed; emulator inventory empty: {}", admin(&ep, "GET", "inventory", None)["empty"]);
}

async fn aws() {
    let emulator = start_aws();
    let ep = emulator.endpoint.clone();
    let provider = serde_json::json!({"aws": {"region": "us-east-1", "endpoint": ep, "access_key": "bench", "secret_key": "bench"}});
    let provider_value =
        decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).expect("provider configuration");
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&provider_value, "bench"))));

    let fabric_ref = serde_json::json!({"id": "aws/us-east-1/bench", "name": "bench", "cloud": "aws", "region": "us-east-1",
        "zone": "us-east-1a", "instance_type": "p5.48xlarge", "placement": "cluster"});
    let fabric = apply(
        &ctx,
        &GpuFabric,
        &Value::Null,
        &value(&GpuFabric, serde_json::json!({"name": "bench", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5.48xlarge"})),
    )
    .await;
    let fs_config = value(
        &ParallelFilesystem,
        serde_json::json!({"name": "benchfs", "fabric": fabric_ref, "capacity_gib": 4800, "throughput_per_tib": 1000}),
    );
    let filesystem = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config).await;

    println!("refresh of fabric + cluster + filesystem on the AWS emulator (p5.48xlarge, 32 EFA interfaces per node)");
    let cluster = measure(&ctx, &ep, &fabric, &filesystem, |n| {
        value(&GpuCluster, serde_json::json!({"name": "bench", "fabric": fabric_ref, "node_count": n, "image": "ami-12c6146b"}))
    })
    .await;
    destroy(&ctx, [(&ParallelFilesystem, &filesystem), (&GpuCluster, &cluster), (&GpuFabric, &fabric)]).await;
    println!("destroyed; emulator inventory empty: {}", admin(&ep, "GET", "inventory", None)["empty"]);
}

async fn azure() {
    let (ep, pem) = start_azure();
    // The emulator's self-signed certificate, trusted the way the provider documents it.
    // SAFETY: set before any Azure client reads it; nothing else reads or writes this variable.
    unsafe { std::env::set_var("HPC_AZURE_CA_FILE", &pem) };
    let provider = serde_json::json!({"azure": {"subscription_id": "00000000-0000-0000-0000-00000000be0c", "endpoint": ep}});
    let provider_value =
        decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).expect("provider configuration");
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&provider_value, "bench"))));
    let fabric_ref = serde_json::json!({"id": "azure/bench-rg/bench", "name": "bench", "cloud": "azure", "region": "eastus",
        "zone": null, "instance_type": "Standard_ND96isr_H100_v5", "placement": "cluster"});
    let fabric = apply(
        &ctx,
        &GpuFabric,
        &Value::Null,
        &value(
            &GpuFabric,
            serde_json::json!({"name": "bench", "cloud": "azure", "region": "eastus", "instance_type": "Standard_ND96isr_H100_v5"}),
        ),
    )
    .await;
    let fs_config = value(
        &ParallelFilesystem,
        serde_json::json!({"name": "benchfs", "fabric": fabric_ref, "capacity_gib": 8192, "throughput_per_tib": 500}),
    );
    let filesystem = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config).await;
    println!();
    println!("refresh of fabric + cluster + filesystem on the Azure Resource Manager emulator (ND96isr H100 v5 scale sets, AMLFS)");
    let admin = |method: &str, route: &str| azure_admin(&ep, &pem, method, route, None);
    let cluster = measure_with(&ctx, &admin, &fabric, &filesystem, |n| {
        value(&GpuCluster, serde_json::json!({"name": "bench", "fabric": fabric_ref, "node_count": n}))
    })
    .await;
    destroy(&ctx, [(&ParallelFilesystem, &filesystem), (&GpuCluster, &cluster), (&GpuFabric, &fabric)]).await;
    println!("destroyed; emulator inventory empty: {}", admin("GET", "inventory")["empty"]);
}

async fn oci() {
    let (ep, key) = start_oci();
    let compartment = "ocid1.compartment.oc1..bench";
    let provider = serde_json::json!({"oci": {"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint,
        "private_key": key.private_key_pem, "region": "us-ashburn-1", "endpoint": ep}});
    let provider_value =
        decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).expect("provider configuration");
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&provider_value, "bench"))));
    let zone = "Uocm:US-ASHBURN-AD-1";
    let fabric_ref = serde_json::json!({"id": format!("oci/us-ashburn-1/{compartment}/bench"), "name": "bench", "cloud": "oci",
        "region": "us-ashburn-1", "zone": zone, "instance_type": "BM.GPU.H100.8", "placement": "cluster"});
    let fabric_config = serde_json::json!({"name": "bench", "cloud": "oci", "region": "us-ashburn-1", "zone": zone,
        "compartment_id": compartment, "instance_type": "BM.GPU.H100.8"});
    let fabric = apply(&ctx, &GpuFabric, &Value::Null, &value(&GpuFabric, fabric_config)).await;
    let fs_config = value(
        &ParallelFilesystem,
        serde_json::json!({"name": "benchfs", "fabric": fabric_ref, "capacity_gib": 31200, "throughput_per_tib": 500}),
    );
    let filesystem = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config).await;
    println!();
    println!("refresh of fabric + cluster + filesystem on the OCI emulator (BM.GPU.H100.8 in a compute cluster, File Storage with Lustre)");
    let cluster = measure(&ctx, &ep, &fabric, &filesystem, |n| {
        value(&GpuCluster, serde_json::json!({"name": "bench", "fabric": fabric_ref, "node_count": n}))
    })
    .await;
    destroy(&ctx, [(&ParallelFilesystem, &filesystem), (&GpuCluster, &cluster), (&GpuFabric, &fabric)]).await;
    println!("destroyed; emulator inventory empty: {}", admin(&ep, "GET", "inventory", None)["empty"]);
}
