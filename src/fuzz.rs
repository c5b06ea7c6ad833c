//! Hostile cloud answers for the property tests of the parsers (#35): arbitrary JSON, realistic answers
//! with fields replaced, removed or retyped, and strings clouds should never send. Every property runs
//! [`CASES`] cases from a fixed seed, so a failure is the same on every run and on every machine.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value as Json, json};

/// Cases per property: enough to reach past the first field of an answer, few enough to stay quick.
pub const CASES: u32 = 256;

/// A runner of [`CASES`] cases from a fixed seed, failures not written to disk.
pub fn runner() -> TestRunner {
    let config = Config { cases: CASES, max_shrink_iters: 256, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[35; 32]))
}

/// Runs `property` on every value of `strategy`; a panic inside it (proptest catches it) or an `Err` fails
/// the test with the smallest case found.
pub fn check<S: Strategy>(what: &str, strategy: S, property: impl Fn(S::Value) -> Result<(), String>)
where
    S::Value: std::fmt::Debug,
{
    if let Err(e) = runner().run(&strategy, |v| property(v).map_err(TestCaseError::fail)) {
        panic!("{what}: {e}");
    }
}

/// Strings a cloud should never send where a name, a code, a time or a number belongs: empty, non-ASCII
/// (multi-byte at every position a parser might slice), control characters, numbers out of every range,
/// near-miss times and links.
pub fn hostile_str() -> BoxedStrategy<String> {
    prop_oneof![
        3 => proptest::sample::select(vec![
            "", " ", "é", "ü/ß", "日本語", "\u{0}", "\u{202e}", "-", "/", "//", "?", "&", "%", "%zz", "-1", "0", "+1", "1e400",
            "18446744073709551616", "-9223372036854775809", "9223372036854775807", "NaN", "null", "true", "{}", "[]",
            "2026-12-01T10:02:00Z", "2026-12-01T10:02Z", "9999-99-99T99:99:99Z", "2026-12-01T10:02:00+0é:00", "2026-12-01T10:02:00.",
            "2026-12-01T10:02:00.é", "2026-02-29T00:00:00Z", "0000-01-01T00:00:00-23:59", "PowerState/", "PowerState/running",
            "ProvisioningState/failed", "ProvisioningState/failed/é", "HealthState/", "HealthState/unhealthy", "Succeeded", "Failed",
            "RUNNING", "STOPPED", "AMLFS-Durable-Premium-", "AMLFS-Durable-Premium-99999999999999999999", "MBPS_PER_TB_",
            "MBPS_PER_TB_-9223372036854775808", "https://attacker.example/x", "http://[::1", "projects/", "projects/é",
            "a-01", "a-+1", "a-18446744073709551616",
        ])
        .prop_map(str::to_owned),
        2 => "\\PC{0,24}",
        1 => "[a-zA-Z0-9/:._ -]{0,40}",
        1 => proptest::collection::vec(proptest::sample::select(vec!["é", "a", "/", "-", "0", ":", "T", "Z", "+"]), 0..48).prop_map(|p| p.concat()),
    ]
    .boxed()
}

/// Numbers at every edge: zero, negatives, the ends of i64 and u64, fractions, huge floats.
pub fn hostile_number() -> BoxedStrategy<Json> {
    prop_oneof![
        proptest::sample::select(vec![
            json!(0),
            json!(-1),
            json!(1),
            json!(i64::MIN),
            json!(i64::MAX),
            json!(u64::MAX),
            json!(u32::MAX as u64 + 1),
            json!(0.5),
            json!(-0.0),
            json!(1e308),
            json!(-1e308),
            json!(f64::MIN_POSITIVE),
        ]),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite()).prop_map(Json::from),
    ]
    .boxed()
}

/// A leaf of any JSON type.
fn leaf() -> BoxedStrategy<Json> {
    prop_oneof![Just(Json::Null), any::<bool>().prop_map(Json::Bool), hostile_number(), hostile_str().prop_map(Json::String),].boxed()
}

/// Keys the parsers look for, so arbitrary objects meet them now and then.
fn key() -> BoxedStrategy<String> {
    prop_oneof![
        2 => proptest::sample::select(vec![
            "error", "code", "message", "details", "target", "status", "value", "nextLink", "items", "id", "name", "tags",
            "properties", "statuses", "time", "lifecycleState", "state", "timeMaintenanceRebootDue", "freeformTags", "used",
            "available", "limit", "currentValue", "done", "connections", "reservedPeeringRanges", "errors", "reason", "location",
            "instanceId", "displayName", "capacityInGBs", "performanceTier", "sku", "vmHealth", "extensions", "substatuses",
        ])
        .prop_map(str::to_owned),
        1 => hostile_str(),
    ]
    .boxed()
}

/// Arbitrary JSON: nested arrays and objects of every type, a few levels deep.
pub fn json() -> BoxedStrategy<Json> {
    leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
                proptest::collection::vec((key(), inner), 0..6).prop_map(|kv| Json::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
}

/// Every JSON pointer into `j` (the root included), in document order.
fn pointers(j: &Json, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match j {
        Json::Object(m) => m.iter().for_each(|(k, v)| pointers(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out)),
        Json::Array(a) => a.iter().enumerate().for_each(|(i, v)| pointers(v, format!("{at}/{i}"), out)),
        _ => {}
    }
}

/// One edit of an answer.
#[derive(Clone, Debug)]
enum Edit {
    /// The value there becomes this (any type).
    Replace(Json),
    /// The field (or array item) is left out.
    Remove,
    /// The value keeps its place but becomes a string of itself (`5` -> `"5"`), or a number if it was one.
    Retype,
    /// An array is duplicated in place, an object gets a hostile extra field.
    Grow(String, Json),
}

fn apply(j: &mut Json, at: &str, edit: Edit) {
    let Some(target) = j.pointer_mut(at) else { return };
    match edit {
        Edit::Replace(v) => *target = v,
        Edit::Retype => {
            *target = match target.take() {
                Json::String(s) => s.parse::<f64>().ok().filter(|f| f.is_finite()).map_or(Json::Array(vec![Json::String(s)]), Json::from),
                Json::Null => json!({}),
                other => Json::String(other.to_string()),
            }
        }
        Edit::Grow(k, v) => match target {
            Json::Array(a) => {
                let copy = a.clone();
                a.extend(copy);
            }
            Json::Object(m) => {
                m.insert(k, v);
            }
            other => *other = Json::Array(vec![other.clone(), v]),
        },
        Edit::Remove => {
            let Some((parent, last)) = at.rsplit_once('/') else {
                *target = Json::Null;
                return;
            };
            let key = last.replace("~1", "/").replace("~0", "~");
            match j.pointer_mut(parent) {
                Some(Json::Object(m)) => {
                    m.remove(&key);
                }
                Some(Json::Array(a)) => {
                    if let Some(i) = key.parse::<usize>().ok().filter(|i| *i < a.len()) {
                        a.remove(i);
                    }
                }
                _ => {}
            }
        }
    }
}

/// A realistic answer with one to four of its fields replaced (by any JSON), removed, retyped or grown,
/// so the fuzz reaches past the first field a parser reads.
pub fn mutated(base: Json) -> BoxedStrategy<Json> {
    let mut at = Vec::new();
    pointers(&base, String::new(), &mut at);
    let edit = prop_oneof![
        3 => json().prop_map(Edit::Replace),
        2 => leaf().prop_map(Edit::Replace),
        2 => Just(Edit::Remove),
        2 => Just(Edit::Retype),
        1 => (key(), leaf()).prop_map(|(k, v)| Edit::Grow(k, v)),
    ];
    proptest::collection::vec((any::<proptest::sample::Index>(), edit), 1..5)
        .prop_map(move |edits| {
            let mut j = base.clone();
            for (i, edit) in edits {
                // Pointers into what earlier edits changed may no longer lead anywhere: those are skipped.
                apply(&mut j, &at[i.index(at.len())], edit);
            }
            j
        })
        .boxed()
}

/// Realistic answers mutated, and now and then arbitrary JSON, for one parser.
pub fn answers(realistic: Vec<Json>) -> BoxedStrategy<Json> {
    let mutations: Vec<BoxedStrategy<Json>> = realistic.into_iter().map(mutated).collect();
    prop_oneof![4 => proptest::strategy::Union::new(mutations), 1 => json()].boxed()
}

/// A local HTTPS server whose certificate is self-signed, so that no client trusts it: it only counts the
/// TLS handshakes it was offered (a client that retried would offer more than one). Runs until the test's
/// runtime ends; the base URL and the count.
pub async fn serve_untrusted_tls() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("certificate parameters");
    params.subject_alt_names.push(rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key_der)
        .expect("the server's certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a local port");
    let addr = listener.local_addr().expect("its address");
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counted = handshakes.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            // The client gives up in the handshake, when it sees the certificate.
            tokio::spawn(async move { drop(acceptor.accept(stream).await) });
        }
    });
    (format!("https://{addr}"), handshakes)
}

/// A local HTTP server for the few tests that need the client's own loop (a list following its links):
/// every request is answered by `answer` from its request line (`GET /x?y HTTP/1.1`), with the status,
/// headers and body it gives. Runs until the test's runtime ends.
pub async fn serve(answer: impl Fn(&str) -> (u16, Vec<(String, String)>, String) + Send + Sync + 'static) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a local port");
    let addr = listener.local_addr().expect("its address");
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // The head is enough: the tests' requests carry no body worth reading.
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let line = text.lines().next().unwrap_or_default().to_owned();
                let (status, headers, body) = answer(&line);
                let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let _ = stream.write_all(out.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}
