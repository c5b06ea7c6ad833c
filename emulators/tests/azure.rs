//! The Azure Resource Manager emulator over HTTPS, trusted by its own certificate only: resource groups,
//! proximity placement groups and InfiniBand scale sets through long-running operations, one-call VM
//! listing per scale set, case-insensitive ids, ARM errors, 429 with Retry-After, allocation failures and
//! out-of-band deletes; ARM's write semantics (a PUT replaces the whole network or security group, a PATCH
//! only the tags, `If-None-Match: *` creates only).

use std::sync::Arc;

use hpc_emulators::azure;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000001";
/// The api-versions azure-mgmt-compute and azure-mgmt-resource define these operations in.
const V: &str = "api-version=2026-04-01";
const V_GROUP: &str = "api-version=2025-04-01";

struct Client {
    addr: std::net::SocketAddr,
    tls: tokio_rustls::TlsConnector,
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

impl Client {
    fn new(running: &azure::Running) -> Client {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(running.certificate_pem.as_bytes()).unwrap()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Client { addr: running.addr, tls: tokio_rustls::TlsConnector::from(Arc::new(config)) }
    }

    async fn call(&self, method: &str, path_and_query: &str, body: Option<Value>, token: bool) -> Reply {
        let auth: &[(&str, &str)] = if token { &[("authorization", "Bearer emulator-token")] } else { &[] };
        self.call_with(method, path_and_query, body, auth).await
    }

    /// A call with the request headers given (no bearer token unless one of them is it).
    async fn call_with(&self, method: &str, path_and_query: &str, body: Option<Value>, headers: &[(&str, &str)]) -> Reply {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let mut tls = self.tls.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        let req = format!(
            "{method} {path_and_query} HTTP/1.1\r\nhost: localhost\r\n{extra}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        let _ = tls.read_to_end(&mut raw).await;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, payload) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines.filter_map(|l| l.split_once(": ")).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        Reply { status, headers, body: serde_json::from_str(payload).unwrap_or(Value::Null) }
    }

    /// Follows a long-running operation the way its spec declares: the Azure-AsyncOperation status
    /// resource, or the Location (202 until done); the outcome as `{"status", "error"}`.
    async fn wait(&self, reply: &Reply) -> Value {
        let path = |url: &str| format!("/{}", url.split_once("://").unwrap().1.split_once('/').unwrap().1);
        if let Some(url) = reply.header("azure-asyncoperation") {
            let url = path(url);
            loop {
                let status = self.call("GET", &url, None, true).await.body;
                if status["status"] != "InProgress" {
                    return status;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        let url = path(reply.header("location").expect("an Azure-AsyncOperation or Location header"));
        loop {
            let r = self.call("GET", &url, None, true).await;
            match r.status {
                202 => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                200..=299 => return json!({"status": "Succeeded"}),
                _ => return json!({"status": "Failed", "error": r.body["error"]}),
            }
        }
    }

    /// An update answered 200 declares no monitor: the resource's provisioningState settles.
    async fn settle(&self, path_and_query: &str) -> Value {
        loop {
            let r = self.call("GET", path_and_query, None, true).await.body;
            if !matches!(r["properties"]["provisioningState"].as_str(), Some("Creating" | "Updating")) {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

fn vmss_body(capacity: u64) -> Value {
    json!({
        "location": "eastus",
        "sku": {"name": "Standard_ND96isr_H100_v5", "tier": "Standard", "capacity": capacity},
        "tags": {"hpc:cluster": "train"},
        "properties": {"orchestrationMode": "Uniform", "singlePlacementGroup": true, "platformFaultDomainCount": 1, "overprovision": false,
                       "proximityPlacementGroup": {"id": format!("{SUB}/resourceGroups/train-rg/providers/Microsoft.Compute/proximityPlacementGroups/train-ppg")}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_sets_through_long_running_operations_with_faults_and_drift() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/train-rg");
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/train-0");

    assert_eq!(c.call("GET", &format!("{rg}?{V_GROUP}"), None, false).await.status, 401);
    assert_eq!(c.call("GET", &rg, None, true).await.body["error"]["code"], "MissingApiVersionParameter");
    let orphan = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(1)), true).await;
    assert_eq!((orphan.status, orphan.body["error"]["code"].as_str()), (404, Some("ResourceGroupNotFound")));

    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let ppg = c
        .call(
            "PUT",
            &format!("{rg}/providers/Microsoft.Compute/proximityPlacementGroups/train-ppg?{V}"),
            Some(json!({"location": "eastus"})),
            true,
        )
        .await;
    // ProximityPlacementGroupProperties has no provisioningState: the PUT answers the group at once.
    assert_eq!((ppg.status, ppg.body["properties"].get("provisioningState")), (201, None));

    let created = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(4)), true).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["properties"]["provisioningState"], "Creating");
    assert_eq!(c.wait(&created).await["status"], "Succeeded");
    // ARM ids are case-insensitive.
    let got = c.call("GET", &format!("{}?{V}", vmss.replace("train-rg", "TRAIN-RG")), None, true).await;
    assert_eq!(got.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(got.body["properties"]["singlePlacementGroup"], true);

    // One call lists the VMs of a scale set.
    let vms = c.call("GET", &format!("{vmss}/virtualMachines?{V}"), None, true).await;
    assert_eq!(vms.body["value"].as_array().unwrap().len(), 4);
    let scaled = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(6)), true).await;
    assert_eq!((scaled.status, scaled.body["properties"]["provisioningState"].as_str()), (200, Some("Updating")));
    assert!(scaled.header("location").is_none() && scaled.header("azure-asyncoperation").is_none());
    assert_eq!(c.settle(&format!("{vmss}?{V}")).await["properties"]["provisioningState"], "Succeeded");
    assert_eq!(c.call("GET", &format!("{vmss}/virtualMachines?{V}"), None, true).await.body["value"].as_array().unwrap().len(), 6);

    // Out of band: one VM deleted.
    let emu = running.emulator.clone();
    let (status, _) = emu.admin.handle(
        "POST",
        "out-of-band",
        json!({"action": "delete", "id": format!("{vmss}/virtualMachines/3")}).to_string().as_bytes(),
        emu.as_ref(),
    );
    assert_eq!(status, 200);
    assert_eq!(c.call("GET", &format!("{vmss}/virtualMachines?{V}"), None, true).await.body["value"].as_array().unwrap().len(), 5);

    // Throttling: 429 with Retry-After, as ARM.
    emu.admin.handle(
        "POST",
        "faults",
        br#"{"service":"arm","operation":"virtualMachineScaleSets.get","kind":"throttle","times":1}"#,
        emu.as_ref(),
    );
    let throttled = c.call("GET", &format!("{vmss}?{V}"), None, true).await;
    assert_eq!((throttled.status, throttled.header("retry-after")), (429, Some("1")));

    // No capacity: the long-running operation fails with AllocationFailed.
    emu.admin.handle(
        "POST",
        "faults",
        br#"{"service":"arm","operation":"virtualMachineScaleSets.put","kind":"capacity","times":1}"#,
        emu.as_ref(),
    );
    let big =
        c.call("PUT", &format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/train-1?{V}"), Some(vmss_body(100)), true).await;
    let outcome = c.wait(&big).await;
    assert_eq!((outcome["status"].as_str(), outcome["error"]["code"].as_str()), (Some("Failed"), Some("AllocationFailed")));

    let missing = c.call("GET", &format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/nope?{V}"), None, true).await;
    assert_eq!((missing.status, missing.body["error"]["code"].as_str()), (404, Some("ResourceNotFound")));

    let deleting = c.call("DELETE", &format!("{vmss}?{V}"), None, true).await;
    assert_eq!(deleting.status, 202);
    assert_eq!(c.wait(&deleting).await["status"], "Succeeded");
    c.call("DELETE", &format!("{rg}?{V_GROUP}"), None, true).await;
    let (_, inventory) = emu.admin.handle("GET", "inventory", b"", emu.as_ref());
    assert_eq!(inventory["empty"], true, "{inventory}");
}

/// Rules Azure writes in its field descriptions, which no schema expresses, refused as ARM refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_rules_are_refused_as_arm_refuses_them() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/rules-rg");
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/rules-0?{V}");
    let with_os = |os: Value, extra: Value| {
        let mut b = vmss_body(2);
        b["properties"]["virtualMachineProfile"] = json!({"osProfile": os});
        b["properties"].as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        b
    };
    let key = json!({"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA x"}]});

    let no_login = with_os(
        json!({"computerNamePrefix": "rules-0-", "adminUsername": "azureuser",
                                  "linuxConfiguration": {"disablePasswordAuthentication": true}}),
        json!({}),
    );
    let refused = c.call("PUT", &vmss, Some(no_login), true).await;
    assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (400, Some("InvalidParameter")), "{}", refused.body);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("Authentication using either SSH or by user name and password"));

    let long_prefix = with_os(
        json!({"computerNamePrefix": "a-very-long-prefix", "adminUsername": "azureuser",
                                     "linuxConfiguration": {"disablePasswordAuthentication": true, "ssh": key}}),
        json!({}),
    );
    let refused = c.call("PUT", &vmss, Some(long_prefix), true).await;
    assert_eq!((refused.status, refused.body["error"]["target"].as_str()), (400, Some("computerNamePrefix")));

    let mut reserved = with_os(
        json!({"computerNamePrefix": "rules-0-", "adminUsername": "azureuser",
                                      "linuxConfiguration": {"disablePasswordAuthentication": true, "ssh": key}}),
        json!({}),
    );
    reserved["properties"]["virtualMachineProfile"]["capacityReservation"] =
        json!({"capacityReservationGroup": {"id": format!("{rg}/providers/Microsoft.Compute/capacityReservationGroups/crg")}});
    let refused = c.call("PUT", &vmss, Some(reserved.clone()), true).await;
    assert_eq!((refused.status, refused.body["error"]["target"].as_str()), (400, Some("singlePlacementGroup")));
    reserved["properties"]["singlePlacementGroup"] = json!(false);
    assert_eq!(c.call("PUT", &vmss, Some(reserved), true).await.status, 201);

    // AMLFS: the HSM container is a resource id, and the logging container another one in the same account.
    let fs = format!("{rg}/providers/Microsoft.StorageCache/amlFilesystems/rules-fs?api-version=2026-08-01");
    let account = format!("{SUB}/resourceGroups/data/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers");
    let amlfs = |container: String, logging: String| {
        json!({"location": "eastus", "zones": ["1"], "sku": {"name": "AMLFS-Durable-Premium-125"},
               "properties": {"storageCapacityTiB": 16.0, "filesystemSubnet": format!("{rg}/providers/Microsoft.Network/virtualNetworks/v/subnets/s"),
                              "maintenanceWindow": {"dayOfWeek": "Sunday", "timeOfDayUTC": "02:00"},
                              "hsm": {"settings": {"container": container, "loggingContainer": logging}}}})
    };
    let url = c.call("PUT", &fs, Some(amlfs("https://acct.blob.core.windows.net/data".into(), format!("{account}/logs"))), true).await;
    assert_eq!((url.status, url.body["error"]["target"].as_str()), (400, Some("hsm.settings.container")), "{}", url.body);
    let same = c.call("PUT", &fs, Some(amlfs(format!("{account}/data"), format!("{account}/data"))), true).await;
    assert_eq!((same.status, same.body["error"]["target"].as_str()), (400, Some("hsm.settings.loggingContainer")));
    let good = c.call("PUT", &fs, Some(amlfs(format!("{account}/data"), format!("{account}/data-logs"))), true).await;
    assert_eq!(good.status, 201, "{}", good.body);
}

/// Resource groups are deleted as ARM's spec declares: 202 with a Location (no Azure-AsyncOperation) that
/// answers 202 while the delete runs, then 200 or 204 with no `status` in any body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_group_delete_is_followed_through_its_location() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/lro-rg");
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let deleting = c.call("DELETE", &format!("{rg}?{V_GROUP}"), None, true).await;
    assert_eq!(deleting.status, 202);
    assert!(deleting.header("azure-asyncoperation").is_none());
    let location = deleting.header("location").expect("a Location header").to_owned();
    let path = format!("/{}", location.split_once("://").unwrap().1.split_once('/').unwrap().1);
    let first = c.call("GET", &path, None, true).await;
    assert_eq!(first.status, 202);
    let last = loop {
        let r = c.call("GET", &path, None, true).await;
        if r.status != 202 {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(matches!(last.status, 200 | 204), "{}", last.status);
    assert!(last.body.get("status").is_none());
    // Network writes are long-running too: a PUT answers with an Azure-AsyncOperation to follow.
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let vnet = c
        .call(
            "PUT",
            &format!("{rg}/providers/Microsoft.Network/virtualNetworks/v?api-version=2026-03-01"),
            Some(json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}})),
            true,
        )
        .await;
    assert_eq!(vnet.status, 201);
    assert_eq!(c.wait(&vnet).await["status"], "Succeeded");
}

/// The VMSS body of a day-2 test: an Ubuntu model with an SSH key and the Application Health extension
/// (Rich Health States over HTTP), as the provider makes it.
fn day2_body(capacity: u64, image_version: &str) -> Value {
    let mut b = vmss_body(capacity);
    b["properties"]["upgradePolicy"] = json!({"mode": "Manual"});
    b["properties"]["virtualMachineProfile"] = json!({
        "osProfile": {"computerNamePrefix": "train-0-", "adminUsername": "azureuser",
                      "linuxConfiguration": {"disablePasswordAuthentication": true,
                          "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA x"}]}}},
        "storageProfile": {"imageReference": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": image_version}},
        "extensionProfile": {"extensions": [{"name": "hpc-health", "properties": {
            "publisher": "Microsoft.ManagedServices", "type": "ApplicationHealthLinux", "typeHandlerVersion": "2.0",
            "autoUpgradeMinorVersion": true, "settings": {"protocol": "http", "port": 8477, "requestPath": "/hpc-selfcheck"}}}]},
    });
    b
}

/// A scale set of `n` VMs with the health extension, made and settled; its id.
async fn day2_set(c: &Client, rg: &str, n: u64) -> String {
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/train-0");
    let created = c.call("PUT", &format!("{vmss}?{V}"), Some(day2_body(n, "1.0.0")), true).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(c.wait(&created).await["status"], "Succeeded");
    vmss
}

fn out_of_band(running: &azure::Running, change: Value) -> (u16, Value) {
    let emu = running.emulator.clone();
    emu.admin.handle("POST", "out-of-band", change.to_string().as_bytes(), emu.as_ref())
}

/// The VMs of a scale set with their instance views, in instance-id order, in one call.
async fn instance_views(c: &Client, vmss: &str) -> Vec<Value> {
    let listed = c.call("GET", &format!("{vmss}/virtualMachines?$expand=instanceView&{V}"), None, true).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let mut vms = listed.body["value"].as_array().cloned().unwrap_or_default();
    vms.sort_by_key(|v| v["instanceId"].as_str().and_then(|i| i.parse::<u64>().ok()));
    vms
}

fn health_code(vm: &Value) -> &str {
    vm["properties"]["instanceView"]["vmHealth"]["status"]["code"].as_str().unwrap_or_default()
}

fn codes(vm: &Value) -> Vec<String> {
    let statuses = vm["properties"]["instanceView"]["statuses"].as_array().cloned().unwrap_or_default();
    statuses.iter().filter_map(|s| s["code"].as_str().map(str::to_owned)).collect()
}

async fn settled(c: &Client, vmss: &str) -> Vec<Value> {
    loop {
        let vms = instance_views(c, vmss).await;
        if vms.iter().all(|v| v["properties"]["provisioningState"] == "Succeeded" && codes(v).iter().any(|c| c != "PowerState/starting")) {
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
            return instance_views(c, vmss).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Health for many VMs in one call: a VM list with `$expand=instanceView` carries each VM's power and
/// provisioning states, its Application Health extension's state (`vmHealth`) with the self-check's
/// verdict in the extension's CustomMetrics substatus, and a scheduled maintenance; without the expand
/// there is no instance view. `impair` and `heal` set and clear what the cloud reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_views_report_health_and_the_self_checks_verdict_in_one_list() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let vmss = day2_set(&c, &format!("{SUB}/resourceGroups/health-rg"), 6).await;
    let vm = |i: u32| format!("{vmss}/virtualMachines/{i}");
    let plain = c.call("GET", &format!("{vmss}/virtualMachines?{V}"), None, true).await;
    assert!(plain.body["value"].as_array().unwrap().iter().all(|v| v["properties"].get("instanceView").is_none()));
    let vms = settled(&c, &vmss).await;
    assert_eq!(vms.len(), 6);
    assert!(vms.iter().all(|v| health_code(v) == "HealthState/initializing" && v["properties"]["latestModelApplied"] == true), "{vms:?}");

    // The node's self-check answers the extension's probe (Rich Health States), verdict in customMetrics.
    let probe = |i: u32, state: &str, verdict: &str| {
        json!({"action": "probe", "id": vm(i), "response": {"ApplicationHealthState": state,
               "customMetrics": json!({"hpcSelfcheck": verdict}).to_string()}})
    };
    assert_eq!(out_of_band(&running, probe(0, "Healthy", "ok")).0, 200);
    assert_eq!(out_of_band(&running, probe(1, "Unhealthy", "fail-gpus-7-of-8")).0, 200);
    assert_eq!(out_of_band(&running, json!({"action": "impair", "id": vm(2), "health": "unhealthy"})).0, 200);
    assert_eq!(out_of_band(&running, json!({"action": "impair", "id": vm(3), "health": "stopped"})).0, 200);
    assert_eq!(out_of_band(&running, json!({"action": "impair", "id": vm(4), "health": "failed"})).0, 200);
    let window = json!({"start": "2026-12-05T00:00:00Z", "end": "2026-12-05T04:00:00Z"});
    assert_eq!(out_of_band(&running, json!({"action": "impair", "id": vm(5), "maintenance": window})).0, 200);
    let (status, refused) = out_of_band(&running, json!({"action": "impair", "id": vm(5), "health": "melted"}));
    assert_eq!(status, 404, "{refused}");

    let emu = running.emulator.clone();
    emu.admin.handle("DELETE", "counters", b"", emu.as_ref());
    let vms = instance_views(&c, &vmss).await;
    let (_, counters) = emu.admin.handle("GET", "counters", b"", emu.as_ref());
    assert_eq!(counters["counters"]["arm:virtualMachines.list"], 1, "{counters}");
    assert_eq!(health_code(&vms[0]), "HealthState/healthy");
    let metrics = |v: &Value| {
        v["properties"]["instanceView"]["extensions"][0]["substatuses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["code"] == "ComponentStatus/CustomMetrics/succeeded")
            .map(|s| serde_json::from_str::<Value>(s["message"].as_str().unwrap()).unwrap()["hpcSelfcheck"].clone())
    };
    assert_eq!(metrics(&vms[0]), Some(json!("ok")));
    assert_eq!((health_code(&vms[1]), metrics(&vms[1])), ("HealthState/unhealthy", Some(json!("fail-gpus-7-of-8"))));
    assert_eq!(health_code(&vms[2]), "HealthState/unhealthy");
    assert!(vms[2]["properties"]["instanceView"]["vmHealth"]["status"]["time"].is_string());
    assert!(codes(&vms[3]).contains(&"PowerState/stopped".to_owned()), "{:?}", codes(&vms[3]));
    let failed = &vms[4]["properties"]["instanceView"]["statuses"][0];
    assert_eq!(
        (failed["code"].as_str(), failed["level"].as_str()),
        (Some("ProvisioningState/failed/InternalOperationError"), Some("Error"))
    );
    assert!(failed["time"].is_string());
    assert_eq!(vms[5]["properties"]["instanceView"]["maintenanceRedeployStatus"]["maintenanceWindowStartTime"], "2026-12-05T00:00:00Z");

    // Heal clears what the cloud reported; the node's own answer stays its own.
    for i in 2..6 {
        assert_eq!(out_of_band(&running, json!({"action": "heal", "id": vm(i)})).0, 200);
    }
    let vms = instance_views(&c, &vmss).await;
    assert!(vms[2..].iter().all(|v| codes(v) == ["ProvisioningState/succeeded", "PowerState/running"]), "{vms:?}");
    assert!(vms[5]["properties"]["instanceView"].get("maintenanceRedeployStatus").is_none());
    assert_eq!(health_code(&vms[1]), "HealthState/unhealthy");
}

/// The scale set actions the provider remakes and reboots nodes with: long-running (202, Location and
/// Retry-After as their specs declare), on the named instance ids only. A new model leaves every VM off
/// it (`latestModelApplied` false) until `manualupgrade`; `reimage` boots on the same host (the node's
/// self-check answers as before), `redeploy` on a new one (a scheduled maintenance ends, no answer yet);
/// `restart` refuses a stopped VM, which `start` boots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_set_actions_touch_only_the_named_vms() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let vmss = day2_set(&c, &format!("{SUB}/resourceGroups/actions-rg"), 4).await;
    let vm = |i: u32| format!("{vmss}/virtualMachines/{i}");
    for i in 0..4 {
        let answer = json!({"ApplicationHealthState": "Healthy", "customMetrics": r#"{"hpcSelfcheck": "ok"}"#});
        assert_eq!(out_of_band(&running, json!({"action": "probe", "id": vm(i), "response": answer})).0, 200);
    }
    settled(&c, &vmss).await;

    // A new image in the model: no VM runs it yet.
    let updated = c.call("PUT", &format!("{vmss}?{V}"), Some(day2_body(4, "2.0.0")), true).await;
    assert_eq!(updated.status, 200);
    c.settle(&format!("{vmss}?{V}")).await;
    let vms = instance_views(&c, &vmss).await;
    assert!(vms.iter().all(|v| v["properties"]["latestModelApplied"] == false), "{vms:?}");

    let action = |name: &str, ids: &[&str]| {
        let url = format!("{vmss}/{name}?{V}");
        let body = json!({"instanceIds": ids});
        let c = &c;
        async move { c.call("POST", &url, Some(body), true).await }
    };
    for name in ["manualupgrade", "reimage"] {
        let started = action(name, &["0", "1"]).await;
        assert_eq!(started.status, 202, "{name}: {}", started.body);
        assert!(started.header("location").is_some() && started.header("retry-after").is_some());
        assert!(started.header("azure-asyncoperation").is_none(), "{name} declares a Location only");
        assert_eq!(c.wait(&started).await["status"], "Succeeded");
    }
    let vms = settled(&c, &vmss).await;
    let latest: Vec<bool> = vms.iter().map(|v| v["properties"]["latestModelApplied"] == true).collect();
    assert_eq!(latest, [true, true, false, false]);
    assert!(vms.iter().all(|v| health_code(v) == "HealthState/healthy"), "reimaged on the same host, the self-check answers as before");
    let snapshot = |r: &azure::Running| {
        let emu = r.emulator.clone();
        emu.admin.handle("GET", "snapshot", b"", emu.as_ref()).1["vm_actions"].clone()
    };
    let actions = snapshot(&running);
    assert_eq!(actions[vm(0).to_lowercase()], json!({"manualupgrade": 1, "reimage": 1}));
    assert!(actions.get(vm(2).to_lowercase()).is_none(), "{actions}");

    // Redeploy: a new host; the maintenance scheduled on the old one ends, the self-check has not answered.
    out_of_band(&running, json!({"action": "impair", "id": vm(2), "maintenance": "2026-12-05T00:00:00Z"}));
    let moved = action("redeploy", &["2"]).await;
    assert_eq!(moved.status, 202);
    c.wait(&moved).await;
    let vms = settled(&c, &vmss).await;
    assert!(vms[2]["properties"]["instanceView"].get("maintenanceRedeployStatus").is_none());
    assert_eq!(health_code(&vms[2]), "HealthState/initializing");

    // Restart: not a stopped VM (start boots it); an instance id the set does not have is refused.
    out_of_band(&running, json!({"action": "impair", "id": vm(3), "health": "stopped"}));
    let refused = action("restart", &["3"]).await;
    assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (409, Some("OperationNotAllowed")), "{}", refused.body);
    let started = action("start", &["3"]).await;
    c.wait(&started).await;
    let restarted = action("restart", &["1"]).await;
    assert_eq!(restarted.status, 202);
    c.wait(&restarted).await;
    let vms = settled(&c, &vmss).await;
    assert!(codes(&vms[3]).contains(&"PowerState/running".to_owned()));
    let missing = action("reimage", &["9"]).await;
    assert_eq!((missing.status, missing.body["error"]["code"].as_str()), (400, Some("InvalidParameter")));
    let actions = snapshot(&running);
    assert_eq!(actions[vm(1).to_lowercase()], json!({"manualupgrade": 1, "reimage": 1, "restart": 1}));
    assert_eq!(actions[vm(3).to_lowercase()], json!({"start": 1}));
}

fn admin_post(running: &azure::Running, route: &str, body: Value) -> (u16, Value) {
    let emu = running.emulator.clone();
    emu.admin.handle("POST", route, body.to_string().as_bytes(), emu.as_ref())
}

/// Usage_List of a location as a map of usage name -> (limit, currentValue), each usage checked for the
/// fields ListUsagesResult's Usage requires.
async fn usages(c: &Client, location: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
    let reply = c.call("GET", &format!("{SUB}/providers/Microsoft.Compute/locations/{location}/usages?{V}"), None, true).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let list = reply.body["value"].as_array().expect("value[]").clone();
    list.iter()
        .map(|u| {
            assert_eq!(u["unit"], "Count", "{u}");
            assert!(u["name"]["localizedValue"].is_string(), "{u}");
            (u["name"]["value"].as_str().unwrap().to_owned(), (u["limit"].as_u64().unwrap(), u["currentValue"].as_u64().unwrap()))
        })
        .collect()
}

async fn vm_count(c: &Client, vmss: &str) -> usize {
    c.call("GET", &format!("{vmss}/virtualMachines?{V}"), None, true).await.body["value"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compute_usages_report_the_limit_set_and_the_vcpus_of_what_runs() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/quota-rg");
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let family = "standardNDSH100v5Family";

    // Without a limit set, every usage is generous and nothing is used.
    let before = usages(&c, "eastus").await;
    assert_eq!(before[family], (100_000, 0));
    assert_eq!(before["lowPriorityCores"], (100_000, 0));
    assert_eq!(before["cores"], (100_000, 0));

    let (status, set) = admin_post(&running, "quota", json!({"id": family, "scope": "eastus", "limit": 288}));
    assert_eq!((status, &set["limit"]), (200, &json!(288)), "{set}");
    let (status, _) = admin_post(&running, "quota", json!({"id": family, "limit": 1}));
    assert_eq!(status, 400, "a quota needs its scope");

    // Two H100 VMs (96 vCPUs each) count against the family and the regional total; one spot VM against
    // the low-priority quota only.
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/q-0");
    let created = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(2)), true).await;
    assert_eq!(c.wait(&created).await["status"], "Succeeded");
    let mut spot = vmss_body(1);
    spot["properties"]["virtualMachineProfile"] = json!({"priority": "Spot", "evictionPolicy": "Delete"});
    let spot_set = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/q-spot");
    let created = c.call("PUT", &format!("{spot_set}?{V}"), Some(spot), true).await;
    assert_eq!(c.wait(&created).await["status"], "Succeeded");
    let after = usages(&c, "eastus").await;
    assert_eq!(after[family], (288, 192));
    assert_eq!(after["cores"], (100_000, 192));
    assert_eq!(after["lowPriorityCores"], (100_000, 96));
    assert_eq!(usages(&c, "westus").await[family], (100_000, 0), "a quota is per location");

    // A scale-out past a limit that was set is refused as ARM refuses it, and nothing is added.
    let over = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(4)), true).await;
    assert_eq!((over.status, over.body["error"]["code"].as_str()), (409, Some("OperationNotAllowed")), "{}", over.body);
    let message = over.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(family) && message.contains("Current Limit: 288") && message.contains("Additional Required: 192"),
        "{message}"
    );
    assert_eq!(vm_count(&c, &vmss).await, 2);

    // A deleted VM frees its quota.
    let gone = c.call("POST", &format!("{vmss}/delete?{V}"), Some(json!({"instanceIds": ["1"]})), true).await;
    assert_eq!(gone.status, 202);
    assert_eq!(c.wait(&gone).await["status"], "Succeeded");
    assert_eq!(usages(&c, "eastus").await[family], (288, 96));

    // The regional total is a limit of its own: a scale-out the family has room for (96 + 192 of 288) but
    // the regional total has not (200, 96 in use; the spot VM counts elsewhere) is refused, naming it.
    let (status, set) = admin_post(&running, "quota", json!({"id": "cores", "scope": "eastus", "limit": 200}));
    assert_eq!((status, &set["limit"], &set["used"]), (200, &json!(200), &json!(96)), "{set}");
    assert_eq!(usages(&c, "eastus").await["cores"], (200, 96));
    let over = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(3)), true).await;
    assert_eq!((over.status, over.body["error"]["code"].as_str()), (409, Some("OperationNotAllowed")), "{}", over.body);
    let message = over.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("exceeding approved Total Regional Cores quota")
            && message.contains("Current Limit: 200, Current Usage: 96, Additional Required: 192"),
        "{message}"
    );
    assert_eq!(vm_count(&c, &vmss).await, 1);
    let fits = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(2)), true).await;
    assert!(fits.status < 300, "96 more fit both: {}", fits.body);
    if fits.header("azure-asyncoperation").is_some() || fits.header("location").is_some() {
        assert_eq!(c.wait(&fits).await["status"], "Succeeded");
    }
    assert_eq!(vm_count(&c, &vmss).await, 2);
    assert_eq!(usages(&c, "eastus").await["cores"], (200, 192));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_limit_places_what_fits_and_fails_the_rest_with_allocation_failed() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/cap-rg");
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let set = |n: &str| format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{n}");
    let size = "Standard_ND96isr_H100_v5";
    let (status, _) = admin_post(&running, "capacity", json!({"zone": "eastus", "instance_type": size, "available": 3}));
    assert_eq!(status, 200);
    let (status, _) = admin_post(&running, "capacity", json!({"zone": "eastus", "instance_type": size, "available": "some"}));
    assert_eq!(status, 400);

    let a = c.call("PUT", &format!("{}?{V}", set("a")), Some(vmss_body(2)), true).await;
    assert_eq!(c.wait(&a).await["status"], "Succeeded");
    // Two more asked, one fits: it is placed, and the operation fails as ARM reports an allocation failure.
    let b = c.call("PUT", &format!("{}?{V}", set("b")), Some(vmss_body(2)), true).await;
    assert_eq!(b.status, 201);
    let outcome = c.wait(&b).await;
    assert_eq!((outcome["status"].as_str(), outcome["error"]["code"].as_str()), (Some("Failed"), Some("AllocationFailed")), "{outcome}");
    assert!(outcome["error"]["message"].as_str().unwrap().starts_with("Allocation failed."), "{outcome}");
    assert_eq!(vm_count(&c, &set("b")).await, 1);
    let got = c.call("GET", &format!("{}?{V}", set("b")), None, true).await.body;
    assert_eq!((got["properties"]["provisioningState"].as_str(), got["sku"]["capacity"].as_u64()), (Some("Failed"), Some(2)));

    // DeleteInstances takes the placed VM away and lowers the capacity with it.
    let missing = c.call("POST", &format!("{}/delete?{V}", set("b")), Some(json!({"instanceIds": ["7"]})), true).await;
    assert_eq!((missing.status, missing.body["error"]["code"].as_str()), (400, Some("InvalidParameter")));
    let deleting = c.call("POST", &format!("{}/delete?{V}", set("b")), Some(json!({"instanceIds": ["0"]})), true).await;
    assert_eq!(c.wait(&deleting).await["status"], "Succeeded");
    assert_eq!(vm_count(&c, &set("b")).await, 0);
    assert_eq!(c.call("GET", &format!("{}?{V}", set("b")), None, true).await.body["sku"]["capacity"], 1);

    // Lifted, the same PUT places every VM.
    admin_post(&running, "capacity", json!({"zone": "eastus", "instance_type": size, "available": null}));
    let b = c.call("PUT", &format!("{}?{V}", set("b")), Some(vmss_body(2)), true).await;
    assert_eq!(b.status, 200, "an update: no monitor, the provisioningState settles");
    assert_eq!(c.settle(&format!("{}?{V}", set("b"))).await["properties"]["provisioningState"], "Succeeded");
    assert_eq!(vm_count(&c, &set("b")).await, 2);

    // A zone's limit: a zonal scale set fails with ZonalAllocationFailed, and so does a single VM.
    admin_post(&running, "capacity", json!({"zone": "eastus-1", "instance_type": size, "available": 0}));
    let mut zonal = vmss_body(1);
    zonal["zones"] = json!(["1"]);
    let z = c.call("PUT", &format!("{}?{V}", set("z")), Some(zonal), true).await;
    assert_eq!(c.wait(&z).await["error"]["code"], "ZonalAllocationFailed");
    assert_eq!(vm_count(&c, &set("z")).await, 0);
    let vm = format!("{rg}/providers/Microsoft.Compute/virtualMachines/one");
    let body = json!({"location": "eastus", "zones": ["1"], "properties": {"hardwareProfile": {"vmSize": size}}});
    let single = c.call("PUT", &format!("{vm}?{V}"), Some(body), true).await;
    assert_eq!(single.status, 201, "{}", single.body);
    assert_eq!(c.wait(&single).await["error"]["code"], "ZonalAllocationFailed");
    assert_eq!(c.call("GET", &format!("{vm}?{V}"), None, true).await.status, 404, "a VM without room is not made");
    // Elsewhere in the location there is room.
    let other = c.call("PUT", &format!("{}?{V}", set("elsewhere")), Some(vmss_body(1)), true).await;
    assert_eq!(c.wait(&other).await["status"], "Succeeded");
}

/// The api-version azure-mgmt-network defines the network operations in.
const V_NET: &str = "api-version=2026-03-01";

/// A call as the provider makes it: bearer token, and `If-None-Match: *` when `create_only`.
async fn write(c: &Client, method: &str, path_and_query: &str, body: Value, create_only: bool) -> Reply {
    let mut headers = vec![("authorization", "Bearer emulator-token")];
    if create_only {
        headers.push(("if-none-match", "*"));
    }
    c.call_with(method, path_and_query, Some(body), &headers).await
}

/// The names of the subnets a virtual network lists, as VirtualNetworks_Get answers.
async fn listed_subnets(c: &Client, vnet: &str) -> Vec<String> {
    let got = c.call("GET", &format!("{vnet}?{V_NET}"), None, true).await;
    assert_eq!(got.status, 200, "{}", got.body);
    got.body["properties"]["subnets"].as_array().into_iter().flatten().filter_map(|s| s["name"].as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_replaces_the_whole_network_or_security_group_and_a_patch_only_its_tags() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/train-rg");
    assert_eq!(c.call("PUT", &format!("{rg}?{V_GROUP}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/train-vpc");
    let space = json!({"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}});
    let made =
        write(&c, "PUT", &format!("{vnet}?{V_NET}"), json!({"location": "eastus", "tags": {"a": "1"}, "properties": space}), true).await;
    assert_eq!(made.status, 201, "{}", made.body);
    for (name, prefix) in [("nodes", "10.0.0.0/24"), ("spare", "10.0.1.0/24")] {
        let subnet = json!({"properties": {"addressPrefix": prefix}});
        let put = write(&c, "PUT", &format!("{vnet}/subnets/{name}?{V_NET}"), subnet, true).await;
        assert_eq!(put.status, 201, "{}", put.body);
    }
    assert_eq!(listed_subnets(&c, &vnet).await, ["nodes", "spare"], "VirtualNetworks_Get lists the network's subnets");

    // A scale set's NICs in `nodes`.
    let mut set = day2_body(2, "1.0.0");
    set["properties"]["virtualMachineProfile"]["networkProfile"] = json!({"networkInterfaceConfigurations": [{"name": "nic0",
        "properties": {"primary": true, "ipConfigurations": [{"name": "ip0", "properties": {"subnet": {"id": format!("{vnet}/subnets/nodes")}}}]}}]});
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/train-0");
    let created = c.call("PUT", &format!("{vmss}?{V}"), Some(set), true).await;
    assert_eq!(created.status, 201, "{}", created.body);

    // A PUT that lists `nodes` only replaces the network: `spare` is deleted, `nodes` kept.
    let nodes_only = json!({"location": "eastus", "tags": {"a": "1"},
                            "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                                           "subnets": [{"name": "nodes", "properties": {"addressPrefix": "10.0.0.0/24"}}]}});
    let replaced = write(&c, "PUT", &format!("{vnet}?{V_NET}"), nodes_only, false).await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(listed_subnets(&c, &vnet).await, ["nodes"]);
    assert_eq!(c.call("GET", &format!("{vnet}/subnets/spare?{V_NET}"), None, true).await.status, 404);

    // A PUT that lists none would delete `nodes`, which the scale set's NICs are in: refused whole.
    let bare = json!({"location": "eastus", "tags": {"b": "2"}, "properties": space});
    let refused = write(&c, "PUT", &format!("{vnet}?{V_NET}"), bare, false).await;
    assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (400, Some("InUseSubnetCannotBeDeleted")), "{}", refused.body);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Subnet nodes is in use by ") && message.contains("/virtualMachineScaleSets/train-0/virtualMachines/0/"),
        "{message}"
    );
    assert_eq!(listed_subnets(&c, &vnet).await, ["nodes"]);
    let kept = c.call("GET", &format!("{vnet}?{V_NET}"), None, true).await.body;
    assert_eq!(kept["tags"], json!({"a": "1"}), "a refused PUT changes nothing");
    let direct = c.call("DELETE", &format!("{vnet}/subnets/nodes?{V_NET}"), None, true).await;
    assert_eq!(direct.body["error"]["code"], "InUseSubnetCannotBeDeleted", "nor does Subnets_Delete take it");

    // VirtualNetworks_UpdateTags: the tags are replaced by the ones sent, the subnets stay.
    let patched = c.call("PATCH", &format!("{vnet}?{V_NET}"), Some(json!({"tags": {"team": "ml"}})), true).await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.body["tags"], json!({"team": "ml"}), "not merged: the tag `a` is gone");
    assert_eq!(patched.body["properties"]["addressSpace"], space["addressSpace"]);
    assert_eq!(listed_subnets(&c, &vnet).await, ["nodes"]);
    let missing =
        c.call("PATCH", &format!("{rg}/providers/Microsoft.Network/virtualNetworks/none?{V_NET}"), Some(json!({"tags": {}})), true).await;
    assert_eq!((missing.status, missing.body["error"]["code"].as_str()), (404, Some("ResourceNotFound")));

    // A security group's rules are the ones its PUT lists.
    let nsg = format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/train-nsg");
    let rule = json!({"name": "ssh", "properties": {"protocol": "Tcp", "access": "Allow", "direction": "Inbound", "priority": 100,
        "sourceAddressPrefix": "*", "sourcePortRange": "*", "destinationAddressPrefix": "*", "destinationPortRange": "22"}});
    let with_rule = json!({"location": "eastus", "tags": {"a": "1"}, "properties": {"securityRules": [rule]}});
    let made = write(&c, "PUT", &format!("{nsg}?{V_NET}"), with_rule.clone(), true).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let rules = |v: &Value| v["properties"]["securityRules"].as_array().map_or(0, Vec::len);
    let got = c.call("GET", &format!("{nsg}?{V_NET}"), None, true).await.body;
    assert_eq!(got["properties"]["securityRules"][0]["id"], format!("{nsg}/securityRules/ssh"));
    // NetworkSecurityGroups_UpdateTags keeps them.
    let patched = c.call("PATCH", &format!("{nsg}?{V_NET}"), Some(json!({"tags": {"team": "ml"}})), true).await;
    assert_eq!((patched.status, &patched.body["tags"], rules(&patched.body)), (200, &json!({"team": "ml"}), 1), "{}", patched.body);
    // A PUT without `securityRules` drops them.
    let bare =
        write(&c, "PUT", &format!("{nsg}?{V_NET}"), json!({"location": "eastus", "tags": {"team": "ml"}, "properties": {}}), false).await;
    assert_eq!(bare.status, 200, "{}", bare.body);
    assert_eq!(rules(&c.call("GET", &format!("{nsg}?{V_NET}"), None, true).await.body), 0);

    // ProximityPlacementGroups_Update and ResourceGroups_Update replace the tags as well.
    let ppg = format!("{rg}/providers/Microsoft.Compute/proximityPlacementGroups/train-ppg");
    let made = write(&c, "PUT", &format!("{ppg}?{V}"), json!({"location": "eastus", "tags": {"a": "1"}}), true).await;
    assert_eq!(made.status, 201, "{}", made.body);
    for (id, v) in [(&ppg, V), (&rg, V_GROUP)] {
        let patched = c.call("PATCH", &format!("{id}?{v}"), Some(json!({"tags": {"team": "ml"}})), true).await;
        assert_eq!((patched.status, &patched.body["tags"]), (200, &json!({"team": "ml"})), "{id}: {}", patched.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_none_match_star_creates_only_and_an_existing_resource_is_refused_with_412() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/race-rg");
    let group = |tag: &str| json!({"location": "eastus", "tags": {"writer": tag}});
    assert_eq!(write(&c, "PUT", &format!("{rg}?{V_GROUP}"), group("first"), true).await.status, 201);
    let nsg = format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/race-nsg");
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/race-vpc");
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/race-0");
    let nsg_body = |tag: &str| json!({"location": "eastus", "tags": {"writer": tag}, "properties": {}});
    let vnet_body = |tag: &str| json!({"location": "eastus", "tags": {"writer": tag}, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    let mut set = vmss_body(1);
    set["tags"] = json!({"writer": "first"});
    let cases = [
        (rg.clone(), V_GROUP, group("second")),
        (nsg.clone(), V_NET, nsg_body("second")),
        (vnet.clone(), V_NET, vnet_body("second")),
        (format!("{vnet}/subnets/race-subnet"), V_NET, json!({"properties": {"addressPrefix": "10.0.9.0/24"}})),
        (vmss.clone(), V, {
            let mut s = set.clone();
            s["tags"] = json!({"writer": "second"});
            s
        }),
    ];
    assert_eq!(write(&c, "PUT", &format!("{nsg}?{V_NET}"), nsg_body("first"), true).await.status, 201);
    assert_eq!(write(&c, "PUT", &format!("{vnet}?{V_NET}"), vnet_body("first"), true).await.status, 201);
    let subnet = json!({"properties": {"addressPrefix": "10.0.0.0/24"}});
    assert_eq!(write(&c, "PUT", &format!("{vnet}/subnets/race-subnet?{V_NET}"), subnet, true).await.status, 201);
    assert_eq!(write(&c, "PUT", &format!("{vmss}?{V}"), set, true).await.status, 201);
    for (id, v, second) in &cases {
        let before = c.call("GET", &format!("{id}?{v}"), None, true).await.body;
        // A second create-only PUT finds the resource there: 412, and the first writer's resource stands.
        let refused = write(&c, "PUT", &format!("{id}?{v}"), second.clone(), true).await;
        assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (412, Some("PreconditionFailed")), "{id}: {}", refused.body);
        let after = c.call("GET", &format!("{id}?{v}"), None, true).await.body;
        assert_eq!(after["tags"], before["tags"], "{id}");
        assert_eq!(after["properties"]["addressPrefix"], before["properties"]["addressPrefix"], "{id}");
    }
    // A create-only PATCH of what exists is refused the same way; without the header, writes update.
    let refused = write(&c, "PATCH", &format!("{nsg}?{V_NET}"), json!({"tags": {"writer": "second"}}), true).await;
    assert_eq!(refused.status, 412, "{}", refused.body);
    let updated = write(&c, "PUT", &format!("{nsg}?{V_NET}"), nsg_body("second"), false).await;
    assert_eq!((updated.status, &updated.body["tags"]), (200, &json!({"writer": "second"})), "{}", updated.body);
    // And a create-only PUT of something new creates it.
    let fresh = format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/fresh-nsg");
    assert_eq!(write(&c, "PUT", &format!("{fresh}?{V_NET}"), nsg_body("first"), true).await.status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_or_delete_under_a_stale_etag_is_refused_with_412_and_changes_nothing() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/etag-rg");
    assert_eq!(write(&c, "PUT", &format!("{rg}?{V_GROUP}"), json!({"location": "eastus"}), true).await.status, 201);
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/etag-vpc");
    let subnet = format!("{vnet}/subnets/etag-subnet");
    let vmss = format!("{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/etag-0");
    let vnet_body = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}});
    assert_eq!(write(&c, "PUT", &format!("{vnet}?{V_NET}"), vnet_body, true).await.status, 201);
    assert_eq!(
        write(&c, "PUT", &format!("{subnet}?{V_NET}"), json!({"properties": {"addressPrefix": "10.0.0.0/24"}}), true).await.status,
        201
    );
    assert_eq!(write(&c, "PUT", &format!("{vmss}?{V}"), vmss_body(1), true).await.status, 201);
    let under = |etag: &str| vec![("authorization", "Bearer emulator-token".to_owned()), ("if-match", etag.to_owned())];
    let call = |method: &'static str, url: String, body: Option<Value>, etag: String| {
        let c = &c;
        async move {
            let headers = under(&etag);
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            c.call_with(method, &url, body, &headers).await
        }
    };
    // A body of each by writer: the subnet's private endpoint policy, the scale set's tags tell them apart.
    let body = |id: &str, writer: &str| {
        if id.contains("/subnets/") {
            let policy = if writer == "theirs" { "Disabled" } else { "Enabled" };
            json!({"properties": {"addressPrefix": "10.0.0.0/24", "privateEndpointNetworkPolicies": policy}})
        } else {
            let mut set = vmss_body(1);
            set["tags"] = json!({"writer": writer});
            set
        }
    };
    let writer_of = |id: &str, found: &Value| -> String {
        if id.contains("/subnets/") {
            let theirs = found["properties"]["privateEndpointNetworkPolicies"] == "Disabled";
            (if theirs { "theirs" } else { "mine" }).to_owned()
        } else {
            found["tags"]["writer"].as_str().unwrap_or_default().to_owned()
        }
    };
    for (id, v) in [(subnet.clone(), V_NET), (vmss.clone(), V)] {
        let read = c.call("GET", &format!("{id}?{v}"), None, true).await.body;
        let etag = read["etag"].as_str().unwrap_or_else(|| panic!("{id} answers with its etag: {read}")).to_owned();
        assert!(etag.starts_with("W/\""), "{etag}");
        // Another writer changes it: a new etag.
        let changed = write(&c, "PUT", &format!("{id}?{v}"), body(&id, "theirs"), false).await;
        assert_eq!(changed.status, 200, "{}", changed.body);
        let now = changed.body["etag"].as_str().unwrap_or_default().to_owned();
        assert_ne!(now, etag, "{id}: every write gives a new etag");
        // A write made from the first read, under its etag: 412, theirs stands.
        let refused = call("PUT", format!("{id}?{v}"), Some(body(&id, "mine")), etag.clone()).await;
        assert_eq!(refused.status, 412, "{id}: {}", refused.body);
        assert_eq!(refused.body["error"]["code"], "PreconditionFailed");
        assert_eq!(refused.body["error"]["details"][0]["code"], "PreconditionFailedEtagMismatch", "{}", refused.body);
        let after = c.call("GET", &format!("{id}?{v}"), None, true).await.body;
        assert_eq!(writer_of(&id, &after), "theirs", "{id}: nothing changed by the refused write");
        // A delete under the stale etag is refused too; under the current one the write goes through.
        let refused = call("DELETE", format!("{id}?{v}"), None, etag.clone()).await;
        assert_eq!(refused.status, 412, "{id}: {}", refused.body);
        let done = call("PUT", format!("{id}?{v}"), Some(body(&id, "mine")), now).await;
        assert_eq!((done.status, writer_of(&id, &done.body)), (200, "mine".to_owned()), "{id}: {}", done.body);
        // `*` holds for any version of what exists; for nothing it fails.
        assert_eq!(call("GET", format!("{id}?{v}"), None, "*".into()).await.status, 200);
    }
    let gone = format!("{rg}/providers/Microsoft.Network/virtualNetworks/etag-vpc/subnets/none");
    let refused = call("PUT", format!("{gone}?{V_NET}"), Some(json!({"properties": {"addressPrefix": "10.0.9.0/24"}})), "*".into()).await;
    assert_eq!(refused.status, 412, "If-Match: * of nothing: {}", refused.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_user_data_is_read_only_with_expand_and_a_patch_changes_it_and_replaces_the_tags() {
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let rg = format!("{SUB}/resourceGroups/ud-rg");
    assert_eq!(write(&c, "PUT", &format!("{rg}?{V_GROUP}"), json!({"location": "eastus"}), true).await.status, 201);
    let vm = format!("{rg}/providers/Microsoft.Compute/virtualMachines/ml-controller");
    let body = json!({"location": "eastus", "tags": {"hpc:slurm": "ml", "team": "a"},
                      "properties": {"hardwareProfile": {"vmSize": "Standard_D8s_v5"}, "userData": "Zmlyc3Q="}});
    let made = c.call("PUT", &format!("{vm}?{V}"), Some(body), true).await;
    assert_eq!(made.status, 201, "{}", made.body);
    c.settle(&format!("{vm}?{V}")).await;
    // VirtualMachines_Get leaves userData out unless asked for with $expand=userData.
    let plain = c.call("GET", &format!("{vm}?{V}"), None, true).await.body;
    assert!(plain["properties"].get("userData").is_none(), "{plain}");
    let expanded = c.call("GET", &format!("{vm}?{V}&$expand=userData"), None, true).await.body;
    assert_eq!(expanded["properties"]["userData"], "Zmlyc3Q=");
    // VirtualMachines_Update (PATCH): userData changes in place; the tags sent are the tags (the others gone).
    let patched = c
        .call("PATCH", &format!("{vm}?{V}"), Some(json!({"tags": {"hpc:slurm": "ml"}, "properties": {"userData": "c2Vjb25k"}})), true)
        .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert!(patched.body["properties"].get("userData").is_none(), "{}", patched.body);
    let now = c.call("GET", &format!("{vm}?{V}&%24expand=userData"), None, true).await.body;
    assert_eq!(now["properties"]["userData"], "c2Vjb25k");
    assert_eq!(now["tags"], json!({"hpc:slurm": "ml"}));
    assert_eq!(now["properties"]["hardwareProfile"]["vmSize"], "Standard_D8s_v5", "the rest is as it was");
}

/// VirtualMachineScaleSetVMs_Update gives one scale-set VM a `userData` of its own ("UserData for the VM,
/// which must be base-64 encoded"), which only a GET with `$expand=userData` shows; a PUT without it keeps
/// it and an empty one deletes it; the VM runs on, untouched (no action reaches it, it stays on its model).
/// VirtualMachineScaleSets_Update (PATCH) replaces the set's tags and leaves its VMs as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_set_vm_takes_a_user_data_of_its_own_and_keeps_running() {
    use base64::Engine;
    let running = azure::serve("127.0.0.1:0").await.unwrap();
    let c = Client::new(&running);
    let vmss = day2_set(&c, &format!("{SUB}/resourceGroups/vmud-rg"), 2).await;
    settled(&c, &vmss).await;
    let vm = |i: u32| format!("{vmss}/virtualMachines/{i}");
    let own = |i: u32| {
        let url = format!("{}?$expand=userData&{V}", vm(i));
        let c = &c;
        async move {
            let got = c.call("GET", &url, None, true).await;
            assert_eq!(got.status, 200, "{}", got.body);
            got.body["properties"]["userData"].as_str().map(str::to_owned)
        }
    };
    let named = base64::engine::general_purpose::STANDARD.encode("hpc-node-name=train-1\n");
    let update = |i: u32, body: Value| {
        let url = format!("{}?{V}", vm(i));
        let c = &c;
        async move { c.call("PUT", &url, Some(body), true).await }
    };
    let written = update(1, json!({"location": "eastus", "properties": {"userData": named}})).await;
    assert_eq!(written.status, 200, "{}", written.body);
    assert!(written.body["properties"].get("userData").is_none(), "an update's answer leaves userData out: {}", written.body);
    assert_eq!(written.body["instanceId"], "1");
    let plain = c.call("GET", &format!("{}?{V}", vm(1)), None, true).await.body;
    assert!(plain["properties"].get("userData").is_none(), "{plain}");
    assert_eq!(own(1).await.as_deref(), Some(named.as_str()));
    assert_eq!(own(0).await, None, "the other VM has none");
    // A list never carries it.
    let listed = instance_views(&c, &vmss).await;
    assert!(listed.iter().all(|v| v["properties"].get("userData").is_none()), "{listed:?}");
    // Not base64: refused, nothing changed.
    let refused = update(1, json!({"location": "eastus", "properties": {"userData": "not base64!"}})).await;
    assert_eq!((refused.status, refused.body["error"]["code"].as_str()), (400, Some("InvalidParameter")), "{}", refused.body);
    assert_eq!(own(1).await.as_deref(), Some(named.as_str()));
    // Without userData: kept; an empty one: deleted.
    assert_eq!(update(1, json!({"location": "eastus", "properties": {}})).await.status, 200);
    assert_eq!(own(1).await.as_deref(), Some(named.as_str()));
    assert_eq!(update(1, json!({"location": "eastus", "properties": {"userData": ""}})).await.status, 200);
    assert_eq!(own(1).await, None);
    assert_eq!(update(9, json!({"location": "eastus", "properties": {"userData": named}})).await.status, 404, "no VM 9");
    // The VMs ran on as they were: on their model, running, no action counted.
    let vms = settled(&c, &vmss).await;
    assert!(vms.iter().all(|v| v["properties"]["latestModelApplied"] == true), "{vms:?}");
    assert!(vms.iter().all(|v| codes(v).contains(&"PowerState/running".to_owned())), "{vms:?}");
    let emu = running.emulator.clone();
    let actions = emu.admin.handle("GET", "snapshot", b"", emu.as_ref()).1["vm_actions"].clone();
    assert!(actions.as_object().is_none_or(|a| a.is_empty()), "{actions}");

    // The set's tags alone (VirtualMachineScaleSets_Update): replaced as sent, its VMs as they were.
    let patched = c.call("PATCH", &format!("{vmss}?{V}"), Some(json!({"tags": {"hpc:nodes": "0-1:0"}})), true).await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    let set = c.call("GET", &format!("{vmss}?{V}"), None, true).await.body;
    assert_eq!(set["tags"], json!({"hpc:nodes": "0-1:0"}));
    assert_eq!(set["sku"]["capacity"], 2);
    assert_eq!(vm_count(&c, &vmss).await, 2);
}
