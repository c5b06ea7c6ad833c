//! The vendors' published definitions as the judge of every call an emulator of ours receives and every
//! answer it gives. The definitions are not written here: `emulators/conformance/extract.py` reads them out
//! of the vendors' own packages (Google's discovery documents and the google-cloud-lustre protos, the
//! azure-mgmt-* models and operations, the oci SDK's models and clients) into one JSON file, and
//! `HPC_CONFORMANCE_DEFS` names that file.
//!
//! `HPC_CONFORMANCE=strict` turns the judge on: a request the definitions refuse (an operation or version
//! that does not exist, an unknown field, a wrong JSON type, a value outside an enum, an output-only field
//! sent, a required field missing, an unknown query parameter) is answered with that cloud's own error
//! shape and status, as the real API would; an answer of the emulator's own that the definitions would not
//! produce becomes a 500 naming the field, so the test that caused it fails. Without the switch nothing is
//! judged. With it but without a readable definitions file every request fails: a strict run never passes
//! by checking nothing.
//!
//! `HPC_CONFORMANCE_LOG`, a directory, collects what was judged (one JSON line per call: cloud, operation
//! id, version, verdict) so a run can show that every operation `notes/api-conformance.md` lists was
//! exercised, and that nothing outside it was called.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Which cloud's definitions and error shapes apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloud {
    Gcp,
    Azure,
    Oci,
}

impl Cloud {
    pub fn key(self) -> &'static str {
        match self {
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
            Cloud::Oci => "oci",
        }
    }
}

/// One operation of a vendor's API, as extract.py wrote it.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Operation {
    pub id: String,
    #[serde(default)]
    pub service: String,
    pub version: String,
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub query: Vec<String>,
    pub request: Option<String>,
    pub response: Option<String>,
    #[serde(default)]
    pub long_running: Option<Value>,
    /// Google: the dated interface version the method is at (`$apiVersion`), when it has one.
    #[serde(default)]
    pub interface_version: Option<String>,
    #[serde(skip)]
    segments: Vec<Segment>,
}

#[derive(Clone, Debug)]
enum Segment {
    Literal(String),
    /// `{name}` with an optional literal tail (`{connectionsId}:deleteConnection`).
    Param(String),
}

#[derive(Debug, serde::Deserialize)]
struct CloudDefs {
    operations: Vec<Operation>,
    schemas: BTreeMap<String, Value>,
}

#[derive(Debug, serde::Deserialize)]
pub struct Definitions {
    #[serde(default)]
    pub packages: BTreeMap<String, String>,
    clouds: BTreeMap<String, CloudDefs>,
}

/// Why a call is refused (or an answer judged wrong).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No operation of the API has this method and path.
    UnknownOperation,
    /// The operation exists, but not in this (api-)version.
    UnknownVersion,
    UnknownField,
    WrongType,
    BadEnum,
    ReadOnly,
    MissingRequired,
    UnknownQuery,
    /// A documented rule the schema cannot express (see `rules` in each emulator).
    Rule,
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub kind: Kind,
    /// The field's JSON path (`resource.groupPlacementPolicy.maxDistance`), empty for the whole call.
    pub field: String,
    pub message: String,
}

impl Violation {
    pub fn rule(field: &str, message: impl Into<String>) -> Self {
        Violation { kind: Kind::Rule, field: field.to_owned(), message: message.into() }
    }
}

/// Strict when `HPC_CONFORMANCE=strict`.
pub fn strict() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    *STRICT.get_or_init(|| std::env::var("HPC_CONFORMANCE").is_ok_and(|v| v == "strict"))
}

/// The definitions named by `HPC_CONFORMANCE_DEFS`, read once; the error says why they cannot be used.
pub fn definitions() -> Result<&'static Definitions, String> {
    static DEFS: OnceLock<Result<Definitions, String>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let path = std::env::var("HPC_CONFORMANCE_DEFS")
            .map_err(|_| "HPC_CONFORMANCE=strict but HPC_CONFORMANCE_DEFS names no definitions file (scripts/lib.sh ensure_conformance_defs makes one)".to_owned())?;
        load(&std::fs::read(&path).map_err(|e| format!("HPC_CONFORMANCE_DEFS={path}: {e}"))?)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Parses a definitions file.
pub fn load(bytes: &[u8]) -> Result<Definitions, String> {
    let mut defs: Definitions = serde_json::from_slice(bytes).map_err(|e| format!("the definitions file is not valid: {e}"))?;
    for cloud in defs.clouds.values_mut() {
        for op in &mut cloud.operations {
            op.segments = split(&op.path)
                .map(|s| match s.strip_prefix('{').and_then(|p| p.split_once('}')) {
                    Some((name, tail)) => Segment::Param(format!("{name}}}{tail}")),
                    None => Segment::Literal(s.to_owned()),
                })
                .collect();
        }
    }
    Ok(defs)
}

fn split(path: &str) -> impl Iterator<Item = &str> {
    path.trim_matches('/').split('/').filter(|s| !s.is_empty())
}

fn segment_matches(seg: &Segment, actual: &str, cloud: Cloud) -> bool {
    match seg {
        Segment::Literal(l) if cloud == Cloud::Azure => l.eq_ignore_ascii_case(actual),
        Segment::Literal(l) => l == actual,
        Segment::Param(p) => {
            let tail = p.split_once('}').map_or("", |(_, t)| t);
            actual.len() > tail.len() && actual.ends_with(tail) && (tail.is_empty() || !actual[..actual.len() - tail.len()].contains(':'))
        }
    }
}

/// How well `op` fits `path`: None when it does not, else the number of literal segments (more is better).
fn fit(op: &Operation, method: &str, path: &str, cloud: Cloud) -> Option<usize> {
    if !op.method.eq_ignore_ascii_case(method) {
        return None;
    }
    let actual: Vec<&str> = split(path).collect();
    if actual.len() != op.segments.len() {
        return None;
    }
    let mut literals = 0;
    for (seg, a) in op.segments.iter().zip(&actual) {
        if !segment_matches(seg, a, cloud) {
            return None;
        }
        if matches!(seg, Segment::Literal(_)) || matches!(seg, Segment::Param(p) if !p.ends_with('}')) {
            literals += 1;
        }
    }
    Some(literals)
}

/// The version a call asks for: Azure's `api-version`, the path's version segment elsewhere.
fn asked_version(cloud: Cloud, path: &str, query: &[(String, String)]) -> Option<String> {
    match cloud {
        Cloud::Azure => query.iter().find(|(k, _)| k == "api-version").map(|(_, v)| v.clone()),
        Cloud::Gcp | Cloud::Oci => None,
    }
    .or_else(|| {
        if cloud == Cloud::Azure { None } else { split(path).find(|s| s.starts_with('v') || s.starts_with("20")).map(str::to_owned) }
    })
}

/// A request as the judge sees it.
pub struct Call<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(String, String)],
    pub body: &'a [u8],
    pub probe: bool,
    /// Who sent it: `provider` (the provider, or a test's own Rust client) or `vendor-sdk`.
    pub client: &'static str,
    /// The service the call is for, when the emulator knows it and the path alone may not tell: the real
    /// APIs are told apart by host (GKE's `container.googleapis.com` and Managed Lustre's
    /// `lustre.googleapis.com` share the operations.get path template). Among operations that fit the path
    /// equally well, the one of this service is taken.
    pub service: Option<&'a str>,
}

/// The vendors' own Python clients, by the User-Agent they send (the vendor-client tests drive them).
const VENDOR_SDKS: &[&str] = &["google-api-python-client", "gl-python/", "azsdk-python-", "Oracle-PythonSDK", "Boto3/", "Botocore/"];

/// `vendor-sdk` for one of the vendors' own clients, `provider` otherwise.
pub fn client_of(user_agent: &str) -> &'static str {
    if VENDOR_SDKS.iter().any(|s| user_agent.contains(s)) { "vendor-sdk" } else { "provider" }
}

/// Finds the operation a call is and judges its query and body. `Ok(None)` when the judge is off.
pub fn judge_request(cloud: Cloud, call: &Call<'_>) -> Result<Option<Arc<Operation>>, Violation> {
    // A test's deliberate mistake is judged whenever definitions are given, so the tests that prove the judge
    // refuses run with or without the switch.
    if !(strict() || call.probe && std::env::var_os("HPC_CONFORMANCE_DEFS").is_some()) {
        return Ok(None);
    }
    // ARM's long-running-operation monitors (the URLs an Azure-AsyncOperation or Location header hands out)
    // are opaque to clients and in no operation's definition; what they answer is judged by the tests of the
    // pollers (their status codes and bodies as each operation's spec declares).
    if cloud == Cloud::Azure && is_arm_monitor(call.path) {
        record_line(json!({"cloud": cloud.key(), "operation": "(long-running operation monitor)", "version": "", "verdict": "monitor"}));
        return Ok(None);
    }
    let defs = definitions().map_err(|e| Violation { kind: Kind::UnknownOperation, field: String::new(), message: e })?;
    let result = judge_with(defs, cloud, call);
    record(cloud, call, &result);
    result.map(Some)
}

/// `.../providers/<namespace>/locations/<location>/operations|operationResults/<id>`, or a subscription's
/// `operationresults/<id>` (resource group deletes).
pub fn is_arm_monitor(path: &str) -> bool {
    let segs: Vec<String> = split(path).map(str::to_lowercase).collect();
    let n = segs.len();
    n >= 4
        && segs[0] == "subscriptions"
        && (segs[n - 2] == "operations" || segs[n - 2] == "operationresults")
        && (n == 4 || (n >= 7 && segs[n - 4] == "locations" && segs[2] == "providers"))
}

/// [`judge_request`] against given definitions, whatever the switch says (for the emulators' own tests).
pub fn judge_with(defs: &Definitions, cloud: Cloud, call: &Call<'_>) -> Result<Arc<Operation>, Violation> {
    let none = CloudDefs { operations: Vec::new(), schemas: BTreeMap::new() };
    let cd = defs.clouds.get(cloud.key()).unwrap_or(&none);
    let candidates: Vec<(usize, &Operation)> =
        cd.operations.iter().filter_map(|op| fit(op, call.method, call.path, cloud).map(|n| (n, op))).collect();
    let Some(best) = candidates.iter().map(|(n, _)| *n).max() else {
        return Err(Violation {
            kind: Kind::UnknownOperation,
            field: String::new(),
            message: format!("no operation of the {} API is {} {}", cloud.key(), call.method, call.path),
        });
    };
    let asked = asked_version(cloud, call.path, call.query);
    let mut fitting: Vec<&Operation> = candidates.iter().filter(|(n, _)| *n == best).map(|(_, op)| *op).collect();
    // The named service's operations first (a stable sort: otherwise in the definitions' order).
    if let Some(service) = call.service {
        fitting.sort_by_key(|op| op.service != service);
    }
    let op = match &asked {
        Some(v) => fitting.iter().find(|op| &op.version == v),
        None => fitting.first(),
    };
    let Some(op) = op else {
        let known: Vec<&str> = fitting.iter().map(|op| op.version.as_str()).collect();
        let asked = asked.unwrap_or_default();
        let message = match cloud {
            Cloud::Azure => format!(
                "The resource type '{}' does not support the api-version '{asked}' as judged by the published definition; the definition has {}",
                fitting[0].id,
                known.join(", ")
            ),
            _ => format!("{} is not in version {asked} of the API (it is in {})", fitting[0].id, known.join(", ")),
        };
        return Err(Violation { kind: Kind::UnknownVersion, field: String::new(), message });
    };
    let op = *op;
    // Query parameters: the operation's own (Google's system parameters are among them), and Azure's
    // api-version.
    for (key, value) in call.query {
        // Google's system parameters have a `$` form ("$alt, alt", "$fields, fields", ... in Google's
        // System parameters page); google-cloud-rust and the Python GAPIC clients send `$alt=json;enum-encoding=int`.
        let alias = cloud == Cloud::Gcp && key.strip_prefix('$').is_some_and(|plain| op.query.iter().any(|q| q == plain));
        // `$apiVersion` picks one of a method's dated interface versions; the definition names the newest,
        // and a client built against an earlier one is answered in it.
        if cloud == Cloud::Gcp && key == "$apiVersion" {
            let dated = value.len() == 10 && value.chars().all(|c| c.is_ascii_digit() || c == '-');
            match &op.interface_version {
                Some(newest) if dated && value.as_str() <= newest.as_str() => continue,
                Some(newest) => {
                    return Err(Violation {
                        kind: Kind::UnknownVersion,
                        field: key.clone(),
                        message: format!("{} has no interface version {value} (the newest is {newest})", op.id),
                    });
                }
                None => {
                    return Err(Violation {
                        kind: Kind::UnknownQuery,
                        field: key.clone(),
                        message: format!("{} has no dated interface versions, so no $apiVersion", op.id),
                    });
                }
            }
        }
        let global = (cloud == Cloud::Azure && key == "api-version") || alias;
        if !global && !op.query.iter().any(|q| q == key) {
            return Err(Violation {
                kind: Kind::UnknownQuery,
                field: key.clone(),
                message: format!("{} has no query parameter '{key}' (it has: {})", op.id, op.query.join(", ")),
            });
        }
    }
    if let Some(schema) = &op.request {
        if call.body.is_empty() {
            return Err(Violation {
                kind: Kind::MissingRequired,
                field: String::new(),
                message: format!("{} needs a request body ({schema})", op.id),
            });
        }
        let body: Value = serde_json::from_slice(call.body).map_err(|e| Violation {
            kind: Kind::WrongType,
            field: String::new(),
            message: format!("the request body is not JSON: {e}"),
        })?;
        // An update (PATCH with a field mask) may carry the resource as read, output-only fields and all:
        // Google's services ignore those (AIP-203); a create may not send them.
        let direction = if call.method.eq_ignore_ascii_case("PATCH") { Direction::Update } else { Direction::Request };
        let judge = Judge { schemas: &cd.schemas, direction, method: &op.id, cloud };
        judge.value(&json!({"ref": schema}), &body, &root_name(cloud))?;
    }
    Ok(Arc::new(op.clone()))
}

fn root_name(cloud: Cloud) -> String {
    match cloud {
        Cloud::Gcp => "resource".into(),
        Cloud::Azure | Cloud::Oci => "body".into(),
    }
}

/// Judges an emulator's own answer to `op`. Only successful JSON answers with a declared schema are
/// judged; error bodies have each cloud's fixed shape.
pub fn judge_response(op: &Operation, status: u16, body: &[u8]) -> Result<(), Violation> {
    let Ok(defs) = definitions() else { return Ok(()) };
    let cloud = match defs.clouds.iter().find(|(_, cd)| cd.operations.iter().any(|o| o.id == op.id && o.version == op.version)) {
        Some((k, _)) if k == "azure" => Cloud::Azure,
        Some((k, _)) if k == "oci" => Cloud::Oci,
        _ => Cloud::Gcp,
    };
    judge_response_with(defs, cloud, op, status, body)
}

pub fn judge_response_with(defs: &Definitions, cloud: Cloud, op: &Operation, status: u16, body: &[u8]) -> Result<(), Violation> {
    let Some(schema) = &op.response else { return Ok(()) };
    if !(200..300).contains(&status) || body.is_empty() {
        return Ok(());
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else { return Ok(()) };
    let Some(cd) = defs.clouds.get(cloud.key()) else { return Ok(()) };
    // An Azure long-running operation's first answer may be the resource or nothing; a 202 is judged only
    // when it has a body.
    let judge = Judge { schemas: &cd.schemas, direction: Direction::Response, method: &op.id, cloud };
    judge.value(&json!({"ref": schema}), &value, "response")
}

/// Azure: a successful answer's status and long-running-operation headers must be what the operation's
/// spec declares (azure-mgmt-*'s `*_initial` methods): a status it lists, a monitor header only where that
/// status declares one, and a 202 always carrying one to follow.
pub fn judge_protocol(cloud: Cloud, op: &Operation, status: u16, headers: &[String]) -> Result<(), Violation> {
    if cloud != Cloud::Azure || !(200..300).contains(&status) {
        return Ok(());
    }
    let monitors = ["azure-asyncoperation", "location"];
    let sent: Vec<&str> = monitors.iter().copied().filter(|m| headers.iter().any(|h| h.eq_ignore_ascii_case(m))).collect();
    let fail = |message: String| Err(Violation { kind: Kind::Rule, field: String::new(), message });
    let Some(lro) = op.long_running.as_ref().filter(|l| l["kind"] == "azure") else {
        if status == 202 || !sent.is_empty() {
            return fail(format!("{} is not long-running in its spec, but the answer was {status} with {sent:?}", op.id));
        }
        return Ok(());
    };
    let statuses: Vec<u64> = lro["statuses"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    if !statuses.contains(&u64::from(status)) {
        return fail(format!("{} answers {statuses:?} in its spec, not {status}", op.id));
    }
    let declared: Vec<String> =
        lro["headers"][status.to_string()].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_lowercase).collect();
    if let Some(extra) = sent.iter().find(|m| !declared.iter().any(|d| d == *m)) {
        return fail(format!("{} declares {declared:?} on {status}, but the answer carried {extra}", op.id));
    }
    if status == 202 && sent.is_empty() {
        return fail(format!("{} answered 202 with nothing to follow (its spec declares {declared:?})", op.id));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    /// A PATCH: as a request, but output-only fields are let through and required ones are not demanded.
    Update,
    Response,
}

struct Judge<'a> {
    schemas: &'a BTreeMap<String, Value>,
    direction: Direction,
    method: &'a str,
    cloud: Cloud,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Judge<'_> {
    fn resolve<'n>(&'n self, node: &'n Value, at: &str) -> Result<&'n Value, Violation> {
        let mut node = node;
        for _ in 0..32 {
            let Some(name) = node.get("ref").and_then(Value::as_str) else { return Ok(node) };
            node = self.schemas.get(name).ok_or_else(|| Violation {
                kind: Kind::UnknownField,
                field: at.to_owned(),
                message: format!("the definitions have no schema {name}"),
            })?;
        }
        Ok(node)
    }

    fn wrong(&self, at: &str, want: &str, got: &Value) -> Violation {
        let message = match self.cloud {
            Cloud::Gcp => format!("Invalid value at '{at}' ({want}), {}", short(got)),
            Cloud::Azure => format!("Error converting value {} to type '{want}'. Path '{at}'.", short(got)),
            Cloud::Oci => format!("The value of '{at}' must be of type {want}, not {}", type_name(got)),
        };
        Violation { kind: Kind::WrongType, field: at.to_owned(), message }
    }

    fn value(&self, node: &Value, v: &Value, at: &str) -> Result<(), Violation> {
        let node = self.resolve(node, at)?;
        if v.is_null() {
            return Ok(());
        }
        let ty = node.get("type").and_then(Value::as_str).unwrap_or("any");
        let numeric_string = |s: &str| !s.is_empty() && s.trim_start_matches('-').chars().all(|c| c.is_ascii_digit());
        match ty {
            "any" => Ok(()),
            "object" => self.object(node, v, at),
            "array" => {
                let items = v.as_array().ok_or_else(|| self.wrong(at, "array", v))?;
                let item = node.get("items").cloned().unwrap_or(json!({"type": "any"}));
                for (i, x) in items.iter().enumerate() {
                    self.value(&item, x, &format!("{at}[{i}]"))?;
                }
                Ok(())
            }
            "string" => {
                let format = node.get("format").and_then(Value::as_str).unwrap_or_default();
                let s = match v {
                    Value::String(s) => s.as_str(),
                    // proto3 JSON takes an enum's number as well as its name (the Google clients send numbers
                    // with `$alt=json;enum-encoding=int`).
                    Value::Number(n) if self.cloud == Cloud::Gcp && node.get("enum").is_some() && n.is_i64() => return Ok(()),
                    // proto3 JSON (Google) reads 64-bit integers from numbers as well as strings.
                    Value::Number(n) if self.cloud == Cloud::Gcp && matches!(format, "int64" | "uint64") && n.is_i64() => return Ok(()),
                    _ => return Err(self.wrong(at, "string", v)),
                };
                self.enumerated(node, s, at)
            }
            "integer" => match v {
                Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
                Value::String(s) if self.cloud == Cloud::Gcp && numeric_string(s) => Ok(()),
                _ => Err(self.wrong(at, "integer", v)),
            },
            "number" => match v {
                Value::Number(_) => Ok(()),
                Value::String(s) if self.cloud == Cloud::Gcp && s.parse::<f64>().is_ok() => Ok(()),
                _ => Err(self.wrong(at, "number", v)),
            },
            "boolean" => v.as_bool().map(|_| ()).ok_or_else(|| self.wrong(at, "boolean", v)),
            other => Err(Violation { kind: Kind::WrongType, field: at.to_owned(), message: format!("unknown schema type {other}") }),
        }
    }

    fn enumerated(&self, node: &Value, s: &str, at: &str) -> Result<(), Violation> {
        let Some(values) = node.get("enum").and_then(Value::as_array) else { return Ok(()) };
        let strict = node.get("enum_strict").and_then(Value::as_bool).unwrap_or(true);
        let known = |x: &Value| x.as_str().is_some_and(|e| if self.cloud == Cloud::Azure { e.eq_ignore_ascii_case(s) } else { e == s });
        if !strict || values.iter().any(known) {
            return Ok(());
        }
        let list: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        let message = match self.cloud {
            Cloud::Gcp => format!("Invalid value at '{at}', \"{s}\" (valid values: {})", list.join(", ")),
            Cloud::Azure => format!("The value '{s}' of '{at}' is not valid. Valid values: {}.", list.join(", ")),
            Cloud::Oci => format!("Invalid value for '{at}': '{s}'. Allowed values: {}", list.join(", ")),
        };
        Err(Violation { kind: Kind::BadEnum, field: at.to_owned(), message })
    }

    fn object(&self, node: &Value, v: &Value, at: &str) -> Result<(), Violation> {
        let map = v.as_object().ok_or_else(|| self.wrong(at, "object", v))?;
        // A discriminated family (OCI's source details, say): the value names its own subtype.
        if let Some(d) = node.get("discriminator")
            && let Some(field) = d.get("field").and_then(Value::as_str)
            && let Some(which) = map.get(field).and_then(Value::as_str)
            && let Some(sub) = d.get("mapping").and_then(|m| m.get(which)).and_then(Value::as_str)
        {
            let sub_node = json!({"ref": sub});
            let resolved = self.resolve(&sub_node, at)?;
            if !std::ptr::eq(resolved, node) {
                return self.object(resolved, v, at);
            }
        }
        let empty = serde_json::Map::new();
        let props = node.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        for (key, x) in map {
            let here = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
            let prop = match props.get(key) {
                Some(p) => p,
                None => match node.get("additional") {
                    Some(a) => a,
                    None => return Err(self.unknown(at, key, props)),
                },
            };
            if self.direction == Direction::Request && prop.get("readOnly").and_then(Value::as_bool) == Some(true) {
                let message = match self.cloud {
                    Cloud::Gcp => format!("Output-only field '{here}' cannot be set"),
                    Cloud::Azure => format!("Property '{here}' is read-only and cannot be set."),
                    Cloud::Oci => format!("'{here}' cannot be set on this request"),
                };
                return Err(Violation { kind: Kind::ReadOnly, field: here, message });
            }
            self.value(prop, x, &here)?;
        }
        if self.direction == Direction::Request {
            let mut required: Vec<&str> =
                node.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            if let Some(per) = node.get("required_for").and_then(Value::as_object) {
                required.extend(
                    per.iter()
                        .filter(|(_, ms)| ms.as_array().is_some_and(|ms| ms.iter().any(|m| m.as_str() == Some(self.method))))
                        .map(|(k, _)| k.as_str()),
                );
            }
            if let Some(missing) = required.into_iter().find(|k| map.get(*k).is_none_or(Value::is_null)) {
                let here = if at.is_empty() { missing.to_owned() } else { format!("{at}.{missing}") };
                let message = match self.cloud {
                    Cloud::Gcp => format!("Required field '{here}' not specified"),
                    Cloud::Azure => format!("Required property '{here}' not found in JSON."),
                    Cloud::Oci => format!("Missing required parameter '{here}'"),
                };
                return Err(Violation { kind: Kind::MissingRequired, field: here, message });
            }
        }
        Ok(())
    }

    fn unknown(&self, at: &str, key: &str, props: &serde_json::Map<String, Value>) -> Violation {
        let here = if at.is_empty() { key.to_owned() } else { format!("{at}.{key}") };
        let direction = match self.direction {
            Direction::Request | Direction::Update => "",
            Direction::Response => "the emulator answered with a field the published definition does not have: ",
        };
        let message = match self.cloud {
            Cloud::Gcp => format!("{direction}Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."),
            Cloud::Azure => format!(
                "{direction}Could not find member '{key}' on object of type '{}'. Path '{here}'.",
                at.rsplit('.').next().unwrap_or(at)
            ),
            Cloud::Oci => {
                let known: Vec<&String> = props.keys().collect();
                format!("{direction}Unrecognized field '{key}' at '{at}'; known fields: {known:?}")
            }
        };
        Violation { kind: Kind::UnknownField, field: here, message }
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 { format!("{}…", &s[..80]) } else { s }
}

/// The cloud's own error answer for a refused request.
pub fn refusal(cloud: Cloud, v: &Violation) -> Response {
    let (status, body) = match cloud {
        Cloud::Gcp => {
            let (status, reason, grpc) = match v.kind {
                Kind::UnknownOperation | Kind::UnknownVersion => (404, "notFound", "NOT_FOUND"),
                Kind::MissingRequired => (400, "required", "INVALID_ARGUMENT"),
                _ => (400, "invalid", "INVALID_ARGUMENT"),
            };
            let mut error = json!({"code": status, "message": v.message, "status": grpc,
                "errors": [{"message": v.message, "domain": "global", "reason": reason}]});
            if !v.field.is_empty() {
                error["details"] = json!([{"@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": v.field, "description": v.message}]}]);
            }
            (status, json!({"error": error}))
        }
        Cloud::Azure => {
            let (status, code) = match v.kind {
                Kind::UnknownOperation => (404, "InvalidResourceType"),
                Kind::UnknownVersion => (400, "NoRegisteredProviderFound"),
                Kind::Rule => (400, "InvalidParameter"),
                Kind::UnknownQuery => (400, "InvalidQueryParameter"),
                _ => (400, "InvalidRequestContent"),
            };
            let mut error = json!({"code": code, "message": v.message});
            if !v.field.is_empty() {
                error["target"] = json!(v.field);
            }
            (status, json!({"error": error}))
        }
        Cloud::Oci => {
            let (status, code) = match v.kind {
                Kind::UnknownOperation | Kind::UnknownVersion => (404, "NotAuthorizedOrNotFound"),
                Kind::MissingRequired => (400, "MissingParameter"),
                _ => (400, "InvalidParameter"),
            };
            (status, json!({"code": code, "message": v.message}))
        }
    };
    (StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), axum::Json(body)).into_response()
}

/// Judges the emulator's own answer: an answer the definitions would not produce becomes a 500 that
/// names the field, so the test that caused it fails; anything else passes through unchanged.
pub async fn checked(op: Option<Arc<Operation>>, cloud: Cloud, response: Response) -> Response {
    let Some(op) = op else { return response };
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the emulator's answer could not be read").into_response();
    };
    let headers: Vec<String> = parts.headers.keys().map(|k| k.as_str().to_owned()).collect();
    let verdict =
        judge_protocol(cloud, &op, parts.status.as_u16(), &headers).and_then(|()| judge_response(&op, parts.status.as_u16(), &bytes));
    if let Err(v) = verdict {
        record_line(
            json!({"cloud": cloud.key(), "operation": op.id, "version": op.version, "verdict": "bad_response", "field": v.field, "message": v.message}),
        );
        let body = json!({"error": {"code": 500, "message": format!("EMULATOR CONFORMANCE: the answer to {} ({}) breaks its definition: {}", op.id, op.version, v.message)}});
        return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response();
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Judges a request before the emulator handles it: `Err` is the refusal to send back.
/// A request carrying the `x-hpc-conformance-probe` header is a test's deliberate mistake: its refusal is
/// recorded as a probe, not as a violation of the run.
pub fn gate(
    cloud: Cloud,
    method: &str,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    body: &Bytes,
) -> Result<Option<Arc<Operation>>, Box<Response>> {
    gate_for_service(cloud, None, method, uri, headers, body)
}

/// [`gate`] for a call the emulator knows to be for `service` (see [`Call::service`]).
pub fn gate_for_service(
    cloud: Cloud,
    service: Option<&str>,
    method: &str,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    body: &Bytes,
) -> Result<Option<Arc<Operation>>, Box<Response>> {
    let query = parse_query(uri.query().unwrap_or_default());
    // Google's clients name themselves in x-goog-api-client too.
    let named = |h: &str| headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let user_agent = format!("{} {}", named("user-agent"), named("x-goog-api-client"));
    let probe = headers.contains_key(PROBE_HEADER);
    let call = Call { method, path: uri.path(), query: &query, body, probe, client: client_of(&user_agent), service };
    judge_request(cloud, &call).map_err(|v| Box::new(refusal(cloud, &v)))
}

/// The header that marks a deliberately wrong request.
pub const PROBE_HEADER: &str = "x-hpc-conformance-probe";

/// `a=1&b=x%2Cy` into decoded pairs.
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&').filter(|kv| !kv.is_empty()).map(|kv| kv.split_once('=').unwrap_or((kv, ""))).map(|(k, v)| (decode(k), decode(v))).collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                Ok(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                Err(_) => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn record(cloud: Cloud, call: &Call<'_>, result: &Result<Arc<Operation>, Violation>) {
    let line = match result {
        Ok(op) => json!({"cloud": cloud.key(), "operation": op.id, "version": op.version, "verdict": "ok", "client": call.client}),
        Err(v) => {
            json!({"cloud": cloud.key(), "method": call.method, "path": call.path, "verdict": if call.probe { "probe_refused" } else { "refused" },
                         "kind": format!("{:?}", v.kind), "field": v.field, "message": v.message})
        }
    };
    record_line(line);
}

/// The program the emulator runs in, as a test binary is named (`acceptance`, `azure`, `hpc-emulator`).
fn program() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let exe = std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned())).unwrap_or_default();
        // cargo names test binaries `<name>-<16 hex digits>`.
        match exe.rsplit_once('-') {
            Some((name, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_owned(),
            _ => exe,
        }
    })
}

/// Appends to `$HPC_CONFORMANCE_LOG/judged-<pid>.jsonl`.
fn record_line(mut line: Value) {
    line["program"] = json!(program());
    static FILE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        let dir = std::env::var_os("HPC_CONFORMANCE_LOG")?;
        std::fs::create_dir_all(&dir).ok()?;
        let path = std::path::Path::new(&dir).join(format!("judged-{}.jsonl", std::process::id()));
        std::fs::OpenOptions::new().create(true).append(true).open(path).ok().map(Mutex::new)
    });
    if let Some(f) = file {
        let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(f, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two services' operations with one path template (GKE's and Managed Lustre's operations.get): the
    /// definitions' order decides unless the call names its service.
    #[test]
    fn a_named_service_picks_among_operations_that_fit_equally() {
        let op = |service: &str, schema: &str| {
            json!({"id": format!("{service}.projects.locations.operations.get"), "service": service, "version": "v1", "method": "GET",
                   "path": "/v1/projects/{projectsId}/locations/{locationsId}/operations/{operationsId}", "response": schema})
        };
        let defs = json!({"clouds": {"gcp": {
            "operations": [op("container", "container.v1/Operation"), op("lustre", "longrunning/Operation")],
            "schemas": {"container.v1/Operation": {"type": "object"}, "longrunning/Operation": {"type": "object"}},
        }}});
        let defs = load(defs.to_string().as_bytes()).unwrap();
        let path = "/v1/projects/p/locations/us-central1-a/operations/operation-1";
        let judged = |service: Option<&str>| {
            let call = Call { method: "GET", path, query: &[], body: b"", probe: false, client: "provider", service };
            judge_with(&defs, Cloud::Gcp, &call).unwrap().service.clone()
        };
        assert_eq!(judged(None), "container");
        assert_eq!(judged(Some("lustre")), "lustre");
        assert_eq!(judged(Some("container")), "container");
        // A service no operation has changes nothing.
        assert_eq!(judged(Some("compute")), "container");
    }
}
