//! Hostile cloud answers for the property tests of the parsers (#35): arbitrary JSON, realistic answers
//! with fields replaced, removed or retyped, and strings clouds should never send. Every property runs
//! [`CASES`] cases from a fixed seed (`HPC_FUZZ_CASES` runs more), so a failure is the same on every run
//! and on every machine.
//!
//! The observe paths (#50) are fuzzed whole: [`check_served`] serves each call a client makes, by route,
//! an answer mutated from one recorded from the emulators (`tests/fixtures/answers/`): its JSON mutated,
//! its lists grown, its body garbage or empty, its status odd (204, 301, 404, 409, 412, 429, 500, ...),
//! and runs the real client code against it on a paused clock, so retries and waits cost no time.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value as Json, json};

/// Cases per property: enough to reach past the first field of an answer, few enough to stay quick.
pub const CASES: u32 = 256;

/// The cases each property runs: [`CASES`], or `HPC_FUZZ_CASES` for a longer run.
pub fn cases() -> u32 {
    std::env::var("HPC_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES)
}

/// A runner of [`cases`] cases from a fixed seed, failures not written to disk (a failure found becomes a
/// named test).
pub fn runner() -> TestRunner {
    let config = Config { cases: cases(), max_shrink_iters: 256, failure_persistence: None, ..Config::default() };
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
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                // The body is read too (a client that sent one and finds it unread sees the connection reset).
                let head_end = request.windows(4).position(|w| w == b"\r\n\r\n").map_or(request.len(), |i| i + 4);
                let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
                let length =
                    head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(0);
                while request.len() < head_end + length {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
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

/// One answer a fuzzed server gives to a request: its status, headers and body.
#[derive(Clone, Debug)]
pub struct Served {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Statuses: mostly 200, so a case reaches past the first call, else one a cloud answers in trouble, or
/// one it should never give a read.
fn status() -> BoxedStrategy<u16> {
    prop_oneof![
        6 => Just(200),
        3 => proptest::sample::select(vec![201, 202, 204, 301, 302, 400, 401, 403, 404, 409, 412, 429, 500, 502, 503, 504]),
        1 => 200u16..600,
    ]
    .boxed()
}

/// The first list in `j` (the root first, then in document order) grown to `n` items by repeating its own.
fn grown(mut j: Json, n: usize) -> Json {
    let mut at = Vec::new();
    pointers(&j, String::new(), &mut at);
    let list = at.into_iter().find(|p| j.pointer(p).is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty())));
    if let Some(Json::Array(a)) = list.and_then(|p| j.pointer_mut(&p)) {
        let items = a.clone();
        *a = items.iter().cycle().take(n).cloned().collect();
    }
    j
}

/// An answer made from `realistic`: mutated (most cases), its first list grown huge (up to 2,000 items),
/// garbage, empty or arbitrary JSON, under an odd status now and then. `headers` are those the client
/// reads (`retry-after`, `opc-next-page`), given hostile values now and then; a redirect points back at
/// the server (never at another host: a test makes no call outside).
pub fn served(realistic: Json, headers: &'static [&'static str]) -> BoxedStrategy<Served> {
    let body = prop_oneof![
        6 => answers(vec![realistic.clone()]).prop_map(|j| j.to_string()),
        1 => (2usize..2000).prop_map(move |n| grown(realistic.clone(), n).to_string()),
        1 => garbage(),
    ];
    with_status(body.boxed(), headers)
}

/// Bodies no parser can read: empty, a hostile string, a proxy's HTML page.
fn garbage() -> BoxedStrategy<String> {
    prop_oneof![Just(String::new()), hostile_str(), Just("<html>502 Bad Gateway</html>".to_owned())].boxed()
}

/// `body` under a status ([`status`]) and headers as [`served`] gives them.
fn with_status(body: BoxedStrategy<String>, headers: &'static [&'static str]) -> BoxedStrategy<Served> {
    let headers = if headers.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        let value = prop_oneof![hostile_str(), (0u64..90).prop_map(|n| n.to_string())];
        let header = (proptest::sample::select(headers.to_vec()), value).prop_map(|(k, v)| (k.to_owned(), v));
        proptest::collection::vec(header, 0..2).boxed()
    };
    let redirect = proptest::sample::select(vec!["/", "/elsewhere", "?again=1", ""]);
    (status(), headers, body, redirect)
        .prop_map(|(status, mut headers, body, to)| {
            if (300..400).contains(&status) && !to.is_empty() {
                headers.push(("location".to_owned(), to.to_owned()));
            }
            // The server writes each header as given: a value HTTP cannot carry is left out.
            headers.retain(|(_, v)| v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)));
            Served { status, headers, body }
        })
        .boxed()
}

/// How long (on the paused clock) one case may take: every retry's wait and every poll's, many times over.
/// A case still running then never ends.
pub const CASE_LIMIT: std::time::Duration = std::time::Duration::from_secs(4 * 3600);

/// How long one case may take on the wall clock: a paused clock makes the waits free, so a case that
/// takes long spins.
pub const CASE_WALL_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `observe` (the client code, given the server's base URL) once per case against a local server
/// that answers each request with the answer of the first route whose needle the request line holds
/// (`GET /path?query HTTP/1.1`), and 404 `{}` when none does; each route's answers come from its
/// strategy ([`served`] or [`served_xml`]). The clock is paused (the waits between retries and polls pass at once); a case that
/// does not end within [`CASE_LIMIT`] of that clock or [`CASE_WALL_LIMIT`] of the wall clock fails, as
/// does a panic or an `Err` from `observe` (which checks what it got: an error must name the call).
pub fn check_served<F, Fut>(what: &str, routes: Vec<(&'static str, BoxedStrategy<Served>)>, observe: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    use std::sync::{Arc, Mutex};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("a runtime");
    let case: Arc<Mutex<Vec<(String, Served)>>> = Arc::default();
    let answering = case.clone();
    let base = rt.block_on(serve(move |line| {
        let routes = answering.lock().unwrap_or_else(|e| e.into_inner());
        match routes.iter().find(|(needle, _)| line.contains(needle.as_str())) {
            Some((_, s)) => (s.status, s.headers.clone(), s.body.clone()),
            None => (404, vec![], "{}".to_owned()),
        }
    }));
    let strategy: Vec<BoxedStrategy<(String, Served)>> =
        routes.into_iter().map(|(needle, answers)| answers.prop_map(move |s| (needle.to_owned(), s)).boxed()).collect();
    check(what, strategy, |routes| {
        *case.lock().unwrap_or_else(|e| e.into_inner()) = routes;
        let started = std::time::Instant::now();
        let outcome = rt.block_on(async { tokio::time::timeout(CASE_LIMIT, observe(base.clone())).await });
        let wall = started.elapsed();
        if wall > CASE_WALL_LIMIT {
            return Err(format!("the case took {wall:?} of wall time"));
        }
        outcome.map_err(|_| format!("the case did not end within {CASE_LIMIT:?} (paused clock)"))?
    });
}

/// The longest error message a hostile answer may make: what a person reads in a diagnostic, however
/// large the answer was.
pub const LONGEST_MESSAGE: usize = 4096;

/// An error's message names the call that failed (one of `calls`, the `what` the code passes) and is no
/// longer than [`LONGEST_MESSAGE`].
pub fn names_the_call(message: &str, calls: &[&str]) -> Result<(), String> {
    if !calls.iter().any(|c| message.contains(c)) {
        return Err(format!("the error names none of {calls:?}: {message}"));
    }
    if message.len() > LONGEST_MESSAGE {
        let start: String = message.chars().take(300).collect();
        return Err(format!("the error is {} bytes long: {start}...", message.len()));
    }
    Ok(())
}

/// A recorded answer from `tests/fixtures/answers/`.
pub fn recorded(name: &str) -> Json {
    let path = format!("{}/tests/fixtures/answers/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The leaf elements of an XML text (`<name>text</name>`, no attributes), as byte ranges of the element
/// and of its text.
fn xml_leaves(xml: &str) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(open) = xml[at..].find('<').map(|i| at + i) {
        at = open + 1;
        let Some(close) = xml[at..].find('>').map(|i| at + i) else { break };
        let name = &xml[open + 1..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ':') {
            continue;
        }
        let text_end = xml[close + 1..].find('<').map_or(xml.len(), |i| close + 1 + i);
        let end_tag = format!("</{name}>");
        if xml[text_end..].starts_with(&end_tag) {
            out.push((open..text_end + end_tag.len(), close + 1..text_end));
        }
    }
    out
}

/// One edit of an XML answer.
#[derive(Clone, Debug)]
enum XmlEdit {
    /// The leaf element is left out.
    Remove,
    /// Its text becomes this, escaped as XML escapes it or (`false`) as it is.
    Text(String, bool),
    /// It is given this many times.
    Repeat(usize),
    /// The answer ends this far (a fraction of its length) through.
    Truncate(f64),
}

/// An EC2 (query protocol, XML) answer made from `realistic`: one to four of its leaf elements removed,
/// given hostile text (escaped or not) or repeated, or the answer cut short; its instance list grown (up
/// to 500 copies); a `nextToken` added; or garbage; under the statuses [`served`] gives.
pub fn served_xml(realistic: &str) -> BoxedStrategy<Served> {
    let base = realistic.to_owned();
    let edit = prop_oneof![
        2 => Just(XmlEdit::Remove),
        3 => (hostile_str(), any::<bool>()).prop_map(|(t, escaped)| XmlEdit::Text(t, escaped)),
        1 => (2usize..50).prop_map(XmlEdit::Repeat),
        1 => (0.0f64..1.0).prop_map(XmlEdit::Truncate),
    ];
    let edited = {
        let base = base.clone();
        proptest::collection::vec((any::<proptest::sample::Index>(), edit), 1..5).prop_map(move |edits| {
            let mut xml = base.clone();
            for (i, edit) in edits {
                // Ranges are found again after each edit: an earlier one moved them.
                let leaves = xml_leaves(&xml);
                if leaves.is_empty() {
                    break;
                }
                let (whole, text) = leaves[i.index(leaves.len())].clone();
                match edit {
                    XmlEdit::Remove => xml.replace_range(whole, ""),
                    XmlEdit::Text(t, true) => xml.replace_range(text, &t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")),
                    XmlEdit::Text(t, false) => xml.replace_range(text, &t),
                    XmlEdit::Repeat(n) => {
                        let element = xml[whole.clone()].to_owned();
                        xml.replace_range(whole, &element.repeat(n));
                    }
                    XmlEdit::Truncate(f) => {
                        let mut cut = (xml.len() as f64 * f) as usize;
                        while !xml.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        xml.truncate(cut);
                    }
                }
            }
            xml
        })
    };
    let grown = {
        let base = base.clone();
        (2usize..500).prop_map(move |n| match (base.find("<instancesSet>"), base.rfind("</instancesSet>")) {
            (Some(a), Some(b)) if a < b => {
                let a = a + "<instancesSet>".len();
                format!("{}{}{}", &base[..a], base[a..b].repeat(n), &base[b..])
            }
            _ => base.clone(),
        })
    };
    let paged = {
        let base = base.clone();
        hostile_str().prop_map(move |token| match base.rfind("</") {
            Some(end) => {
                format!("{}<nextToken>{}</nextToken>{}", &base[..end], token.replace('&', "&amp;").replace('<', "&lt;"), &base[end..])
            }
            None => base.clone(),
        })
    };
    let body = prop_oneof![6 => edited, 1 => grown, 1 => paged, 1 => garbage()];
    with_status(body.boxed(), &[])
}
