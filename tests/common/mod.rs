//! Shared helpers for the test binaries (each takes what it needs through `mod common;`):
//!
//! - for the protocol tests: a CLI-like client identity, the provider process, and gRPC channels over
//!   mutual TLS exactly as go-plugin's client builds them;
//! - for the per-cloud integration tests (aws, azure, oci): a configured provider's [`Context`], resource
//!   values from JSON, and plan/apply, destroy, read and import called the way the CLI calls them.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Value};
use hpc_provider::protocol::transport::{MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::Value as Json;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};

/// A client identity like the CLI's AutoMTLS one: ECDSA P-521, self-signed, CA:true.
pub struct ClientIdentity {
    pub pem: String,
    pub der: Vec<u8>,
    pub key_der: Vec<u8>,
}

pub fn cli_like_identity() -> ClientIdentity {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "HashiCorp");
    params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    let cert = params.self_signed(&key).unwrap();
    ClientIdentity { pem: cert.pem(), der: cert.der().to_vec(), key_der: key.serialize_der() }
}

/// The provider binary started the way the CLI starts it.
pub struct ProviderProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub server_cert_der: Vec<u8>,
    pub handshake_line: String,
    pub handshake_time: Duration,
}

impl Drop for ProviderProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn provider_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_terraform-provider-hpc"))
}

pub fn spawn_provider(client_pem: &str) -> ProviderProcess {
    let started = Instant::now();
    let mut child = provider_command()
        .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .env("PLUGIN_CLIENT_CERT", client_pem)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start provider");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let handshake_time = started.elapsed();
    let line = line.trim_end().to_owned();
    let parts: Vec<&str> = line.split('|').collect();
    assert_eq!(parts.len(), 6, "handshake line {line:?}");
    assert_eq!(&parts[..3], ["1", "6", "tcp"], "{line}");
    assert_eq!(parts[4], "grpc");
    let addr: SocketAddr = parts[3].parse().unwrap();
    assert!(addr.ip().is_loopback(), "the provider must listen on 127.0.0.1 only, not {addr}");
    let server_cert_der = base64::engine::general_purpose::STANDARD_NO_PAD.decode(parts[5]).expect("cert is unpadded standard base64");
    ProviderProcess { child, addr, server_cert_der, handshake_line: line, handshake_time }
}

/// A gRPC channel to the provider over TLS that trusts exactly the announced server certificate and
/// presents `client` (or no certificate at all).
pub async fn channel(
    addr: SocketAddr,
    server_cert_der: &[u8],
    client: Option<&ClientIdentity>,
) -> Result<Channel, tonic::transport::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(server_cert_der.to_vec())).unwrap();
    let builder =
        rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap().with_root_certificates(roots);
    let mut config = match client {
        Some(id) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from(id.der.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(id.key_der.clone())),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(5))
        .connect_with_connector(tower::service_fn(move |_| {
            let connector = connector.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        }))
        .await
}

// The provider's resources called directly, as the per-cloud integration tests drive them.

/// The context of a provider configured with `provider`, the provider block as JSON
/// (`{"aws": {...}, "default_tags": {...}}`).
pub fn provider_context(provider: Json) -> Context {
    let config = decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&config, "test"))))
}

/// User data carrying the boot-time self-check as `data "hpc_gpu_selfcheck"` opens it, for clusters whose
/// rolling updates wait for its verdict (the plan refuses to wait for a self-check the nodes do not run);
/// the tests publish the verdicts themselves.
pub fn selfcheck_user_data() -> String {
    format!("#!/bin/bash\n{} (data \"hpc_gpu_selfcheck\").\n", hpc_provider::clouds::user_data::SELFCHECK_MARKER)
}

/// A configuration (or state) of `resource`, written as JSON.
pub fn value(resource: &dyn Resource, json: Json) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).unwrap()
}

/// Diagnostics as `summary: detail` lines.
pub fn lines(diags: &Diagnostics) -> Vec<String> {
    diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect()
}

/// The diagnostic line that starts with `summary` (e.g. "Creating the cluster failed"); panics, listing
/// them all, when there is none.
pub fn diagnostic<'a>(diags: &'a [String], summary: &str) -> &'a str {
    diags.iter().find(|d| d.starts_with(summary)).unwrap_or_else(|| panic!("no {summary:?} in {diags:?}"))
}

/// Plans and applies as the CLI would; returns the new state and the diagnostics as `summary: detail`.
pub async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    (out.new_state, lines(&diags))
}

/// Destroys `state` as the CLI would; asserts that nothing is left in state and no error was reported.
pub async fn destroy(ctx: &Context, resource: &dyn Resource, state: &Value) {
    let mut d = Diagnostics::new();
    let out = resource.apply(ctx, ApplyRequest { prior: state, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
    assert!(out.new_state.is_null(), "{} not destroyed: {:?}", resource.type_name(), lines(&d));
    assert!(!d.has_errors(), "destroying the {}: {:?}", resource.type_name(), lines(&d));
}

/// Refreshes `state`: what the read found and its diagnostics.
pub async fn read(ctx: &Context, resource: &dyn Resource, state: &Value) -> (ReadOutcome, Diagnostics) {
    let mut d = Diagnostics::new();
    let outcome = resource.read(ctx, state, &[], &mut d).await;
    (outcome, d)
}

/// Refreshes `state`; panics when the object is gone.
pub async fn read_found(ctx: &Context, resource: &dyn Resource, state: &Value) -> Value {
    match read(ctx, resource, state).await {
        (ReadOutcome::Found { state, .. }, _) => state,
        (ReadOutcome::Gone, d) => panic!("the {} is gone: {:?}", resource.type_name(), lines(&d)),
    }
}

/// Imports `id`: the state, if any, and the diagnostics as `summary: detail`.
pub async fn try_import(ctx: &Context, resource: &dyn Resource, id: &str) -> (Option<Value>, Vec<String>) {
    let mut d = Diagnostics::new();
    let imported = resource.import(ctx, id, &mut d).await;
    (imported, lines(&d))
}

/// Imports `id`; panics, with the diagnostics, when nothing is imported.
pub async fn import(ctx: &Context, resource: &dyn Resource, id: &str) -> (Value, Vec<String>) {
    let (imported, diags) = try_import(ctx, resource, id).await;
    (imported.unwrap_or_else(|| panic!("{} {id} not imported: {diags:?}", resource.type_name())), diags)
}

/// Imports `id` and refreshes it, as `terraform import` does.
pub async fn import_and_read(ctx: &Context, resource: &dyn Resource, id: &str) -> Value {
    let (imported, _) = import(ctx, resource, id).await;
    match read(ctx, resource, &imported).await {
        (ReadOutcome::Found { state, .. }, _) => state,
        (ReadOutcome::Gone, _) => panic!("{id} gone after import"),
    }
}

/// A cluster's `node_names`.
pub fn node_names(state: &Value) -> Vec<String> {
    state.get("node_names").as_list().unwrap_or_default().iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}
