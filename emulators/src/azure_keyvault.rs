//! Azure Key Vault on the ARM emulator's listener. The vault itself is an ARM resource
//! (`Microsoft.KeyVault/vaults`, PUT/GET/DELETE through ARM's generic paths): here its PUT gets what the
//! service adds (`vaultUri`, soft-delete defaults, a name unique across the subscriptions), and every
//! identity a PUT carries gets its `principalId`. Its data plane is served on a listener of the vault's own,
//! `https://127.0.0.1:<port>/` (the vault's `vaultUri`, where the real one is `https://<vault>.vault.azure.net/`;
//! the SDKs parse a secret's id as `<vault origin>/secrets/<name>/<version>`, so the vault must be an
//! origin's root, and a path prefix on the ARM listener would not do), with the ARM listener's certificate:
//! SetSecret, GetSecret (latest or a version), GetSecrets,
//! GetSecretVersions, DeleteSecret (soft delete: the secret moves to `deletedsecrets/`), GetDeletedSecret and
//! PurgeDeletedSecret, judged by azure-keyvault-secrets' generated operations.
//!
//! A data-plane request without a bearer token is answered 401 with Key Vault's challenge
//! (`WWW-Authenticate: Bearer authorization="https://login.microsoftonline.com/<tenant>",
//! resource="https://vault.azure.net"`), as the SDKs' challenge policy expects. Who may call is decided by
//! the token: one a VM's instance metadata service handed out for its managed identity is that identity's
//! object id; any other is the subscription's owner, who may do everything. An identity is allowed by the
//! vault's access policies (an entry of the vault's tenant with its `objectId`, without `applicationId`,
//! whose `permissions.secrets` holds the operation's permission: `get`, `list`, `set`, `delete`, `purge`, or
//! `all`) or, when `enableRbacAuthorization` is true, by a role assignment (`Microsoft.Authorization/
//! roleAssignments` stored at the vault, its resource group or its subscription) of Key Vault Secrets User
//! (reads), Key Vault Secrets Officer or Key Vault Administrator (all) to its `principalId`. Anything else is
//! refused with 403 `Forbidden` (`innererror` `AccessDenied`, or `ForbiddenByRbac`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Azure, Store, arm_error, type_of};
use crate::admin::FaultKind;
use crate::metadata::{digest, uuid_from};

/// Key Vault Secrets User, Key Vault Secrets Officer, Key Vault Administrator (Azure built-in roles).
const SECRETS_USER: &str = "4633458b-17de-408a-b874-0445c86b69e6";
const SECRETS_OFFICER: &str = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7";
const ADMINISTRATOR: &str = "00482a5a-887f-4fb3-b363-3b7fe8e74483";
const RETENTION_DAYS: u64 = 90;

#[derive(Clone)]
struct Version {
    id: String,
    value: String,
    content_type: Option<String>,
    tags: Value,
    created: u64,
}

#[derive(Default)]
pub(super) struct VaultData {
    /// Versions oldest first, by lowercased secret name.
    secrets: BTreeMap<String, (String, Vec<Version>)>,
    /// Soft-deleted secrets: (name as written, versions, deleted at).
    deleted: BTreeMap<String, (String, Vec<Version>, u64)>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// The vault resource of a name (vault names are unique across subscriptions), with its key.
fn vault_of<'a>(store: &'a Store, name: &str) -> Option<(&'a String, &'a Value)> {
    store
        .resources
        .iter()
        .find(|(k, s)| type_of(k) == "vaults" && s.value["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .map(|(k, s)| (k, &s.value))
}

/// Vault names: 3-24 letters, digits and hyphens, starting with a letter, ending with a letter or digit,
/// without consecutive hyphens.
fn valid_vault_name(name: &str) -> bool {
    (3..=24).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.contains("--")
}

/// What ARM adds to a vault PUT: its `vaultUri` on this listener and the soft-delete defaults. `Err` is the
/// refusal: a name Key Vault does not take, or one another vault has.
pub(super) fn on_vault_put(az: &Arc<Azure>, store: &mut Store, key: &str, value: &mut Value, existed: bool) -> Result<(), Box<Response>> {
    let name = value["name"].as_str().unwrap_or_default().to_owned();
    if !valid_vault_name(&name) {
        return Err(Box::new(arm_error(
            400,
            "VaultNameNotValid",
            &format!(
                "The vault name '{name}' is invalid. A vault's name must be between 3-24 alphanumeric characters. The name must begin with a letter, end with a letter or digit, and not contain consecutive hyphens."
            ),
        )));
    }
    if let Some((other, _)) = vault_of(store, &name)
        && other != key
    {
        return Err(Box::new(arm_error(
            409,
            "VaultAlreadyExists",
            &format!("The vault name '{name}' is already in use. Vault names are globally unique."),
        )));
    }
    let port = listener(az, &name.to_lowercase())
        .map_err(|e| Box::new(arm_error(500, "InternalServerError", &format!("the vault's listener: {e}"))))?;
    let props = &mut value["properties"];
    props["vaultUri"] = json!(format!("https://127.0.0.1:{port}/"));
    if props["enableSoftDelete"].is_null() {
        props["enableSoftDelete"] = json!(true);
    }
    if props["softDeleteRetentionInDays"].is_null() {
        props["softDeleteRetentionInDays"] = json!(RETENTION_DAYS);
    }
    if props["enableRbacAuthorization"].is_null() {
        props["enableRbacAuthorization"] = json!(false);
    }
    // A vault made again under a name starts empty.
    if !existed {
        store.vault_data.remove(&name.to_lowercase());
    }
    Ok(())
}

/// ARM gives every managed identity a PUT names its object id: a system-assigned one `principalId` and
/// `tenantId` (kept by later PUTs), each user-assigned one `principalId` and `clientId`.
pub(super) fn fill_identity(value: &mut Value, previous: Option<&Value>, id: &str) {
    let identity = &mut value["identity"];
    let kind = identity["type"].as_str().unwrap_or_default().to_owned();
    if kind.contains("SystemAssigned") {
        let kept = previous.and_then(|p| p["identity"]["principalId"].as_str().map(str::to_owned));
        identity["principalId"] = json!(kept.unwrap_or_else(|| uuid_from(&format!("{}#principal", id.to_lowercase()))));
        if identity["tenantId"].is_null() {
            identity["tenantId"] = json!(super::TENANT);
        }
    }
    if let Some(assigned) = identity.get_mut("userAssignedIdentities").and_then(Value::as_object_mut) {
        for (uai, entry) in assigned.iter_mut() {
            if !entry.is_object() {
                *entry = json!({});
            }
            entry["principalId"] = json!(uuid_from(&format!("{}#principal", uai.to_lowercase())));
            entry["clientId"] = json!(uuid_from(&format!("{}#client", uai.to_lowercase())));
        }
    }
}

/// The port of the vault's data-plane listener, opened on first use.
fn listener(az: &Arc<Azure>, name: &str) -> std::io::Result<u16> {
    let mut ports = az.vault_ports.lock().unwrap();
    if let Some(port) = ports.get(name) {
        return Ok(*port);
    }
    let acceptor = az.tls.get().cloned().ok_or_else(|| std::io::Error::other("the emulator has no TLS"))?;
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let port = std_listener.local_addr()?.port();
    let tcp = tokio::net::TcpListener::from_std(std_listener)?;
    let state = (az.clone(), name.to_owned());
    let app = axum::Router::new().fallback(data_plane_handler).with_state(state);
    super::serve_tls(tcp, acceptor, app);
    ports.insert(name.to_owned(), port);
    Ok(port)
}

async fn data_plane_handler(
    axum::extract::State((az, vault)): axum::extract::State<(Arc<Azure>, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    serve(&az, &vault, method, uri, headers, body).await
}

fn kv_error(status: u16, code: &str, message: &str, inner: Option<&str>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(inner) = inner {
        error["innererror"] = json!({"code": inner});
    }
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), axum::Json(json!({"error": error}))).into_response()
}

/// The data-plane operation a request is, and the secret permission it needs.
fn operation(method: &Method, segs: &[&str]) -> Option<(&'static str, &'static str)> {
    Some(match (method.as_str(), segs) {
        ("PUT", ["secrets", _]) => ("SetSecret", "set"),
        ("GET", ["secrets"]) => ("GetSecrets", "list"),
        ("GET", ["secrets", _, "versions"]) => ("GetSecretVersions", "list"),
        ("GET", ["secrets", _] | ["secrets", _, _]) => ("GetSecret", "get"),
        ("DELETE", ["secrets", _]) => ("DeleteSecret", "delete"),
        ("GET", ["deletedsecrets", _]) => ("GetDeletedSecret", "get"),
        ("DELETE", ["deletedsecrets", _]) => ("PurgeDeletedSecret", "purge"),
        _ => return None,
    })
}

/// Whether the vault lets `principal` use the permission.
fn allowed(store: &Store, vault_key: &str, vault: &Value, principal: &str, permission: &str) -> bool {
    let props = &vault["properties"];
    if props["enableRbacAuthorization"] == true {
        let reads = matches!(permission, "get" | "list");
        let scopes: Vec<String> = {
            let segs: Vec<&str> = vault_key.split('/').filter(|s| !s.is_empty()).collect();
            vec![
                vault_key.to_owned(),
                format!("/{}", segs.iter().take(4).copied().collect::<Vec<_>>().join("/")),
                format!("/{}", segs.iter().take(2).copied().collect::<Vec<_>>().join("/")),
            ]
        };
        return store.resources.iter().any(|(k, s)| {
            let Some((scope, _)) = k.split_once("/providers/microsoft.authorization/roleassignments/") else { return false };
            let p = &s.value["properties"];
            let role = p["roleDefinitionId"].as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_lowercase();
            scopes.iter().any(|sc| sc == scope)
                && p["principalId"].as_str().is_some_and(|id| id.eq_ignore_ascii_case(principal))
                && p.get("condition").is_none_or(Value::is_null)
                && (role == SECRETS_OFFICER || role == ADMINISTRATOR || (reads && role == SECRETS_USER))
        });
    }
    let tenant = props["tenantId"].as_str().unwrap_or_default();
    props["accessPolicies"].as_array().into_iter().flatten().any(|entry| {
        entry["tenantId"].as_str().is_some_and(|t| t.eq_ignore_ascii_case(tenant))
            && entry["objectId"].as_str().is_some_and(|o| o.eq_ignore_ascii_case(principal))
            && entry.get("applicationId").is_none_or(Value::is_null)
            && entry["permissions"]["secrets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|p| p.eq_ignore_ascii_case(permission) || p.eq_ignore_ascii_case("all"))
    })
}

fn attributes(v: &Version) -> Value {
    json!({"enabled": true, "created": v.created, "updated": v.created, "recoveryLevel": "Recoverable+Purgeable", "recoverableDays": RETENTION_DAYS})
}

fn bundle(base: &str, name: &str, v: &Version, with_value: bool) -> Value {
    let mut b = json!({"id": format!("{base}secrets/{name}/{}", v.id), "attributes": attributes(v)});
    if with_value {
        b["value"] = json!(v.value);
    }
    if let Some(ct) = &v.content_type {
        b["contentType"] = json!(ct);
    }
    if v.tags.is_object() {
        b["tags"] = v.tags.clone();
    }
    b
}

/// Serves one request to a vault's listener.
async fn serve(az: &Azure, vault_name: &str, method: Method, uri: Uri, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let rest = uri.path().trim_start_matches('/').to_owned();
    let rest = rest.as_str();
    let tenant = {
        let store = az.store.lock().unwrap();
        match vault_of(&store, vault_name) {
            Some((_, v)) => v["properties"]["tenantId"].as_str().unwrap_or(super::TENANT).to_owned(),
            None => {
                return kv_error(
                    404,
                    "VaultNotFound",
                    &format!("No vault named '{vault_name}' exists (its host would not resolve)."),
                    None,
                );
            }
        }
    };
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(str::to_owned);
    let Some(token) = token else {
        let mut resp = kv_error(401, "Unauthorized", "AKV10000: Request is missing a Bearer or PoP token.", None);
        let challenge =
            format!("Bearer authorization=\"https://login.microsoftonline.com/{tenant}\", resource=\"https://vault.azure.net\"");
        resp.headers_mut().insert("www-authenticate", HeaderValue::from_str(&challenge).unwrap_or(HeaderValue::from_static("Bearer")));
        return resp;
    };
    // Judged as the SDK's operation on `{vaultBaseUrl}`, with GetSecret's empty version (the latest,
    // `secrets/<name>/`) standing as one segment.
    let mut judged_path = format!("/{rest}");
    if judged_path.starts_with("/secrets/") && judged_path.ends_with('/') && judged_path.matches('/').count() == 3 {
        judged_path.push_str("latest");
    }
    let judged_uri: Uri = match uri.query() {
        Some(q) => format!("{judged_path}?{q}"),
        None => judged_path,
    }
    .parse()
    .unwrap_or_else(|_| uri.clone());
    let op = if az.admin.judging() {
        match crate::conformance::gate(crate::conformance::Cloud::Azure, method.as_str(), &judged_uri, &headers, &body) {
            Ok(op) => op,
            Err(refusal) => return *refusal,
        }
    } else {
        None
    };
    let answer = data_plane(az, &method, &uri, rest, vault_name, &token, &body).await;
    crate::conformance::checked(op, crate::conformance::Cloud::Azure, answer).await
}

async fn data_plane(az: &Azure, method: &Method, uri: &Uri, rest: &str, vault_name: &str, token: &str, body: &[u8]) -> Response {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let Some((op, permission)) = operation(method, &segs) else {
        return kv_error(400, "BadParameter", &format!("The emulator serves no {method} /{rest}"), None);
    };
    if !uri.query().unwrap_or_default().contains("api-version=") {
        return kv_error(400, "BadParameter", "The 'api-version' query parameter is required.", None);
    }
    if let Some(fault) = az.admin.on_request("keyvault", op) {
        match fault.kind {
            FaultKind::Latency => tokio::time::sleep(std::time::Duration::from_millis(fault.latency_ms)).await,
            FaultKind::Throttle => {
                let mut resp = kv_error(429, "Throttled", "Request was not processed because too many requests were received.", None);
                resp.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
                return resp;
            }
            FaultKind::NotFound => {
                return kv_error(404, "SecretNotFound", "A secret with the given name was not found in this key vault.", None);
            }
            _ => return kv_error(500, "InternalServerError", "An unexpected error occurred.", None),
        }
    }
    let mut store = az.store.lock().unwrap();
    let Some((vault_key, vault)) = vault_of(&store, vault_name).map(|(k, v)| (k.clone(), v.clone())) else {
        return kv_error(404, "VaultNotFound", "The vault is gone.", None);
    };
    let base = vault["properties"]["vaultUri"].as_str().unwrap_or_default().to_owned();
    if let Some(principal) = store.tokens.get(token).cloned()
        && !allowed(&store, &vault_key, &vault, &principal, permission)
    {
        let tenant = vault["properties"]["tenantId"].as_str().unwrap_or_default();
        let location = vault["location"].as_str().unwrap_or_default();
        let rbac = vault["properties"]["enableRbacAuthorization"] == true;
        let message = if rbac {
            format!(
                "Caller is not authorized to perform action on resource.\r\nIf role assignments, deny assignments or role definitions were changed recently, please observe propagation time.\r\nCaller: oid={principal};iss=https://sts.windows.net/{tenant}/\r\nAction: 'Microsoft.KeyVault/vaults/secrets/{}'\r\nResource: '{vault_key}'",
                if permission == "get" { "getSecret/action" } else { "readMetadata/action" }
            )
        } else {
            format!(
                "The user, group or application 'oid={principal};iss=https://sts.windows.net/{tenant}/' does not have secrets {permission} permission on key vault '{vault_name};location={location}'. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125287"
            )
        };
        return kv_error(403, "Forbidden", &message, Some(if rbac { "ForbiddenByRbac" } else { "AccessDenied" }));
    }
    let data = store.vault_data.entry(vault_name.to_owned()).or_default();
    let name = segs.get(1).copied().unwrap_or_default();
    let lname = name.to_lowercase();
    let not_found = |what: &str| {
        kv_error(
            404,
            "SecretNotFound",
            &format!(
                "A secret with (name/id) {what} was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182"
            ),
            None,
        )
    };
    match op {
        "SetSecret" => {
            if name.is_empty() || name.len() > 127 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return kv_error(
                    400,
                    "BadParameter",
                    "The request URI contains an invalid name: secret names are 1-127 letters, digits and dashes.",
                    None,
                );
            }
            if data.deleted.contains_key(&lname) {
                return kv_error(
                    409,
                    "Conflict",
                    &format!(
                        "Secret {name} is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the secret can only be recovered or purged."
                    ),
                    Some("ObjectIsDeletedButRecoverable"),
                );
            }
            let Ok(request) = serde_json::from_slice::<Value>(body) else {
                return kv_error(400, "BadParameter", "The request body is not JSON.", None);
            };
            let Some(value) = request["value"].as_str() else {
                return kv_error(400, "BadParameter", "Property 'value' is required.", None);
            };
            if value.len() > 25 * 1024 {
                return kv_error(400, "BadParameter", "The secret value exceeds the maximum size of 25 KB.", None);
            }
            let created = unix_now();
            let entry = data.secrets.entry(lname.clone()).or_insert_with(|| (name.to_owned(), Vec::new()));
            let id = digest(&format!("{vault_name}/{lname}/{}/{created}", entry.1.len()));
            let version = Version {
                id: format!("{id}{}", &digest(&id)),
                value: value.to_owned(),
                content_type: request["contentType"].as_str().map(str::to_owned),
                tags: request["tags"].clone(),
                created,
            };
            entry.1.push(version.clone());
            let shown = entry.0.clone();
            axum::Json(bundle(&base, &shown, &version, true)).into_response()
        }
        "GetSecret" => {
            let asked = segs.get(2).copied().unwrap_or_default();
            let Some((shown, versions)) = data.secrets.get(&lname) else { return not_found(name) };
            let found = if asked.is_empty() { versions.last() } else { versions.iter().find(|v| v.id == asked) };
            match found {
                Some(v) => axum::Json(bundle(&base, shown, v, true)).into_response(),
                None => not_found(&format!("{name}/{asked}")),
            }
        }
        "GetSecrets" => {
            let items: Vec<Value> = data
                .secrets
                .values()
                .filter_map(|(shown, versions)| versions.last().map(|v| (shown, v)))
                .map(|(shown, v)| {
                    let mut item = bundle(&base, shown, v, false);
                    item["id"] = json!(format!("{base}secrets/{shown}"));
                    item
                })
                .collect();
            axum::Json(json!({"value": items, "nextLink": null})).into_response()
        }
        "GetSecretVersions" => {
            let Some((shown, versions)) = data.secrets.get(&lname) else { return not_found(name) };
            let items: Vec<Value> = versions.iter().map(|v| bundle(&base, shown, v, false)).collect();
            axum::Json(json!({"value": items, "nextLink": null})).into_response()
        }
        "DeleteSecret" => {
            let Some((shown, versions)) = data.secrets.remove(&lname) else { return not_found(name) };
            let now = unix_now();
            let answer = deleted_bundle(&base, &shown, &versions, now);
            data.deleted.insert(lname, (shown, versions, now));
            axum::Json(answer).into_response()
        }
        "GetDeletedSecret" => match data.deleted.get(&lname) {
            Some((shown, versions, at)) => axum::Json(deleted_bundle(&base, shown, versions, *at)).into_response(),
            None => kv_error(404, "SecretNotFound", &format!("Deleted Secret not found: {name}"), None),
        },
        "PurgeDeletedSecret" => match data.deleted.remove(&lname) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => kv_error(404, "SecretNotFound", &format!("Deleted Secret not found: {name}"), None),
        },
        _ => kv_error(400, "BadParameter", "unsupported", None),
    }
}

fn deleted_bundle(base: &str, name: &str, versions: &[Version], at: u64) -> Value {
    let mut b = versions.last().map(|v| bundle(base, name, v, false)).unwrap_or_else(|| json!({}));
    b["recoveryId"] = json!(format!("{base}deletedsecrets/{name}"));
    b["deletedDate"] = json!(at);
    b["scheduledPurgeDate"] = json!(at + RETENTION_DAYS * 86_400);
    b
}

/// The secrets of live vaults, as `vault/name` (soft-deleted ones as `vault/deletedsecrets/name`), for the
/// inventory: a destroy that deletes a secret but leaves it soft-deleted has not left nothing behind.
pub(super) fn inventory(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for (vault, data) in &store.vault_data {
        if vault_of(store, vault).is_none() {
            continue;
        }
        out.extend(data.secrets.values().map(|(n, _)| format!("{vault}/{n}")));
        out.extend(data.deleted.values().map(|(n, _, _)| format!("{vault}/deletedsecrets/{n}")));
    }
    out
}

/// Records a managed identity token with the object id it is for.
pub(super) fn remember_token(az: &Azure, token: &str, principal: &str) {
    az.store.lock().unwrap().tokens.insert(token.to_owned(), principal.to_owned());
}
