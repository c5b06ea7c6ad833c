//! The OCI emulator with the provider's own request signer: signed requests are served, a wrong key or a
//! tampered body gets OCI's 401, and VCNs, compute clusters and instances go through their lifecycles;
//! faults (429 without Retry-After, "Out of host capacity") and out-of-band terminations show up.

use std::io::{Read, Write};
use std::net::TcpStream;

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{KeyPair, RsaKeyPair};
use base64::Engine;
use hpc_emulators::oci;
use hpc_provider::clouds::oci::signing::{Request, Signer};
use serde_json::{Value, json};

const TENANCY: &str = "ocid1.tenancy.oc1..emulator";
const USER: &str = "ocid1.user.oc1..emulator";
const FINGERPRINT: &str = "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0";
const COMPARTMENT: &str = "ocid1.compartment.oc1..ml";

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// A fresh API key: the signer that uses it, and its public key PEM.
fn api_key() -> (Signer, String) {
    let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
    let private = pem("PRIVATE KEY", AsDer::<Pkcs8V1Der>::as_der(&key).unwrap().as_ref());
    let public = pem("PUBLIC KEY", key.public_key().as_der().unwrap().as_ref());
    (Signer::from_pem(&private, TENANCY, USER, FINGERPRINT).unwrap(), public)
}

/// A signed request over plain HTTP; returns (status, JSON body).
fn call(addr: std::net::SocketAddr, signer: &Signer, method: &str, path: &str, body: Option<Value>, tamper: bool) -> (u16, Value) {
    let (status, body, _) = call_with_head(addr, signer, method, path, body, tamper);
    (status, body)
}

/// Like `call`, also returning the response head (status line and headers).
fn call_with_head(
    addr: std::net::SocketAddr,
    signer: &Signer,
    method: &str,
    path: &str,
    body: Option<Value>,
    tamper: bool,
) -> (u16, Value, String) {
    let body = body.map(|b| b.to_string().into_bytes());
    let host = addr.to_string();
    let headers = signer
        .sign(&Request {
            method,
            host: &host,
            path_and_query: path,
            date: "Sun, 29 Nov 2026 20:00:00 GMT",
            body: body.as_deref(),
            content_type: "application/json",
        })
        .unwrap();
    let mut payload = body.unwrap_or_default();
    if tamper {
        payload = payload.iter().map(|b| if *b == b'6' { b'8' } else { *b }).collect();
    }
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    for (k, v) in &headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "DELETE" || method == "GET" {
        head.push_str("content-length: 0\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&payload).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response);
    let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, serde_json::from_str(body).unwrap_or(Value::Null), head.to_owned())
}

fn admin(emu: &oci::Oci, method: &str, route: &str, body: Value) -> Value {
    let (status, out) = emu.admin.handle(method, route, body.to_string().as_bytes(), emu);
    assert_eq!(status, 200, "{out}");
    out
}

async fn started() -> (oci::Running, Signer) {
    let emu = oci::serve("127.0.0.1:0").await.unwrap();
    let (signer, public) = api_key();
    admin(&emu.emulator, "POST", "keys", json!({"key_id": signer.key_id(), "public_key_pem": public}));
    (emu, signer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_are_served_and_bad_signatures_get_401() {
    let (emu, signer) = started().await;
    let addr = emu.addr;
    let vcn = tokio::task::spawn_blocking(move || {
        let (status, vcn) = call(
            addr,
            &signer,
            "POST",
            "/20160918/vcns",
            Some(json!({"compartmentId": COMPARTMENT, "cidrBlocks": ["10.0.0.0/16"], "displayName": "train-vpc"})),
            false,
        );
        assert_eq!(status, 200, "{vcn}");
        assert_eq!(vcn["lifecycleState"], "PROVISIONING");
        // A tampered body no longer matches its signed digest.
        let (status, err) =
            call(addr, &signer, "POST", "/20160918/vcns", Some(json!({"compartmentId": COMPARTMENT, "cidrBlocks": ["10.6.0.0/16"]})), true);
        assert_eq!((status, err["code"].as_str()), (401, Some("NotAuthenticated")));
        // Another key under the same key id does not verify.
        let (impostor, _) = api_key();
        let (status, err) = call(addr, &impostor, "GET", &format!("/20160918/vcns?compartmentId={COMPARTMENT}"), None, false);
        assert_eq!((status, err["code"].as_str()), (401, Some("NotAuthenticated")));
        std::thread::sleep(std::time::Duration::from_millis(350));
        let (status, listed) = call(addr, &signer, "GET", &format!("/20160918/vcns?compartmentId={COMPARTMENT}"), None, false);
        assert_eq!(status, 200);
        assert_eq!(listed.as_array().unwrap().len(), 1);
        assert_eq!(listed[0]["lifecycleState"], "AVAILABLE");
        let id = listed[0]["id"].as_str().unwrap().to_owned();
        let (status, _) = call(addr, &signer, "DELETE", &format!("/20160918/vcns/{id}"), None, false);
        assert_eq!(status, 204);
        let (status, err) = call(addr, &signer, "GET", &format!("/20160918/vcns/{id}"), None, false);
        assert_eq!((status, err["code"].as_str()), (404, Some("NotAuthorizedOrNotFound")));
        vcn
    })
    .await
    .unwrap();
    assert!(vcn["id"].as_str().unwrap().starts_with("ocid1.vcn."));
    assert_eq!(admin(&emu.emulator, "GET", "inventory", json!({}))["empty"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_in_a_compute_cluster_with_capacity_throttling_and_out_of_band_faults() {
    let (emu, signer) = started().await;
    let addr = emu.addr;
    admin(&emu.emulator, "POST", "faults", json!({"service": "core", "operation": "LaunchInstance", "kind": "capacity", "nth": 3}));
    admin(&emu.emulator, "POST", "faults", json!({"service": "core", "operation": "ListInstances", "kind": "throttle", "times": 1}));
    let emulator = emu.emulator.clone();
    tokio::task::spawn_blocking(move || {
        let (_, cc) = call(
            addr,
            &signer,
            "POST",
            "/20160918/computeClusters",
            Some(json!({"compartmentId": COMPARTMENT, "availabilityDomain": "AD-1", "displayName": "train-cc"})),
            false,
        );
        let cc_id = cc["id"].as_str().unwrap().to_owned();
        let launch = |n: u32| {
            call(
                addr,
                &signer,
                "POST",
                "/20160918/instances",
                Some(json!({
                    "compartmentId": COMPARTMENT, "availabilityDomain": "AD-1", "shape": "BM.GPU.H100.8", "computeClusterId": cc_id,
                    "displayName": format!("train-{n}"), "freeformTags": {"hpc:cluster": "train"},
                })),
                false,
            )
        };
        let (a, first) = launch(0);
        let (b, _) = launch(1);
        assert_eq!((a, b), (200, 200));
        let (status, err) = launch(2);
        assert_eq!((status, err["message"].as_str()), (500, Some("Out of host capacity.")));

        let (status, err) = call(addr, &signer, "GET", &format!("/20160918/instances?compartmentId={COMPARTMENT}"), None, false);
        assert_eq!((status, err["code"].as_str()), (429, Some("TooManyRequests")));
        std::thread::sleep(std::time::Duration::from_millis(650));
        let (_, listed) =
            call(addr, &signer, "GET", &format!("/20160918/instances?compartmentId={COMPARTMENT}&computeClusterId={cc_id}"), None, false);
        let states: Vec<&str> = listed.as_array().unwrap().iter().map(|i| i["lifecycleState"].as_str().unwrap()).collect();
        assert_eq!(states, ["RUNNING", "RUNNING"]);

        let victim = first["id"].as_str().unwrap().to_owned();
        let (status, out) = emulator.admin.handle(
            "POST",
            "out-of-band",
            json!({"action": "terminate_instance", "id": victim}).to_string().as_bytes(),
            emulator.as_ref(),
        );
        assert_eq!(status, 200, "{out}");
        let (_, gone) = call(addr, &signer, "GET", &format!("/20160918/instances/{victim}"), None, false);
        assert_eq!(gone["lifecycleState"], "TERMINATED");
        let counters = emulator.admin.handle("GET", "counters", b"", emulator.as_ref()).1;
        assert_eq!(counters["counters"]["core:LaunchInstance"], 3);
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_networks_launch_their_pool_and_lustre_goes_through_work_requests() {
    let (emu, signer) = started().await;
    let addr = emu.addr;
    let emulator = emu.emulator.clone();
    tokio::task::spawn_blocking(move || {
        let (_, config) = call(addr, &signer, "POST", "/20160918/instanceConfigurations", Some(json!({
            "compartmentId": COMPARTMENT,
            "instanceDetails": {"instanceType": "compute", "launchDetails": {"shape": "BM.GPU.H100.8", "agentConfig": {"pluginsConfig": [
                {"name": "Compute HPC RDMA Authentication", "desiredState": "ENABLED"}]}}},
        })), false);
        let config_id = config["id"].as_str().unwrap().to_owned();
        let (status, network) = call(addr, &signer, "POST", "/20160918/clusterNetworks", Some(json!({
            "compartmentId": COMPARTMENT,
            "instancePools": [{"instanceConfigurationId": config_id, "size": 4}],
            "placementConfiguration": {"availabilityDomain": "AD-1", "primarySubnetId": "ocid1.subnet.oc1..x"},
        })), false);
        assert_eq!(status, 200, "{network}");
        let network_id = network["id"].as_str().unwrap().to_owned();
        assert_eq!(network["instancePools"][0]["size"], 4);
        // All nodes of the cluster network in one call.
        let (_, nodes) = call(addr, &signer, "GET", &format!("/20160918/clusterNetworks/{network_id}/instances"), None, false);
        let nodes = nodes.as_array().unwrap();
        assert_eq!(nodes.len(), 4);
        assert!(nodes.iter().all(|n| n["shape"] == "BM.GPU.H100.8"));
        let (_, missing) = call(addr, &signer, "POST", "/20160918/clusterNetworks", Some(json!({
            "compartmentId": COMPARTMENT, "instancePools": [{"instanceConfigurationId": "ocid1.instanceconfiguration.oc1..nope", "size": 1}],
            "placementConfiguration": {"availabilityDomain": "AD-1"},
        })), false);
        assert_eq!(missing["code"], "NotAuthorizedOrNotFound");

        let lustre = |capacity: u64| {
            call_with_head(addr, &signer, "POST", "/20250228/lustreFileSystems", Some(json!({
                "compartmentId": COMPARTMENT, "availabilityDomain": "AD-1", "capacityInGBs": capacity, "fileSystemName": "scratch",
                "performanceTier": "MBPS_PER_TB_250", "subnetId": "ocid1.subnet.oc1..x", "rootSquashConfiguration": {"identitySquash": "NONE"},
            })), false)
        };
        let (status, err, _) = lustre(20_800);
        assert_eq!((status, err["code"].as_str()), (400, Some("InvalidParameter")));
        let (status, fs, head) = lustre(31_200);
        assert_eq!(status, 202, "{fs}");
        let work_request = head.lines().find_map(|l| l.strip_prefix("opc-work-request-id: ")).expect("a work request id").to_owned();
        let (_, early) = call(addr, &signer, "GET", &format!("/20250228/workRequests/{work_request}"), None, false);
        assert!(["ACCEPTED", "IN_PROGRESS", "SUCCEEDED"].contains(&early["status"].as_str().unwrap()), "{early}");
        std::thread::sleep(std::time::Duration::from_millis(350));
        let (_, done) = call(addr, &signer, "GET", &format!("/20250228/workRequests/{work_request}"), None, false);
        assert_eq!((done["status"].as_str(), done["percentComplete"].as_f64()), (Some("SUCCEEDED"), Some(100.0)));
        let (_, fs_now) = call(addr, &signer, "GET", &format!("/20250228/lustreFileSystems/{}", fs["id"].as_str().unwrap()), None, false);
        assert_eq!(fs_now["capacityInGBs"], 31_200);

        let (status, _) = call(addr, &signer, "DELETE", &format!("/20160918/clusterNetworks/{network_id}"), None, false);
        assert_eq!(status, 204);
        std::thread::sleep(std::time::Duration::from_millis(350));
        let (status, _) = call(addr, &signer, "DELETE", &format!("/20250228/lustreFileSystems/{}", fs["id"].as_str().unwrap()), None, false);
        assert_eq!(status, 202);
        call(addr, &signer, "DELETE", &format!("/20160918/instanceConfigurations/{config_id}"), None, false);
        let inventory = emulator.admin.handle("GET", "inventory", b"", emulator.as_ref()).1;
        assert_eq!(inventory["empty"], true, "{inventory}");
    })
    .await
    .unwrap();
}
