//! Shared helpers for the protocol tests: a CLI-like client identity, the provider process, and gRPC
//! channels over mutual TLS exactly as go-plugin's client builds them.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use hpc_provider::protocol::transport::{MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
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
