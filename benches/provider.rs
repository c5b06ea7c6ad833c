//! Provider process figures: handshake latency, peak RSS under a plan-like sequence of RPCs, and the
//! stripped binary size. Run with `./scripts/bench.sh` (or `cargo bench --bench provider`); it prints
//! figures against the project's bars and never fails a build.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use hpc_provider::framework::codec::encode_msgpack;
use hpc_provider::framework::{DataSource, Value};
use hpc_provider::protocol::go_plugin::{Empty, grpc_controller_client::GrpcControllerClient};
use hpc_provider::protocol::tfplugin6 as pb;
use hpc_provider::protocol::tfplugin6::provider_client::ProviderClient;
use hpc_provider::resources::gpu_catalog::GpuCatalog;

const RUNS: usize = 20;

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let id = common::cli_like_identity();
    let ty = GpuCatalog.schema().value_type();
    let config = Value::object([("cloud", Value::from("aws")), ("gpu", Value::from("H100")), ("instance_type", Value::Null)]);
    let mut handshakes = Vec::with_capacity(RUNS);
    let mut first_rpc = Vec::with_capacity(RUNS);
    let mut rss = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let mut p = common::spawn_provider(&id.pem);
        handshakes.push(p.handshake_time);
        let started = Instant::now();
        let ch = common::channel(p.addr, &p.server_cert_der, Some(&id)).await.unwrap();
        let mut client = ProviderClient::new(ch.clone());
        client.get_provider_schema(pb::get_provider_schema::Request {}).await.unwrap();
        first_rpc.push(started.elapsed());
        // What a plan asks of one provider process.
        for _ in 0..10 {
            let req = pb::read_data_source::Request {
                type_name: "hpc_gpu_catalog".into(),
                config: Some(pb::DynamicValue { msgpack: encode_msgpack(&config, &ty).unwrap(), json: vec![] }),
                ..Default::default()
            };
            client.read_data_source(req).await.unwrap();
        }
        rss.push(peak_rss_kib(p.child.id()).unwrap_or(0));
        GrpcControllerClient::new(ch).shutdown(Empty {}).await.unwrap();
        let _ = p.child.wait();
    }
    handshakes.sort();
    first_rpc.sort();
    rss.sort();
    let bin = env!("CARGO_BIN_EXE_terraform-provider-hpc");
    let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);
    println!("terraform-provider-hpc process figures ({RUNS} runs, {bin})");
    println!(
        "  handshake (spawn -> handshake line): median {:.2} ms, p95 {:.2} ms   [bar: < 20 ms]",
        percentile(&handshakes, 0.5).as_secs_f64() * 1e3,
        percentile(&handshakes, 0.95).as_secs_f64() * 1e3
    );
    println!(
        "  mTLS connect + GetProviderSchema:    median {:.2} ms, p95 {:.2} ms",
        percentile(&first_rpc, 0.5).as_secs_f64() * 1e3,
        percentile(&first_rpc, 0.95).as_secs_f64() * 1e3
    );
    println!(
        "  peak RSS after schema + 10 reads:    median {:.1} MiB, max {:.1} MiB   [bar: < 30 MiB]",
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0
    );
    println!("  binary size:                         {:.1} MiB   [bar: < 40 MiB stripped]", size as f64 / (1024.0 * 1024.0));
}
