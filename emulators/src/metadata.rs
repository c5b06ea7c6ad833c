//! Instance metadata listeners, shared by the emulators of our own (Google Cloud, Azure, OCI; AWS's are in
//! `aws/imds.py`). `POST /_admin/metadata {"instance": <id>}` opens one plain-HTTP listener on 127.0.0.1 that
//! answers as that cloud's metadata service (169.254.169.254) answers that one instance; a relay in front of a
//! booted test host forwards the host's connections to it. Each cloud's module says what a request gets,
//! reading the instance from the emulator's store on every request, so later changes show at once.
//!
//! Here: the listeners by instance (asking again for one gives the same port), one request per connection
//! (`Connection: close`, as a relay forwards each connection on its own), a connection accepted while the
//! instance is gone closed unanswered (as an unreachable address would leave it), and `reset` closing them
//! all, with their open connections. Nothing here goes through the conformance judge: the metadata
//! services have no published machine-readable definition, and each rule is tested where it is served.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A request as a metadata service sees it (they serve `GET` without a body; AWS's `PUT` is Python's).
pub struct Asked {
    pub method: Method,
    /// The path, percent-decoded.
    pub path: String,
    /// The query's parameters in order, percent-decoded.
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
}

impl Asked {
    /// The first value of a query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// How often a query parameter is given.
    pub fn params_named(&self, name: &str) -> usize {
        self.query.iter().filter(|(k, _)| k == name).count()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the request came through a proxy that said so (`X-Forwarded-For`, `Forwarded`, `X-Forwarded-Host`).
    pub fn forwarded(&self) -> bool {
        ["x-forwarded-for", "forwarded", "x-forwarded-host"].iter().any(|h| self.headers.contains_key(*h))
    }
}

/// A future answer.
pub type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// One instance's metadata service.
pub trait Instance: Send + Sync + 'static {
    /// Whether the instance is there to be reached: a deleted or terminated one is not.
    fn reachable(&self) -> bool;
    /// The answer to one request.
    fn answer(&self, asked: Asked) -> Answer;
}

/// The open listeners of one emulator, by instance.
#[derive(Default)]
pub struct Listeners {
    open: Mutex<BTreeMap<String, (u16, tokio::task::AbortHandle)>>,
}

impl Listeners {
    /// The port of the listener for `key` (an instance's id as the admin API names it), opening one on
    /// 127.0.0.1 if there is none. Must be called on the emulator's runtime.
    pub fn open(&self, key: &str, instance: Arc<dyn Instance>) -> std::io::Result<u16> {
        let mut open = self.open.lock().unwrap();
        if let Some((port, task)) = open.get(key)
            && !task.is_finished()
        {
            return Ok(*port);
        }
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let port = std_listener.local_addr()?.port();
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let task = tokio::spawn(accept(listener, instance));
        open.insert(key.to_owned(), (port, task.abort_handle()));
        Ok(port)
    }

    /// Closes every listener and its connections (the admin API's `reset`).
    pub fn close_all(&self) {
        for (_, (_, task)) in std::mem::take(&mut *self.open.lock().unwrap()) {
            task.abort();
        }
    }
}

/// Accepts connections until aborted; aborting drops the set of connections, which ends them too.
async fn accept(listener: tokio::net::TcpListener, instance: Arc<dyn Instance>) {
    let app = axum::Router::new().fallback(dispatch).with_state(instance.clone());
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                if !instance.reachable() {
                    drop(stream);
                    continue;
                }
                let app = app.clone();
                connections.spawn(async move {
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let mut builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
                    builder.http1().keep_alive(false);
                    let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn dispatch(State(instance): State<Arc<dyn Instance>>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let query = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect();
    instance.answer(Asked { method, path: percent_decode(uri.path(), false), query, headers }).await
}

/// `%XX` decoded (and `+` as a space, in a query).
pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
                continue;
            }
            (b'+', _) if plus_is_space => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A response with a body of `content_type` and extra headers.
pub fn respond(status: u16, content_type: &str, body: impl Into<axum::body::Body>, extra: &[(&'static str, String)]) -> Response {
    let mut resp = (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), body.into()).into_response();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    for (name, value) in extra {
        if let Ok(v) = HeaderValue::from_str(value) {
            resp.headers_mut().insert(*name, v);
        }
    }
    resp
}

/// A stable 64-bit digest (FNV-1a) as 16 hex digits: ETags, and identifiers derived from an id.
pub fn digest(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// A UUID-shaped identifier derived from `seed` (stable for the same seed).
pub fn uuid_from(seed: &str) -> String {
    let (a, b) = (digest(seed), digest(&format!("{seed}#2")));
    format!("{}-{}-4{}-8{}-{}", &a[..8], &a[8..12], &a[13..16], &b[..3], &b[3..15])
}

/// A MAC address with the given three-byte prefix and the last three bytes derived from `seed`.
pub fn mac_from(prefix: [u8; 3], seed: &str) -> [u8; 6] {
    let d = digest(seed);
    let byte = |i: usize| u8::from_str_radix(&d[i * 2..i * 2 + 2], 16).unwrap_or_default();
    [prefix[0], prefix[1], prefix[2], byte(0), byte(1), byte(2)]
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_text(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// An IPv4 network `a.b.c.d/n` as (base, prefix length).
pub fn cidr(text: &str) -> Option<(std::net::Ipv4Addr, u32)> {
    let (ip, len) = text.split_once('/')?;
    let len: u32 = len.parse().ok().filter(|l| *l <= 32)?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((std::net::Ipv4Addr::from(u32::from(ip) & mask), len))
}

/// The admin route's answer for a listener opened (or the error that kept it shut).
pub fn opened(port: std::io::Result<u16>, mut facts: Value) -> (u16, Value) {
    match port {
        Ok(port) => {
            facts["port"] = json!(port);
            (200, facts)
        }
        Err(e) => (500, json!({"error": format!("could not open a metadata listener: {e}")})),
    }
}

/// The instance id in the admin route's body, or its 400.
pub fn instance_of(body: &[u8]) -> Result<String, (u16, Value)> {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    parsed["instance"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| (400, json!({"error": "metadata needs instance, the id of an instance"})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_derived_identifiers() {
        assert_eq!(percent_decode("hpc%3Aslurm-config+x", true), "hpc:slurm-config x");
        assert_eq!(percent_decode("a+b", false), "a+b");
        assert_eq!(percent_decode("100%", true), "100%");
        assert_eq!(cidr("10.1.2.3/24"), Some(("10.1.2.0".parse().unwrap(), 24)));
        assert_eq!(uuid_from("a"), uuid_from("a"));
        assert_ne!(uuid_from("a"), uuid_from("b"));
        assert_eq!(uuid_from("a").len(), 36);
        assert_eq!(mac_text(mac_from([0x42, 0x01, 0x0a], "x"))[..8], *"42:01:0a");
    }
}
