//! OCI emulator: the Core API subset the provider uses (`/20160918`: VCNs, subnets, network security groups and
//! their rules, compute clusters, instances, instance configurations, cluster networks with their instance pools,
//! GPU memory fabrics (seeded through `POST /_admin/gpu-memory-fabrics`, as the API cannot make one) and the GPU
//! memory clusters that launch GB200/GB300 instances on them, work requests) and File Storage with Lustre
//! (`/20250228`: Lustre file systems, Object Storage links and their import sync jobs, work requests) and the Limits
//! service's GetResourceAvailability (`/20190729`, Compute GPU limits per availability domain, set through `POST
//! /_admin/quota`; usage from the live instances) and Container Engine for Kubernetes (`/20180222`, in `oke.rs`:
//! clusters in a Core VCN, their kubeconfig and OKE's own work requests), OCI Vault (`oci_vault.rs`: KMS vaults
//! and keys, secrets and secret bundles) and the Identity objects that decide what an instance principal may
//! read (`oci_identity.rs`: compartments, dynamic groups, policies, the federation endpoint) in memory on 127.0.0.1. Host capacity per
//! availability domain and shape (`POST /_admin/capacity`) refuses a LaunchInstance beyond it with OCI's 500 "Out of
//! host capacity." and gives a cluster network's pool or a GPU memory cluster what fits, failing its work request.
//! Every request's HTTP signature is verified against the API public keys registered through `POST /_admin/keys`
//! (`{"key_id": "<tenancy>/<user>/<fingerprint>", "public_key_pem": ...}`), or, for an instance principal's
//! `keyId="ST$<token>"`, against the session key its token was handed out for; a missing or bad signature gets
//! OCI's real 401 `NotAuthenticated` answer.
//!
//! It answers as OCI does where the provider's client can tell: camelCase JSON, `{"code", "message"}` errors with
//! OCI's status codes (400 `MissingParameter`/`InvalidParameter`, 404 `NotAuthorizedOrNotFound`, 409 `Conflict` for
//! a delete with dependants and `IncorrectState`, 412 `NoEtagMatch`), lifecycle states that advance with age
//! (`SETTLE` seconds per step), Core lists as bare arrays and Lustre lists as `{"items"}`, paging with
//! `limit`/`page` and `opc-next-page`, `PUT` updates, `opc-retry-token` replays, work requests with their errors.
//! Answers carry only the fields of OCI's response models (the `oci` SDK's), lists answer with the summary models
//! where OCI does (InstanceSummary's `state` written as the service writes it, `Running`), and each has its own
//! `opc-request-id`; LaunchInstance refuses fields LaunchInstanceDetails lacks, rules are refused while a security
//! group is PROVISIONING, and a link's prefix must be `namespace:/bucket/...`. Faults come from the shared admin API
//! with service `core` (`/20160918`), `lustre` (`/20250228`), `limits` (`/20190729`) or `containerengine`
//! (`/20180222`) and OCI's operation names (an `operation_error` on OKE's CreateCluster or DeleteCluster fails its
//! work request, nothing done); a `capacity` fault on `CreateClusterNetwork` makes the cluster network's work
//! request fail ("Out of host capacity.") instead of the call (so does one on a GPU memory cluster's create or
//! resize), and one on `StartImportFromObject` makes the import's sync job end FAILED.
//!
//! Day 2: instances take InstanceAction (RESET, START, STOP, ... with the power states they go through), a
//! cluster network's pool takes DetachInstancePoolInstance and a new instance configuration, and the admin
//! API's out-of-band `impair` / `heal` set and clear what OCI reports of an instance in trouble (its
//! `lifecycleState`, `timeMaintenanceRebootDue`); nodes publish their self-check verdict themselves, in their
//! freeform tags (UpdateInstance).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::admin::{Admin, Emulated, FaultKind};

/// Container Engine for Kubernetes (`/20180222`): clusters, their kubeconfig and OKE's own work requests.
#[path = "oke.rs"]
mod oke;

/// Each instance's metadata service (`POST /_admin/metadata`).
#[path = "oci_imds.rs"]
mod imds;

/// Identity: compartments, dynamic groups, policies, instance principals and what they grant.
#[path = "oci_identity.rs"]
mod identity;

/// OCI Vault: KMS vaults and keys, secrets and secret bundles.
#[path = "oci_vault.rs"]
mod vault;

/// Seconds a lifecycle step (and a work request) takes.
const SETTLE: f64 = 0.3;
const CORE: &str = "20160918";
const LUSTRE: &str = "20250228";
/// The Limits service's resource availability (the `oci` SDK's LimitsClient: `/20190729/services/...`).
const LIMITS: &str = "20190729";
/// Container Engine for Kubernetes (the `oci` SDK's ContainerEngineClient: `/20180222/clusters/...`).
const OKE: &str = "20180222";
/// What a Compute GPU limit is when the admin API set none: generous, so that tests not about quota never
/// meet it.
const DEFAULT_LIMIT: u64 = 100_000;
/// The Compute service limits GetResourceAvailability answers for, by the GPU shape series that count against
/// each (in GPUs, per availability domain; OCI's Compute Quotas reference names gpu-a10, gpu-h200, gpu-b200 and
/// gpu-mi300x; the others as the provider names them, see `src/clouds/oci/limits.rs`).
const GPU_LIMITS: [(&str, &str); 10] = [
    ("BM.GPU.H100.", "gpu-h100-count"),
    ("BM.GPU.H200.", "gpu-h200-count"),
    ("BM.GPU.B200.", "gpu-b200-count"),
    ("BM.GPU.B300.", "gpu-b300-count"),
    ("BM.GPU.MI300X.", "gpu-mi300x-count"),
    ("VM.GPU.A10.", "gpu-a10-count"),
    ("BM.GPU.A10.", "gpu-a10-count"),
    ("BM.GPU.L40S.", "gpu-l40s-count"),
    ("BM.GPU.GB200", "gpu-gb200-count"),
    ("BM.GPU.GB300.", "gpu-gb300-count"),
];
const MAX_PAGE: usize = 1000;
/// The kinds of a GPU memory fabric (an NVL72 rack's NVLink fabric, found, never made) and of a GPU memory
/// cluster (the instances launched on one).
const FABRIC: &str = "computegpumemoryfabric";
const GMC: &str = "computegpumemorycluster";
/// Hosts of one GPU memory fabric: an NVL72 rack of 18 (OCI's GPU memory fabric docs: "up to 18 hosts").
const FABRIC_HOSTS: i64 = 18;
/// The shapes a GPU memory cluster launches: GB200 and GB300 (OCI's GPU memory fabric docs name BM.GPU.GB200.4
/// and BM.GPU.GB300.4; oracle-quickstart/oci-hpc names the GB200 -v2 and -v3 variants).
const GMC_SHAPES: [&str; 4] = ["BM.GPU.GB200.4", "BM.GPU.GB200-v2.4", "BM.GPU.GB200-v3.4", "BM.GPU.GB300.4"];

/// A collection served under an API version.
struct Collection {
    path: &'static str,
    kind: &'static str,
    version: &'static str,
    /// The singular in operation names (`CreateVcn`) and messages.
    name: &'static str,
    plural: &'static str,
    /// Whether its list operation requires `compartmentId`.
    compartment_required: bool,
}

const COLLECTIONS: [Collection; 11] = [
    Collection { path: "vcns", kind: "vcn", version: CORE, name: "Vcn", plural: "Vcns", compartment_required: true },
    Collection { path: "subnets", kind: "subnet", version: CORE, name: "Subnet", plural: "Subnets", compartment_required: true },
    Collection {
        path: "networkSecurityGroups",
        kind: "networksecuritygroup",
        version: CORE,
        name: "NetworkSecurityGroup",
        plural: "NetworkSecurityGroups",
        compartment_required: false,
    },
    Collection {
        path: "computeClusters",
        kind: "computecluster",
        version: CORE,
        name: "ComputeCluster",
        plural: "ComputeClusters",
        compartment_required: true,
    },
    Collection { path: "instances", kind: "instance", version: CORE, name: "Instance", plural: "Instances", compartment_required: true },
    Collection {
        path: "instanceConfigurations",
        kind: "instanceconfiguration",
        version: CORE,
        name: "InstanceConfiguration",
        plural: "InstanceConfigurations",
        compartment_required: true,
    },
    Collection {
        path: "clusterNetworks",
        kind: "clusternetwork",
        version: CORE,
        name: "ClusterNetwork",
        plural: "ClusterNetworks",
        compartment_required: true,
    },
    // The rack's own GPU memory fabrics: no create or delete operation exists (they are seeded through
    // `POST /_admin/gpu-memory-fabrics`); get, list and update only.
    Collection {
        path: "computeGpuMemoryFabrics",
        kind: FABRIC,
        version: CORE,
        name: "ComputeGpuMemoryFabric",
        plural: "ComputeGpuMemoryFabrics",
        compartment_required: true,
    },
    Collection {
        path: "computeGpuMemoryClusters",
        kind: GMC,
        version: CORE,
        name: "ComputeGpuMemoryCluster",
        plural: "ComputeGpuMemoryClusters",
        compartment_required: true,
    },
    Collection {
        path: "lustreFileSystems",
        kind: "lustrefilesystem",
        version: LUSTRE,
        name: "LustreFileSystem",
        plural: "LustreFileSystems",
        compartment_required: false,
    },
    Collection {
        path: "objectStorageLinks",
        kind: "objectstoragelink",
        version: LUSTRE,
        name: "ObjectStorageLink",
        plural: "ObjectStorageLinks",
        compartment_required: false,
    },
];

fn collection_of(kind: &str) -> Option<&'static Collection> {
    COLLECTIONS.iter().find(|c| c.kind == kind)
}

/// A resource. Fields whose names start with `_` are the emulator's own bookkeeping and never shown.
struct Stored {
    kind: &'static str,
    value: Value,
    /// When the stored lifecycle state was entered; the viewed state advances from it.
    changed: Instant,
    /// Bumped on every change; part of the etag.
    version: u64,
}

struct WorkRequest {
    version: &'static str,
    operation: String,
    compartment: String,
    /// (entity type, identifier, action type once it succeeds).
    resources: Vec<(&'static str, String, &'static str)>,
    started: Instant,
    accepted: String,
    /// (code, message) it fails with.
    failure: Option<(String, String)>,
}

/// An import from Object Storage into a Lustre file system (`StartImportFromObject`).
struct SyncJob {
    link: String,
    started: Instant,
    accepted: String,
    /// Why it fails, if it is to.
    failure: Option<String>,
    value: Value,
}

/// An answer, kept whole so that an `opc-retry-token` replay gets exactly the same one.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: Option<Value>,
    /// A body that is not JSON: (content type, text), such as OKE's kubeconfig YAML.
    text: Option<(&'static str, String)>,
    headers: Vec<(&'static str, String)>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply { status, body: Some(body), text: None, headers: Vec::new() }
    }

    fn empty(status: u16) -> Reply {
        Reply { status, body: None, text: None, headers: Vec::new() }
    }

    fn text(status: u16, content_type: &'static str, text: String) -> Reply {
        Reply { status, body: None, text: Some((content_type, text)), headers: Vec::new() }
    }

    fn error(status: u16, code: &str, message: impl Into<String>) -> Reply {
        Reply::json(status, json!({"code": code, "message": message.into()}))
    }

    fn not_found() -> Reply {
        Reply::error(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = match (self.body, self.text) {
            (Some(body), _) => (status, axum::Json(body)).into_response(),
            (None, Some((content_type, text))) => (status, [(axum::http::header::CONTENT_TYPE, content_type)], text).into_response(),
            (None, None) => status.into_response(),
        };
        let headers = resp.headers_mut();
        static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(id) = HeaderValue::from_str(&format!("emulator-{}-{n:08}", std::process::id())) {
            headers.insert("opc-request-id", id);
        }
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
        resp
    }
}

#[derive(Default)]
struct Store {
    resources: BTreeMap<String, Stored>,
    /// Security rules per network security group.
    rules: BTreeMap<String, Vec<Value>>,
    keys: BTreeMap<String, Vec<u8>>,
    work_requests: BTreeMap<String, WorkRequest>,
    /// Object Storage link sync jobs, by id.
    sync_jobs: BTreeMap<String, SyncJob>,
    /// `opc-retry-token` (with the path it was sent to) -> the answer given.
    retries: BTreeMap<String, Reply>,
    /// Compute limits set through `POST /_admin/quota`: (limit name, availability domain) -> GPUs.
    quotas: BTreeMap<(String, String), u64>,
    /// Host capacity set through `POST /_admin/capacity`: (availability domain, shape) -> instances that may be
    /// live there at once.
    capacity: BTreeMap<(String, String), u64>,
    /// Identity's objects and the instance principals' certificates and tokens.
    identity: identity::Directory,
    /// Vaults, keys and secrets.
    vault: vault::Vaults,
    next: u64,
}

pub struct Oci {
    store: Mutex<Store>,
    pub admin: Admin,
    /// The instances' metadata services.
    metadata: crate::metadata::Listeners,
    /// Each vault's management endpoint, by vault OCID.
    vault_ports: Mutex<BTreeMap<String, u16>>,
}

pub struct Running {
    pub endpoint: String,
    pub addr: SocketAddr,
    pub emulator: Arc<Oci>,
}

pub async fn serve(bind: &str) -> std::io::Result<Running> {
    let emulator = Arc::new(Oci {
        store: Mutex::new(Store::default()),
        admin: Admin::default(),
        metadata: crate::metadata::Listeners::default(),
        vault_ports: Mutex::default(),
    });
    let addr = crate::admin::serve_http(axum::Router::new().fallback(handle).with_state(emulator.clone()), bind).await?;
    Ok(Running { endpoint: format!("http://{addr}"), addr, emulator })
}

fn unauthenticated() -> Reply {
    Reply::error(401, "NotAuthenticated", "The required information to complete authentication was not provided or was incorrect.")
}

/// Who a request is from, as its signature tells.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Caller {
    /// An API key registered through `POST /_admin/keys`: the tenancy's user, who may do everything.
    ApiKey,
    /// An instance principal (`keyId="ST$<token>"`): the instance the token was handed to.
    Instance(String),
}

/// The parts of a `Signature` authorization header.
struct Signature {
    key_id: String,
    /// The headers signed, in order.
    signed: Vec<String>,
    signature: Vec<u8>,
}

impl Signature {
    fn parse(headers: &HeaderMap) -> Result<Signature, String> {
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).ok_or("no authorization header")?;
        let params = auth.strip_prefix("Signature ").ok_or("not a Signature authorization")?;
        let field = |name: &str| {
            params.split(',').find_map(|p| p.trim().strip_prefix(&format!("{name}=\"")).map(|v| v.trim_end_matches('"').to_owned()))
        };
        let key_id = field("keyId").ok_or("no keyId")?;
        let names = field("headers").unwrap_or_else(|| "date".into());
        let signature = STANDARD.decode(field("signature").ok_or("no signature")?).map_err(|_| "signature is not base64")?;
        if field("algorithm").as_deref() != Some("rsa-sha256") {
            return Err("algorithm must be rsa-sha256".into());
        }
        Ok(Signature { key_id, signed: names.split(' ').map(str::to_owned).collect(), signature })
    }

    /// Checks that every header in `needed` was signed, the body's digest, and the signature with `key` (an
    /// RSA public key, DER).
    fn check(&self, key: &[u8], needed: &[&str], method: &str, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
        if let Some(missing) = needed.iter().find(|n| !self.signed.iter().any(|s| s == *n)) {
            return Err(format!("header {missing} is not signed"));
        }
        if self.signed.iter().any(|s| s == "x-content-sha256") {
            let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body);
            let sent = headers.get("x-content-sha256").and_then(|v| v.to_str().ok()).unwrap_or_default();
            if sent != STANDARD.encode(digest.as_ref()) {
                return Err("x-content-sha256 does not match the body".into());
            }
        }
        let target = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let lines: Vec<String> = self
            .signed
            .iter()
            .map(|name| match name.as_str() {
                "(request-target)" => format!("(request-target): {} {target}", method.to_ascii_lowercase()),
                other => format!("{other}: {}", headers.get(other).and_then(|v| v.to_str().ok()).unwrap_or_default()),
            })
            .collect();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key)
            .verify(lines.join("\n").as_bytes(), &self.signature)
            .map_err(|_| "signature does not verify".into())
    }
}

/// Checks the request's HTTP signature and says who sent it; the reason on failure goes to the emulator's log
/// only, as OCI gives callers no detail either. An API key's signature is checked against the keys registered
/// through the admin API, a security token's (`ST$<token>`) against the session key it was handed out for.
fn verify(store: &Store, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Caller, String> {
    let sig = Signature::parse(headers)?;
    let needed: &[&str] = match method.as_str() {
        "POST" | "PUT" | "PATCH" => &["date", "(request-target)", "host", "x-content-sha256", "content-type", "content-length"],
        _ => &["date", "(request-target)", "host"],
    };
    if let Some(token) = sig.key_id.strip_prefix("ST$") {
        let (instance, key) = identity::session(store, token)?;
        sig.check(key, needed, method.as_str(), uri, headers, body)?;
        return Ok(Caller::Instance(instance.to_owned()));
    }
    let key = store.keys.get(&sig.key_id).ok_or_else(|| format!("unknown keyId {}", sig.key_id))?;
    sig.check(key, needed, method.as_str(), uri, headers, body)?;
    Ok(Caller::ApiKey)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Action {
    Create,
    List,
    Get,
    Update,
    Delete,
    AddSecurityRules,
    ListSecurityRules,
    ListNetworkInstances,
    GetWorkRequest,
    ListWorkRequestErrors,
    ListImages,
    ListVnicAttachments,
    ListPrivateIps,
    StartImport,
    GetSyncJob,
    GetVnic,
    ListGpuMemoryClusterInstances,
    Power,
    DetachPoolInstance,
    GetResourceAvailability,
    CapacityReport,
    /// Container Engine for Kubernetes: `oke::handle` tells its operations apart by name.
    Oke,
    /// Identity's compartments, dynamic groups and policies: `identity::handle`, by name.
    Identity,
    /// KMS vaults and keys, Vault secrets and secret bundles: `vault::handle`, by name.
    Vault,
}

struct Route {
    action: Action,
    version: &'static str,
    /// None for work requests.
    collection: Option<&'static Collection>,
    /// The resource id; empty for collection-level calls.
    id: String,
    /// A sub-resource's id (a sync job's); empty otherwise.
    child: String,
    /// OCI's operation name, for counters and faults.
    operation: String,
}

/// Maps a request to its operation; None for what OCI does not serve (a 404). `vault` is the vault whose
/// management endpoint the request came to, None on the main listener.
fn route(method: &Method, path: &str, vault: Option<&str>) -> Option<Route> {
    let (version, rest) = path.split_once('/')?;
    let version = [CORE, LUSTRE, LIMITS, OKE, vault::KMS, vault::SECRETS].into_iter().find(|v| *v == version)?;
    let segs: Vec<&str> = rest.split('/').collect();
    let method = method.as_str();
    if version == vault::KMS || version == vault::SECRETS || vault.is_some() {
        let (operation, id) = vault::route(method, version, &segs, vault)?;
        let (operation, child) = (operation.to_owned(), String::new());
        return Some(Route { action: Action::Vault, version, collection: None, id, child, operation });
    }
    if version == CORE
        && let Some((operation, id)) = identity::route(method, &segs)
    {
        return Some(Route { action: Action::Identity, version, collection: None, id, child: String::new(), operation });
    }
    if version == OKE {
        let (operation, id) = oke::route(method, &segs)?;
        let (operation, child) = (operation.to_owned(), String::new());
        return Some(Route { action: Action::Oke, version, collection: None, id, child, operation });
    }
    // The Limits service serves only GetResourceAvailability here: `/services/{serviceName}/limits/{limitName}/resourceAvailability`.
    if version == LIMITS {
        let ("GET", ["services", service, "limits", limit, "resourceAvailability"]) = (method, &segs[..]) else { return None };
        let (id, child) = ((*service).to_owned(), (*limit).to_owned());
        let operation = "GetResourceAvailability".into();
        return Some(Route { action: Action::GetResourceAvailability, version, collection: None, id, child, operation });
    }
    if segs[0] == "workRequests" {
        let (action, operation) = match (method, &segs[1..]) {
            ("GET", [_]) => (Action::GetWorkRequest, "GetWorkRequest"),
            ("GET", [_, "errors"]) => (Action::ListWorkRequestErrors, "ListWorkRequestErrors"),
            _ => return None,
        };
        return Some(Route {
            action,
            version,
            collection: None,
            id: segs[1].to_owned(),
            child: String::new(),
            operation: operation.to_owned(),
        });
    }
    if (method, version, &segs[..]) == ("GET", CORE, &["images"][..]) {
        let (id, child) = (String::new(), String::new());
        return Some(Route { action: Action::ListImages, version, collection: None, id, child, operation: "ListImages".into() });
    }
    // Every instance has one primary VNIC in its subnet, with one private IP: listed, not stored.
    if (method, version, &segs[..]) == ("GET", CORE, &["vnicAttachments"][..]) {
        let operation = "ListVnicAttachments".into();
        let (id, child) = (String::new(), String::new());
        return Some(Route { action: Action::ListVnicAttachments, version, collection: None, id, child, operation });
    }
    if let ("GET", CORE, ["vnics", vnic]) = (method, version, &segs[..]) {
        let (id, child) = ((*vnic).to_owned(), String::new());
        return Some(Route { action: Action::GetVnic, version, collection: None, id, child, operation: "GetVnic".into() });
    }
    // A cluster network's instance pools are not a collection of their own here: only their detach action.
    if let ("POST", CORE, ["instancePools", pool, "actions", "detachInstance"]) = (method, version, &segs[..]) {
        let (id, child) = ((*pool).to_owned(), String::new());
        let operation = "DetachInstancePoolInstance".into();
        return Some(Route { action: Action::DetachPoolInstance, version, collection: None, id, child, operation });
    }
    // CreateComputeCapacityReport: a report, not a stored resource.
    if (method, version, &segs[..]) == ("POST", CORE, &["computeCapacityReports"][..]) {
        let operation = "CreateComputeCapacityReport".into();
        let (id, child) = (String::new(), String::new());
        return Some(Route { action: Action::CapacityReport, version, collection: None, id, child, operation });
    }
    if (method, version, &segs[..]) == ("GET", CORE, &["privateIps"][..]) {
        let operation = "ListPrivateIps".into();
        let (id, child) = (String::new(), String::new());
        return Some(Route { action: Action::ListPrivateIps, version, collection: None, id, child, operation });
    }
    let c = COLLECTIONS.iter().find(|c| c.path == segs[0] && c.version == version)?;
    let (action, operation) = match (method, &segs[1..]) {
        // The API has no operation that creates or deletes a GPU memory fabric.
        ("POST", []) | ("DELETE", [_]) if c.kind == FABRIC => return None,
        ("POST", []) if c.kind == "instance" => (Action::Create, "LaunchInstance".to_owned()),
        ("POST", []) => (Action::Create, format!("Create{}", c.name)),
        // InstanceAction: `POST /instances/{instanceId}?action=RESET`.
        ("POST", [_]) if c.kind == "instance" => (Action::Power, "InstanceAction".to_owned()),
        ("GET", []) => (Action::List, format!("List{}", c.plural)),
        ("GET", [_]) => (Action::Get, format!("Get{}", c.name)),
        ("PUT", [_]) => (Action::Update, format!("Update{}", c.name)),
        ("DELETE", [_]) if c.kind == "instance" => (Action::Delete, "TerminateInstance".to_owned()),
        ("DELETE", [_]) if c.kind == "clusternetwork" => (Action::Delete, "TerminateClusterNetwork".to_owned()),
        ("DELETE", [_]) => (Action::Delete, format!("Delete{}", c.name)),
        ("POST", [_, "actions", "addSecurityRules"]) if c.kind == "networksecuritygroup" => {
            (Action::AddSecurityRules, "AddNetworkSecurityGroupSecurityRules".to_owned())
        }
        ("GET", [_, "securityRules"]) if c.kind == "networksecuritygroup" => {
            (Action::ListSecurityRules, "ListNetworkSecurityGroupSecurityRules".to_owned())
        }
        ("GET", [_, "instances"]) if c.kind == "clusternetwork" => (Action::ListNetworkInstances, "ListClusterNetworkInstances".to_owned()),
        ("GET", [_, "instances"]) if c.kind == GMC => {
            (Action::ListGpuMemoryClusterInstances, "ListComputeGpuMemoryClusterInstances".to_owned())
        }
        ("POST", [_, "actions", "startImportFromObject"]) if c.kind == "objectstoragelink" => {
            (Action::StartImport, "StartImportFromObject".to_owned())
        }
        ("GET", [_, "syncJobs", _]) if c.kind == "objectstoragelink" => (Action::GetSyncJob, "GetSyncJob".to_owned()),
        _ => return None,
    };
    let (id, child) = (segs.get(1).copied().unwrap_or_default().to_owned(), segs.get(3).copied().unwrap_or_default().to_owned());
    Some(Route { action, version, collection: Some(c), id, child, operation })
}

/// Decodes a query component: `%XX` escapes and `+` for a space.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes[i] {
            b'%' => bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .map(|(k, v)| (percent_decode(k), percent_decode(v)))
        .collect()
}

/// What a handler gets.
struct Req<'a> {
    route: &'a Route,
    query: &'a BTreeMap<String, String>,
    headers: &'a HeaderMap,
    body: &'a [u8],
    /// The query as sent, for parameters that may repeat (ListClusters' `lifecycleState`).
    raw_query: Option<&'a str>,
    /// A `capacity` fault fired on an asynchronous create: its work request is to fail.
    capacity_failure: bool,
    /// An `operation_error` fault fired on an OKE create or delete: accepted, and its work request fails with
    /// nothing done.
    operation_error: bool,
    /// Who sent it.
    caller: &'a Caller,
}

impl Req<'_> {
    fn collection(&self) -> &'static Collection {
        self.route.collection.expect("a collection route")
    }
}

/// The auth service's federation endpoint, where an instance exchanges its certificate for a security token.
const FEDERATION_PATH: &str = "/v1/x509";

async fn handle(State(oci): State<Arc<Oci>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    dispatch(oci, None, method, uri, headers, body).await
}

/// A vault's management endpoint: the key operations of that vault.
async fn handle_vault(
    State((oci, vault)): State<(Arc<Oci>, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    dispatch(oci, Some(vault), method, uri, headers, body).await
}

/// Every call is judged by the vendor's published definition first (when `HPC_CONFORMANCE=strict`), and
/// so is the answer (see `conformance`); the admin API and the auth service's federation endpoint (which no
/// published definition describes) are not.
async fn dispatch(oci: Arc<Oci>, vault: Option<String>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let unjudged = vault.is_none() && (uri.path().starts_with("/_admin/") || uri.path() == FEDERATION_PATH);
    if unjudged || !oci.admin.judging() {
        return api(oci, vault, method.clone(), uri.clone(), headers, body.clone()).await;
    }
    let op = match crate::conformance::gate(crate::conformance::Cloud::Oci, method.as_str(), &uri, &headers, &body) {
        Ok(op) => op,
        Err(refusal) => return *refusal,
    };
    let response = api(oci, vault, method.clone(), uri.clone(), headers, body.clone()).await;
    crate::conformance::checked(op, crate::conformance::Cloud::Oci, response).await
}

/// Opens a vault's management endpoint (once per vault OCID for the process; `reset` leaves it open, and a
/// vault it no longer knows answers 404 there).
fn open_vault_listener(oci: &Arc<Oci>, vault: &str) -> std::io::Result<u16> {
    let mut ports = oci.vault_ports.lock().unwrap();
    if let Some(port) = ports.get(vault) {
        return Ok(*port);
    }
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let port = std_listener.local_addr()?.port();
    let listener = tokio::net::TcpListener::from_std(std_listener)?;
    let app = axum::Router::new().fallback(handle_vault).with_state((oci.clone(), vault.to_owned()));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    ports.insert(vault.to_owned(), port);
    Ok(port)
}

async fn api(oci: Arc<Oci>, vault: Option<String>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().trim_start_matches('/').to_owned();
    if vault.is_none() && uri.path() == FEDERATION_PATH {
        let mut store = oci.store.lock().unwrap();
        return identity::federate(&mut store, method.as_str(), &uri, &headers, &body).into_response();
    }
    if let Some(route) = path.strip_prefix("_admin/").filter(|_| vault.is_none()) {
        let (status, value) = if (method.as_str(), route) == ("POST", "metadata") {
            imds::listen(&oci, &body)
        } else {
            oci.admin.handle(method.as_str(), route, &body, oci.as_ref())
        };
        return (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), axum::Json(value)).into_response();
    }
    let verified = verify(&oci.store.lock().unwrap(), &method, &uri, &headers, &body);
    let caller = match verified {
        Ok(caller) => caller,
        Err(why) => {
            eprintln!("oci emulator: 401 for {method} {uri}: {why}");
            return unauthenticated().into_response();
        }
    };
    let Some(route) = route(&method, &path, vault.as_deref()) else { return Reply::not_found().into_response() };
    // An instance principal may read secret bundles a policy grants it, and nothing else: no other grant is
    // modelled, and what is not understood is refused.
    if matches!(caller, Caller::Instance(_)) && !(route.action == Action::Vault && vault::open_to_instances(&route.operation)) {
        return Reply::not_found().into_response();
    }
    let service = match (route.action, route.version) {
        (Action::Identity, _) => "identity",
        (Action::Vault, _) => vault::service(&route.operation),
        (_, CORE) => "core",
        (_, LIMITS) => "limits",
        (_, OKE) => "containerengine",
        _ => "lustre",
    };
    let mut capacity_failure = false;
    let mut operation_error = false;
    let mut answer_lost = false;
    if let Some(fault) = oci.admin.on_request(service, &route.operation) {
        match fault.kind {
            FaultKind::Latency => tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await,
            // OCI sends no Retry-After with its 429.
            FaultKind::Throttle => return Reply::error(429, "TooManyRequests", "Too many requests for the tenancy").into_response(),
            // A cluster network is accepted, and its work request fails later, as OCI's does.
            FaultKind::Capacity if route.operation == "CreateClusterNetwork" => capacity_failure = true,
            // So is an import from Object Storage: its sync job fails.
            FaultKind::Capacity if route.operation == "StartImportFromObject" => capacity_failure = true,
            // So is a GPU memory cluster's create or resize: its work request fails and nothing launches.
            FaultKind::Capacity
                if matches!(route.operation.as_str(), "CreateComputeGpuMemoryCluster" | "UpdateComputeGpuMemoryCluster") =>
            {
                capacity_failure = true
            }
            FaultKind::Capacity => return Reply::error(500, "InternalError", "Out of host capacity.").into_response(),
            // Carried out below, and then the caller never hears so.
            FaultKind::AnswerLost => answer_lost = true,
            // OKE's asynchronous calls are accepted, and their work request fails with nothing done.
            FaultKind::OperationError if oke::asynchronous(&route.operation) => operation_error = true,
            FaultKind::ServerError | FaultKind::OperationError => {
                return Reply::error(500, "InternalError", "Internal error occurred").into_response();
            }
            FaultKind::NotFound => return Reply::not_found().into_response(),
        }
    }
    let query = parse_query(uri.query());
    let mut store = oci.store.lock().unwrap();
    purge(&mut store);
    let retry = match (&method, headers.get("opc-retry-token").and_then(|v| v.to_str().ok())) {
        (&Method::POST, Some(token)) => Some(format!("{} {token}", uri.path())),
        _ => None,
    };
    if let Some(previous) = retry.as_ref().and_then(|key| store.retries.get(key)) {
        return previous.clone().into_response();
    }
    let req = Req {
        route: &route,
        query: &query,
        headers: &headers,
        body: &body,
        raw_query: uri.query(),
        capacity_failure,
        operation_error,
        caller: &caller,
    };
    let before = instance_states(&store);
    let result = match route.action {
        Action::Create => create(&mut store, &req),
        Action::List => list(&store, &req),
        Action::Get => get(&store, &req),
        Action::Update => update(&mut store, &req),
        Action::Delete => delete(&mut store, &req),
        Action::AddSecurityRules => add_security_rules(&mut store, &req),
        Action::ListSecurityRules => list_security_rules(&store, &req),
        Action::ListNetworkInstances => list_network_instances(&store, &req),
        Action::GetWorkRequest => get_work_request(&store, &req),
        Action::ListWorkRequestErrors => list_work_request_errors(&store, &req),
        Action::ListImages => list_images(&req),
        Action::ListVnicAttachments => list_vnic_attachments(&store, &req),
        Action::ListPrivateIps => list_private_ips(&store, &req),
        Action::StartImport => start_import(&mut store, &req),
        Action::GetSyncJob => get_sync_job(&store, &req),
        Action::GetVnic => get_vnic(&store, &req),
        Action::ListGpuMemoryClusterInstances => list_gpu_memory_cluster_instances(&store, &req),
        Action::Power => instance_action(&mut store, &req),
        Action::DetachPoolInstance => detach_pool_instance(&mut store, &req),
        Action::GetResourceAvailability => get_resource_availability(&store, &req),
        Action::CapacityReport => capacity_report(&store, &req),
        Action::Oke => oke::handle(&mut store, &req),
        Action::Identity => identity::handle(&mut store, &req),
        Action::Vault => vault::handle(&mut store, &req, vault.as_deref(), &|id| open_vault_listener(&oci, id)),
    };
    let reply = result.unwrap_or_else(|e| e);
    record_events(&oci.admin, &store, &before, route.action == Action::Power);
    if let Some(key) = retry
        && reply.status < 300
    {
        store.retries.insert(key, reply.clone());
    }
    if answer_lost {
        return Reply::error(500, "InternalError", "Internal error occurred").into_response();
    }
    reply.into_response()
}

/// Every instance with its lifecycle state and version, for [`record_events`].
fn instance_states(store: &Store) -> BTreeMap<String, (String, u64)> {
    store.resources.iter().filter(|(_, s)| s.kind == "instance").map(|(id, s)| (id.clone(), (state_of(s), s.version))).collect()
}

/// What a call did to the instances, as the lifecycle event log has it: instances launched (by
/// LaunchInstance, a pool or a GPU memory cluster), instances set terminating, and on an InstanceAction
/// a restart, start or stop.
fn record_events(admin: &Admin, store: &Store, before: &BTreeMap<String, (String, u64)>, power: bool) {
    for (id, s) in store.resources.iter().filter(|(_, s)| s.kind == "instance") {
        let name = s.value["displayName"].as_str().unwrap_or_default();
        let now = state_of(s);
        let gone = |state: &str| matches!(state, "TERMINATING" | "TERMINATED");
        match before.get(id) {
            None if !gone(&now) => admin.event(name, id, "created"),
            Some((was, _)) if gone(&now) && !gone(was) => admin.event(name, id, "deleted"),
            Some((_, version)) if power && *version != s.version => {
                let event = match (now.as_str(), s.value["_restart"] == true) {
                    ("STOPPING", true) => "restarted",
                    ("STOPPING", false) => "stopped",
                    _ => "started",
                };
                admin.event(name, id, event);
            }
            _ => {}
        }
    }
}

fn ocid(store: &mut Store, kind: &str) -> String {
    store.next += 1;
    // OKE's OCIDs name the region by its key, as OKE's do (`ocid1.cluster.oc1.iad.…`).
    let region = if oke::regional(kind) { oke::REGION_KEY } else { "emulator" };
    format!("ocid1.{kind}.oc1.{region}.{:020}", store.next)
}

/// The time as OCI writes it, e.g. `2026-01-01T12:00:00.000Z`.
fn now_rfc3339() -> String {
    crate::clock::rfc3339_millis(SystemTime::now())
}

/// The lifecycle state a resource shows now: its stored state advanced by its age.
fn state_of(s: &Stored) -> String {
    let stored = s.value["lifecycleState"].as_str().unwrap_or_default();
    let age = s.changed.elapsed().as_secs_f64();
    let settled = age >= SETTLE;
    let now = match (s.kind, stored) {
        ("instance", "PROVISIONING" | "STARTING") if age >= 2.0 * SETTLE => "RUNNING",
        ("instance", "PROVISIONING") if settled => "STARTING",
        // A reset (RESET, SOFTRESET, ...) powers the instance off and on again: STOPPING, STARTING, RUNNING.
        ("instance", "STOPPING") if s.value["_restart"] == true && age >= 2.0 * SETTLE => "RUNNING",
        ("instance", "STOPPING") if s.value["_restart"] == true && settled => "STARTING",
        ("instance", "STOPPING") if settled => "STOPPED",
        ("instance", "TERMINATING") if settled => "TERMINATED",
        ("vcn" | "subnet" | "networksecuritygroup", "PROVISIONING") if settled => "AVAILABLE",
        ("clusternetwork", "PROVISIONING") if settled && s.value["_failed"] == true => "TERMINATED",
        ("clusternetwork", "PROVISIONING" | "SCALING") if settled => "RUNNING",
        ("clusternetwork", "TERMINATING") if settled => "TERMINATED",
        // A GPU memory cluster whose create found no host capacity ends deleted, as its work request fails.
        (GMC, "CREATING") if settled && s.value["_failed"] == true => "DELETED",
        (GMC, "CREATING" | "UPDATING") if settled => "ACTIVE",
        (GMC, "DELETING") if settled => "DELETED",
        ("lustrefilesystem" | "objectstoragelink", "CREATING" | "UPDATING") if settled => "ACTIVE",
        ("lustrefilesystem", "DELETING") if settled => "DELETED",
        // An OKE cluster whose create met an operation error ends FAILED, as its work request does.
        (oke::CLUSTER, "CREATING") if settled && s.value["_failed"] == true => "FAILED",
        (oke::CLUSTER, "CREATING") if settled => "ACTIVE",
        (oke::CLUSTER, "DELETING") if settled => "DELETED",
        _ => stored,
    };
    now.to_owned()
}

fn set_state(s: &mut Stored, state: &str) {
    s.value["lifecycleState"] = json!(state);
    s.changed = Instant::now();
    s.version += 1;
}

/// Gone for good (but possibly still listed, as OCI lists terminated instances); an OKE cluster whose create
/// failed never held anything either.
fn finished(s: &Stored) -> bool {
    let state = state_of(s);
    matches!(state.as_str(), "TERMINATED" | "DELETED") || (s.kind == oke::CLUSTER && state == "FAILED")
}

/// Forgets what was deleted (Lustre file systems, GPU memory clusters) once its deletion has finished; OKE
/// clusters stay, DELETED, for GetCluster (ListClusters leaves them out).
fn purge(store: &mut Store) {
    store.resources.retain(|_, s| s.kind == oke::CLUSTER || state_of(s) != "DELETED");
}

/// What a kind is answered as by Get, Create and Update: OCI's response model.
fn full_model(kind: &str) -> &'static str {
    match kind {
        "vcn" => "Vcn",
        "subnet" => "Subnet",
        "networksecuritygroup" => "NetworkSecurityGroup",
        "computecluster" => "ComputeCluster",
        "instance" => "Instance",
        "instanceconfiguration" => "InstanceConfiguration",
        "clusternetwork" => "ClusterNetwork",
        FABRIC => "ComputeGpuMemoryFabric",
        GMC => "ComputeGpuMemoryCluster",
        "lustrefilesystem" => "LustreFileSystem",
        oke::CLUSTER => "Cluster",
        _ => "ObjectStorageLink",
    }
}

/// What a kind's list answers with (several lists give summaries, not the resource).
fn summary_model(kind: &str) -> &'static str {
    match kind {
        "computecluster" => "ComputeClusterSummary",
        "instanceconfiguration" => "InstanceConfigurationSummary",
        "clusternetwork" => "ClusterNetworkSummary",
        FABRIC => "ComputeGpuMemoryFabricSummary",
        GMC => "ComputeGpuMemoryClusterSummary",
        "lustrefilesystem" => "LustreFileSystemSummary",
        "objectstoragelink" => "ObjectStorageLinkSummary",
        oke::CLUSTER => "ClusterSummary",
        other => full_model(other),
    }
}

/// The JSON fields of OCI's response models, as the `oci` SDK's models name them (`attribute_map`).
#[rustfmt::skip]
fn model_fields(model: &str) -> &'static [&'static str] {
    match model {
        "Vcn" => &[
            "byoipv6CidrBlocks", "cidrBlock", "cidrBlocks", "compartmentId", "defaultDhcpOptionsId", "defaultRouteTableId",
            "defaultSecurityListId", "definedTags", "displayName", "dnsLabel", "freeformTags", "id", "ipv6CidrBlocks",
            "ipv6PrivateCidrBlocks", "isZprOnly", "lifecycleState", "securityAttributes", "systemTags", "timeCreated",
            "vcnDomainName",
        ],
        "Subnet" => &[
            "availabilityDomain", "cidrBlock", "compartmentId", "definedTags", "dhcpOptionsId", "displayName", "dnsLabel",
            "freeformTags", "id", "ipv4CidrBlocks", "ipv6CidrBlock", "ipv6CidrBlocks", "ipv6VirtualRouterIp", "lifecycleState",
            "prohibitInternetIngress", "prohibitPublicIpOnVnic", "routeTableId", "securityListIds", "subnetDomainName",
            "systemTags", "timeCreated", "vcnId", "virtualRouterIp", "virtualRouterMac",
        ],
        "NetworkSecurityGroup" => {
            &["compartmentId", "definedTags", "displayName", "freeformTags", "id", "lifecycleState", "systemTags", "timeCreated", "vcnId"]
        }
        "ComputeCluster" => &[
            "availabilityDomain", "compartmentId", "definedTags", "displayName", "freeformTags", "id", "lifecycleState",
            "placementConstraintDetails", "timeCreated", "timeUpdated",
        ],
        "ComputeClusterSummary" => {
            &["availabilityDomain", "compartmentId", "definedTags", "displayName", "freeformTags", "id", "lifecycleState", "timeCreated"]
        }
        "Instance" => &[
            "agentConfig", "availabilityConfig", "availabilityDomain", "capacityReservationId", "clusterPlacementGroupId",
            "compartmentId", "dedicatedVmHostId", "definedTags", "displayName", "extendedMetadata", "faultDomain", "freeformTags",
            "id", "imageId", "instanceConfigurationId", "instanceOptions", "ipxeScript", "isAIEnterpriseEnabled",
            "isCrossNumaNode", "launchMode", "launchOptions", "licensingConfigs", "lifecycleState", "metadata",
            "placementConstraintDetails", "platformConfig", "preemptibleInstanceConfig", "region", "securityAttributes",
            "securityAttributesState", "shape", "shapeConfig", "sourceDetails", "systemTags", "timeCreated",
            "timeMaintenanceRebootDue",
        ],
        "InstanceSummary" => &[
            "availabilityDomain", "compartmentId", "displayName", "faultDomain", "id", "instanceConfigurationId",
            "loadBalancerBackends", "region", "shape", "state", "timeCreated",
        ],
        "InstanceConfiguration" => &[
            "compartmentId", "deferredFields", "definedTags", "displayName", "freeformTags", "gmcConfigs", "id", "instanceDetails",
            "source", "timeCreated",
        ],
        "InstanceConfigurationSummary" => &["compartmentId", "definedTags", "displayName", "freeformTags", "id", "timeCreated"],
        "ClusterNetwork" => &[
            "compartmentId", "definedTags", "displayName", "freeformTags", "hpcIslandId", "id", "instancePools", "lifecycleState",
            "networkBlockIds", "placementConfiguration", "timeCreated", "timeUpdated",
        ],
        "ClusterNetworkSummary" => &[
            "compartmentId", "definedTags", "displayName", "freeformTags", "id", "instancePools", "lifecycleState", "timeCreated",
            "timeUpdated",
        ],
        "InstancePoolSummary" => &[
            "availabilityDomains", "compartmentId", "currentSize", "definedTags", "displayName", "freeformTags", "id",
            "instanceConfigurationId", "lifecycleState", "poolType", "size", "timeCreated",
        ],
        "ComputeGpuMemoryFabric" => &[
            "additionalData", "availableHostCount", "compartmentId", "computeGpuMemoryClusters", "computeHpcIslandId",
            "computeLocalBlockId", "computeNetworkBlockId", "currentFirmwareBundleId", "definedTags", "displayName", "fabricHealth",
            "firmwareUpdateReason", "firmwareUpdateState", "freeformTags", "healthyHostCount", "hostPlatformName", "id",
            "lifecycleState", "memoryFabricPreferences", "switchPlatformName", "systemTags", "targetFirmwareBundleId", "timeCreated",
            "totalHostCount",
        ],
        "ComputeGpuMemoryFabricSummary" => &[
            "availableHostCount", "compartmentId", "computeHpcIslandId", "computeLocalBlockId", "computeNetworkBlockId",
            "currentFirmwareBundleId", "definedTags", "displayName", "fabricHealth", "firmwareUpdateState", "freeformTags",
            "healthyHostCount", "hostPlatformName", "id", "lifecycleState", "memoryFabricPreferences", "switchPlatformName",
            "systemTags", "targetFirmwareBundleId", "timeCreated", "totalHostCount",
        ],
        "ComputeGpuMemoryCluster" => &[
            "availabilityDomain", "compartmentId", "computeClusterId", "definedTags", "displayName", "freeformTags",
            "gpuMemoryClusterScaleConfig", "gpuMemoryFabricId", "id", "instanceConfigurationId", "lifecycleState", "privateIpIds",
            "size", "systemTags", "timeCreated",
        ],
        "ComputeGpuMemoryClusterSummary" => &[
            "availabilityDomain", "compartmentId", "definedTags", "displayName", "freeformTags", "gpuMemoryFabricId", "id",
            "lifecycleState", "size", "systemTags", "timeCreated",
        ],
        "ComputeGpuMemoryClusterInstanceSummary" => &[
            "availabilityDomain", "compartmentId", "displayName", "faultDomain", "id", "instanceConfigurationId", "instanceShape",
            "lifecycleState", "region", "timeCreated",
        ],
        "LustreFileSystem" => &[
            "id", "compartmentId", "availabilityDomain", "displayName", "fileSystemDescription", "timeCreated", "timeUpdated",
            "lifecycleState", "lifecycleDetails", "freeformTags", "definedTags", "systemTags", "nsgIds", "kmsKeyId",
            "capacityInGBs", "subnetId", "performanceTier", "managementServiceAddress", "fileSystemName", "lnet", "majorVersion",
            "clusterPlacementGroupId", "timeBillingCycleEnd", "maintenanceWindow", "maintenanceWindowMetadata",
            "rootSquashConfiguration",
        ],
        "LustreFileSystemSummary" => &[
            "id", "compartmentId", "availabilityDomain", "displayName", "fileSystemDescription", "timeCreated", "timeUpdated",
            "lifecycleState", "lifecycleDetails", "freeformTags", "definedTags", "systemTags", "nsgIds", "fileSystemName",
            "kmsKeyId", "capacityInGBs", "subnetId", "performanceTier", "timeBillingCycleEnd", "managementServiceAddress", "lnet",
            "clusterPlacementGroupId", "majorVersion", "rootSquashConfiguration",
        ],
        "Cluster" => &[
            "availableKubernetesUpgrades", "clusterPodNetworkOptions", "compartmentId", "definedTags", "endpointConfig",
            "endpoints", "freeformTags", "id", "imagePolicyConfig", "kmsKeyId", "kubernetesVersion", "lifecycleDetails",
            "lifecycleState", "metadata", "name", "openIdConnectDiscoveryEndpoint", "openIdConnectDiscoveryKey", "options",
            "systemTags", "type", "vcnId",
        ],
        "ClusterSummary" => &[
            "availableKubernetesUpgrades", "clusterPodNetworkOptions", "compartmentId", "definedTags", "endpointConfig",
            "endpoints", "freeformTags", "id", "imagePolicyConfig", "kubernetesVersion", "lifecycleDetails", "lifecycleState",
            "metadata", "name", "options", "systemTags", "type", "vcnId",
        ],
        // ObjectStorageLink and ObjectStorageLinkSummary have the same fields.
        _ => &[
            "id", "compartmentId", "availabilityDomain", "displayName", "timeCreated", "timeUpdated", "lifecycleState",
            "lifecycleDetails", "freeformTags", "definedTags", "systemTags", "lustreFileSystemId", "fileSystemPath",
            "objectStoragePrefix", "currentJobId", "lastJobId", "isOverwrite",
        ],
    }
}

/// The fields LaunchInstance takes (LaunchInstanceDetails); an instance configuration's launch details have
/// others (launchMode, preferredMaintenanceAction) that LaunchInstance refuses.
#[rustfmt::skip]
const LAUNCH_INSTANCE_DETAILS: [&str; 33] = [
    "agentConfig", "availabilityConfig", "availabilityDomain", "capacityReservationId", "clusterPlacementGroupId", "compartmentId",
    "computeClusterId", "createVnicDetails", "dedicatedVmHostId", "definedTags", "displayName", "extendedMetadata", "faultDomain",
    "freeformTags", "hostnameLabel", "imageId", "instanceConfigurationId", "instanceOptions", "ipxeScript",
    "isAIEnterpriseEnabled", "isPvEncryptionInTransitEnabled", "launchOptions", "launchVolumeAttachments", "licensingConfigs",
    "metadata", "placementConstraintDetails", "platformConfig", "preemptibleInstanceConfig", "securityAttributes", "shape",
    "shapeConfig", "sourceDetails", "subnetId",
];

/// Keeps only the fields of `model` (and of InstancePoolSummary in a cluster network's pools).
fn as_model(mut v: Value, model: &str) -> Value {
    let fields = model_fields(model);
    if let Some(pools) = v.get_mut("instancePools").and_then(Value::as_array_mut) {
        for pool in pools {
            if let Some(p) = pool.as_object_mut() {
                p.retain(|k, _| model_fields("InstancePoolSummary").contains(&k.as_str()));
            }
        }
    }
    if let Some(map) = v.as_object_mut() {
        map.retain(|k, _| fields.contains(&k.as_str()));
    }
    v
}

/// A resource as its Get answers it.
fn view(s: &Stored) -> Value {
    as_model(raw_view(s), full_model(s.kind))
}

/// A resource with its state as it is now, bookkeeping fields dropped, before any model is applied.
fn raw_view(s: &Stored) -> Value {
    let mut v = s.value.clone();
    let state = state_of(s);
    if !state.is_empty() {
        v["lifecycleState"] = json!(state);
    }
    if s.kind == "clusternetwork"
        && let Some(pools) = v["instancePools"].as_array_mut()
    {
        for pool in pools {
            pool["lifecycleState"] = json!(state);
        }
    }
    if let Some(fields) = v.as_object_mut() {
        fields.retain(|k, _| !k.starts_with('_'));
    }
    v
}

fn etag(s: &Stored) -> String {
    format!("\"{}-{}\"", s.value["id"].as_str().unwrap_or_default(), s.version)
}

fn resource_reply(status: u16, s: &Stored) -> Reply {
    Reply::json(status, view(s)).header("etag", etag(s))
}

/// A stored resource's answer as Get shows it now (sizes and counts that depend on other resources too).
fn shown_reply(store: &Store, status: u16, id: &str) -> Reply {
    let s = &store.resources[id];
    Reply::json(status, as_model(shown(store, s), full_model(s.kind))).header("etag", etag(s))
}

fn check_if_match(headers: &HeaderMap, s: &Stored) -> Result<(), Reply> {
    match headers.get("if-match").and_then(|v| v.to_str().ok()) {
        Some(want) if want != "*" && want.trim_matches('"') != etag(s).trim_matches('"') => {
            Err(Reply::error(412, "NoEtagMatch", "The resource's etag does not match the if-match header."))
        }
        _ => Ok(()),
    }
}

fn json_body(body: &[u8]) -> Result<Value, Reply> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(Reply::error(400, "CannotParseRequest", "The request body is not a JSON object.")),
    }
}

/// A non-empty string at a JSON pointer.
fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn missing(name: &str) -> Reply {
    Reply::error(400, "MissingParameter", format!("{name} is required."))
}

fn invalid(message: impl Into<String>) -> Reply {
    Reply::error(400, "InvalidParameter", message)
}

/// The string at `pointer`, or OCI's 400 `MissingParameter` naming it.
fn require(v: &Value, pointer: &str) -> Result<String, Reply> {
    text(v, pointer).map(str::to_owned).ok_or_else(|| missing(&pointer.trim_start_matches('/').replace('/', ".")))
}

/// The existing resource an OCID refers to, or OCI's 404.
fn existing<'a>(store: &'a Store, id: &str, kind: &str) -> Result<&'a Stored, Reply> {
    store.resources.get(id).filter(|s| s.kind == kind && !finished(s)).ok_or_else(|| {
        let name = collection_of(kind).map_or(kind, |c| c.name);
        Reply::error(404, "NotAuthorizedOrNotFound", format!("{name} {id} not found or not authorized."))
    })
}

/// An IPv4 CIDR block as (address, prefix length).
fn parse_cidr(s: &str) -> Option<(u32, u32)> {
    let (ip, len) = s.split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let len: u32 = len.parse().ok().filter(|l| *l <= 32)?;
    Some((u32::from(ip), len))
}

fn within(inner: (u32, u32), outer: (u32, u32)) -> bool {
    let mask = if outer.1 == 0 { 0 } else { u32::MAX << (32 - outer.1) };
    inner.1 >= outer.1 && inner.0 & mask == outer.0 & mask
}

fn new_work_request(
    store: &mut Store,
    version: &'static str,
    operation: &str,
    compartment: &str,
    resources: Vec<(&'static str, String, &'static str)>,
    failure: Option<(String, String)>,
) -> String {
    let id = ocid(store, "workrequest");
    let wr = WorkRequest {
        version,
        operation: operation.to_owned(),
        compartment: compartment.to_owned(),
        resources,
        started: Instant::now(),
        accepted: now_rfc3339(),
        failure,
    };
    store.work_requests.insert(id.clone(), wr);
    id
}

fn initial_state(kind: &str) -> Option<&'static str> {
    match kind {
        "vcn" | "subnet" | "networksecuritygroup" | "instance" | "clusternetwork" => Some("PROVISIONING"),
        GMC => Some("CREATING"),
        "computecluster" => Some("ACTIVE"),
        "lustrefilesystem" | "objectstoragelink" => Some("CREATING"),
        _ => None,
    }
}

fn create(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let kind = req.collection().kind;
    let mut value = json_body(req.body)?;
    let compartment = require(&value, "/compartmentId")?;
    // What each kind needs beyond the common fields, checked before anything is created.
    let mut network_placement = None;
    let mut lustre_subnet_cidr = None;
    let mut gmc_size = 0;
    match kind {
        "vcn" => check_vcn(&mut value)?,
        "subnet" => check_subnet(store, &value)?,
        "networksecuritygroup" => {
            let vcn = require(&value, "/vcnId")?;
            existing(store, &vcn, "vcn")?;
        }
        "computecluster" => {
            require(&value, "/availabilityDomain")?;
        }
        "instance" => {
            check_launch(store, &value)?;
            let (ad, shape) = (text(&value, "/availabilityDomain").unwrap_or_default(), text(&value, "/shape").unwrap_or_default());
            if room(store, ad, shape) == Some(0) {
                return Err(out_of_host_capacity());
            }
        }
        "instanceconfiguration" => {
            require(&value, "/instanceDetails/launchDetails/shape")?;
        }
        "clusternetwork" => network_placement = Some(check_cluster_network(store, &value)?),
        GMC => gmc_size = check_gpu_memory_cluster(store, &value)?,
        "lustrefilesystem" => {
            require(&value, "/availabilityDomain")?;
            check_lustre(&value).map_err(invalid)?;
            let subnet = require(&value, "/subnetId")?;
            lustre_subnet_cidr = Some(existing(store, &subnet, "subnet")?.value["cidrBlock"].as_str().unwrap_or_default().to_owned());
        }
        "objectstoragelink" => check_link(store, &value)?,
        _ => {}
    }
    let id = ocid(store, kind);
    let n = store.next;
    value["id"] = json!(id);
    value["compartmentId"] = json!(compartment);
    if let Some(state) = initial_state(kind) {
        value["lifecycleState"] = json!(state);
    }
    let now = now_rfc3339();
    value["timeCreated"] = json!(now);
    for tags in ["freeformTags", "definedTags"] {
        if !value[tags].is_object() {
            value[tags] = json!({});
        }
    }
    if text(&value, "/displayName").is_none() {
        value["displayName"] = json!(format!("{kind}{n:06}"));
    }
    let mut work_request = None;
    let mut status = 200;
    match kind {
        "instance" => {
            value["imageId"] = value["sourceDetails"]["imageId"].clone();
            value["_subnetId"] = value["createVnicDetails"]["subnetId"].clone();
            value["_nsgIds"] = value["createVnicDetails"]["nsgIds"].as_array().cloned().map_or(json!([]), Value::Array);
            let subnet = value["_subnetId"].as_str().unwrap_or_default().to_owned();
            value["_privateIp"] = match text(&value, "/createVnicDetails/privateIp") {
                Some(ip) => json!(ip),
                None => json!(free_ip(store, &subnet, n)),
            };
            value["region"] = json!("emulator");
            if text(&value, "/faultDomain").is_none() {
                value["faultDomain"] = json!("FAULT-DOMAIN-1");
            }
        }
        "clusternetwork" => {
            let placement = network_placement.take().expect("checked above");
            let placement = PoolPlacement { network: id.clone(), compartment: compartment.clone(), ..placement };
            let mut pools = Vec::new();
            let mut short = false;
            for requested in value["instancePools"].as_array().cloned().unwrap_or_default() {
                let pool_id = ocid(store, "instancepool");
                let size = requested["size"].as_u64().unwrap_or_default();
                let mut pool = json!({
                    "id": pool_id, "compartmentId": compartment, "instanceConfigurationId": requested["instanceConfigurationId"],
                    "size": size, "timeCreated": now,
                    "placementConfigurations": [{"availabilityDomain": placement.ad, "primaryVnicSubnets": {"subnetId": placement.subnet}}],
                });
                if let Some(name) = text(&requested, "/displayName") {
                    pool["displayName"] = json!(name);
                }
                if !req.capacity_failure {
                    // Under a capacity limit the pool gets what fits, and says so in its size.
                    let fits = pool_room(store, &placement.ad, &pool).map_or(size, |r| r.min(size));
                    launch_pool_instances(store, &placement, &pool, fits);
                    short |= fits < size;
                    pool["size"] = json!(fits);
                }
                pools.push(pool);
            }
            value["instancePools"] = Value::Array(pools);
            // A capacity fault fails the whole network (it ends TERMINATED, nothing launched); a capacity limit
            // keeps what fit, RUNNING, and only the work request fails.
            if req.capacity_failure {
                value["_failed"] = json!(true);
            }
            let failure = (req.capacity_failure || short).then(host_capacity_failure);
            let resources = vec![("clusternetwork", id.clone(), "CREATED")];
            work_request = Some(new_work_request(store, CORE, "CreateClusterNetwork", &compartment, resources, failure));
        }
        "lustrefilesystem" => {
            let cidr = lustre_subnet_cidr.take().unwrap_or_default();
            let (base, len) = parse_cidr(&cidr).unwrap_or((u32::from(Ipv4Addr::new(10, 0, 0, 0)), 24));
            let span = (1u64 << (32 - len)).saturating_sub(4).max(1);
            let host = u64::from(base) + 2 + n % span;
            value["managementServiceAddress"] = json!(Ipv4Addr::from(host as u32).to_string());
            value["lnet"] = json!("tcp");
            value["majorVersion"] = json!("2.15");
            value["timeUpdated"] = json!(now);
            let resources = vec![("lustrefilesystem", id.clone(), "CREATED")];
            work_request = Some(new_work_request(store, LUSTRE, "CREATE_LUSTRE_FILE_SYSTEM", &compartment, resources, None));
            status = 202;
        }
        "objectstoragelink" => value["timeUpdated"] = json!(now),
        GMC => {
            // The instances launch with the cluster, from its instance configuration, on its fabric's hosts;
            // with no host capacity none does and the work request fails.
            let mut failure = req.capacity_failure.then(host_capacity_failure);
            value["systemTags"] = json!({});
            if failure.is_some() {
                value["_failed"] = json!(true);
            } else {
                // Under a capacity limit the cluster gets what fits (its size says so) and the work request fails.
                let ad = text(&value, "/availabilityDomain").unwrap_or_default().to_owned();
                let fits = configuration_shape(store, value["instanceConfigurationId"].as_str().unwrap_or_default())
                    .and_then(|shape| room(store, &ad, &shape))
                    .map_or(gmc_size, |r| r.min(gmc_size));
                if fits < gmc_size {
                    value["size"] = json!(fits);
                    failure = Some(host_capacity_failure());
                }
                launch_gpu_memory_cluster_instances(store, &value, fits);
            }
            let resources = vec![(GMC, id.clone(), "CREATED")];
            work_request = Some(new_work_request(store, CORE, "CreateComputeGpuMemoryCluster", &compartment, resources, failure));
        }
        _ => {}
    }
    let stored = Stored { kind, value, changed: Instant::now(), version: 1 };
    store.resources.insert(id.clone(), stored);
    let mut reply = shown_reply(store, status, &id);
    if let Some(wr) = work_request {
        reply = reply.header("opc-work-request-id", wr);
    }
    Ok(reply)
}

/// OCI keeps `cidrBlock` (the first block) and `cidrBlocks` in step; blocks are /16 to /30.
fn check_vcn(value: &mut Value) -> Result<(), Reply> {
    let blocks: Vec<String> = match (value["cidrBlocks"].as_array(), text(value, "/cidrBlock")) {
        (Some(blocks), _) if !blocks.is_empty() => blocks.iter().map(|b| b.as_str().unwrap_or_default().to_owned()).collect(),
        (_, Some(one)) => vec![one.to_owned()],
        _ => return Err(missing("cidrBlocks")),
    };
    for block in &blocks {
        if !parse_cidr(block).is_some_and(|(_, len)| (16..=30).contains(&len)) {
            return Err(invalid(format!("cidrBlock {block:?} is not an IPv4 CIDR block from /16 to /30.")));
        }
    }
    value["cidrBlock"] = json!(blocks[0]);
    value["cidrBlocks"] = json!(blocks);
    Ok(())
}

/// A subnet needs an existing VCN and a CIDR block inside it that overlaps none of its other subnets.
fn check_subnet(store: &Store, value: &Value) -> Result<(), Reply> {
    let vcn_id = require(value, "/vcnId")?;
    let vcn = existing(store, &vcn_id, "vcn")?;
    let cidr = require(value, "/cidrBlock")?;
    let block =
        parse_cidr(&cidr).filter(|(_, len)| *len <= 30).ok_or_else(|| invalid(format!("cidrBlock {cidr:?} is not a valid CIDR block.")))?;
    let vcn_blocks = vcn.value["cidrBlocks"].as_array().cloned().unwrap_or_default();
    if !vcn_blocks.iter().filter_map(|b| b.as_str().and_then(parse_cidr)).any(|outer| within(block, outer)) {
        return Err(invalid(format!("cidrBlock {cidr} is not within the CIDR blocks of VCN {vcn_id}.")));
    }
    let clash = store
        .resources
        .values()
        .filter(|s| s.kind == "subnet" && s.value["vcnId"] == vcn_id.as_str())
        .find(|s| s.value["cidrBlock"].as_str().and_then(parse_cidr).is_some_and(|other| within(block, other) || within(other, block)));
    if let Some(other) = clash {
        return Err(invalid(format!("cidrBlock {cidr} overlaps subnet {} ({}).", other.value["id"], other.value["cidrBlock"])));
    }
    Ok(())
}

/// LaunchInstance's required details, and the compute cluster, if any, in the same availability domain.
fn check_launch(store: &Store, value: &Value) -> Result<(), Reply> {
    if let Some(field) = value.as_object().and_then(|m| m.keys().find(|k| !LAUNCH_INSTANCE_DETAILS.contains(&k.as_str()))) {
        return Err(invalid(format!("{field} is not a field of LaunchInstanceDetails.")));
    }
    let ad = require(value, "/availabilityDomain")?;
    require(value, "/shape")?;
    if let Some(source) = text(value, "/sourceDetails/sourceType")
        && source != "image"
    {
        return Err(invalid(format!("sourceDetails.sourceType {source:?} is not supported here; use \"image\".")));
    }
    require(value, "/sourceDetails/imageId")?;
    let subnet = require(value, "/createVnicDetails/subnetId")?;
    let cidr = existing(store, &subnet, "subnet")?.value["cidrBlock"].as_str().unwrap_or_default().to_owned();
    // CreateVnicDetails.privateIp: "A private IP address of your choice to assign to the VNIC. Must be an available IP
    // address within the subnet's CIDR."
    if let Some(ip) = text(value, "/createVnicDetails/privateIp") {
        let (base, len) = parse_cidr(&cidr).unwrap_or((0, 32));
        let usable = ip.parse::<Ipv4Addr>().ok().map(u32::from).is_some_and(|a| {
            let last = base | !(u32::MAX.checked_shl(32 - len).unwrap_or(0));
            within((a, 32), (base, len)) && a >= base + 2 && a < last
        });
        if !usable {
            return Err(invalid(format!("privateIp {ip} is not an available address of subnet {subnet} ({cidr}).")));
        }
        if used_ips(store, &subnet).contains(ip) {
            return Err(Reply::error(409, "Conflict", format!("Private IP address {ip} is already assigned in subnet {subnet}.")));
        }
    }
    if let Some(cluster_id) = text(value, "/computeClusterId") {
        let cluster = existing(store, cluster_id, "computecluster")?;
        let cluster_ad = cluster.value["availabilityDomain"].as_str().unwrap_or_default();
        if cluster_ad != ad {
            return Err(invalid(format!(
                "Compute cluster {cluster_id} is in availability domain {cluster_ad}; the instance cannot be launched in {ad}."
            )));
        }
    }
    Ok(())
}

/// Where a cluster network's pools launch their instances.
struct PoolPlacement {
    network: String,
    compartment: String,
    ad: String,
    subnet: String,
}

fn check_cluster_network(store: &Store, value: &Value) -> Result<PoolPlacement, Reply> {
    let ad = require(value, "/placementConfiguration/availabilityDomain")?;
    // primarySubnetId is the older spelling OCI still accepts.
    let subnet = text(value, "/placementConfiguration/primaryVnicSubnets/subnetId")
        .or_else(|| text(value, "/placementConfiguration/primarySubnetId"))
        .ok_or_else(|| missing("placementConfiguration.primaryVnicSubnets.subnetId"))?
        .to_owned();
    existing(store, &subnet, "subnet")?;
    let pools = value["instancePools"].as_array().filter(|p| !p.is_empty()).ok_or_else(|| missing("instancePools"))?;
    for pool in pools {
        let config = text(pool, "/instanceConfigurationId").ok_or_else(|| missing("instancePools[].instanceConfigurationId"))?;
        existing(store, config, "instanceconfiguration")?;
        if pool["size"].as_u64().is_none() {
            return Err(missing("instancePools[].size (a non-negative integer)"));
        }
    }
    Ok(PoolPlacement { network: String::new(), compartment: String::new(), ad, subnet })
}

/// A pool instance's generated name: `inst-<5 letters or digits>-<pool name>`, unique per counter value.
fn pool_instance_name(n: u64, pool: &Value) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    // Multiplying by a number prime to 36 permutes 0..36^5, so the suffixes differ.
    let mut x = (n.wrapping_mul(1_000_003).wrapping_add(12_345)) % 60_466_176;
    let mut suffix = [0u8; 5];
    for c in suffix.iter_mut().rev() {
        *c = DIGITS[(x % 36) as usize];
        x /= 36;
    }
    format!("inst-{}-{}", String::from_utf8_lossy(&suffix), text(pool, "/displayName").unwrap_or("pool"))
}

/// Launches `count` instances into a cluster network's pool, from the pool's instance configuration.
fn launch_pool_instances(store: &mut Store, at: &PoolPlacement, pool: &Value, count: u64) {
    let config_id = pool["instanceConfigurationId"].as_str().unwrap_or_default().to_owned();
    for _ in 0..count {
        let name = pool_instance_name(store.next + 1, pool);
        let extra = json!({"instancePoolId": pool["id"], "clusterNetworkId": at.network});
        launch_from_configuration(store, &config_id, &at.compartment, &at.ad, &at.subnet, &name, extra);
    }
}

/// Launches one instance from an instance configuration's launch details (its shape, image, agent, metadata
/// and tags), in `ad` and `subnet`, with the `extra` fields (the pool or cluster it belongs to).
fn launch_from_configuration(store: &mut Store, config_id: &str, compartment: &str, ad: &str, subnet: &str, name: &str, extra: Value) {
    let launch = store.resources.get(config_id).map(|c| c.value["instanceDetails"]["launchDetails"].clone()).unwrap_or(Value::Null);
    let object_or_empty = |v: &Value| if v.is_object() { v.clone() } else { json!({}) };
    let id = ocid(store, "instance");
    let mut instance = json!({
        "id": id, "compartmentId": compartment, "availabilityDomain": ad, "faultDomain": "FAULT-DOMAIN-1",
        "region": "emulator", "shape": launch["shape"], "displayName": name, "lifecycleState": "PROVISIONING",
        "instanceConfigurationId": config_id, "timeCreated": now_rfc3339(), "freeformTags": object_or_empty(&launch["freeformTags"]),
        "definedTags": object_or_empty(&launch["definedTags"]), "_subnetId": subnet,
        "_nsgIds": launch["createVnicDetails"]["nsgIds"].as_array().cloned().map_or(json!([]), Value::Array),
    });
    for field in ["sourceDetails", "shapeConfig", "metadata", "agentConfig", "preemptibleInstanceConfig", "instanceOptions"] {
        if !launch[field].is_null() {
            instance[field] = launch[field].clone();
        }
    }
    if let (Some(fields), Some(extra)) = (instance.as_object_mut(), extra.as_object()) {
        fields.extend(extra.clone());
    }
    instance["imageId"] = launch["sourceDetails"]["imageId"].clone();
    instance["_privateIp"] = json!(free_ip(store, subnet, store.next));
    store.resources.insert(id, Stored { kind: "instance", value: instance, changed: Instant::now(), version: 1 });
}

/// Launches `count` instances of a GPU memory cluster: from its instance configuration, in its compute
/// cluster, on its fabric's hosts, named as OCI names pool instances (`inst-<5 letters or digits>-<cluster name>`).
fn launch_gpu_memory_cluster_instances(store: &mut Store, gmc: &Value, count: u64) {
    let config_id = gmc["instanceConfigurationId"].as_str().unwrap_or_default().to_owned();
    let subnet = store
        .resources
        .get(&config_id)
        .and_then(|c| text(&c.value, "/instanceDetails/launchDetails/createVnicDetails/subnetId").map(str::to_owned))
        .unwrap_or_default();
    let (compartment, ad) =
        (gmc["compartmentId"].as_str().unwrap_or_default().to_owned(), gmc["availabilityDomain"].as_str().unwrap_or_default().to_owned());
    for _ in 0..count {
        let name = pool_instance_name(store.next + 1, gmc);
        let extra = json!({"computeClusterId": gmc["computeClusterId"], "_gpuMemoryClusterId": gmc["id"],
                           "_gpuMemoryFabricId": gmc["gpuMemoryFabricId"]});
        launch_from_configuration(store, &config_id, &compartment, &ad, &subnet, &name, extra);
    }
}

/// OCI's answer to a launch no host can take: 500 `InternalError` "Out of host capacity.".
fn out_of_host_capacity() -> Reply {
    Reply::error(500, "InternalError", "Out of host capacity.")
}

/// A work request's error when what it was to launch found no host (the pool or memory cluster got what fit).
fn host_capacity_failure() -> (String, String) {
    ("InternalError".to_owned(), "Out of host capacity.".to_owned())
}

/// The live instances of `shape` in availability domain `ad`.
fn live_of_shape(store: &Store, ad: &str, shape: &str) -> u64 {
    store.resources.values().filter(|s| live_instance(s) && s.value["availabilityDomain"] == ad && s.value["shape"] == shape).count() as u64
}

/// How many more instances of `shape` the host capacity set for `ad` takes; None when no limit is set.
fn room(store: &Store, ad: &str, shape: &str) -> Option<u64> {
    let limit = store.capacity.get(&(ad.to_owned(), shape.to_owned()))?;
    Some(limit.saturating_sub(live_of_shape(store, ad, shape)))
}

/// The shape an instance configuration launches.
fn configuration_shape(store: &Store, config_id: &str) -> Option<String> {
    text(&store.resources.get(config_id)?.value, "/instanceDetails/launchDetails/shape").map(str::to_owned)
}

/// [`room`] for the shape a pool's instance configuration launches.
fn pool_room(store: &Store, ad: &str, pool: &Value) -> Option<u64> {
    room(store, ad, &configuration_shape(store, pool["instanceConfigurationId"].as_str().unwrap_or_default())?)
}

/// The Compute limit a shape's instances count against, if it is one of [`GPU_LIMITS`].
fn limit_of_shape(shape: &str) -> Option<&'static str> {
    GPU_LIMITS.iter().find(|(series, _)| shape.starts_with(series)).map(|(_, limit)| *limit)
}

/// The GPUs of a GPU shape: the count its name ends with (`BM.GPU.H100.8`, `VM.GPU.A10.1`).
fn gpus_of_shape(shape: &str) -> u64 {
    shape.rsplit('.').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// GPUs of the live instances counting against `limit` in `ad`: the tenancy's (its root compartment) or one
/// compartment's.
fn gpu_usage(store: &Store, limit: &str, ad: &str, compartment: &str) -> u64 {
    let tenancy = compartment.starts_with("ocid1.tenancy.");
    store
        .resources
        .values()
        .filter(|s| live_instance(s) && s.value["availabilityDomain"] == ad && (tenancy || s.value["compartmentId"] == compartment))
        .filter_map(|s| s.value["shape"].as_str())
        .filter(|shape| limit_of_shape(shape) == Some(limit))
        .map(gpus_of_shape)
        .sum()
}

/// GetResourceAvailability for a Compute GPU limit: `used` from the live instances, `available` what the
/// limit (set through `/_admin/quota`, else [`DEFAULT_LIMIT`]) leaves. As OCI: `compartmentId` is required,
/// an availability domain is required for an AD-scoped limit (400 InvalidParameter), and a limit it does not
/// report on is a 404.
fn get_resource_availability(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let compartment = req.query.get("compartmentId").ok_or_else(|| missing("compartmentId"))?;
    let (service, limit) = (req.route.id.as_str(), req.route.child.as_str());
    if service != "compute" || !GPU_LIMITS.iter().any(|(_, l)| *l == limit) {
        return Err(Reply::not_found());
    }
    let Some(ad) = req.query.get("availabilityDomain").filter(|a| !a.is_empty()) else {
        return Err(invalid(format!("The limit {limit} is scoped to an availability domain: availabilityDomain is required.")));
    };
    let used = gpu_usage(store, limit, ad, compartment);
    let total = store.quotas.get(&(limit.to_owned(), ad.clone())).copied().unwrap_or(DEFAULT_LIMIT);
    let available = total.saturating_sub(used);
    Ok(Reply::json(
        200,
        json!({"used": used, "available": available, "fractionalUsage": used as f64, "fractionalAvailability": available as f64}),
    ))
}

/// Hosts a capacity report counts for a shape in an availability domain no host capacity limit was set
/// for (`/_admin/capacity`): plenty.
const HOSTS_WITHOUT_LIMIT: u64 = 10_000;

/// CreateComputeCapacityReport: each shape asked about with the hosts the availability domain still has for
/// it (what `/_admin/capacity` leaves beside the live instances of the shape), `AVAILABLE` while any is left
/// and `OUT_OF_HOST_CAPACITY` when none is, as `CapacityReportShapeAvailability` reports them.
fn capacity_report(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let body: Value = serde_json::from_slice(req.body).map_err(|_| invalid("The request body is not valid JSON."))?;
    let compartment = body["compartmentId"].as_str().ok_or_else(|| missing("compartmentId"))?;
    let ad = body["availabilityDomain"].as_str().ok_or_else(|| missing("availabilityDomain"))?;
    let asked = body["shapeAvailabilities"].as_array().filter(|a| !a.is_empty()).ok_or_else(|| missing("shapeAvailabilities"))?;
    let mut shapes = Vec::new();
    for a in asked {
        let shape = a["instanceShape"].as_str().ok_or_else(|| missing("shapeAvailabilities.instanceShape"))?;
        let count = room(store, ad, shape).unwrap_or(HOSTS_WITHOUT_LIMIT);
        let status = if count > 0 { "AVAILABLE" } else { "OUT_OF_HOST_CAPACITY" };
        let mut found = json!({"instanceShape": shape, "availableCount": count, "availabilityStatus": status});
        for k in ["faultDomain", "instanceShapeConfig"] {
            if a.get(k).is_some_and(|v| !v.is_null()) {
                found[k] = a[k].clone();
            }
        }
        shapes.push(found);
    }
    Ok(Reply::json(
        200,
        json!({"compartmentId": compartment, "availabilityDomain": ad, "shapeAvailabilities": shapes, "timeCreated": now_rfc3339()}),
    ))
}

/// Whether an instance is one of its cluster's: not terminating or terminated.
fn live_instance(s: &Stored) -> bool {
    s.kind == "instance" && !matches!(state_of(s).as_str(), "TERMINATING" | "TERMINATED")
}

/// The live instances of a GPU memory cluster, oldest first.
fn gmc_members<'a>(store: &'a Store, gmc: &str) -> Vec<&'a String> {
    store.resources.iter().filter(|(_, s)| live_instance(s) && s.value["_gpuMemoryClusterId"] == gmc).map(|(id, _)| id).collect()
}

/// The hosts of a GPU memory fabric no instance holds (an instance holds its host until it is TERMINATED).
fn available_hosts(store: &Store, fabric: &Stored) -> i64 {
    let id = fabric.value["id"].as_str().unwrap_or_default();
    let held = store
        .resources
        .values()
        .filter(|s| s.kind == "instance" && s.value["_gpuMemoryFabricId"] == id && state_of(s) != "TERMINATED")
        .count() as i64;
    (fabric.value["_freeHosts"].as_i64().unwrap_or(FABRIC_HOSTS) - held).max(0)
}

/// A GPU memory cluster's `size` must be 1 to 18: one NVL72 rack's hosts at most.
fn check_gmc_size(size: &Value) -> Result<i64, Reply> {
    let size = size.as_i64().ok_or_else(|| invalid("size must be an integer."))?;
    if !(1..=FABRIC_HOSTS).contains(&size) {
        return Err(invalid(format!(
            "size {size} is invalid: a GPU memory cluster has 1 to {FABRIC_HOSTS} instances (the hosts of one GPU memory fabric)."
        )));
    }
    Ok(size)
}

/// A GPU memory cluster's instance configuration: an existing one whose shape a GPU memory cluster launches.
fn check_gmc_configuration(store: &Store, config_id: &str) -> Result<(), Reply> {
    let config = existing(store, config_id, "instanceconfiguration")?;
    let shape = config.value["instanceDetails"]["launchDetails"]["shape"].as_str().unwrap_or_default();
    if !GMC_SHAPES.contains(&shape) {
        return Err(invalid(format!(
            "Instance configuration {config_id} launches shape {shape:?}; a GPU memory cluster takes only {}.",
            GMC_SHAPES.join(", ")
        )));
    }
    Ok(())
}

/// CreateComputeGpuMemoryCluster's references and size, checked as OCI does: the compute cluster in the same
/// availability domain, an instance configuration of a GB200/GB300 shape, and a fabric in that availability
/// domain that is AVAILABLE with at least `size` hosts free. The SDK leaves `gpuMemoryFabricId` and `size`
/// optional, but the API creates a cluster "on a specific compute GPU memory fabric", of the desired size: the
/// emulator requires both. Returns the size.
fn check_gpu_memory_cluster(store: &Store, value: &Value) -> Result<u64, Reply> {
    let ad = require(value, "/availabilityDomain")?;
    let cluster_id = require(value, "/computeClusterId")?;
    let config_id = require(value, "/instanceConfigurationId")?;
    let fabric_id = require(value, "/gpuMemoryFabricId")?;
    let size = check_gmc_size(value.get("size").ok_or_else(|| missing("size"))?)?;
    let cluster = existing(store, &cluster_id, "computecluster")?;
    let cluster_ad = cluster.value["availabilityDomain"].as_str().unwrap_or_default();
    if cluster_ad != ad {
        return Err(invalid(format!("Compute cluster {cluster_id} is in availability domain {cluster_ad}, not {ad}.")));
    }
    check_gmc_configuration(store, &config_id)?;
    let fabric = existing(store, &fabric_id, FABRIC)?;
    let fabric_ad = fabric.value["_availabilityDomain"].as_str().unwrap_or_default();
    if fabric_ad != ad {
        return Err(invalid(format!("GPU memory fabric {fabric_id} is in availability domain {fabric_ad}, not {ad}.")));
    }
    let shown = shown(store, fabric);
    let state = shown["lifecycleState"].as_str().unwrap_or_default();
    if state != "AVAILABLE" {
        return Err(Reply::error(
            409,
            "IncorrectState",
            format!("GPU memory fabric {fabric_id} is {state}; a GPU memory cluster is created on an AVAILABLE fabric."),
        ));
    }
    let available = available_hosts(store, fabric);
    if size > available {
        return Err(invalid(format!("size {size} exceeds the {available} available host(s) of GPU memory fabric {fabric_id}.")));
    }
    Ok(size as u64)
}

/// UpdateComputeGpuMemoryCluster: a new size launches instances from the (possibly new) instance
/// configuration on the fabric's free hosts, or terminates the newest; only while ACTIVE. Tags, name and
/// configuration change at any time. Always answered with a work request (the SDK waits on one).
fn update_gpu_memory_cluster(store: &mut Store, id: &str, body: &Value, state: &str, capacity_failure: bool) -> Result<Reply, Reply> {
    if let Some(config) = text(body, "/instanceConfigurationId") {
        check_gmc_configuration(store, config)?;
    }
    let live = gmc_members(store, id).len() as i64;
    let gmc = &store.resources[id].value;
    let mut resize = None;
    let mut short = false;
    if let Some(size) = body.get("size") {
        let size = check_gmc_size(size)?;
        if size != live {
            if state != "ACTIVE" {
                return Err(Reply::error(
                    409,
                    "IncorrectState",
                    format!("GPU memory cluster {id} is {state}; it can be resized only when ACTIVE."),
                ));
            }
            let fabric_id = gmc["gpuMemoryFabricId"].as_str().unwrap_or_default();
            let available = store.resources.get(fabric_id).map_or(0, |f| available_hosts(store, f));
            if size - live > available {
                return Err(invalid(format!(
                    "size {size} needs {} more host(s); GPU memory fabric {fabric_id} has {available} available.",
                    size - live
                )));
            }
            resize = Some(size);
        }
    }
    let compartment = gmc["compartmentId"].as_str().unwrap_or_default().to_owned();
    let s = store.resources.get_mut(id).expect("found above");
    merge(&mut s.value, body, &["gpuMemoryFabricId", "computeClusterId"]);
    let value = s.value.clone();
    match resize {
        Some(size) => {
            set_state(store.resources.get_mut(id).expect("found above"), "UPDATING");
            if size > live && !capacity_failure {
                let want = (size - live) as u64;
                let ad = value["availabilityDomain"].as_str().unwrap_or_default().to_owned();
                let fits = configuration_shape(store, value["instanceConfigurationId"].as_str().unwrap_or_default())
                    .and_then(|shape| room(store, &ad, &shape))
                    .map_or(want, |r| r.min(want));
                launch_gpu_memory_cluster_instances(store, &value, fits);
                if fits < want {
                    short = true;
                    if let Some(s) = store.resources.get_mut(id) {
                        s.value["size"] = json!(live as u64 + fits);
                    }
                }
            }
            let members: Vec<String> = gmc_members(store, id).into_iter().cloned().collect();
            // The newest go first.
            for victim in members.iter().rev().take((live - size).max(0) as usize) {
                if let Some(m) = store.resources.get_mut(victim) {
                    set_state(m, "TERMINATING");
                }
            }
        }
        None => store.resources.get_mut(id).expect("found above").version += 1,
    }
    let failure = ((capacity_failure && resize.is_some_and(|n| n > live)) || short).then(host_capacity_failure);
    let wr = new_work_request(store, CORE, "UpdateComputeGpuMemoryCluster", &compartment, vec![(GMC, id.to_owned(), "UPDATED")], failure);
    Ok(shown_reply(store, 200, id).header("opc-work-request-id", wr))
}

/// ListComputeGpuMemoryClusterInstances: the cluster's instances as ComputeGpuMemoryClusterInstanceSummary
/// (no tags), terminated ones included as ListInstances includes them; a collection (`{"items"}`).
fn list_gpu_memory_cluster_instances(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    store.resources.get(id).filter(|s| s.kind == GMC).ok_or_else(Reply::not_found)?;
    let items = store
        .resources
        .iter()
        .filter(|(_, s)| s.kind == "instance" && s.value["_gpuMemoryClusterId"] == id)
        .map(|(instance, s)| {
            let mut v = raw_view(s);
            v["instanceShape"] = v["shape"].clone();
            (instance.clone(), as_model(v, "ComputeGpuMemoryClusterInstanceSummary"))
        })
        .collect();
    listing(items, req.query, true)
}

/// An Object Storage link needs an existing file system in its availability domain, a path and a prefix.
fn check_link(store: &Store, value: &Value) -> Result<(), Reply> {
    let ad = require(value, "/availabilityDomain")?;
    let fs_id = require(value, "/lustreFileSystemId")?;
    let fs = existing(store, &fs_id, "lustrefilesystem")?;
    let path = require(value, "/fileSystemPath")?;
    let prefix = require(value, "/objectStoragePrefix")?;
    if !object_storage_prefix_valid(&prefix) {
        return Err(invalid(format!(
            "objectStoragePrefix {prefix:?} is invalid: give the Object Storage namespace and bucket, namespace:/bucket/optionalPrefix."
        )));
    }
    if !value["isOverwrite"].is_boolean() {
        return Err(missing("isOverwrite"));
    }
    if !path.starts_with('/') {
        return Err(invalid(format!("fileSystemPath {path:?} must be an absolute path.")));
    }
    if fs.value["availabilityDomain"].as_str() != Some(ad.as_str()) {
        return Err(invalid(format!("Lustre file system {fs_id} is not in availability domain {ad}.")));
    }
    Ok(())
}

/// `namespace:/bucket` with an optional `/prefix`: a namespace and a bucket name of letters, digits, `-`, `_`
/// and `.`.
fn object_storage_prefix_valid(prefix: &str) -> bool {
    let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match prefix.split_once(":/") {
        Some((namespace, rest)) => name_ok(namespace) && name_ok(rest.split('/').next().unwrap_or_default()),
        None => false,
    }
}

/// A sync job's state now: IN_PROGRESS for a step, then SUCCEEDED (or FAILED).
fn sync_state(job: &SyncJob) -> &'static str {
    match (job.started.elapsed().as_secs_f64() >= SETTLE, job.failure.is_some()) {
        (false, _) => "IN_PROGRESS",
        (true, false) => "SUCCEEDED",
        (true, true) => "FAILED",
    }
}

fn sync_view(job: &SyncJob) -> Value {
    let mut v = job.value.clone();
    let state = sync_state(job);
    v["lifecycleState"] = json!(state);
    if state != "IN_PROGRESS" {
        v["timeFinished"] = json!(job.accepted);
    }
    if let (Some(why), "FAILED") = (&job.failure, state) {
        v["lifecycleDetails"] = json!(why);
    }
    v
}

/// A resource as its Get and List show it: an Object Storage link with its current and last sync job.
fn shown(store: &Store, s: &Stored) -> Value {
    let mut v = raw_view(s);
    let id = s.value["id"].as_str().unwrap_or_default();
    // A GPU memory cluster's size counts its instances running or launching; a fabric's available hosts are
    // the ones its clusters' instances do not hold, and it is OCCUPIED while none is free.
    if s.kind == GMC {
        v["size"] = json!(gmc_members(store, id).len());
    }
    if s.kind == FABRIC {
        let available = available_hosts(store, s);
        v["availableHostCount"] = json!(available);
        if v["lifecycleState"] == "AVAILABLE" && available == 0 {
            v["lifecycleState"] = json!("OCCUPIED");
        }
        let clusters: Vec<&String> = store
            .resources
            .iter()
            .filter(|(_, c)| c.kind == GMC && !finished(c) && c.value["gpuMemoryFabricId"] == id)
            .map(|(k, _)| k)
            .collect();
        v["computeGpuMemoryClusters"] = json!(clusters);
    }
    if s.kind == "objectstoragelink" {
        let id = s.value["id"].as_str().unwrap_or_default();
        // Ids carry a zero-padded counter: the last one is the newest.
        let jobs: Vec<(&String, &SyncJob)> = store.sync_jobs.iter().filter(|(_, j)| j.link == id).collect();
        let finished = jobs.iter().rev().find(|(_, j)| sync_state(j) != "IN_PROGRESS");
        if let Some((job, _)) = jobs.iter().rev().find(|(_, j)| sync_state(j) == "IN_PROGRESS") {
            v["currentJobId"] = json!(job);
        }
        if let Some((job, _)) = finished {
            v["lastJobId"] = json!(job);
        }
    }
    v
}

/// StartImportFromObject: one sync job at a time, on an ACTIVE link.
fn start_import(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    let link = existing(store, id, "objectstoragelink")?;
    let state = state_of(link);
    if state != "ACTIVE" {
        return Err(Reply::error(409, "IncorrectState", format!("Object Storage link {id} is {state}; an import needs it ACTIVE.")));
    }
    if store.sync_jobs.values().any(|j| j.link == id && sync_state(j) == "IN_PROGRESS") {
        return Err(Reply::error(409, "IncorrectState", format!("Object Storage link {id} already has a sync job in progress.")));
    }
    let (path, prefix, overwrite) =
        (link.value["fileSystemPath"].clone(), link.value["objectStoragePrefix"].clone(), link.value["isOverwrite"].clone());
    let job_id = ocid(store, "lustresyncjob");
    let accepted = now_rfc3339();
    let value = json!({
        "id": job_id, "parentId": id, "jobType": "IMPORT", "lifecycleState": "IN_PROGRESS", "isOverwrite": overwrite,
        "timeStarted": accepted, "lustreFileSystemPath": path, "objectStoragePath": prefix,
        "totalObjectsScanned": 0, "objectsTransferred": 0, "bytesTransferred": 0, "skippedErrorCount": 0,
    });
    let failure = req.capacity_failure.then(|| "The import could not be completed: out of capacity for the transfer.".to_owned());
    let job = SyncJob { link: id.to_owned(), started: Instant::now(), accepted, failure, value };
    let reply = Reply::json(200, sync_view(&job));
    store.sync_jobs.insert(job_id, job);
    Ok(reply)
}

fn get_sync_job(store: &Store, req: &Req) -> Result<Reply, Reply> {
    existing(store, &req.route.id, "objectstoragelink")?;
    let job = store.sync_jobs.get(&req.route.child).filter(|j| j.link == req.route.id).ok_or_else(Reply::not_found)?;
    Ok(Reply::json(200, sync_view(job)))
}

/// Query parameters that are not filters.
const NOT_FILTERS: [&str; 4] = ["limit", "page", "sortBy", "sortOrder"];

/// Filters (every other parameter must equal a top-level string field), one page, and the answer in the
/// collection's form: a bare array for Core, `{"items"}` for Lustre.
fn listing(items: Vec<(String, Value)>, query: &BTreeMap<String, String>, wrapped: bool) -> Result<Reply, Reply> {
    let limit = match query.get("limit") {
        None => MAX_PAGE,
        Some(l) => l.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| invalid(format!("limit {l:?} is not a positive integer.")))?,
    }
    .min(MAX_PAGE);
    let after = match query.get("page") {
        None => None,
        Some(token) => Some(
            URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|raw| String::from_utf8(raw).ok())
                .and_then(|s| s.strip_prefix("after:").map(str::to_owned))
                .ok_or_else(|| invalid(format!("page {token:?} is not a page token this service issued.")))?,
        ),
    };
    let rest: Vec<(String, Value)> = items
        .into_iter()
        .filter(|(key, _)| after.as_ref().is_none_or(|a| key > a))
        .filter(|(_, v)| {
            query.iter().all(|(k, want)| NOT_FILTERS.contains(&k.as_str()) || v.get(k).and_then(Value::as_str) == Some(want.as_str()))
        })
        .collect();
    let next = (rest.len() > limit).then(|| URL_SAFE_NO_PAD.encode(format!("after:{}", rest[limit - 1].0)));
    let page: Vec<Value> = rest.into_iter().take(limit).map(|(_, v)| v).collect();
    let body = if wrapped { json!({"items": page}) } else { Value::Array(page) };
    let reply = Reply::json(200, body);
    Ok(match next {
        Some(token) => reply.header("opc-next-page", token),
        None => reply,
    })
}

/// Platform images: (OCID, display name, operating system, shapes it runs on; empty = non-GPU shapes only).
const IMAGES: [(&str, &str, &str, &[&str]); 4] = [
    (
        "ocid1.image.oc1.iad.emulator-ol8-gpu",
        "Oracle-Linux-8.10-Gen2-GPU-2026.10.30-0",
        "Oracle Linux",
        &[
            "BM.GPU.H100.8",
            "BM.GPU.H200.8",
            "BM.GPU.B200.8",
            "BM.GPU.MI300X.8",
            "BM.GPU.B300.8",
            "BM.GPU.L40S.4",
            "BM.GPU.A100-v2.8",
            "VM.GPU.A10.1",
        ],
    ),
    (
        "ocid1.image.oc1.iad.emulator-ubuntu-gpu",
        "Canonical-Ubuntu-22.04-Gen2-GPU-2026.10.30-0",
        "Canonical Ubuntu",
        &["BM.GPU.H100.8", "BM.GPU.H200.8", "BM.GPU.B200.8", "BM.GPU.B300.8"],
    ),
    ("ocid1.image.oc1.iad.emulator-ol8", "Oracle-Linux-8.10-2026.10.30-0", "Oracle Linux", &[]),
    // GB200/GB300 hosts are Arm (Grace): an aarch64 GPU image.
    (
        "ocid1.image.oc1.iad.emulator-ol8-aarch64-gpu",
        "Oracle-Linux-8.10-aarch64-GPU-2026.10.30-0",
        "Oracle Linux",
        &["BM.GPU.GB200.4", "BM.GPU.GB200-v2.4", "BM.GPU.GB200-v3.4", "BM.GPU.GB300.4"],
    ),
];

/// ListImages: the platform images, newest first, filtered by `shape` and `operatingSystem`.
fn list_images(req: &Req) -> Result<Reply, Reply> {
    if !req.query.contains_key("compartmentId") {
        return Err(missing("compartmentId"));
    }
    let items = IMAGES
        .iter()
        .filter(|(_, _, _, shapes)| {
            req.query
                .get("shape")
                .is_none_or(|want| if want.starts_with("BM.GPU") { shapes.contains(&want.as_str()) } else { shapes.is_empty() })
        })
        .filter(|(_, _, os, _)| req.query.get("operatingSystem").is_none_or(|want| want == os))
        .enumerate()
        .map(|(i, (id, name, os, _))| {
            (
                format!("{i:04}"),
                json!({"id": id, "displayName": name, "operatingSystem": os, "lifecycleState": "AVAILABLE",
                                       "timeCreated": "2026-10-30T00:00:00.000Z"}),
            )
        })
        .collect();
    let mut query = req.query.clone();
    query.retain(|k, _| !matches!(k.as_str(), "shape" | "operatingSystem" | "compartmentId"));
    listing(items, &query, false)
}

/// The addresses live instances hold in `subnet`.
fn used_ips(store: &Store, subnet: &str) -> std::collections::BTreeSet<String> {
    store
        .resources
        .values()
        .filter(|r| r.kind == "instance" && !matches!(state_of(r).as_str(), "TERMINATING" | "TERMINATED"))
        .filter(|r| r.value["_subnetId"].as_str() == Some(subnet))
        .filter_map(|r| r.value["_privateIp"].as_str().map(str::to_owned))
        .collect()
}

/// An address of `subnet` no live instance holds, from the `n`th on, as OCI assigns one when none is asked for.
fn free_ip(store: &Store, subnet: &str, n: u64) -> String {
    let used = used_ips(store, subnet);
    (n..n + 65536).map(|k| private_ip(store, subnet, k)).find(|ip| !used.contains(ip)).unwrap_or_else(|| private_ip(store, subnet, n))
}

/// The address the `n`th resource gets in its subnet: the subnet's base plus an offset that skips the
/// addresses OCI reserves (the first two and the last).
fn private_ip(store: &Store, subnet: &str, n: u64) -> String {
    let cidr = store.resources.get(subnet).and_then(|s| s.value["cidrBlock"].as_str().map(str::to_owned)).unwrap_or_default();
    let (base, len) = parse_cidr(&cidr).unwrap_or((u32::from(Ipv4Addr::new(10, 0, 0, 0)), 16));
    let hosts = (1u64 << (32 - len)).saturating_sub(3).max(1);
    Ipv4Addr::from(base + 2 + (n % hosts) as u32).to_string()
}

/// The primary VNIC of a live instance: (attachment, VNIC id, subnet, private IP).
fn primary_vnic(instance: &Stored) -> Option<(String, String, String, String)> {
    let v = &instance.value;
    if instance.kind != "instance" || matches!(state_of(instance).as_str(), "TERMINATING" | "TERMINATED") {
        return None;
    }
    let id = v["id"].as_str()?;
    let suffix = id.strip_prefix("ocid1.instance.")?;
    Some((
        format!("ocid1.vnicattachment.{suffix}"),
        format!("ocid1.vnic.{suffix}"),
        v["_subnetId"].as_str().unwrap_or_default().to_owned(),
        v["_privateIp"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// ListVnicAttachments: filtered by compartment (required), availability domain and instance.
fn list_vnic_attachments(store: &Store, req: &Req) -> Result<Reply, Reply> {
    if !req.query.contains_key("compartmentId") {
        return Err(missing("compartmentId"));
    }
    let items = store
        .resources
        .values()
        .filter_map(|s| {
            let (attachment, vnic, subnet, _) = primary_vnic(s)?;
            let v = &s.value;
            Some((
                attachment.clone(),
                json!({"id": attachment, "instanceId": v["id"], "vnicId": vnic, "subnetId": subnet, "compartmentId": v["compartmentId"],
                       "availabilityDomain": v["availabilityDomain"], "lifecycleState": "ATTACHED", "nicIndex": 0, "timeCreated": v["timeCreated"]}),
            ))
        })
        .collect();
    listing(items, req.query, false)
}

/// GetVnic: a live instance's primary VNIC (a Vnic).
fn get_vnic(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let (s, (_, vnic, subnet, ip)) = store
        .resources
        .values()
        .find_map(|s| primary_vnic(s).filter(|(_, vnic, _, _)| *vnic == req.route.id).map(|p| (s, p)))
        .ok_or_else(Reply::not_found)?;
    let v = &s.value;
    Ok(Reply::json(
        200,
        json!({"id": vnic, "availabilityDomain": v["availabilityDomain"], "compartmentId": v["compartmentId"],
               "displayName": v["displayName"], "lifecycleState": "AVAILABLE", "isPrimary": true, "privateIp": ip, "subnetId": subnet,
               "nsgIds": v["_nsgIds"], "skipSourceDestCheck": false, "timeCreated": v["timeCreated"], "freeformTags": {}, "definedTags": {}}),
    ))
}

/// ListPrivateIps: by subnet (or VNIC); one of them is required.
fn list_private_ips(store: &Store, req: &Req) -> Result<Reply, Reply> {
    if !req.query.contains_key("subnetId") && !req.query.contains_key("vnicId") {
        return Err(invalid("One of subnetId, vnicId or vlanId is required."));
    }
    let items = store
        .resources
        .values()
        .filter_map(|s| {
            let (_, vnic, subnet, ip) = primary_vnic(s)?;
            let id = vnic.replacen("ocid1.vnic.", "ocid1.privateip.", 1);
            Some((
                id.clone(),
                json!({"id": id, "vnicId": vnic, "subnetId": subnet, "ipAddress": ip, "isPrimary": true,
                                     "compartmentId": s.value["compartmentId"], "availabilityDomain": s.value["availabilityDomain"]}),
            ))
        })
        .collect();
    listing(items, req.query, false)
}

fn list(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let c = req.collection();
    if c.compartment_required && !req.query.contains_key("compartmentId") {
        return Err(missing("compartmentId"));
    }
    // ListInstances filters by compute cluster, which an Instance does not show.
    let mut query = req.query.clone();
    let cluster = if c.kind == "instance" { query.remove("computeClusterId") } else { None };
    // Filters named otherwise than the field they match, or on a field the summary does not show (a fabric's
    // availability domain is not in its model at all), applied before the summary model.
    let renamed: &[(&str, &str)] = match c.kind {
        FABRIC => &[
            ("computeGpuMemoryFabricId", "id"),
            ("computeGpuMemoryFabricLifecycleState", "lifecycleState"),
            ("computeGpuMemoryFabricHealth", "fabricHealth"),
            ("availabilityDomain", "_availabilityDomain"),
        ],
        GMC => &[
            ("computeGpuMemoryClusterId", "id"),
            ("computeGpuMemoryFabricId", "gpuMemoryFabricId"),
            ("computeClusterId", "computeClusterId"),
        ],
        _ => &[],
    };
    let before: Vec<(&str, String)> = renamed.iter().filter_map(|(param, field)| query.remove(*param).map(|want| (*field, want))).collect();
    // Ids carry a zero-padded counter, so id order within a kind is creation order.
    let items = store
        .resources
        .iter()
        .filter(|(_, s)| s.kind == c.kind && cluster.as_ref().is_none_or(|cc| s.value["computeClusterId"] == cc.as_str()))
        .map(|(id, s)| (id, s, shown(store, s)))
        .filter(|(_, s, v)| {
            before.iter().all(|(field, want)| {
                let from = if field.starts_with('_') { &s.value } else { v };
                from[*field].as_str() == Some(want.as_str())
            })
        })
        .map(|(id, s, v)| (id.clone(), as_model(v, summary_model(s.kind))))
        .collect();
    // Core lists are bare arrays, except the compute cluster and GPU memory fabric and cluster lists
    // (collections); Lustre's are collections.
    listing(items, &query, c.version == LUSTRE || matches!(c.kind, "computecluster" | FABRIC | GMC))
}

fn get(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let s = store.resources.get(&req.route.id).filter(|s| s.kind == req.collection().kind).ok_or_else(Reply::not_found)?;
    Ok(Reply::json(200, as_model(shown(store, s), full_model(s.kind))).header("etag", etag(s)))
}

/// Fields an update never changes.
const IMMUTABLE: [&str; 7] = ["id", "compartmentId", "lifecycleState", "timeCreated", "availabilityDomain", "vcnId", "lustreFileSystemId"];

/// Merges the body's top-level fields into the resource (so `freeformTags` is replaced whole).
fn merge(target: &mut Value, body: &Value, skip: &[&str]) {
    if let (Some(target), Some(body)) = (target.as_object_mut(), body.as_object()) {
        for (k, v) in body {
            if !k.starts_with('_') && !IMMUTABLE.contains(&k.as_str()) && !skip.contains(&k.as_str()) {
                target.insert(k.clone(), v.clone());
            }
        }
    }
}

fn update(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let c = req.collection();
    let id = req.route.id.as_str();
    let body = json_body(req.body)?;
    let s = store.resources.get(id).filter(|s| s.kind == c.kind).ok_or_else(Reply::not_found)?;
    check_if_match(req.headers, s)?;
    let state = state_of(s);
    if matches!(state.as_str(), "TERMINATING" | "TERMINATED" | "DELETING" | "DELETED") {
        return Err(Reply::error(409, "IncorrectState", format!("{} {id} is {state} and can no longer be updated.", c.name)));
    }
    match c.kind {
        "clusternetwork" => update_cluster_network(store, id, &body, &state),
        "lustrefilesystem" => update_lustre(store, id, &body, &state),
        GMC => update_gpu_memory_cluster(store, id, &body, &state, req.capacity_failure),
        // UpdateComputeGpuMemoryFabricDetails: name, tags and firmware preferences, nothing of its hosts.
        FABRIC => {
            let s = store.resources.get_mut(id).expect("found above");
            let kept: serde_json::Map<String, Value> = body
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| matches!(k.as_str(), "displayName" | "freeformTags" | "definedTags" | "memoryFabricPreferences"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            merge(&mut s.value, &Value::Object(kept), &[]);
            s.version += 1;
            Ok(shown_reply(store, 200, id))
        }
        _ => {
            let s = store.resources.get_mut(id).expect("found above");
            if c.kind == "instance" {
                check_fixed_metadata(&s.value, &body)?;
            }
            merge(&mut s.value, &body, &[]);
            s.version += 1;
            Ok(resource_reply(200, s))
        }
    }
}

/// UpdateInstanceDetails.metadata: "Any set of key/value pairs provided here will completely replace the current
/// set of key/value pairs in the `metadata` field on the instance. The "user_data" field and the
/// "ssh_authorized_keys" field cannot be changed after an instance has launched. Any request that updates,
/// removes, or adds either of these fields will be rejected."
fn check_fixed_metadata(instance: &Value, body: &Value) -> Result<(), Reply> {
    let Some(sent) = body.get("metadata") else { return Ok(()) };
    for key in ["user_data", "ssh_authorized_keys"] {
        if sent.get(key) != instance["metadata"].get(key) {
            return Err(invalid(format!("metadata.{key} cannot be changed after an instance has launched: send the value it has.")));
        }
    }
    Ok(())
}

/// Resizes pools (launching from the pool's instance configuration, or terminating the newest instances)
/// and renames or retags the cluster network.
fn update_cluster_network(store: &mut Store, id: &str, body: &Value, state: &str) -> Result<Reply, Reply> {
    let network = &store.resources[id].value;
    let mut pools = network["instancePools"].as_array().cloned().unwrap_or_default();
    let placement = PoolPlacement {
        network: id.to_owned(),
        compartment: network["compartmentId"].as_str().unwrap_or_default().to_owned(),
        ad: network["placementConfiguration"]["availabilityDomain"].as_str().unwrap_or_default().to_owned(),
        subnet: text(network, "/placementConfiguration/primaryVnicSubnets/subnetId")
            .or_else(|| text(network, "/placementConfiguration/primarySubnetId"))
            .unwrap_or_default()
            .to_owned(),
    };
    let mut resizes = Vec::new();
    let mut configs = Vec::new();
    let mut short = false;
    if let Some(requested) = body.get("instancePools") {
        let requested = requested.as_array().ok_or_else(|| invalid("instancePools must be a list."))?;
        for r in requested {
            let pool_id = text(r, "/id").ok_or_else(|| missing("instancePools[].id"))?;
            let size = r["size"].as_u64().ok_or_else(|| invalid("instancePools[].size must be a non-negative integer."))?;
            let index = pools
                .iter()
                .position(|p| p["id"] == pool_id)
                .ok_or_else(|| invalid(format!("Instance pool {pool_id} is not part of cluster network {id}.")))?;
            // A new instance configuration is what the pool launches from next; its instances keep theirs.
            if let Some(config) = text(r, "/instanceConfigurationId") {
                existing(store, config, "instanceconfiguration")?;
                configs.push((index, config.to_owned()));
            }
            if pools[index]["size"].as_u64() != Some(size) {
                resizes.push((index, size));
            }
        }
    }
    if !resizes.is_empty() && state != "RUNNING" {
        return Err(Reply::error(409, "IncorrectState", format!("Cluster network {id} is {state}; it can be resized only when RUNNING.")));
    }
    for (index, config) in configs {
        pools[index]["instanceConfigurationId"] = json!(config);
    }
    for &(index, size) in &resizes {
        let pool_id = pools[index]["id"].as_str().unwrap_or_default().to_owned();
        let live: Vec<String> = store
            .resources
            .iter()
            .filter(|(_, s)| s.kind == "instance" && s.value["instancePoolId"] == pool_id.as_str())
            .filter(|(_, s)| !matches!(state_of(s).as_str(), "TERMINATING" | "TERMINATED"))
            .map(|(id, _)| id.clone())
            .collect();
        let have = live.len() as u64;
        let mut size = size;
        if size > have {
            // Under a capacity limit the pool grows by what fits, and its size says so.
            let fits = pool_room(store, &placement.ad, &pools[index]).map_or(size - have, |r| r.min(size - have));
            launch_pool_instances(store, &placement, &pools[index], fits);
            if fits < size - have {
                short = true;
                size = have + fits;
            }
        }
        // The newest go first.
        for victim in live.iter().rev().take(have.saturating_sub(size) as usize) {
            if let Some(s) = store.resources.get_mut(victim) {
                set_state(s, "TERMINATING");
            }
        }
        pools[index]["size"] = json!(size);
    }
    let s = store.resources.get_mut(id).expect("found above");
    merge(&mut s.value, body, &["instancePools", "placementConfiguration"]);
    s.value["instancePools"] = Value::Array(pools);
    if resizes.is_empty() {
        s.version += 1;
    } else {
        set_state(s, "SCALING");
    }
    let compartment = placement.compartment.clone();
    let mut reply = resource_reply(200, &store.resources[id]);
    let failure = short.then(host_capacity_failure);
    let wr =
        new_work_request(store, CORE, "UpdateClusterNetwork", &compartment, vec![("clusternetwork", id.to_owned(), "UPDATED")], failure);
    reply = reply.header("opc-work-request-id", wr);
    Ok(reply)
}

/// InstanceAction's `action` values (the `oci` SDK's `instance_action`: "Allowed values are ...").
const INSTANCE_ACTIONS: [&str; 8] =
    ["STOP", "START", "SOFTRESET", "RESET", "SOFTSTOP", "SENDDIAGNOSTICINTERRUPT", "DIAGNOSTICREBOOT", "REBOOTMIGRATE"];

/// Sets an instance's power state; `restart` makes a STOPPING instance come back up by itself (a reset).
fn power(s: &mut Stored, state: &str, restart: bool) {
    set_state(s, state);
    match s.value.as_object_mut() {
        Some(v) if restart => {
            v.insert("_restart".into(), json!(true));
        }
        Some(v) => {
            v.remove("_restart");
        }
        None => {}
    }
}

/// InstanceAction (`POST /instances/{id}?action=...`), as the SDK's documentation of each action has it:
/// STOP/SOFTSTOP power a RUNNING instance off (STOPPING, then STOPPED); START powers a STOPPED one on
/// (STARTING, then RUNNING); RESET, SOFTRESET, DIAGNOSTICREBOOT and REBOOTMIGRATE power a RUNNING one off and
/// on again (STOPPING, STARTING, RUNNING); SENDDIAGNOSTICINTERRUPT changes no state. An action a state does
/// not take is OCI's 409 `IncorrectState`; STOP of a stopped or START of a running instance changes nothing.
/// Powering off clears `timeMaintenanceRebootDue` ("reset to empty as soon as instance reaches Stopped
/// state", in the field's description; a reboot migrates the instance off the hardware due for maintenance).
/// The optional InstancePowerActionDetails body, if any, must be a JSON object; it is not used.
fn instance_action(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    let action = req.query.get("action").filter(|a| !a.is_empty()).ok_or_else(|| missing("action"))?.clone();
    if !INSTANCE_ACTIONS.contains(&action.as_str()) {
        return Err(invalid(format!("action {action:?} is invalid; valid values are {}.", INSTANCE_ACTIONS.join(", "))));
    }
    if !req.body.is_empty() {
        json_body(req.body)?;
    }
    let s = store.resources.get(id).filter(|s| s.kind == "instance").ok_or_else(Reply::not_found)?;
    check_if_match(req.headers, s)?;
    let state = state_of(s);
    let refuse = || Reply::error(409, "IncorrectState", format!("Instance {id} is {state}; it cannot take the action {action} now."));
    let s = store.resources.get_mut(id).expect("found above");
    let off = |s: &mut Stored| {
        if let Some(v) = s.value.as_object_mut() {
            v.remove("timeMaintenanceRebootDue");
        }
    };
    match (state.as_str(), action.as_str()) {
        ("RUNNING", "STOP" | "SOFTSTOP") => {
            power(s, "STOPPING", false);
            off(s);
        }
        ("RUNNING", "RESET" | "SOFTRESET" | "DIAGNOSTICREBOOT" | "REBOOTMIGRATE") => {
            power(s, "STOPPING", true);
            off(s);
        }
        ("STOPPED", "START") => power(s, "STARTING", false),
        ("RUNNING", "START" | "SENDDIAGNOSTICINTERRUPT") | ("STOPPED", "STOP" | "SOFTSTOP") => {}
        _ => return Err(refuse()),
    }
    Ok(resource_reply(200, &store.resources[id]))
}

/// DetachInstancePoolInstance (`POST /instancePools/{id}/actions/detachInstance`, DetachInstancePoolInstanceDetails):
/// the instance leaves its cluster network's pool; `isAutoTerminate` (default false) terminates it;
/// `isDecrementSize` (default true) makes the pool one smaller, else the pool launches a replacement from its
/// instance configuration. Only while the cluster network is RUNNING (409 `IncorrectState` otherwise), and
/// only an instance of that pool (400 `InvalidParameter`). Answered 202 with no body (the SDK's response has
/// no data) and a work request.
fn detach_pool_instance(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let pool_id = req.route.id.as_str();
    let body = json_body(req.body)?;
    let instance_id = require(&body, "/instanceId")?;
    for flag in ["isDecrementSize", "isAutoTerminate"] {
        if !body[flag].is_null() && !body[flag].is_boolean() {
            return Err(invalid(format!("{flag} must be a boolean.")));
        }
    }
    let decrement = body["isDecrementSize"].as_bool().unwrap_or(true);
    let terminate = body["isAutoTerminate"].as_bool().unwrap_or(false);
    let (network_id, index) = store
        .resources
        .iter()
        .filter(|(_, s)| s.kind == "clusternetwork" && !finished(s))
        .find_map(|(id, s)| {
            let pools = s.value["instancePools"].as_array()?;
            pools.iter().position(|p| p["id"] == pool_id).map(|i| (id.clone(), i))
        })
        .ok_or_else(|| Reply::error(404, "NotAuthorizedOrNotFound", format!("Instance pool {pool_id} not found or not authorized.")))?;
    let network = &store.resources[&network_id];
    let state = state_of(network);
    if state != "RUNNING" {
        return Err(Reply::error(
            409,
            "IncorrectState",
            format!("The instance pool {pool_id} of cluster network {network_id} is {state}; instances are detached only when RUNNING."),
        ));
    }
    let attached = store.resources.get(&instance_id).is_some_and(|s| live_instance(s) && s.value["instancePoolId"] == pool_id);
    if !attached {
        return Err(invalid(format!("Instance {instance_id} is not attached to instance pool {pool_id}.")));
    }
    let compartment = network.value["compartmentId"].as_str().unwrap_or_default().to_owned();
    let placement = PoolPlacement {
        network: network_id.clone(),
        compartment: compartment.clone(),
        ad: network.value["placementConfiguration"]["availabilityDomain"].as_str().unwrap_or_default().to_owned(),
        subnet: text(&network.value, "/placementConfiguration/primaryVnicSubnets/subnetId")
            .or_else(|| text(&network.value, "/placementConfiguration/primarySubnetId"))
            .unwrap_or_default()
            .to_owned(),
    };
    let pool = network.value["instancePools"][index].clone();
    let s = store.resources.get_mut(&instance_id).expect("found above");
    if let Some(v) = s.value.as_object_mut() {
        v.remove("instancePoolId");
        v.remove("clusterNetworkId");
    }
    if terminate {
        power(s, "TERMINATING", false);
    } else {
        s.version += 1;
    }
    if decrement {
        let n = store.resources.get_mut(&network_id).expect("found above");
        let size = n.value["instancePools"][index]["size"].as_u64().unwrap_or(1).saturating_sub(1);
        n.value["instancePools"][index]["size"] = json!(size);
        n.version += 1;
    } else {
        launch_pool_instances(store, &placement, &pool, 1);
    }
    let wr = new_work_request(store, CORE, "DetachInstancePoolInstance", &compartment, vec![("instance", instance_id, "UPDATED")], None);
    Ok(Reply::empty(202).header("opc-work-request-id", wr))
}

/// Capacity only grows, by File Storage with Lustre's rules; the file system is UPDATING meanwhile.
fn update_lustre(store: &mut Store, id: &str, body: &Value, state: &str) -> Result<Reply, Reply> {
    if state != "ACTIVE" {
        return Err(Reply::error(
            409,
            "IncorrectState",
            format!("Lustre file system {id} is {state}; it can be updated only when ACTIVE."),
        ));
    }
    let s = &store.resources[id];
    let mut merged = s.value.clone();
    merge(&mut merged, body, &["fileSystemName", "subnetId", "managementServiceAddress", "lnet", "majorVersion"]);
    if let Some(requested) = body.get("capacityInGBs") {
        let old = s.value["capacityInGBs"].as_i64().unwrap_or_default();
        let new = requested.as_i64().ok_or_else(|| invalid("capacityInGBs must be an integer."))?;
        if new < old {
            return Err(invalid(format!("capacityInGBs can only grow: the file system has {old} GB, {new} GB was requested.")));
        }
    }
    check_lustre(&merged).map_err(invalid)?;
    let compartment = merged["compartmentId"].as_str().unwrap_or_default().to_owned();
    merged["timeUpdated"] = json!(now_rfc3339());
    let s = store.resources.get_mut(id).expect("found above");
    s.value = merged;
    set_state(s, "UPDATING");
    // UpdateLustreFileSystem answers with no body: the work request says how it goes.
    let reply = Reply::empty(202).header("etag", etag(s));
    let resources = vec![("lustrefilesystem", id.to_owned(), "UPDATED")];
    let wr = new_work_request(store, LUSTRE, "UPDATE_LUSTRE_FILE_SYSTEM", &compartment, resources, None);
    Ok(reply.header("opc-work-request-id", wr))
}

/// What still depends on a resource (kind and id of each), which stops its deletion.
fn dependants(store: &Store, kind: &str, id: &str) -> Vec<String> {
    let uses = |list: &Value| list.as_array().is_some_and(|a| a.iter().any(|x| x == id));
    store
        .resources
        .iter()
        .filter(|(_, s)| !finished(s))
        .filter(|(_, s)| match (kind, s.kind) {
            ("vcn", "subnet" | "networksecuritygroup") => s.value["vcnId"] == id,
            // An OKE cluster holds its VCN, its endpoint's subnet and security groups (and its load balancers' subnets).
            ("vcn", oke::CLUSTER) => s.value["vcnId"] == id,
            ("subnet", oke::CLUSTER) => s.value["endpointConfig"]["subnetId"] == id || uses(&s.value["options"]["serviceLbSubnetIds"]),
            ("networksecuritygroup", oke::CLUSTER) => uses(&s.value["endpointConfig"]["nsgIds"]),
            ("subnet", "instance") => s.value["_subnetId"] == id,
            ("subnet", "lustrefilesystem") => s.value["subnetId"] == id,
            ("subnet", "clusternetwork") => {
                s.value["placementConfiguration"]["primaryVnicSubnets"]["subnetId"] == id
                    || s.value["placementConfiguration"]["primarySubnetId"] == id
            }
            ("networksecuritygroup", "instance") => uses(&s.value["_nsgIds"]),
            ("networksecuritygroup", "lustrefilesystem") => uses(&s.value["nsgIds"]),
            ("computecluster", "instance") => s.value["computeClusterId"] == id,
            ("instanceconfiguration", "clusternetwork") => {
                s.value["instancePools"].as_array().is_some_and(|pools| pools.iter().any(|p| p["instanceConfigurationId"] == id))
            }
            ("lustrefilesystem", "objectstoragelink") => s.value["lustreFileSystemId"] == id,
            ("computecluster", GMC) => s.value["computeClusterId"] == id,
            ("instanceconfiguration", GMC) => s.value["instanceConfigurationId"] == id,
            _ => false,
        })
        .map(|(other, s)| format!("{} {other}", collection_of(s.kind).map_or(s.kind, |c| c.name)))
        .collect()
}

fn delete(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let c = req.collection();
    let id = req.route.id.as_str();
    let s = store.resources.get(id).filter(|s| s.kind == c.kind).ok_or_else(Reply::not_found)?;
    check_if_match(req.headers, s)?;
    if let Some(preserve) = req.query.get("preserveBootVolume")
        && !matches!(preserve.as_str(), "true" | "false")
    {
        return Err(invalid(format!("preserveBootVolume {preserve:?} must be true or false.")));
    }
    let compartment = s.value["compartmentId"].as_str().unwrap_or_default().to_owned();
    let state = state_of(s);
    let blocking = dependants(store, c.kind, id);
    if !blocking.is_empty() {
        return Err(Reply::error(
            409,
            "Conflict",
            format!("{} {id} cannot be deleted while other resources depend on it: {}.", c.name, blocking.join(", ")),
        ));
    }
    let ending = matches!(state.as_str(), "TERMINATING" | "TERMINATED" | "DELETING");
    match c.kind {
        // Terminated instances and cluster networks stay listed as TERMINATED, as in OCI.
        "instance" => {
            if !ending {
                set_state(store.resources.get_mut(id).expect("found above"), "TERMINATING");
            }
            Ok(Reply::empty(204))
        }
        "clusternetwork" => {
            if !ending {
                set_state(store.resources.get_mut(id).expect("found above"), "TERMINATING");
                // Terminating a cluster network terminates its instance pools' instances.
                for s in store.resources.values_mut().filter(|s| s.kind == "instance" && s.value["clusterNetworkId"] == id) {
                    if !matches!(state_of(s).as_str(), "TERMINATING" | "TERMINATED") {
                        set_state(s, "TERMINATING");
                    }
                }
            }
            let resources = vec![("clusternetwork", id.to_owned(), "DELETED")];
            let wr = new_work_request(store, CORE, "TerminateClusterNetwork", &compartment, resources, None);
            Ok(Reply::empty(204).header("opc-work-request-id", wr))
        }
        // Deleting a GPU memory cluster terminates its instances; their hosts go back to the fabric.
        GMC => {
            if !ending {
                set_state(store.resources.get_mut(id).expect("found above"), "DELETING");
                for member in gmc_members(store, id).into_iter().cloned().collect::<Vec<_>>() {
                    if let Some(m) = store.resources.get_mut(&member) {
                        set_state(m, "TERMINATING");
                    }
                }
            }
            let resources = vec![(GMC, id.to_owned(), "DELETED")];
            let wr = new_work_request(store, CORE, "DeleteComputeGpuMemoryCluster", &compartment, resources, None);
            Ok(Reply::empty(204).header("opc-work-request-id", wr))
        }
        "lustrefilesystem" => {
            if !ending {
                set_state(store.resources.get_mut(id).expect("found above"), "DELETING");
            }
            let resources = vec![("lustrefilesystem", id.to_owned(), "DELETED")];
            let wr = new_work_request(store, LUSTRE, "DELETE_LUSTRE_FILE_SYSTEM", &compartment, resources, None);
            Ok(Reply::empty(202).header("opc-work-request-id", wr))
        }
        _ => {
            store.resources.remove(id);
            store.rules.remove(id);
            Ok(Reply::empty(204))
        }
    }
}

/// An NSG rule's source or destination and its type (CIDR_BLOCK unless given).
fn check_rule_end(store: &Store, rule: &Value, end: &str, kind_field: &str) -> Result<(), Reply> {
    let target = text(rule, &format!("/{end}")).ok_or_else(|| missing(&format!("securityRules[].{end}")))?;
    match text(rule, &format!("/{kind_field}")).unwrap_or("CIDR_BLOCK") {
        "CIDR_BLOCK" if parse_cidr(target).is_some() => Ok(()),
        "CIDR_BLOCK" => Err(invalid(format!("{end} {target:?} is not a CIDR block."))),
        "SERVICE_CIDR_BLOCK" => Ok(()),
        "NETWORK_SECURITY_GROUP" => match store.resources.get(target).filter(|s| s.kind == "networksecuritygroup") {
            Some(_) => Ok(()),
            None => Err(invalid(format!("{end} {target} is not an existing network security group."))),
        },
        other => Err(invalid(format!("{kind_field} {other:?} must be CIDR_BLOCK, SERVICE_CIDR_BLOCK or NETWORK_SECURITY_GROUP."))),
    }
}

fn add_security_rules(store: &mut Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    let group = existing(store, id, "networksecuritygroup")?;
    let state = state_of(group);
    if state != "AVAILABLE" {
        return Err(Reply::error(
            409,
            "IncorrectState",
            format!("Network security group {id} is {state}; rules can be added once it is AVAILABLE."),
        ));
    }
    let body = json_body(req.body)?;
    let rules = body["securityRules"].as_array().filter(|r| !r.is_empty()).ok_or_else(|| missing("securityRules"))?;
    for rule in rules {
        match text(rule, "/direction") {
            Some("INGRESS") => check_rule_end(store, rule, "source", "sourceType")?,
            Some("EGRESS") => check_rule_end(store, rule, "destination", "destinationType")?,
            other => return Err(invalid(format!("direction {other:?} must be INGRESS or EGRESS."))),
        }
        let protocol = text(rule, "/protocol").ok_or_else(|| missing("securityRules[].protocol"))?;
        if protocol != "all" && !protocol.parse::<u8>().is_ok_and(|p| p > 0) {
            return Err(invalid(format!("protocol {protocol:?} must be \"all\" or an IANA protocol number.")));
        }
    }
    let mut added = Vec::new();
    for rule in rules {
        store.next += 1;
        let mut rule = rule.clone();
        rule["id"] = json!(format!("{:06X}", store.next));
        let kind_field = if rule["direction"] == "INGRESS" { "sourceType" } else { "destinationType" };
        if text(&rule, &format!("/{kind_field}")).is_none() {
            rule[kind_field] = json!("CIDR_BLOCK");
        }
        if !rule["isStateless"].is_boolean() {
            rule["isStateless"] = json!(false);
        }
        rule["isValid"] = json!(true);
        rule["timeCreated"] = json!(now_rfc3339());
        added.push(rule);
    }
    store.rules.entry(id.to_owned()).or_default().extend(added.iter().cloned());
    Ok(Reply::json(200, json!({"securityRules": added})))
}

fn list_security_rules(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    existing(store, id, "networksecuritygroup")?;
    let items = store.rules.get(id).into_iter().flatten().map(|r| (r["id"].as_str().unwrap_or_default().to_owned(), r.clone())).collect();
    listing(items, req.query, false)
}

fn list_network_instances(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let id = req.route.id.as_str();
    store.resources.get(id).filter(|s| s.kind == "clusternetwork").ok_or_else(Reply::not_found)?;
    if !req.query.contains_key("compartmentId") {
        return Err(missing("compartmentId"));
    }
    let items = store
        .resources
        .iter()
        .filter(|(_, s)| s.kind == "instance" && s.value["clusterNetworkId"] == id)
        .map(|(instance, s)| {
            // An InstanceSummary: `state`, written as the service writes it ("Running"), and no tags.
            let mut v = raw_view(s);
            v["state"] = json!(service_casing(&state_of(s)));
            (instance.clone(), as_model(v, "InstanceSummary"))
        })
        .collect();
    listing(items, req.query, false)
}

/// `RUNNING` as ListClusterNetworkInstances writes it: `Running`.
fn service_casing(state: &str) -> String {
    let lower = state.to_ascii_lowercase();
    let mut chars = lower.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

fn work_request_of<'a>(store: &'a Store, req: &Req) -> Result<&'a WorkRequest, Reply> {
    store.work_requests.get(&req.route.id).filter(|w| w.version == req.route.version).ok_or_else(Reply::not_found)
}

fn work_request_status(wr: &WorkRequest) -> &'static str {
    let age = wr.started.elapsed().as_secs_f64();
    match (&wr.failure, age >= SETTLE, age >= SETTLE / 2.0) {
        (Some(_), true, _) => "FAILED",
        (None, true, _) => "SUCCEEDED",
        (_, false, true) => "IN_PROGRESS",
        _ => "ACCEPTED",
    }
}

fn get_work_request(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let wr = work_request_of(store, req)?;
    let age = wr.started.elapsed().as_secs_f64();
    let status = work_request_status(wr);
    let percent = if age >= SETTLE { 100.0 } else { (age / SETTLE * 100.0).floor() };
    let resources: Vec<Value> = wr
        .resources
        .iter()
        .map(|(entity, identifier, action)| {
            let action = match status {
                "SUCCEEDED" => *action,
                "FAILED" if wr.version == LUSTRE => "FAILED",
                _ => "IN_PROGRESS",
            };
            let path = collection_of(entity).map_or("", |c| c.path);
            json!({"entityType": entity, "identifier": identifier, "actionType": action,
                   "entityUri": format!("/{}/{path}/{identifier}", wr.version)})
        })
        .collect();
    let mut v = json!({
        "id": req.route.id, "operationType": wr.operation, "status": status, "compartmentId": wr.compartment,
        "percentComplete": percent, "timeAccepted": wr.accepted, "resources": resources,
    });
    if status != "ACCEPTED" {
        v["timeStarted"] = json!(wr.accepted);
    }
    if matches!(status, "SUCCEEDED" | "FAILED") {
        v["timeFinished"] = json!(wr.accepted);
    }
    Ok(Reply::json(200, v))
}

fn list_work_request_errors(store: &Store, req: &Req) -> Result<Reply, Reply> {
    let wr = work_request_of(store, req)?;
    let errors: Vec<Value> = match (&wr.failure, work_request_status(wr)) {
        (Some((code, message)), "FAILED") => vec![json!({"code": code, "message": message, "timestamp": wr.accepted})],
        _ => Vec::new(),
    };
    Ok(Reply::json(200, if wr.version == LUSTRE { json!({"items": errors}) } else { Value::Array(errors) }))
}

/// File Storage with Lustre's rules, as the service checks them: a capacity OCI offers (see
/// `LUSTRE_CAPACITIES`); the four performance tiers; file system names of at most 8 letters or digits.
fn check_lustre(v: &Value) -> Result<(), String> {
    let capacity = v.get("capacityInGBs").and_then(Value::as_i64).ok_or("capacityInGBs is required")?;
    if !lustre_capacity_offered(capacity) {
        return Err(format!("capacityInGBs {capacity} is invalid: at least 31200, in steps of 10400 up to 124800 and of 41600 above."));
    }
    let tier = v.get("performanceTier").and_then(Value::as_str).unwrap_or_default();
    if !["MBPS_PER_TB_125", "MBPS_PER_TB_250", "MBPS_PER_TB_500", "MBPS_PER_TB_1000"].contains(&tier) {
        return Err(format!("performanceTier {tier:?} is invalid."));
    }
    let name = v.get("fileSystemName").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() || name.len() > 8 || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err("fileSystemName must be 1 to 8 letters or digits.".into());
    }
    Ok(())
}

/// The capacities OCI's "Managing Lustre file systems" lists, in GB, as (first, last, step) bands walked one
/// by one: written out here rather than shared with the provider's planner, so that a mistake in either shows
/// as a refused create. (The SDK's field text, "increase capacity only in multiples of 5 TB", describes
/// neither 31,200 nor its 10,400 GB steps; the service's documented bands are what is enforced.)
const LUSTRE_CAPACITIES: [(i64, i64, i64); 2] = [(31_200, 124_800, 10_400), (166_400, i64::MAX, 41_600)];

fn lustre_capacity_offered(capacity: i64) -> bool {
    LUSTRE_CAPACITIES.iter().any(|&(first, last, step)| {
        let mut size = first;
        while size < capacity && size <= last - step {
            size += step;
        }
        size == capacity && size <= last
    })
}

/// The lifecycle states an out-of-band `impair` can put a live instance in: those of the Instance model's
/// `lifecycleState` enum in which it is neither running, launching nor terminating.
const IMPAIRED_STATES: [&str; 4] = ["STOPPING", "STOPPED", "MOVING", "CREATING_IMAGE"];

/// `2026-12-05T00:00:00.000Z` or `2026-12-05T00:00:00Z` (UTC, seconds, optional fraction), as OCI writes times.
fn rfc3339(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && t.ends_with('Z');
    if !shape || !t.is_ascii() {
        return false;
    }
    let fraction = &t[19..t.len() - 1];
    fraction.is_empty() || fraction.strip_prefix('.').is_some_and(|f| !f.is_empty() && f.bytes().all(|d| d.is_ascii_digit()))
}

impl Oci {
    /// `POST /_admin/gpu-memory-fabrics`: a rack's GPU memory fabric, as OCI has it before anyone builds on it.
    /// `compartmentId` and `availabilityDomain` are required (a fabric's model has no availability domain, but
    /// its list filters by one); the rest default to an idle, healthy NVL72 rack: AVAILABLE, HEALTHY, 18 hosts
    /// all available and healthy, an HPC island, network block and local block of its own.
    fn seed_fabric(&self, body: &Value) -> (u16, Value) {
        let (Some(compartment), Some(ad)) = (text(body, "/compartmentId"), text(body, "/availabilityDomain")) else {
            return (400, json!({"error": "a GPU memory fabric needs compartmentId and availabilityDomain"}));
        };
        let mut store = self.store.lock().unwrap();
        let id = ocid(&mut store, FABRIC);
        let n = store.next;
        let int = |k: &str, default: i64| body.get(k).and_then(Value::as_i64).unwrap_or(default);
        let total = int("totalHostCount", FABRIC_HOSTS);
        let string = |k: &str, default: String| text(body, &format!("/{k}")).map_or(default, str::to_owned);
        let value = json!({
            "id": id, "compartmentId": compartment, "_availabilityDomain": ad,
            "displayName": string("displayName", format!("gpu-memory-fabric-{n}")),
            "lifecycleState": string("lifecycleState", "AVAILABLE".into()),
            "fabricHealth": string("fabricHealth", "HEALTHY".into()),
            "totalHostCount": total, "healthyHostCount": int("healthyHostCount", total), "_freeHosts": int("availableHostCount", total),
            "computeHpcIslandId": string("computeHpcIslandId", format!("ocid1.computehpcisland.oc1.emulator.{n:020}")),
            "computeNetworkBlockId": string("computeNetworkBlockId", format!("ocid1.computenetworkblock.oc1.emulator.{n:020}")),
            "computeLocalBlockId": string("computeLocalBlockId", format!("ocid1.computelocalblock.oc1.emulator.{n:020}")),
            "firmwareUpdateState": "NO_UPDATE",
            "freeformTags": body.get("freeformTags").filter(|t| t.is_object()).cloned().unwrap_or(json!({})),
            "definedTags": {}, "systemTags": {}, "timeCreated": now_rfc3339(),
        });
        // Settled already: a rack that was there before the test.
        let changed = Instant::now().checked_sub(Duration::from_secs(60)).unwrap_or_else(Instant::now);
        store.resources.insert(id.clone(), Stored { kind: FABRIC, value, changed, version: 1 });
        let s = &store.resources[&id];
        let mut shown = as_model(shown(&store, s), full_model(FABRIC));
        shown["availabilityDomain"] = json!(ad);
        (200, shown)
    }
}

impl Oci {
    /// `POST /_admin/quota` `{"id": "<limit name>", "scope": "<availability domain>", "limit": <GPUs>}`: a
    /// Compute GPU limit, as GetResourceAvailability reports it (usage is always the live instances').
    fn set_quota(&self, body: &Value) -> (u16, Value) {
        let (Some(id), Some(scope), Some(limit)) = (text(body, "/id"), text(body, "/scope"), body.get("limit").and_then(Value::as_u64))
        else {
            return (400, json!({"error": "quota needs id (a Compute limit name), scope (an availability domain) and limit (GPUs)"}));
        };
        if !GPU_LIMITS.iter().any(|(_, l)| *l == id) {
            let known: Vec<&str> = GPU_LIMITS.iter().map(|(_, l)| *l).collect();
            return (400, json!({"error": format!("{id} is not a Compute limit the emulator reports; it knows {}", known.join(", "))}));
        }
        let mut store = self.store.lock().unwrap();
        store.quotas.insert((id.to_owned(), scope.to_owned()), limit);
        let used = gpu_usage(&store, id, scope, "ocid1.tenancy.");
        (200, json!({"id": id, "scope": scope, "limit": limit, "used": used}))
    }

    /// `POST /_admin/capacity` `{"zone": "<availability domain>", "instance_type": "<shape>", "available": <n> | null}`:
    /// at most n instances of the shape live in the availability domain at once (null lifts it).
    fn set_capacity(&self, body: &Value) -> (u16, Value) {
        let (Some(zone), Some(shape)) = (text(body, "/zone"), text(body, "/instance_type")) else {
            return (
                400,
                json!({"error": "capacity needs zone (an availability domain), instance_type (a shape) and available (n or null)"}),
            );
        };
        let key = (zone.to_owned(), shape.to_owned());
        let mut store = self.store.lock().unwrap();
        match body.get("available") {
            None | Some(Value::Null) => {
                store.capacity.remove(&key);
            }
            Some(n) => match n.as_u64() {
                Some(n) => {
                    store.capacity.insert(key, n);
                }
                None => return (400, json!({"error": "available must be a non-negative integer or null"})),
            },
        }
        let live = live_of_shape(&store, zone, shape);
        (
            200,
            json!({"zone": zone, "instance_type": shape, "available": body.get("available").cloned().unwrap_or(Value::Null), "live": live}),
        )
    }
}

impl Emulated for Oci {
    fn reset(&self) {
        self.metadata.close_all();
        let mut store = self.store.lock().unwrap();
        let keys = std::mem::take(&mut store.keys);
        *store = Store { keys, ..Store::default() };
    }

    /// Every resource not terminated or deleted, by service and kind.
    fn inventory(&self) -> Value {
        let mut store = self.store.lock().unwrap();
        purge(&mut store);
        let mut services: BTreeMap<&str, BTreeMap<&str, Vec<String>>> = BTreeMap::new();
        // GPU memory fabrics are the racks' own, there before any configuration (as AWS's default VPC is):
        // never in the inventory.
        for c in COLLECTIONS.iter().filter(|c| c.kind != FABRIC) {
            services.entry(if c.version == CORE { "core" } else { "lustre" }).or_default().insert(c.kind, Vec::new());
        }
        services.entry("containerengine").or_default().insert("clusters", Vec::new());
        for (id, s) in store.resources.iter().filter(|(_, s)| !finished(s) && s.kind != FABRIC) {
            let (service, kind) = match s.kind {
                oke::CLUSTER => ("containerengine", "clusters"),
                kind if collection_of(kind).is_some_and(|c| c.version == LUSTRE) => ("lustre", kind),
                kind => ("core", kind),
            };
            services.entry(service).or_default().entry(kind).or_default().push(id.clone());
        }
        let (vaults, pending_deletion) = vault::inventory(&store);
        for (kind, ids) in vaults {
            services.entry(if kind == "secrets" { "vault" } else { "kms" }).or_default().insert(kind, ids);
        }
        services.insert("identity", identity::inventory(&store));
        let empty = services.values().flat_map(|kinds| kinds.values()).all(Vec::is_empty);
        // Vaults, keys and secrets scheduled for deletion are what a destroy leaves (OCI deletes them days
        // later): listed, but not counted against `empty`.
        json!({"cloud": "oci", "empty": empty, "resources": services, "pending_deletion": pending_deletion})
    }

    fn snapshot(&self) -> Value {
        let mut store = self.store.lock().unwrap();
        purge(&mut store);
        let all: serde_json::Map<String, Value> = store
            .resources
            .iter()
            .filter(|(_, s)| !finished(s))
            .map(|(id, s)| (id.clone(), as_model(shown(&store, s), full_model(s.kind))))
            .collect();
        let mut all = all;
        all.extend(vault::snapshot(&store));
        all.extend(identity::snapshot(&store));
        let rules: serde_json::Map<String, Value> = store.rules.iter().map(|(id, r)| (id.clone(), json!(r))).collect();
        json!({"resources": all, "security_rules": rules})
    }

    fn out_of_band(&self, change: &Value) -> Result<Value, String> {
        let mut store = self.store.lock().unwrap();
        let id = change.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
        let action = change.get("action").and_then(Value::as_str).unwrap_or_default();
        let tags = change.get("freeform_tags").or_else(|| change.get("freeformTags")).filter(|t| t.is_object()).cloned();
        if action == "copy" {
            // Another tool's resource beside ours: a copy under a new OCID (same display name unless one is
            // given), with its freeform tags changed.
            let Some(source) = store.resources.get(&id) else { return Err(format!("nothing at {id}")) };
            let (kind, mut value) = (source.kind, source.value.clone());
            let new_id = ocid(&mut store, kind);
            value["id"] = json!(new_id);
            if let Some(name) = change.get("display_name").and_then(Value::as_str) {
                value["displayName"] = json!(name);
            }
            if let (Some(t), Some(extra)) = (value["freeformTags"].as_object_mut(), tags.as_ref().and_then(Value::as_object)) {
                t.extend(extra.clone());
            }
            // Settled already: its lifecycle state does not change under the test.
            let changed = Instant::now().checked_sub(std::time::Duration::from_secs(60)).unwrap_or_else(Instant::now);
            store.resources.insert(new_id.clone(), Stored { kind, value, changed, version: 1 });
            return Ok(json!({"done": action, "id": new_id}));
        }
        match (action, store.resources.get_mut(&id)) {
            ("terminate_instance", Some(s)) if s.kind == "instance" => {
                set_state(s, "TERMINATED");
                Ok(json!({"done": action, "id": id}))
            }
            ("impair", Some(s)) if s.kind == "instance" && live_instance(s) => {
                let state = change.get("state").and_then(Value::as_str);
                let due = change.get("maintenance_reboot_due").and_then(Value::as_str);
                if state.is_none() && due.is_none() {
                    return Err(
                        "impair needs state (e.g. \"STOPPED\") or maintenance_reboot_due (RFC 3339, e.g. \"2026-12-05T00:00:00.000Z\")"
                            .into(),
                    );
                }
                if let Some(state) = state {
                    if !IMPAIRED_STATES.contains(&state) {
                        return Err(format!("impair: state {state:?} must be one of {}", IMPAIRED_STATES.join(", ")));
                    }
                    power(s, state, false);
                }
                if let Some(due) = due {
                    if !rfc3339(due) {
                        return Err(format!("impair: maintenance_reboot_due {due:?} is not an RFC 3339 time (2026-12-05T00:00:00.000Z)"));
                    }
                    s.value["timeMaintenanceRebootDue"] = json!(due);
                    s.version += 1;
                }
                Ok(json!({"done": action, "id": id}))
            }
            ("heal", Some(s)) if s.kind == "instance" && live_instance(s) => {
                if let Some(v) = s.value.as_object_mut() {
                    v.remove("timeMaintenanceRebootDue");
                }
                if state_of(s) != "RUNNING" {
                    power(s, "RUNNING", false);
                } else {
                    s.version += 1;
                }
                Ok(json!({"done": action, "id": id}))
            }
            ("set_tags", Some(s)) => {
                let tags = tags.ok_or("set_tags needs freeform_tags, a JSON object")?;
                s.value["freeformTags"] = tags;
                s.version += 1;
                Ok(json!({"done": action, "id": id}))
            }
            ("delete", Some(_)) => {
                store.resources.remove(&id);
                store.rules.remove(&id);
                Ok(json!({"done": action, "id": id}))
            }
            _ => Err(format!(
                "cannot {action} {id}; valid actions: copy, terminate_instance, impair and heal (live instances), set_tags, delete"
            )),
        }
    }

    fn extra_admin(&self, method: &str, route: &str, body: &Value) -> Option<(u16, Value)> {
        match (method, route) {
            ("POST", "quota") => return Some(self.set_quota(body)),
            ("POST", "capacity") => return Some(self.set_capacity(body)),
            ("POST", "gpu-memory-fabrics") => return Some(self.seed_fabric(body)),
            ("GET", "gpu-memory-fabrics") => {
                let store = self.store.lock().unwrap();
                let all: Vec<Value> = store
                    .resources
                    .values()
                    .filter(|s| s.kind == FABRIC)
                    .map(|s| {
                        let mut v = as_model(shown(&store, s), full_model(FABRIC));
                        v["availabilityDomain"] = s.value["_availabilityDomain"].clone();
                        v
                    })
                    .collect();
                return Some((200, json!({"gpu_memory_fabrics": all})));
            }
            ("POST", "keys") => {}
            _ => return None,
        }
        let key_id = body.get("key_id").and_then(Value::as_str)?;
        let pem = body.get("public_key_pem").and_then(Value::as_str)?;
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let Ok(der) = STANDARD.decode(b64.trim()) else { return Some((400, json!({"error": "public_key_pem is not PEM"}))) };
        self.store.lock().unwrap().keys.insert(key_id.to_owned(), der);
        Some((200, json!({"registered": key_id})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_decoded() {
        let q = parse_query(Some("availabilityDomain=Uocm%3AUS-ASHBURN-AD-1&displayName=a+b%2Bc&limit=2&flag"));
        assert_eq!(q["availabilityDomain"], "Uocm:US-ASHBURN-AD-1");
        assert_eq!(q["displayName"], "a b+c");
        assert_eq!(q["flag"], "");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn dates_are_rfc3339() {
        let now = now_rfc3339();
        assert_eq!(now.len(), 24, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z') && &now[10..11] == "T", "{now}");
    }

    #[test]
    fn cidr_containment() {
        let vcn = parse_cidr("10.0.0.0/16").unwrap();
        assert!(within(parse_cidr("10.0.4.0/24").unwrap(), vcn));
        assert!(!within(parse_cidr("10.1.0.0/24").unwrap(), vcn));
        assert!(!within(vcn, parse_cidr("10.0.4.0/24").unwrap()));
        assert!(parse_cidr("10.0.0.0/33").is_none());
    }

    #[test]
    fn pool_instance_names_are_distinct() {
        let pool = json!({"displayName": "train"});
        let names: std::collections::BTreeSet<String> = (0..5000).map(|n| pool_instance_name(n, &pool)).collect();
        assert_eq!(names.len(), 5000);
        let name = pool_instance_name(7, &json!({}));
        assert!(name.starts_with("inst-") && name.ends_with("-pool") && name.len() == "inst-abcde-pool".len(), "{name}");
    }
}
