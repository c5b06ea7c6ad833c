//! go-plugin transport: environment checks, the 127.0.0.1 listener, mutual TLS pinned to the CLI's
//! certificate, the handshake line, and the side services (controller, stdio, health).
//!
//! Mutual TLS here is really mutual: the CLI hands us its client certificate in `PLUGIN_CLIENT_CERT`, and a
//! connection that does not present exactly that certificate (and prove it holds its key) is refused.
//! The CLI's certificate is ECDSA P-521 with CA:true, so ordinary WebPKI chain validation cannot be used
//! (it refuses a CA as end entity); the verifier below pins the DER and checks the handshake signature.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use base64::Engine;
use futures::{Stream, StreamExt};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status};

use super::go_plugin as gp;
use super::server::ProviderService;
use super::tfplugin6::provider_server::ProviderServer;

pub const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
pub const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
pub const PROTOCOL_VERSION: u32 = 6;
/// The Go SDK's limit; tonic would otherwise refuse messages over 4 MiB (large clusters' states).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// What the CLI told us through the environment.
#[derive(Debug, Clone)]
pub struct PluginEnv {
    pub client_cert_pem: String,
    pub min_port: u16,
    pub max_port: u16,
}

/// Checks the go-plugin environment. The error text is meant for a person who ran the binary by hand.
pub fn plugin_env(get: impl Fn(&str) -> Option<String>) -> Result<PluginEnv, String> {
    if get(MAGIC_COOKIE_KEY).as_deref() != Some(MAGIC_COOKIE_VALUE) {
        return Err("This binary is a plugin for OpenTofu and Terraform. It is not meant to be run directly: \
             put it where the CLI finds providers (see the README: dev_overrides or a filesystem mirror) and run \
             `tofu plan` or `terraform plan` instead."
            .into());
    }
    if let Some(versions) = get("PLUGIN_PROTOCOL_VERSIONS") {
        let offered: Vec<&str> = versions.split(',').map(str::trim).collect();
        if !offered.contains(&PROTOCOL_VERSION.to_string().as_str()) {
            return Err(format!(
                "The CLI offers plugin protocol versions {versions}, but this provider speaks only version {PROTOCOL_VERSION} \
                 (OpenTofu >= 1.0, Terraform >= 1.0). Upgrade the CLI."
            ));
        }
    }
    let client_cert_pem = get("PLUGIN_CLIENT_CERT").filter(|c| !c.trim().is_empty()).ok_or_else(|| {
        "PLUGIN_CLIENT_CERT is not set: this provider only serves over mutual TLS, which every supported CLI \
         negotiates automatically. Do not disable AutoMTLS."
            .to_string()
    })?;
    let port = |key: &str, default: u16| get(key).and_then(|v| v.parse().ok()).unwrap_or(default);
    let (min_port, max_port) = (port("PLUGIN_MIN_PORT", 0), port("PLUGIN_MAX_PORT", 0));
    Ok(PluginEnv { client_cert_pem, min_port, max_port })
}

/// Accepts exactly one client certificate, byte for byte, and verifies the handshake signature with it.
#[derive(Debug)]
pub struct PinnedClientCert {
    expected: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedClientCert {
    pub fn new(expected: CertificateDer<'static>, provider: &CryptoProvider) -> Self {
        Self { expected, algorithms: provider.signature_verification_algorithms }
    }
}

impl ClientCertVerifier for PinnedClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.expected.as_ref() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The server's TLS identity and configuration for one process.
pub struct TlsIdentity {
    pub config: Arc<rustls::ServerConfig>,
    /// DER of the self-signed server certificate, announced in the handshake line.
    pub cert_der: Vec<u8>,
}

/// A fresh self-signed ECDSA P-256 server certificate for `localhost`, and a server configuration that
/// requires the given client certificate.
pub fn tls_identity(client_cert_pem: &str) -> Result<TlsIdentity, String> {
    let client_cert = CertificateDer::from_pem_slice(client_cert_pem.as_bytes())
        .map_err(|e| format!("PLUGIN_CLIENT_CERT is not a PEM certificate: {e}"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| format!("generating server key: {e}"))?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).map_err(|e| format!("server certificate: {e}"))?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "terraform-provider-hpc");
    params.subject_alt_names.push(rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let cert = params.self_signed(&key).map_err(|e| format!("signing server certificate: {e}"))?;
    let cert_der = cert.der().to_vec();
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let verifier = Arc::new(PinnedClientCert::new(client_cert, &provider));
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![CertificateDer::from(cert_der.clone())], key_der)
        .map_err(|e| format!("server certificate: {e}"))?;
    // gRPC clients (grpc-go >= 1.67 in current CLIs) insist on ALPN h2.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsIdentity { config: Arc::new(config), cert_der })
}

/// Binds 127.0.0.1, in the CLI's port range when it gave one (first free port, as go-plugin does).
pub async fn bind(min_port: u16, max_port: u16) -> std::io::Result<TcpListener> {
    if min_port == 0 || max_port < min_port {
        return TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await;
    }
    let mut last = None;
    for port in min_port..=max_port {
        match TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("empty port range")))
}

/// The first stdout line go-plugin reads: core version, app protocol, network, address, protocol, cert.
pub fn handshake_line(addr: SocketAddr, cert_der: &[u8]) -> String {
    let cert = base64::engine::general_purpose::STANDARD_NO_PAD.encode(cert_der);
    format!("1|{PROTOCOL_VERSION}|tcp|{addr}|grpc|{cert}")
}

/// A TLS connection tonic can serve.
pub struct TlsConnection(tokio_rustls::server::TlsStream<TcpStream>);

impl Connected for TlsConnection {
    type ConnectInfo = Option<SocketAddr>;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.0.get_ref().0.peer_addr().ok()
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// Accepts TCP connections and completes the TLS handshake off the accept loop; refused handshakes are
/// logged and dropped, so an unauthenticated peer never reaches a gRPC handler.
fn tls_incoming(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> ReceiverStream<std::io::Result<TlsConnection>> {
    let (tx, rx) = mpsc::channel(16);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if tx.is_closed() {
                break;
            }
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        tracing::debug!(%peer, "mTLS: client certificate matches PLUGIN_CLIENT_CERT; connection accepted");
                        let _ = tx.send(Ok(TlsConnection(tls))).await;
                    }
                    Ok(Err(e)) => tracing::warn!(%peer, error = %e, "mTLS: connection refused"),
                    Err(_) => tracing::warn!(%peer, "mTLS: handshake timed out; connection dropped"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// `plugin.GRPCController`: the CLI's request to end the process.
struct Controller {
    shutdown: CancellationToken,
}

#[tonic::async_trait]
impl gp::grpc_controller_server::GrpcController for Controller {
    async fn shutdown(&self, _: Request<gp::Empty>) -> Result<Response<gp::Empty>, Status> {
        tracing::debug!("GRPCController/Shutdown received");
        self.shutdown.cancel();
        Ok(Response::new(gp::Empty {}))
    }
}

/// `plugin.GRPCStdio`: our logs already go to stderr, which go-plugin reads, so the stream carries
/// nothing; it stays open until shutdown so the CLI does not log a broken stream.
struct Stdio {
    shutdown: CancellationToken,
}

type StdioStream = Pin<Box<dyn Stream<Item = Result<gp::StdioData, Status>> + Send>>;

#[tonic::async_trait]
impl gp::grpc_stdio_server::GrpcStdio for Stdio {
    type StreamStdioStream = StdioStream;

    async fn stream_stdio(&self, _: Request<gp::Empty>) -> Result<Response<StdioStream>, Status> {
        let done = self.shutdown.clone();
        let stream = futures::stream::once(async move { done.cancelled_owned().await }).filter_map(|()| async { None });
        Ok(Response::new(Box::pin(stream)))
    }
}

/// A provider server running on 127.0.0.1 with mutual TLS.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub cert_der: Vec<u8>,
    /// Cancelled by `GRPCController/Shutdown`; cancel it to stop the server.
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

/// Starts serving `service` in the background. Used by the binary and, in-process, by the tests.
pub async fn start(service: ProviderService, env: &PluginEnv) -> Result<RunningServer, String> {
    let identity = tls_identity(&env.client_cert_pem)?;
    let listener = bind(env.min_port, env.max_port).await.map_err(|e| format!("binding 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("listener address: {e}"))?;
    let shutdown = CancellationToken::new();

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("plugin", tonic_health::ServingStatus::Serving).await;

    let provider =
        ProviderServer::new(service.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES).max_encoding_message_size(MAX_MESSAGE_BYTES);
    let router = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(gp::grpc_controller_server::GrpcControllerServer::new(Controller { shutdown: shutdown.clone() }))
        .add_service(gp::grpc_stdio_server::GrpcStdioServer::new(Stdio { shutdown: shutdown.clone() }))
        .add_service(provider);
    let incoming = tls_incoming(listener, identity.config);
    let stop = shutdown.clone();
    let cancel_work = service.cancellation();
    let task = tokio::spawn(async move {
        router
            .serve_with_incoming_shutdown(incoming, async move {
                stop.cancelled().await;
                // Shutting down ends in-flight waits too, as StopProvider would.
                cancel_work.cancel();
            })
            .await
    });
    Ok(RunningServer { addr, cert_der: identity.cert_der, shutdown, task })
}
