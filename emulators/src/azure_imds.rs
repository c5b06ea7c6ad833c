//! Azure's Instance Metadata Service (IMDS, 169.254.169.254) for one VM of the emulator, a standalone VM or a
//! scale-set VM, as `POST /_admin/metadata` opens it (see `crate::metadata`). Every request reads the VM as
//! ARM holds it now: a standalone VM's `userData` PATCHed later shows at once.
//!
//! As Microsoft Learn's "Azure Instance Metadata Service" documents it: requests must carry `Metadata: true`
//! and no `X-Forwarded-For` (400 otherwise, with IMDS's error body); `api-version` is required and must be
//! one IMDS supports (400 naming the newest versions otherwise), except on `/metadata/versions`; duplicate
//! query parameters are refused; `/metadata/instance` answers `compute` and `network` as JSON, each field
//! from the api-version that introduced it; route parameters walk into it
//! (`/metadata/instance/compute/userData`), and a leaf needs `format=text`. `compute.userData` is the base64
//! `userData` the VM was given (a scale-set VM's own, written by VirtualMachineScaleSetVMs_Update, else its
//! scale set's model's), as ARM holds it now; `customData` is never served (it is on the
//! provisioning media only: the admin route answers it for the boot harness). Managed identity tokens at
//! `/metadata/identity/oauth2/token` only for a VM with an identity.
//!
//! Also here: a standalone VM's network interface gets its dynamic private address when it is made
//! (`assign_addresses`), as Azure allocates one.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{Azure, Store, VmLife, host_address};
use crate::metadata::{Answer, Asked, Instance, mac_from, respond, uuid_from};

/// The api-versions IMDS takes, newest first.
const VERSIONS: [&str; 35] = [
    "2025-04-07",
    "2024-07-17",
    "2024-03-15",
    "2023-11-15",
    "2023-07-01",
    "2021-12-13",
    "2021-11-15",
    "2021-11-01",
    "2021-10-01",
    "2021-08-01",
    "2021-05-01",
    "2021-03-01",
    "2021-02-01",
    "2021-01-01",
    "2020-12-01",
    "2020-10-01",
    "2020-09-01",
    "2020-07-15",
    "2020-06-01",
    "2019-11-01",
    "2019-08-15",
    "2019-08-01",
    "2019-06-04",
    "2019-06-01",
    "2019-04-30",
    "2019-03-11",
    "2019-02-01",
    "2018-10-01",
    "2018-04-02",
    "2018-02-01",
    "2017-12-01",
    "2017-10-01",
    "2017-08-01",
    "2017-04-02",
    "2017-03-01",
];

/// The api-version each `compute` field first appears in.
const INTRODUCED: [(&str, &str); 27] = [
    ("azEnvironment", "2018-10-01"),
    ("customData", "2019-02-01"),
    ("evictionPolicy", "2020-12-01"),
    ("isHostCompatibilityLayerVm", "2020-06-01"),
    ("licenseType", "2020-09-01"),
    ("location", "2017-04-02"),
    ("name", "2017-04-02"),
    ("offer", "2017-04-02"),
    ("osProfile", "2020-07-15"),
    ("osType", "2017-04-02"),
    ("placementGroupId", "2017-08-01"),
    ("platformFaultDomain", "2017-04-02"),
    ("platformUpdateDomain", "2017-04-02"),
    ("priority", "2020-12-01"),
    ("provider", "2018-10-01"),
    ("publicKeys", "2018-04-02"),
    ("publisher", "2017-04-02"),
    ("resourceGroupName", "2017-08-01"),
    ("resourceId", "2019-03-11"),
    ("sku", "2017-04-02"),
    ("storageProfile", "2019-06-01"),
    ("subscriptionId", "2017-08-01"),
    ("tags", "2017-08-01"),
    ("tagsList", "2019-06-04"),
    ("userData", "2021-01-01"),
    ("vmScaleSetName", "2017-12-01"),
    ("zone", "2017-12-01"),
];

/// Fields introduced with the first api-version (or not listed with one): always there.
const ALWAYS: [&str; 3] = ["version", "vmId", "vmSize"];

/// Microsoft's MAC prefix (00-0D-3A).
const MAC_PREFIX: [u8; 3] = [0x00, 0x0d, 0x3a];

/// Gives each IP configuration of a network interface that has no static address the address Azure's
/// dynamic allocation gives it: the one it had, or the next free one of its subnet.
pub(super) fn assign_addresses(store: &mut Store, key: &str, nic: &mut Value) {
    let kept: Vec<Value> = store
        .resources
        .get(key)
        .and_then(|s| s.value["properties"]["ipConfigurations"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|c| c["properties"]["privateIPAddress"].clone())
        .collect();
    let Some(configs) = nic.pointer_mut("/properties/ipConfigurations").and_then(Value::as_array_mut) else { return };
    for (i, config) in configs.iter_mut().enumerate() {
        let props = &mut config["properties"];
        if props["privateIPAllocationMethod"].as_str().is_some_and(|m| m.eq_ignore_ascii_case("Static"))
            && props["privateIPAddress"].is_string()
        {
            continue;
        }
        let address = match kept.get(i).filter(|a| a.is_string()) {
            Some(a) => a.clone(),
            None => {
                let subnet = props["subnet"]["id"].as_str().unwrap_or_default().to_lowercase();
                let prefix = store.resources.get(&subnet).and_then(|s| s.value["properties"]["addressPrefix"].as_str().map(str::to_owned));
                store.next_ip += 1;
                json!(host_address(prefix.as_deref().unwrap_or("10.0.0.0/24"), 4, store.next_ip))
            }
        };
        props["privateIPAddress"] = address;
        if props["privateIPAllocationMethod"].is_null() {
            props["privateIPAllocationMethod"] = json!("Dynamic");
        }
    }
}

/// What IMDS and the provisioning media know of one VM now.
struct Vm {
    compute: Value,
    network: Value,
    /// The VM's `osProfile.customData` (its scale set model's for a scale-set VM): provisioning media only.
    custom_data: Option<String>,
    private_ip: String,
    mac: [u8; 6],
    identity: Option<Value>,
}

/// The part of a resource id after `/<name>/` (case-insensitive), e.g. the resource group.
fn segment_after(id: &str, name: &str) -> String {
    let segs: Vec<&str> = id.trim_matches('/').split('/').collect();
    segs.iter().position(|s| s.eq_ignore_ascii_case(name)).and_then(|i| segs.get(i + 1)).map(|s| s.to_string()).unwrap_or_default()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `computerNamePrefix` and the instance id in base 36 to six places, as a uniform scale set names its VMs.
fn scale_set_computer_name(prefix: &str, instance: u64) -> String {
    let mut digits = Vec::new();
    let mut n = instance;
    loop {
        digits.push(std::char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    while digits.len() < 6 {
        digits.push('0');
    }
    format!("{prefix}{}", digits.iter().rev().collect::<String>())
}

fn subnet_of(store: &Store, subnet_id: &str) -> (String, String) {
    let prefix = store
        .resources
        .get(&subnet_id.to_lowercase())
        .and_then(|s| s.value["properties"]["addressPrefix"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "10.0.0.0/24".into());
    let (address, len) = prefix.split_once('/').map(|(a, l)| (a.to_owned(), l.to_owned())).unwrap_or_default();
    (address, len)
}

/// The VM at `key` (its lowercased id) now, or None when it is gone.
fn vm(store: &Store, key: &str) -> Option<Vm> {
    let stored = store.resources.get(key)?;
    let v = &stored.value;
    let id = v["id"].as_str().unwrap_or(key).to_owned();
    let scale_set = key.contains("/virtualmachinescalesets/");
    let (model, set) = if scale_set {
        let set_key = key.rsplit_once("/virtualmachines/").map(|(s, _)| s.to_owned()).unwrap_or_default();
        let set = store.resources.get(&set_key).map(|s| s.value.clone()).unwrap_or(Value::Null);
        let life = store.lives.get(key).cloned().unwrap_or_else(|| VmLife::new(None));
        (life.model.unwrap_or_else(|| set["properties"]["virtualMachineProfile"].clone()), set)
    } else {
        (v["properties"].clone(), Value::Null)
    };
    let os = &model["osProfile"];
    let image = &model["storageProfile"]["imageReference"];
    let tags_of = if scale_set { &set["tags"] } else { &v["tags"] };
    let tags: Vec<(String, String)> = tags_of.as_object().into_iter().flatten().map(|(k, val)| (k.clone(), text(val))).collect();
    let (name, computer_name, size, zones, placement_group, vm_id) = if scale_set {
        let instance: u64 = v["instanceId"].as_str().and_then(|i| i.parse().ok()).unwrap_or_default();
        let set_name = set["name"].as_str().unwrap_or_default().to_owned();
        let prefix = os["computerNamePrefix"].as_str().unwrap_or(&set_name).to_owned();
        (
            v["name"].as_str().map(str::to_owned).unwrap_or_else(|| format!("{set_name}_{instance}")),
            scale_set_computer_name(&prefix, instance),
            text(&set["sku"]["name"]),
            set["zones"].clone(),
            uuid_from(&set["id"].as_str().unwrap_or_default().to_lowercase()),
            uuid_from(key),
        )
    } else {
        (
            text(&v["name"]),
            os["computerName"].as_str().map(str::to_owned).unwrap_or_else(|| text(&v["name"])),
            text(&model["hardwareProfile"]["vmSize"]),
            v["zones"].clone(),
            String::new(),
            text(&v["properties"]["vmId"]),
        )
    };
    // The primary NIC's address and subnet.
    let (private_ip, subnet_id) = if scale_set {
        const SUBNET: &str = "/networkProfile/networkInterfaceConfigurations/0/properties/ipConfigurations/0/properties/subnet/id";
        (store.ips.get(key).cloned().unwrap_or_default(), model.pointer(SUBNET).map(text).unwrap_or_default())
    } else {
        let nic_id = text(&model["networkProfile"]["networkInterfaces"][0]["id"]).to_lowercase();
        let config =
            store.resources.get(&nic_id).map(|n| n.value["properties"]["ipConfigurations"][0]["properties"].clone()).unwrap_or_default();
        (text(&config["privateIPAddress"]), text(&config["subnet"]["id"]))
    };
    let (subnet_address, subnet_prefix) = subnet_of(store, &subnet_id);
    let mac = mac_from(MAC_PREFIX, key);
    let mac_compact: String = mac.iter().map(|b| format!("{b:02X}")).collect();
    // A scale-set VM's own userData (VirtualMachineScaleSetVMs_Update) when it has one, else its model's.
    let own = if scale_set { v["properties"]["userData"].as_str() } else { None };
    let user_data = own.or(model["userData"].as_str()).unwrap_or_default().to_owned();
    let custom_data = os["customData"].as_str().map(str::to_owned);
    let public_keys: Vec<Value> = os["linuxConfiguration"]["ssh"]["publicKeys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| json!({"keyData": text(&k["keyData"]), "path": text(&k["path"])}))
        .collect();
    let compute = json!({
        "azEnvironment": "AzurePublicCloud",
        // Deprecated and disabled in IMDS: always empty.
        "customData": "",
        "evictionPolicy": text(&model["evictionPolicy"]),
        "isHostCompatibilityLayerVm": "false",
        "licenseType": text(&model["licenseType"]),
        "location": text(if scale_set { &set["location"] } else { &v["location"] }),
        "name": name,
        "offer": text(&image["offer"]),
        "osProfile": {
            "adminUsername": text(&os["adminUsername"]),
            "computerName": computer_name,
            "disablePasswordAuthentication": text(&os["linuxConfiguration"]["disablePasswordAuthentication"]),
        },
        "osType": "Linux",
        "placementGroupId": placement_group,
        "platformFaultDomain": "0",
        "platformUpdateDomain": "0",
        "priority": model["priority"].as_str().unwrap_or("Regular"),
        "provider": "Microsoft.Compute",
        "publicKeys": public_keys,
        "publisher": text(&image["publisher"]),
        "resourceGroupName": segment_after(&id, "resourceGroups"),
        "resourceId": id,
        "sku": text(&image["sku"]),
        "storageProfile": {"imageReference": {"id": text(&image["id"]), "offer": text(&image["offer"]), "publisher": text(&image["publisher"]),
                                              "sku": text(&image["sku"]), "version": text(&image["version"])}},
        "subscriptionId": segment_after(&id, "subscriptions"),
        "tags": tags.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(";"),
        "tagsList": tags.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "userData": user_data,
        "version": text(&image["version"]),
        "vmId": vm_id,
        "vmScaleSetName": if scale_set { text(&set["name"]) } else { String::new() },
        "vmSize": size,
        "zone": zones[0].as_str().unwrap_or_default(),
    });
    let network = json!({"interface": [{
        "ipv4": {"ipAddress": [{"privateIpAddress": private_ip, "publicIpAddress": ""}],
                 "subnet": [{"address": subnet_address, "prefix": subnet_prefix}]},
        "ipv6": {"ipAddress": []},
        "macAddress": mac_compact,
    }]});
    let identity = if scale_set { set["identity"].clone() } else { v["identity"].clone() };
    let identity = identity.is_object().then_some(identity).filter(|i| !i["type"].as_str().unwrap_or("None").eq_ignore_ascii_case("None"));
    Some(Vm { compute, network, custom_data, private_ip, mac, identity })
}

/// `POST /_admin/metadata {"instance": <a VM's or scale-set VM's resource id>}`.
pub(super) fn listen(az: &Arc<Azure>, body: &[u8]) -> (u16, Value) {
    let asked = match crate::metadata::instance_of(body) {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let key = asked.trim_end_matches('/').to_lowercase();
    let is_vm = key.rsplit('/').nth(1) == Some("virtualmachines");
    let found = if is_vm { vm(&az.store.lock().unwrap(), &key) } else { None };
    let Some(found) = found else {
        return (404, json!({"error": format!("no virtual machine {asked}")}));
    };
    let facts = json!({
        "instance": found.compute["resourceId"], "private_ip": found.private_ip, "mac": crate::metadata::mac_text(found.mac),
        "hostname": found.compute["osProfile"]["computerName"], "custom_data": found.custom_data,
    });
    let port = az.metadata.open(&key, Arc::new(Imds { az: az.clone(), key: key.clone() }));
    crate::metadata::opened(port, facts)
}

struct Imds {
    az: Arc<Azure>,
    key: String,
}

impl Instance for Imds {
    fn reachable(&self) -> bool {
        self.az.store.lock().unwrap().resources.contains_key(&self.key)
    }

    fn answer(&self, asked: Asked) -> Answer {
        let found = vm(&self.az.store.lock().unwrap(), &self.key);
        let az = self.az.clone();
        Box::pin(async move { answer(found, &asked, &az) })
    }
}

fn error(status: u16, body: Value) -> Response {
    respond(status, "application/json; charset=utf-8", body.to_string(), &[])
}

fn bad_version() -> Response {
    error(
        400,
        json!({"error": "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds",
               "newest-versions": VERSIONS[..3]}),
    )
}

/// The instance document at an api-version: `compute` with the fields that version has.
fn document(vm: &Vm, version: &str) -> Value {
    let mut compute = Map::new();
    for (k, v) in vm.compute.as_object().into_iter().flatten() {
        let since = INTRODUCED.iter().find(|(f, _)| f == k).map(|(_, s)| *s);
        let present = match since {
            Some(since) => version >= since,
            None => ALWAYS.contains(&k.as_str()),
        };
        if present {
            compute.insert(k.clone(), v.clone());
        }
    }
    json!({"compute": compute, "network": vm.network})
}

fn answer(found: Option<Vm>, asked: &Asked, az: &Azure) -> Response {
    if !asked.header("metadata").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return error(400, json!({"error": "Bad request. Required metadata header not specified"}));
    }
    if asked.forwarded() {
        return error(400, json!({"error": "Bad request. Request with an X-Forwarded-For header is not allowed"}));
    }
    if asked.method != axum::http::Method::GET {
        return error(405, json!({"error": "Method not allowed"}));
    }
    if asked.query.iter().any(|(k, _)| asked.params_named(k) > 1) {
        return error(400, json!({"error": "Bad request. Query parameters must not be repeated"}));
    }
    let Some(vm) = found else { return error(404, json!({"error": "Not found"})) };
    let path = asked.path.trim_end_matches('/');
    if path.eq_ignore_ascii_case("/metadata/versions") {
        let mut versions: Vec<&str> = VERSIONS.to_vec();
        versions.reverse();
        return error(200, json!({"apiVersions": versions}));
    }
    let Some(version) = asked.param("api-version").filter(|v| VERSIONS.contains(v)) else { return bad_version() };
    if path.eq_ignore_ascii_case("/metadata/identity/oauth2/token") {
        return token(&vm, asked, az);
    }
    let Some(route) = path.strip_prefix("/metadata/instance") else { return error(404, json!({"error": "Not found"})) };
    let doc = document(&vm, version);
    let mut node = &doc;
    for part in route.split('/').filter(|p| !p.is_empty()) {
        let next = match node {
            Value::Object(map) => map.get(part),
            Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        let Some(next) = next else { return error(404, json!({"error": "Not found"})) };
        node = next;
    }
    let leaf = !node.is_object() && !node.is_array();
    match asked.param("format").unwrap_or("json") {
        "text" if leaf => respond(200, "text/plain; charset=utf-8", text(node), &[]),
        "text" => {
            let lines: Vec<String> = match node {
                Value::Object(map) => map.keys().cloned().collect(),
                Value::Array(items) => (0..items.len()).map(|i| i.to_string()).collect(),
                _ => Vec::new(),
            };
            respond(200, "text/plain; charset=utf-8", lines.join("\n"), &[])
        }
        "json" if leaf => error(400, json!({"error": "Bad request. Querying a leaf node requires format=text"})),
        "json" => error(200, node.clone()),
        _ => error(400, json!({"error": "Bad request. The format is not supported: json and text are"})),
    }
}

/// `/metadata/identity/oauth2/token?resource=...`: a token for the VM's managed identity.
fn token(vm: &Vm, asked: &Asked, az: &Azure) -> Response {
    let Some(identity) = &vm.identity else {
        return error(400, json!({"error": "invalid_request", "error_description": "Identity not found"}));
    };
    let Some(resource) = asked.param("resource") else {
        return error(400, json!({"error": "invalid_request", "error_description": "Required query variable 'resource' is missing"}));
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let resource_id = vm.compute["resourceId"].as_str().unwrap_or_default();
    let client_id = asked.param("client_id").map(str::to_owned).unwrap_or_else(|| {
        identity["userAssignedIdentities"]
            .as_object()
            .and_then(|m| m.values().find_map(|u| u["clientId"].as_str().map(str::to_owned)))
            .unwrap_or_else(|| uuid_from(&format!("{resource_id}#identity")))
    });
    let access_token =
        format!("eyJ0eXAiOiJKV1Qi.emulator.{}", crate::metadata::digest(&format!("{resource_id}|{resource}|{}", now / 3600)));
    // The identity's object id, remembered with the token: Key Vault tells its callers apart by it. The
    // user-assigned identity asked for by `client_id`, else the system-assigned one, else the first user-assigned.
    let assigned = identity["userAssignedIdentities"].as_object();
    let by_client = asked
        .param("client_id")
        .and_then(|c| assigned.and_then(|m| m.values().find(|u| u["clientId"].as_str() == Some(c))))
        .map(|u| &u["principalId"]);
    let principal = by_client
        .or_else(|| identity.get("principalId"))
        .or_else(|| assigned.and_then(|m| m.values().next()).map(|u| &u["principalId"]))
        .and_then(Value::as_str);
    if let Some(principal) = principal {
        super::keyvault::remember_token(az, &access_token, principal);
    }
    error(
        200,
        json!({
            "access_token": access_token,
            "client_id": client_id, "expires_in": "86399", "expires_on": (now + 86399).to_string(), "ext_expires_in": "86399",
            "not_before": now.to_string(), "resource": resource, "token_type": "Bearer",
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_set_vms_are_named_by_prefix_and_base36_instance_id() {
        assert_eq!(scale_set_computer_name("gpu", 0), "gpu000000");
        assert_eq!(scale_set_computer_name("gpu", 35), "gpu00000z");
        assert_eq!(scale_set_computer_name("gpu", 36), "gpu000010");
    }
}
