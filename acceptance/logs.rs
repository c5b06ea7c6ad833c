//! Logs a person can follow, and no secret in them: on each cloud's emulator, OpenTofu applies a fabric and a
//! two-node cluster with the provider's logs at trace (`TF_LOG_PROVIDER=trace`, `TF_LOG_PATH`) while the
//! emulator throttles a few calls. The log must hold one debug line per request the emulator received
//! (the emulator's own per-operation counters are the tally), each with its operation, status, duration
//! and attempt; an info line for each throttled call the provider retried; the nodes' progress lines; and
//! none of the secrets the run was given: the provider block's credentials (AWS keys, a Google
//! service-account key, the OCI API key), a marker inside the user data, and nothing that looks like a
//! bearer token or a request signature.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cli::Cli;
use crate::faults::target;

/// Seen in the user data only: it must never reach the log.
const MARKER: &str = "hpc-log-marker-6d1f0c93";

/// Everything a log must never hold, whatever the cloud: bearer tokens, JWTs (a Google self-signed JWT
/// starts `eyJhbGci`), SigV4 credentials and OCI signatures, PEM headers.
const NEVER: [&str; 6] = ["Bearer ", "eyJhbGci", "Credential=", "Signature version=", "PRIVATE KEY", "authorization:"];

pub fn logs_hold_each_call_retry_and_progress_and_no_secret(cli: &Cli, cloud: &str) {
    let t = target(cloud);
    let mut secrets: Vec<(String, String)> = vec![("a marker in the user data".into(), MARKER.into())];
    let w = t.workdir(cli).env("TF_VAR_node_count", "2").env("TF_VAR_user_data", &format!("#!/bin/sh\nexport HF_TOKEN={MARKER}\n"));
    let mut main = with_user_data(&std::fs::read_to_string(w.path().join("main.tf")).unwrap());
    match cloud {
        "aws" => {
            let (access, secret) = ("AKIAHPCLOGTEST7Q2X", "aws-secret-key-5b8e1f2a9c");
            main = main
                .replace("access_key = \"test\"", &format!("access_key = \"{access}\""))
                .replace("secret_key = \"test\"", &format!("secret_key = \"{secret}\"\n    token      = \"aws-session-token-0f3c7e\""));
            secrets.push(("the AWS access key id".into(), access.into()));
            secrets.push(("the AWS secret key".into(), secret.into()));
            secrets.push(("the AWS session token".into(), "aws-session-token-0f3c7e".into()));
        }
        "gcp" => {
            // A service-account key of our own making: the client signs its own JWTs with it (no token
            // exchange), and sends them to the emulator.
            let (key_json, pem) = service_account_key();
            main = main.replace("    endpoint = var.endpoint\n", "    endpoint    = var.endpoint\n    credentials = var.gcp_key\n");
            main.push_str("\nvariable \"gcp_key\" {\n  type      = string\n  sensitive = true\n}\n");
            std::fs::write(w.path().join("key.auto.tfvars.json"), json!({"gcp_key": key_json}).to_string()).unwrap();
            secrets.extend(pem_lines(&pem).map(|l| ("a line of the service-account key".to_owned(), l)));
            secrets.push(("the service-account key id".into(), "hpc-log-key-id-9a7e".into()));
        }
        "oci" => {
            let pem = std::fs::read_to_string(t.env_value("TF_VAR_key_path").expect("the OCI target names its key file")).unwrap();
            secrets.extend(pem_lines(&pem).map(|l| ("a line of the OCI API key".to_owned(), l)));
        }
        _ => {}
    }
    assert!(main.contains("var.user_data"), "the case has no cluster to give user data to:\n{main}");
    w.write("main.tf", &main);

    t.admin("POST", "reset", None);
    // A few throttled calls, as the cloud's own throttling looks: the provider retries each.
    t.admin("POST", "faults", Some(json!({"service": "*", "operation": "*", "kind": "throttle", "every": 7, "times": 3})));
    let log = tempfile::NamedTempFile::new().unwrap();
    let started = std::time::Instant::now();
    let mut cmd = w.command(&["apply", "-no-color", "-input=false", "-auto-approve"]);
    cmd.env("TF_LOG_PROVIDER", "trace").env("TF_LOG_PATH", log.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let counters = t.admin("GET", "counters", None)["counters"].clone();
    let fired: u64 = t.admin("GET", "faults", None)["faults"].as_array().into_iter().flatten().filter_map(|f| f["fired"].as_u64()).sum();
    t.admin("DELETE", "faults", None);
    let logged = std::fs::read_to_string(log.path()).unwrap();
    eprintln!("{cloud}: apply took {:.1} s, {} log lines", started.elapsed().as_secs_f64(), logged.lines().count());

    // No secret, at any level.
    for (what, secret) in &secrets {
        assert!(!logged.contains(secret.as_str()), "{what} ({secret}) is in the provider's log");
    }
    for never in NEVER {
        assert!(!logged.to_ascii_lowercase().contains(&never.to_ascii_lowercase()), "{never:?} is in the provider's log");
    }

    // One debug line per request the emulator received, with what a person needs.
    let calls: Vec<&str> = logged.lines().filter(|l| l.contains("[DEBUG] provider") && l.contains(" duration_ms=")).collect();
    let received: u64 = counters.as_object().unwrap().values().filter_map(Value::as_u64).sum();
    assert!(received > 0, "the emulator received nothing: {counters}");
    let mut by_operation: BTreeMap<String, u64> = BTreeMap::new();
    for line in &calls {
        *by_operation.entry(field(line, "operation")).or_default() += 1;
    }
    assert_eq!(calls.len() as u64, received, "one log line per request the emulator received ({counters}); the log: {by_operation:?}");
    for line in &calls {
        for field in [format!(" cloud={cloud}"), " operation=".into(), " attempt=".into()] {
            assert!(line.contains(&field), "{field} missing from {line}");
        }
        // The HTTP status; a Google client crate hands back only a success's decoded answer, which says ok.
        let status_known = line.contains(" status=") || (cloud == "gcp" && line.contains(" outcome=ok"));
        assert!(status_known, "no status in {line}");
    }
    // The operations are the cloud's own names: every one the emulator counted appears as often in the log.
    for (key, n) in counters.as_object().unwrap() {
        let operation = key.split_once(':').map_or(key.as_str(), |(_, op)| op);
        let logged = match cloud {
            "aws" | "oci" => by_operation.get(operation).copied(),
            // Compute's operations are read from their zone, region or the global collection.
            "gcp" if key == "compute:operations.get" => {
                Some(["zone", "region", "global"].iter().filter_map(|w| by_operation.get(&format!("compute.{w}Operations.get"))).sum())
            }
            // The emulator's `addresses` are the global addresses (Compute's `globalAddresses` methods).
            "gcp" if key.starts_with("compute:addresses.") => by_operation.get(&format!("compute.globalA{}", &operation[1..])).copied(),
            "gcp" if key.starts_with("compute:") => by_operation.get(&format!("compute.{operation}")).copied(),
            _ => continue,
        };
        assert_eq!(logged, n.as_u64(), "{key}: the emulator counted {n}; the log says {by_operation:?}");
    }
    if cloud != "gcp" {
        // Those clouds' answers carry a request id, and the line shows it.
        assert!(calls.iter().all(|l| l.contains(" request_id=")), "a line without the request id:\n{}", calls.join("\n"));
    }

    // Each throttled call retried, at info, with why and how long.
    assert!(fired > 0, "the emulator throttled nothing");
    let retries: Vec<&str> = logged.lines().filter(|l| l.contains("[INFO]") && l.contains("reason=throttled")).collect();
    let refused: Vec<&&str> = calls.iter().filter(|l| !l.contains(" outcome=ok")).collect();
    assert_eq!(
        retries.len() as u64,
        fired,
        "one retry line per throttled call ({fired} fired):\n{}\nthe calls not answered ok:\n{}",
        retries.join("\n"),
        refused.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("\n")
    );
    assert!(retries.iter().all(|l| l.contains(" wait_ms=") && l.contains(" attempt=") && l.contains("retr")), "{}", retries.join("\n"));

    // The nodes coming up, at info.
    let progress: Vec<&str> = logged.lines().filter(|l| l.contains("[INFO]") && l.contains("nodes running")).collect();
    if cloud != "azure" {
        assert!(
            progress.iter().any(|l| l.contains("acc: 2/2 nodes running") || l.contains("acc: 1/2 nodes running")),
            "no progress line for the nodes:\n{}",
            logged.lines().filter(|l| l.contains("[INFO]")).collect::<Vec<_>>().join("\n")
        );
    }

    let gone = w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]);
    assert_eq!(gone.code, Some(0), "{}", gone.output());
}

/// The case with `user_data = var.user_data` on its cluster, from a sensitive variable.
fn with_user_data(main: &str) -> String {
    let mut out = String::new();
    let mut in_cluster = false;
    for line in main.lines() {
        in_cluster |= line.starts_with("resource \"hpc_gpu_cluster\"");
        out.push_str(line);
        out.push('\n');
        if in_cluster && line.trim_start().starts_with("node_count") {
            out.push_str("  user_data = var.user_data\n");
            in_cluster = false;
        }
    }
    out + "\nvariable \"user_data\" {\n  type      = string\n  sensitive = true\n}\n"
}

/// The base64 lines of a PEM (each a piece of the key).
fn pem_lines(pem: &str) -> impl Iterator<Item = String> + '_ {
    pem.lines().filter(|l| !l.starts_with("-----") && l.len() > 16).map(str::to_owned)
}

/// A Google service-account key (JSON) around a fresh RSA key, and the key's PEM.
fn service_account_key() -> (String, String) {
    use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
    use aws_lc_rs::rsa::KeySize;
    use aws_lc_rs::signature::RsaKeyPair;
    use base64::Engine;
    let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
    let der = AsDer::<Pkcs8V1Der>::as_der(&key).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"));
    let json = json!({
        "type": "service_account",
        "project_id": "ml-prod",
        "private_key_id": "hpc-log-key-id-9a7e",
        "private_key": pem,
        "client_email": "hpc-logs@ml-prod.iam.gserviceaccount.com",
        "client_id": "100000000000000000001",
        "token_uri": "https://oauth2.googleapis.com/token",
    });
    (json.to_string(), pem)
}

/// A field's value in a log line: `key=value` or `key="value with spaces"`.
fn field(line: &str, key: &str) -> String {
    let Some(at) = line.find(&format!(" {key}=")) else { return String::new() };
    let rest = &line[at + key.len() + 2..];
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
        None => rest.split_whitespace().next().unwrap_or_default().to_owned(),
    }
}
