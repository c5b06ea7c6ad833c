//! OCI Vault on the OCI emulator: the KMS vaults a secret lives in and the master encryption keys it is
//! encrypted with (`/20180608`: CreateVault, GetVault, ListVaults, ScheduleVaultDeletion on the KMS host; CreateKey,
//! GetKey, ListKeys, ScheduleKeyDeletion on the vault's own management endpoint), the Vault service's secrets
//! (`/20180608/secrets`: CreateSecret with base64 `secretContent`, GetSecret, ListSecrets, ScheduleSecretDeletion)
//! and the Secret Retrieval API (`/20190301/secretbundles`: GetSecretBundle, GetSecretBundleByName).
//!
//! A vault's `managementEndpoint` and `cryptoEndpoint` are one listener of its own, `http://127.0.0.1:<port>`
//! (the real ones are `https://<id>-management.kms.<region>.oraclecloud.com` and `...-crypto...`): CreateKey has no
//! vault in its path or body, the endpoint says which vault. That listener answers the key operations only (no
//! cryptographic operations), through the same signature check and judge as the main one.
//!
//! The API-key user may do everything. An instance principal (`oci_identity.rs`) may call GetSecretBundle and
//! GetSecretBundleByName only, and gets an answer only when a policy grants it the secret; otherwise, as for a
//! secret that does not exist, 404 `NotAuthorizedOrNotFound`. This module must not decide who the caller is.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::{Caller, Reply, Req, SETTLE, Store, json_body, listing, now_rfc3339, ocid, require};

pub(super) const KMS: &str = "20180608";
pub(super) const SECRETS: &str = "20190301";

/// The most a secret's content may hold, decoded (OCI Vault: a secret bundle's content is at most 25 KB).
const MAX_CONTENT: usize = 25 * 1024;

/// How far ahead a deletion may be scheduled, in days: (least, most, default), by what is deleted.
const VAULT_DELETION_DAYS: (u64, u64, u64) = (7, 30, 30);
const KEY_DELETION_DAYS: (u64, u64, u64) = (7, 30, 30);
const SECRET_DELETION_DAYS: (u64, u64, u64) = (1, 30, 30);

/// A vault, key or secret: its model as shown and when its stored state was entered.
struct Item {
    value: Value,
    changed: Instant,
}

/// A secret's one version (CreateSecret makes version 1; versions are not rotated here).
struct Version {
    content: String,
    name: Option<String>,
    time_created: String,
}

#[derive(Default)]
pub(super) struct Vaults {
    vaults: BTreeMap<String, Item>,
    keys: BTreeMap<String, Item>,
    secrets: BTreeMap<String, Item>,
    versions: BTreeMap<String, Version>,
}

/// The state an item shows now: its stored state advanced by its age.
fn state(item: &Item) -> String {
    let stored = item.value["lifecycleState"].as_str().unwrap_or_default();
    let settled = item.changed.elapsed().as_secs_f64() >= SETTLE;
    match stored {
        "CREATING" if settled && item.value.get("currentKeyVersion").is_some() => "ENABLED",
        "CREATING" if settled => "ACTIVE",
        "SCHEDULING_DELETION" if settled => "PENDING_DELETION",
        other => other,
    }
    .to_owned()
}

fn shown(item: &Item) -> Value {
    let mut v = item.value.clone();
    v["lifecycleState"] = json!(state(item));
    v
}

fn pending(item: &Item) -> bool {
    matches!(state(item).as_str(), "SCHEDULING_DELETION" | "PENDING_DELETION")
}

/// The fields of a summary model, from its full one.
fn summary(v: &Value, fields: &[&str]) -> Value {
    Value::Object(fields.iter().filter_map(|f| v.get(*f).map(|x| ((*f).to_owned(), x.clone()))).collect())
}

const VAULT_SUMMARY: [&str; 10] = [
    "compartmentId",
    "cryptoEndpoint",
    "definedTags",
    "displayName",
    "freeformTags",
    "id",
    "lifecycleState",
    "managementEndpoint",
    "timeCreated",
    "vaultType",
];
const KEY_SUMMARY: [&str; 10] = [
    "compartmentId",
    "definedTags",
    "displayName",
    "freeformTags",
    "id",
    "isAutoRotationEnabled",
    "lifecycleState",
    "protectionMode",
    "timeCreated",
    "vaultId",
];
const SECRET_SUMMARY: [&str; 13] = [
    "compartmentId",
    "definedTags",
    "description",
    "freeformTags",
    "id",
    "isAutoGenerationEnabled",
    "isReplica",
    "keyId",
    "lifecycleState",
    "secretName",
    "timeCreated",
    "timeOfDeletion",
    "vaultId",
];

/// `(operation, id)` for a Vault request, or None when it is not one served: `vault` is the vault whose
/// management endpoint the request came to (None on the main listener, which serves no key operations).
pub(super) fn route(method: &str, version: &str, segs: &[&str], vault: Option<&str>) -> Option<(&'static str, String)> {
    let id = segs.get(1).copied().unwrap_or_default().to_owned();
    let operation = match (version, vault.is_some(), method, segs) {
        (KMS, false, "POST", ["vaults"]) => "CreateVault",
        (KMS, false, "GET", ["vaults"]) => "ListVaults",
        (KMS, false, "GET", ["vaults", _]) => "GetVault",
        (KMS, false, "POST", ["vaults", _, "actions", "scheduleDeletion"]) => "ScheduleVaultDeletion",
        (KMS, true, "POST", ["keys"]) => "CreateKey",
        (KMS, true, "GET", ["keys"]) => "ListKeys",
        (KMS, true, "GET", ["keys", _]) => "GetKey",
        (KMS, true, "POST", ["keys", _, "actions", "scheduleDeletion"]) => "ScheduleKeyDeletion",
        (KMS, false, "POST", ["secrets"]) => "CreateSecret",
        (KMS, false, "GET", ["secrets"]) => "ListSecrets",
        (KMS, false, "GET", ["secrets", _]) => "GetSecret",
        (KMS, false, "POST", ["secrets", _, "actions", "scheduleDeletion"]) => "ScheduleSecretDeletion",
        (SECRETS, false, "GET", ["secretbundles", _]) => "GetSecretBundle",
        (SECRETS, false, "POST", ["secretbundles", "actions", "getByName"]) => return Some(("GetSecretBundleByName", String::new())),
        _ => return None,
    };
    Some((operation, id))
}

/// The service a Vault operation belongs to, for faults and counters: `kms` (vaults, keys), `vault` (secrets)
/// or `secrets` (bundles).
pub(super) fn service(operation: &str) -> &'static str {
    if operation.contains("Bundle") {
        "secrets"
    } else if operation.contains("Secret") {
        "vault"
    } else {
        "kms"
    }
}

/// Whether an instance principal may call the operation at all (then the grant decides).
pub(super) fn open_to_instances(operation: &str) -> bool {
    matches!(operation, "GetSecretBundle" | "GetSecretBundleByName")
}

pub(super) fn handle(
    store: &mut Store,
    req: &Req,
    vault: Option<&str>,
    open_listener: &dyn Fn(&str) -> std::io::Result<u16>,
) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    match req.route.operation.as_str() {
        "CreateVault" => create_vault(store, req, open_listener),
        "GetVault" => get(&store.vault.vaults, id),
        "ListVaults" => list(&store.vault.vaults, req, &VAULT_SUMMARY, |_| true),
        "ScheduleVaultDeletion" => schedule_deletion(&mut store.vault.vaults, req, VAULT_DELETION_DAYS, true),
        "CreateKey" => create_key(store, req, vault.unwrap_or_default()),
        "GetKey" => match store.vault.keys.get(id) {
            Some(k) if Some(k.value["vaultId"].as_str().unwrap_or_default()) == vault => get(&store.vault.keys, id),
            _ => Err(Reply::not_found()),
        },
        "ListKeys" => list(&store.vault.keys, req, &KEY_SUMMARY, |k| Some(k["vaultId"].as_str().unwrap_or_default()) == vault),
        "ScheduleKeyDeletion" => match store.vault.keys.get(id) {
            Some(k) if Some(k.value["vaultId"].as_str().unwrap_or_default()) == vault => {
                schedule_deletion(&mut store.vault.keys, req, KEY_DELETION_DAYS, true)
            }
            _ => Err(Reply::not_found()),
        },
        "CreateSecret" => create_secret(store, req),
        "GetSecret" => get(&store.vault.secrets, id),
        "ListSecrets" => {
            let (name, vault_id, lifecycle) = (req.query.get("name"), req.query.get("vaultId"), req.query.get("lifecycleState"));
            list(&store.vault.secrets, req, &SECRET_SUMMARY, |s| {
                name.is_none_or(|n| s["secretName"] == n.as_str())
                    && vault_id.is_none_or(|v| s["vaultId"] == v.as_str())
                    && lifecycle.is_none_or(|l| s["lifecycleState"] == l.as_str())
            })
        }
        "ScheduleSecretDeletion" => schedule_deletion(&mut store.vault.secrets, req, SECRET_DELETION_DAYS, false),
        "GetSecretBundle" => bundle(store, req, id.to_owned()),
        _ => {
            let name = req.query.get("secretName").ok_or_else(|| super::missing("secretName"))?;
            let vault_id = req.query.get("vaultId").ok_or_else(|| super::missing("vaultId"))?;
            let found = store
                .vault
                .secrets
                .iter()
                .find(|(_, s)| s.value["secretName"] == name.as_str() && s.value["vaultId"] == vault_id.as_str() && !pending(s));
            let Some((id, _)) = found else { return Err(Reply::not_found()) };
            bundle(store, req, id.clone())
        }
    }
}

fn get(items: &BTreeMap<String, Item>, id: &str) -> Result<Reply, Reply> {
    let item = items.get(id).ok_or_else(Reply::not_found)?;
    Ok(Reply::json(200, shown(item)).header("etag", format!("\"{}\"", crate::metadata::digest(&item.value.to_string()))))
}

fn list(items: &BTreeMap<String, Item>, req: &Req, fields: &[&str], keep: impl Fn(&Value) -> bool) -> Result<Reply, Reply> {
    let compartment = req.query.get("compartmentId").ok_or_else(|| super::missing("compartmentId"))?;
    let found = items
        .iter()
        .map(|(id, item)| (id.clone(), shown(item)))
        .filter(|(_, v)| v["compartmentId"] == compartment.as_str() && keep(v))
        .map(|(id, v)| (id, summary(&v, fields)))
        .collect();
    // ListSecrets' `name` is the secret's `secretName`, filtered by `keep`; the rest are fields of the summary.
    let mut query = req.query.clone();
    query.remove("name");
    listing(found, &query, false)
}

fn tags(body: &Value, key: &str) -> Value {
    body.get(key).filter(|t| t.is_object()).cloned().unwrap_or(json!({}))
}

fn create_vault(store: &mut Store, req: &Req, open_listener: &dyn Fn(&str) -> std::io::Result<u16>) -> Result<Reply, Reply> {
    let body = json_body(req.body)?;
    let compartment = require(&body, "/compartmentId")?;
    let name = require(&body, "/displayName")?;
    let vault_type = require(&body, "/vaultType")?;
    if vault_type == "EXTERNAL" {
        return Err(super::invalid("External vaults (an external key manager) are not served by the emulator"));
    }
    let id = ocid(store, "vault");
    let port = open_listener(&id).map_err(|e| Reply::error(500, "InternalError", format!("the vault's endpoint: {e}")))?;
    let endpoint = format!("http://127.0.0.1:{port}");
    let value = json!({
        "id": id, "compartmentId": compartment, "displayName": name, "vaultType": vault_type, "lifecycleState": "CREATING",
        "managementEndpoint": endpoint, "cryptoEndpoint": endpoint, "timeCreated": now_rfc3339(),
        "wrappingkeyId": format!("ocid1.key.oc1.emulator.wrapping{:020}", store.next),
        "isPrimary": true, "isVaultReplicable": false,
        "freeformTags": tags(&body, "freeformTags"), "definedTags": tags(&body, "definedTags"),
    });
    let item = Item { value, changed: Instant::now() };
    let reply = Reply::json(200, shown(&item));
    store.vault.vaults.insert(id, item);
    Ok(reply)
}

fn create_key(store: &mut Store, req: &Req, vault: &str) -> Result<Reply, Reply> {
    let body = json_body(req.body)?;
    let compartment = require(&body, "/compartmentId")?;
    let name = require(&body, "/displayName")?;
    let shape = body.get("keyShape").filter(|s| s.is_object()).ok_or_else(|| super::missing("keyShape"))?.clone();
    let algorithm = shape["algorithm"].as_str().unwrap_or_default();
    let length = shape["length"].as_i64().unwrap_or_default();
    let lengths: &[i64] = match algorithm {
        "AES" => &[16, 24, 32],
        "RSA" => &[256, 384, 512],
        "ECDSA" => &[32, 48, 66],
        _ => return Err(super::invalid(format!("keyShape.algorithm {algorithm:?} must be AES, RSA or ECDSA"))),
    };
    if !lengths.contains(&length) {
        return Err(super::invalid(format!("keyShape.length {length} is not valid for {algorithm}: {lengths:?}")));
    }
    let Some(v) = store.vault.vaults.get(vault) else { return Err(Reply::not_found()) };
    if state(v) != "ACTIVE" {
        return Err(Reply::error(409, "IncorrectState", format!("The vault {vault} is {}, not ACTIVE", state(v))));
    }
    let protection = body.get("protectionMode").and_then(Value::as_str).unwrap_or("HSM").to_owned();
    let id = ocid(store, "key");
    let value = json!({
        "id": id, "compartmentId": compartment, "displayName": name, "keyShape": shape, "vaultId": vault,
        "currentKeyVersion": format!("{id}.version1"), "protectionMode": protection, "lifecycleState": "CREATING",
        "timeCreated": now_rfc3339(), "isPrimary": true, "isAutoRotationEnabled": false,
        "freeformTags": tags(&body, "freeformTags"), "definedTags": tags(&body, "definedTags"),
    });
    let item = Item { value, changed: Instant::now() };
    let reply = Reply::json(200, shown(&item));
    store.vault.keys.insert(id, item);
    Ok(reply)
}

fn create_secret(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let body = json_body(req.body)?;
    let compartment = require(&body, "/compartmentId")?;
    let name = require(&body, "/secretName")?;
    let vault = require(&body, "/vaultId")?;
    let key = require(&body, "/keyId")?;
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) || name.len() > 255 {
        return Err(super::invalid("secretName may hold letters, digits, hyphens, underscores and periods only"));
    }
    if body.get("enableAutoGeneration") == Some(&json!(true)) {
        return Err(super::invalid("Secrets generated by the service (enableAutoGeneration) are not served by the emulator"));
    }
    let content = body.get("secretContent").filter(|c| c.is_object()).ok_or_else(|| super::missing("secretContent"))?;
    if content["contentType"] != "BASE64" {
        return Err(super::invalid("secretContent.contentType must be BASE64"));
    }
    let encoded = content["content"].as_str().ok_or_else(|| super::missing("secretContent.content"))?;
    let decoded = STANDARD.decode(encoded).map_err(|_| super::invalid("secretContent.content is not base64"))?;
    if decoded.is_empty() || decoded.len() > MAX_CONTENT {
        return Err(super::invalid(format!("The secret content must hold 1 to {MAX_CONTENT} bytes, not {}", decoded.len())));
    }
    if content.get("stage").and_then(Value::as_str).is_some_and(|s| s != "CURRENT") {
        return Err(super::invalid("The first version of a secret must be CURRENT"));
    }
    match store.vault.vaults.get(&vault) {
        Some(v) if state(v) == "ACTIVE" => {}
        Some(v) => return Err(Reply::error(409, "IncorrectState", format!("The vault {vault} is {}, not ACTIVE", state(v)))),
        None => return Err(Reply::not_found()),
    }
    match store.vault.keys.get(&key) {
        Some(k) if k.value["vaultId"] != vault.as_str() => {
            return Err(super::invalid(format!("The key {key} is not in the vault {vault}")));
        }
        Some(k) if k.value["keyShape"]["algorithm"] != "AES" => {
            return Err(super::invalid("A secret is encrypted with a symmetric (AES) key, not an asymmetric one"));
        }
        Some(k) if state(k) != "ENABLED" => {
            return Err(Reply::error(409, "IncorrectState", format!("The key {key} is {}, not ENABLED", state(k))));
        }
        Some(_) => {}
        None => return Err(Reply::not_found()),
    }
    // Names are unique within a vault, including secrets pending deletion.
    if store.vault.secrets.values().any(|s| s.value["vaultId"] == vault.as_str() && s.value["secretName"] == name.as_str()) {
        return Err(Reply::error(409, "Conflict", format!("A secret named {name} already exists in the vault {vault}")));
    }
    let id = ocid(store, "vaultsecret");
    let now = now_rfc3339();
    let mut value = json!({
        "id": id, "compartmentId": compartment, "secretName": name, "vaultId": vault, "keyId": key,
        "lifecycleState": "CREATING", "timeCreated": now, "currentVersionNumber": 1, "isAutoGenerationEnabled": false,
        "isReplica": false, "rotationStatus": "NOT_ENABLED",
        "freeformTags": tags(&body, "freeformTags"), "definedTags": tags(&body, "definedTags"),
    });
    for optional in ["description", "metadata"] {
        if let Some(v) = body.get(optional).filter(|v| !v.is_null()) {
            value[optional] = v.clone();
        }
    }
    let item = Item { value, changed: Instant::now() };
    let reply = Reply::json(200, shown(&item));
    let version_name = content.get("name").and_then(Value::as_str).map(str::to_owned);
    store.vault.versions.insert(id.clone(), Version { content: encoded.to_owned(), name: version_name, time_created: now });
    store.vault.secrets.insert(id, item);
    Ok(reply)
}

/// Schedules a vault's, key's or secret's deletion: `timeOfDeletion` within the service's window (else its
/// default), state SCHEDULING_DELETION and then PENDING_DELETION. Vaults and keys answer with their model,
/// secrets with no body.
fn schedule_deletion(items: &mut BTreeMap<String, Item>, req: &Req, days: (u64, u64, u64), answer_model: bool) -> Result<Reply, Reply> {
    let body = if req.body.is_empty() { json!({}) } else { json_body(req.body)? };
    let item = items.get_mut(&req.route.id).ok_or_else(Reply::not_found)?;
    let now = state(item);
    if !matches!(now.as_str(), "ACTIVE" | "ENABLED" | "DISABLED") {
        return Err(Reply::error(409, "IncorrectState", format!("The resource is {now}; its deletion cannot be scheduled")));
    }
    let (least, most, default) = days;
    let day = Duration::from_secs(86_400);
    let at = match body.get("timeOfDeletion").and_then(Value::as_str) {
        None => SystemTime::now() + day * default as u32,
        Some(t) => {
            // The Python SDK writes UTC as `+00:00`.
            let utc = t.strip_suffix("+00:00").map_or_else(|| t.to_owned(), |t| format!("{t}Z"));
            if !super::rfc3339(&utc) {
                return Err(super::invalid(format!("timeOfDeletion {t:?} is not an RFC 3339 time in UTC")));
            }
            let millis = u64::try_from(super::imds::epoch_millis(&utc)).unwrap_or_default();
            let at = SystemTime::UNIX_EPOCH + Duration::from_millis(millis);
            let ahead = at.duration_since(SystemTime::now()).unwrap_or_default();
            if ahead < day * least as u32 || ahead > day * most as u32 {
                return Err(super::invalid(format!("timeOfDeletion must be between {least} and {most} days from now")));
            }
            at
        }
    };
    item.value["timeOfDeletion"] = json!(crate::clock::rfc3339_millis(at));
    item.value["lifecycleState"] = json!("SCHEDULING_DELETION");
    item.changed = Instant::now();
    Ok(if answer_model { Reply::json(200, shown(item)) } else { Reply::empty(200) })
}

/// A secret's bundle, if the caller may read it: the API-key user always, an instance when a policy grants it.
fn bundle(store: &Store, req: &Req, id: String) -> Result<Reply, Reply> {
    let secret = store.vault.secrets.get(&id).ok_or_else(Reply::not_found)?;
    let value = shown(secret);
    if let Caller::Instance(instance) = req.caller
        && !super::identity::may_read_secret_bundle(store, instance, &value)
    {
        return Err(Reply::not_found());
    }
    if value["lifecycleState"] != "ACTIVE" {
        return Err(Reply::error(
            409,
            "IncorrectState",
            format!("The secret {id} is {}", value["lifecycleState"].as_str().unwrap_or_default()),
        ));
    }
    let version = &store.vault.versions[&id];
    let fits = req.query.get("versionNumber").is_none_or(|n| n == "1")
        && req.query.get("stage").is_none_or(|s| matches!(s.as_str(), "CURRENT" | "LATEST"))
        && req.query.get("secretVersionName").is_none_or(|n| version.name.as_deref() == Some(n.as_str()));
    if !fits {
        return Err(Reply::not_found());
    }
    let mut answer = json!({
        "secretId": id, "versionNumber": 1, "stages": ["CURRENT", "LATEST"], "timeCreated": version.time_created,
        "secretBundleContent": {"contentType": "BASE64", "content": version.content},
    });
    if let Some(name) = &version.name {
        answer["versionName"] = json!(name);
    }
    if value.get("metadata").is_some_and(|m| m.is_object()) {
        answer["metadata"] = value["metadata"].clone();
    }
    Ok(Reply::json(200, answer).header("etag", format!("\"{}\"", crate::metadata::digest(&format!("{id}/1")))))
}

/// Live vaults, keys and secrets (not scheduled for deletion), and those pending deletion, for the inventory.
pub(super) fn inventory(store: &Store) -> (BTreeMap<&'static str, Vec<String>>, Vec<String>) {
    let mut live: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut pending_deletion = Vec::new();
    for (kind, items) in [("vaults", &store.vault.vaults), ("keys", &store.vault.keys), ("secrets", &store.vault.secrets)] {
        let list = live.entry(kind).or_default();
        for (id, item) in items {
            if pending(item) { pending_deletion.push(id.clone()) } else { list.push(id.clone()) }
        }
    }
    (live, pending_deletion)
}

/// Every vault, key and secret as its model shows it, by OCID, for the snapshot (never a secret's content).
pub(super) fn snapshot(store: &Store) -> serde_json::Map<String, Value> {
    [&store.vault.vaults, &store.vault.keys, &store.vault.secrets]
        .into_iter()
        .flatten()
        .map(|(id, item)| (id.clone(), shown(item)))
        .collect()
}
