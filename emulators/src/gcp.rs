//! Google Cloud Compute Engine emulator: the REST subset the provider uses (networks, subnetworks,
//! firewalls, resource policies, instances with insert/bulkInsert/get/list with filters/delete, and zone,
//! region and global operations), in memory, on 127.0.0.1. Request bodies are read with
//! google-cloud-compute-v1's own serde models and responses are written through them, so the wire format
//! cannot drift from the client the provider uses. Instances go PROVISIONING -> STAGING -> RUNNING;
//! operations RUNNING -> DONE, so pollers really poll.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use google_cloud_compute_v1::model;
use serde_json::{Value, json};

use crate::admin::{Admin, Emulated, FaultKind};

const BASE: &str = "https://www.googleapis.com/compute/v1/";
/// How long an operation stays RUNNING, and an instance PROVISIONING/STAGING.
const OPERATION_SECONDS: f64 = 0.2;
const STAGING_AFTER: f64 = 0.2;
const RUNNING_AFTER: f64 = 0.5;

struct Stored {
    kind: &'static str,
    value: Value,
    created: Instant,
}

#[derive(Default)]
struct Store {
    lustre: crate::gcp_lustre::Lustre,
    /// Service networking (private service access) connections, by consumer network path.
    connections: BTreeMap<String, Value>,
    /// Keyed by relative path, e.g. `projects/p/zones/z/instances/n`.
    resources: BTreeMap<String, Stored>,
    operations: BTreeMap<String, (Value, Instant)>,
    next_id: u64,
}

pub struct Gcp {
    store: Mutex<Store>,
    pub admin: Admin,
}

/// A running emulator: its base URL (use as the client's endpoint) and the shared state for tests.
pub struct Running {
    pub endpoint: String,
    pub addr: SocketAddr,
    pub emulator: Arc<Gcp>,
}

pub async fn serve(bind: &str) -> std::io::Result<Running> {
    let emulator = Arc::new(Gcp { store: Mutex::new(Store::default()), admin: Admin::default() });
    let addr = crate::admin::serve_http(axum::Router::new().fallback(handle).with_state(emulator.clone()), bind).await?;
    Ok(Running { endpoint: format!("http://{addr}"), addr, emulator })
}

fn error(status: u16, reason: &str, message: &str) -> Response {
    let domain = if reason == "rateLimitExceeded" { "usageLimits" } else { "global" };
    let body = json!({"error": {"code": status, "message": message, "errors": [{"message": message, "domain": domain, "reason": reason}]}});
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
}

/// An API error before it becomes a response: status, reason, message.
struct ApiError(u16, &'static str, String);

impl ApiError {
    fn response(self) -> Response {
        error(self.0, self.1, &self.2)
    }
}

fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

/// Checks a body against the crate's model type `T` (request bodies on the way in, our answers on the way
/// out). The JSON itself is kept: the crate would re-encode enums as numbers, the service sends names.
fn through<T: serde::de::DeserializeOwned>(value: Value) -> Result<Value, String> {
    serde_json::from_value::<T>(value.clone()).map_err(|e| format!("not a valid body: {e}"))?;
    Ok(value)
}

fn typed_out(kind: &str, value: Value) -> Result<Value, String> {
    match kind {
        "instances" => through::<model::Instance>(value),
        "networks" => through::<model::Network>(value),
        "subnetworks" => through::<model::Subnetwork>(value),
        "firewalls" => through::<model::Firewall>(value),
        "resourcePolicies" => through::<model::ResourcePolicy>(value),
        _ => Ok(value),
    }
}

fn kind_of(collection: &str) -> Option<&'static str> {
    Some(match collection {
        "instances" => "instances",
        "networks" => "networks",
        "subnetworks" => "subnetworks",
        "firewalls" => "firewalls",
        "resourcePolicies" => "resourcePolicies",
        "addresses" => "addresses",
        _ => return None,
    })
}

/// `labels.k = "v" AND status = RUNNING AND name = "x"`: the filter forms the provider sends.
fn matches_filter(value: &Value, filter: &str) -> bool {
    filter.split(" AND ").map(str::trim).filter(|t| !t.is_empty()).all(|term| {
        let term = term.trim_start_matches('(').trim_end_matches(')');
        let Some((field, wanted)) = term.split_once('=') else { return true };
        let (field, wanted) = (field.trim().trim_end_matches('!').trim(), wanted.trim().trim_matches('"'));
        let negate = term.contains("!=");
        let actual = field.split('.').try_fold(value, |v, key| v.get(key)).and_then(Value::as_str).unwrap_or_default();
        (actual == wanted) != negate
    })
}

/// The `n`th address handed out in `cidr` (skipping the network and gateway addresses, as Google does).
fn host_address(cidr: &str, n: u64) -> String {
    let (base, len) = cidr
        .split_once('/')
        .and_then(|(ip, len)| Some((ip.parse::<std::net::Ipv4Addr>().ok()?, len.parse::<u32>().ok()?)))
        .unwrap_or((std::net::Ipv4Addr::new(10, 128, 0, 0), 20));
    let hosts = (1u64 << (32 - len.min(30))).saturating_sub(4).max(1);
    std::net::Ipv4Addr::from(u32::from(base) + 2 + (n % hosts) as u32).to_string()
}

impl Gcp {
    /// The primary range of a stored subnetwork, by its URL or relative path.
    fn subnet_range(store: &Store, subnetwork: &str) -> Option<String> {
        let path = subnetwork.split("/compute/v1/").last().unwrap_or(subnetwork).trim_start_matches('/');
        store.resources.get(path).and_then(|s| s.value["ipCidrRange"].as_str().map(str::to_owned))
    }

    fn id(store: &mut Store) -> String {
        store.next_id += 1;
        format!("{}", 4_000_000_000_000_000_000u64 + store.next_id)
    }

    /// A new operation on `scope` (`projects/p/zones/z`), DONE after OPERATION_SECONDS; an `error`
    /// makes it finish with that error, as Compute Engine reports capacity problems.
    fn operation(store: &mut Store, scope: &str, op_type: &str, target: &str, error: Option<(&str, String)>) -> Value {
        let id = Self::id(store);
        let name = format!("operation-{id}");
        let mut op = json!({
            "kind": "compute#operation", "id": id, "name": name, "operationType": op_type, "status": "RUNNING", "progress": 0,
            "targetLink": format!("{BASE}{target}"), "selfLink": format!("{BASE}{scope}/operations/{name}"),
            "insertTime": "2026-01-01T00:00:00.000-00:00",
        });
        let parts: Vec<&str> = scope.split('/').collect();
        if parts.len() >= 4 {
            let key = if parts[2] == "zones" { "zone" } else { "region" };
            op[key] = json!(format!("{BASE}{scope}"));
        }
        if let Some((code, message)) = error {
            op["error"] = json!({"errors": [{"code": code, "message": message}]});
            op["httpErrorStatusCode"] = json!(503);
        }
        store.operations.insert(format!("{scope}/operations/{name}"), (op.clone(), Instant::now()));
        op
    }

    fn view_operation(op: &(Value, Instant)) -> Value {
        let mut v = op.0.clone();
        if op.1.elapsed().as_secs_f64() >= OPERATION_SECONDS {
            v["status"] = json!("DONE");
            v["progress"] = json!(100);
            v["endTime"] = json!("2026-01-01T00:00:01.000-00:00");
        }
        v
    }

    fn view(stored: &Stored) -> Value {
        let mut v = stored.value.clone();
        if stored.kind == "instances" && v.get("status").and_then(Value::as_str) != Some("TERMINATED") {
            let age = stored.created.elapsed().as_secs_f64();
            let status = if age >= RUNNING_AFTER {
                "RUNNING"
            } else if age >= STAGING_AFTER {
                "STAGING"
            } else {
                "PROVISIONING"
            };
            v["status"] = json!(status);
        }
        v
    }

    fn insert(store: &mut Store, scope: &str, collection: &str, mut body: Value) -> Result<String, ApiError> {
        let kind = kind_of(collection).ok_or_else(|| ApiError(404, "notFound", "unknown collection".into()))?;
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if name.is_empty() {
            return Err(ApiError(400, "required", "Required field 'resource.name' not specified".into()));
        }
        let path = format!("{scope}/{collection}/{name}");
        if store.resources.contains_key(&path) {
            return Err(ApiError(409, "alreadyExists", format!("The resource '{path}' already exists")));
        }
        let id = Self::id(store);
        body["id"] = json!(id);
        body["selfLink"] = json!(format!("{BASE}{path}"));
        body["creationTimestamp"] = json!("2026-01-01T00:00:00.000-00:00");
        body["kind"] = json!(format!("compute#{}", kind.trim_end_matches('s').replace("resourcePolicie", "resourcePolicy")));
        let parts: Vec<&str> = scope.split('/').collect();
        if parts.len() >= 4 {
            let key = if parts[2] == "zones" { "zone" } else { "region" };
            body[key] = json!(format!("{BASE}{scope}"));
        }
        if kind == "instances" {
            body["status"] = json!("PROVISIONING");
            let n = store.next_id;
            if let Some(nics) = body.get_mut("networkInterfaces").and_then(Value::as_array_mut) {
                for nic in nics.iter_mut().filter(|nic| nic.get("networkIP").is_none()) {
                    let range = nic["subnetwork"].as_str().and_then(|s| Self::subnet_range(store, s));
                    nic["networkIP"] = json!(host_address(range.as_deref().unwrap_or("10.128.0.0/20"), n));
                }
            }
        }
        let value = typed_out(kind, body).map_err(|e| ApiError(400, "invalid", e))?;
        store.resources.insert(path.clone(), Stored { kind, value, created: Instant::now() });
        Ok(path)
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    filter: Option<String>,
    max_results: Option<usize>,
    page_token: Option<String>,
}

async fn handle(State(gcp): State<Arc<Gcp>>, method: Method, uri: Uri, Query(query): Query<ListQuery>, body: Bytes) -> Response {
    let path = uri.path().trim_start_matches('/');
    if let Some(route) = path.strip_prefix("_admin/") {
        let (status, value) = gcp.admin.handle(method.as_str(), route, &body, gcp.as_ref());
        return (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), axum::Json(value)).into_response();
    }
    if let Some(rest) = path.strip_prefix("v1/services/servicenetworking.googleapis.com/connections") {
        return service_networking(&gcp, method.as_str(), rest, &uri, &body);
    }
    if path.starts_with("v1/") {
        let operation = match (method.as_str(), path.contains("/operations/"), path.matches('/').count()) {
            (_, true, _) => "lustre:operations.get",
            ("POST", _, _) => "lustre:instances.create",
            ("PATCH", _, _) => "lustre:instances.patch",
            ("DELETE", _, _) => "lustre:instances.delete",
            ("GET", _, 5) => "lustre:instances.list",
            _ => "lustre:instances.get",
        };
        let (service, op) = operation.split_once(':').unwrap_or(("lustre", operation));
        if let Some(fault) = gcp.admin.on_request(service, op) {
            match fault.kind {
                FaultKind::Latency => tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await,
                FaultKind::Throttle => {
                    return crate::gcp_lustre::error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Requests'");
                }
                FaultKind::Capacity => {
                    return crate::gcp_lustre::error(429, "RESOURCE_EXHAUSTED", "Insufficient Managed Lustre capacity in this zone");
                }
                FaultKind::ServerError => return crate::gcp_lustre::error(503, "UNAVAILABLE", "The service is currently unavailable."),
                FaultKind::NotFound => return crate::gcp_lustre::error(404, "NOT_FOUND", "Resource not found."),
            }
        }
        let query: BTreeMap<String, String> = uri.query().map(parse_query).unwrap_or_default();
        let mut store = gcp.store.lock().unwrap();
        return store
            .lustre
            .handle(method.as_str(), path, &query, &body)
            .unwrap_or_else(|| error(404, "notFound", &format!("no route {path}")));
    }
    let Some(rest) = path.strip_prefix("compute/v1/") else { return error(404, "notFound", &format!("no route {path}")) };
    let segs: Vec<&str> = rest.split('/').collect();
    // projects/{p}/{global | zones/{z} | regions/{r} | aggregated}/{collection}[/{name}[/{verb}]]
    if segs.len() < 4 || segs[0] != "projects" {
        return error(404, "notFound", &format!("no route {rest}"));
    }
    let (scope, tail) = match segs[2] {
        "global" => (segs[..3].join("/"), &segs[3..]),
        "zones" | "regions" if segs.len() >= 5 => (segs[..4].join("/"), &segs[4..]),
        "aggregated" => (segs[..3].join("/"), &segs[3..]),
        _ => return error(404, "notFound", &format!("no route {rest}")),
    };
    let collection = tail[0];
    let operation = match (method.as_str(), tail.len(), tail.get(1).copied()) {
        (_, _, _) if collection == "operations" => "operations.get".to_string(),
        ("POST", 2, Some("bulkInsert")) => "instances.bulkInsert".to_string(),
        ("POST", 3, _) if collection == "instances" && tail[2] == "setLabels" => "instances.setLabels".to_string(),
        ("POST", 3, _) if collection == "instances" && tail[2] == "start" => "instances.start".to_string(),
        ("POST", 1, _) => format!("{collection}.insert"),
        ("GET", 1, _) if segs[2] == "aggregated" => format!("{collection}.aggregatedList"),
        ("GET", 1, _) => format!("{collection}.list"),
        ("GET", 2, _) => format!("{collection}.get"),
        ("DELETE", 2, _) => format!("{collection}.delete"),
        _ => return error(404, "notFound", &format!("no route {method} {rest}")),
    };
    if let Some(fault) = gcp.admin.on_request("compute", &operation) {
        match fault.kind {
            FaultKind::Latency => tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await,
            FaultKind::Throttle => return error(403, "rateLimitExceeded", "Rate Limit Exceeded"),
            FaultKind::ServerError => return error(503, "backendError", "Backend Error"),
            FaultKind::NotFound => return error(404, "notFound", "The resource was not found"),
            FaultKind::Capacity if operation.starts_with("instances.") && operation.contains("nsert") => {
                let mut store = gcp.store.lock().unwrap();
                let zone = scope.clone();
                let message = format!(
                    "The zone '{zone}' does not have enough resources available to fulfill the request. Try a different zone, or try again later."
                );
                let target = format!("{scope}/instances");
                let op = Gcp::operation(&mut store, &scope, "insert", &target, Some(("ZONE_RESOURCE_POOL_EXHAUSTED", message)));
                return ok(op);
            }
            FaultKind::Capacity => return error(503, "resourceExhausted", "Resource exhausted"),
        }
    }
    let mut store = gcp.store.lock().unwrap();
    if collection == "operations" {
        let key = format!("{scope}/operations/{}", tail.get(1).copied().unwrap_or_default());
        return match store.operations.get(&key) {
            Some(op) => ok(Gcp::view_operation(op)),
            None => error(404, "notFound", &format!("The resource '{key}' was not found")),
        };
    }
    let Some(kind) = kind_of(collection) else { return error(404, "notFound", &format!("unknown collection {collection}")) };
    match operation.rsplit('.').next().unwrap_or_default() {
        "insert" => {
            let parsed: Result<Value, String> =
                serde_json::from_slice::<Value>(&body).map_err(|e| e.to_string()).and_then(|v| typed_out(kind, v));
            let body = match parsed {
                Ok(b) => b,
                Err(e) => return error(400, "invalid", &format!("Invalid value for {kind}: {e}")),
            };
            match Gcp::insert(&mut store, &scope, collection, body) {
                Ok(path) => ok(Gcp::operation(&mut store, &scope, "insert", &path, None)),
                Err(e) => e.response(),
            }
        }
        "bulkInsert" => {
            let bulk: model::BulkInsertInstanceResource = match serde_json::from_slice(&body) {
                Ok(b) => b,
                Err(e) => return error(400, "invalid", &format!("Invalid BulkInsertInstanceResource: {e}")),
            };
            let properties = serde_json::to_value(bulk.instance_properties.clone().unwrap_or_default()).unwrap_or(json!({}));
            let names: Vec<String> = if !bulk.per_instance_properties.is_empty() {
                bulk.per_instance_properties.keys().cloned().collect()
            } else {
                let pattern = bulk.name_pattern.clone().unwrap_or_else(|| "instance-####".into());
                let hashes = pattern.chars().filter(|c| *c == '#').count().max(1);
                let prefix = pattern.trim_end_matches('#');
                (0..bulk.count.unwrap_or(0)).map(|i| format!("{prefix}{:0width$}", i + 1, width = hashes)).collect()
            };
            if names.is_empty() {
                return error(400, "invalid", "bulkInsert needs count or perInstanceProperties");
            }
            if let Some(taken) = names.iter().find(|n| store.resources.contains_key(&format!("{scope}/instances/{n}"))) {
                return error(409, "alreadyExists", &format!("The resource '{scope}/instances/{taken}' already exists"));
            }
            for name in &names {
                let mut instance = properties.clone();
                instance["name"] = json!(name);
                if let Some(machine) = instance.get("machineType").and_then(Value::as_str)
                    && !machine.contains('/')
                {
                    instance["machineType"] = json!(format!("{BASE}{scope}/machineTypes/{machine}"));
                }
                if let Err(e) = Gcp::insert(&mut store, &scope, "instances", instance) {
                    return e.response();
                }
            }
            let target = format!("{scope}/instances");
            ok(Gcp::operation(&mut store, &scope, "bulkInsert", &target, None))
        }
        "start" => {
            let key = format!("{scope}/instances/{}", tail[1]);
            let Some(stored) = store.resources.get_mut(&key) else {
                return error(404, "notFound", &format!("The resource '{key}' was not found"));
            };
            stored.value["status"] = json!("RUNNING");
            ok(Gcp::operation(&mut store, &scope, "start", &key, None))
        }
        "setLabels" => {
            let key = format!("{scope}/instances/{}", tail[1]);
            let request: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
            let Some(stored) = store.resources.get_mut(&key) else {
                return error(404, "notFound", &format!("The resource '{key}' was not found"));
            };
            let current = stored.value.get("labelFingerprint").cloned().unwrap_or(json!("42WmSpB8rSM="));
            if request.get("labelFingerprint").is_some_and(|f| *f != current) {
                return error(412, "conditionNotMet", "Labels fingerprint either invalid or resource labels have changed");
            }
            stored.value["labels"] = request.get("labels").cloned().unwrap_or(json!({}));
            let n = stored.value.to_string().len();
            stored.value["labelFingerprint"] = json!(format!("{:012x}", n));
            ok(Gcp::operation(&mut store, &scope, "setLabels", &key, None))
        }
        "get" => {
            let key = format!("{scope}/{collection}/{}", tail[1]);
            match store.resources.get(&key) {
                Some(s) => ok(Gcp::view(s)),
                None => error(404, "notFound", &format!("The resource '{key}' was not found")),
            }
        }
        "delete" => {
            let key = format!("{scope}/{collection}/{}", tail[1]);
            if store.resources.remove(&key).is_none() {
                return error(404, "notFound", &format!("The resource '{key}' was not found"));
            }
            ok(Gcp::operation(&mut store, &scope, "delete", &key, None))
        }
        "list" | "aggregatedList" => {
            let prefix = if segs[2] == "aggregated" { format!("{}/", segs[..2].join("/")) } else { format!("{scope}/{collection}/") };
            let mut items: Vec<Value> = store
                .resources
                .iter()
                .filter(|(k, s)| k.starts_with(&prefix) && s.kind == kind)
                .map(|(_, s)| Gcp::view(s))
                .filter(|v| query.filter.as_deref().is_none_or(|f| matches_filter(v, f)))
                .collect();
            let start: usize = query.page_token.as_deref().and_then(|t| t.parse().ok()).unwrap_or(0);
            let page = query.max_results.unwrap_or(500).clamp(1, 500);
            let next = (items.len() > start + page).then(|| (start + page).to_string());
            items = items.into_iter().skip(start).take(page).collect();
            if segs[2] == "aggregated" {
                let mut scoped: BTreeMap<String, Vec<Value>> = BTreeMap::new();
                for item in items {
                    let zone =
                        item.get("zone").and_then(Value::as_str).unwrap_or_default().rsplit('/').next().unwrap_or_default().to_owned();
                    scoped.entry(format!("zones/{zone}")).or_default().push(item);
                }
                let items: serde_json::Map<String, Value> = scoped.into_iter().map(|(k, v)| (k, json!({"instances": v}))).collect();
                return ok(json!({"kind": "compute#instanceAggregatedList", "items": items, "nextPageToken": next}));
            }
            ok(json!({"kind": format!("compute#{}List", kind.trim_end_matches('s')), "items": items, "nextPageToken": next}))
        }
        _ => error(404, "notFound", "unsupported"),
    }
}

/// Service Networking's connections (private service access for Managed Lustre): create, list by
/// network, patch the reserved ranges, delete. Operations complete at once.
fn service_networking(gcp: &Gcp, method: &str, rest: &str, uri: &Uri, body: &[u8]) -> Response {
    let op = if method == "GET" { "connections.list" } else { "connections.write" };
    if let Some(fault) = gcp.admin.on_request("servicenetworking", op) {
        match fault.kind {
            FaultKind::Latency => {}
            FaultKind::Throttle => return error(429, "rateLimitExceeded", "Quota exceeded"),
            _ => return error(503, "backendError", "Backend Error"),
        }
    }
    let body: Value = serde_json::from_slice(body).unwrap_or(json!({}));
    let query: BTreeMap<String, String> = uri.query().map(parse_query).unwrap_or_default();
    let mut store = gcp.store.lock().unwrap();
    let done =
        |response: Value| ok(json!({"name": format!("operations/pssn.{}", store_len(&response)), "done": true, "response": response}));
    match (method, rest) {
        ("POST", "") => {
            let Some(network) = body["network"].as_str().map(str::to_owned) else { return error(400, "invalid", "network is required") };
            if store.connections.contains_key(&network) {
                return error(409, "alreadyExists", &format!("a connection for {network} exists; patch its reserved ranges"));
            }
            let connection = json!({"network": network, "reservedPeeringRanges": body["reservedPeeringRanges"], "service": "services/servicenetworking.googleapis.com", "peering": "servicenetworking-googleapis-com"});
            store.connections.insert(network, connection.clone());
            done(connection)
        }
        ("GET", "") => {
            let network = query.get("network").cloned().unwrap_or_default();
            let found: Vec<Value> = store.connections.get(&network).cloned().into_iter().collect();
            ok(json!({"connections": found}))
        }
        ("PATCH", "/-") => {
            let Some(network) = body["network"].as_str().map(str::to_owned) else { return error(400, "invalid", "network is required") };
            match store.connections.get_mut(&network) {
                Some(c) => {
                    c["reservedPeeringRanges"] = body["reservedPeeringRanges"].clone();
                    let c = c.clone();
                    done(c)
                }
                None => error(404, "notFound", &format!("no connection for {network}")),
            }
        }
        ("POST", "/servicenetworking-googleapis-com:deleteConnection") => {
            let network = body["consumerNetwork"].as_str().unwrap_or_default().to_owned();
            match store.connections.remove(&network) {
                Some(_) => done(json!({})),
                None => error(404, "notFound", &format!("no connection for {network}")),
            }
        }
        _ => error(404, "notFound", &format!("no route {method} connections{rest}")),
    }
}

fn store_len(v: &Value) -> usize {
    v.to_string().len()
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_owned(), v.replace("%2C", ",").replace("%2F", "/"))).collect()
}

impl Emulated for Gcp {
    fn reset(&self) {
        *self.store.lock().unwrap() = Store::default();
    }

    fn inventory(&self) -> Value {
        let store = self.store.lock().unwrap();
        let mut compute: BTreeMap<&str, Vec<String>> =
            ["instances", "networks", "subnetworks", "firewalls", "resourcePolicies", "addresses"]
                .into_iter()
                .map(|k| (k, Vec::new()))
                .collect();
        for (path, stored) in &store.resources {
            compute.entry(stored.kind).or_default().push(path.clone());
        }
        let lustre: Vec<&String> = store.lustre.instances.keys().collect();
        let connections: Vec<&String> = store.connections.keys().collect();
        let empty = store.resources.is_empty() && lustre.is_empty() && connections.is_empty();
        json!({"cloud": "gcp", "empty": empty, "resources": {"compute": compute, "lustre": {"instances": lustre},
               "servicenetworking": {"connections": connections}}})
    }

    fn snapshot(&self) -> Value {
        let mut store = self.store.lock().unwrap();
        let compute: serde_json::Map<String, Value> = store.resources.iter().map(|(path, s)| (path.clone(), Gcp::view(s))).collect();
        let keys: Vec<String> = store.lustre.instances.keys().cloned().collect();
        let lustre: serde_json::Map<String, Value> =
            keys.into_iter().filter_map(|k| store.lustre.snapshot_of(&k).map(|v| (k, v))).collect();
        let connections: serde_json::Map<String, Value> = store.connections.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        json!({"compute": compute, "lustre": lustre, "servicenetworking": connections})
    }

    fn out_of_band(&self, change: &Value) -> Result<Value, String> {
        let mut store = self.store.lock().unwrap();
        let id = change.get("id").and_then(Value::as_str).unwrap_or_default().trim_start_matches(BASE).to_owned();
        let action = change.get("action").and_then(Value::as_str).unwrap_or_default();
        match action {
            // Another tool's instance beside ours: a copy of one under another name, with its labels changed.
            "copy" => {
                let Some(source) = store.resources.get(&id).filter(|s| s.kind == "instances") else {
                    return Err(format!("no instance at {id}"));
                };
                let name = change.get("name").and_then(Value::as_str).ok_or("copy needs the new instance's name")?.to_owned();
                let new_path = format!("{}/{name}", id.rsplit_once('/').map_or("", |(scope, _)| scope));
                if store.resources.contains_key(&new_path) {
                    return Err(format!("{new_path} exists"));
                }
                let mut value = source.value.clone();
                value["name"] = json!(name);
                value["selfLink"] = json!(format!("{BASE}{new_path}"));
                store.next_id += 1;
                value["id"] = json!(format!("{}", 8_000_000_000_000u64 + store.next_id));
                if let (Some(labels), Some(extra)) = (value["labels"].as_object_mut(), change.get("labels").and_then(Value::as_object)) {
                    labels.extend(extra.clone());
                }
                // Running for a while already: its status does not change under the test.
                let created = Instant::now().checked_sub(std::time::Duration::from_secs(60)).unwrap_or_else(Instant::now);
                store.resources.insert(new_path.clone(), Stored { kind: "instances", value, created });
                Ok(json!({"done": action, "id": new_path}))
            }
            "delete" if store.lustre.instances.remove(&id).is_some() => Ok(json!({"done": action, "id": id})),
            "delete" => store.resources.remove(&id).map(|_| json!({"done": action, "id": id})).ok_or(format!("nothing at {id}")),
            "stop_instance" => match store.resources.get_mut(&id) {
                Some(s) if s.kind == "instances" => {
                    s.value["status"] = json!("TERMINATED");
                    Ok(json!({"done": action, "id": id}))
                }
                _ => Err(format!("no instance at {id}")),
            },
            other => Err(format!("unknown out-of-band action {other:?}; valid: copy, delete, stop_instance")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_on_labels_status_and_name() {
        let v = json!({"name": "train-1", "status": "RUNNING", "labels": {"hpc_cluster": "train"}});
        assert!(matches_filter(&v, r#"labels.hpc_cluster = "train""#));
        assert!(matches_filter(&v, r#"(labels.hpc_cluster = "train") AND (status = RUNNING)"#));
        assert!(!matches_filter(&v, r#"labels.hpc_cluster = "other""#));
        assert!(!matches_filter(&v, r#"status != RUNNING"#));
    }
}
