//! For test binaries: start the AWS emulator (moto + our extension) as a child process on a free
//! 127.0.0.1 port, and call any emulator's admin API. Used by the emulators' own tests and by the
//! provider's acceptance tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};

pub struct AwsEmulator {
    pub endpoint: String,
    child: Child,
    /// Held open for the emulator's life: when the test process exits, the pipe closes and the emulator
    /// (started with --exit-with-stdin) exits too, even from a static that is never dropped.
    _stdin: ChildStdin,
}

impl Drop for AwsEmulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// Starts the AWS emulator with the moto virtualenv's python named by `HPC_MOTO_PYTHON` (which
/// `./scripts/test.sh` sets after installing moto).
pub fn start_aws() -> AwsEmulator {
    let python = std::env::var("HPC_MOTO_PYTHON").unwrap_or_else(|_| {
        panic!("HPC_MOTO_PYTHON is not set: run the tests through ./scripts/test.sh, which installs moto in a virtualenv")
    });
    let server = aws_server_script();
    let mut child = Command::new(python)
        .arg(server)
        .args(["--port", "0", "--exit-with-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the AWS emulator");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("emulator output");
    let endpoint = line.trim().strip_prefix("READY ").unwrap_or_else(|| panic!("emulator said {line:?}")).to_owned();
    let stdin = child.stdin.take().expect("piped stdin");
    AwsEmulator { endpoint, child, _stdin: stdin }
}

/// moto's server script. A shared build cache can hold this crate compiled from another checkout (cargo
/// judges path dependencies by file times, not paths), so the checkout cargo runs (or the one we are in)
/// comes first.
pub fn aws_server_script() -> PathBuf {
    let from_cargo = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let here = std::env::current_dir().ok();
    let candidates = [
        from_cargo.as_ref().map(|d| d.join("emulators/aws/server.py")),
        from_cargo.map(|d| d.join("aws/server.py")),
        here.map(|d| d.join("emulators/aws/server.py")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|c| c.is_file())
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("aws/server.py"))
}

/// Calls an emulator's admin API: `admin(ep, "POST", "faults", Some(json))`; panics unless it answers 200.
pub fn admin(endpoint: &str, method: &str, route: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let (status, payload) = admin_raw(endpoint, method, route, body);
    assert_eq!(status, 200, "{method} {route}: {status}\n{payload}");
    serde_json::from_str(&payload).expect("admin API answers JSON")
}

/// Calls the admin API and returns the HTTP status and body, whatever they are.
pub fn admin_raw(endpoint: &str, method: &str, route: &str, body: Option<serde_json::Value>) -> (u16, String) {
    let addr = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).expect("connect to the emulator");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} /_admin/{route} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the answer");
    let (head, payload) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, payload.to_owned())
}

/// Starts the Google Cloud emulator (Compute and Managed Lustre) in this process, on its own runtime
/// thread, and returns its endpoint. It lives as long as the process.
pub fn start_gcp() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let running = crate::gcp::serve("127.0.0.1:0").await.expect("serve the GCP emulator");
            tx.send(running.endpoint.clone()).expect("report the endpoint");
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("the GCP emulator started")
}

/// Starts the Azure Resource Manager emulator (HTTPS, self-signed) in this process and returns its
/// endpoint and the path of a PEM file holding its certificate (for `HPC_AZURE_CA_FILE`).
pub fn start_azure() -> (String, std::path::PathBuf) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let running = crate::azure::serve("127.0.0.1:0").await.expect("serve the Azure emulator");
            let pem = std::env::temp_dir().join(format!("hpc-azure-ca-{}.pem", running.addr.port()));
            std::fs::write(&pem, &running.certificate_pem).expect("write the certificate");
            tx.send((running.endpoint.clone(), pem)).expect("report the endpoint");
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("the Azure emulator started")
}

/// Calls the Azure emulator's admin API over HTTPS, trusting its certificate.
pub fn azure_admin(endpoint: &str, pem: &std::path::Path, method: &str, route: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let answer = azure_call(endpoint, pem, method, &format!("/_admin/{route}"), body, &[]);
    assert_eq!(answer["status"], 200, "{method} {route}: {answer}");
    answer["body"].clone()
}

/// One HTTPS call to the Azure emulator (bearer token, its certificate trusted): `{"status", "body"}`.
pub fn azure_call(
    endpoint: &str,
    pem: &std::path::Path,
    method: &str,
    path_and_query: &str,
    body: Option<serde_json::Value>,
    extra: &[(&str, &str)],
) -> serde_json::Value {
    use std::sync::Arc;
    let pem = std::fs::read(pem).expect("the certificate");
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(&pem).expect("a certificate")).expect("a usable certificate");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let addr = endpoint.trim_start_matches("https://");
    let server = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let conn = rustls::ClientConnection::new(Arc::new(config), server).expect("a TLS client");
    let tcp = TcpStream::connect(addr).expect("connect to the emulator");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    write!(
        tls,
        "{method} {path_and_query} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer emulator\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write the request");
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let json = payload.find('{').and_then(|i| payload.rfind('}').map(|j| &payload[i..=j])).unwrap_or("null");
    serde_json::json!({"status": status, "body": serde_json::from_str::<serde_json::Value>(json).unwrap_or(serde_json::Value::Null)})
}

/// The API signing key `start_oci` registers: OCI's key id is `<tenancy>/<user>/<fingerprint>`.
pub struct OciKey {
    pub tenancy: String,
    pub user: String,
    pub fingerprint: String,
    /// PKCS#8 (`-----BEGIN PRIVATE KEY-----`) PEM.
    pub private_key_pem: String,
    /// The same PEM in a temporary file (mode 0600), for `key_file` style configuration.
    pub private_key_path: PathBuf,
}

/// Starts the OCI emulator (Core and File Storage with Lustre) in this process, on its own runtime thread,
/// with a fresh RSA 2048 API key registered through its admin API; returns its endpoint and the key. It
/// lives as long as the process.
pub fn start_oci() -> (String, OciKey) {
    use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::{KeyPair, RsaKeyPair};
    use base64::Engine;

    fn pem(label: &str, der: &[u8]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).expect("base64 is ASCII")).collect();
        format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
    }

    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let running = crate::oci::serve("127.0.0.1:0").await.expect("serve the OCI emulator");
            tx.send(running.endpoint.clone()).expect("report the endpoint");
            std::future::pending::<()>().await;
        });
    });
    let endpoint = rx.recv().expect("the OCI emulator started");

    let key = RsaKeyPair::generate(KeySize::Rsa2048).expect("an RSA 2048 key");
    let private_key_pem = pem("PRIVATE KEY", AsDer::<Pkcs8V1Der>::as_der(&key).expect("PKCS#8 DER").as_ref());
    let public_key_pem = pem("PUBLIC KEY", key.public_key().as_der().expect("public key DER").as_ref());
    let (tenancy, user) = ("ocid1.tenancy.oc1..emulator".to_owned(), "ocid1.user.oc1..emulator".to_owned());
    let fingerprint = "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0".to_owned();
    admin(
        &endpoint,
        "POST",
        "keys",
        Some(serde_json::json!({"key_id": format!("{tenancy}/{user}/{fingerprint}"), "public_key_pem": public_key_pem})),
    );

    let port = endpoint.rsplit(':').next().unwrap_or_default();
    let private_key_path = std::env::temp_dir().join(format!("hpc-oci-key-{}-{port}.pem", std::process::id()));
    std::fs::write(&private_key_path, &private_key_pem).expect("write the API key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&private_key_path, std::fs::Permissions::from_mode(0o600)).expect("restrict the API key file");
    }
    (endpoint, OciKey { tenancy, user, fingerprint, private_key_pem, private_key_path })
}
