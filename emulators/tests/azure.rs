//! The Azure Resource Manager emulator over HTTPS, trusted by its own certificate only: resource groups,
//! proximity placement groups and InfiniBand scale sets through long-running operations, one-call VM
//! listing per scale set, case-insensitive ids, ARM errors, 429 with Retry-After, allocation failures and
//! out-of-band deletes.

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
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let mut tls = self.tls.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = if token { "authorization: Bearer emulator-token\r\n" } else { "" };
        let req = format!(
            "{method} {path_and_query} HTTP/1.1\r\nhost: localhost\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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
