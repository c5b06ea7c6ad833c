//! The Compute Engine metadata server (`metadata.google.internal`, 169.254.169.254) for one instance of the
//! emulator, as `POST /_admin/metadata` opens it (see `crate::metadata`). Every request reads the instance as
//! the Compute API holds it now.
//!
//! - `Metadata-Flavor: Google` is required (403 without it), a request carrying `X-Forwarded-For` is refused
//!   (403), and every answer carries `Metadata-Flavor: Google`.
//! - `/computeMetadata/v1/` holds `instance/` (attributes from the instance's metadata items, hostname, id,
//!   name, machine-type, zone as `projects/<number>/zones/<zone>`, image, network-interfaces, disks,
//!   scheduling, service-accounts with `default/` only when the instance has a service account, tags) and
//!   `project/` (project-id, numeric-project-id, attributes/).
//! - A directory (a path ending in `/`) answers its listing, subdirectories ending in `/`; `?recursive=true`
//!   answers the subtree as JSON with the camelCase keys; `?alt=text|json` chooses the form; every answer
//!   has an `ETag`.
//! - `?wait_for_change=true` waits until the answer's ETag differs from `last_etag` (or from the current
//!   one when none is given), or `timeout_sec` passes; a setMetadata through the Compute API wakes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{BASE, Gcp, project_number};
use crate::metadata::{Answer, Asked, Instance, digest, respond};

/// How long a `wait_for_change` without `timeout_sec` waits at most.
const LONGEST_WAIT: Duration = Duration::from_secs(600);

/// `POST /_admin/metadata {"instance": <path or numeric id>}`.
pub(super) fn listen(gcp: &Arc<Gcp>, body: &[u8]) -> (u16, Value) {
    let asked = match crate::metadata::instance_of(body) {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let found = {
        let store = gcp.store.lock().unwrap();
        let wanted = asked.trim_start_matches(BASE).trim_start_matches('/').to_owned();
        store
            .resources
            .iter()
            .filter(|(_, s)| s.kind == "instances")
            .find(|(path, s)| **path == wanted || s.value["id"].as_str() == Some(asked.as_str()))
            .map(|(path, s)| (path.clone(), s.value.clone()))
    };
    let Some((path, instance)) = found else {
        return (404, json!({"error": format!("no instance {asked}")}));
    };
    let ip = instance["networkInterfaces"][0]["networkIP"].as_str().map(str::to_owned);
    let facts = json!({
        "instance": path, "private_ip": ip, "mac": ip.as_deref().map(mac_of), "hostname": hostname(&path, &instance),
    });
    let port = gcp.metadata.open(&path, Arc::new(Gce { gcp: gcp.clone(), path: path.clone() }));
    crate::metadata::opened(port, facts)
}

struct Gce {
    gcp: Arc<Gcp>,
    /// `projects/<p>/zones/<z>/instances/<name>`.
    path: String,
}

impl Instance for Gce {
    fn reachable(&self) -> bool {
        self.gcp.store.lock().unwrap().resources.contains_key(&self.path)
    }

    fn answer(&self, asked: Asked) -> Answer {
        let (gcp, path) = (self.gcp.clone(), self.path.clone());
        Box::pin(async move { answer(&gcp, &path, &asked).await })
    }
}

/// Google's MAC for an address: `42:01` and the address's four bytes.
fn mac_of(ip: &str) -> String {
    let octets: Vec<u8> = ip.split('.').filter_map(|o| o.parse().ok()).collect();
    let mut mac = vec![0x42u8, 0x01];
    mac.extend(octets);
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The instance's zonal DNS name, `<name>.<zone>.c.<project>.internal`.
fn hostname(path: &str, instance: &Value) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    let (project, zone) = (parts.get(1).copied().unwrap_or_default(), parts.get(3).copied().unwrap_or_default());
    format!("{}.{zone}.c.{project}.internal", instance["name"].as_str().unwrap_or_default())
}

fn last(link: &Value) -> String {
    link.as_str().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_owned()
}

fn flag(v: &Value, default: bool) -> &'static str {
    if v.as_bool().unwrap_or(default) { "TRUE" } else { "FALSE" }
}

/// The metadata tree of one instance now, as the recursive JSON has it (camelCase keys), or None when the
/// instance is gone.
fn tree(gcp: &Gcp, path: &str) -> Option<Value> {
    let store = gcp.store.lock().unwrap();
    let instance = store.resources.get(path)?.value.clone();
    let parts: Vec<&str> = path.split('/').collect();
    let (project, zone) = (parts.get(1).copied().unwrap_or_default(), parts.get(3).copied().unwrap_or_default());
    let number = project_number(project);
    let attributes: Map<String, Value> = instance["metadata"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| Some((item["key"].as_str()?.to_owned(), json!(item["value"].as_str().unwrap_or_default()))))
        .collect();
    let interfaces: Vec<Value> = instance["networkInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|nic| {
            let ip = nic["networkIP"].as_str().unwrap_or_default();
            let subnet_path = nic["subnetwork"].as_str().unwrap_or_default().trim_start_matches(BASE).to_owned();
            let range = store.resources.get(&subnet_path).and_then(|s| s.value["ipCidrRange"].as_str().map(str::to_owned));
            let (gateway, mask) = match range.as_deref().and_then(crate::metadata::cidr) {
                Some((base, len)) => {
                    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                    (std::net::Ipv4Addr::from(u32::from(base) + 1).to_string(), std::net::Ipv4Addr::from(mask).to_string())
                }
                None => (String::new(), String::new()),
            };
            json!({
                "accessConfigs": [], "dnsServers": [gateway], "forwardedIps": [], "gateway": gateway, "ip": ip,
                "ipAliases": [], "mac": mac_of(ip), "mtu": nic["mtu"].as_u64().unwrap_or(1460),
                "network": format!("projects/{number}/networks/{}", last(&nic["network"])), "subnetmask": mask,
                "targetInstanceIps": [],
            })
        })
        .collect();
    let disks: Vec<Value> = instance["disks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, d)| {
            json!({"deviceName": d["deviceName"].as_str().unwrap_or(&format!("persistent-disk-{i}")), "index": i,
                   "interface": d["interface"].as_str().unwrap_or("SCSI"), "mode": d["mode"].as_str().unwrap_or("READ_WRITE"),
                   "type": "PERSISTENT"})
        })
        .collect();
    // The instance's service account, as `default/` and by its email ("aliases": ["default"]); none without one.
    let mut accounts = Map::new();
    if let Some(sa) = instance["serviceAccounts"].as_array().and_then(|a| a.first())
        && let Some(email) = sa["email"].as_str()
    {
        let account = json!({"aliases": ["default"], "email": email, "scopes": sa["scopes"].as_array().cloned().unwrap_or_default()});
        accounts.insert("default".into(), account.clone());
        accounts.insert(email.to_owned(), account);
    }
    let scheduling = &instance["scheduling"];
    let image = store.boot_images.get(path).map(|i| i.trim_start_matches(BASE).to_owned()).unwrap_or_default();
    let id: u64 = instance["id"].as_str().and_then(|i| i.parse().ok()).unwrap_or_default();
    Some(json!({
        "instance": {
            "attributes": attributes,
            "description": instance["description"].as_str().unwrap_or_default(),
            "disks": disks,
            "hostname": hostname(path, &instance),
            "id": id,
            "image": image,
            "machineType": format!("projects/{number}/machineTypes/{}", last(&instance["machineType"])),
            "maintenanceEvent": "NONE",
            "name": instance["name"],
            "networkInterfaces": interfaces,
            "preempted": "FALSE",
            "scheduling": {
                "automaticRestart": flag(&scheduling["automaticRestart"], true),
                "onHostMaintenance": scheduling["onHostMaintenance"].as_str().unwrap_or("MIGRATE"),
                "preemptible": flag(&scheduling["preemptible"], false),
            },
            "serviceAccounts": accounts,
            "tags": instance["tags"]["items"].as_array().cloned().unwrap_or_default(),
            "zone": format!("projects/{number}/zones/{zone}"),
        },
        "project": {"attributes": {}, "numericProjectId": number.parse::<u64>().unwrap_or_default(), "projectId": project},
    }))
}

/// `network-interfaces` -> `networkInterfaces`.
fn camel(segment: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in segment.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `networkInterfaces` -> `network-interfaces`.
fn kebab(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Keys that name data (attribute keys, service accounts), not fields: used as they are.
fn literal_children(key: &str) -> bool {
    matches!(key, "attributes" | "serviceAccounts")
}

/// The node at `segments` (path segments as the metadata server names them), and whether its children are
/// named literally.
fn walk<'a>(tree: &'a Value, segments: &[&str]) -> Option<(&'a Value, bool)> {
    let mut node = tree;
    let mut literal = false;
    for segment in segments {
        node = match node {
            Value::Object(map) => {
                let key = if literal { segment.to_string() } else { camel(segment) };
                literal = literal_children(&key);
                map.get(&key)?
            }
            Value::Array(items) => {
                literal = false;
                items.get(segment.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some((node, literal))
}

fn is_directory(v: &Value) -> bool {
    v.is_object() || v.as_array().is_some_and(|a| a.iter().all(Value::is_object) && !a.is_empty())
}

/// A directory's listing: its entries, subdirectories ending in `/`.
fn listing(node: &Value, literal: bool, extra: &[&str]) -> String {
    let mut names: Vec<String> = match node {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let name = if literal { k.clone() } else { kebab(k) };
                if is_directory(v) { format!("{name}/") } else { name }
            })
            .collect(),
        Value::Array(items) => (0..items.len()).map(|i| format!("{i}/")).collect(),
        _ => Vec::new(),
    };
    names.extend(extra.iter().map(|s| s.to_string()));
    names.sort();
    names.iter().map(|n| format!("{n}\n")).collect()
}

/// A leaf as text: strings as they are, lists one item a line (tags as JSON, as the server gives them).
fn leaf_text(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) if key == "tags" => Value::Array(items.clone()).to_string(),
        Value::Array(items) => items.iter().map(|i| i.as_str().map(str::to_owned).unwrap_or_else(|| i.to_string()) + "\n").collect(),
        other => other.to_string(),
    }
}

/// A subtree as `alt=text` flattens it: one `path value` line a leaf.
fn flatten(prefix: &str, v: &Value, literal: bool, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let name = if literal { k.clone() } else { kebab(k) };
                let path = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
                flatten(&path, child, !literal && literal_children(k), out);
            }
        }
        Value::Array(items) if is_directory(v) => {
            for (i, child) in items.iter().enumerate() {
                flatten(&format!("{prefix}/{i}"), child, false, out);
            }
        }
        leaf => out.push(format!("{prefix} {}", leaf_text(prefix.rsplit('/').next().unwrap_or_default(), leaf).trim_end())),
    }
}

/// (status, content type, body) for a path now.
fn render(gcp: &Gcp, path: &str, asked: &Asked) -> (u16, &'static str, String) {
    const TEXT: &str = "application/text";
    const JSON: &str = "application/json";
    let not_found = (404, "text/html; charset=UTF-8", "Not Found".to_owned());
    let recursive = asked.param("recursive").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let alt = asked.param("alt");
    let trimmed = asked.path.trim_start_matches('/');
    if trimmed.is_empty() {
        return (200, TEXT, "computeMetadata/\n".into());
    }
    if trimmed == "computeMetadata" || trimmed == "computeMetadata/" {
        return (200, TEXT, "v1/\n".into());
    }
    let Some(rest) = trimmed.strip_prefix("computeMetadata/v1") else { return not_found };
    let Some(tree) = tree(gcp, path) else { return not_found };
    let directory_asked = rest.ends_with('/') || rest.is_empty();
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    // A service account's access token (never in a recursive answer).
    if let [first, second, account, "token"] = segments.as_slice()
        && *first == "instance"
        && *second == "service-accounts"
    {
        if walk(&tree, &["instance", "service-accounts", account]).is_none() {
            return not_found;
        }
        let token = format!("ya29.emulator-{}", digest(&format!("{path}/{account}")));
        // Remembered with its service account: Secret Manager tells its callers apart by it.
        if let Some((email, _)) = walk(&tree, &["instance", "service-accounts", account, "email"])
            && let Some(email) = email.as_str()
        {
            gcp.store.lock().unwrap().tokens.insert(token.clone(), email.to_owned());
        }
        return (200, JSON, json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}).to_string());
    }
    let Some((node, literal)) = walk(&tree, &segments) else { return not_found };
    let key = segments.last().copied().unwrap_or_default();
    if is_directory(node) {
        if recursive {
            return match alt {
                Some("text") => {
                    let mut lines = Vec::new();
                    flatten("", node, literal, &mut lines);
                    (200, TEXT, lines.iter().map(|l| format!("{}\n", l.trim_start_matches('/'))).collect())
                }
                _ => (200, JSON, node.to_string()),
            };
        }
        if !directory_asked {
            // A directory asked for without its trailing slash: the server points at it.
            return (301, TEXT, format!("/computeMetadata/v1/{}/", segments.join("/")));
        }
        let extra: Vec<&str> =
            if segments.len() == 3 && segments[..2] == ["instance", "service-accounts"] { vec!["token"] } else { vec![] };
        let text = listing(node, literal, &extra);
        return match alt {
            Some("json") => {
                let names: Vec<&str> = text.lines().collect();
                (200, JSON, json!(names).to_string())
            }
            _ => (200, TEXT, text),
        };
    }
    match alt {
        Some("json") => (200, JSON, node.to_string()),
        _ => (200, TEXT, leaf_text(key, node)),
    }
}

async fn answer(gcp: &Arc<Gcp>, path: &str, asked: &Asked) -> Response {
    let flavor = [("metadata-flavor", "Google".to_owned()), ("server", "Metadata Server for VM".to_owned())];
    if asked.header("x-forwarded-for").is_some() {
        return respond(403, "text/html; charset=UTF-8", "Request rejected: it carries X-Forwarded-For.\n", &flavor);
    }
    let wants_flavor = asked.header("metadata-flavor") == Some("Google");
    if !wants_flavor && !asked.path.trim_start_matches('/').is_empty() {
        return respond(
            403,
            "text/html; charset=UTF-8",
            format!(
                "Your client does not have permission to get URL {} from this server. Missing Metadata-Flavor:Google header.\n",
                asked.path
            ),
            &flavor,
        );
    }
    if asked.method != axum::http::Method::GET && asked.method != axum::http::Method::HEAD {
        return respond(405, "text/html; charset=UTF-8", "Method Not Allowed\n", &flavor);
    }
    let wait = asked.param("wait_for_change").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let timeout = asked.param("timeout_sec").and_then(|t| t.parse::<u64>().ok()).map(Duration::from_secs).unwrap_or(LONGEST_WAIT);
    let deadline = Instant::now() + timeout.min(LONGEST_WAIT);
    let mut first_etag: Option<String> = None;
    loop {
        let notified = gcp.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (status, content_type, body) = render(gcp, path, asked);
        let etag = digest(&body);
        let reference = asked.param("last_etag").map(str::to_owned).or_else(|| first_etag.clone());
        let changed = reference.as_deref().is_some_and(|r| r != etag);
        if !wait || status != 200 || changed || Instant::now() >= deadline {
            let mut headers = flavor.to_vec();
            headers.push(("etag", etag));
            if status == 301 {
                headers.push(("location", body.clone()));
            }
            return respond(status, content_type, body, &headers);
        }
        first_etag.get_or_insert(etag);
        let remaining = deadline.saturating_duration_since(Instant::now());
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(remaining.min(Duration::from_millis(250))) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_go_between_the_paths_and_the_json_keys() {
        assert_eq!(camel("network-interfaces"), "networkInterfaces");
        assert_eq!(kebab("numericProjectId"), "numeric-project-id");
        assert_eq!(mac_of("10.128.0.2"), "42:01:0a:80:00:02");
        let tree = json!({"instance": {"attributes": {"hpc-slurm-config": "x"}, "networkInterfaces": [{"ip": "10.0.0.2"}]}});
        assert_eq!(walk(&tree, &["instance", "attributes", "hpc-slurm-config"]).map(|n| n.0), Some(&json!("x")));
        assert_eq!(walk(&tree, &["instance", "network-interfaces", "0", "ip"]).map(|n| n.0), Some(&json!("10.0.0.2")));
        assert_eq!(listing(&tree["instance"], false, &[]), "attributes/\nnetwork-interfaces/\n");
    }
}
