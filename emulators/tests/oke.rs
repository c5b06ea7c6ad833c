//! Container Engine for Kubernetes (OKE, `/20180222`) on the OCI emulator, through the provider's own request
//! signer: a cluster created in a VCN and subnet made through Core goes through its work request to ACTIVE with
//! a private endpoint in its subnet, gives a kubeconfig for that endpoint with the same CA every time, is
//! listed, holds its subnet and VCN until it is deleted, and is DELETED then gone from lists and the inventory;
//! what OKE refuses is refused (a bad VCN, a subnet of another VCN, a Kubernetes version OKE does not offer, a
//! public kubeconfig of a private cluster); faults on `containerengine` (a throttled GetCluster, an operation
//! error that fails the create's work request) and the admin API's inventory, snapshot and reset.
//!
//! Run with `HPC_CONFORMANCE=strict HPC_CONFORMANCE_DEFS=<extract.py's output>` and every call and answer is
//! judged by the `oci` SDK's definitions as well.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine;
use hpc_emulators::conformance::PROBE_HEADER;
use hpc_emulators::harness;
use hpc_provider::clouds::oci::signing::{Request, Signer};
use serde_json::{Value, json};

const COMPARTMENT: &str = "ocid1.compartment.oc1..k8s";

/// An answer: status, head (status line and headers) and body text.
struct Answer {
    status: u16,
    head: String,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head
            .lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned()))
    }

    fn code(&self) -> (u16, String) {
        (self.status, self.json()["code"].as_str().unwrap_or_default().to_owned())
    }
}

/// A signed client of an emulator of its own, started by the harness with the key it registers.
struct Api {
    addr: SocketAddr,
    endpoint: String,
    signer: Signer,
}

impl Api {
    fn start() -> Api {
        let (endpoint, key) = harness::start_oci();
        let signer = Signer::from_pem(&key.private_key_pem, &key.tenancy, &key.user, &key.fingerprint).unwrap();
        Api { addr: endpoint.trim_start_matches("http://").parse().unwrap(), endpoint, signer }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>, extra: &[(&str, &str)]) -> Answer {
        let body = body.map(|b| b.to_string().into_bytes());
        let host = self.addr.to_string();
        let date = "Sun, 29 Nov 2026 20:00:00 GMT";
        let request = Request { method, host: &host, path_and_query: path, date, body: body.as_deref(), content_type: "application/json" };
        let headers = self.signer.sign(&request).unwrap();
        let mut stream = TcpStream::connect(self.addr).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
        for (k, v) in headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(extra.iter().copied()) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if matches!(method, "GET" | "DELETE") {
            head.push_str("content-length: 0\r\n");
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body.unwrap_or_default()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let text = String::from_utf8_lossy(&response).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        Answer { status, head: head.to_owned(), text: body.to_owned() }
    }

    fn get(&self, path: &str) -> Answer {
        self.call("GET", path, None, &[])
    }

    fn post(&self, path: &str, body: Value) -> Answer {
        self.call("POST", path, Some(body), &[])
    }

    fn delete(&self, path: &str) -> Answer {
        self.call("DELETE", path, None, &[])
    }

    /// A deliberate mistake: the judge (when definitions are given) or the emulator refuses it.
    fn probe(&self, path: &str, body: Value) -> Answer {
        self.call("POST", path, Some(body), &[(PROBE_HEADER, "1")])
    }

    fn admin(&self, method: &str, route: &str, body: Option<Value>) -> Value {
        harness::admin(&self.endpoint, method, route, body)
    }

    fn created(&self, path: &str, body: Value) -> String {
        let answer = self.post(path, body);
        assert_eq!(answer.status, 200, "POST {path}: {}", answer.text);
        answer.json()["id"].as_str().unwrap().to_owned()
    }

    fn vcn(&self, cidr: &str) -> String {
        self.created("/20160918/vcns", json!({"compartmentId": COMPARTMENT, "cidrBlocks": [cidr], "displayName": "k8s", "dnsLabel": "k8s"}))
    }

    fn subnet(&self, vcn: &str, cidr: &str, public: bool) -> String {
        self.created(
            "/20160918/subnets",
            json!({"compartmentId": COMPARTMENT, "vcnId": vcn, "cidrBlock": cidr, "displayName": "api", "dnsLabel": "api",
                   "prohibitPublicIpOnVnic": !public}),
        )
    }

    fn cluster_body(vcn: &str, subnet: &str, public: bool) -> Value {
        json!({
            "name": "train", "compartmentId": COMPARTMENT, "vcnId": vcn, "kubernetesVersion": "v1.33.1",
            "endpointConfig": {"subnetId": subnet, "isPublicIpEnabled": public},
            "freeformTags": {"hpc:cluster": "train"},
        })
    }

    /// CreateCluster: the cluster's id (from its work request) and the work request's.
    fn create_cluster(&self, body: Value) -> (String, String) {
        let answer = self.post("/20180222/clusters", body);
        assert_eq!(answer.status, 202, "{}", answer.text);
        assert!(answer.text.is_empty(), "CreateCluster answers without a body: {}", answer.text);
        let wr = answer.header("opc-work-request-id").expect("an opc-work-request-id");
        let wr_body = self.get(&format!("/20180222/workRequests/{wr}")).json();
        (wr_body["resources"][0]["identifier"].as_str().unwrap().to_owned(), wr)
    }

    /// Polls a work request until it ends; returns it and every status seen.
    fn wait(&self, wr: &str) -> (Value, Vec<String>) {
        let started = Instant::now();
        let mut seen: Vec<String> = Vec::new();
        loop {
            let answer = self.get(&format!("/20180222/workRequests/{wr}"));
            assert_eq!(answer.status, 200, "{}", answer.text);
            let v = answer.json();
            let status = v["status"].as_str().unwrap().to_owned();
            if seen.last() != Some(&status) {
                seen.push(status.clone());
            }
            if matches!(status.as_str(), "SUCCEEDED" | "FAILED") {
                return (v, seen);
            }
            assert!(started.elapsed() < Duration::from_secs(10), "work request {wr} never ended: {v}");
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    fn cluster(&self, id: &str) -> Value {
        let answer = self.get(&format!("/20180222/clusters/{id}"));
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()
    }

    fn kubeconfig(&self, id: &str, endpoint: &str) -> Answer {
        self.post(&format!("/20180222/clusters/{id}/kubeconfig/content"), json!({"tokenVersion": "2.0.0", "endpoint": endpoint}))
    }

    fn listed(&self, query: &str) -> Vec<Value> {
        let answer = self.get(&format!("/20180222/clusters?compartmentId={COMPARTMENT}{query}"));
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json().as_array().expect("ListClusters answers a bare array").clone()
    }
}

/// A kubeconfig's value for `key` (`server`, `certificate-authority-data`), quotes removed.
fn kubeconfig_value(yaml: &str, key: &str) -> String {
    yaml.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("no {key} in\n{yaml}"))
}

fn in_block(ip: &str, cidr: &str) -> bool {
    let (base, len) = cidr.split_once('/').unwrap();
    let (base, len): (Ipv4Addr, u32) = (base.parse().unwrap(), len.parse().unwrap());
    let mask = u32::MAX << (32 - len);
    ip.parse::<Ipv4Addr>().is_ok_and(|ip| u32::from(ip) & mask == u32::from(base) & mask)
}

#[test]
fn a_cluster_is_created_gives_a_private_kubeconfig_and_is_deleted() {
    let api = Api::start();
    let vcn = api.vcn("10.0.0.0/16");
    let subnet = api.subnet(&vcn, "10.0.1.0/24", false);

    let (id, wr) = api.create_cluster(Api::cluster_body(&vcn, &subnet, false));
    assert!(id.starts_with("ocid1.cluster.oc1.iad."), "{id}");
    assert!(wr.starts_with("ocid1.clustersworkrequest.oc1.iad."), "{wr}");
    // CREATING while its work request runs.
    assert_eq!(api.cluster(&id)["lifecycleState"], "CREATING");
    // OKE's work requests are not Core's.
    assert_eq!(api.get(&format!("/20160918/workRequests/{wr}")).code(), (404, "NotAuthorizedOrNotFound".into()));
    let (done, seen) = api.wait(&wr);
    assert_eq!(seen.last().map(String::as_str), Some("SUCCEEDED"), "{seen:?}");
    assert!(seen.iter().all(|s| ["ACCEPTED", "IN_PROGRESS", "SUCCEEDED"].contains(&s.as_str())), "{seen:?}");
    assert_eq!(done["operationType"], "CLUSTER_CREATE");
    assert_eq!(done["compartmentId"], COMPARTMENT);
    assert_eq!(
        done["resources"][0],
        json!({"actionType": "CREATED", "entityType": "cluster", "identifier": id, "entityUri": format!("/20180222/clusters/{id}")})
    );
    assert!(done["timeAccepted"].is_string() && done["timeStarted"].is_string() && done["timeFinished"].is_string(), "{done}");

    // ACTIVE, with its private endpoint in the subnet, and an etag.
    let answer = api.get(&format!("/20180222/clusters/{id}"));
    assert!(answer.header("etag").is_some_and(|e| !e.is_empty()), "{}", answer.head);
    let cluster = answer.json();
    assert_eq!(cluster["lifecycleState"], "ACTIVE");
    assert_eq!((cluster["name"].as_str(), cluster["vcnId"].as_str()), (Some("train"), Some(vcn.as_str())));
    assert_eq!(cluster["kubernetesVersion"], "v1.33.1");
    let private = cluster["endpoints"]["privateEndpoint"].as_str().unwrap().to_owned();
    let (host, port) = private.rsplit_once(':').unwrap();
    assert!(in_block(host, "10.0.1.0/24") && port == "6443", "{private}");
    assert_eq!(cluster["endpoints"]["kubernetes"], private.as_str());
    assert!(cluster["endpoints"].get("publicEndpoint").is_none(), "{cluster}");
    assert_eq!(cluster["endpointConfig"], json!({"subnetId": subnet, "isPublicIpEnabled": false}));
    assert_eq!(cluster["type"], "BASIC_CLUSTER");
    assert_eq!(cluster["clusterPodNetworkOptions"], json!([{"cniType": "FLANNEL_OVERLAY"}]));
    assert_eq!(cluster["availableKubernetesUpgrades"], json!([]));
    assert_eq!(cluster["freeformTags"], json!({"hpc:cluster": "train"}));
    assert_eq!(cluster["metadata"]["createdByWorkRequestId"], wr.as_str());
    assert!(cluster["metadata"]["timeCreated"].is_string(), "{cluster}");
    assert_eq!(cluster["options"]["kubernetesNetworkConfig"]["servicesCidr"], "10.96.0.0/16");
    assert!(cluster.as_object().unwrap().keys().all(|k| !k.starts_with('_')), "{cluster}");

    // The kubeconfig for the private endpoint: its server, and a CA fixed for the cluster.
    let first = api.kubeconfig(&id, "PRIVATE_ENDPOINT");
    assert_eq!(first.status, 200, "{}", first.text);
    assert!(first.header("content-type").is_some_and(|t| t.starts_with("application/x-yaml")), "{}", first.head);
    assert_eq!(kubeconfig_value(&first.text, "server"), format!("https://{private}"));
    let ca = kubeconfig_value(&first.text, "certificate-authority-data");
    let pem = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(&ca).unwrap()).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----") && pem.trim_end().ends_with("-----END CERTIFICATE-----"), "{pem}");
    assert!(first.text.contains(&format!("- \"{id}\"")) && first.text.contains("generate-token"), "{}", first.text);
    assert!(first.text.contains("- \"us-ashburn-1\""), "{}", first.text);
    let second = api.kubeconfig(&id, "PRIVATE_ENDPOINT");
    assert_eq!(second.status, 200);
    assert_eq!(kubeconfig_value(&second.text, "certificate-authority-data"), ca);
    // No public endpoint: refused, as is an endpoint OKE does not have.
    assert_eq!(api.kubeconfig(&id, "PUBLIC_ENDPOINT").code(), (400, "InvalidParameter".into()));
    assert_eq!(api.probe(&format!("/20180222/clusters/{id}/kubeconfig/content"), json!({"endpoint": "PRIVATE"})).status, 400);
    // The legacy field names the private endpoint here too; a VCN hostname from the DNS labels.
    assert_eq!(kubeconfig_value(&api.kubeconfig(&id, "LEGACY_KUBERNETES").text, "server"), format!("https://{private}"));
    let hostname = kubeconfig_value(&api.kubeconfig(&id, "VCN_HOSTNAME").text, "server");
    assert!(hostname.ends_with(".api.k8s.oraclevcn.com:6443"), "{hostname}");

    // Listed (ClusterSummary), by name and state too; not when another state is asked for.
    let listed = api.listed("");
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0]["id"].as_str(), listed[0]["lifecycleState"].as_str()), (Some(id.as_str()), Some("ACTIVE")));
    assert!(listed[0].get("openIdConnectDiscoveryEndpoint").is_none());
    assert_eq!(api.listed("&name=train&lifecycleState=CREATING&lifecycleState=ACTIVE").len(), 1);
    assert_eq!(api.listed("&name=other").len(), 0);
    assert_eq!(api.listed("&lifecycleState=DELETED").len(), 0);
    assert_eq!(api.get("/20180222/clusters").code(), (400, "MissingParameter".into()));

    // It holds its subnet (and so its VCN), and it is in the inventory and the snapshot.
    assert_eq!(api.delete(&format!("/20160918/subnets/{subnet}")).code(), (409, "Conflict".into()));
    let inventory = api.admin("GET", "inventory", None);
    assert_eq!(inventory["resources"]["containerengine"]["clusters"], json!([id]), "{inventory}");
    assert_eq!(inventory["empty"], false);
    let snapshot = api.admin("GET", "snapshot", None);
    assert_eq!(snapshot["resources"][&id]["lifecycleState"], "ACTIVE", "{snapshot}");
    assert!(snapshot["resources"][&id].get("_ca").is_none());

    // DeleteCluster: DELETING, then DELETED (still answered), gone from lists and the inventory.
    let stale = api.call("DELETE", &format!("/20180222/clusters/{id}"), None, &[("if-match", "\"stale\"")]);
    assert_eq!(stale.code(), (412, "NoEtagMatch".into()));
    let deleted = api.delete(&format!("/20180222/clusters/{id}"));
    assert_eq!(deleted.status, 202, "{}", deleted.text);
    let wr = deleted.header("opc-work-request-id").unwrap();
    assert_eq!(api.cluster(&id)["lifecycleState"], "DELETING");
    assert_eq!(api.delete(&format!("/20180222/clusters/{id}")).code(), (409, "IncorrectState".into()));
    let (done, _) = api.wait(&wr);
    assert_eq!((done["status"].as_str(), done["operationType"].as_str()), (Some("SUCCEEDED"), Some("CLUSTER_DELETE")));
    assert_eq!(done["resources"][0]["actionType"], "DELETED");
    let gone = api.cluster(&id);
    assert_eq!(gone["lifecycleState"], "DELETED");
    assert_eq!(gone["metadata"]["deletedByWorkRequestId"], wr.as_str());
    assert!(api.listed("").is_empty());
    assert_eq!(api.listed("&lifecycleState=DELETED").len(), 1);
    assert_eq!(api.delete(&format!("/20180222/clusters/{id}")).code(), (404, "NotAuthorizedOrNotFound".into()));
    assert_eq!(api.kubeconfig(&id, "PRIVATE_ENDPOINT").code(), (404, "NotAuthorizedOrNotFound".into()));

    assert_eq!(api.delete(&format!("/20160918/subnets/{subnet}")).status, 204);
    assert_eq!(api.delete(&format!("/20160918/vcns/{vcn}")).status, 204);
    let inventory = api.admin("GET", "inventory", None);
    assert_eq!(inventory["empty"], true, "{inventory}");
    assert_eq!(inventory["resources"]["containerengine"]["clusters"], json!([]));
    assert_eq!(api.get("/20180222/clusters/ocid1.cluster.oc1.iad.nothing").code(), (404, "NotAuthorizedOrNotFound".into()));
}

#[test]
fn what_oke_refuses_is_refused() {
    let api = Api::start();
    let vcn = api.vcn("10.0.0.0/16");
    let subnet = api.subnet(&vcn, "10.0.1.0/24", false);
    let other_vcn = api.vcn("10.1.0.0/16");
    let other_subnet = api.subnet(&other_vcn, "10.1.1.0/24", true);
    let refused = |body: Value| api.post("/20180222/clusters", body).code();

    // A vcnId that is not a VCN's OCID, and one of no VCN.
    assert_eq!(refused(Api::cluster_body(&subnet, &subnet, false)), (400, "InvalidParameter".into()));
    assert_eq!(
        refused(Api::cluster_body("ocid1.vcn.oc1.iad.00000000000000009999", &subnet, false)),
        (404, "NotAuthorizedOrNotFound".into())
    );
    // An endpoint subnet of another VCN, and one that does not exist.
    assert_eq!(refused(Api::cluster_body(&vcn, &other_subnet, false)), (400, "InvalidParameter".into()));
    assert_eq!(
        refused(Api::cluster_body(&vcn, "ocid1.subnet.oc1.emulator.00000000000000009999", false)),
        (404, "NotAuthorizedOrNotFound".into())
    );
    // A public endpoint in a private subnet.
    assert_eq!(refused(Api::cluster_body(&vcn, &subnet, true)), (400, "InvalidParameter".into()));
    // Kubernetes versions OKE does not offer.
    for version in ["v1.29.1", "v1.35.0", "1.33.1", "v1.33"] {
        let mut body = Api::cluster_body(&vcn, &subnet, false);
        body["kubernetesVersion"] = json!(version);
        assert_eq!(refused(body), (400, "InvalidParameter".into()), "{version}");
    }
    // Required fields (the judge, when on, refuses first, with the same code).
    let mut body = Api::cluster_body(&vcn, &subnet, false);
    body.as_object_mut().unwrap().remove("kubernetesVersion");
    assert_eq!(api.probe("/20180222/clusters", body).code(), (400, "MissingParameter".into()));
    let mut body = Api::cluster_body(&vcn, &subnet, false);
    body["nodeShape"] = json!("VM.Standard.E4.Flex");
    assert_eq!(api.probe("/20180222/clusters", body).code(), (400, "InvalidParameter".into()));
    let mut body = Api::cluster_body(&vcn, &subnet, false);
    body["type"] = json!("PREMIUM_CLUSTER");
    assert_eq!(api.probe("/20180222/clusters", body).code(), (400, "InvalidParameter".into()));
    // Nothing was made.
    assert!(api.listed("").is_empty());
    assert_eq!(api.admin("GET", "inventory", None)["resources"]["containerengine"]["clusters"], json!([]));
}

#[test]
fn a_public_cluster_faults_and_the_admin_api() {
    let api = Api::start();
    let vcn = api.vcn("10.0.0.0/16");
    let subnet = api.subnet(&vcn, "10.0.2.0/24", true);
    let mut body = Api::cluster_body(&vcn, &subnet, true);
    body["type"] = json!("ENHANCED_CLUSTER");
    body["clusterPodNetworkOptions"] = json!([{"cniType": "OCI_VCN_IP_NATIVE"}]);
    let (id, wr) = api.create_cluster(body);
    api.wait(&wr);
    let cluster = api.cluster(&id);
    let public = cluster["endpoints"]["publicEndpoint"].as_str().unwrap().to_owned();
    assert_eq!(cluster["endpoints"]["kubernetes"], public.as_str());
    assert!(in_block(cluster["endpoints"]["privateEndpoint"].as_str().unwrap().rsplit_once(':').unwrap().0, "10.0.2.0/24"));
    assert_eq!(
        (cluster["type"].as_str(), cluster["clusterPodNetworkOptions"][0]["cniType"].as_str()),
        (Some("ENHANCED_CLUSTER"), Some("OCI_VCN_IP_NATIVE"))
    );
    let kubeconfig = api.kubeconfig(&id, "PUBLIC_ENDPOINT");
    assert_eq!(kubeconfig_value(&kubeconfig.text, "server"), format!("https://{public}"));

    // A cluster without endpointConfig has only OKE's legacy public endpoint, by hostname.
    let mut body = Api::cluster_body(&vcn, &subnet, false);
    body.as_object_mut().unwrap().remove("endpointConfig");
    body["name"] = json!("legacy");
    let (legacy, wr) = api.create_cluster(body);
    api.wait(&wr);
    let endpoints = api.cluster(&legacy)["endpoints"].clone();
    let host = endpoints["kubernetes"].as_str().unwrap();
    assert!(host.ends_with(".us-ashburn-1.clusters.oci.oraclecloud.com:6443"), "{endpoints}");
    assert!(endpoints.get("privateEndpoint").is_none(), "{endpoints}");
    assert_eq!(api.kubeconfig(&legacy, "PRIVATE_ENDPOINT").code(), (400, "InvalidParameter".into()));
    let answer = api.post(&format!("/20180222/clusters/{legacy}/kubeconfig/content"), json!({}));
    assert_eq!(kubeconfig_value(&answer.text, "server"), format!("https://{host}"));
    assert_eq!(api.delete(&format!("/20180222/clusters/{legacy}")).status, 202);

    // A throttled GetCluster: OCI's 429, without Retry-After; the next call is served.
    api.admin("DELETE", "counters", None);
    api.admin("POST", "faults", Some(json!({"service": "containerengine", "operation": "GetCluster", "kind": "throttle", "times": 1})));
    let throttled = api.get(&format!("/20180222/clusters/{id}"));
    assert_eq!(throttled.code(), (429, "TooManyRequests".into()));
    assert!(throttled.header("retry-after").is_none());
    assert_eq!(api.cluster(&id)["lifecycleState"], "ACTIVE");
    let counters = api.admin("GET", "counters", None);
    assert_eq!(counters["counters"]["containerengine:GetCluster"], 2, "{counters}");

    // An operation error on CreateCluster: accepted, and the work request fails with nothing made.
    api.admin(
        "POST",
        "faults",
        Some(json!({"service": "containerengine", "operation": "CreateCluster", "kind": "operation_error", "times": 1})),
    );
    let mut body = Api::cluster_body(&vcn, &subnet, false);
    body["name"] = json!("doomed");
    let (doomed, wr) = api.create_cluster(body);
    let (done, _) = api.wait(&wr);
    assert_eq!(done["status"], "FAILED");
    assert_eq!(done["resources"][0]["actionType"], "FAILED");
    let errors = api.get(&format!("/20180222/workRequests/{wr}/errors?compartmentId={COMPARTMENT}"));
    assert_eq!(errors.status, 200, "{}", errors.text);
    assert_eq!(errors.json().as_array().map(Vec::len), Some(1), "{}", errors.text);
    assert_eq!(api.cluster(&doomed)["lifecycleState"], "FAILED");
    assert_eq!(api.kubeconfig(&doomed, "PRIVATE_ENDPOINT").code(), (409, "IncorrectState".into()));
    let inventory = api.admin("GET", "inventory", None);
    assert_eq!(inventory["resources"]["containerengine"]["clusters"], json!([id]), "{inventory}");

    // An operation error on DeleteCluster: the work request fails and the cluster stays ACTIVE.
    api.admin(
        "POST",
        "faults",
        Some(json!({"service": "containerengine", "operation": "DeleteCluster", "kind": "operation_error", "times": 1})),
    );
    let deleted = api.delete(&format!("/20180222/clusters/{id}"));
    assert_eq!(deleted.status, 202);
    let (done, _) = api.wait(&deleted.header("opc-work-request-id").unwrap());
    assert_eq!(done["status"], "FAILED");
    assert_eq!(api.cluster(&id)["lifecycleState"], "ACTIVE");

    // A lost answer: the cluster is made, and the SDK's retry with the same opc-retry-token gets the first answer.
    api.admin(
        "POST",
        "faults",
        Some(json!({"service": "containerengine", "operation": "CreateCluster", "kind": "answer_lost", "times": 1})),
    );
    let mut body = Api::cluster_body(&vcn, &subnet, false);
    body["name"] = json!("retried");
    let token = [("opc-retry-token", "retried-1")];
    let lost = api.call("POST", "/20180222/clusters", Some(body.clone()), &token);
    assert_eq!(lost.code(), (500, "InternalError".into()));
    let again = api.call("POST", "/20180222/clusters", Some(body), &token);
    assert_eq!(again.status, 202, "{}", again.text);
    assert_eq!(api.listed("&name=retried").len(), 1);

    // A server error and a not-found on the other operations.
    api.admin(
        "POST",
        "faults",
        Some(json!({"service": "containerengine", "operation": "ListClusters", "kind": "server_error", "times": 1})),
    );
    assert_eq!(api.get(&format!("/20180222/clusters?compartmentId={COMPARTMENT}")).status, 500);
    api.admin(
        "POST",
        "faults",
        Some(json!({"service": "containerengine", "operation": "CreateKubeconfig", "kind": "not_found", "times": 1})),
    );
    assert_eq!(api.kubeconfig(&id, "PUBLIC_ENDPOINT").code(), (404, "NotAuthorizedOrNotFound".into()));

    // Reset forgets the clusters and their work requests (and keeps the API keys).
    api.admin("POST", "reset", None);
    assert_eq!(api.get(&format!("/20180222/clusters/{id}")).code(), (404, "NotAuthorizedOrNotFound".into()));
    assert_eq!(api.get(&format!("/20180222/workRequests/{wr}")).code(), (404, "NotAuthorizedOrNotFound".into()));
    assert!(api.listed("&lifecycleState=FAILED").is_empty());
    assert_eq!(api.admin("GET", "inventory", None)["empty"], true);
}
