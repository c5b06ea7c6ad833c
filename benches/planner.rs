//! Planner CPU time per cluster as the node count grows (1 to 8192 nodes), per cloud: the full
//! PlanResourceChange path of `hpc_gpu_cluster` (parse, validate, expand, encode-ready values). Prints
//! figures; `./scripts/bench.sh` runs it.

use std::hint::black_box;
use std::time::Instant;

use hpc_provider::framework::codec::{decode_json, encode_msgpack};
use hpc_provider::framework::{Context, Diagnostics, PlanRequest, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use tokio_util::sync::CancellationToken;

fn config(cloud: &str, region: &str, zone: Option<&str>, instance_type: &str, nodes: u32) -> Value {
    // A GCP compact placement policy holds at most 1500 VMs; larger GCP clusters plan without one.
    let placement = if cloud == "gcp" && nodes > 1500 { "none" } else { "cluster" };
    let json = serde_json::json!({
        "name": "train", "node_count": nodes,
        "fabric": {"name": "train", "cloud": cloud, "region": region, "zone": zone, "instance_type": instance_type, "placement": placement}
    });
    decode_json(json.to_string().as_bytes(), &GpuCluster.schema().value_type()).unwrap()
}

fn main() {
    let ctx = Context::new(CancellationToken::new(), None);
    let ty = GpuCluster.schema().value_type();
    let families = [
        ("aws", "us-east-1", Some("us-east-1a"), "p5.48xlarge"),
        ("azure", "eastus", None, "Standard_ND96isr_H100_v5"),
        ("gcp", "us-central1", Some("us-central1-a"), "a3-megagpu-8g"),
        ("oci", "us-ashburn-1", Some("AD-1"), "BM.GPU.H100.8"),
    ];
    println!("planner: hpc_gpu_cluster PlanResourceChange (plan + msgpack encode), per cluster");
    println!("{:<8}{:>8}{:>14}{:>16}", "cloud", "nodes", "µs/plan", "µs/node");
    for (cloud, region, zone, sku) in families {
        for nodes in [1u32, 8, 64, 1024, 8192] {
            let cfg = config(cloud, region, zone, sku, nodes);
            let iterations = if nodes >= 1024 { 200 } else { 2000 };
            let started = Instant::now();
            for _ in 0..iterations {
                let mut diags = Diagnostics::new();
                let resp = GpuCluster.plan(
                    &ctx,
                    PlanRequest { prior: &Value::Null, proposed: &cfg, config: &cfg, prior_private: &[] },
                    &mut diags,
                );
                assert!(!diags.has_errors(), "{cloud} {nodes}: {diags:?}");
                black_box(encode_msgpack(&resp.planned, &ty).unwrap());
            }
            let per_plan = started.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
            println!("{cloud:<8}{nodes:>8}{per_plan:>14.1}{:>16.3}", per_plan / f64::from(nodes));
        }
    }
}
