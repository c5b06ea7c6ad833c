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
const V: &str = "api-version=2024-07-01";

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

    async fn wait(&self, reply: &Reply) -> Value {
        let url = reply.header("azure-asyncoperation").expect("an Azure-AsyncOperation header").to_owned();
        let path = url.split_once("://").unwrap().1.split_once('/').unwrap().1;
        loop {
            let status = self.call("GET", &format!("/{path}"), None, true).await.body;
            if status["status"] != "InProgress" {
                return status;
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

    assert_eq!(c.call("GET", &format!("{rg}?{V}"), None, false).await.status, 401);
    assert_eq!(c.call("GET", &rg, None, true).await.body["error"]["code"], "MissingApiVersionParameter");
    let orphan = c.call("PUT", &format!("{vmss}?{V}"), Some(vmss_body(1)), true).await;
    assert_eq!((orphan.status, orphan.body["error"]["code"].as_str()), (404, Some("ResourceGroupNotFound")));

    assert_eq!(c.call("PUT", &format!("{rg}?{V}"), Some(json!({"location": "eastus"})), true).await.status, 201);
    let ppg = c
        .call(
            "PUT",
            &format!("{rg}/providers/Microsoft.Compute/proximityPlacementGroups/train-ppg?{V}"),
            Some(json!({"location": "eastus"})),
            true,
        )
        .await;
    assert_eq!(ppg.body["properties"]["provisioningState"], "Succeeded");

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
    c.wait(&scaled).await;
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
    c.call("DELETE", &format!("{rg}?{V}"), None, true).await;
    let (_, inventory) = emu.admin.handle("GET", "inventory", b"", emu.as_ref());
    assert_eq!(inventory["empty"], true, "{inventory}");
}
