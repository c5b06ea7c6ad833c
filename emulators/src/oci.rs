//! OCI emulator: the Core API subset the provider uses (VCNs, subnets, compute clusters, instances) in
//! memory on 127.0.0.1, with every request's HTTP signature verified against the API public keys registered
//! through `POST /_admin/keys` (`{"key_id": "<tenancy>/<user>/<fingerprint>", "public_key_pem": ...}`). A
//! missing or bad signature gets OCI's real 401 `NotAuthenticated` answer. Lifecycle states are simulated
//! (PROVISIONING -> AVAILABLE; instances PROVISIONING -> STARTING -> RUNNING, TERMINATING -> TERMINATED).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::admin::{Admin, Emulated, FaultKind};

const SETTLE: f64 = 0.3;

struct Stored {
    kind: &'static str,
    value: Value,
    changed: Instant,
}

#[derive(Default)]
struct Store {
    resources: BTreeMap<String, Stored>,
    keys: BTreeMap<String, Vec<u8>>,
    next: u64,
}

pub struct Oci {
    store: Mutex<Store>,
    pub admin: Admin,
}

pub struct Running {
    pub endpoint: String,
    pub addr: SocketAddr,
    pub emulator: Arc<Oci>,
}

pub async fn serve(bind: &str) -> std::io::Result<Running> {
    let emulator = Arc::new(Oci { store: Mutex::new(Store::default()), admin: Admin::default() });
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(handle).with_state(emulator.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Running { endpoint: format!("http://{addr}"), addr, emulator })
}

fn error(status: u16, code: &str, message: &str) -> Response {
    let mut resp =
        (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(json!({"code": code, "message": message})))
            .into_response();
    resp.headers_mut().insert("opc-request-id", "emulator".parse().unwrap());
    resp
}

fn not_found() -> Response {
    error(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
}

fn unauthenticated() -> Response {
    error(401, "NotAuthenticated", "The required information to complete authentication was not provided or was incorrect.")
}

/// Checks the request's HTTP signature; the reason on failure goes to the emulator's log only, as OCI
/// gives callers no detail either.
fn verify(keys: &BTreeMap<String, Vec<u8>>, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).ok_or("no authorization header")?;
    let params = auth.strip_prefix("Signature ").ok_or("not a Signature authorization")?;
    let field = |name: &str| {
        params.split(',').find_map(|p| p.trim().strip_prefix(&format!("{name}=\"")).map(|v| v.trim_end_matches('"').to_owned()))
    };
    let key_id = field("keyId").ok_or("no keyId")?;
    let names = field("headers").unwrap_or_else(|| "date".into());
    let signature = STANDARD.decode(field("signature").ok_or("no signature")?).map_err(|_| "signature is not base64")?;
    if field("algorithm").as_deref() != Some("rsa-sha256") {
        return Err("algorithm must be rsa-sha256".into());
    }
    let key = keys.get(&key_id).ok_or_else(|| format!("unknown keyId {key_id}"))?;
    let needed: &[&str] = match method.as_str() {
        "POST" | "PUT" | "PATCH" => &["date", "(request-target)", "host", "x-content-sha256", "content-type", "content-length"],
        _ => &["date", "(request-target)", "host"],
    };
    let signed: Vec<&str> = names.split(' ').collect();
    if let Some(missing) = needed.iter().find(|n| !signed.contains(n)) {
        return Err(format!("header {missing} is not signed"));
    }
    if signed.contains(&"x-content-sha256") {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body);
        let sent = headers.get("x-content-sha256").and_then(|v| v.to_str().ok()).unwrap_or_default();
        if sent != STANDARD.encode(digest.as_ref()) {
            return Err("x-content-sha256 does not match the body".into());
        }
    }
    let target = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let lines: Vec<String> = signed
        .iter()
        .map(|name| match *name {
            "(request-target)" => format!("(request-target): {} {target}", method.as_str().to_ascii_lowercase()),
            other => format!("{other}: {}", headers.get(other).and_then(|v| v.to_str().ok()).unwrap_or_default()),
        })
        .collect();
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key)
        .verify(lines.join("\n").as_bytes(), &signature)
        .map_err(|_| "signature does not verify".into())
}

fn ocid(store: &mut Store, kind: &str) -> String {
    store.next += 1;
    format!("ocid1.{kind}.oc1.emulator.{:020}", store.next)
}

impl Oci {
    fn view(stored: &Stored) -> Value {
        let mut v = stored.value.clone();
        let age = stored.changed.elapsed().as_secs_f64();
        let state = v["lifecycleState"].as_str().unwrap_or_default().to_owned();
        let next = match (stored.kind, state.as_str()) {
            ("instance", "PROVISIONING") if age >= SETTLE * 2.0 => Some("RUNNING"),
            ("instance", "PROVISIONING") if age >= SETTLE => Some("STARTING"),
            ("instance", "TERMINATING") if age >= SETTLE => Some("TERMINATED"),
            (_, "PROVISIONING") if age >= SETTLE => Some("AVAILABLE"),
            _ => None,
        };
        if let Some(n) = next {
            v["lifecycleState"] = json!(n);
        }
        v
    }
}

async fn handle(State(oci): State<Arc<Oci>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().trim_start_matches('/').to_owned();
    if let Some(route) = path.strip_prefix("_admin/") {
        let (status, value) = oci.admin.handle(method.as_str(), route, &body, oci.as_ref());
        return (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), axum::Json(value)).into_response();
    }
    let Some(rest) = path.strip_prefix("20160918/") else { return not_found() };
    let segs: Vec<&str> = rest.split('/').collect();
    let (collection, id) = (segs[0], segs.get(1).copied());
    let kind = match collection {
        "vcns" => "vcn",
        "subnets" => "subnet",
        "computeClusters" => "computecluster",
        "instances" => "instance",
        _ => return not_found(),
    };
    let operation = match (method.as_str(), id) {
        ("POST", None) if kind == "instance" => "LaunchInstance".to_string(),
        ("POST", None) => format!("Create{}", collection_name(collection)),
        ("GET", None) => format!("List{}", plural(collection)),
        ("GET", Some(_)) => format!("Get{}", collection_name(collection)),
        ("DELETE", Some(_)) if kind == "instance" => "TerminateInstance".to_string(),
        ("DELETE", Some(_)) => format!("Delete{}", collection_name(collection)),
        _ => return not_found(),
    };
    {
        let store = oci.store.lock().unwrap();
        if let Err(why) = verify(&store.keys, &method, &uri, &headers, &body) {
            eprintln!("oci emulator: 401 for {method} {uri}: {why}");
            return unauthenticated();
        }
    }
    if let Some(fault) = oci.admin.on_request("core", &operation) {
        match fault.kind {
            FaultKind::Latency => tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await,
            // OCI sends no Retry-After with its 429.
            FaultKind::Throttle => return error(429, "TooManyRequests", "Too many requests for the tenancy"),
            FaultKind::Capacity => return error(500, "InternalError", "Out of host capacity."),
            FaultKind::ServerError => return error(500, "InternalError", "Internal error occurred"),
        }
    }
    let mut store = oci.store.lock().unwrap();
    match (method.as_str(), id) {
        ("POST", None) => {
            let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
                return error(400, "InvalidParameter", "The body is not JSON.");
            };
            let Some(compartment) = value.get("compartmentId").and_then(Value::as_str).map(str::to_owned) else {
                return error(400, "MissingParameter", "compartmentId is required.");
            };
            if kind == "instance" && value.get("shape").and_then(Value::as_str).is_none() {
                return error(400, "MissingParameter", "shape is required.");
            }
            let new_id = ocid(&mut store, kind);
            value["id"] = json!(new_id);
            value["compartmentId"] = json!(compartment);
            value["lifecycleState"] = json!("PROVISIONING");
            value["timeCreated"] = json!("2026-01-01T00:00:00.000Z");
            store.resources.insert(new_id.clone(), Stored { kind, value: value.clone(), changed: Instant::now() });
            let mut resp = (StatusCode::OK, axum::Json(value)).into_response();
            resp.headers_mut().insert("etag", format!("\"{new_id}\"").parse().unwrap());
            resp
        }
        ("GET", Some(id)) => match store.resources.get(id).filter(|s| s.kind == kind) {
            Some(s) => (StatusCode::OK, axum::Json(Oci::view(s))).into_response(),
            None => not_found(),
        },
        ("GET", None) => {
            let query: BTreeMap<String, String> = uri
                .query()
                .unwrap_or_default()
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let Some(compartment) = query.get("compartmentId") else { return error(400, "MissingParameter", "compartmentId is required.") };
            let items: Vec<Value> = store
                .resources
                .values()
                .filter(|s| s.kind == kind && s.value["compartmentId"].as_str() == Some(compartment))
                .map(Oci::view)
                .filter(|v| {
                    query.iter().all(|(k, want)| {
                        k == "compartmentId" || k == "limit" || k == "page" || v.get(k).and_then(Value::as_str) == Some(want)
                    })
                })
                .collect();
            (StatusCode::OK, axum::Json(Value::Array(items))).into_response()
        }
        ("DELETE", Some(id)) => {
            let Some(stored) = store.resources.get_mut(id).filter(|s| s.kind == kind) else { return not_found() };
            if kind == "instance" {
                // Terminated instances stay listed as TERMINATED for a while, as in OCI.
                stored.value["lifecycleState"] = json!("TERMINATING");
                stored.changed = Instant::now();
            } else {
                store.resources.remove(id);
            }
            StatusCode::NO_CONTENT.into_response()
        }
        _ => not_found(),
    }
}

fn collection_name(collection: &str) -> &'static str {
    match collection {
        "vcns" => "Vcn",
        "subnets" => "Subnet",
        "computeClusters" => "ComputeCluster",
        _ => "Instance",
    }
}

fn plural(collection: &str) -> &'static str {
    match collection {
        "vcns" => "Vcns",
        "subnets" => "Subnets",
        "computeClusters" => "ComputeClusters",
        _ => "Instances",
    }
}

impl Emulated for Oci {
    fn reset(&self) {
        let mut store = self.store.lock().unwrap();
        let keys = std::mem::take(&mut store.keys);
        *store = Store { keys, ..Store::default() };
    }

    fn inventory(&self) -> Value {
        let store = self.store.lock().unwrap();
        let mut core: BTreeMap<&str, Vec<String>> =
            ["vcn", "subnet", "computecluster", "instance"].into_iter().map(|k| (k, Vec::new())).collect();
        for (id, s) in &store.resources {
            let state = Oci::view(s)["lifecycleState"].as_str().unwrap_or_default().to_owned();
            if state != "TERMINATED" {
                core.entry(s.kind).or_default().push(id.clone());
            }
        }
        let empty = core.values().all(Vec::is_empty);
        json!({"cloud": "oci", "empty": empty, "resources": {"core": core}})
    }

    fn out_of_band(&self, change: &Value) -> Result<Value, String> {
        let mut store = self.store.lock().unwrap();
        let id = change.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        let action = change.get("action").and_then(Value::as_str).unwrap_or_default();
        match (action, store.resources.get_mut(&id)) {
            ("terminate_instance", Some(s)) if s.kind == "instance" => {
                s.value["lifecycleState"] = json!("TERMINATED");
                Ok(json!({"done": action, "id": id}))
            }
            ("delete", Some(_)) => {
                store.resources.remove(&id);
                Ok(json!({"done": action, "id": id}))
            }
            _ => Err(format!("cannot {action} {id}; valid actions: terminate_instance, delete")),
        }
    }

    fn extra_admin(&self, method: &str, route: &str, body: &Value) -> Option<(u16, Value)> {
        if (method, route) != ("POST", "keys") {
            return None;
        }
        let key_id = body.get("key_id").and_then(Value::as_str)?;
        let pem = body.get("public_key_pem").and_then(Value::as_str)?;
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let Ok(der) = STANDARD.decode(b64.trim()) else { return Some((400, json!({"error": "public_key_pem is not PEM"}))) };
        self.store.lock().unwrap().keys.insert(key_id.to_owned(), der);
        Some((200, json!({"registered": key_id})))
    }
}
