//! Google Cloud Managed Lustre (lustre.googleapis.com v1) on the GCP emulator's port: instances created,
//! read, listed, grown and deleted through google.longrunning operations, with the API's size rules
//! (minimum and step per throughput tier) and filesystem-name rule enforced as the service does.
//! Bodies go through google-cloud-lustre-v1's own serde models.

use std::collections::BTreeMap;
use std::time::Instant;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use google_cloud_lustre_v1::model;
use serde_json::{Value, json};

/// CREATING/UPDATING last this long; the operation is done at the same moment.
const SETTLE_SECONDS: f64 = 0.3;

pub struct Stored {
    pub value: Value,
    changed: Instant,
    /// The Cloud Storage path of the last importData: the emulator's own record (the API reports imports
    /// only through their operations), shown in the admin snapshot, never in an answer.
    imported_from: Option<String>,
}

#[derive(Default)]
pub struct Lustre {
    pub instances: BTreeMap<String, Stored>,
    operations: BTreeMap<String, (Value, Instant)>,
    next: u64,
    /// The operation each create's `requestId` started, by request id: "if you must retry your request,
    /// the server will know to ignore the request if it has already been completed" (CreateInstanceRequest).
    requests: BTreeMap<String, String>,
}

pub fn error(status: u16, code: &str, message: &str) -> Response {
    let body = json!({"error": {"code": status, "message": message, "status": code}});
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(body)).into_response()
}

fn ok(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

/// The service's capacity rule for a tier (GiB): minimum = step, a larger step above a threshold, a maximum.
fn capacity_ok(tier: i64, gib: i64) -> Result<(), String> {
    let (step, threshold, big, max) = match tier {
        1000 => (9_000, 1_530_000, 72_000, 10_008_000),
        500 => (18_000, 3_060_000, 144_000, 20_016_000),
        250 => (36_000, 6_120_000, 288_000, 40_032_000),
        125 => (72_000, 12_240_000, 72_000, 12_240_000),
        _ => return Err(format!("per_unit_storage_throughput must be 125, 250, 500 or 1000, got {tier}")),
    };
    let unit = if gib > threshold { big } else { step };
    if gib < step || gib > max || gib % unit != 0 {
        return Err(format!(
            "capacity_gib {gib} is invalid for throughput {tier}: use {step} to {max} GiB in steps of {step} (of {big} above {threshold})"
        ));
    }
    Ok(())
}

impl Lustre {
    /// An instance as a client reading it would see it.
    pub fn snapshot_of(&mut self, key: &str) -> Option<Value> {
        let mut v = self.view(key)?;
        if let Some(uri) = self.instances.get(key).and_then(|s| s.imported_from.clone()) {
            v["_imported_from"] = json!(uri);
        }
        Some(v)
    }

    fn view(&mut self, key: &str) -> Option<Value> {
        let stored = self.instances.get_mut(key)?;
        if stored.changed.elapsed().as_secs_f64() >= SETTLE_SECONDS
            && matches!(stored.value["state"].as_str(), Some("CREATING" | "UPDATING"))
        {
            stored.value["state"] = json!("ACTIVE");
        }
        Some(stored.value.clone())
    }

    fn operation(&mut self, parent: &str, target: &str, verb: &str, response: Option<Value>) -> Value {
        self.next += 1;
        let name = format!("{parent}/operations/operation-{}", self.next);
        let op = json!({
            "name": name,
            "metadata": {"@type": "type.googleapis.com/google.cloud.lustre.v1.OperationMetadata", "target": target, "verb": verb, "apiVersion": "v1"},
            "done": false,
            "_response": response,
        });
        self.operations.insert(name, (op.clone(), Instant::now()));
        Lustre::public(op, false)
    }

    fn public(mut op: Value, done: bool) -> Value {
        let response = op.as_object_mut().and_then(|o| o.remove("_response")).unwrap_or(Value::Null);
        if done {
            op["done"] = json!(true);
            op["response"] = if response.is_null() { json!({"@type": "type.googleapis.com/google.protobuf.Empty"}) } else { response };
        }
        op
    }

    /// Handles `/v1/...` paths of the Lustre API; `None` when the path is not Lustre's.
    pub fn handle(&mut self, method: &str, path: &str, query: &BTreeMap<String, String>, body: &[u8]) -> Option<Response> {
        let rest = path.strip_prefix("v1/")?;
        let segs: Vec<&str> = rest.split('/').collect();
        if segs.len() < 5 || segs[0] != "projects" || segs[2] != "locations" {
            return None;
        }
        let parent = segs[..4].join("/");
        Some(match (method, segs[4], segs.get(5)) {
            ("GET", "operations", Some(_)) => match self.operations.get(rest) {
                Some((op, at)) => {
                    let done = at.elapsed().as_secs_f64() >= SETTLE_SECONDS;
                    let mut op = op.clone();
                    if done && let Some(target) = op["metadata"]["target"].as_str().map(str::to_owned) {
                        // The response is the instance as it is once the operation is done.
                        if op["_response"].is_object()
                            && op["_response"].get("@type").is_none()
                            && let Some(now) = self.view(&target)
                        {
                            let mut r = now;
                            r["@type"] = json!("type.googleapis.com/google.cloud.lustre.v1.Instance");
                            op["_response"] = r;
                        }
                    }
                    ok(Lustre::public(op, done))
                }
                None => error(404, "NOT_FOUND", &format!("operation {rest} not found")),
            },
            ("POST", "instances", None) => {
                let id = query.get("instanceId").cloned().unwrap_or_default();
                // A request id seen before answers with the operation the first request started, done or not:
                // a retried create makes nothing twice.
                let request = query.get("requestId").filter(|r| !r.is_empty()).cloned();
                if let Some(first) = request.as_ref().and_then(|r| self.requests.get(r)).and_then(|op| self.operations.get(op)) {
                    // Its name; polling it tells where it stands.
                    return Some(ok(Lustre::public(first.0.clone(), false)));
                }
                let parsed: Result<model::Instance, _> = serde_json::from_slice(body);
                let Ok(instance) = parsed else { return Some(error(400, "INVALID_ARGUMENT", "body is not an Instance")) };
                if !(1..=63).contains(&id.len()) {
                    return Some(error(400, "INVALID_ARGUMENT", "instanceId is required"));
                }
                if instance.filesystem.is_empty()
                    || instance.filesystem.len() > 8
                    || !instance.filesystem.chars().all(|c| c.is_ascii_alphanumeric())
                {
                    return Some(error(400, "INVALID_ARGUMENT", "filesystem must be 1 to 8 letters or digits"));
                }
                if let Err(e) = capacity_ok(instance.per_unit_storage_throughput, instance.capacity_gib) {
                    return Some(error(400, "INVALID_ARGUMENT", &e));
                }
                let key = format!("{parent}/instances/{id}");
                if self.instances.contains_key(&key) {
                    return Some(error(409, "ALREADY_EXISTS", &format!("instance {key} already exists")));
                }
                let mut value: Value = serde_json::from_slice(body).unwrap_or(json!({}));
                value["name"] = json!(key);
                value["state"] = json!("CREATING");
                value["mountPoint"] =
                    json!(format!("172.16.0.{}@tcp:/{}", 2 + self.instances.len(), value["filesystem"].as_str().unwrap_or_default()));
                value["createTime"] = json!("2026-01-01T00:00:00Z");
                value["uid"] = json!(format!("{:032x}", self.next + 1));
                // What we answer must parse as the crate's Instance; enums stay strings, as the service sends them.
                if let Err(e) = serde_json::from_value::<model::Instance>(value.clone()) {
                    return Some(error(500, "INTERNAL", &format!("emulator bug: {e}")));
                }
                self.instances.insert(key.clone(), Stored { value, changed: Instant::now(), imported_from: None });
                let op = self.operation(&parent, &key, "create", Some(json!({})));
                if let (Some(r), Some(name)) = (request, op["name"].as_str()) {
                    self.requests.insert(r, name.to_owned());
                }
                op.pipe_ok()
            }
            ("GET", "instances", None) => {
                let keys: Vec<String> = self.instances.keys().filter(|k| k.starts_with(&format!("{parent}/instances/"))).cloned().collect();
                let start: usize = query.get("pageToken").and_then(|t| t.parse().ok()).unwrap_or(0);
                let size = query.get("pageSize").and_then(|s| s.parse::<usize>().ok()).filter(|s| *s > 0).unwrap_or(50).min(1000);
                let page: Vec<String> = keys.iter().skip(start).take(size).cloned().collect();
                let items: Vec<Value> = page.iter().filter_map(|k| self.view(k)).collect();
                let mut out = json!({"instances": items});
                if keys.len() > start + size {
                    out["nextPageToken"] = json!((start + size).to_string());
                }
                ok(out)
            }
            ("GET", "instances", Some(_)) => match self.view(rest) {
                Some(v) => ok(v),
                None => error(404, "NOT_FOUND", &format!("Resource '{rest}' was not found")),
            },
            ("PATCH", "instances", Some(_)) => {
                let Some(current) = self.view(rest) else {
                    return Some(error(404, "NOT_FOUND", &format!("Resource '{rest}' was not found")));
                };
                let Ok(update) = serde_json::from_slice::<model::Instance>(body) else {
                    return Some(error(400, "INVALID_ARGUMENT", "body is not an Instance"));
                };
                let mask = query.get("updateMask").cloned().unwrap_or_default();
                let mut value = current.clone();
                if mask.split(',').any(|f| f == "capacity_gib" || f == "capacityGib") {
                    let before = current["capacityGib"].as_str().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
                    let tier = current["perUnitStorageThroughput"].as_str().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
                    if update.capacity_gib <= before {
                        return Some(error(400, "INVALID_ARGUMENT", "capacity can only be increased"));
                    }
                    if let Err(e) = capacity_ok(tier, update.capacity_gib) {
                        return Some(error(400, "INVALID_ARGUMENT", &e));
                    }
                    value["capacityGib"] = json!(update.capacity_gib.to_string());
                }
                if mask.split(',').any(|f| f == "labels") {
                    value["labels"] = json!(update.labels);
                }
                value["state"] = json!("UPDATING");
                self.instances.insert(rest.to_owned(), Stored { value, changed: Instant::now(), imported_from: None });
                self.operation(&parent, rest, "update", Some(json!({}))).pipe_ok()
            }
            ("POST", "instances", Some(verb)) if verb.ends_with(":importData") => {
                // Importing from Cloud Storage: accepted for a gs:// source on an existing instance.
                let target = rest.trim_end_matches(":importData").to_owned();
                if self.view(&target).is_none() {
                    return Some(error(404, "NOT_FOUND", &format!("Resource '{target}' was not found")));
                }
                let request: Value = serde_json::from_slice(body).unwrap_or(json!({}));
                let uri = request["gcsPath"]["uri"].as_str().unwrap_or_default();
                let Some(location) = uri.strip_prefix("gs://").filter(|l| !l.is_empty() && !l.starts_with('/')) else {
                    return Some(error(400, "INVALID_ARGUMENT", "gcs_path.uri must be a gs:// URI"));
                };
                // A path inside the bucket ends with '/': `gs://bucket/path/`.
                if location.contains('/') && !location.ends_with('/') {
                    return Some(error(
                        400,
                        "INVALID_ARGUMENT",
                        &format!("gcs_path.uri {uri:?}: a path inside the bucket must end with '/'"),
                    ));
                }
                if let Some(stored) = self.instances.get_mut(&target) {
                    stored.imported_from = Some(uri.to_owned());
                }
                let response = json!({"@type": "type.googleapis.com/google.cloud.lustre.v1.ImportDataResponse"});
                self.operation(&parent, &target, "importData", Some(response)).pipe_ok()
            }
            ("DELETE", "instances", Some(_)) => {
                if self.instances.remove(rest).is_none() {
                    return Some(error(404, "NOT_FOUND", &format!("Resource '{rest}' was not found")));
                }
                self.operation(&parent, rest, "delete", None).pipe_ok()
            }
            _ => error(404, "NOT_FOUND", &format!("no route {method} {path}")),
        })
    }
}

trait PipeOk {
    fn pipe_ok(self) -> Response;
}

impl PipeOk for Value {
    fn pipe_ok(self) -> Response {
        ok(self)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn capacity_rules_match_the_service() {
        assert!(super::capacity_ok(500, 36_000).is_ok());
        assert!(super::capacity_ok(500, 9_000).is_err());
        assert!(super::capacity_ok(1000, 1_584_000).is_ok());
        assert!(super::capacity_ok(300, 36_000).is_err());
    }
}
