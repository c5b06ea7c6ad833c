//! Container Engine for Kubernetes (OKE, `/20180222`) on the OCI emulator's port: the subset a provider needs to
//! join self-managed worker nodes to an existing cluster. CreateCluster and DeleteCluster answer 202 with an
//! `opc-work-request-id` (OKE's own work requests, `CLUSTER_CREATE` / `CLUSTER_DELETE`, apart from Core's);
//! GetCluster (with an `etag`), ListClusters (a bare array of ClusterSummary; DELETED clusters only when asked
//! for by `lifecycleState`), CreateKubeconfig (the kubeconfig YAML as text), GetWorkRequest and its errors.
//!
//! A cluster lives in the Core store beside the VCN it is in: CREATING, then ACTIVE after a step (FAILED when
//! an `operation_error` fault hit its create), DELETING, then DELETED (still answered by GetCluster, never
//! listed, and never in the inventory). Its OCID names the region by its key (`ocid1.cluster.oc1.iad.…`; the
//! emulator is `us-ashburn-1`). A VCN-native cluster (one with `endpointConfig`) has a private endpoint at an
//! address of its endpoint subnet (`10.0.1.x:6443`), a public one when `isPublicIpEnabled`, a VCN hostname
//! endpoint when its subnet and VCN have DNS labels, and `kubernetes` naming the public endpoint if it has
//! one, else the private one; a cluster without `endpointConfig` has only OKE's legacy public `kubernetes`
//! endpoint. Each cluster has a certificate authority of its own, made at create time and never changed.
//!
//! What OKE refuses is refused: a `vcnId` that is not a VCN's OCID (400 InvalidParameter) or names no VCN (404
//! NotAuthorizedOrNotFound), an endpoint subnet or security group outside that VCN, a public endpoint in a
//! subnet that prohibits public IPs, a Kubernetes version other than `v1.<minor>.<patch>` with a minor of 30 to
//! 34 (400), a kubeconfig for an endpoint the cluster does not have (400) or for a cluster not ACTIVE (409), a
//! delete of a cluster already DELETING (409 IncorrectState); VCNs, subnets and security groups a live cluster
//! uses cannot be deleted (409 Conflict, through Core's dependants).

use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::{
    OKE, Reply, Req, Store, Stored, WorkRequest, as_model, check_if_match, etag, existing, invalid, json_body, listing, missing,
    now_rfc3339, ocid, percent_decode, private_ip, raw_view, require, set_state, state_of, text, work_request_status,
};

/// The kind OKE clusters are stored under (and their OCIDs' resource type).
pub(super) const CLUSTER: &str = "cluster";
/// The emulator's region, as the kubeconfig's `oci ce cluster generate-token --region` names it, and its key,
/// as OKE's OCIDs carry it.
pub(super) const REGION: &str = "us-ashburn-1";
pub(super) const REGION_KEY: &str = "iad";
/// OKE's work requests' OCID resource type.
const WORK_REQUEST: &str = "clustersworkrequest";
/// The Kubernetes API server's port on every endpoint.
const PORT: u16 = 6443;
/// The Kubernetes minor versions OKE offers (`v1.30.x` to `v1.34.x`).
const MINORS: std::ops::RangeInclusive<u32> = 30..=34;
/// The fields of CreateClusterDetails (the `oci` SDK's `attribute_map`).
const CREATE_FIELDS: [&str; 12] = [
    "name",
    "compartmentId",
    "endpointConfig",
    "vcnId",
    "kubernetesVersion",
    "kmsKeyId",
    "freeformTags",
    "definedTags",
    "options",
    "imagePolicyConfig",
    "clusterPodNetworkOptions",
    "type",
];
/// The fields of CreateClusterKubeconfigContentDetails.
const KUBECONFIG_FIELDS: [&str; 3] = ["tokenVersion", "expiration", "endpoint"];
/// ListClusters' `lifecycleState` values (Cluster's lifecycle states).
const STATES: [&str; 6] = ["CREATING", "ACTIVE", "FAILED", "DELETING", "DELETED", "UPDATING"];

/// Kinds whose OCIDs carry the region key rather than the emulator's placeholder.
pub(super) fn regional(kind: &str) -> bool {
    kind == CLUSTER || kind == WORK_REQUEST
}

/// Operations answered with a work request: an `operation_error` fault fails the work request, not the call.
pub(super) fn asynchronous(operation: &str) -> bool {
    matches!(operation, "CreateCluster" | "DeleteCluster")
}

/// OCI's operation name and the resource id of an OKE path (the segments after `/20180222`).
pub(super) fn route(method: &str, segs: &[&str]) -> Option<(&'static str, String)> {
    let (operation, id) = match (method, segs) {
        ("POST", ["clusters"]) => ("CreateCluster", ""),
        ("GET", ["clusters"]) => ("ListClusters", ""),
        ("GET", ["clusters", id]) => ("GetCluster", *id),
        ("DELETE", ["clusters", id]) => ("DeleteCluster", *id),
        ("POST", ["clusters", id, "kubeconfig", "content"]) => ("CreateKubeconfig", *id),
        ("GET", ["workRequests", id]) => ("GetWorkRequest", *id),
        ("GET", ["workRequests", id, "errors"]) => ("ListWorkRequestErrors", *id),
        _ => return None,
    };
    Some((operation, id.to_owned()))
}

pub(super) fn handle(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    match req.route.operation.as_str() {
        "CreateCluster" => create_cluster(store, req),
        "ListClusters" => list_clusters(store, req),
        "GetCluster" => get_cluster(store, req),
        "DeleteCluster" => delete_cluster(store, req),
        "CreateKubeconfig" => create_kubeconfig(store, req),
        "GetWorkRequest" => get_work_request(store, req),
        _ => list_work_request_errors(store, req),
    }
}

/// `v1.<minor>.<patch>` with a minor OKE offers.
fn check_version(version: &str) -> Result<(), Reply> {
    let parts: Option<(u32, u32)> = version
        .strip_prefix("v1.")
        .and_then(|rest| rest.split_once('.'))
        .filter(|(minor, patch)| [minor, patch].iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .and_then(|(minor, patch)| Some((minor.parse().ok()?, patch.parse().ok()?)));
    match parts {
        Some((minor, _)) if MINORS.contains(&minor) => Ok(()),
        _ => Err(invalid(format!(
            "Invalid kubernetesVersion {version:?}: supported versions are v1.{}.x to v1.{}.x (such as v1.33.1).",
            MINORS.start(),
            MINORS.end()
        ))),
    }
}

/// The user OCID of the signing key (`keyId="<tenancy>/<user>/<fingerprint>"`), as OKE records who acted.
fn caller(req: &Req) -> String {
    let auth = req.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    auth.split("keyId=\"").nth(1).and_then(|rest| rest.split('/').nth(1)).unwrap_or_default().to_owned()
}

/// A cluster's short name, `c` and the last characters of its OCID (`c0000000012`), as OKE names its
/// kubeconfig's cluster, user and context and its endpoints' hostnames.
fn short(id: &str) -> String {
    format!("c{}", &id[id.len().saturating_sub(10)..])
}

/// A public address for a cluster's public endpoint (in a range OCI's Ashburn region uses).
fn public_ip(n: u64) -> String {
    format!("129.213.{}.{}", (n >> 8) % 256, n % 254 + 1)
}

/// The cluster's certificate authority: a self-signed CA certificate (PEM), valid from the start of `today`
/// (`YYYY-MM-DD...`) for five years.
fn certificate_authority(name: &str, today: &str) -> Result<String, Reply> {
    let failed = |e: rcgen::Error| Reply::error(500, "InternalError", format!("the emulator could not make a cluster CA: {e}"));
    let number = |r: std::ops::Range<usize>| today.get(r).and_then(|s| s.parse::<i32>().ok()).unwrap_or(1);
    let (year, month, day) = (number(0..4), number(5..7) as u8, number(8..10) as u8);
    // Five years on from 29 February is 28 February.
    let later_day = if (month, day) == (2, 29) { 28 } else { day };
    let key = rcgen::KeyPair::generate().map_err(failed)?;
    let mut params = rcgen::CertificateParams::default();
    let mut subject = rcgen::DistinguishedName::new();
    subject.push(rcgen::DnType::CountryName, "US");
    subject.push(rcgen::DnType::OrganizationName, "Oracle");
    subject.push(rcgen::DnType::OrganizationalUnitName, "Container Engine for Kubernetes");
    subject.push(rcgen::DnType::CommonName, format!("cluster-{name}"));
    params.distinguished_name = subject;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages =
        vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign, rcgen::KeyUsagePurpose::DigitalSignature];
    params.not_before = rcgen::date_time_ymd(year, month, day);
    params.not_after = rcgen::date_time_ymd(year + 5, month, later_day);
    Ok(params.self_signed(&key).map_err(failed)?.pem())
}

/// Fills in what OKE answers for options a create left out.
fn options_with_defaults(given: Option<&Value>) -> Value {
    let mut options = given.filter(|o| o.is_object()).cloned().unwrap_or_else(|| json!({}));
    let network = &mut options["kubernetesNetworkConfig"];
    if !network.is_object() {
        *network = json!({});
    }
    for (field, default) in [("podsCidr", "10.244.0.0/16"), ("servicesCidr", "10.96.0.0/16")] {
        if text(network, &format!("/{field}")).is_none() {
            network[field] = json!(default);
        }
    }
    let defaults = [
        ("serviceLbSubnetIds", json!([])),
        ("ipFamilies", json!(["IPv4"])),
        ("addOns", json!({"isKubernetesDashboardEnabled": false, "isTillerEnabled": false})),
        ("admissionControllerOptions", json!({"isPodSecurityPolicyEnabled": false})),
    ];
    for (field, default) in defaults {
        if options[field].is_null() {
            options[field] = default;
        }
    }
    options
}

/// A new OKE work request for one cluster, started at `started` (the instant the cluster's state changed, so
/// that the work request is never done before the cluster's state shows it).
fn new_work_request(
    store: &mut Store,
    operation: &str,
    compartment: &str,
    cluster: &str,
    action: &'static str,
    failure: Option<(String, String)>,
    started: Instant,
) -> String {
    let id = ocid(store, WORK_REQUEST);
    let wr = WorkRequest {
        version: OKE,
        operation: operation.to_owned(),
        compartment: compartment.to_owned(),
        resources: vec![(CLUSTER, cluster.to_owned(), action)],
        started,
        accepted: now_rfc3339(),
        failure,
    };
    store.work_requests.insert(id.clone(), wr);
    id
}

fn create_cluster(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let body = json_body(req.body)?;
    if let Some(field) = body.as_object().into_iter().flat_map(|m| m.keys()).find(|k| !CREATE_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!("Unrecognized field '{field}' in CreateClusterDetails.")));
    }
    let name = require(&body, "/name")?;
    let compartment = require(&body, "/compartmentId")?;
    let vcn_id = require(&body, "/vcnId")?;
    let version = require(&body, "/kubernetesVersion")?;
    check_version(&version)?;
    let cluster_type = text(&body, "/type").unwrap_or("BASIC_CLUSTER").to_owned();
    if !matches!(cluster_type.as_str(), "BASIC_CLUSTER" | "ENHANCED_CLUSTER") {
        return Err(invalid(format!("Invalid type {cluster_type:?}: must be BASIC_CLUSTER or ENHANCED_CLUSTER.")));
    }
    if !vcn_id.starts_with("ocid1.vcn.") {
        return Err(invalid(format!("Invalid vcnId {vcn_id:?}: it is not the OCID of a VCN.")));
    }
    let vcn_dns = text(&existing(store, &vcn_id, "vcn")?.value, "/dnsLabel").map(str::to_owned);
    let in_vcn = |kind: &str, id: &str, what: &str| -> Result<Member, Reply> {
        let s = existing(store, id, kind)?;
        if s.value["vcnId"] != vcn_id.as_str() {
            return Err(invalid(format!("The {what} {id} is not in VCN {vcn_id}.")));
        }
        Ok(Member { dns: text(&s.value, "/dnsLabel").map(str::to_owned), prohibits_public: s.value["prohibitPublicIpOnVnic"] == true })
    };
    // The endpoint: a subnet of the VCN (and security groups of it), or none at all for a legacy cluster.
    let config = body.get("endpointConfig").filter(|c| !c.is_null()).cloned();
    let mut endpoint_subnet = None;
    if let Some(config) = &config {
        if !config.is_object() {
            return Err(invalid("endpointConfig must be an object."));
        }
        let subnet = text(config, "/subnetId").ok_or_else(|| missing("endpointConfig.subnetId"))?.to_owned();
        let found = in_vcn("subnet", &subnet, "endpoint subnet")?;
        let public = config["isPublicIpEnabled"] == true;
        if public && found.prohibits_public {
            return Err(invalid(format!(
                "endpointConfig.isPublicIpEnabled is true, but subnet {subnet} prohibits public IPs on its VNICs: use a public subnet."
            )));
        }
        for nsg in config["nsgIds"].as_array().into_iter().flatten() {
            in_vcn("networksecuritygroup", nsg.as_str().unwrap_or_default(), "network security group")?;
        }
        endpoint_subnet = Some((subnet, found.dns, public));
    }
    for lb in body["options"]["serviceLbSubnetIds"].as_array().into_iter().flatten() {
        in_vcn("subnet", lb.as_str().unwrap_or_default(), "service load balancer subnet")?;
    }
    let today = now_rfc3339();
    let id = ocid(store, CLUSTER);
    let n = store.next;
    let ca = certificate_authority(&short(&id), &today)?;
    let mut endpoints = json!({});
    match &endpoint_subnet {
        Some((subnet, subnet_dns, public)) => {
            let private = format!("{}:{PORT}", private_ip(store, subnet, n));
            endpoints["privateEndpoint"] = json!(private);
            endpoints["kubernetes"] = json!(private);
            if *public {
                let public = format!("{}:{PORT}", public_ip(n));
                endpoints["publicEndpoint"] = json!(public);
                endpoints["kubernetes"] = json!(public);
            }
            if let (Some(subnet_dns), Some(vcn_dns)) = (subnet_dns, &vcn_dns) {
                endpoints["vcnHostnameEndpoint"] = json!(format!("{}.{subnet_dns}.{vcn_dns}.oraclevcn.com:{PORT}", short(&id)));
            }
        }
        // OKE's legacy public endpoint, by hostname.
        None => endpoints["kubernetes"] = json!(format!("{}.{REGION}.clusters.oci.oraclecloud.com:{PORT}", short(&id))),
    }
    let changed = Instant::now();
    let failure = req
        .operation_error
        .then(|| ("InternalError".to_owned(), "The cluster could not be created: an internal error occurred.".to_owned()));
    let wr = new_work_request(store, "CLUSTER_CREATE", &compartment, &id, "CREATED", failure, changed);
    let expiry = format!("{}{}", today[..4].parse::<i32>().unwrap_or(2026) + 5, &today[4..]).replacen("-02-29T", "-02-28T", 1);
    let mut value = json!({
        "id": id, "name": name, "compartmentId": compartment, "vcnId": vcn_id, "kubernetesVersion": version,
        "lifecycleState": "CREATING", "endpoints": endpoints, "type": cluster_type,
        "metadata": {"timeCreated": today, "createdByUserId": caller(req), "createdByWorkRequestId": wr,
                     "timeCredentialExpiration": expiry},
        "options": options_with_defaults(body.get("options")),
        "clusterPodNetworkOptions": body.get("clusterPodNetworkOptions").filter(|o| o.is_array()).cloned()
            .unwrap_or_else(|| json!([{"cniType": "FLANNEL_OVERLAY"}])),
        "imagePolicyConfig": body.get("imagePolicyConfig").filter(|o| o.is_object()).cloned()
            .unwrap_or_else(|| json!({"isPolicyEnabled": false})),
        "freeformTags": body.get("freeformTags").filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({})),
        "definedTags": body.get("definedTags").filter(|t| t.is_object()).cloned().unwrap_or_else(|| json!({})),
        "systemTags": {}, "availableKubernetesUpgrades": [], "_ca": ca,
    });
    if let Some(config) = config {
        value["endpointConfig"] = config;
    }
    if let Some(key) = text(&body, "/kmsKeyId") {
        value["kmsKeyId"] = json!(key);
    }
    if req.operation_error {
        value["_failed"] = json!(true);
    }
    store.resources.insert(id, Stored { kind: CLUSTER, value, changed, version: 1 });
    Ok(Reply::empty(202).header("opc-work-request-id", wr))
}

/// What `in_vcn` learns of a subnet or security group.
struct Member {
    dns: Option<String>,
    prohibits_public: bool,
}

/// A cluster as OKE shows it now (`model` is Cluster or ClusterSummary).
fn shown(s: &Stored, model: &str) -> Value {
    let mut v = raw_view(s);
    if v["lifecycleState"] == "FAILED" {
        v["lifecycleDetails"] = json!("The cluster could not be created: an internal error occurred.");
    }
    as_model(v, model)
}

fn cluster<'a>(store: &'a Store, id: &str) -> Result<&'a Stored, Reply> {
    store.resources.get(id).filter(|s| s.kind == CLUSTER).ok_or_else(Reply::not_found)
}

fn get_cluster(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let s = cluster(store, &req.route.id)?;
    Ok(Reply::json(200, shown(s, "Cluster")).header("etag", etag(s)))
}

/// ListClusters: by compartment (required), name and any number of `lifecycleState`s; DELETED clusters only
/// when that state is asked for.
fn list_clusters(store: &Store, req: &Req) -> Result<Reply, Reply> {
    if !req.query.contains_key("compartmentId") {
        return Err(missing("compartmentId"));
    }
    let states: Vec<String> = req
        .raw_query
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| percent_decode(k) == "lifecycleState")
        .map(|(_, v)| percent_decode(v))
        .collect();
    if let Some(bad) = states.iter().find(|s| !STATES.contains(&s.as_str())) {
        return Err(invalid(format!("Invalid lifecycleState {bad:?}: must be one of {}.", STATES.join(", "))));
    }
    for (param, allowed) in [("sortBy", &["ID", "NAME", "TIME_CREATED"][..]), ("sortOrder", &["ASC", "DESC"][..])] {
        if let Some(v) = req.query.get(param).filter(|v| !allowed.contains(&v.as_str())) {
            return Err(invalid(format!("Invalid {param} {v:?}: must be one of {}.", allowed.join(", "))));
        }
    }
    let mut query = req.query.clone();
    query.remove("lifecycleState");
    // Ids carry a zero-padded counter: id order is creation order.
    let items = store
        .resources
        .iter()
        .filter(|(_, s)| s.kind == CLUSTER)
        .filter(|(_, s)| {
            let state = state_of(s);
            if states.is_empty() { state != "DELETED" } else { states.contains(&state) }
        })
        .map(|(id, s)| (id.clone(), shown(s, "ClusterSummary")))
        .collect();
    listing(items, &query, false)
}

fn delete_cluster(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.clone();
    let s = cluster(store, &id)?;
    check_if_match(req.headers, s)?;
    let state = state_of(s);
    match state.as_str() {
        "DELETED" => return Err(Reply::not_found()),
        "DELETING" => return Err(Reply::error(409, "IncorrectState", format!("Cluster {id} is already DELETING."))),
        _ => {}
    }
    let compartment = s.value["compartmentId"].as_str().unwrap_or_default().to_owned();
    let now = Instant::now();
    let failure = req
        .operation_error
        .then(|| ("InternalError".to_owned(), "The cluster could not be deleted: an internal error occurred.".to_owned()));
    let wr = new_work_request(store, "CLUSTER_DELETE", &compartment, &id, "DELETED", failure, now);
    // An operation error fails the work request with the cluster as it was.
    if !req.operation_error {
        let user = caller(req);
        let s = store.resources.get_mut(&id).expect("found above");
        set_state(s, "DELETING");
        s.changed = now;
        let metadata = &mut s.value["metadata"];
        metadata["timeDeleted"] = json!(now_rfc3339());
        metadata["deletedByUserId"] = json!(user);
        metadata["deletedByWorkRequestId"] = json!(wr);
    }
    Ok(Reply::empty(202).header("opc-work-request-id", wr))
}

/// CreateKubeconfig: the kubeconfig (YAML, as text) for one of the cluster's endpoints; the user's
/// credentials come from `oci ce cluster generate-token`, as OKE's token version 2.0.0 has it.
fn create_kubeconfig(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    let s = cluster(store, id)?;
    // The body is optional; its fields are checked here, as the published definition's judge cannot (an
    // optional body is not in the extracted definitions).
    let body = if req.body.iter().all(u8::is_ascii_whitespace) { json!({}) } else { json_body(req.body)? };
    if let Some(field) = body.as_object().into_iter().flat_map(|m| m.keys()).find(|k| !KUBECONFIG_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!("Unrecognized field '{field}' in CreateClusterKubeconfigContentDetails.")));
    }
    match &body["tokenVersion"] {
        Value::Null => {}
        Value::String(v) if v == "2.0.0" => {}
        other => return Err(invalid(format!("Invalid tokenVersion {other}: the supported token version is \"2.0.0\"."))),
    }
    if !(body["expiration"].is_null() || body["expiration"].is_i64()) {
        return Err(invalid("expiration must be an integer."));
    }
    let endpoint = match &body["endpoint"] {
        Value::Null => "LEGACY_KUBERNETES",
        Value::String(e) => e.as_str(),
        other => return Err(invalid(format!("Invalid endpoint {other}."))),
    };
    let field = match endpoint {
        "LEGACY_KUBERNETES" => "kubernetes",
        "PUBLIC_ENDPOINT" => "publicEndpoint",
        "PRIVATE_ENDPOINT" => "privateEndpoint",
        "VCN_HOSTNAME" => "vcnHostnameEndpoint",
        other => {
            return Err(invalid(format!(
                "Invalid endpoint {other:?}: must be one of LEGACY_KUBERNETES, PUBLIC_ENDPOINT, PRIVATE_ENDPOINT, VCN_HOSTNAME."
            )));
        }
    };
    let state = state_of(s);
    match state.as_str() {
        "ACTIVE" | "UPDATING" => {}
        "DELETED" => return Err(Reply::not_found()),
        _ => return Err(Reply::error(409, "IncorrectState", format!("Cluster {id} is {state}; a kubeconfig needs it ACTIVE."))),
    }
    let server = s.value["endpoints"][field].as_str().ok_or_else(|| invalid(format!("Cluster {id} has no {endpoint} endpoint.")))?;
    let ca = STANDARD.encode(s.value["_ca"].as_str().unwrap_or_default());
    let name = short(id);
    let yaml = format!(
        "---\n\
         apiVersion: v1\n\
         kind: \"\"\n\
         clusters:\n\
         - name: \"cluster-{name}\"\n\
         \x20 cluster:\n\
         \x20   server: \"https://{server}\"\n\
         \x20   certificate-authority-data: \"{ca}\"\n\
         users:\n\
         - name: \"user-{name}\"\n\
         \x20 user:\n\
         \x20   exec:\n\
         \x20     apiVersion: client.authentication.k8s.io/v1beta1\n\
         \x20     args:\n\
         \x20     - \"ce\"\n\
         \x20     - \"cluster\"\n\
         \x20     - \"generate-token\"\n\
         \x20     - \"--cluster-id\"\n\
         \x20     - \"{id}\"\n\
         \x20     - \"--region\"\n\
         \x20     - \"{REGION}\"\n\
         \x20     command: oci\n\
         \x20     env: []\n\
         contexts:\n\
         - name: \"context-{name}\"\n\
         \x20 context:\n\
         \x20   cluster: \"cluster-{name}\"\n\
         \x20   user: \"user-{name}\"\n\
         current-context: \"context-{name}\"\n"
    );
    Ok(Reply::text(200, "application/x-yaml", yaml))
}

fn work_request<'a>(store: &'a Store, req: &Req) -> Result<&'a WorkRequest, Reply> {
    store.work_requests.get(&req.route.id).filter(|w| w.version == OKE).ok_or_else(Reply::not_found)
}

/// GetWorkRequest: OKE's WorkRequest (no percentComplete; resources by entity type `cluster`).
fn get_work_request(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let wr = work_request(store, req)?;
    let status = work_request_status(wr);
    let resources: Vec<Value> = wr
        .resources
        .iter()
        .map(|(entity, identifier, action)| {
            let action = match status {
                "SUCCEEDED" => *action,
                "FAILED" => "FAILED",
                _ => "IN_PROGRESS",
            };
            json!({"actionType": action, "entityType": entity, "identifier": identifier,
                   "entityUri": format!("/{OKE}/clusters/{identifier}")})
        })
        .collect();
    let mut v = json!({
        "id": req.route.id, "operationType": wr.operation, "status": status, "compartmentId": wr.compartment,
        "resources": resources, "timeAccepted": wr.accepted,
    });
    if status != "ACCEPTED" {
        v["timeStarted"] = json!(wr.accepted);
    }
    if matches!(status, "SUCCEEDED" | "FAILED") {
        v["timeFinished"] = json!(wr.accepted);
    }
    Ok(Reply::json(200, v))
}

/// ListWorkRequestErrors: a bare array of WorkRequestError; `compartmentId` is required.
fn list_work_request_errors(store: &Store, req: &Req) -> Result<Reply, Reply> {
    if !req.query.contains_key("compartmentId") {
        return Err(missing("compartmentId"));
    }
    let wr = work_request(store, req)?;
    let errors: Vec<Value> = match (&wr.failure, work_request_status(wr)) {
        (Some((code, message)), "FAILED") => vec![json!({"code": code, "message": message, "timestamp": wr.accepted})],
        _ => Vec::new(),
    };
    Ok(Reply::json(200, Value::Array(errors)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_versions_are_v1_minor_patch_within_the_offered_minors() {
        for good in ["v1.30.1", "v1.33.1", "v1.34.0", "v1.31.10"] {
            assert!(check_version(good).is_ok(), "{good}");
        }
        for bad in ["1.33.1", "v1.29.1", "v1.35.0", "v1.33", "v2.33.1", "v1.33.x", "v1..1", "v1.33.1-oke"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cluster_ca_is_a_pem_certificate_even_on_a_leap_day() {
        let pem = certificate_authority("c0000000001", "2028-02-29T12:00:00.000Z").unwrap_or_else(|r| panic!("{:?}", r.body));
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n") && pem.trim_end().ends_with("-----END CERTIFICATE-----"), "{pem}");
    }

    #[test]
    fn routes_name_okes_operations() {
        assert_eq!(route("POST", &["clusters", "c", "kubeconfig", "content"]), Some(("CreateKubeconfig", "c".to_owned())));
        assert_eq!(route("GET", &["workRequests", "w"]), Some(("GetWorkRequest", "w".to_owned())));
        assert_eq!(route("PUT", &["clusters", "c"]), None);
        assert_eq!(route("GET", &["nodePools"]), None);
    }
}
