//! Starting the AWS emulator (moto + our extension) for a test binary, and a tiny client for its admin API.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

pub struct Emulator {
    pub endpoint: String,
    child: Child,
    /// Held open for the emulator's life: when the test process exits, the pipe closes and the emulator
    /// (started with --exit-with-stdin) exits too, even from a static that is never dropped.
    _stdin: std::process::ChildStdin,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// One emulator per test binary, started on a free 127.0.0.1 port. Tests share it and keep apart by
/// region; the moto venv comes from `./scripts/test.sh` (HPC_MOTO_PYTHON).
pub fn aws() -> &'static str {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    &EMULATOR.get_or_init(start_aws).endpoint
}

pub fn start_aws() -> Emulator {
    let python = std::env::var("HPC_MOTO_PYTHON").unwrap_or_else(|_| {
        panic!("HPC_MOTO_PYTHON is not set: run the tests through ./scripts/test.sh, which installs moto in a virtualenv")
    });
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("aws/server.py");
    let mut child = Command::new(python)
        .arg(server)
        .args(["--port", "0", "--exit-with-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the AWS emulator");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let endpoint = line.trim().strip_prefix("READY ").unwrap_or_else(|| panic!("emulator said {line:?}")).to_owned();
    let stdin = child.stdin.take().unwrap();
    Emulator { endpoint, child, _stdin: stdin }
}

/// Calls the admin API: `admin(ep, "POST", "faults", Some(json))`.
pub fn admin(endpoint: &str, method: &str, route: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let addr = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} /_admin/{route} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, payload) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"), "{method} {route}: {head}\n{payload}");
    serde_json::from_str(payload).unwrap()
}

pub fn ec2(endpoint: &str, region: &str) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new(region.to_owned()))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        // Faults must reach the test as they are; retry behaviour is the provider's business.
        .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

pub fn fsx(endpoint: &str, region: &str) -> aws_sdk_fsx::Client {
    let config = aws_sdk_fsx::Config::builder()
        .behavior_version(aws_sdk_fsx::config::BehaviorVersion::latest())
        .region(aws_sdk_fsx::config::Region::new(region.to_owned()))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        .retry_config(aws_sdk_fsx::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_fsx::Client::from_conf(config)
}

/// The error code of an SDK error (`InvalidPlacementGroup.Duplicate`, `RequestLimitExceeded`, ...).
pub fn code<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String {
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    err.code().unwrap_or("(no code)").to_owned()
}

pub fn message<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String {
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    err.message().unwrap_or("").to_owned()
}
