//! OCI emulator: the Core API subset the provider uses (VCNs, subnets, compute clusters, instances,
//! instance configurations, cluster networks with their instance pool, work requests) and File Storage with
//! Lustre (`/20250228/lustreFileSystems`, with its work requests) in memory on 127.0.0.1, with every request's HTTP signature verified against the API public keys registered
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
    /// Work requests: (operation type, resource id, started, failure message).
    work_requests: BTreeMap<String, (String, String, Instant, Option<String>)>,
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
    let addr = crate::admin::serve_http(axum::Router::new().fallback(handle).with_state(emulator.clone()), bind).await?;
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
    let Some(rest) = path.strip_prefix("20160918/").or_else(|| path.strip_prefix("20250228/")) else { return not_found() };
    let segs: Vec<&str> = rest.split('/').collect();
    let (collection, id) = (segs[0], segs.get(1).copied());
    let kind = match collection {
        "vcns" => "vcn",
        "subnets" => "subnet",
        "computeClusters" => "computecluster",
        "instances" => "instance",
        "instanceConfigurations" => "instanceconfiguration",
        "clusterNetworks" => "clusternetwork",
        "lustreFileSystems" => "lustrefilesystem",
        "workRequests" => "workrequest",
        _ => return not_found(),
    };
    let operation = match (method.as_str(), id) {
        ("GET", Some(_)) if segs.get(2) == Some(&"instances") => "ListClusterNetworkInstances".to_string(),
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
            if kind == "lustrefilesystem"
                && let Err(e) = check_lustre(&value)
            {
                return error(400, "InvalidParameter", &e);
            }
            let new_id = ocid(&mut store, kind);
            if kind == "clusternetwork"
                && let Err(message) = launch_pools(&mut store, &new_id, &mut value)
            {
                return error(404, "NotAuthorizedOrNotFound", &message);
            }
            value["id"] = json!(new_id);
            value["compartmentId"] = json!(compartment);
            value["lifecycleState"] = json!("PROVISIONING");
            value["timeCreated"] = json!("2026-01-01T00:00:00.000Z");
            store.resources.insert(new_id.clone(), Stored { kind, value: value.clone(), changed: Instant::now() });
            let asynchronous = matches!(kind, "clusternetwork" | "lustrefilesystem");
            let mut resp =
                (if kind == "lustrefilesystem" { StatusCode::ACCEPTED } else { StatusCode::OK }, axum::Json(value)).into_response();
            resp.headers_mut().insert("etag", format!("\"{new_id}\"").parse().unwrap());
            if asynchronous {
                let wr = ocid(&mut store, "workrequest");
                store.work_requests.insert(wr.clone(), (operation.clone(), new_id.clone(), Instant::now(), None));
                resp.headers_mut().insert("opc-work-request-id", wr.parse().unwrap());
            }
            resp
        }
        ("GET", Some(id)) if kind == "workrequest" => match store.work_requests.get(id) {
            Some((op, target, started, failure)) => {
                let age = started.elapsed().as_secs_f64();
                let status = match (failure, age >= SETTLE, age >= SETTLE / 2.0) {
                    (Some(_), true, _) => "FAILED",
                    (None, true, _) => "SUCCEEDED",
                    (_, false, true) => "IN_PROGRESS",
                    _ => "ACCEPTED",
                };
                let percent = if age >= SETTLE { 100.0 } else { (age / SETTLE * 100.0).floor() };
                axum::Json(json!({"id": id, "operationType": op, "status": status, "percentComplete": percent,
                                  "resources": [{"identifier": target, "actionType": if status == "SUCCEEDED" { "CREATED" } else { "IN_PROGRESS" }}]}))
                .into_response()
            }
            None => not_found(),
        },
        ("GET", Some(id)) if segs.get(2) == Some(&"instances") => {
            // ListClusterNetworkInstances: every node of a cluster network in one call.
            if store.resources.get(id).is_none_or(|s| s.kind != "clusternetwork") {
                return not_found();
            }
            let items: Vec<Value> =
                store.resources.values().filter(|s| s.kind == "instance" && s.value["clusterNetworkId"] == id).map(Oci::view).collect();
            axum::Json(Value::Array(items)).into_response()
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
            if kind == "clusternetwork" {
                // Terminating a cluster network terminates its instance pool's instances.
                for s in store.resources.values_mut().filter(|s| s.kind == "instance" && s.value["clusterNetworkId"] == id) {
                    s.value["lifecycleState"] = json!("TERMINATING");
                    s.changed = Instant::now();
                }
            }
            if kind == "lustrefilesystem" {
                let wr = ocid(&mut store, "workrequest");
                store.work_requests.insert(wr.clone(), ("DELETE_LUSTRE_FILE_SYSTEM".into(), id.to_owned(), Instant::now(), None));
                let mut resp = StatusCode::ACCEPTED.into_response();
                resp.headers_mut().insert("opc-work-request-id", wr.parse().unwrap());
                return resp;
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
        "instanceConfigurations" => "InstanceConfiguration",
        "clusterNetworks" => "ClusterNetwork",
        "lustreFileSystems" => "LustreFileSystem",
        "workRequests" => "WorkRequest",
        _ => "Instance",
    }
}

fn plural(collection: &str) -> &'static str {
    match collection {
        "vcns" => "Vcns",
        "subnets" => "Subnets",
        "computeClusters" => "ComputeClusters",
        "instanceConfigurations" => "InstanceConfigurations",
        "clusterNetworks" => "ClusterNetworks",
        "lustreFileSystems" => "LustreFileSystems",
        "workRequests" => "WorkRequests",
        _ => "Instances",
    }
}

/// File Storage with Lustre's rules: 31,200 GB minimum, 10,400 GB steps up to 124,800, then 41,600; the
/// four performance tiers; file system names of at most 8 letters or digits.
fn check_lustre(v: &Value) -> Result<(), String> {
    let capacity = v.get("capacityInGBs").and_then(Value::as_i64).ok_or("capacityInGBs is required")?;
    let unit = if capacity > 124_800 { 41_600 } else { 10_400 };
    if capacity < 31_200 || capacity % unit != 0 {
        return Err(format!("capacityInGBs {capacity} is invalid: at least 31200, in steps of 10400 up to 124800 and of 41600 above."));
    }
    let tier = v.get("performanceTier").and_then(Value::as_str).unwrap_or_default();
    if !["MBPS_PER_TB_125", "MBPS_PER_TB_250", "MBPS_PER_TB_500", "MBPS_PER_TB_1000"].contains(&tier) {
        return Err(format!("performanceTier {tier:?} is invalid."));
    }
    let name = v.get("fileSystemName").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() || name.len() > 8 || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err("fileSystemName must be 1 to 8 letters or digits.".into());
    }
    Ok(())
}

/// A cluster network's instance pools, launched from their instance configurations.
fn launch_pools(store: &mut Store, network_id: &str, value: &mut Value) -> Result<(), String> {
    let ad = value["placementConfiguration"]["availabilityDomain"].as_str().unwrap_or_default().to_owned();
    let compartment = value["compartmentId"].as_str().unwrap_or_default().to_owned();
    let mut pools = Vec::new();
    for pool in value["instancePools"].as_array().cloned().unwrap_or_default() {
        let config_id = pool["instanceConfigurationId"].as_str().unwrap_or_default().to_owned();
        let Some(config) = store.resources.get(&config_id).filter(|s| s.kind == "instanceconfiguration") else {
            return Err(format!("Instance configuration {config_id} not found."));
        };
        let shape = config.value["instanceDetails"]["launchDetails"]["shape"].as_str().unwrap_or_default().to_owned();
        let size = pool["size"].as_u64().unwrap_or(0);
        let pool_id = ocid(store, "instancepool");
        for i in 0..size {
            let id = ocid(store, "instance");
            let instance = json!({"id": id, "compartmentId": compartment, "availabilityDomain": ad, "shape": shape, "lifecycleState": "PROVISIONING",
                                  "displayName": format!("inst-{i}"), "instancePoolId": pool_id, "clusterNetworkId": network_id,
                                  "instanceConfigurationId": config_id, "timeCreated": "2026-01-01T00:00:00.000Z"});
            store.resources.insert(id, Stored { kind: "instance", value: instance, changed: Instant::now() });
        }
        pools.push(json!({"id": pool_id, "instanceConfigurationId": config_id, "size": size, "lifecycleState": "PROVISIONING"}));
    }
    value["instancePools"] = Value::Array(pools);
    Ok(())
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
