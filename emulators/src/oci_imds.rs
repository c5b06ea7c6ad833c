//! OCI's instance metadata service (IMDS, 169.254.169.254) for one instance of the emulator, as
//! `POST /_admin/metadata` opens it (see `crate::metadata`). Every request reads the instance as Core holds it
//! now: metadata replaced by UpdateInstance shows at once; a terminated instance is unreachable.
//!
//! As OCI's "Getting Instance Metadata" documents it: the v2 endpoints (`/opc/v2/`) need the header
//! `Authorization: Bearer Oracle` (401 without it); `/opc/v2/instance/` answers the instance as JSON and each
//! of its fields as a leaf (`/opc/v2/instance/displayName`, `/opc/v2/instance/metadata/<key>`), and
//! `/opc/v2/vnics/` its VNICs, and `/opc/v2/identity/` the instance principal's leaf certificate (`cert.pem`),
//! its private key (`key.pem`) and the intermediate certificate (`intermediate.pem`) (see `oci_identity.rs`). The legacy v1 endpoints (`/opc/v1/`, `/openstack`) answer too, without the
//! header, unless the instance was launched with `instanceOptions.areLegacyImdsEndpointsDisabled`: then they
//! are 404 and a request forwarded through a proxy (`Forwarded`, `X-Forwarded-For`, `X-Forwarded-Host`) is
//! refused.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};

use super::{Oci, Store, oke, primary_vnic, state_of};
use crate::metadata::{Answer, Asked, Instance, mac_from, respond};

/// Oracle's MAC prefix for VNICs (02:00:17).
const MAC_PREFIX: [u8; 3] = [0x02, 0x00, 0x17];

/// `POST /_admin/metadata {"instance": <instance OCID>}`.
pub(super) fn listen(oci: &Arc<Oci>, body: &[u8]) -> (u16, Value) {
    let asked = match crate::metadata::instance_of(body) {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let found = document(&oci.store.lock().unwrap(), &asked);
    let Some((instance, vnics)) = found else {
        return (404, json!({"error": format!("no live instance {asked}")}));
    };
    let facts = json!({
        "instance": asked, "private_ip": vnics[0]["privateIp"], "mac": vnics[0]["macAddr"], "hostname": instance["hostname"],
    });
    let port = oci.metadata.open(&asked, Arc::new(Imds { oci: oci.clone(), id: asked.clone() }));
    crate::metadata::opened(port, facts)
}

struct Imds {
    oci: Arc<Oci>,
    id: String,
}

impl Instance for Imds {
    fn reachable(&self) -> bool {
        self.oci.store.lock().unwrap().resources.get(&self.id).is_some_and(|s| primary_vnic(s).is_some())
    }

    fn answer(&self, asked: Asked) -> Answer {
        let mut store = self.oci.store.lock().unwrap();
        // The instance principal's certificates and key: `/opc/v2/identity/{cert,key,intermediate}.pem`.
        let identity_file = asked
            .path
            .trim_start_matches('/')
            .strip_prefix("opc/v2/identity/")
            .and_then(|file| super::identity::metadata_file(&mut store, &self.id, file));
        let found = document(&store, &self.id);
        let legacy_disabled = store
            .resources
            .get(&self.id)
            .is_some_and(|s| s.value["instanceOptions"]["areLegacyImdsEndpointsDisabled"].as_bool() == Some(true));
        drop(store);
        Box::pin(async move { answer(found, identity_file, legacy_disabled, &asked) })
    }
}

/// `Uocm:US-ASHBURN-AD-1` -> `iad-ad-1`.
fn oci_ad_name(ad: &str) -> String {
    let n = ad.rsplit('-').next().filter(|n| n.chars().all(|c| c.is_ascii_digit())).unwrap_or("1");
    format!("{}-ad-{n}", oke::REGION_KEY)
}

/// A host name as OCI derives one from a display name: letters, digits and hyphens, lowercase, 63 at most.
fn host_label(name: &str) -> String {
    let label: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    label.trim_matches('-').chars().take(63).collect()
}

/// RFC 3339 (as the emulator writes it) to milliseconds since the epoch, as IMDS gives `timeCreated`.
pub(super) fn epoch_millis(t: &str) -> i64 {
    let num = |r: std::ops::Range<usize>| t.get(r).and_then(|s| s.parse::<i64>().ok()).unwrap_or_default();
    let (y, mo, d, h, mi, s) = (num(0..4), num(5..7), num(8..10), num(11..13), num(14..16), num(17..19));
    let ms = num(20..23);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 86_400 + h * 3600 + mi * 60 + s) * 1000) + ms
}

/// `RUNNING` -> `Running`, as IMDS writes the state.
fn state_word(state: &str) -> String {
    let lower = state.to_lowercase();
    let mut chars = lower.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// The instance document and the VNICs of a live instance now.
fn document(store: &Store, id: &str) -> Option<(Value, Vec<Value>)> {
    let stored = store.resources.get(id).filter(|s| s.kind == "instance")?;
    let (_, vnic, subnet, ip) = primary_vnic(stored)?;
    let v = &stored.value;
    let ad = v["availabilityDomain"].as_str().unwrap_or_default();
    let display = v["displayName"].as_str().unwrap_or_default();
    let hostname = v["createVnicDetails"]["hostnameLabel"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| host_label(display));
    let cidr = store.resources.get(&subnet).and_then(|s| s.value["cidrBlock"].as_str().map(str::to_owned)).unwrap_or_default();
    let router =
        crate::metadata::cidr(&cidr).map(|(base, _)| std::net::Ipv4Addr::from(u32::from(base) + 1).to_string()).unwrap_or_default();
    let vlan = u64::from_str_radix(&crate::metadata::digest(id)[..4], 16).unwrap_or_default() % 4000 + 1;
    let vnics = vec![json!({
        "vnicId": vnic, "privateIp": ip, "vlanTag": vlan, "macAddr": crate::metadata::mac_text(mac_from(MAC_PREFIX, id)),
        "virtualRouterIp": router, "subnetCidrBlock": cidr, "nicIndex": 0,
    })];
    let metadata = if v["metadata"].is_object() { v["metadata"].clone() } else { json!({}) };
    let object_or_empty = |x: &Value| if x.is_object() { x.clone() } else { json!({}) };
    let mut instance = json!({
        "agentConfig": object_or_empty(&v["agentConfig"]),
        "availabilityDomain": ad,
        "canonicalRegionName": oke::REGION,
        "compartmentId": v["compartmentId"],
        "definedTags": object_or_empty(&v["definedTags"]),
        "displayName": display,
        "faultDomain": v["faultDomain"],
        "freeformTags": object_or_empty(&v["freeformTags"]),
        "hostname": hostname,
        "id": id,
        "image": v["imageId"],
        "metadata": metadata,
        "ociAdName": oci_ad_name(ad),
        "region": oke::REGION_KEY,
        "regionInfo": {"realmDomainComponent": "oraclecloud.com", "realmKey": "oc1", "regionIdentifier": oke::REGION,
                       "regionKey": oke::REGION_KEY.to_uppercase()},
        "shape": v["shape"],
        "state": state_word(&state_of(stored)),
        "tenantId": v["compartmentId"],
        "timeCreated": epoch_millis(v["timeCreated"].as_str().unwrap_or_default()),
    });
    if v["shapeConfig"].is_object() {
        instance["shapeConfig"] = v["shapeConfig"].clone();
    }
    Some((instance, vnics))
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn not_found() -> Response {
    respond(404, "text/plain; charset=utf-8", "Not Found\n", &[])
}

fn answer(found: Option<(Value, Vec<Value>)>, identity_file: Option<String>, legacy_disabled: bool, asked: &Asked) -> Response {
    if legacy_disabled && asked.forwarded() {
        return respond(403, "text/plain; charset=utf-8", "Forbidden: forwarded requests are rejected\n", &[]);
    }
    let path = asked.path.trim_start_matches('/');
    let (version, rest) = if let Some(rest) = path.strip_prefix("opc/v2") {
        (2, rest)
    } else if let Some(rest) = path.strip_prefix("opc/v1") {
        (1, rest)
    } else {
        // Nor are the OpenStack-compatible legacy endpoints (`/openstack`) served here.
        return not_found();
    };
    if version == 1 && legacy_disabled {
        return not_found();
    }
    if version == 2 && asked.header("authorization") != Some("Bearer Oracle") {
        return respond(
            401,
            "text/plain; charset=utf-8",
            "Unauthorized: the v2 endpoints need the header Authorization: Bearer Oracle\n",
            &[],
        );
    }
    if asked.method != axum::http::Method::GET {
        return respond(405, "text/plain; charset=utf-8", "Method Not Allowed\n", &[]);
    }
    let Some((instance, vnics)) = found else { return not_found() };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let root = match segments.first() {
        Some(&"identity") if version == 2 => {
            return match identity_file {
                Some(pem) => respond(200, "text/plain", pem, &[]),
                None => not_found(),
            };
        }
        Some(&"instance") => instance,
        Some(&"vnics") => Value::Array(vnics),
        _ => return not_found(),
    };
    let mut node = &root;
    for part in &segments[1..] {
        let next = match node {
            Value::Object(map) => map.get(*part),
            Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        let Some(next) = next else { return not_found() };
        node = next;
    }
    if node.is_object() || node.is_array() {
        respond(200, "application/json", serde_json::to_string_pretty(node).unwrap_or_default(), &[])
    } else {
        respond(200, "text/plain", text(node), &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_times_as_imds_writes_them() {
        assert_eq!(oci_ad_name("Uocm:US-ASHBURN-AD-2"), "iad-ad-2");
        assert_eq!(host_label("Slurm Controller 1"), "slurm-controller-1");
        assert_eq!(epoch_millis("1970-01-02T00:00:01.500Z"), 86_401_500);
        assert_eq!(epoch_millis("2026-01-01T00:00:00.000Z"), 1_767_225_600_000);
        assert_eq!(state_word("RUNNING"), "Running");
    }
}
