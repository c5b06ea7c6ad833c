//! The plugin protocol as a CLI sees it: the real binary's handshake, mutual TLS in both directions, the
//! side services, and the RPC guarantees (diagnostics with paths, panics caught, StopProvider, limits).

mod common;

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use common::{channel, cli_like_identity, provider_command, spawn_provider};
use hpc_provider::framework::codec::{decode_msgpack, encode_msgpack};
use hpc_provider::framework::{Attribute, Block, Context, DataSource, Diagnostics, ProviderDefinition, Resource, Schema, Type, Value};
use hpc_provider::protocol::go_plugin::grpc_controller_client::GrpcControllerClient;
use hpc_provider::protocol::server::ProviderService;
use hpc_provider::protocol::tfplugin6 as pb;
use hpc_provider::protocol::tfplugin6::provider_client::ProviderClient;
use hpc_provider::protocol::transport::{self, MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, PluginEnv};
use hpc_provider::provider::HpcProvider;

fn msgpack(v: &Value, ty: &Type) -> Option<pb::DynamicValue> {
    Some(pb::DynamicValue { msgpack: encode_msgpack(v, ty).unwrap(), json: vec![] })
}

fn catalog_config(cloud: &str, gpu: Option<&str>) -> Value {
    Value::object([("cloud", Value::from(cloud)), ("gpu", Value::from(gpu)), ("instance_type", Value::Null)])
}

fn catalog_type() -> Type {
    hpc_provider::resources::gpu_catalog::GpuCatalog.schema().value_type()
}

// --------------------------------------------------------------------------------- the real binary

#[test]
fn running_by_hand_prints_a_message_and_exits_1() {
    let out = provider_command().env_remove(MAGIC_COOKIE_KEY).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing may reach stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not meant to be run directly"), "{stderr}");
}

#[test]
fn a_cli_without_protocol_6_is_refused_with_a_message() {
    let id = cli_like_identity();
    let out = provider_command()
        .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "4,5")
        .env("PLUGIN_CLIENT_CERT", &id.pem)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("speaks only version 6"));
}

#[tokio::test]
async fn the_cli_certificate_is_served_and_the_schema_describes_the_provider() {
    let id = cli_like_identity();
    let p = spawn_provider(&id.pem);
    let port = p.addr.port();
    assert!(p.addr.ip().is_loopback() && (10000..=25000).contains(&port), "{}", p.handshake_line);

    let ch = channel(p.addr, &p.server_cert_der, Some(&id)).await.expect("mTLS connection with the CLI's certificate");
    let schema = ProviderClient::new(ch).get_provider_schema(pb::get_provider_schema::Request {}).await.unwrap().into_inner();
    assert!(schema.diagnostics.is_empty());
    assert!(schema.server_capabilities.unwrap().get_provider_schema_optional);
    assert!(schema.data_source_schemas.contains_key("hpc_gpu_catalog"));
    let provider = schema.provider.unwrap().block.unwrap();
    let blocks: Vec<&str> = provider.block_types.iter().map(|b| b.type_name.as_str()).collect();
    assert_eq!(blocks, ["aws", "azure", "gcp", "oci"]);
    let aws = provider.block_types[0].block.as_ref().unwrap();
    let secret = aws.attributes.iter().find(|a| a.name == "secret_key").unwrap();
    assert!(secret.sensitive && secret.optional);
    assert_eq!(String::from_utf8_lossy(&secret.r#type), r#""string""#);
}

async fn refused(p: &common::ProviderProcess, client: Option<&common::ClientIdentity>) -> bool {
    // With TLS 1.3 the server judges the client certificate after the client has sent its Finished, so
    // the refusal shows on the first request rather than on connect.
    match channel(p.addr, &p.server_cert_der, client).await {
        Err(_) => true,
        Ok(ch) => ProviderClient::new(ch).get_provider_schema(pb::get_provider_schema::Request {}).await.is_err(),
    }
}

#[tokio::test]
async fn a_connection_without_a_client_certificate_is_refused() {
    let id = cli_like_identity();
    let p = spawn_provider(&id.pem);
    assert!(refused(&p, None).await, "served a client that presented no certificate");
    // And the rightful client is still served afterwards.
    assert!(!refused(&p, Some(&id)).await);
}

#[tokio::test]
async fn a_connection_with_another_certificate_is_refused() {
    let id = cli_like_identity();
    let intruder = cli_like_identity();
    let p = spawn_provider(&id.pem);
    assert!(refused(&p, Some(&intruder)).await, "served a client with a different certificate");
    assert!(!refused(&p, Some(&id)).await);
}

#[tokio::test]
async fn health_says_serving_and_optional_rpcs_answer_unimplemented() {
    let id = cli_like_identity();
    let p = spawn_provider(&id.pem);
    let ch = channel(p.addr, &p.server_cert_der, Some(&id)).await.unwrap();
    let health = tonic_health::pb::health_client::HealthClient::new(ch.clone())
        .check(tonic_health::pb::HealthCheckRequest { service: "plugin".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    let mut client = ProviderClient::new(ch);
    let status = client.move_resource_state(pb::move_resource_state::Request::default()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    // Every managed resource has an identity: cloud, location, compartment (OCI) and name.
    let identities = client.get_resource_identity_schemas(pb::get_resource_identity_schemas::Request {}).await.unwrap().into_inner();
    let mut types: Vec<&str> = identities.identity_schemas.keys().map(String::as_str).collect();
    types.sort_unstable();
    assert_eq!(types, ["hpc_gpu_cluster", "hpc_gpu_fabric", "hpc_parallel_filesystem", "hpc_slurm_cluster"]);
    let fabric = &identities.identity_schemas["hpc_gpu_fabric"];
    let attrs: Vec<(&str, bool)> = fabric.identity_attributes.iter().map(|a| (a.name.as_str(), a.required_for_import)).collect();
    assert_eq!(attrs, [("cloud", true), ("location", true), ("compartment_id", false), ("name", true)]);
}

async fn call(client: &mut ProviderClient<tonic::transport::Channel>, name: &str, args: &[(Value, Type)]) -> pb::call_function::Response {
    let arguments = args.iter().map(|(v, t)| msgpack(v, t).unwrap()).collect();
    client.call_function(pb::call_function::Request { name: name.into(), arguments }).await.unwrap().into_inner()
}

#[tokio::test]
async fn functions_are_declared_and_called_with_errors_at_their_argument() {
    let id = cli_like_identity();
    let p = spawn_provider(&id.pem);
    let mut client = ProviderClient::new(channel(p.addr, &p.server_cert_der, Some(&id)).await.unwrap());
    let declared = client.get_functions(pb::get_functions::Request {}).await.unwrap().into_inner();
    let mut names: Vec<&str> = declared.functions.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["lustre_capacity", "nccl_verdict", "node_type"]);
    let lustre = &declared.functions["lustre_capacity"];
    let params: Vec<&str> = lustre.parameters.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(params, ["cloud", "throughput_per_tib", "at_least_gib"]);
    assert!(lustre.parameters.iter().all(|p| !p.allow_null_value && !p.allow_unknown_values));
    assert_eq!(String::from_utf8_lossy(&lustre.r#return.as_ref().unwrap().r#type), r#""number""#);
    // The schema carries the same declarations (CLIs read them from there).
    let schema = client.get_provider_schema(pb::get_provider_schema::Request {}).await.unwrap().into_inner();
    assert_eq!(schema.functions.len(), 3);

    let args = [(Value::from("gcp"), Type::String), (Value::int(500), Type::Number), (Value::int(30000), Type::Number)];
    let ok = call(&mut client, "lustre_capacity", &args).await;
    assert!(ok.error.is_none(), "{:?}", ok.error);
    assert_eq!(decode_msgpack(&ok.result.unwrap().msgpack, &Type::Number).unwrap(), Value::int(36000));
    let bad = call(&mut client, "lustre_capacity", &[args[0].clone(), (Value::int(600), Type::Number), args[2].clone()]).await;
    let e = bad.error.unwrap();
    assert_eq!(e.function_argument, Some(1));
    assert!(e.text.contains("valid values are 125, 250, 500, 1000") && !e.text.ends_with('.'), "{}", e.text);
    let unknown = call(&mut client, "lustre_size", &args).await;
    assert!(unknown.error.unwrap().text.contains("\"lustre_capacity\", \"nccl_verdict\" or \"node_type\""));
    let short = call(&mut client, "node_type", &args[..1]).await;
    assert!(short.error.unwrap().text.contains("node_type takes 2 arguments, not 1"));
}

#[tokio::test]
async fn write_only_arguments_are_refused_to_a_cli_without_them_and_never_planned() {
    let id = cli_like_identity();
    let p = spawn_provider(&id.pem);
    let mut client = ProviderClient::new(channel(p.addr, &p.server_cert_der, Some(&id)).await.unwrap());
    let schema = client.get_provider_schema(pb::get_provider_schema::Request {}).await.unwrap().into_inner();
    let cluster = schema.resource_schemas["hpc_gpu_cluster"].block.as_ref().unwrap();
    let wo = cluster.attributes.iter().find(|a| a.name == "user_data_wo").unwrap();
    assert!(wo.write_only && wo.optional && !wo.computed);
    let ty = hpc_provider::resources::gpu_cluster::schema().value_type();
    let Type::Object(attrs) = &ty else { panic!() };
    let mut config: std::collections::BTreeMap<String, Value> = attrs.keys().map(|k| (k.clone(), Value::Null)).collect();
    for (k, v) in [
        ("name", "c"),
        ("cloud", "aws"),
        ("region", "us-east-1"),
        ("zone", "us-east-1a"),
        ("gpu", "L4"),
        ("user_data_wo", "#!/bin/sh\nsecret\n"),
    ] {
        config.insert(k.into(), Value::from(v));
    }
    config.insert("node_count".into(), Value::int(1));
    config.insert("user_data_wo_version".into(), Value::int(1));
    let config = Value::Map(config);
    let validate = |caps: Option<pb::ClientCapabilities>| pb::validate_resource_config::Request {
        type_name: "hpc_gpu_cluster".into(),
        config: msgpack(&config, &ty),
        client_capabilities: caps,
    };
    let old = client.validate_resource_config(validate(None)).await.unwrap().into_inner();
    assert_eq!(old.diagnostics.len(), 1, "{:?}", old.diagnostics);
    assert_eq!(old.diagnostics[0].summary, "Write-only argument not supported by this CLI");
    let caps = pb::ClientCapabilities { write_only_attributes_allowed: true, ..Default::default() };
    let new = client.validate_resource_config(validate(Some(caps))).await.unwrap().into_inner();
    assert!(new.diagnostics.is_empty(), "{:?}", new.diagnostics);
    // The plan takes the value from the configuration and never returns it.
    let plan = client
        .plan_resource_change(pb::plan_resource_change::Request {
            type_name: "hpc_gpu_cluster".into(),
            prior_state: msgpack(&Value::Null, &ty),
            proposed_new_state: msgpack(&config, &ty),
            config: msgpack(&config, &ty),
            client_capabilities: Some(caps),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(plan.diagnostics.iter().all(|d| d.severity != pb::diagnostic::Severity::Error as i32), "{:?}", plan.diagnostics);
    let planned = decode_msgpack(&plan.planned_state.unwrap().msgpack, &ty).unwrap();
    assert!(planned.get("user_data_wo").is_null(), "{planned:?}");
    assert_eq!(planned.get("user_data_wo_version"), &Value::int(1));
    let expansion = format!("{:?}", planned.get("expansion"));
    assert!(expansion.contains("write-only (not stored)") && !expansion.contains("secret"), "{expansion}");
}

#[tokio::test]
async fn controller_shutdown_ends_the_process_promptly() {
    let id = cli_like_identity();
    let mut p = spawn_provider(&id.pem);
    let ch = channel(p.addr, &p.server_cert_der, Some(&id)).await.unwrap();
    // Keep the stdio stream open the way go-plugin does; shutdown must still be quick.
    let mut stdio = hpc_provider::protocol::go_plugin::grpc_stdio_client::GrpcStdioClient::new(ch.clone())
        .stream_stdio(hpc_provider::protocol::go_plugin::Empty {})
        .await
        .unwrap()
        .into_inner();
    let started = Instant::now();
    GrpcControllerClient::new(ch).shutdown(hpc_provider::protocol::go_plugin::Empty {}).await.unwrap();
    let status = loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_millis(1500), "provider still running after Shutdown");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success());
    assert!(stdio.message().await.map(|m| m.is_none()).unwrap_or(true), "stdio stream must end, not carry data");
}

// ----------------------------------------------------------------------------------- in-process

/// A provider with the real configuration and catalog plus two test data sources.
struct TestProvider;

struct Panics;
struct WaitsForStop;

fn test_schema() -> Schema {
    Schema::new(0, Block::new("test").attribute(Attribute::optional("input", Type::String, "x")))
}

#[async_trait]
impl DataSource for Panics {
    fn type_name(&self) -> &'static str {
        "test_panics"
    }
    fn schema(&self) -> Schema {
        test_schema()
    }
    async fn read(&self, _: &Context, _: &Value, _: &mut Diagnostics) -> Value {
        let v: Vec<u8> = Vec::new();
        let index = v.len() + 3;
        Value::int(i64::from(v[index])) // out of bounds: a bug
    }
}

#[async_trait]
impl DataSource for WaitsForStop {
    fn type_name(&self) -> &'static str {
        "test_waits"
    }
    fn schema(&self) -> Schema {
        test_schema()
    }
    async fn read(&self, ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Value {
        tokio::select! {
            () = ctx.cancelled() => diags.error("Cancelled", "StopProvider was received while waiting."),
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
        }
        config.clone()
    }
}

impl ProviderDefinition for TestProvider {
    fn schema(&self) -> Schema {
        HpcProvider.schema()
    }
    fn validate_config(&self, config: &Value, diags: &mut Diagnostics) {
        HpcProvider.validate_config(config, diags)
    }
    fn configure(&self, config: &Value, v: &str, diags: &mut Diagnostics) -> Option<Arc<dyn Any + Send + Sync>> {
        HpcProvider.configure(config, v, diags)
    }
    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        let mut all = HpcProvider.data_sources();
        all.push(Arc::new(Panics));
        all.push(Arc::new(WaitsForStop));
        all
    }
    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        Vec::new()
    }
}

async fn in_process() -> (ProviderClient<tonic::transport::Channel>, transport::RunningServer) {
    let id = cli_like_identity();
    let env = PluginEnv { client_cert_pem: id.pem.clone(), min_port: 0, max_port: 0 };
    let server = transport::start(ProviderService::new(Arc::new(TestProvider)), &env).await.unwrap();
    let ch = channel(server.addr, &server.cert_der, Some(&id)).await.unwrap();
    (ProviderClient::new(ch), server)
}

fn read_request(type_name: &str, config: Value, ty: &Type) -> pb::read_data_source::Request {
    pb::read_data_source::Request { type_name: type_name.into(), config: msgpack(&config, ty), ..Default::default() }
}

#[tokio::test]
async fn catalog_read_over_grpc_returns_msgpack_state() {
    let (mut client, _server) = in_process().await;
    let resp = client
        .read_data_source(read_request("hpc_gpu_catalog", catalog_config("azure", Some("H100")), &catalog_type()))
        .await
        .unwrap()
        .into_inner();
    assert!(resp.diagnostics.is_empty(), "{:?}", resp.diagnostics);
    let state = decode_msgpack(&resp.state.unwrap().msgpack, &catalog_type()).unwrap();
    let first = &state.get("instance_types").as_list().unwrap()[0];
    assert_eq!(first.get("name").as_str(), Some("Standard_ND96isr_H100_v5"));
    assert_eq!(first.get("rdma_fabric").as_str(), Some("infiniband"));
}

#[tokio::test]
async fn bad_input_is_a_diagnostic_with_an_attribute_path() {
    let (mut client, _server) = in_process().await;
    let resp = client
        .read_data_source(read_request("hpc_gpu_catalog", catalog_config("aws", Some("H900")), &catalog_type()))
        .await
        .unwrap()
        .into_inner();
    assert!(resp.state.is_none());
    let d = &resp.diagnostics[0];
    assert_eq!(d.severity, pb::diagnostic::Severity::Error as i32);
    assert_eq!(d.summary, "Unsupported GPU model");
    assert!(d.detail.contains(r#""A10G", "B200", "B300", "GB200", "H100", "H200", "L4" or "L40S""#), "{}", d.detail);
    let step = &d.attribute.as_ref().unwrap().steps[0];
    assert_eq!(step.selector, Some(pb::attribute_path::step::Selector::AttributeName("gpu".into())));

    // Provider configuration: the path names the block and the attribute.
    let ty = HpcProvider.schema().value_type();
    let config = Value::object([("aws", Value::object([("endpoint", Value::from("localhost:4566"))]))]);
    let resp = client
        .validate_provider_config(pb::validate_provider_config::Request { config: msgpack(&config, &ty) })
        .await
        .unwrap()
        .into_inner();
    let d = &resp.diagnostics[0];
    assert_eq!(d.summary, "Invalid endpoint");
    let names: Vec<_> = d.attribute.as_ref().unwrap().steps.iter().map(|s| s.selector.clone().unwrap()).collect();
    use pb::attribute_path::step::Selector::AttributeName;
    assert_eq!(names, [AttributeName("aws".into()), AttributeName("endpoint".into())]);
}

#[tokio::test]
async fn unknown_types_and_undecodable_values_are_diagnostics_not_grpc_errors() {
    let (mut client, _server) = in_process().await;
    let resp = client
        .read_data_source(read_request("hpc_gpu_catalogue", catalog_config("aws", None), &catalog_type()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.diagnostics[0].summary, "Unknown data source type");
    assert!(resp.diagnostics[0].detail.contains("\"hpc_gpu_catalog\""));

    let garbage = pb::read_data_source::Request {
        type_name: "hpc_gpu_catalog".into(),
        config: Some(pb::DynamicValue { msgpack: vec![0x83, 0xa5, b'c', b'l'], json: vec![] }),
        ..Default::default()
    };
    let resp = client.read_data_source(garbage).await.unwrap().into_inner();
    assert_eq!(resp.diagnostics[0].summary, "Invalid value from the CLI");
}

#[tokio::test]
async fn a_panic_becomes_a_provider_bug_diagnostic_and_serving_continues() {
    let (mut client, _server) = in_process().await;
    let resp = client.read_data_source(read_request("test_panics", Value::Null, &test_schema().value_type())).await.unwrap().into_inner();
    let d = &resp.diagnostics[0];
    assert_eq!(d.summary, "Provider bug: internal error");
    assert!(d.detail.contains("ReadDataSource") && d.detail.contains("index out of bounds"), "{}", d.detail);
    let again =
        client.read_data_source(read_request("hpc_gpu_catalog", catalog_config("gcp", None), &catalog_type())).await.unwrap().into_inner();
    assert!(again.diagnostics.is_empty());
}

#[tokio::test]
async fn stop_provider_cancels_in_flight_work_within_a_second() {
    let (client, _server) = in_process().await;
    let mut reader = client.clone();
    let waiting = tokio::spawn(async move {
        reader.read_data_source(read_request("test_waits", Value::Null, &test_schema().value_type())).await.unwrap().into_inner()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let stop = client.clone().stop_provider(pb::stop_provider::Request {}).await.unwrap().into_inner();
    assert_eq!(stop.error, "");
    let resp = tokio::time::timeout(Duration::from_secs(1), waiting).await.expect("in-flight read not cancelled within 1 s").unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(resp.diagnostics[0].summary, "Cancelled");
}

#[tokio::test]
async fn messages_over_the_default_4_mib_limit_are_accepted() {
    let (mut client, _server) = in_process().await;
    let big = "x".repeat(6 << 20);
    let config = Value::object([("input", Value::from(big))]);
    let resp = client
        .validate_data_resource_config(pb::validate_data_resource_config::Request {
            type_name: "test_waits".into(),
            config: msgpack(&config, &test_schema().value_type()),
        })
        .await
        .expect("6 MiB request refused");
    assert!(resp.into_inner().diagnostics.is_empty());
}
