//! OCI's REST APIs as the resources use them: Core (`/20160918`, `iaas.<region>.oraclecloud.com`), File
//! Storage with Lustre (`/20250228`, `lustre-file-storage.<region>.oci.oraclecloud.com`) and Limits
//! (`/20190729`, `limits.<region>.oci.oraclecloud.com`, for the plan's quota check), on reqwest with
//! our own request signer (the only Rust OCI SDK is AGPL). Credentials come from the provider's `oci` block
//! or a profile of the OCI config file (`~/.oci/config`, or the file `OCI_CONFIG_FILE` names), the block
//! winning attribute by attribute. 429 (OCI sends no Retry-After) and 5xx are retried under the one retry
//! policy (`clouds::retry`); creates carry an `opc-retry-token`, so a retried create never makes a
//! second resource. "Out of host capacity" is not retried: it is reported at once and the apply can be
//! run again. Lists follow `opc-next-page`; work requests, lifecycle states and deletes OCI answers with
//! 409 (a dependant still terminating) are polled by the one poll loop (`shared::Poll`), and every wait
//! ends on the resource's timeout or on StopProvider.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::Value as Json;

use super::signing::{Request, Signer};
use crate::catalog::Cloud;
use crate::clouds::retry::{self, Answer};
use crate::clouds::shared::Poll;
use crate::clouds::{CloudError, ErrorKind};
use crate::config::{CloudSettings, ProviderConfig};
use crate::framework::Context;
use crate::redact::Secret;

/// The OCI services the resources call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Core,
    Lustre,
    /// Service limits: GetResourceAvailability (the `oci` SDK's LimitsClient puts its version in the path).
    Limits,
    /// Container Engine for Kubernetes: an OKE cluster read, and its kubeconfig, for self-managed workers.
    ContainerEngine,
}

impl Service {
    fn version(self) -> &'static str {
        match self {
            Service::Core => "20160918",
            Service::Lustre => "20250228",
            Service::Limits => "20190729",
            Service::ContainerEngine => "20180222",
        }
    }
}

#[derive(Clone)]
pub struct Oci {
    pub region: String,
    /// The tenancy OCID of the API key: the root compartment, where OCI keeps GPU memory fabrics.
    pub tenancy: String,
    core: String,
    lustre: String,
    limits: String,
    containerengine: String,
    http: reqwest::Client,
    signer: Arc<Signer>,
}

impl std::fmt::Debug for Oci {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Oci({}, {})", self.region, self.core)
    }
}

/// The client for a region, built once per process, configuration and region.
pub fn connect(ctx: &Context, region: &str) -> Result<Oci, CloudError> {
    static CLIENTS: Mutex<BTreeMap<String, Oci>> = Mutex::new(BTreeMap::new());
    let settings = ctx.configured::<ProviderConfig>().and_then(|c| c.clouds.get(&Cloud::Oci)).cloned().unwrap_or_default();
    let key = format!("{region}|{}", settings.client_key());
    if let Some(found) = CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(found.clone());
    }
    let client = build(&settings, region)?;
    CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, client.clone());
    Ok(client)
}

/// A profile of an OCI config file (INI: `[PROFILE]` then `key=value` lines).
pub fn config_profile(text: &str, profile: &str) -> Option<BTreeMap<String, String>> {
    let mut current = None::<String>;
    let mut out = BTreeMap::new();
    let mut found = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_owned());
            found |= name.trim() == profile;
            continue;
        }
        if current.as_deref() == Some(profile)
            && let Some((k, v)) = line.split_once('=')
        {
            out.insert(k.trim().to_owned(), v.trim().to_owned());
        }
    }
    found.then_some(out)
}

fn home_path(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => path.to_owned(),
    }
}

fn build(settings: &CloudSettings, region: &str) -> Result<Oci, CloudError> {
    let attr = |k: &str| settings.settings.get(k).cloned();
    let file_path = std::env::var("OCI_CONFIG_FILE").unwrap_or_else(|_| home_path("~/.oci/config"));
    let profile_name = attr("config_file_profile").unwrap_or_else(|| "DEFAULT".into());
    let profile = match std::fs::read_to_string(&file_path) {
        Ok(text) => match config_profile(&text, &profile_name) {
            Some(p) => p,
            None if attr("config_file_profile").is_some() => {
                return Err(format!("config_file_profile = {profile_name:?}: the OCI config file {file_path} has no such profile").into());
            }
            None => BTreeMap::new(),
        },
        Err(_) if attr("config_file_profile").is_some() => {
            return Err(format!("config_file_profile = {profile_name:?} is set but the OCI config file {file_path} cannot be read").into());
        }
        Err(_) => BTreeMap::new(),
    };
    let pick = |attr_name: &str, file_key: &str| attr(attr_name).or_else(|| profile.get(file_key).cloned());
    let (tenancy, user, fingerprint) = (pick("tenancy_ocid", "tenancy"), pick("user_ocid", "user"), pick("fingerprint", "fingerprint"));
    let missing: Vec<&str> = [("tenancy_ocid", &tenancy), ("user_ocid", &user), ("fingerprint", &fingerprint)]
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
    let pem: Option<Secret<String>> = match (settings.secret("private_key"), pick("private_key_path", "key_file")) {
        (Some(pem), _) => Some(pem.clone()),
        (None, Some(path)) => {
            Some(std::fs::read_to_string(home_path(&path)).map(Secret::new).map_err(|e| format!("reading the OCI API key {path}: {e}"))?)
        }
        (None, None) => None,
    };
    if !missing.is_empty() || pem.is_none() {
        let mut all = missing.clone();
        if pem.is_none() {
            all.push("private_key or private_key_path");
        }
        return Err(format!(
            "the OCI API key is incomplete: set {} in the provider's oci block, or in profile [{profile_name}] of {file_path} \
             (tenancy, user, fingerprint, key_file)",
            all.join(", ")
        )
        .into());
    }
    let pem = pem.unwrap_or_default();
    if pem.expose().contains("ENCRYPTED") || profile.contains_key("pass_phrase") {
        return Err(
            "the OCI API key is encrypted with a pass phrase; give an unencrypted key (openssl rsa -in key.pem -out plain.pem)".into()
        );
    }
    let tenancy = tenancy.unwrap_or_default();
    let signer =
        Signer::from_pem(pem.expose(), &tenancy, &user.unwrap_or_default(), &fingerprint.unwrap_or_default()).map_err(|e| e.to_string())?;
    let region = if region.is_empty() { pick("region", "region").unwrap_or_default() } else { region.to_owned() };
    // An endpoint override (an emulator) serves every service at the one address, by each one's version path.
    let (core, lustre, limits, containerengine) = match &settings.endpoint {
        Some(e) => {
            let e = e.trim_end_matches('/').to_owned();
            (e.clone(), e.clone(), e.clone(), e)
        }
        None => (
            format!("https://iaas.{region}.oraclecloud.com"),
            format!("https://lustre-file-storage.{region}.oci.oraclecloud.com"),
            format!("https://limits.{region}.oci.oraclecloud.com"),
            format!("https://containerengine.{region}.oci.oraclecloud.com"),
        ),
    };
    let http =
        reqwest::Client::builder().timeout(Duration::from_secs(120)).build().map_err(|e| format!("building the HTTPS client: {e}"))?;
    Ok(Oci { region, tenancy, core, lustre, limits, containerengine, http, signer: Arc::new(signer) })
}

/// An OCI answer: status, the JSON body, and the headers the resources use.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Json,
    pub next_page: Option<String>,
    pub work_request: Option<String>,
    /// The resource's `etag`, which an update's `if-match` carries back.
    pub etag: Option<String>,
    /// The body as text, for the answers that are not JSON (a kubeconfig, which is a credential).
    pub text: Secret<String>,
    /// OCI's `opc-request-id`, which Oracle support asks for.
    pub request_id: Option<String>,
}

impl retry::Heard for Reply {
    fn status(&self) -> Option<u16> {
        Some(self.status)
    }
    fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

/// Capitalises the first letter: `instances` -> `Instances`.
fn title(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

/// The singular of a collection's name as OCI's operations spell it: `vcns` -> `Vcn`, `policies` -> `Policy`.
fn singular(collection: &str) -> String {
    let t = title(collection);
    match t.strip_suffix("ies") {
        Some(stem) => format!("{stem}y"),
        None => t.strip_suffix('s').map(str::to_owned).unwrap_or(t),
    }
}

/// The OCI operation a request is, in the SDKs' names (`LaunchInstance`, `ListVcns`, `GetWorkRequest`,
/// `TerminateInstance`, `ListClusterNetworkInstances`), from its method and its path after the version.
pub fn operation(method: &str, path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some(collection) = segs.first().copied() else { return format!("{method} /") };
    let one = singular(collection);
    match (method, &segs[1..]) {
        ("POST", []) if collection == "instances" => "LaunchInstance".into(),
        ("POST", []) => format!("Create{one}"),
        ("POST", [_]) if collection == "instances" => "InstanceAction".into(),
        ("GET", []) => format!("List{}", title(collection)),
        ("GET", [_]) => format!("Get{one}"),
        ("PUT", [_]) => format!("Update{one}"),
        ("DELETE", [_]) if matches!(collection, "instances" | "clusterNetworks") => format!("Terminate{one}"),
        ("DELETE", [_]) => format!("Delete{one}"),
        ("POST", [_, "kubeconfig", "content"]) => "CreateKubeconfig".into(),
        // An action is its verb, the resource, then the rest of its name: `addSecurityRules` on a network
        // security group is AddNetworkSecurityGroupSecurityRules, `changeCompartment` on a VCN
        // ChangeVcnCompartment; File Storage's import keeps its own name.
        ("POST", [_, "actions", "startImportFromObject"]) => "StartImportFromObject".into(),
        ("POST", [_, "actions", action]) => {
            let split = action.find(|c: char| c.is_ascii_uppercase()).unwrap_or(action.len());
            format!("{}{one}{}", title(&action[..split]), &action[split..])
        }
        ("GET", [_, "limits", _, "resourceAvailability"]) => "GetResourceAvailability".into(),
        ("GET", [_, "errors"]) => format!("List{one}Errors"),
        ("GET", [_, sub]) => format!("List{one}{}", title(sub)),
        ("GET", [_, sub, _]) => format!("Get{}", singular(sub)),
        (m, _) => format!("{m} {collection}"),
    }
}

impl Reply {
    /// An answer from its status, a header reader and its body text (null when it is not JSON).
    pub fn of(status: u16, header: impl Fn(&str) -> Option<String>, text: &str) -> Reply {
        let (next_page, work_request, etag) = (header("opc-next-page"), header("opc-work-request-id"), header("etag"));
        let (text, request_id) = (Secret::new(text.to_owned()), header("opc-request-id"));
        Reply { status, body: serde_json::from_str(text.expose()).unwrap_or(Json::Null), next_page, work_request, etag, text, request_id }
    }

    /// OCI's `{"code", "message"}` as `Code: message`, or the status and the body, quoted at most
    /// [`QUOTED`](crate::clouds::shared::QUOTED) bytes long (an answer may be a whole list).
    pub fn error(&self) -> String {
        let text = match (self.body["code"].as_str(), self.body["message"].as_str()) {
            (Some(c), Some(m)) => format!("{c}: {m}"),
            _ => format!("HTTP {}: {}", self.status, self.body),
        };
        crate::clouds::shared::quoted(&text).into_owned()
    }

    fn out_of_capacity(&self) -> bool {
        out_of_capacity(&self.body)
    }

    /// The answer as a [`CloudError`], `what` said first: `creating VCN lib-vpc: LimitExceeded: too many`.
    pub fn failure(&self, what: &str) -> CloudError {
        error(self.status, &self.body, format!("{what}: {}", self.error()))
    }
}

/// The headers of a request beyond the signed ones: a POST's `opc-retry-token` (one for all its attempts:
/// "A token that uniquely identifies a request so it can be retried in case of a timeout or server error
/// without risk of executing that same action again") and an update's `if-match`.
#[derive(Clone, Copy)]
struct Extra<'a> {
    retry_token: Option<&'a str>,
    if_match: Option<&'a str>,
}

/// OCI's words for a launch that found no host for the shape: a 500 `InternalError` whose message says
/// "Out of host capacity" (OCI documents no code of its own for it), kept as the error's code.
/// Items a page of a list asks for (`limit`). With the pages a list follows
/// ([`crate::clouds::shared::Pages::most_items`]), it bounds what one list can read: the instances of the
/// compartment in the availability domain, a cluster's nodes among them.
pub const LIST_PAGE: usize = 1000;

pub const OUT_OF_HOST_CAPACITY: &str = "Out of host capacity";

fn out_of_capacity(body: &Json) -> bool {
    body["message"].as_str().is_some_and(|m| m.to_ascii_lowercase().contains(&OUT_OF_HOST_CAPACITY.to_ascii_lowercase()))
}

/// An OCI error (`{"code", "message"}`, API Errors in the OCI documentation) as a [`CloudError`]: the status
/// gives the kind, the code refines it; a launch out of host capacity is no capacity.
pub fn error(status: u16, body: &Json, message: impl Into<String>) -> CloudError {
    let code = body["code"].as_str();
    let mut out = CloudError::from_status(status, None, code, message);
    if out_of_capacity(body) {
        out.kind = ErrorKind::NoCapacity;
        out.code = Some(OUT_OF_HOST_CAPACITY.to_owned());
        return out;
    }
    out.kind = match code {
        Some("NotAuthorizedOrNotFound" | "NotFound") => ErrorKind::NotFound,
        Some("TooManyRequests") => ErrorKind::Throttled { retry_after: None },
        Some("LimitExceeded" | "QuotaExceeded") => ErrorKind::Quota,
        Some("Conflict" | "IncorrectState" | "NotAuthorizedOrResourceAlreadyExists") => ErrorKind::Conflict,
        Some("NotAuthenticated") => ErrorKind::Unauthenticated,
        Some("InvalidParameter" | "MissingParameter" | "CannotParseRequest") => ErrorKind::InvalidRequest { field: None },
        _ => out.kind,
    };
    out
}

/// The sentence every authentication failure carries; the backend's `summary` gives it its own diagnostic.
pub const AUTH_FAILED: &str = "OCI refused the request's signature (401 NotAuthenticated)";

/// A random token (hex), for `opc-retry-token` and jitter.
fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = aws_lc_rs::rand::fill(&mut b);
    u64::from_le_bytes(b)
}

/// Percent-encodes a query value (OCIDs are safe; availability domains carry a colon).
pub fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Oci {
    fn base(&self, service: Service) -> &str {
        match service {
            Service::Core => &self.core,
            Service::Lustre => &self.lustre,
            Service::Limits => &self.limits,
            Service::ContainerEngine => &self.containerengine,
        }
    }

    /// One request with retries: 429 and 5xx with capped exponential backoff and jitter (not "Out of host
    /// capacity"), connection failures likewise; cancelled by StopProvider. `path` follows the version,
    /// e.g. `/vcns?compartmentId=...`.
    pub async fn send(
        &self,
        ctx: &Context,
        method: reqwest::Method,
        service: Service,
        path: &str,
        body: Option<&Json>,
    ) -> Result<Reply, CloudError> {
        self.send_with(ctx, method, service, path, body, None).await
    }

    /// [`Oci::send`] with an `if-match` etag: the write is made only if the resource is still as read.
    async fn send_with(
        &self,
        ctx: &Context,
        method: reqwest::Method,
        service: Service,
        path: &str,
        body: Option<&Json>,
        if_match: Option<&str>,
    ) -> Result<Reply, CloudError> {
        let base = self.base(service);
        let url = format!("{base}/{}{path}", service.version());
        let parsed = reqwest::Url::parse(&url).map_err(|e| format!("{url} is not a URL: {e}"))?;
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            _ => return Err(format!("{url} has no host").into()),
        };
        let path_and_query = match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_owned(),
        };
        let payload = body.map(|b| b.to_string().into_bytes());
        let retry_token = (method == reqwest::Method::POST).then(|| format!("hpc-{:016x}{:016x}", random_u64(), random_u64()));
        let what = format!("calling OCI at {base}");
        let name = || operation(method.as_str(), path);
        let (method_name, logged_path) = (method.as_str(), parsed.path());
        let call =
            retry::Call { cloud: "oci", name: Some(&name), method: method_name, path: logged_path, what: &what, ..retry::Call::default() };
        retry::send(ctx, &crate::clouds::throttle::OCI, call, || {
            let headers = Extra { retry_token: retry_token.as_deref(), if_match };
            self.attempt(&method, &parsed, &host, &path_and_query, payload.as_deref(), headers, &what)
        })
        .await
    }

    /// One signed attempt of [`Oci::send`]: 429 and 5xx other than "Out of host capacity" are worth
    /// another; a 401 is an error at once.
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        method: &reqwest::Method,
        url: &reqwest::Url,
        host: &str,
        path_and_query: &str,
        payload: Option<&[u8]>,
        extra: Extra<'_>,
        what: &str,
    ) -> Result<Answer<Reply>, CloudError> {
        let date = crate::clock::http_date(SystemTime::now());
        let headers = self
            .signer
            .sign(&Request { method: method.as_str(), host, path_and_query, date: &date, body: payload, content_type: "application/json" })
            .map_err(|e| e.to_string())?;
        let mut request = self.http.request(method.clone(), url.clone());
        for (k, v) in &headers {
            // reqwest sets host and, for a body, content-length itself, to the same values; an empty POST
            // goes out without content-length unless it is given, and the signature covers it.
            if k != "host" && (k != "content-length" || payload.is_none()) {
                request = request.header(k.as_str(), v.as_str());
            }
        }
        if let Some(token) = extra.retry_token {
            request = request.header("opc-retry-token", token);
        }
        if let Some(etag) = extra.if_match {
            request = request.header("if-match", etag);
        }
        request = request.header("accept", "application/json");
        if let Some(p) = payload {
            request = request.body(p.to_vec());
        } else if matches!(*method, reqwest::Method::POST | reqwest::Method::PUT) {
            request = request.body(Vec::<u8>::new());
        }
        let r = request.send().await.map_err(|e| retry::transport(what, &e, retry::TRUST_SYSTEM_STORE))?;
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap_or_default();
        let reply = Reply::of(status, |n| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned), &text);
        if reply.status == 401 {
            let message = format!(
                "{AUTH_FAILED}: {}. The API key (tenancy_ocid, user_ocid, fingerprint and the private key) is not one OCI knows: check \
                 that the fingerprint is the one shown for this user's API key and that the private key is its pair",
                reply.error().trim_end_matches('.')
            );
            return Err(CloudError::new(ErrorKind::Unauthenticated, reply.body["code"].as_str().map(str::to_owned), message));
        }
        let again = reply.status == 429 || (reply.status >= 500 && !reply.out_of_capacity());
        Ok(if again { Answer::Again(reply, None) } else { Answer::Done(reply) })
    }

    /// GET a resource: None when it does not exist.
    pub async fn get(&self, ctx: &Context, service: Service, path: &str) -> Result<Option<Json>, CloudError> {
        // A failure with no answer to word it (a refused signature, a redirect loop) names the read too.
        let reply = self.send(ctx, reqwest::Method::GET, service, path, None).await.map_err(|e| e.context(format!("reading {path}")))?;
        match reply.status {
            200 => Ok(Some(reply.body)),
            404 => Ok(None),
            _ => Err(reply.failure(&format!("reading {path}"))),
        }
    }

    /// Every item of a list (Core's bare arrays and the newer `{"items": [...]}`), following
    /// `opc-next-page`, [`LIST_PAGE`] items a page. `query` is `compartmentId=...&...`, already encoded.
    pub async fn list(&self, ctx: &Context, service: Service, collection: &str, query: &str) -> Result<Vec<Json>, CloudError> {
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        let mut pages = crate::clouds::shared::Pages::new("OCI", "opc-next-page");
        loop {
            let mut path = if query.is_empty() {
                format!("/{collection}?limit={LIST_PAGE}")
            } else {
                format!("/{collection}?{query}&limit={LIST_PAGE}")
            };
            if let Some(p) = &page {
                path.push_str(&format!("&page={}", encode(p)));
            }
            let reply =
                self.send(ctx, reqwest::Method::GET, service, &path, None).await.map_err(|e| e.context(format!("listing {collection}")))?;
            if reply.status != 200 {
                return Err(reply.failure(&format!("listing {collection}")));
            }
            out.extend(items(reply.body));
            page = pages.next(reply.next_page.filter(|p| !p.is_empty()), &format!("listing {collection}"))?;
            if page.is_none() {
                return Ok(out);
            }
        }
    }

    /// POST a create; the body and the work request id OCI gave, if any.
    pub async fn create(
        &self,
        ctx: &Context,
        service: Service,
        collection: &str,
        body: &Json,
        what: &str,
    ) -> Result<(Json, Option<String>), CloudError> {
        let reply = self.send(ctx, reqwest::Method::POST, service, &format!("/{collection}"), Some(body)).await?;
        if !(200..=202).contains(&reply.status) {
            return Err(reply.failure(&format!("creating {what}")));
        }
        Ok((reply.body, reply.work_request))
    }

    /// POST an action (`/networkSecurityGroups/<id>/actions/addSecurityRules`); some take no body.
    pub async fn action(&self, ctx: &Context, service: Service, path: &str, body: Option<&Json>, what: &str) -> Result<Json, CloudError> {
        self.action_with_work_request(ctx, service, path, body, what).await.map(|(body, _)| body)
    }

    /// [`Oci::action`] for an action OCI answers with a work request (DetachInstancePoolInstance): the body
    /// (null when there is none) and the work request id, if any.
    pub async fn action_with_work_request(
        &self,
        ctx: &Context,
        service: Service,
        path: &str,
        body: Option<&Json>,
        what: &str,
    ) -> Result<(Json, Option<String>), CloudError> {
        let reply = self.send(ctx, reqwest::Method::POST, service, path, body).await?;
        if !(200..=202).contains(&reply.status) {
            return Err(reply.failure(what));
        }
        Ok((reply.body, reply.work_request))
    }

    /// PUT an update; the body and the work request id, if any.
    pub async fn update(
        &self,
        ctx: &Context,
        service: Service,
        path: &str,
        body: &Json,
        what: &str,
    ) -> Result<(Json, Option<String>), CloudError> {
        let reply = self.send(ctx, reqwest::Method::PUT, service, path, Some(body)).await?;
        if !(200..=202).contains(&reply.status) {
            return Err(reply.failure(&format!("updating {what}")));
        }
        Ok((reply.body, reply.work_request))
    }

    /// A read-modify-write of one resource under OCI's optimistic concurrency ("set the `if-match` parameter
    /// to the value of the etag from a previous GET or POST response for that resource. The resource will be
    /// updated or deleted only if the etag you provide matches the resource's current etag value"): the
    /// resource is read with its etag, `change` makes the update's body from it (None: nothing to change any
    /// more) and the PUT carries `if-match`; when someone wrote in between (412 `NoEtagMatch`) it is read
    /// again and the change made anew from what it is now ([`retry::guarded`]), so that what they wrote is
    /// not lost. The PUT's body and work request id; None when there was nothing to change.
    pub async fn rewrite(
        &self,
        ctx: &Context,
        service: Service,
        path: &str,
        what: &str,
        change: impl Fn(&Json) -> Option<Json>,
    ) -> Result<Option<(Json, Option<String>)>, CloudError> {
        let read = || async {
            let reply = self.send(ctx, reqwest::Method::GET, service, path, None).await?;
            match reply.status {
                200 => Ok((reply.body, reply.etag)),
                _ => Err(reply.failure(&format!("reading {what}"))),
            }
        };
        let first = read().await?;
        let change = &change;
        retry::guarded(
            first,
            |(live, etag): (Json, Option<String>)| async move {
                let Some(body) = change(&live) else { return Ok(None) };
                let reply = self.send_with(ctx, reqwest::Method::PUT, service, path, Some(&body), etag.as_deref()).await?;
                match reply.status {
                    200..=202 => Ok(Some((reply.body, reply.work_request))),
                    412 => {
                        let mut stale = reply.failure(&format!("updating {what}"));
                        stale.kind = ErrorKind::Conflict;
                        Err(stale)
                    }
                    _ => Err(reply.failure(&format!("updating {what}"))),
                }
            },
            read,
        )
        .await
    }

    /// DELETE; a resource already gone is fine. A 409 (something it depends on is still terminating) is
    /// retried until `timeout`. Returns the work request id, if any.
    pub async fn delete(
        &self,
        ctx: &Context,
        service: Service,
        path: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<Option<String>, CloudError> {
        let mut poll = Poll::new(ctx, format!("deleting {what}"), timeout);
        loop {
            let reply = self.send(ctx, reqwest::Method::DELETE, service, path, None).await?;
            match reply.status {
                200 | 202 | 204 | 404 => return Ok(reply.work_request),
                409 => {}
                _ => return Err(reply.failure(&format!("deleting {what}"))),
            }
            // A dependant still terminating: asked again until the timeout, then OCI's own 409 is the error.
            if let Err(e) = poll.pause(None).await {
                return Err(if e.kind == ErrorKind::TimedOut { reply.failure(&format!("deleting {what}")) } else { e });
            }
        }
    }

    /// Polls a work request until it succeeds; a failure reports OCI's errors for it.
    pub async fn wait_work_request(
        &self,
        ctx: &Context,
        service: Service,
        id: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<(), CloudError> {
        let mut poll = Poll::new(ctx, what, timeout);
        loop {
            let reply = self.send(ctx, reqwest::Method::GET, service, &format!("/workRequests/{id}"), None).await?;
            if reply.status != 200 {
                return Err(reply.failure(&format!("{what}: reading work request {id}")));
            }
            match work_request_outcome(reply.body["status"].as_str().unwrap_or("IN_PROGRESS")) {
                Outcome::Done => return Ok(()),
                Outcome::Failed => {
                    let status = reply.body["status"].as_str().unwrap_or_default();
                    let items = self.list(ctx, service, &format!("workRequests/{id}/errors"), "").await?;
                    let detail: Vec<String> = items
                        .iter()
                        .map(|e| format!("{}: {}", e["code"].as_str().unwrap_or("Error"), e["message"].as_str().unwrap_or_default()))
                        .collect();
                    let detail = if detail.is_empty() { "OCI gave no detail".to_owned() } else { detail.join("; ") };
                    let message = format!("{what} failed (work request {id}, {status}): {detail}");
                    // The kind of the first error the work request lists (a work request has no HTTP status).
                    return Err(items.first().map_or_else(|| CloudError::other(message.clone()), |e| error(0, e, message.clone())));
                }
                Outcome::Pending => {}
            }
            poll.pause(None).await?;
        }
    }

    /// Polls a resource until its `lifecycleState` is one of `targets`; a state in `failed`, or the
    /// resource vanishing, ends the wait with an error.
    #[allow(clippy::too_many_arguments)]
    pub async fn wait_state(
        &self,
        ctx: &Context,
        service: Service,
        path: &str,
        targets: &[&str],
        failed: &[&str],
        what: &str,
        timeout: Duration,
    ) -> Result<Json, CloudError> {
        let mut poll = Poll::new(ctx, what, timeout);
        // Reads may lag a create: a few NotFound answers in a row are waited out before "vanished".
        let mut misses = 0;
        loop {
            let Some(found) = self.get(ctx, service, path).await? else {
                misses += 1;
                if misses >= 6 {
                    return Err(format!("{what}: it vanished while being built").into());
                }
                poll.pause(None).await?;
                continue;
            };
            misses = 0;
            let state = found["lifecycleState"].as_str().unwrap_or_default().to_owned();
            if targets.contains(&state.as_str()) {
                return Ok(found);
            }
            if failed.contains(&state.as_str()) {
                return Err(format!("{what}: it went to {state}").into());
            }
            poll.pause(None).await?;
        }
    }
}

/// The items of one page of a list: Core's bare array, or the newer `{"items": [...]}`; none otherwise.
pub fn items(body: Json) -> Vec<Json> {
    match body {
        Json::Array(items) => items,
        mut other => other.get_mut("items").and_then(Json::as_array_mut).map(std::mem::take).unwrap_or_default(),
    }
}

/// Where a work request stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed,
    Pending,
}

/// A work request's `status`: SUCCEEDED is done; FAILED, CANCELED and (Lustre) NEEDS_ATTENTION will not
/// finish by themselves; ACCEPTED, IN_PROGRESS, WAITING, CANCELING and anything new are waited on.
pub fn work_request_outcome(status: &str) -> Outcome {
    match status {
        "SUCCEEDED" => Outcome::Done,
        "FAILED" | "CANCELED" | "NEEDS_ATTENTION" => Outcome::Failed,
        _ => Outcome::Pending,
    }
}

/// Lifecycle states after which a resource no longer counts as existing.
pub fn is_gone(item: &Json) -> bool {
    matches!(item["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED" | "DELETING" | "DELETED"))
}

/// The freeform tags of an OCI resource.
pub fn tags_of(item: &Json) -> BTreeMap<String, String> {
    item["freeformTags"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default()
}

/// Ids the resources use on OCI: `oci/<region>/<compartment OCID>/<name>`.
pub fn resource_id(region: &str, compartment: &str, name: &str) -> String {
    crate::clouds::shared::resource_id(crate::catalog::Cloud::Oci, &[region, compartment], name)
}

/// `(region, compartment, name)` of an id.
pub fn parse_id(id: &str) -> Option<(&str, &str, &str)> {
    let [region, compartment, name] = crate::clouds::shared::parse_id(crate::catalog::Cloud::Oci, id)?;
    compartment.starts_with("ocid1.").then_some((region, compartment, name))
}

#[cfg(test)]
impl Oci {
    /// A client against `base` (a local server) with a fresh API key.
    pub fn local(base: &str) -> Oci {
        use aws_lc_rs::encoding::AsDer;
        use base64::Engine;
        let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&key).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(der.as_ref())
        );
        let signer = Signer::from_pem(&pem, "ocid1.tenancy.oc1..t", "ocid1.user.oc1..u", "aa:bb").unwrap();
        let (core, lustre, limits, containerengine) = (base.to_owned(), base.to_owned(), base.to_owned(), base.to_owned());
        Oci {
            region: "r".into(),
            tenancy: "t".into(),
            core,
            lustre,
            limits,
            containerengine,
            http: reqwest::Client::new(),
            signer: Arc::new(signer),
        }
    }

    /// The same client (its key kept) against another `base`.
    pub fn at(&self, base: &str) -> Oci {
        let b = base.to_owned();
        Oci { core: b.clone(), lustre: b.clone(), limits: b.clone(), containerengine: b, ..self.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    /// An endpoint whose certificate nothing trusts is said at once, in one attempt, with how to trust it.
    #[tokio::test]
    async fn an_untrusted_certificate_is_reported_at_once_with_how_to_trust_it() {
        let (base, handshakes) = crate::fuzz::serve_untrusted_tls().await;
        let oci = Oci::local(&base);
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let started = std::time::Instant::now();
        let e = oci.get(&ctx, Service::Core, "/instances/ocid1.instance.x").await.expect_err("nothing trusts the certificate");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}: {e}", started.elapsed());
        assert!(e.message.contains("the endpoint's TLS certificate is not trusted") && e.message.contains("trust store"), "{e}");
        assert!(!e.retryable(), "{e:?}");
        assert_eq!(handshakes.load(std::sync::atomic::Ordering::SeqCst), 1, "one attempt");
    }

    /// An `opc-next-page` given again (a page pointing back at an earlier one) ended the list never.
    #[tokio::test]
    async fn an_opc_next_page_that_loops_ends_the_list_with_an_error() {
        let base = crate::fuzz::serve(|line| {
            let next = if line.contains("page=B") { "A" } else { "B" };
            (200, vec![("opc-next-page".to_owned(), next.to_owned())], r#"[{"id": "x"}]"#.to_owned())
        })
        .await;
        let oci = Oci::local(&base);
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let listed = tokio::time::timeout(Duration::from_secs(10), oci.list(&ctx, Service::Core, "instances", "compartmentId=c")).await;
        let e = listed.expect("the list ends").expect_err("a looping opc-next-page is an error");
        assert!(e.message.contains("again (its opc-next-page loops)"), "{e}");
    }

    #[test]
    fn any_answer_reads_as_a_reply_and_any_error_body_as_an_error() {
        use crate::fuzz::{answers, check, hostile_str};
        use proptest::prelude::*;
        use serde_json::json;
        let realistic = vec![
            json!({"code": "InternalError", "message": "Out of host capacity."}),
            json!({"items": [{"id": "ocid1.instance", "lifecycleState": "RUNNING", "freeformTags": {"hpc:owner": "o"}}]}),
            json!([{"id": "ocid1.instance", "lifecycleState": "TERMINATED"}]),
            json!({"status": "FAILED", "id": "ocid1.workrequest"}),
        ];
        let headers = proptest::collection::btree_map(
            proptest::sample::select(vec!["opc-next-page", "opc-work-request-id"]).prop_map(str::to_owned),
            hostile_str(),
            0..3,
        );
        let body = prop_oneof![answers(realistic).prop_map(|j| j.to_string()), hostile_str()];
        check("Reply::of", (any::<u16>(), headers, body), |(status, headers, text)| {
            let reply = Reply::of(status, |n| headers.get(n).cloned(), &text);
            let e = reply.failure("listing instances");
            if reply.out_of_capacity() && e.kind != ErrorKind::NoCapacity {
                return Err(format!("{e:?}"));
            }
            let _ = (work_request_outcome(reply.body["status"].as_str().unwrap_or_default()), is_gone(&reply.body), tags_of(&reply.body));
            let _ = encode(reply.next_page.as_deref().unwrap_or_default());
            for item in items(reply.body) {
                let _ = (is_gone(&item), tags_of(&item), error(0, &item, "m"));
            }
            Ok(())
        });
    }

    #[test]
    fn operations_are_named_as_the_sdks_name_them() {
        for (method, path, name) in [
            ("POST", "/instances", "LaunchInstance"),
            ("POST", "/instances/ocid1.instance.oc1..a?action=RESET", "InstanceAction"),
            ("DELETE", "/instances/ocid1.instance.oc1..a", "TerminateInstance"),
            ("GET", "/vcns?compartmentId=c&limit=1000", "ListVcns"),
            ("GET", "/vcns/ocid1.vcn.oc1..a", "GetVcn"),
            ("PUT", "/subnets/ocid1.subnet.oc1..a", "UpdateSubnet"),
            ("POST", "/networkSecurityGroups/n/actions/addSecurityRules", "AddNetworkSecurityGroupSecurityRules"),
            ("POST", "/instancePools/p/actions/detachInstance", "DetachInstancePoolInstance"),
            ("GET", "/clusterNetworks/c/instances", "ListClusterNetworkInstances"),
            ("GET", "/workRequests/w", "GetWorkRequest"),
            ("GET", "/workRequests/w/errors", "ListWorkRequestErrors"),
            ("GET", "/services/compute/limits/gpu-h100-count/resourceAvailability?compartmentId=c", "GetResourceAvailability"),
            ("DELETE", "/clusterNetworks/c", "TerminateClusterNetwork"),
            ("POST", "/clusters/c/kubeconfig/content", "CreateKubeconfig"),
        ] {
            assert_eq!(operation(method, path), name, "{method} {path}");
        }
    }

    #[test]
    fn oci_error_bodies_map_to_their_kinds() {
        use serde_json::json;
        // A launch without a host: 500 InternalError whose message says so.
        let body = json!({"code": "InternalError", "message": "Out of host capacity."});
        let e = error(500, &body, "creating node x-1: InternalError: Out of host capacity.");
        assert_eq!((e.kind.clone(), e.capacity_code()), (ErrorKind::NoCapacity, Some(OUT_OF_HOST_CAPACITY)));
        // Any other 500 is server trouble, worth another attempt.
        assert_eq!(error(500, &json!({"code": "InternalServerError", "message": "try later"}), "m").kind, ErrorKind::Transient);
        for (status, code, kind) in [
            (404, "NotAuthorizedOrNotFound", ErrorKind::NotFound),
            (429, "TooManyRequests", ErrorKind::Throttled { retry_after: None }),
            (400, "LimitExceeded", ErrorKind::Quota),
            (400, "QuotaExceeded", ErrorKind::Quota),
            (409, "IncorrectState", ErrorKind::Conflict),
            (409, "NotAuthorizedOrResourceAlreadyExists", ErrorKind::Conflict),
            (401, "NotAuthenticated", ErrorKind::Unauthenticated),
            (400, "InvalidParameter", ErrorKind::InvalidRequest { field: None }),
        ] {
            let e = error(status, &json!({"code": code, "message": "m"}), "m");
            assert_eq!((e.kind, e.code.as_deref()), (kind, Some(code)), "{code}");
        }
    }

    #[test]
    fn work_requests_needing_attention_fail_and_waiting_ones_are_waited_on() {
        assert_eq!(work_request_outcome("SUCCEEDED"), Outcome::Done);
        for failed in ["FAILED", "CANCELED", "NEEDS_ATTENTION"] {
            assert_eq!(work_request_outcome(failed), Outcome::Failed, "{failed}");
        }
        for pending in ["ACCEPTED", "IN_PROGRESS", "WAITING", "CANCELING"] {
            assert_eq!(work_request_outcome(pending), Outcome::Pending, "{pending}");
        }
    }

    #[test]
    fn config_file_profiles_and_ids() {
        let text =
            "[DEFAULT]\nuser=ocid1.user.oc1..a\nregion = us-ashburn-1\n\n[ML]\n# comment\ntenancy=ocid1.tenancy.oc1..t\nkey_file=~/k.pem\n";
        assert_eq!(config_profile(text, "DEFAULT").unwrap()["region"], "us-ashburn-1");
        let ml = config_profile(text, "ML").unwrap();
        assert_eq!((ml.get("tenancy").map(String::as_str), ml.contains_key("user")), (Some("ocid1.tenancy.oc1..t"), false));
        assert!(config_profile(text, "OTHER").is_none());
        let id = resource_id("us-ashburn-1", "ocid1.compartment.oc1..x", "train");
        assert_eq!(parse_id(&id), Some(("us-ashburn-1", "ocid1.compartment.oc1..x", "train")));
        assert_eq!(parse_id("oci/us-ashburn-1/train"), None);
        assert_eq!(encode("Uocm:US-ASHBURN-AD-1"), "Uocm%3AUS-ASHBURN-AD-1");
    }
}
