//! Azure Resource Manager emulator over HTTPS (a self-signed certificate that tests trust; the bearer-token
//! pipeline of azure_core refuses plain HTTP). Resource groups, virtual networks and subnets, network
//! security groups, proximity placement groups, VM scale sets with their VMs, and Azure Managed Lustre
//! (`Microsoft.StorageCache/amlFilesystems`), Key Vault (`Microsoft.KeyVault/vaults`, and each vault's secrets
//! on a listener of its own: `azure_keyvault.rs`), and AKS managed clusters with their agent pools
//! (`Microsoft.ContainerService`; a cluster's `agentPoolProfiles` become its first agent pools, and an agent
//! pool carries its `eTag` in its properties). Scale sets, filesystems and AKS writes are long-running: PUT and DELETE
//! answer 201/202 with an `Azure-AsyncOperation` URL that reports InProgress, then Succeeded or Failed.
//! Ids compare case-insensitively, as in ARM. Errors are ARM's `{"error": {"code", "message"}}`.
//! Writes keep ARM's semantics: a PUT replaces the whole resource (a virtual network's subnets are the ones
//! it lists, and one in use cannot go; a security group's rules likewise), a PATCH (UpdateTags, Update)
//! replaces the tags and merges the rest, and `If-None-Match: *` makes a PUT or PATCH create-only (412).
//! Virtual networks, subnets, security groups and scale sets carry an `etag` that every write changes, and a
//! write or delete whose `If-Match` names another one is refused (412), as the network and compute services do.
//! A scale-set VM takes a `userData` of its own (VirtualMachineScaleSetVMs_Update), which its instance
//! metadata service serves.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::admin::{Admin, Emulated, FaultKind};

const SETTLE: f64 = 0.3;

struct Stored {
    value: Value,
    changed: Instant,
}

struct AsyncOp {
    started: Instant,
    error: Option<(String, String)>,
    /// The resource a PUT made (its final answer on the Location URL); None for a delete (204, no body).
    result: Option<String>,
}

/// How ARM answers a write of a kind, as each operation's spec declares it: at once, or long-running
/// with an `Azure-AsyncOperation` status resource and/or a `Location` URL to poll.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lro {
    Sync,
    AsyncOperation,
    Location,
    Both,
}

/// The monitor each operation's spec declares (azure-mgmt-*'s `*_initial` methods): a create (201) of a
/// scale set is followed by its Location, of a network piece or filesystem by its Azure-AsyncOperation; an
/// update (200) declares none, so clients follow the resource's provisioningState; deletes answer 202 with a
/// Location (a filesystem's with both).
fn lro_of(kind: &str, method: &str, created: bool) -> Lro {
    match (kind, method) {
        ("resourceGroups" | "proximityPlacementGroups", "PUT") => Lro::Sync,
        ("proximityPlacementGroups", "DELETE") => Lro::Sync,
        (_, "PUT") if !created => Lro::Sync,
        ("virtualMachineScaleSets", "PUT") => Lro::Location,
        ("virtualNetworks" | "subnets" | "networkSecurityGroups" | "amlFilesystems" | "managedClusters" | "agentPools", "PUT") => {
            Lro::AsyncOperation
        }
        ("managedClusters" | "agentPools", "DELETE") => Lro::Location,
        ("amlFilesystems", "DELETE") => Lro::Both,
        ("resourceGroups" | "virtualNetworks" | "subnets" | "networkSecurityGroups" | "virtualMachineScaleSets", "DELETE") => Lro::Location,
        _ => Lro::Sync,
    }
}

/// Kinds whose writes run on after ARM answers (their provisioningState settles).
fn is_long_running(kind: &str) -> bool {
    matches!(
        kind,
        "virtualNetworks"
            | "subnets"
            | "networkSecurityGroups"
            | "virtualMachineScaleSets"
            | "amlFilesystems"
            | "managedClusters"
            | "agentPools"
    )
}

#[derive(Default)]
struct Store {
    /// Keyed by the lowercased resource id.
    resources: BTreeMap<String, Stored>,
    operations: BTreeMap<String, AsyncOp>,
    next: u64,
    /// Private IP of each scale-set VM's primary NIC, by lowercased VM id.
    ips: BTreeMap<String, String>,
    next_ip: u64,
    /// What the platform knows of each scale-set VM beyond its resource body, by lowercased VM id.
    lives: BTreeMap<String, VmLife>,
    /// Compute quota limits set through the admin API (`/_admin/quota`), by (lowercased usage name, location).
    quotas: BTreeMap<(String, String), u64>,
    /// At most this many VMs of a size live in a place at once (`/_admin/capacity`), by (lowercased place,
    /// lowercased size): a location (`eastus`) or one of its zones (`eastus-1`).
    capacity: BTreeMap<(String, String), u64>,
    /// The instance id the next VM of each scale set gets, by lowercased scale-set id: Azure numbers a
    /// set's VMs upwards and never gives a new VM the id a deleted one had.
    next_instance: BTreeMap<String, u64>,
    /// Key Vault's data plane: each vault's secrets, by lowercased vault name.
    vault_data: BTreeMap<String, keyvault::VaultData>,
    /// The tokens the VMs' metadata services handed out for their managed identities, with the object id
    /// each is for (Key Vault decides by it who calls).
    tokens: BTreeMap<String, String>,
}

/// The tenant ARM reports for a managed identity when none is given.
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";

/// The limit a compute usage reports when no test set one: generous, so that nothing else is short of it.
const DEFAULT_QUOTA: u64 = 100_000;

/// The VM sizes the emulator knows the quota of: (size, its VM family's usage name and display name,
/// vCPUs), as Microsoft.Compute's usages list names them.
const SIZES: &[(&str, &str, &str, u64)] = &[
    ("Standard_NV36ads_A10_v5", "StandardNVADSA10v5Family", "Standard NVADSA10v5 Family vCPUs", 36),
    ("Standard_ND96isr_H100_v5", "standardNDSH100v5Family", "Standard NDSH100v5 Family vCPUs", 96),
    ("Standard_ND96isr_H200_v5", "standardNDISRH200V5Family", "Standard NDISRH200V5 Family vCPUs", 96),
    ("Standard_ND96isr_MI300X_v5", "standardNDISv5MI300XFamily", "Standard NDISv5MI300X Family vCPUs", 96),
    ("Standard_ND128isr_NDR_GB200_v6", "standardNDISRGB200V6NDRFamily", "Standard NDISRGB200V6NDR Family vCPUs", 128),
    ("Standard_ND128isr_GB300_v6", "standardNDISRGB300V6Family", "Standard NDISRGB300V6 Family vCPUs", 128),
];

/// The regional totals every usages list has: Regular VMs' vCPUs, spot (low-priority) VMs' vCPUs.
const CORES: (&str, &str) = ("cores", "Total Regional vCPUs");
const LOW_PRIORITY: (&str, &str) = ("lowPriorityCores", "Total Regional Low-priority vCPUs");

/// A VM that takes quota and capacity: a scale set's (its set's key) or a standalone one (its own key).
struct Placed {
    owner: String,
    size: String,
    location: String,
    zone: Option<String>,
    spot: bool,
}

impl Placed {
    /// In `place`: its location, or its location's zone (`eastus-1`).
    fn is_in(&self, place: &str) -> bool {
        place.eq_ignore_ascii_case(&self.location)
            || self.zone.as_ref().is_some_and(|z| place.eq_ignore_ascii_case(&format!("{}-{z}", self.location)))
    }

    fn vcpus(&self) -> u64 {
        SIZES.iter().find(|s| s.0.eq_ignore_ascii_case(&self.size)).map_or(0, |s| s.3)
    }

    fn family(&self) -> Option<&'static str> {
        SIZES.iter().find(|s| s.0.eq_ignore_ascii_case(&self.size)).map(|s| s.1)
    }
}

/// What a scale set or VM body asks for: size, location, first zone, spot.
fn placement_of(value: &Value, size: Option<&str>) -> (String, String, Option<String>, bool) {
    let priority = value["properties"]["virtualMachineProfile"]["priority"].as_str().or(value["properties"]["priority"].as_str());
    (
        size.unwrap_or_default().to_owned(),
        value["location"].as_str().unwrap_or("eastus").to_lowercase(),
        value["zones"][0].as_str().map(str::to_owned),
        priority.is_some_and(|p| p.eq_ignore_ascii_case("Spot") || p.eq_ignore_ascii_case("Low")),
    )
}

impl Store {
    /// Every VM that is allocated (deallocated VMs hold neither quota nor capacity).
    fn placed(&self) -> Vec<Placed> {
        let mut out = Vec::new();
        for (key, stored) in &self.resources {
            if let Some((set, _)) = key.split_once("/virtualmachines/").filter(|(set, _)| set.contains("/virtualmachinescalesets/")) {
                if self.lives.get(key).is_some_and(|l| l.power == Power::Deallocated) {
                    continue;
                }
                let Some(parent) = self.resources.get(set) else { continue };
                let (size, location, zone, spot) = placement_of(&parent.value, parent.value["sku"]["name"].as_str());
                out.push(Placed { owner: set.to_owned(), size, location, zone, spot });
            } else if type_of(key).eq_ignore_ascii_case("virtualMachines") && !key.contains("/virtualmachinescalesets/") {
                let (size, location, zone, spot) =
                    placement_of(&stored.value, stored.value["properties"]["hardwareProfile"]["vmSize"].as_str());
                out.push(Placed { owner: key.clone(), size, location, zone, spot });
            }
        }
        out
    }

    /// How many VMs of `size` the owner `owner` (a scale set or VM key) may hold in all, by the capacity
    /// limits of the places it is in (`None`: no limit applies).
    fn room(&self, owner: &str, size: &str, location: &str, zone: Option<&str>) -> Option<u64> {
        let placed = self.placed();
        let me = Placed {
            owner: owner.to_owned(),
            size: size.to_owned(),
            location: location.to_owned(),
            zone: zone.map(str::to_owned),
            spot: false,
        };
        self.capacity
            .iter()
            .filter(|((place, s), _)| s.eq_ignore_ascii_case(size) && me.is_in(place))
            .map(|((place, _), limit)| {
                let others = placed.iter().filter(|p| p.owner != owner && p.size.eq_ignore_ascii_case(size) && p.is_in(place)).count();
                limit.saturating_sub(others as u64)
            })
            .min()
    }

    /// The limit and usage of one compute usage in a location.
    fn usage(&self, id: &str, location: &str) -> (u64, u64) {
        let placed = self.placed();
        let here = placed.iter().filter(|p| p.location.eq_ignore_ascii_case(location));
        let used: u64 = if id.eq_ignore_ascii_case(CORES.0) {
            here.filter(|p| !p.spot).map(Placed::vcpus).sum()
        } else if id.eq_ignore_ascii_case(LOW_PRIORITY.0) {
            here.filter(|p| p.spot).map(Placed::vcpus).sum()
        } else {
            here.filter(|p| !p.spot && p.family().is_some_and(|f| f.eq_ignore_ascii_case(id))).map(Placed::vcpus).sum()
        };
        let limit = self.quotas.get(&(id.to_lowercase(), location.to_lowercase())).copied().unwrap_or(DEFAULT_QUOTA);
        (limit, used)
    }

    /// Usage_List: the regional totals, every family the emulator knows, and any usage a test limited here.
    fn usages(&self, location: &str) -> Vec<Value> {
        let mut names: Vec<(String, String)> = vec![(CORES.0.into(), CORES.1.into()), (LOW_PRIORITY.0.into(), LOW_PRIORITY.1.into())];
        for (_, family, display, _) in SIZES {
            if !names.iter().any(|(n, _)| n.eq_ignore_ascii_case(family)) {
                names.push(((*family).to_owned(), (*display).to_owned()));
            }
        }
        for (id, loc) in self.quotas.keys() {
            if loc.eq_ignore_ascii_case(location) && !names.iter().any(|(n, _)| n.eq_ignore_ascii_case(id)) {
                names.push((id.clone(), id.clone()));
            }
        }
        names
            .into_iter()
            .map(|(id, display)| {
                let (limit, used) = self.usage(&id, location);
                json!({"unit": "Count", "currentValue": used, "limit": limit, "name": {"value": id, "localizedValue": display}})
            })
            .collect()
    }

    /// A quota a create would exceed (only limits a test set are enforced): ARM's refusal. A Regular VM
    /// counts against its family and the regional total (`cores`, "Total Regional Cores" in ARM's
    /// words), the family first; a spot VM against `lowPriorityCores` alone.
    fn quota_refusal(&self, size: &str, location: &str, spot: bool, adding: u64) -> Option<(String, String)> {
        let vcpus = SIZES.iter().find(|s| s.0.eq_ignore_ascii_case(size)).map_or(0, |s| s.3);
        let drawn: Vec<(&str, &str)> = if spot {
            vec![(LOW_PRIORITY.0, LOW_PRIORITY.0)]
        } else {
            let family = SIZES.iter().find(|s| s.0.eq_ignore_ascii_case(size))?.1;
            vec![(family, family), (CORES.0, "Total Regional")]
        };
        drawn.into_iter().find_map(|(id, words)| {
            self.quotas.get(&(id.to_lowercase(), location.to_lowercase()))?;
            let (limit, used) = self.usage(id, location);
            let need = adding * vcpus;
            (used + need > limit).then(|| {
                (
                    "OperationNotAllowed".to_owned(),
                    format!(
                        "Operation could not be completed as it results in exceeding approved {words} Cores quota. Additional details - \
                         Deployment Model: Resource Manager, Location: {location}, Current Limit: {limit}, Current Usage: {used}, Additional \
                         Required: {need}, (Minimum) New Limit Required: {}.",
                        used + need
                    ),
                )
            })
        })
    }
}

/// A scale-set VM's power state (`PowerState/<code>` in its instance view).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Power {
    #[default]
    Running,
    Stopped,
    Deallocated,
}

impl Power {
    fn code(self) -> &'static str {
        match self {
            Power::Running => "running",
            Power::Stopped => "stopped",
            Power::Deallocated => "deallocated",
        }
    }
}

/// What the Application Health extension last heard from the node's own health endpoint (its self-check):
/// the Rich Health States probe answer `{"ApplicationHealthState", "customMetrics"}`, and when.
#[derive(Clone, Debug)]
struct Probe {
    state: String,
    custom_metrics: Option<String>,
    time: String,
}

/// A scale-set VM as the platform sees it: the model it runs, its power, what is wrong with it (set through
/// the admin API's `impair`, cleared by `heal` or by the action that fixes it), and what its health
/// endpoint answers.
#[derive(Clone, Debug)]
struct VmLife {
    /// The scale set's `virtualMachineProfile` the VM was made with or last upgraded to; `None` for one the
    /// emulator knows nothing of (a copy), which runs the latest.
    model: Option<Value>,
    power: Power,
    /// The Application Health extension reports the VM unhealthy (its endpoint stopped answering), since.
    unhealthy: Option<String>,
    /// Provisioning failed, since.
    failed: Option<String>,
    /// A platform maintenance (redeploy) is scheduled: the window's start and end.
    maintenance: Option<(String, String)>,
    /// The node's answer to the extension's probe; it answers the same again after each boot on the same
    /// host (its hardware is what it checks), and nothing yet on a new one.
    probe: Option<Probe>,
    /// When the VM last booted: the extension reports `Initializing` for a while after.
    booted: Instant,
    /// When provisioning last succeeded.
    provisioned: String,
    /// How often each action reached it (the admin snapshot shows them).
    counts: BTreeMap<&'static str, u64>,
}

impl VmLife {
    fn new(model: Option<Value>) -> VmLife {
        VmLife {
            model,
            power: Power::Running,
            unhealthy: None,
            failed: None,
            maintenance: None,
            probe: None,
            booted: Instant::now(),
            provisioned: arm_time(),
            counts: BTreeMap::new(),
        }
    }

    fn count(&mut self, action: &'static str) {
        *self.counts.entry(action).or_default() += 1;
    }

    /// A boot: running again, provisioning fresh, the extension initializing.
    fn boot(&mut self) {
        self.power = Power::Running;
        self.failed = None;
        self.unhealthy = None;
        self.booted = Instant::now();
        self.provisioned = arm_time();
    }
}

pub struct Azure {
    store: Mutex<Store>,
    pub admin: Admin,
    /// The VMs' instance metadata services.
    metadata: crate::metadata::Listeners,
    /// The emulator's TLS, for the vaults' own listeners.
    tls: std::sync::OnceLock<tokio_rustls::TlsAcceptor>,
    /// Each vault's data-plane listener (its `vaultUri`), by lowercased vault name: opened by the vault's
    /// first PUT and kept for the process, so a vault made again under its name has the same URI.
    vault_ports: Mutex<BTreeMap<String, u16>>,
}

/// Each VM's instance metadata service (`POST /_admin/metadata`).
#[path = "azure_imds.rs"]
mod imds;

/// Key Vault: the vault resource's additions and its secrets' data plane.
#[path = "azure_keyvault.rs"]
mod keyvault;

pub struct Running {
    pub endpoint: String,
    pub addr: SocketAddr,
    /// PEM of the self-signed server certificate, for clients to trust.
    pub certificate_pem: String,
    pub emulator: Arc<Azure>,
}

pub async fn serve(bind: &str) -> std::io::Result<Running> {
    let emulator = Arc::new(Azure {
        store: Mutex::new(Store::default()),
        admin: Admin::default(),
        metadata: crate::metadata::Listeners::default(),
        tls: std::sync::OnceLock::new(),
        vault_ports: Mutex::new(BTreeMap::new()),
    });
    let key = rcgen::KeyPair::generate().map_err(std::io::Error::other)?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).map_err(std::io::Error::other)?;
    params.subject_alt_names.push(rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let cert = params.self_signed(&key).map_err(std::io::Error::other)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(std::io::Error::other)?;
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let _ = emulator.tls.set(acceptor.clone());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(handle).with_state(emulator.clone());
    serve_tls(listener, acceptor, app);
    Ok(Running { endpoint: format!("https://127.0.0.1:{}", addr.port()), addr, certificate_pem: cert.pem(), emulator })
}

/// Serves `app` over TLS on `listener`, each connection on a task of its own.
fn serve_tls(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor, app: axum::Router) {
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else { return };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

fn arm_error(status: u16, code: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

/// 412 PreconditionFailed: a create-only write (`If-None-Match: *`) found the resource there.
fn precondition_failed(path: &str) -> Response {
    arm_error(
        412,
        "PreconditionFailed",
        &format!("The condition specified by the If-None-Match header (*) was not met: the resource '{path}' already exists."),
    )
}

/// 400 InUseSubnetCannotBeDeleted, in the network service's words.
fn subnet_in_use(subnet_key: &str, user: &str) -> Response {
    let name = subnet_key.rsplit('/').next().unwrap_or_default();
    arm_error(
        400,
        "InUseSubnetCannotBeDeleted",
        &format!(
            "Subnet {name} is in use by {user} and cannot be deleted. In order to delete the subnet, delete all the resources within the \
             subnet. See aka.ms/deletesubnet."
        ),
    )
}

/// The kinds whose models carry a read-only `etag` (azure-mgmt-network `VirtualNetwork`, `Subnet`,
/// `NetworkSecurityGroup`: "A unique read-only string that changes whenever the resource is updated";
/// azure-mgmt-compute `VirtualMachineScaleSet`: returned "so that customer can supply it in the header to
/// ensure optimistic updates"), and whose writes and deletes honour `If-Match`.
const ETAGGED: [&str; 4] = ["virtualNetworks", "subnets", "networkSecurityGroups", "virtualMachineScaleSets"];

/// A stored resource's etag, in the network service's form (`W/"<guid>"`): derived from what is stored and
/// when it was last written, so every write (a PUT of the same body too) and every change the platform
/// makes to it (a scale set's capacity lowered by DeleteInstances) gives a new one.
fn etag_of(stored: &Stored) -> String {
    use std::hash::{Hash, Hasher};
    let mut a = std::collections::hash_map::DefaultHasher::new();
    stored.value.to_string().hash(&mut a);
    stored.changed.hash(&mut a);
    let x = a.finish();
    x.rotate_left(17).hash(&mut a);
    let y = a.finish();
    format!("W/\"{:08x}-{:04x}-{:04x}-{:04x}-{:012x}\"", x >> 32, (x >> 16) & 0xffff, x & 0xffff, y >> 48, y & 0xffff_ffff_ffff)
}

/// Whether a write or delete's `If-Match` holds for the resource as stored (None when it is not there):
/// `*` for any version, else its current etag ("the resource will be updated or deleted only if the etag
/// matches"); a write without `If-Match` always holds. Some is ARM's 412 with the network service's detail.
fn stale(if_match: Option<&str>, stored: Option<&Stored>, path: &str) -> Option<Response> {
    let wanted = if_match.map(str::trim)?;
    let current = stored.map(etag_of);
    if wanted == "*" && current.is_some() || current.as_deref() == Some(wanted) {
        return None;
    }
    let detail = match &current {
        Some(etag) => format!("Etag provided in if-match header {wanted} does not match etag {etag} of resource {path}."),
        None => format!("Etag provided in if-match header {wanted} does not match: resource {path} does not exist."),
    };
    let body = json!({"error": {"code": "PreconditionFailed", "message": "Precondition failed.",
                                "details": [{"code": "PreconditionFailedEtagMismatch", "message": detail}]}});
    Some((StatusCode::PRECONDITION_FAILED, axum::Json(body)).into_response())
}

/// The longest `userData` a VM takes: "The size can't exceed 64 KB" (Microsoft Learn, "User data for Azure
/// Virtual Machine").
const USER_DATA_MAX: usize = 64 * 1024;

/// The kinds whose PATCH (UpdateTags, Update) the emulator serves.
const PATCHED: [&str; 8] = [
    "virtualNetworks",
    "networkSecurityGroups",
    "proximityPlacementGroups",
    "resourceGroups",
    "amlFilesystems",
    "virtualMachines",
    "networkInterfaces",
    "virtualMachineScaleSets",
];

/// RFC 7396 JSON merge patch: objects merge key by key, `null` removes a key, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Some(t) = target.as_object_mut() {
        for (k, v) in fields {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The name of a child listed inline (a subnet, a security rule): its `name`, else its id's last segment.
fn child_name(item: &Value) -> Option<String> {
    item["name"].as_str().or_else(|| item["id"].as_str().and_then(|id| id.rsplit('/').next())).filter(|n| !n.is_empty()).map(str::to_owned)
}

/// `virtualMachineScaleSets`, `amlFilesystems`, ... from a resource id; `resourceGroups` for groups.
fn type_of(id: &str) -> String {
    let segs: Vec<&str> = id.trim_matches('/').split('/').collect();
    match segs.iter().rposition(|s| s.eq_ignore_ascii_case("providers")) {
        Some(p) if segs.len() > p + 2 => {
            let rest = &segs[p + 2..];
            // .../virtualNetworks/{n}/subnets/{s} -> subnets; .../virtualMachineScaleSets/{n} -> virtualMachineScaleSets
            rest[if rest.len() >= 3 { rest.len() - 2 } else { 0 }].to_owned()
        }
        _ => "resourceGroups".into(),
    }
}

/// The `n`th address of `cidr` after the `reserved` first ones.
fn host_address(cidr: &str, reserved: u32, n: u64) -> String {
    let parsed = cidr.split_once('/').and_then(|(ip, len)| Some((ip.parse::<std::net::Ipv4Addr>().ok()?, len.parse::<u32>().ok()?)));
    let (base, len) = parsed.unwrap_or((std::net::Ipv4Addr::new(10, 0, 0, 0), 24));
    let hosts = (1u64 << (32 - len.min(29))).saturating_sub(u64::from(reserved) + 1).max(1);
    std::net::Ipv4Addr::from(u32::from(base) + reserved + ((n - 1) % hosts) as u32).to_string()
}

/// ARM's `type` of a resource id: `Microsoft.Network/virtualNetworks/subnets`, `Microsoft.Resources/resourceGroups`.
fn arm_type(id: &str) -> String {
    let segs: Vec<&str> = id.trim_matches('/').split('/').collect();
    match segs.iter().rposition(|s| s.eq_ignore_ascii_case("providers")) {
        Some(p) if segs.len() > p + 2 => {
            let mut t = vec![segs[p + 1], segs[p + 2]];
            t.extend(segs[p + 3..].iter().skip(1).step_by(2));
            t.join("/")
        }
        _ => "Microsoft.Resources/resourceGroups".into(),
    }
}

/// Rules Azure documents in its field descriptions and enforces, which no schema can express. Each names
/// where it is written (the azure-mgmt-compute / azure-mgmt-storagecache model and field).
fn documented_rules(kind: &str, body: &Value) -> Result<(), (String, String)> {
    let fail = |target: &str, message: &str| Err((target.to_owned(), message.to_owned()));
    if kind == "virtualMachineScaleSets" {
        let profile = &body["properties"]["virtualMachineProfile"];
        let os = &profile["osProfile"];
        // VirtualMachineScaleSetOSProfile.computerNamePrefix: "Computer name prefixes must be 1 to 15 characters long."
        if let Some(prefix) = os["computerNamePrefix"].as_str()
            && !(1..=15).contains(&prefix.chars().count())
        {
            return fail("computerNamePrefix", "Computer name prefix must be 1 to 15 characters long.");
        }
        // LinuxConfiguration: a key or a password must let someone in.
        let linux = &os["linuxConfiguration"];
        let keys = linux["ssh"]["publicKeys"].as_array().is_some_and(|k| !k.is_empty());
        let password = os["adminPassword"].as_str().is_some_and(|p| !p.is_empty());
        if linux.is_object() && linux["disablePasswordAuthentication"] == true && !keys {
            return fail(
                "linuxConfiguration",
                "Authentication using either SSH or by user name and password must be enabled in Linux profile.",
            );
        }
        if linux.is_object() && !keys && !password {
            return fail("adminPassword", "Required parameter 'adminPassword' is missing (null).");
        }
        // CapacityReservationProfile: reservation groups take scale sets without a single placement group.
        if profile["capacityReservation"]["capacityReservationGroup"]["id"].is_string()
            && body["properties"]["singlePlacementGroup"] == true
        {
            return fail(
                "singlePlacementGroup",
                "Virtual Machine Scale Set with Capacity Reservation Group must have singlePlacementGroup property set to false.",
            );
        }
    }
    if kind == "amlFilesystems" {
        // AmlFilesystemHsmSettings.container: "Resource ID of storage container"; loggingContainer: "Must be a
        // separate container in the same storage account."
        let settings = &body["properties"]["hsm"]["settings"];
        if settings.is_object() {
            let account_of = |id: &str| id.to_lowercase().split_once("/blobservices/default/containers/").map(|(a, _)| a.to_owned());
            let container = settings["container"].as_str().unwrap_or_default();
            let logging = settings["loggingContainer"].as_str().unwrap_or_default();
            let (Some(data_account), Some(log_account)) = (account_of(container), account_of(logging)) else {
                return fail("hsm.settings.container", "The container and logging container must be storage container resource IDs.");
            };
            if !data_account.starts_with("/subscriptions/") || !data_account.contains("/providers/microsoft.storage/storageaccounts/") {
                return fail("hsm.settings.container", "The container must be a storage container resource ID.");
            }
            if container.eq_ignore_ascii_case(logging) || data_account != log_account {
                return fail(
                    "hsm.settings.loggingContainer",
                    "The logging container must be a separate container in the same storage account.",
                );
            }
        }
    }
    Ok(())
}

fn namespace_of(kind: &str) -> &'static str {
    match kind {
        "amlFilesystems" => "Microsoft.StorageCache",
        "virtualNetworks" | "subnets" | "networkSecurityGroups" => "Microsoft.Network",
        "resourceGroups" => "Microsoft.Resources",
        "managedClusters" | "agentPools" => "Microsoft.ContainerService",
        _ => "Microsoft.Compute",
    }
}

/// Where a long-running operation's monitors live: the request's host, subscription, resource kind and
/// location.
struct Scope<'a> {
    host: &'a str,
    sub: &'a str,
    kind: &'a str,
    location: &'a str,
}

/// Starts a long-running operation and puts its monitor headers on `resp`.
fn begin(store: &mut Store, resp: &mut Response, lro: Lro, scope: &Scope<'_>, op: AsyncOp) {
    let Scope { host, sub, kind, location } = *scope;
    if lro == Lro::Sync {
        return;
    }
    store.next += 1;
    let token = format!("op-{}", store.next);
    let base = if kind == "resourceGroups" {
        format!("/subscriptions/{sub}")
    } else {
        format!("/subscriptions/{sub}/providers/{}/locations/{location}", namespace_of(kind))
    };
    let status_url = format!("{base}/operations/{token}");
    let result_url = format!("{base}/operationResults/{token}");
    store.operations.insert(status_url.to_lowercase(), AsyncOp { started: op.started, error: op.error.clone(), result: op.result.clone() });
    store.operations.insert(result_url.to_lowercase(), op);
    let headers = resp.headers_mut();
    if matches!(lro, Lro::AsyncOperation | Lro::Both) {
        headers.insert("azure-asyncoperation", format!("https://{host}{status_url}?api-version=2025-01-01").parse().unwrap());
    }
    if matches!(lro, Lro::Location | Lro::Both) {
        headers.insert("location", format!("https://{host}{result_url}?api-version=2025-01-01").parse().unwrap());
    }
    headers.insert("retry-after", "1".parse().unwrap());
}

impl Azure {
    fn view(stored: &Stored) -> Value {
        let mut v = stored.value.clone();
        let kind = type_of(v["id"].as_str().unwrap_or_default());
        if kind.eq_ignore_ascii_case("agentPools") {
            // AgentPool: "Unique read-only string used to implement optimistic concurrency", `properties.eTag`.
            v["properties"]["eTag"] = json!(etag_of(stored));
        } else if ETAGGED.iter().any(|k| kind.eq_ignore_ascii_case(k)) {
            v["etag"] = json!(etag_of(stored));
        }
        let settling = v["properties"]["provisioningState"] == "Creating" || v["properties"]["provisioningState"] == "Updating";
        if settling && stored.changed.elapsed().as_secs_f64() >= SETTLE {
            v["properties"]["provisioningState"] = json!("Succeeded");
        }
        v
    }

    /// What AKS refuses of an agent pool's PUT before making anything: a cluster that is not there, a
    /// subnet or proximity placement group that is not there, a count outside 0 to 1000 (AgentPool `count`:
    /// "Allowed values must be in the range of 0 to 1000 (inclusive) for user pools").
    fn agent_pool_refusal(store: &Store, key: &str, body: &Value) -> Option<Response> {
        let cluster = key.rsplit_once("/agentpools/").map(|(c, _)| c.to_owned()).unwrap_or_default();
        if !store.resources.contains_key(&cluster) {
            return Some(arm_error(404, "NotFound", &format!("The managed cluster {cluster} was not found.")));
        }
        let props = &body["properties"];
        if let Some(n) = props["count"].as_i64()
            && !(0..=1000).contains(&n)
        {
            return Some(arm_error(400, "InvalidParameter", &format!("The value of parameter agentPoolProfile.count is invalid: {n}.")));
        }
        for (field, code) in [("vnetSubnetID", "InvalidSubnetID"), ("proximityPlacementGroupID", "InvalidParameter")] {
            if let Some(id) = props[field].as_str()
                && !store.resources.contains_key(&id.trim_end_matches('/').to_lowercase())
            {
                return Some(arm_error(
                    400,
                    code,
                    &format!("The value of parameter agentPoolProfile.{field} is invalid: {id} does not exist."),
                ));
            }
        }
        None
    }

    /// A resource as ARM answers for it: a virtual network with its subnets (`properties.subnets`, its child
    /// resources as they are now), as VirtualNetworks_Get lists them.
    fn render(store: &Store, key: &str, stored: &Stored) -> Value {
        let mut v = Azure::view(stored);
        if type_of(key).eq_ignore_ascii_case("virtualNetworks") {
            let subnets: Vec<Value> =
                Self::children(store, key, "subnets").iter().filter_map(|k| store.resources.get(k)).map(Azure::view).collect();
            v["properties"]["subnets"] = json!(subnets);
        }
        v
    }

    /// The keys of a resource's direct children of one type (`<key>/subnets/<name>`).
    fn children(store: &Store, key: &str, kind: &str) -> Vec<String> {
        let prefix = format!("{key}/{}/", kind.to_lowercase());
        store
            .resources
            .keys()
            .filter(|k| k.strip_prefix(&prefix).is_some_and(|rest| !rest.is_empty() && !rest.contains('/')))
            .cloned()
            .collect()
    }

    /// What is in a subnet, as the network service names it when the subnet cannot go: the NIC IP
    /// configuration a scale set places there (its first VM's, or the model's while it has none), or a
    /// filesystem built in it.
    fn subnet_user(store: &Store, subnet_key: &str) -> Option<String> {
        let here = |id: &Value| id.as_str().is_some_and(|id| id.trim_end_matches('/').eq_ignore_ascii_case(subnet_key));
        for (key, stored) in &store.resources {
            let kind = type_of(key);
            let id = stored.value["id"].as_str().unwrap_or_default();
            if kind.eq_ignore_ascii_case("virtualMachineScaleSets") {
                let nics =
                    stored.value["properties"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"].as_array();
                for nic in nics.into_iter().flatten() {
                    let ips = nic["properties"]["ipConfigurations"].as_array();
                    if let Some(ip) = ips.into_iter().flatten().find(|ip| here(&ip["properties"]["subnet"]["id"])) {
                        let (nic_name, ip_name) = (nic["name"].as_str().unwrap_or("nic"), ip["name"].as_str().unwrap_or("ipconfig"));
                        let base = match Self::set_vms(store, key).first() {
                            Some((i, _)) => format!("{id}/virtualMachines/{i}/networkInterfaces/{nic_name}"),
                            None => format!("{id}/networkInterfaceConfigurations/{nic_name}"),
                        };
                        return Some(format!("{base}/ipConfigurations/{ip_name}"));
                    }
                }
            } else if kind.eq_ignore_ascii_case("amlFilesystems") && here(&stored.value["properties"]["filesystemSubnet"]) {
                return Some(id.to_owned());
            }
        }
        None
    }

    /// The address prefix of the subnet a scale set's NICs join.
    fn scale_set_prefix(store: &Store, vmss_id: &str) -> String {
        const SUBNET: &str = "/properties/virtualMachineProfile/networkProfile/networkInterfaceConfigurations/0/properties/ipConfigurations/0/properties/subnet/id";
        let subnet = store.resources.get(&vmss_id.to_lowercase()).and_then(|s| s.value.pointer(SUBNET)).and_then(Value::as_str);
        subnet
            .and_then(|id| store.resources.get(&id.to_lowercase()))
            .and_then(|s| s.value["properties"]["addressPrefix"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "10.0.0.0/24".into())
    }

    /// The VMs of a scale set, by instance id: (id, lowercased key).
    fn set_vms(store: &Store, vmss_key: &str) -> Vec<(u64, String)> {
        let prefix = format!("{vmss_key}/virtualmachines/");
        let mut out: Vec<(u64, String)> =
            store.resources.keys().filter_map(|k| Some((k.strip_prefix(&prefix)?.parse::<u64>().ok()?, k.clone()))).collect();
        out.sort();
        out
    }

    /// Brings a scale set's VMs to `capacity`, making at most `max_new` new ones (what the zone has room
    /// for); returns how many it could not make. As Azure does: a scale-out gives each new VM the next
    /// instance id of the set (never one a deleted VM had, so a VM made in a lost one's place comes last);
    /// a scale-in under the Default scale-in policy, with one fault domain in one zone, removes the VMs with
    /// the highest instance ids ("Scale-in policy": Default balances across zones and fault domains, then
    /// deletes the VM with the highest instance ID).
    fn scale_set_vms(store: &mut Store, admin: &Admin, vmss_id: &str, capacity: u64, max_new: Option<u64>) -> u64 {
        let key = vmss_id.to_lowercase();
        let existing = Self::set_vms(store, &key);
        let name = vmss_id.rsplit('/').next().unwrap_or_default().to_owned();
        let range = Self::scale_set_prefix(store, vmss_id);
        let have = existing.len() as u64;
        if have > capacity {
            for (i, k) in existing.iter().rev().take((have - capacity) as usize) {
                store.resources.remove(k);
                store.lives.remove(k);
                admin.event(&format!("{name}_{i}"), k, "deleted");
            }
            admin.resized(&key, have, capacity);
            return 0;
        }
        let wanted = capacity - have;
        let made = wanted.min(max_new.unwrap_or(u64::MAX));
        let after_existing = existing.last().map_or(0, |(i, _)| i + 1);
        let mut next = store.next_instance.get(&key).copied().unwrap_or(0).max(after_existing);
        for _ in 0..made {
            let i = next;
            next += 1;
            let id = format!("{vmss_id}/virtualMachines/{i}");
            let nic = format!("{id}/networkInterfaces/{name}-nic");
            store.resources.insert(
                id.to_lowercase(),
                Stored {
                    value: json!({"id": id, "instanceId": i.to_string(), "name": format!("{name}_{i}"), "type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
                                  "properties": {"provisioningState": "Creating", "latestModelApplied": true,
                                                 "networkProfile": {"networkInterfaces": [{"id": nic}]}}}),
                    changed: Instant::now(),
                },
            );
            // Azure reserves the first four addresses of a subnet.
            store.next_ip += 1;
            let ip = host_address(&range, 4, store.next_ip);
            store.ips.insert(id.to_lowercase(), ip);
            let model = Self::model_of(store, vmss_id);
            store.lives.insert(id.to_lowercase(), VmLife::new(Some(model)));
            admin.event(&format!("{name}_{i}"), &id.to_lowercase(), "created");
        }
        admin.resized(&key, have, have + made);
        store.next_instance.insert(key, next);
        wanted - made
    }

    /// The VMs of a scale set a PUT at `capacity` keeps (a scale-in keeps `capacity` of them).
    fn set_vms_below(store: &Store, vmss_key: &str, capacity: u64) -> u64 {
        (Self::set_vms(store, vmss_key).len() as u64).min(capacity)
    }

    /// A scale set's model now: its `virtualMachineProfile`.
    fn model_of(store: &Store, vmss_id: &str) -> Value {
        store.resources.get(&vmss_id.to_lowercase()).map(|s| s.value["properties"]["virtualMachineProfile"].clone()).unwrap_or(Value::Null)
    }

    /// A scale-set VM as a client reads it: `latestModelApplied` from the model it runs, and with `expand`
    /// (`$expand=instanceView`) its instance view.
    fn vm_view(store: &Store, key: &str, stored: &Stored, expand: bool) -> Value {
        let mut v = Azure::view(stored);
        // A standalone VM is answered as it is stored (VirtualMachines_Get has no scale-set fields).
        if !key.contains("/virtualmachinescalesets/") {
            return v;
        }
        let vmss = key.rsplit_once("/virtualmachines/").map(|(set, _)| set).unwrap_or_default();
        let current = Self::model_of(store, vmss);
        let life = store.lives.get(key).cloned().unwrap_or_else(|| VmLife::new(None));
        let latest = life.model.as_ref().is_none_or(|m| *m == current);
        v["properties"]["latestModelApplied"] = json!(latest);
        if expand {
            let name = vmss.rsplit('/').next().unwrap_or_default();
            let instance = key.rsplit('/').next().unwrap_or_default();
            let settling = v["properties"]["provisioningState"] != "Succeeded";
            let model = life.model.clone().unwrap_or(current);
            v["properties"]["instanceView"] = instance_view(&life, &model, name, instance, settling);
        }
        v
    }
}

/// The time as ARM writes it in instance views, e.g. `2026-12-01T10:02:33.0000000+00:00`.
fn arm_time() -> String {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (y, mo, d, h, mi, s) = crate::clock::utc(since.as_secs() as i64);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:07}+00:00", since.subsec_nanos() / 100)
}

/// The Application Health extension in a scale set model (publisher `Microsoft.ManagedServices`, type
/// `ApplicationHealthLinux` or `ApplicationHealthWindows`): its name and type handler version.
fn health_extension(model: &Value) -> Option<(String, String)> {
    let extensions = model["extensionProfile"]["extensions"].as_array()?;
    extensions.iter().find_map(|e| {
        let p = &e["properties"];
        let ours = p["publisher"].as_str().is_some_and(|s| s.eq_ignore_ascii_case("Microsoft.ManagedServices"))
            && p["type"].as_str().is_some_and(|t| t.starts_with("ApplicationHealth"));
        ours.then(|| {
            (e["name"].as_str().unwrap_or("HealthExtension").to_owned(), p["typeHandlerVersion"].as_str().unwrap_or("2.0").to_owned())
        })
    })
}

/// How long a booted VM's Application Health extension reports `Initializing` here (the real one waits for
/// `numberOfProbes` consistent answers or its `gracePeriod`).
const INITIALIZING: f64 = SETTLE;

/// A scale-set VM's instance view (VirtualMachineScaleSetVMInstanceView): provisioning and power statuses,
/// with an Application Health extension in its model the extension's view and `vmHealth` (Rich Health
/// States: Initializing, Healthy, Unhealthy, Unknown), and a scheduled maintenance's
/// `maintenanceRedeployStatus`.
fn instance_view(life: &VmLife, model: &Value, set: &str, instance: &str, settling: bool) -> Value {
    let status = |code: String, level: &str, display: &str, time: Option<&str>| {
        let mut s = json!({"code": code, "level": level, "displayStatus": display});
        if let Some(t) = time {
            s["time"] = json!(t);
        }
        s
    };
    let provisioning = match (&life.failed, settling) {
        (Some(since), _) => {
            let mut s = status("ProvisioningState/failed/InternalOperationError".into(), "Error", "Provisioning failed", Some(since));
            s["message"] = json!("An internal execution error occurred. Please retry later.");
            s
        }
        (None, true) => status("ProvisioningState/updating".into(), "Info", "Updating", None),
        (None, false) => status("ProvisioningState/succeeded".into(), "Info", "Provisioning succeeded", Some(&life.provisioned)),
    };
    let booting = life.booted.elapsed().as_secs_f64() < INITIALIZING;
    let (power, display) = match life.power {
        Power::Running if booting => ("starting", "VM starting"),
        Power::Running => ("running", "VM running"),
        Power::Stopped => ("stopped", "VM stopped"),
        Power::Deallocated => ("deallocated", "VM deallocated"),
    };
    let index: u64 = instance.parse().unwrap_or(0);
    let prefix = model["osProfile"]["computerNamePrefix"].as_str().unwrap_or(set);
    let mut view = json!({
        "platformUpdateDomain": 0,
        "platformFaultDomain": 0,
        "computerName": format!("{prefix}{index:06}"),
        "statuses": [provisioning, status(format!("PowerState/{power}"), "Info", display, None)],
    });
    if let Some((name, version)) = health_extension(model) {
        let answered = life.probe.as_ref().filter(|_| !booting && life.power == Power::Running);
        let (state, time) = match (&life.unhealthy, answered) {
            (Some(since), _) => ("Unhealthy".to_owned(), Some(since.clone())),
            _ if life.power != Power::Running => ("Unknown".to_owned(), None),
            (None, Some(p)) => (p.state.clone(), Some(p.time.clone())),
            (None, None) => ("Initializing".to_owned(), Some(life.provisioned.clone())),
        };
        let (level, display) = match state.as_str() {
            "Healthy" => ("Info", "The VM is healthy"),
            "Unhealthy" => ("Warning", "The VM is unhealthy"),
            "Initializing" => ("Info", "The VM health is initializing"),
            _ => ("Warning", "The VM health is unknown"),
        };
        view["vmHealth"] = json!({"status": status(format!("HealthState/{}", state.to_lowercase()), level, display, time.as_deref())});
        let mut substatuses = vec![{
            let mut s = status("ComponentStatus/ApplicationHealthState/succeeded".into(), "Info", "Provisioning succeeded", None);
            s["message"] = json!(state);
            s
        }];
        if let Some(metrics) = answered.and_then(|p| p.custom_metrics.as_ref()) {
            let mut s = status("ComponentStatus/CustomMetrics/succeeded".into(), "Info", "Provisioning succeeded", None);
            s["message"] = json!(metrics);
            substatuses.push(s);
        }
        let mut handler = status("ProvisioningState/succeeded".into(), "Info", "Provisioning succeeded", None);
        handler["message"] = json!(format!("Application health found to be {}", state.to_lowercase()));
        view["extensions"] = json!([{"name": name, "type": "Microsoft.ManagedServices.ApplicationHealthLinux",
                                     "typeHandlerVersion": format!("{version}.0"), "statuses": [handler], "substatuses": substatuses}]);
    }
    if let Some((start, end)) = &life.maintenance {
        view["maintenanceRedeployStatus"] = json!({
            "isCustomerInitiatedMaintenanceAllowed": true,
            "preMaintenanceWindowStartTime": life.provisioned,
            "preMaintenanceWindowEndTime": start,
            "maintenanceWindowStartTime": start,
            "maintenanceWindowEndTime": end,
            "lastOperationResultCode": "None",
        });
    }
    view
}

/// The scale set actions the emulator serves, as the paths of their operations end
/// (VirtualMachineScaleSets_UpdateInstances, _Reimage, _Redeploy, _Restart, _Start, _DeleteInstances).
const ACTIONS: [&str; 6] = ["manualupgrade", "reimage", "redeploy", "restart", "start", "delete"];

/// `(scale set id, action)` of a POST to a scale set action.
/// Whether a resource key (lowercased) is a scale set's VM.
fn is_scale_set_vm(key: &str) -> bool {
    let segs: Vec<&str> = key.trim_matches('/').split('/').collect();
    segs.len() >= 2 && segs[segs.len() - 2] == "virtualmachines" && segs.len() >= 4 && segs[segs.len() - 4] == "virtualmachinescalesets"
}

/// A scale set VM's name as Azure gives it (`<set>_<instance id>`), from its resource key.
fn vm_name(key: &str) -> String {
    let segs: Vec<&str> = key.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        [.., set, "virtualmachines", instance] => format!("{set}_{instance}"),
        _ => key.to_owned(),
    }
}

fn scale_set_action(path: &str) -> Option<(String, &'static str)> {
    let (set, last) = path.trim_end_matches('/').rsplit_once('/')?;
    let action = ACTIONS.iter().find(|a| a.eq_ignore_ascii_case(last))?;
    let segs: Vec<&str> = set.trim_matches('/').split('/').collect();
    (segs.len() >= 2 && segs[segs.len() - 2].eq_ignore_ascii_case("virtualMachineScaleSets")).then(|| (set.to_owned(), *action))
}

impl Azure {
    /// A scale set action on the VMs its `instanceIds` name (all of them when it names none, or `*`):
    /// long-running, 202 with a Location (and Retry-After) as each action's spec declares. What each does
    /// to a VM: `manualupgrade` brings it to the scale set's model; `reimage` gives it a fresh OS disk from
    /// its model and boots it on the same host; `redeploy` moves it to a new host (which ends a scheduled
    /// maintenance) and boots it; `restart` reboots a running VM; `start` boots a stopped or deallocated one.
    #[allow(clippy::too_many_arguments)]
    fn act(
        store: &mut Store,
        admin: &Admin,
        set: &str,
        action: &'static str,
        body: &[u8],
        capacity_error: Option<(String, String)>,
        host: &str,
    ) -> Response {
        let set_key = set.to_lowercase();
        let Some(stored) = store.resources.get(&set_key) else {
            return arm_error(404, "ResourceNotFound", &format!("The Resource '{set}' was not found."));
        };
        let location = stored.value["location"].as_str().unwrap_or("eastus").to_lowercase();
        let name = stored.value["name"].as_str().unwrap_or_default().to_owned();
        let request: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or(json!({})) };
        let prefix = format!("{set_key}/virtualmachines/");
        let all: Vec<String> = store.resources.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
        let named: Vec<String> = match request["instanceIds"].as_array() {
            Some(ids) if !ids.iter().any(|i| i == "*") => ids.iter().filter_map(Value::as_str).map(|i| format!("{prefix}{i}")).collect(),
            _ => all.clone(),
        };
        if let Some(missing) = named.iter().find(|k| !all.contains(k)) {
            let id = missing.rsplit('/').next().unwrap_or_default();
            let body = json!({"error": {"code": "InvalidParameter", "target": "instanceIds",
                "message": format!("The provided instanceId {id} is not an active Virtual Machine Scale Set VM instanceId.")}});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
        // A VM that is not running cannot be restarted: it is started.
        if action == "restart"
            && let Some((key, life)) = named.iter().find_map(|k| store.lives.get(k).filter(|l| l.power != Power::Running).map(|l| (k, l)))
        {
            let instance = key.rsplit('/').next().unwrap_or_default();
            let message = format!("Operation 'restart' is not allowed on VM '{name}_{instance}' since the VM is {}.", life.power.code());
            return arm_error(409, "OperationNotAllowed", &message);
        }
        // DeleteInstances: the named VMs go, and the scale set's capacity with them.
        if action == "delete" {
            if request["instanceIds"].as_array().is_none_or(|ids| ids.is_empty()) {
                let body = json!({"error": {"code": "InvalidParameter", "target": "instanceIds",
                    "message": "Required parameter 'instanceIds' is missing (null)."}});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            }
            for key in &named {
                store.resources.remove(key);
                store.lives.remove(key);
                store.ips.remove(key);
                admin.event(&vm_name(key), key, "deleted");
            }
            if let Some(set) = store.resources.get_mut(&set_key) {
                let capacity = set.value["sku"]["capacity"].as_u64().unwrap_or(0);
                set.value["sku"]["capacity"] = json!(capacity.saturating_sub(named.len() as u64));
            }
        } else if capacity_error.is_none() {
            let model = Self::model_of(store, set);
            for key in &named {
                let life = store.lives.entry(key.clone()).or_insert_with(|| VmLife::new(None));
                life.count(action);
                let event = match action {
                    "manualupgrade" => "upgraded",
                    "reimage" => "reimaged",
                    "redeploy" => "redeployed",
                    "restart" => "restarted",
                    _ => "started",
                };
                admin.event(&vm_name(key), key, event);
                match action {
                    "manualupgrade" => life.model = Some(model.clone()),
                    "redeploy" => {
                        life.boot();
                        life.maintenance = None;
                        life.probe = None;
                    }
                    _ => life.boot(),
                }
                if let Some(vm) = store.resources.get_mut(key) {
                    vm.value["properties"]["provisioningState"] = json!("Updating");
                    vm.changed = Instant::now();
                }
            }
        }
        let mut resp = StatusCode::ACCEPTED.into_response();
        let sub = set.trim_matches('/').split('/').nth(1).unwrap_or_default().to_owned();
        let op = AsyncOp { started: Instant::now(), error: capacity_error, result: None };
        begin(store, &mut resp, Lro::Location, &Scope { host, sub: &sub, kind: "virtualMachineScaleSets", location: &location }, op);
        resp
    }

    /// VirtualMachineScaleSetVMs_Update ("Updates a virtual machine of a VM scale set"): the VM's own
    /// `userData` ("UserData for the VM, which must be base-64 encoded"; "The size can't exceed 64 KB") is
    /// set, kept when the body sends none and deleted by an empty one (what the compute service does with a
    /// VM's PUT, azure-cli#17223); nothing else of the VM changes here (its model is its scale set's), and
    /// it keeps running ("User data can be updated from outside the VM, without stopping or rebooting the
    /// VM"). The answer, like every create or update answer, leaves the userData out.
    fn update_vm(store: &mut Store, key: &str, path: &str, body: &[u8]) -> Response {
        use base64::Engine;
        if !store.resources.contains_key(key) {
            return arm_error(404, "ResourceNotFound", &format!("The Resource '{path}' was not found."));
        }
        let Ok(sent) = serde_json::from_slice::<Value>(body) else {
            return arm_error(400, "InvalidRequestContent", "The request content was invalid and could not be deserialized.");
        };
        let invalid = |message: &str| {
            let body = json!({"error": {"code": "InvalidParameter", "target": "userData", "message": message}});
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        };
        let user_data = match &sent["properties"]["userData"] {
            Value::Null => None,
            Value::String(u) if u.is_empty() => Some(None),
            Value::String(u) if u.len() > USER_DATA_MAX => {
                return invalid(&format!("The size of userData ({} bytes) exceeds the limit of {USER_DATA_MAX} bytes.", u.len()));
            }
            Value::String(u) if base64::engine::general_purpose::STANDARD.decode(u).is_err() => {
                return invalid("userData must be base64 encoded.");
            }
            Value::String(u) => Some(Some(u.clone())),
            _ => return invalid("userData must be a base64-encoded string."),
        };
        if let Some(stored) = store.resources.get_mut(key)
            && let Some(props) = stored.value["properties"].as_object_mut()
        {
            match user_data {
                Some(Some(u)) => {
                    props.insert("userData".into(), json!(u));
                }
                Some(None) => {
                    props.remove("userData");
                }
                None => {}
            }
        }
        let Some(stored) = store.resources.get(key) else { return StatusCode::NO_CONTENT.into_response() };
        let mut answer = Azure::vm_view(store, key, stored, false);
        if let Some(p) = answer["properties"].as_object_mut() {
            p.remove("userData");
        }
        axum::Json(answer).into_response()
    }

    /// Out of band: what goes wrong with a VM (`impair`), or its health endpoint's answer (`probe`).
    fn change_vm(store: &mut Store, id: &str, change: &Value) -> Result<Value, String> {
        let action = change["action"].as_str().unwrap_or_default();
        if !id.contains("/virtualmachines/") || !store.resources.contains_key(id) {
            return Err(format!("no scale-set VM at {id}"));
        }
        let vmss = id.rsplit_once("/virtualmachines/").map(|(s, _)| s.to_owned()).unwrap_or_default();
        let current = Self::model_of(store, &vmss);
        let life = store.lives.entry(id.to_owned()).or_insert_with(|| VmLife::new(None));
        let has_extension = health_extension(life.model.as_ref().unwrap_or(&current)).is_some();
        match action {
            "impair" => {
                let health = change["health"].as_str();
                let maintenance = &change["maintenance"];
                if health.is_none() && maintenance.is_null() {
                    return Err("impair needs `health` (unhealthy, stopped, deallocated, failed) and/or `maintenance`".into());
                }
                match health {
                    Some("unhealthy") if !has_extension => {
                        return Err(format!("{id} runs no Application Health extension: nothing reports it unhealthy"));
                    }
                    Some("unhealthy") => life.unhealthy = Some(arm_time()),
                    Some("stopped") => life.power = Power::Stopped,
                    Some("deallocated") => life.power = Power::Deallocated,
                    Some("failed") => life.failed = Some(arm_time()),
                    Some(other) => return Err(format!("unknown health {other:?}; valid: unhealthy, stopped, deallocated, failed")),
                    None => {}
                }
                match maintenance {
                    Value::Null => {}
                    Value::String(start) => life.maintenance = Some((start.clone(), start.clone())),
                    Value::Object(w) => {
                        let start = w.get("start").and_then(Value::as_str).ok_or("maintenance needs `start`")?.to_owned();
                        let end = w.get("end").and_then(Value::as_str).unwrap_or(&start).to_owned();
                        life.maintenance = Some((start, end));
                    }
                    _ => return Err("maintenance is a start time or {\"start\", \"end\"}".into()),
                }
            }
            "heal" => {
                life.power = Power::Running;
                life.unhealthy = None;
                life.failed = None;
                life.maintenance = None;
            }
            "probe" => {
                if !has_extension {
                    return Err(format!("{id} runs no Application Health extension: nothing probes it"));
                }
                let answer = &change["response"];
                // Rich Health States: a missing or invalid ApplicationHealthState, or customMetrics that are not a
                // JSON object, make the state Unknown.
                let metrics = answer["customMetrics"].as_str().map(str::to_owned);
                let metrics_ok = metrics.as_deref().is_none_or(|m| serde_json::from_str::<Value>(m).is_ok_and(|v| v.is_object()));
                let state = match answer["ApplicationHealthState"].as_str() {
                    Some(s @ ("Healthy" | "Unhealthy")) if metrics_ok => s.to_owned(),
                    _ => "Unknown".to_owned(),
                };
                life.probe = Some(Probe { state, custom_metrics: metrics.filter(|_| metrics_ok), time: arm_time() });
            }
            _ => unreachable!("only VM actions reach here"),
        }
        Ok(json!({"done": action, "id": id}))
    }
}

/// Every call is judged by the vendor's published definition first (when `HPC_CONFORMANCE=strict`), and
/// so is the answer (see `conformance`).
/// Every ARM answer carries `x-ms-request-id` (a GUID), as Azure's do: the id a support case names.
async fn handle(state: State<Arc<Azure>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let admin = uri.path().starts_with("/_admin/");
    let mut response = judged(state, method, uri, headers, body).await;
    if !admin {
        static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("00000000-0000-4000-8000-{:04x}{n:08x}", std::process::id() & 0xffff);
        if let Ok(value) = id.parse() {
            response.headers_mut().insert("x-ms-request-id", value);
        }
    }
    response
}

async fn judged(State(az): State<Arc<Azure>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    if uri.path().starts_with("/_admin/") || !az.admin.judging() {
        return api(State(az), method.clone(), uri.clone(), headers, body.clone()).await;
    }
    let op = match crate::conformance::gate(crate::conformance::Cloud::Azure, method.as_str(), &uri, &headers, &body) {
        Ok(op) => op,
        Err(refusal) => return *refusal,
    };
    let response = api(State(az), method.clone(), uri.clone(), headers, body.clone()).await;
    crate::conformance::checked(op, crate::conformance::Cloud::Azure, response).await
}

async fn api(state: State<Arc<Azure>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut lost = false;
    let answer = arm(state, method, uri, headers, body, &mut lost).await;
    // An `answer_lost` fault: the call was carried out, and the caller hears ARM's 500 instead of its answer.
    if lost {
        arm_error(500, "InternalServerError", "Encountered internal server error. Diagnostic information: emulator.")
    } else {
        answer
    }
}

async fn arm(State(az): State<Arc<Azure>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes, lost: &mut bool) -> Response {
    let path = uri.path().to_owned();
    if let Some(route) = path.strip_prefix("/_admin/") {
        let (status, value) = if (method.as_str(), route) == ("POST", "metadata") {
            imds::listen(&az, &body)
        } else {
            az.admin.handle(method.as_str(), route, &body, az.as_ref())
        };
        return (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), axum::Json(value)).into_response();
    }
    if !headers.get("authorization").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("Bearer ")) {
        return arm_error(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.");
    }
    if !uri.query().unwrap_or_default().contains("api-version=") {
        return arm_error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let path = path.trim_end_matches('/').to_owned();
    // Long-running operations: the Azure-AsyncOperation status resource and the Location URL.
    let lower = path.to_lowercase();
    if lower.contains("/operations/") || lower.contains("/operationresults/") {
        // A status read is throttled and fails as any ARM read can (a fault that fired always shows).
        match az.admin.on_request("arm", "operations.get").map(|f| f.kind) {
            Some(FaultKind::Throttle) => {
                let mut resp = arm_error(
                    429,
                    "TooManyRequests",
                    "The request is being throttled as the limit has been reached for operation type - Read. Retry after 1 second.",
                );
                resp.headers_mut().insert("retry-after", "1".parse().unwrap());
                return resp;
            }
            Some(FaultKind::ServerError) => {
                return arm_error(500, "InternalServerError", "Encountered internal server error. Diagnostic information: emulator.");
            }
            _ => {}
        }
        let store = az.store.lock().unwrap();
        let Some(op) = store.operations.get(&lower) else { return arm_error(404, "NotFound", "operation not found") };
        let done = op.started.elapsed().as_secs_f64() >= SETTLE;
        if lower.contains("/operations/") {
            let name = path.rsplit('/').next().unwrap_or_default();
            return match (&op.error, done) {
                (_, false) => axum::Json(json!({"name": name, "status": "InProgress"})).into_response(),
                (None, true) => axum::Json(json!({"name": name, "status": "Succeeded"})).into_response(),
                (Some((code, message)), true) => {
                    axum::Json(json!({"name": name, "status": "Failed", "error": {"code": code, "message": message}})).into_response()
                }
            };
        }
        // The Location URL: 202 until done, then the final answer (no `status` in it).
        if !done {
            let mut resp = StatusCode::ACCEPTED.into_response();
            let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
            resp.headers_mut().insert("location", format!("https://{host}{path}?api-version=2025-01-01").parse().unwrap());
            resp.headers_mut().insert("retry-after", "1".parse().unwrap());
            return resp;
        }
        return match (&op.error, &op.result) {
            (Some((code, message)), _) => arm_error(400, code, message),
            (None, Some(id)) => match store.resources.get(id) {
                Some(s) => axum::Json(Azure::render(&store, id, s)).into_response(),
                None => StatusCode::NO_CONTENT.into_response(),
            },
            (None, None) => StatusCode::NO_CONTENT.into_response(),
        };
    }
    let listing_vms = path.to_lowercase().ends_with("/virtualmachines");
    // `$expand=instanceView` on a VM list or get: each VM's instance view in the same answer.
    let query = uri.query().unwrap_or_default().to_lowercase().replace("%24", "$");
    let expand = query.contains("$expand=instanceview");
    // `$expand=userData` on a standalone VM's get: its userData, which ARM otherwise leaves out (VirtualMachines_Get:
    // "'UserData' retrieves the UserData property as part of the VM model view that was provided by the user during
    // the VM Create/Update operation").
    let user_data = query.contains("$expand=userdata");
    // Scale set actions: POST .../virtualMachineScaleSets/{name}/manualupgrade, reimage, redeploy, restart, start.
    let vmss_action = if method == Method::POST { scale_set_action(&path) } else { None };
    // Resources - List By Resource Group: /subscriptions/{s}/resourceGroups/{rg}/resources.
    let group_segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let listing_group =
        group_segs.len() == 5 && group_segs[2].eq_ignore_ascii_case("resourceGroups") && group_segs[4].eq_ignore_ascii_case("resources");
    // Network Interfaces - List Virtual Machine Scale Set Network Interfaces.
    let listing_nics = path.to_lowercase().contains("/virtualmachinescalesets/") && path.to_lowercase().ends_with("/networkinterfaces");
    // A collection under a provider (.../providers/Microsoft.Network/virtualNetworks, .../virtualNetworks/v/subnets):
    // the list operations of each type.
    // Usage_List: /subscriptions/{s}/providers/Microsoft.Compute/locations/{location}/usages.
    let usages_location = (method == Method::GET
        && group_segs.len() == 7
        && group_segs[2].eq_ignore_ascii_case("providers")
        && group_segs[3].eq_ignore_ascii_case("Microsoft.Compute")
        && group_segs[4].eq_ignore_ascii_case("locations")
        && group_segs[6].eq_ignore_ascii_case("usages"))
    .then(|| group_segs[5].to_lowercase());
    let listing_usages = usages_location.is_some();
    let listing_collection = method == Method::GET && !listing_vms && !listing_nics && !listing_usages && {
        let lower: Vec<String> = group_segs.iter().map(|s| s.to_lowercase()).collect();
        lower.iter().rposition(|s| s == "providers").is_some_and(|p| {
            let rest = group_segs.len() - p - 1;
            rest >= 2 && rest.is_multiple_of(2)
        })
    };
    let kind = if listing_group {
        "resources".to_owned()
    } else if listing_usages {
        "usages".to_owned()
    } else if vmss_action.is_some() {
        "virtualMachineScaleSets".to_owned()
    } else if listing_vms {
        "virtualMachines".to_owned()
    } else if listing_nics {
        "networkInterfaces".to_owned()
    } else {
        type_of(&path)
    };
    let verb = match vmss_action {
        // Not `delete`: that is the scale set's own DELETE.
        Some((_, "delete")) => "deleteInstances".to_owned(),
        Some((_, action)) => action.to_owned(),
        None if listing_usages => "list".to_owned(),
        None if listing_vms || listing_nics || listing_group || listing_collection => "list".to_owned(),
        None => method.as_str().to_lowercase(),
    };
    let operation = format!("{kind}.{verb}");
    let mut capacity_error = None;
    if let Some(fault) = az.admin.on_request("arm", &operation) {
        match fault.kind {
            FaultKind::Latency => tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await,
            FaultKind::Throttle => {
                let mut resp = arm_error(429, "TooManyRequests", "The request is being throttled as the limit has been reached for operation type - Read. Retry after 1 second.");
                resp.headers_mut().insert("retry-after", "1".parse().unwrap());
                return resp;
            }
            FaultKind::NotFound => {
                return arm_error(404, "ResourceNotFound", "The Resource was not found (it was created moments ago; ARM reads lag).");
            }
            FaultKind::ServerError | FaultKind::OperationError => {
                return arm_error(500, "InternalServerError", "Encountered internal server error. Diagnostic information: emulator.");
            }
            FaultKind::AnswerLost => *lost = true,
            FaultKind::Capacity => {
                capacity_error = Some((
                    "AllocationFailed".to_owned(),
                    "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance".to_owned(),
                ))
            }
        }
    }
    // `If-None-Match: *` on a write: "check for any version of the resource, if one is found, fail the
    // operation" with 412 (the Azure REST API guidelines' conditional requests).
    let create_only = headers.get("if-none-match").and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() == "*");
    let if_match = headers.get("if-match").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let mut store = az.store.lock().unwrap();
    let key = path.to_lowercase();
    // `If-Match` on a write or delete of a kind with etags: optimistic concurrency (412 when stale).
    if matches!(method.as_str(), "PUT" | "PATCH" | "DELETE")
        && (ETAGGED.contains(&kind.as_str()) || kind == "agentPools")
        && let Some(refused) = stale(if_match.as_deref(), store.resources.get(&key), &path)
    {
        return refused;
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rg_id = if segs.len() >= 4 { format!("/{}", segs[..4].join("/")) } else { String::new() };
    match method.as_str() {
        "GET" if listing_usages => {
            axum::Json(json!({"value": store.usages(usages_location.as_deref().unwrap_or_default())})).into_response()
        }
        "POST" if vmss_action.is_some() => {
            let (set, action) = vmss_action.unwrap_or_default();
            let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1").to_owned();
            Azure::act(&mut store, &az.admin, &set, action, &body, capacity_error, &host)
        }
        "GET" if listing_nics => {
            let vmss = key.trim_end_matches("/networkinterfaces");
            let prefix = format!("{vmss}/virtualmachines/");
            let nics: Vec<Value> = store
                .resources
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
                .map(|(k, s)| {
                    let vm = s.value["id"].as_str().unwrap_or_default();
                    let nic = s.value["properties"]["networkProfile"]["networkInterfaces"][0]["id"].clone();
                    let ip = store.ips.get(k).cloned().unwrap_or_default();
                    json!({"id": nic, "name": nic.as_str().and_then(|n| n.rsplit('/').next()), "properties": {
                        "provisioningState": "Succeeded", "primary": true, "virtualMachine": {"id": vm},
                        "ipConfigurations": [{"name": "ipconfig", "properties": {"primary": true, "privateIPAddress": ip, "privateIPAllocationMethod": "Dynamic"}}]}})
                })
                .collect();
            axum::Json(json!({"value": nics})).into_response()
        }
        "GET" if listing_group => {
            let group = format!("/{}", group_segs[..4].join("/")).to_lowercase();
            if !store.resources.contains_key(&group) {
                return arm_error(404, "ResourceGroupNotFound", &format!("Resource group '{}' could not be found.", group_segs[3]));
            }
            let prefix = format!("{group}/providers/");
            // Top-level resources only (providers/<namespace>/<type>/<name>), as ARM lists them.
            let items: Vec<Value> = store
                .resources
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix) && k[prefix.len()..].split('/').count() == 3)
                .map(|(_, s)| {
                    let id = s.value["id"].as_str().unwrap_or_default();
                    let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
                    let kind = parts.get(5..7).map(|p| p.join("/")).unwrap_or_default();
                    json!({"id": id, "name": s.value["name"], "type": kind, "location": s.value["location"], "tags": s.value["tags"]})
                })
                .collect();
            axum::Json(json!({"value": items})).into_response()
        }
        "GET" if listing_collection => {
            let group = rg_id.to_lowercase();
            if !store.resources.contains_key(&group) {
                return arm_error(
                    404,
                    "ResourceGroupNotFound",
                    &format!("Resource group '{}' could not be found.", segs.get(3).unwrap_or(&"")),
                );
            }
            let prefix = format!("{key}/");
            let items: Vec<Value> = store
                .resources
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
                .map(|(k, s)| Azure::render(&store, k, s))
                .collect();
            axum::Json(json!({"value": items})).into_response()
        }
        // ResourceGroups_CheckExistence.
        "HEAD" if kind == "resourceGroups" => {
            if store.resources.contains_key(&key) { StatusCode::NO_CONTENT } else { StatusCode::NOT_FOUND }.into_response()
        }
        "GET" if listing_vms => {
            let prefix = format!("{key}/");
            let mut vms: Vec<Value> =
                store.resources.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(k, s)| Azure::vm_view(&store, k, s, expand)).collect();
            // A listing never carries userData (only a VM's get with `$expand=userData` does).
            for v in &mut vms {
                if let Some(p) = v["properties"].as_object_mut() {
                    p.remove("userData");
                }
            }
            axum::Json(json!({"value": vms})).into_response()
        }
        "GET" => match store.resources.get(&key) {
            Some(s) if kind == "virtualMachines" => {
                let mut v = Azure::vm_view(&store, &key, s, expand);
                if !user_data && let Some(p) = v["properties"].as_object_mut() {
                    p.remove("userData");
                } else if user_data && is_scale_set_vm(&key) && !v["properties"]["userData"].is_string() {
                    // A scale-set VM given none of its own has what its model gave it.
                    let model = store.lives.get(&key).and_then(|l| l.model.clone()).unwrap_or_else(|| {
                        Azure::model_of(&store, key.rsplit_once("/virtualmachines/").map(|(set, _)| set).unwrap_or_default())
                    });
                    if let Some(u) = model["userData"].as_str() {
                        v["properties"]["userData"] = json!(u);
                    }
                }
                axum::Json(v).into_response()
            }
            Some(s) => axum::Json(Azure::render(&store, &key, s)).into_response(),
            None if kind == "resourceGroups" => {
                arm_error(404, "ResourceGroupNotFound", &format!("Resource group '{}' could not be found.", segs.get(3).unwrap_or(&"")))
            }
            None => arm_error(404, "ResourceNotFound", &format!("The Resource '{}' was not found.", path)),
        },
        "PUT" if is_scale_set_vm(&key) => Azure::update_vm(&mut store, &key, &path, &body),
        "PUT" => {
            if kind != "resourceGroups" && !store.resources.contains_key(&rg_id.to_lowercase()) {
                return arm_error(
                    404,
                    "ResourceGroupNotFound",
                    &format!("Resource group '{}' could not be found.", segs.get(3).unwrap_or(&"")),
                );
            }
            let existed = store.resources.contains_key(&key);
            // `If-None-Match: *`: create only; a resource already there is refused, never replaced.
            if create_only && existed {
                return precondition_failed(&path);
            }
            let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
                return arm_error(400, "InvalidRequestContent", "The request content was invalid and could not be deserialized.");
            };
            if let Err((target, message)) = documented_rules(&kind, &value) {
                let body = json!({"error": {"code": "InvalidParameter", "target": target, "message": message}});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            }
            if kind == "agentPools"
                && let Some(refused) = Azure::agent_pool_refusal(&store, &key, &value)
            {
                return refused;
            }
            // A PUT replaces the whole resource, children listed inline included: a virtual network's subnets
            // are the ones its body lists (none when it lists none), and one that goes while something is in
            // it refuses the whole write (InUseSubnetCannotBeDeleted), as the network service does.
            let listed_subnets = if kind == "virtualNetworks" {
                value.get_mut("properties").and_then(Value::as_object_mut).and_then(|p| p.remove("subnets"))
            } else {
                None
            };
            let mut dropped = Vec::new();
            if kind == "virtualNetworks" && existed {
                let listed: Vec<String> = listed_subnets
                    .iter()
                    .filter_map(Value::as_array)
                    .flatten()
                    .filter_map(child_name)
                    .map(|n| format!("{key}/subnets/{}", n.to_lowercase()))
                    .collect();
                for child in Azure::children(&store, &key, "subnets") {
                    if listed.contains(&child) {
                        continue;
                    }
                    if let Some(user) = Azure::subnet_user(&store, &child) {
                        return subnet_in_use(&child, &user);
                    }
                    dropped.push(child);
                }
            }
            // A security group's rules are inline (`properties.securityRules`): the ones the body lists, each
            // answered with its id and provisioning state.
            if kind == "networkSecurityGroups"
                && let Some(rules) = value.pointer_mut("/properties/securityRules").and_then(Value::as_array_mut)
            {
                for rule in rules {
                    let Some(name) = child_name(rule) else { continue };
                    let id = format!("{path}/securityRules/{name}");
                    rule["type"] = json!(arm_type(&id));
                    rule["id"] = json!(id);
                    if let Some(props) = rule.get_mut("properties").and_then(Value::as_object_mut) {
                        props.insert("provisioningState".into(), json!("Succeeded"));
                    }
                }
            }
            // Quota (only a limit a test set) and capacity (at most what the place has room for) of the VMs
            // this write adds: a scale set's new instances, or a standalone VM.
            let standalone = kind == "virtualMachines" && !key.contains("/virtualmachinescalesets/");
            let mut room = None;
            if capacity_error.is_none() && (kind == "virtualMachineScaleSets" || standalone) {
                let size =
                    if standalone { value["properties"]["hardwareProfile"]["vmSize"].as_str() } else { value["sku"]["name"].as_str() };
                let (size, location, zone, spot) = placement_of(&value, size);
                let wanted = if standalone { 1 } else { value["sku"]["capacity"].as_u64().unwrap_or(0) };
                let have = if standalone { u64::from(existed) } else { Azure::set_vms_below(&store, &key, wanted) };
                if let Some((code, message)) = store.quota_refusal(&size, &location, spot, wanted.saturating_sub(have)) {
                    return arm_error(409, &code, &message);
                }
                room = store.room(&key, &size, &location, zone.as_deref()).map(|r| r.saturating_sub(have));
                if room.is_some_and(|r| r < wanted.saturating_sub(have)) {
                    let (code, place) = if zone.is_some() { ("ZonalAllocationFailed", "zone") } else { ("AllocationFailed", "region") };
                    capacity_error = Some((
                        code.to_owned(),
                        format!(
                            "Allocation failed. We do not have sufficient capacity for the requested VM size {size} in this {place}. Read more about \
                             improving likelihood of allocation success at http://aka.ms/allocation-guidance"
                        ),
                    ));
                }
                // A standalone VM without room is not made at all.
                if standalone && capacity_error.is_some() {
                    room = Some(0);
                }
            }
            let name = segs.last().copied().unwrap_or_default().to_owned();
            value["id"] = json!(path);
            value["name"] = json!(name);
            value["type"] = json!(arm_type(&path));
            if value["identity"].is_object() {
                keyvault::fill_identity(&mut value, store.resources.get(&key).map(|s| &s.value), &path);
            }
            if kind == "vaults"
                && let Err(refused) = keyvault::on_vault_put(&az, &mut store, &key, &mut value, existed)
            {
                return *refused;
            }
            if kind == "amlFilesystems" {
                // What AMLFS reports once built: where clients mount it (the filesystem is always lustrefs).
                // An update keeps the address the filesystem was built with.
                let kept = store.resources.get(&key).map(|s| s.value["properties"]["clientInfo"].clone());
                let n = store.resources.len() % 250 + 4;
                let mgs = format!("10.0.0.{n}");
                let info = kept.filter(|k| k.is_object()).unwrap_or_else(|| {
                    json!({"mgsAddress": mgs, "mountCommand": format!("sudo mount -t lustre -o noatime,flock {mgs}@tcp:/lustrefs /lustre")})
                });
                if let Some(p) = value.get_mut("properties").and_then(Value::as_object_mut) {
                    p.insert("clientInfo".into(), info);
                }
            }
            if value.get("properties").is_none() {
                value["properties"] = json!({});
            }
            // A standalone VM's identity from its creation: `vmId` ("Specifies the VM unique ID which is a 128-bits
            // identifier that is encoded and stored in all Azure IaaS VMs SMBIOS") and `timeCreated`, kept by updates.
            if standalone {
                let kept = store
                    .resources
                    .get(&key)
                    .map(|s| (s.value["properties"]["vmId"].clone(), s.value["properties"]["timeCreated"].clone()));
                let (vm_id, created) = match kept {
                    Some((id, at)) if id.is_string() => (id, at),
                    _ => {
                        store.next += 1;
                        let n = store.next;
                        (json!(format!("00000000-0000-4000-8000-{n:012x}")), json!(arm_time()))
                    }
                };
                value["properties"]["vmId"] = vm_id;
                value["properties"]["timeCreated"] = created;
            }
            // A network interface's dynamic addresses, as Azure allocates them (the VM's metadata service serves them).
            if kind == "networkInterfaces" {
                imds::assign_addresses(&mut store, &key, &mut value);
            }
            let mut lro = lro_of(&kind, "PUT", !existed);
            // VirtualMachines_CreateOrUpdate: a create answers 201 with a Location to follow.
            if standalone && !existed {
                lro = Lro::Location;
            }
            // A client this release does not answer for (the previous release, unjudged) followed only
            // Azure-AsyncOperation, which Azure's compute service also sends beside a scale set's Location.
            if !az.admin.judging() && lro == Lro::Location {
                lro = Lro::Both;
            }
            // Resource groups and proximity placement groups report provisioning differently (a group's is
            // `properties.provisioningState` too; a proximity placement group has none at all).
            if kind != "proximityPlacementGroups" {
                value["properties"]["provisioningState"] = json!(if !is_long_running(&kind) {
                    "Succeeded"
                } else if existed {
                    "Updating"
                } else {
                    "Creating"
                });
                if capacity_error.is_some() {
                    value["properties"]["provisioningState"] = json!("Failed");
                }
            }
            let placed_nothing = standalone && room == Some(0);
            if !placed_nothing {
                store.resources.insert(key.clone(), Stored { value: value.clone(), changed: Instant::now() });
            }
            for child in dropped {
                store.resources.remove(&child);
            }
            // AKS makes a cluster's first agent pools from its `agentPoolProfiles` (each profile is an agent pool's
            // properties with its name).
            if kind == "managedClusters" && !existed {
                for profile in value["properties"]["agentPoolProfiles"].as_array().cloned().unwrap_or_default() {
                    let Some(name) = profile["name"].as_str() else { continue };
                    let id = format!("{path}/agentPools/{name}");
                    let mut props = profile.clone();
                    if let Some(p) = props.as_object_mut() {
                        p.remove("name");
                        p.insert("provisioningState".into(), json!("Succeeded"));
                    }
                    let pool = json!({"id": id, "name": name, "type": arm_type(&id), "properties": props});
                    store.resources.insert(id.to_lowercase(), Stored { value: pool, changed: Instant::now() });
                }
            }
            for item in listed_subnets.iter().filter_map(Value::as_array).flatten() {
                let Some(name) = child_name(item) else { continue };
                let id = format!("{path}/subnets/{name}");
                let mut subnet = json!({"id": id, "name": name, "type": arm_type(&id), "properties": item["properties"].clone()});
                if !subnet["properties"].is_object() {
                    subnet["properties"] = json!({});
                }
                subnet["properties"]["provisioningState"] = json!("Succeeded");
                store.resources.insert(id.to_lowercase(), Stored { value: subnet, changed: Instant::now() });
            }
            // Under an allocation failure a scale set keeps the VMs that were placed (and its model's
            // capacity); a fault injected as "capacity" places none.
            if kind == "virtualMachineScaleSets" && (capacity_error.is_none() || room.is_some()) {
                let capacity = value["sku"]["capacity"].as_u64().unwrap_or(0);
                Azure::scale_set_vms(&mut store, &az.admin, &path, capacity, room);
            }
            let status = if existed { StatusCode::OK } else { StatusCode::CREATED };
            let answer = store.resources.get(&key).map_or_else(|| value.clone(), |s| Azure::render(&store, &key, s));
            let mut resp = (status, axum::Json(answer)).into_response();
            let location = value["location"].as_str().unwrap_or("eastus").to_lowercase();
            let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1").to_owned();
            let op = AsyncOp { started: Instant::now(), error: capacity_error, result: Some(key.clone()) };
            begin(
                &mut store,
                &mut resp,
                lro,
                &Scope { host: &host, sub: segs.get(1).unwrap_or(&""), kind: &kind, location: &location },
                op,
            );
            resp
        }
        // UpdateTags / Update: the resource as it is, its tags replaced by the ones sent ("The behavior for a
        // PATCH of the tags property is to replace all tags with the provided tag keys and values", ARM's
        // resource API reference) and any other field merged (JSON merge patch). Nothing else changes: a
        // virtual network keeps its subnets, a security group its rules.
        "PATCH" => {
            let Some(stored) = store.resources.get(&key) else {
                return if kind == "resourceGroups" {
                    arm_error(404, "ResourceGroupNotFound", &format!("Resource group '{}' could not be found.", segs.get(3).unwrap_or(&"")))
                } else {
                    arm_error(404, "ResourceNotFound", &format!("The Resource '{path}' was not found."))
                };
            };
            if create_only {
                return precondition_failed(&path);
            }
            if !PATCHED.contains(&kind.as_str()) {
                return arm_error(405, "MethodNotAllowed", &format!("The emulator serves no PATCH of {kind}."));
            }
            let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
                return arm_error(400, "InvalidRequestContent", "The request content was invalid and could not be deserialized.");
            };
            let mut value = stored.value.clone();
            let changed = stored.changed;
            for (field, v) in patch.as_object().into_iter().flatten() {
                match field.as_str() {
                    "tags" if v.is_null() => value["tags"] = json!({}),
                    "tags" => value["tags"] = v.clone(),
                    // Fixed once made (ARM: "a user can not change the location, type or name of their resource").
                    "id" | "name" | "type" | "location" => {}
                    _ => merge_patch(&mut value[field.as_str()], v),
                }
            }
            let capacity = (kind == "virtualMachineScaleSets").then(|| patch["sku"]["capacity"].as_u64()).flatten();
            store.resources.insert(key.clone(), Stored { value, changed });
            // VirtualMachineScaleSets_Update with a capacity: the set scales to it, as its PUT would.
            if let Some(capacity) = capacity {
                Azure::scale_set_vms(&mut store, &az.admin, &path, capacity, None);
            }
            let mut answer = store.resources.get(&key).map(|s| Azure::render(&store, &key, s)).unwrap_or_default();
            // A VM's answer leaves its userData out, as its GET does.
            if kind == "virtualMachines"
                && let Some(p) = answer["properties"].as_object_mut()
            {
                p.remove("userData");
            }
            axum::Json(answer).into_response()
        }
        "DELETE" => {
            if kind == "subnets"
                && store.resources.contains_key(&key)
                && let Some(user) = Azure::subnet_user(&store, &key)
            {
                return subnet_in_use(&key, &user);
            }
            let Some(gone) = store.resources.remove(&key) else { return StatusCode::NO_CONTENT.into_response() };
            let prefix = format!("{key}/");
            for vm in store.resources.keys().filter(|k| (k.starts_with(&prefix) || **k == key) && is_scale_set_vm(k)) {
                az.admin.event(&vm_name(vm), vm, "deleted");
            }
            store.resources.retain(|k, _| !k.starts_with(&prefix));
            store.lives.retain(|k, _| *k != key && !k.starts_with(&prefix));
            // A scale set made again under the name numbers its VMs from 0.
            store.next_instance.retain(|k, _| *k != key && !k.starts_with(&prefix));
            let lro = lro_of(&kind, "DELETE", false);
            if lro == Lro::Sync {
                return StatusCode::OK.into_response();
            }
            let location = gone.value["location"].as_str().unwrap_or("eastus").to_lowercase();
            let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1").to_owned();
            let mut resp = StatusCode::ACCEPTED.into_response();
            let op = AsyncOp { started: Instant::now(), error: None, result: None };
            begin(
                &mut store,
                &mut resp,
                lro,
                &Scope { host: &host, sub: segs.get(1).unwrap_or(&""), kind: &kind, location: &location },
                op,
            );
            resp
        }
        _ => arm_error(405, "MethodNotAllowed", "The method is not allowed."),
    }
}

impl Emulated for Azure {
    fn reset(&self) {
        self.metadata.close_all();
        *self.store.lock().unwrap() = Store::default();
    }

    /// `POST /_admin/quota {"id", "scope", "limit"}`: a compute usage's limit in a location (usage is what
    /// runs there); `POST /_admin/capacity {"zone", "instance_type", "available"}`: at most `available` VMs of
    /// the size live in the location (or `<location>-<zone>`) at once, `null` lifting the limit.
    fn extra_admin(&self, method: &str, route: &str, body: &Value) -> Option<(u16, Value)> {
        let text = |k: &str| body[k].as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        let mut store = self.store.lock().unwrap();
        match (method, route) {
            ("POST", "quota") => {
                let (Some(id), Some(scope), Some(limit)) = (text("id"), text("scope"), body["limit"].as_u64()) else {
                    return Some((400, json!({"error": "quota needs `id` (a usage name), `scope` (a location) and `limit` (vCPUs)"})));
                };
                store.quotas.insert((id.to_lowercase(), scope.to_lowercase()), limit);
                let (limit, used) = store.usage(&id, &scope);
                Some((200, json!({"id": id, "scope": scope, "limit": limit, "used": used})))
            }
            ("POST", "capacity") => {
                let (Some(zone), Some(size)) = (text("zone"), text("instance_type")) else {
                    return Some((
                        400,
                        json!({"error": "capacity needs `zone` (a location or <location>-<zone>), `instance_type` and `available`"}),
                    ));
                };
                let place = (zone.to_lowercase(), size.to_lowercase());
                match &body["available"] {
                    Value::Null => {
                        store.capacity.remove(&place);
                    }
                    v => match v.as_u64() {
                        Some(n) => {
                            store.capacity.insert(place, n);
                        }
                        None => return Some((400, json!({"error": "`available` is a count of VMs or null"}))),
                    },
                }
                Some((200, json!({"zone": zone, "instance_type": size, "available": body["available"]})))
            }
            _ => None,
        }
    }

    fn inventory(&self) -> Value {
        let store = self.store.lock().unwrap();
        let mut by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for s in store.resources.values() {
            let id = s.value["id"].as_str().unwrap_or_default().to_owned();
            let kind = if id.to_lowercase().contains("/virtualmachines/") { "virtualMachines".into() } else { type_of(&id) };
            by_kind.entry(kind).or_default().push(id);
        }
        let secrets = keyvault::inventory(&store);
        json!({"cloud": "azure", "empty": store.resources.is_empty() && secrets.is_empty(),
               "resources": {"arm": by_kind, "keyvault": {"secrets": secrets}}})
    }

    fn snapshot(&self) -> Value {
        let store = self.store.lock().unwrap();
        let all: serde_json::Map<String, Value> = store.resources.iter().map(|(k, s)| (k.clone(), Azure::view(s))).collect();
        // How often each scale set action reached each VM: what "only the named nodes were remade" checks.
        let actions: serde_json::Map<String, Value> =
            store.lives.iter().filter(|(_, l)| !l.counts.is_empty()).map(|(k, l)| (k.clone(), json!(l.counts))).collect();
        json!({"arm": all, "vm_actions": actions})
    }

    fn out_of_band(&self, change: &Value) -> Result<Value, String> {
        let mut store = self.store.lock().unwrap();
        let id = change.get("id").and_then(Value::as_str).unwrap_or_default().to_lowercase();
        let action = change.get("action").and_then(Value::as_str).unwrap_or_default();
        match action {
            // Another tool's resource beside ours: a copy (with its children, a scale set's VMs) at `to`,
            // with its tags changed.
            "copy" => {
                let to = change.get("to").and_then(Value::as_str).ok_or("copy needs `to`, the new resource id")?.to_owned();
                if !store.resources.contains_key(&id) {
                    return Err(format!("nothing at {id}"));
                }
                let key = to.to_lowercase();
                if store.resources.contains_key(&key) {
                    return Err(format!("{to} exists"));
                }
                let prefix = format!("{id}/");
                let copies: Vec<(String, Value)> = store
                    .resources
                    .iter()
                    .filter(|(k, _)| **k == id || k.starts_with(&prefix))
                    .map(|(k, s)| {
                        let rest = &k[id.len()..];
                        let mut value = s.value.clone();
                        let old = value["id"].as_str().unwrap_or_default().to_owned();
                        value["id"] = json!(format!("{to}{}", &old[id.len().min(old.len())..]));
                        if rest.is_empty() {
                            value["name"] = json!(to.rsplit('/').next().unwrap_or_default());
                            if let Some(extra) = change.get("tags").and_then(Value::as_object) {
                                if !value["tags"].is_object() {
                                    value["tags"] = json!({});
                                }
                                if let Some(t) = value["tags"].as_object_mut() {
                                    t.extend(extra.clone());
                                }
                            }
                        }
                        (format!("{key}{rest}"), value)
                    })
                    .collect();
                for (k, value) in copies {
                    // Settled already: its provisioning state does not change under the test.
                    let changed = Instant::now().checked_sub(Duration::from_secs(60)).unwrap_or_else(Instant::now);
                    store.resources.insert(k, Stored { value, changed });
                }
                Ok(json!({"done": action, "id": to}))
            }
            "delete" => {
                store.resources.remove(&id).ok_or(format!("nothing at {id}"))?;
                let prefix = format!("{id}/");
                store.resources.retain(|k, _| !k.starts_with(&prefix));
                store.lives.retain(|k, _| *k != id && !k.starts_with(&prefix));
                store.next_instance.retain(|k, _| *k != id && !k.starts_with(&prefix));
                Ok(json!({"done": action, "id": id}))
            }
            "impair" | "heal" | "probe" => Azure::change_vm(&mut store, &id, change),
            other => Err(format!("unknown out-of-band action {other:?}; valid: copy, delete, impair, heal, probe")),
        }
    }
}
