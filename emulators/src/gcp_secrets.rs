//! Google Secret Manager v1 on the GCP emulator's port (`/v1/projects/{project}/secrets...`, as
//! `secretmanager.googleapis.com` serves it): secrets (create, get, list with a label filter, delete), their
//! versions (addVersion, get, list, access with `latest`) and each secret's IAM policy (getIamPolicy,
//! setIamPolicy). Owns the secrets and nothing else; `gcp.rs` routes, judges, counts and faults the calls.
//!
//! Names carry the project number, as the service writes them (`projects/123.../secrets/munge`); a call may
//! name the project by id or number. A payload's `dataCrc32c`, when sent, must be the CRC32C of its data.
//!
//! Who may call is decided by the caller's identity ([`Caller`]): a bearer token the instance metadata
//! server issued for a service account is that account (`serviceAccount:<email>`); anything else (no token,
//! the provider's and the tests' own) is the project's owner, who may do everything. A service account is
//! granted only by the secret's own IAM policy (project-level IAM is not modelled, so it may not create or
//! list secrets), through bindings without a condition of these roles:
//! `roles/secretmanager.secretAccessor` (versions.access), `roles/secretmanager.viewer` (secrets.get,
//! versions.get, versions.list) and `roles/secretmanager.admin` (every method on the secret). Any other
//! role, or a binding with a condition, grants nothing. A refusal is 403 `PERMISSION_DENIED`, whether or not
//! the secret exists, as the service answers.

use std::collections::BTreeMap;

use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use crate::gcp_lustre::error;

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The project's owner: the provider's and the tests' own credentials.
    Owner,
    /// A service account, by the token its instance's metadata server handed out.
    ServiceAccount(String),
}

/// The largest payload the service takes (64 KiB).
const MAX_PAYLOAD: usize = 64 * 1024;

struct Version {
    value: Value,
    data: Vec<u8>,
}

struct Secret {
    value: Value,
    versions: Vec<Version>,
    policy: Value,
    policy_serial: u64,
    created_at: u64,
}

#[derive(Default)]
pub struct SecretManager {
    /// By name, `projects/<number>/secrets/<id>`.
    secrets: BTreeMap<String, Secret>,
    serial: u64,
}

/// Whether a `v1/...` path is Secret Manager's.
pub fn serves(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    segs.len() >= 4 && segs[0] == "v1" && segs[1] == "projects" && (segs[3] == "secrets" || segs[3].starts_with("secrets:"))
}

/// The REST method a call is (`secrets.create`, `versions.access`, ...), for counters and faults.
pub fn method_of(method: &str, path: &str) -> &'static str {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let last = segs.last().copied().unwrap_or_default();
    let verb = last.split_once(':').map(|(_, v)| v);
    match (method, segs.len(), verb) {
        ("POST", 4, _) => "secrets.create",
        ("GET", 4, _) => "secrets.list",
        ("POST", 5, Some("addVersion")) => "secrets.addVersion",
        ("GET", 5, Some("getIamPolicy")) => "secrets.getIamPolicy",
        ("POST", 5, Some("setIamPolicy")) => "secrets.setIamPolicy",
        ("GET", 5, None) => "secrets.get",
        ("DELETE", 5, None) => "secrets.delete",
        ("GET", 6, _) => "versions.list",
        ("GET", 7, Some("access")) => "versions.access",
        ("GET", 7, None) => "versions.get",
        _ => "unknown",
    }
}

/// The IAM permission each method needs on the secret.
fn permission(method: &str) -> &'static str {
    match method {
        "secrets.create" => "secretmanager.secrets.create",
        "secrets.list" => "secretmanager.secrets.list",
        "secrets.addVersion" => "secretmanager.versions.add",
        "secrets.getIamPolicy" => "secretmanager.secrets.getIamPolicy",
        "secrets.setIamPolicy" => "secretmanager.secrets.setIamPolicy",
        "secrets.get" => "secretmanager.secrets.get",
        "secrets.delete" => "secretmanager.secrets.delete",
        "versions.list" => "secretmanager.versions.list",
        "versions.access" => "secretmanager.versions.access",
        "versions.get" => "secretmanager.versions.get",
        _ => "secretmanager.unknown",
    }
}

/// Whether a role (of the three understood) carries a permission.
fn role_grants(role: &str, permission: &str) -> bool {
    match role {
        "roles/secretmanager.admin" => permission.starts_with("secretmanager."),
        "roles/secretmanager.secretAccessor" => permission == "secretmanager.versions.access",
        "roles/secretmanager.viewer" => {
            matches!(permission, "secretmanager.secrets.get" | "secretmanager.versions.get" | "secretmanager.versions.list")
        }
        _ => false,
    }
}

/// Whether `policy` grants `member` the permission (bindings with a condition grant nothing).
fn policy_grants(policy: &Value, member: &str, permission: &str) -> bool {
    policy["bindings"].as_array().into_iter().flatten().any(|b| {
        b.get("condition").is_none_or(Value::is_null)
            && b["role"].as_str().is_some_and(|r| role_grants(r, permission))
            && b["members"].as_array().into_iter().flatten().any(|m| m.as_str() == Some(member))
    })
}

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as `dataCrc32c` carries it.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

fn now() -> (String, u64) {
    let t = std::time::SystemTime::now();
    let micros = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as u64;
    (crate::clock::rfc3339_millis(t), micros)
}

fn ok(value: Value) -> Response {
    (axum::http::StatusCode::OK, axum::Json(value)).into_response()
}

fn invalid(message: &str) -> Response {
    error(400, "INVALID_ARGUMENT", message)
}

fn valid_secret_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 255 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Label keys: 1-63 characters, starting with a lowercase letter, of lowercase letters, digits, `_` and `-`;
/// values up to 63 of the same.
fn check_labels(labels: &Value) -> Result<(), String> {
    let Some(map) = labels.as_object() else { return Ok(()) };
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    for (k, v) in map {
        let v = v.as_str().unwrap_or_default();
        if k.is_empty() || k.len() > 63 || !k.starts_with(|c: char| c.is_ascii_lowercase()) || !k.chars().all(allowed) {
            return Err(format!(
                "Invalid label key '{k}': keys must start with a lowercase letter and contain only lowercase letters, digits, '_' and '-' (1-63 characters)"
            ));
        }
        if v.len() > 63 || !v.chars().all(allowed) {
            return Err(format!("Invalid label value '{v}' for key '{k}'"));
        }
    }
    Ok(())
}

/// One term of a list filter this emulator understands: `labels.KEY=VALUE`, `labels.KEY:*`, `name:TEXT`.
fn filter_matches(secret: &Value, filter: &str) -> Result<bool, String> {
    let mut all = true;
    for term in filter.split(" AND ").flat_map(|t| t.split(' ')).filter(|t| !t.is_empty()) {
        let matched = if let Some(rest) = term.strip_prefix("labels.") {
            if let Some((key, value)) = rest.split_once('=') {
                secret["labels"][key].as_str() == Some(value.trim_matches('"'))
            } else if let Some((key, "*")) = rest.split_once(':') {
                secret["labels"].get(key).is_some()
            } else {
                return Err(format!("Invalid filter term '{term}'"));
            }
        } else if let Some(text) = term.strip_prefix("name:") {
            secret["name"].as_str().is_some_and(|n| n.rsplit('/').next().unwrap_or_default().contains(text.trim_matches('"')))
        } else {
            return Err(format!("Invalid filter term '{term}' (this emulator understands labels.KEY=VALUE, labels.KEY:* and name:TEXT)"));
        };
        all &= matched;
    }
    Ok(all)
}

impl SecretManager {
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn inventory(&self) -> Vec<String> {
        self.secrets.keys().cloned().collect()
    }

    /// Each secret as `secrets.get` shows it, with its IAM policy and its versions' names.
    pub fn snapshot(&self) -> Value {
        let map: serde_json::Map<String, Value> = self
            .secrets
            .iter()
            .map(|(k, s)| {
                let versions: Vec<&Value> = s.versions.iter().map(|v| &v.value["name"]).collect();
                (k.clone(), json!({"secret": s.value, "policy": s.policy, "versions": versions}))
            })
            .collect();
        Value::Object(map)
    }

    /// Removes a secret behind the provider's back (out-of-band `delete`); whether one was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.secrets.remove(name).is_some()
    }

    fn etag(&mut self) -> String {
        self.serial += 1;
        format!("\"{}\"", crate::metadata::digest(&format!("etag-{}", self.serial)))
    }

    /// Handles one call (`path` without the leading slash, `v1/projects/...`).
    pub fn handle(&mut self, caller: &Caller, method: &str, path: &str, query: &BTreeMap<String, String>, body: &[u8]) -> Response {
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let op = method_of(method, path);
        if op == "unknown" || segs.len() < 4 {
            return error(404, "NOT_FOUND", &format!("Method not found: {method} /{path}"));
        }
        let number = crate::gcp::project_number(segs[2]);
        let project = format!("projects/{number}");
        let (secret_id, _verb) = segs.get(4).map_or(("", None), |s| s.split_once(':').map_or((*s, None), |(a, b)| (a, Some(b))));
        let name = format!("{project}/secrets/{secret_id}");
        // Who may: the owner always; a service account by the secret's own policy.
        if let Caller::ServiceAccount(email) = caller {
            let member = format!("serviceAccount:{email}");
            let perm = permission(op);
            let granted = !secret_id.is_empty() && self.secrets.get(&name).is_some_and(|s| policy_grants(&s.policy, &member, perm));
            if !granted {
                let resource = if secret_id.is_empty() {
                    project.clone()
                } else if segs.len() == 7 {
                    format!("{name}/versions/{}", segs[6].split(':').next().unwrap_or_default())
                } else {
                    name.clone()
                };
                return error(
                    403,
                    "PERMISSION_DENIED",
                    &format!("Permission '{perm}' denied for resource '{resource}' (or it may not exist)."),
                );
            }
        }
        match op {
            "secrets.create" => self.create(&project, query, body),
            "secrets.list" => self.list(&project, query),
            "secrets.get" => self.secrets.get(&name).map_or_else(|| not_found(&name), |s| ok(s.value.clone())),
            "secrets.delete" => {
                let Some(secret) = self.secrets.get(&name) else { return not_found(&name) };
                if let Some(etag) = query.get("etag")
                    && secret.value["etag"].as_str() != Some(etag.as_str())
                {
                    return error(400, "FAILED_PRECONDITION", &format!("The etag {etag} does not match the secret's current etag"));
                }
                self.secrets.remove(&name);
                ok(json!({}))
            }
            "secrets.addVersion" => self.add_version(&name, body),
            "secrets.getIamPolicy" => self.secrets.get(&name).map_or_else(|| not_found(&name), |s| ok(policy_view(s))),
            "secrets.setIamPolicy" => self.set_policy(&name, body),
            "versions.list" => {
                let Some(secret) = self.secrets.get(&name) else { return not_found(&name) };
                let versions: Vec<Value> = secret.versions.iter().rev().map(|v| v.value.clone()).collect();
                let total = versions.len();
                ok(if total == 0 { json!({}) } else { json!({"versions": versions, "totalSize": total}) })
            }
            "versions.get" | "versions.access" => {
                let asked = segs[6].split(':').next().unwrap_or_default();
                let Some(secret) = self.secrets.get(&name) else { return not_found(&name) };
                let version = if asked == "latest" {
                    secret.versions.iter().rev().find(|v| v.value["state"] == "ENABLED")
                } else {
                    asked.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| secret.versions.get(i))
                };
                let Some(version) = version else {
                    return error(404, "NOT_FOUND", &format!("Secret Version [{name}/versions/{asked}] not found."));
                };
                if op == "versions.get" {
                    return ok(version.value.clone());
                }
                if version.value["state"] != "ENABLED" {
                    return error(
                        400,
                        "FAILED_PRECONDITION",
                        &format!("{} is in {} state.", version.value["name"], version.value["state"]),
                    );
                }
                let data = base64::engine::general_purpose::STANDARD.encode(&version.data);
                ok(json!({"name": version.value["name"], "payload": {"data": data, "dataCrc32c": crc32c(&version.data).to_string()}}))
            }
            _ => error(404, "NOT_FOUND", &format!("Method not found: {method} /{path}")),
        }
    }

    fn create(&mut self, project: &str, query: &BTreeMap<String, String>, body: &[u8]) -> Response {
        let Some(id) = query.get("secretId") else { return invalid("secretId is required") };
        if !valid_secret_id(id) {
            return invalid(&format!("Invalid secret id '{id}': it must be 1-255 letters, digits, '_' or '-'"));
        }
        let Ok(mut secret) = serde_json::from_slice::<Value>(body) else { return invalid("The request body is not a Secret") };
        // The global endpoint keeps no secret without a replication policy (regional secrets are created
        // under locations/, which this emulator does not serve).
        let replication = &secret["replication"];
        if replication.get("automatic").is_none() && replication.get("userManaged").is_none() {
            return invalid("Secret.replication must be specified (automatic or userManaged)");
        }
        if let Err(message) = check_labels(&secret["labels"]) {
            return invalid(&message);
        }
        let name = format!("{project}/secrets/{id}");
        if self.secrets.contains_key(&name) {
            return error(409, "ALREADY_EXISTS", &format!("Secret [{name}] already exists."));
        }
        let (time, micros) = now();
        secret["name"] = json!(name);
        secret["createTime"] = json!(time);
        secret["etag"] = json!(self.etag());
        // Input-only fields are not kept.
        if let Some(map) = secret.as_object_mut() {
            for input_only in ["ttl", "tags"] {
                map.remove(input_only);
            }
        }
        self.secrets
            .insert(name, Secret { value: secret.clone(), versions: Vec::new(), policy: json!({}), policy_serial: 0, created_at: micros });
        ok(secret)
    }

    fn list(&self, project: &str, query: &BTreeMap<String, String>) -> Response {
        let filter = query.get("filter").map(String::as_str).unwrap_or_default();
        let mut found: Vec<&Secret> = Vec::new();
        for (name, secret) in &self.secrets {
            if !name.starts_with(&format!("{project}/secrets/")) {
                continue;
            }
            match filter_matches(&secret.value, filter) {
                Ok(true) => found.push(secret),
                Ok(false) => {}
                Err(message) => return invalid(&message),
            }
        }
        // Newest first, as the service sorts them.
        found.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        let size = query.get("pageSize").and_then(|s| s.parse::<usize>().ok()).filter(|n| *n > 0).unwrap_or(25_000).min(25_000);
        let start = query.get("pageToken").and_then(|t| t.parse::<usize>().ok()).unwrap_or(0);
        let total = found.len();
        let page: Vec<Value> = found.iter().skip(start).take(size).map(|s| s.value.clone()).collect();
        let mut answer = json!({});
        if !page.is_empty() {
            answer["secrets"] = json!(page);
        }
        if start + size < total {
            answer["nextPageToken"] = json!((start + size).to_string());
        }
        // "The total number of Secrets but 0 when the ListSecretsRequest.filter field is set."
        if filter.is_empty() && total > 0 {
            answer["totalSize"] = json!(total);
        }
        ok(answer)
    }

    fn add_version(&mut self, name: &str, body: &[u8]) -> Response {
        if !self.secrets.contains_key(name) {
            return not_found(name);
        }
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return invalid("The request body is not an AddSecretVersionRequest");
        };
        let Some(encoded) = request["payload"]["data"].as_str() else { return invalid("payload.data is required") };
        let Ok(data) = base64::engine::general_purpose::STANDARD.decode(encoded) else { return invalid("payload.data is not base64") };
        if data.len() > MAX_PAYLOAD {
            return invalid(&format!("Secret payload of {} bytes exceeds the 65536-byte limit", data.len()));
        }
        let checksum = &request["payload"]["dataCrc32c"];
        if !checksum.is_null() {
            let sent = checksum.as_str().and_then(|s| s.parse::<u64>().ok()).or_else(|| checksum.as_u64());
            if sent != Some(u64::from(crc32c(&data))) {
                return invalid("Checksum mismatch: payload.dataCrc32c is not the CRC32C of payload.data");
            }
        }
        let etag = self.etag();
        let secret = self.secrets.get_mut(name).expect("checked above");
        let number = secret.versions.len() + 1;
        let (time, _) = now();
        let value = json!({
            "name": format!("{name}/versions/{number}"), "createTime": time, "state": "ENABLED", "etag": etag,
            "replicationStatus": {"automatic": {}}, "clientSpecifiedPayloadChecksum": !checksum.is_null(),
        });
        secret.versions.push(Version { value: value.clone(), data });
        ok(value)
    }

    fn set_policy(&mut self, name: &str, body: &[u8]) -> Response {
        let Some(secret) = self.secrets.get_mut(name) else { return not_found(name) };
        let Ok(request) = serde_json::from_slice::<Value>(body) else { return invalid("The request body is not a SetIamPolicyRequest") };
        let policy = &request["policy"];
        if !policy.is_object() {
            return invalid("policy is required");
        }
        if let Some(etag) = policy["etag"].as_str()
            && Some(etag) != policy_view(secret)["etag"].as_str()
        {
            return error(
                409,
                "ABORTED",
                "There were concurrent policy changes. Please retry the whole read-modify-write with exponential backoff.",
            );
        }
        for binding in policy["bindings"].as_array().into_iter().flatten() {
            let role = binding["role"].as_str().unwrap_or_default();
            if !role.starts_with("roles/") && !role.starts_with("projects/") && !role.starts_with("organizations/") {
                return invalid(&format!("Role {role} is not a role name (roles/..., projects/*/roles/..., organizations/*/roles/...)"));
            }
            for member in binding["members"].as_array().into_iter().flatten() {
                let m = member.as_str().unwrap_or_default();
                let known = ["user:", "serviceAccount:", "group:", "domain:", "principal:", "principalSet:", "deleted:"];
                if !known.iter().any(|k| m.starts_with(k)) {
                    return invalid(&format!("Invalid member '{m}' in binding of {role}"));
                }
            }
        }
        let mut stored = json!({});
        if let Some(bindings) = policy["bindings"].as_array().filter(|b| !b.is_empty()) {
            stored["bindings"] = json!(bindings);
        }
        secret.policy = stored;
        secret.policy_serial += 1;
        ok(policy_view(secret))
    }
}

fn not_found(name: &str) -> Response {
    error(404, "NOT_FOUND", &format!("Secret [{name}] not found or has no versions."))
}

/// The policy as getIamPolicy answers it: version 1, an etag that changes with each setIamPolicy.
fn policy_view(secret: &Secret) -> Value {
    let mut policy = secret.policy.clone();
    let tag = base64::engine::general_purpose::STANDARD.encode(format!("BwY{:08}", secret.policy_serial));
    policy["version"] = json!(1);
    policy["etag"] = json!(tag);
    policy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_is_castagnolis() {
        // The check value of CRC-32C (RFC 3720, B.4: "123456789").
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn only_unconditional_bindings_of_the_known_roles_grant() {
        let sa = "serviceAccount:node@p.iam.gserviceaccount.com";
        let policy = json!({"bindings": [
            {"role": "roles/secretmanager.secretAccessor", "members": [sa]},
            {"role": "roles/secretmanager.admin", "members": [sa], "condition": {"expression": "true"}},
            {"role": "roles/editor", "members": [sa]},
        ]});
        assert!(policy_grants(&policy, sa, "secretmanager.versions.access"));
        assert!(!policy_grants(&policy, sa, "secretmanager.secrets.delete"));
        assert!(!policy_grants(&policy, "serviceAccount:other@p.iam.gserviceaccount.com", "secretmanager.versions.access"));
    }
}
