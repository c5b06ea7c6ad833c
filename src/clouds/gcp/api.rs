//! The Google Cloud API clients (google-cloud-compute-v1) as the resources use them: one set per process
//! and configuration; Application Default Credentials or a service-account key for real use and for an
//! endpoint elsewhere, anonymous credentials for an emulator on this machine; our own retry (rate limits, quota, 5xx) and
//! operation polling, both with backoff and both cancelled by StopProvider.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use google_cloud_compute_v1::client::{
    Firewalls, GlobalAddresses, GlobalOperations, Instances, Networks, RegionOperations, Regions, ResourcePolicies, Subnetworks,
    ZoneOperations,
};
use google_cloud_compute_v1::model::Operation;

use crate::catalog::Cloud;
use crate::clouds::retry::{self, Answer};
use crate::clouds::shared::{Backoff, Poll};
use crate::clouds::{CloudError, ErrorKind};
use crate::config::{CloudSettings, CredentialSource, ProviderConfig};
use crate::framework::Context;

#[derive(Clone)]
pub struct Gcp {
    pub project: String,
    pub networks: Networks,
    pub subnetworks: Subnetworks,
    pub firewalls: Firewalls,
    pub policies: ResourcePolicies,
    pub instances: Instances,
    pub addresses: GlobalAddresses,
    /// regions.get: the region's quotas (`Region.quotas`), for the plan-time quota check.
    pub regions: Regions,
    pub lustre: google_cloud_lustre_v1::client::Lustre,
    /// For the one API without a client crate (Service Networking).
    pub http: reqwest::Client,
    pub credentials: google_cloud_auth::credentials::Credentials,
    pub endpoint: Option<String>,
    /// The project's number (Service Networking names networks by it), looked up once per client.
    number: std::sync::Arc<tokio::sync::OnceCell<String>>,
    zone_ops: ZoneOperations,
    region_ops: RegionOperations,
    global_ops: GlobalOperations,
}

pub type GaxError = google_cloud_gax::error::Error;

/// Clients for the configured project, built once per process and configuration.
pub async fn connect(ctx: &Context) -> Result<Gcp, CloudError> {
    static CLIENTS: Mutex<BTreeMap<String, Gcp>> = Mutex::new(BTreeMap::new());
    let settings = ctx.configured::<ProviderConfig>().and_then(|c| c.clouds.get(&Cloud::Gcp)).cloned().unwrap_or_default();
    let key = settings.client_key();
    if let Some(found) = CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(found.clone());
    }
    let gcp = build(&settings).await?;
    CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, gcp.clone());
    Ok(gcp)
}

/// [`connect`], with a failure reported as a diagnostic.
pub async fn connect_or_report(ctx: &Context, diags: &mut crate::framework::Diagnostics) -> Option<Gcp> {
    match connect(ctx).await {
        Ok(c) => Some(c),
        Err(e) => {
            diags.error("Google Cloud is not configured", e);
            None
        }
    }
}

fn credentials(settings: &CloudSettings) -> Result<google_cloud_auth::credentials::Credentials, CloudError> {
    if let Some(key) = settings.secret("credentials") {
        let json: serde_json::Value = serde_json::from_str(key.expose())
            .map_err(|e| CloudError::other(format!("the gcp block's credentials are not a service-account key (JSON): {e}")))?;
        return google_cloud_auth::credentials::service_account::Builder::new(json)
            .build()
            .map_err(|e| CloudError::other(format!("the gcp block's service-account key cannot be used: {e}")));
    }
    if settings.credential_source(Cloud::Gcp) == CredentialSource::Emulator {
        // An emulator on this machine: no Google identity to present. An endpoint elsewhere gets ADC below.
        return Ok(google_cloud_auth::credentials::anonymous::Builder::new().build());
    }
    google_cloud_auth::credentials::Builder::default().build().map_err(|e| {
        CloudError::other(format!(
            "no Google Cloud credentials: set credentials in the gcp block or configure Application Default Credentials ({e})"
        ))
    })
}

/// Polling a long-running operation carries on through the errors `call` retries (rate limits, 5xx,
/// transport), so an operation that started is never started again because one poll was throttled.
#[derive(Debug)]
struct PollThroughTransient;

impl google_cloud_gax::polling_error_policy::PollingErrorPolicy for PollThroughTransient {
    fn on_error(
        &self,
        _state: &google_cloud_gax::polling_state::PollingState,
        error: GaxError,
    ) -> google_cloud_gax::retry_result::RetryResult {
        use google_cloud_gax::retry_result::RetryResult;
        if retryable(&error) { RetryResult::Continue(error) } else { RetryResult::Permanent(error) }
    }
}

macro_rules! client {
    ($ty:ty, $settings:expr, $creds:expr) => {{
        use google_cloud_gax::polling_error_policy::PollingErrorPolicyExt;
        let mut b = <$ty>::builder()
            .with_credentials($creds.clone())
            .with_retry_policy(google_cloud_gax::retry_policy::NeverRetry)
            .with_polling_error_policy(PollThroughTransient.with_attempt_limit(50))
            .with_polling_backoff_policy(polling());
        if let Some(ep) = &$settings.endpoint {
            b = b.with_endpoint(ep.trim_end_matches('/'));
        }
        b.build().await.map_err(|e| CloudError::other(format!("building the Google Cloud client: {e}")))?
    }};
}

async fn build(settings: &CloudSettings) -> Result<Gcp, CloudError> {
    let project = settings.settings.get("project").cloned().ok_or("set project in the provider's gcp block")?;
    let creds = credentials(settings)?;
    Ok(Gcp {
        project,
        networks: client!(Networks, settings, creds),
        subnetworks: client!(Subnetworks, settings, creds),
        firewalls: client!(Firewalls, settings, creds),
        policies: client!(ResourcePolicies, settings, creds),
        instances: client!(Instances, settings, creds),
        addresses: client!(GlobalAddresses, settings, creds),
        regions: client!(Regions, settings, creds),
        lustre: client!(google_cloud_lustre_v1::client::Lustre, settings, creds),
        // Every REST call ends within two minutes, as Azure's and OCI's do: a connection that stops answering is
        // a transient failure the retry policy handles, not an apply that waits forever.
        http: reqwest::Client::builder()
            .timeout(REST_TIMEOUT)
            .build()
            .map_err(|e| CloudError::other(format!("building the HTTPS client: {e}")))?,
        credentials: creds.clone(),
        endpoint: settings.endpoint.clone(),
        number: Default::default(),
        zone_ops: client!(ZoneOperations, settings, creds),
        region_ops: client!(RegionOperations, settings, creds),
        global_ops: client!(GlobalOperations, settings, creds),
    })
}

#[cfg(test)]
impl Gcp {
    /// The same clients with the project number not yet looked up.
    pub fn fresh(&self) -> Gcp {
        Gcp { number: Default::default(), ..self.clone() }
    }
}

/// Clients of project `p` against `base` (a local server), with no Google identity.
#[cfg(test)]
pub async fn local(base: &str) -> Gcp {
    let settings = CloudSettings {
        endpoint: Some(base.to_owned()),
        settings: [("project".to_owned(), "p".to_owned())].into(),
        secrets: Default::default(),
    };
    build(&settings).await.expect("clients against a local server")
}

/// The base URL of a Google API (`https://compute.googleapis.com`), or the endpoint override.
pub fn base(gcp: &Gcp, default: &str) -> String {
    gcp.endpoint.clone().unwrap_or_else(|| default.to_owned()).trim_end_matches('/').to_owned()
}

/// How long one REST call may take, its answer read whole.
pub const REST_TIMEOUT: Duration = Duration::from_secs(120);

pub const COMPUTE: &str = "https://compute.googleapis.com";
pub const RESOURCE_MANAGER: &str = "https://cloudresourcemanager.googleapis.com";

/// One JSON call to a Google REST API without a client crate (Compute beta, Service Networking, Cloud
/// Resource Manager), with the headers the client crates send for the same credentials; 429 and 5xx
/// retried with capped backoff as `call` does; cancelled by StopProvider. `what` names the call in errors.
pub async fn rest(
    ctx: &Context,
    gcp: &Gcp,
    method: reqwest::Method,
    url: &str,
    body: Option<&serde_json::Value>,
    what: &str,
) -> Result<serde_json::Value, CloudError> {
    let headers = match gcp.credentials.headers(http::Extensions::new()).await {
        Ok(google_cloud_auth::credentials::CacheableResource::New { data, .. }) => crate::redact::Secret::new(data),
        Ok(_) => crate::redact::Secret::new(http::HeaderMap::new()),
        Err(e) => return Err(CloudError::new(ErrorKind::Unauthenticated, None, format!("{what}: getting Google credentials: {e}"))),
    };
    let name = || rest_operation(method.as_str(), url);
    let path = url.split('?').next().unwrap_or_default();
    let path = path.split_once("://").map_or(path, |(_, rest)| rest.find('/').map_or("", |i| &rest[i..]));
    let call = retry::Call { cloud: "gcp", name: Some(&name), method: method.as_str(), path, what, ..retry::Call::default() };
    let Rest(status, text) = retry::send(ctx, &crate::clouds::throttle::GCP, call, || {
        let mut request = gcp.http.request(method.clone(), url).headers(headers.expose().clone());
        if let Some(b) = body {
            request = request.header("content-type", "application/json").body(b.to_string());
        }
        async move {
            let r = request.send().await.map_err(|e| retry::transport(what, &e, retry::TRUST_SYSTEM_STORE))?;
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            Ok(if status.as_u16() == 429 || status.is_server_error() {
                Answer::Again(Rest(status, text), None)
            } else {
                Answer::Done(Rest(status, text))
            })
        }
    })
    .await?;
    answer(status.as_u16(), &text, what)
}

/// A REST answer: its status and body text.
struct Rest(reqwest::StatusCode, String);

impl retry::Heard for Rest {
    fn status(&self) -> Option<u16> {
        Some(self.0.as_u16())
    }
}

/// The REST method a call to a Google API without a client crate is, as its discovery document names it
/// (`servicenetworking.services.connections.create`), from the URL's host or path and the method: the
/// service, then the collections the path names, then the verb the method and the path's end say.
pub fn rest_operation(method: &str, url: &str) -> String {
    let (host, path) = match url.split_once("://") {
        Some((_, rest)) => rest.split_once('/').unwrap_or((rest, "")),
        None => ("", url.trim_start_matches('/')),
    };
    let path = path.split('?').next().unwrap_or_default();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let is_version = |s: &&str| {
        let s = s.trim_start_matches('v');
        s.starts_with(|c: char| c.is_ascii_digit()) || ["beta", "alpha"].contains(&s)
    };
    let from = segs.iter().position(is_version).map_or(0, |i| i + 1);
    // A named host says the service (`compute.googleapis.com`); an endpoint override does not.
    let service = host.split('.').next().filter(|h| host.ends_with(".googleapis.com") && !h.is_empty());
    let service = service.or((segs.first() == Some(&"compute")).then_some("compute"));
    // After the version, collections alternate with ids (`projects/p/global/networks/n`); `global`,
    // `regions/r`, `zones/z` and `locations/l` under a project are places, not collections.
    let (mut collections, mut custom, mut has_id) = (Vec::new(), None, false);
    let mut i = from;
    while i < segs.len() {
        let (name, verb) = segs[i].split_once(':').map_or((segs[i], None), |(n, v)| (n, Some(v)));
        custom = verb.or(custom);
        match name {
            "global" => i += 1,
            "zones" | "regions" | "locations" if collections == ["projects"] && i + 1 < segs.len() => i += 2,
            _ => {
                collections.push(name);
                let id = segs.get(i + 1);
                has_id = id.is_some();
                custom = id.and_then(|s| s.split_once(':')).map(|(_, v)| v).or(custom);
                i += 2;
            }
        }
    }
    if collections.len() > 1 && collections[0] == "projects" {
        collections.remove(0);
    }
    let verb = custom.unwrap_or(match (method, has_id) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "insert",
        ("PATCH", _) => "patch",
        ("PUT", _) => "update",
        ("DELETE", _) => "delete",
        (m, _) => m,
    });
    service.into_iter().chain(collections).chain([verb]).collect::<Vec<_>>().join(".")
}

/// A REST answer as its JSON, or the error its status and body say (the body's `error.message`, else its
/// text); a success whose body is not JSON is an error too.
pub fn answer(status: u16, text: &str, what: &str) -> Result<serde_json::Value, CloudError> {
    if !(200..300).contains(&status) {
        let body = serde_json::from_str::<serde_json::Value>(text).unwrap_or_default();
        // An answer may be a whole list or a proxy's page: what the message quotes of it is bounded.
        let message = crate::clouds::shared::quoted(body["error"]["message"].as_str().unwrap_or(text));
        return Err(error(status, None, &body, format!("{what}: {message} (HTTP {status})")));
    }
    serde_json::from_str(text).map_err(|e| CloudError::other(format!("{what}: the answer is not JSON: {e}")))
}

/// The number in Cloud Resource Manager's `projects.get` answer (`name: projects/<number>`), if it is one.
pub fn number_of(project: &serde_json::Value) -> Option<String> {
    project["name"]
        .as_str()
        .and_then(|n| n.strip_prefix("projects/"))
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
}

/// The project's number, from Cloud Resource Manager v3 (`projects.get` answers `name: projects/<number>`);
/// asked once per client.
pub async fn project_number(ctx: &Context, gcp: &Gcp) -> Result<String, CloudError> {
    gcp.number
        .get_or_try_init(|| async {
            let url = format!("{}/v3/projects/{}", base(gcp, RESOURCE_MANAGER), gcp.project);
            let what = format!("reading the number of project {}", gcp.project);
            let project = rest(ctx, gcp, reqwest::Method::GET, &url, None, &what).await?;
            number_of(&project).ok_or_else(|| {
                let answer = crate::clouds::shared::quoted(&project.to_string()).into_owned();
                CloudError::other(format!("{what}: Cloud Resource Manager answered no project number: {answer}"))
            })
        })
        .await
        .cloned()
}

/// An error in the API's words.
pub fn why(e: &GaxError) -> String {
    match e.status() {
        Some(s) if !s.message.is_empty() => format!("{} (HTTP {})", s.message, e.http_status_code().unwrap_or_default()),
        _ => e.to_string(),
    }
}

/// A Google API error from its HTTP status and JSON body (`{"error": {"code", "message", "status", "errors":
/// [{"reason", "location"}], "details": [{"fieldViolations": [{"field"}]}]}}`): the status gives the kind,
/// `errors[].reason` or `error.status` refine it (a 403 `rateLimitExceeded` is throttling, `quotaExceeded` a
/// quota) and name the code; an invalid request names its field where the body does.
pub fn error(status: u16, retry_after: Option<Duration>, body: &serde_json::Value, message: impl Into<String>) -> CloudError {
    let e = &body["error"];
    let reasons: Vec<&str> = e["errors"].as_array().map(|a| a.iter().filter_map(|x| x["reason"].as_str()).collect()).unwrap_or_default();
    let status_name = e["status"].as_str();
    let mut out = CloudError::from_status(status, retry_after, reasons.first().copied().or(status_name), message);
    if reasons.iter().any(|r| matches!(*r, "rateLimitExceeded" | "userRateLimitExceeded")) || status_name == Some("RATE_LIMIT_EXCEEDED") {
        out.kind = ErrorKind::Throttled { retry_after };
    } else if reasons.contains(&"quotaExceeded") || (status != 429 && status_name == Some("RESOURCE_EXHAUSTED")) {
        out.kind = ErrorKind::Quota;
    } else if let ErrorKind::InvalidRequest { field } = &mut out.kind {
        let violation = e["details"].as_array().into_iter().flatten().find_map(|d| d["fieldViolations"][0]["field"].as_str());
        *field = violation.or(e["errors"][0]["location"].as_str()).map(str::to_owned);
    }
    out
}

/// A client crate's error with what was being done: the HTTP status, the body it kept and `Retry-After`;
/// without an HTTP answer, the transport's trouble as transient.
pub fn error_of(what: &str, e: &GaxError) -> CloudError {
    if let Some(untrusted) = retry::untrusted_certificate(e) {
        return CloudError::new(ErrorKind::Other, None, format!("{what}: {untrusted}: {}", retry::TRUST_SYSTEM_STORE));
    }
    let message = format!("{what}: {}", why(e));
    let Some(status) = e.http_status_code() else {
        let kind = if e.is_transport() || e.is_io() || e.is_connect() || e.is_timeout() { ErrorKind::Transient } else { ErrorKind::Other };
        return CloudError::new(kind, None, message);
    };
    let retry_after =
        e.http_headers().and_then(|h| h.get("retry-after")).and_then(|v| v.to_str().ok()?.parse::<u64>().ok()).map(Duration::from_secs);
    // The client keeps the body only when it is not a Status; a Status keeps `errors[].reason` among its
    // details (as ErrorInfo) and `error.status` as its code.
    let body = match (e.http_payload(), e.status()) {
        (Some(p), _) => serde_json::from_slice(p).unwrap_or_default(),
        (None, Some(s)) => {
            use google_cloud_gax::error::rpc::{Code, StatusDetails};
            let reasons: Vec<serde_json::Value> = s
                .details
                .iter()
                .filter_map(|d| match d {
                    StatusDetails::ErrorInfo(info) if !info.reason.is_empty() => Some(serde_json::json!({"reason": info.reason})),
                    _ => None,
                })
                .collect();
            let status = (s.code != Code::Unknown).then(|| s.code.name());
            serde_json::json!({"error": {"errors": reasons, "status": status}})
        }
        (None, None) => serde_json::Value::Null,
    };
    error(status, retry_after, &body, message)
}

/// A Compute Engine operation's error (`error.errors[]`: `code`, `message`), with its code: no capacity in
/// the zone, a quota, a name taken, something missing.
pub fn operation_error(code: &str, message: impl Into<String>) -> CloudError {
    let kind = match code {
        "ZONE_RESOURCE_POOL_EXHAUSTED" | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS" => ErrorKind::NoCapacity,
        "QUOTA_EXCEEDED" => ErrorKind::Quota,
        "RESOURCE_ALREADY_EXISTS" | "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE" => ErrorKind::Conflict,
        "RESOURCE_NOT_FOUND" => ErrorKind::NotFound,
        _ => ErrorKind::Other,
    };
    CloudError::new(kind, Some(code.to_owned()), message)
}

/// Rate limits (403 rateLimitExceeded, 429) and server trouble (500, 502, 503, 504) are worth retrying.
fn retryable(e: &GaxError) -> bool {
    error_of("", e).retryable()
}

/// Calls `f` under the one retry policy (`clouds::retry`): rate limits (403 rateLimitExceeded, 429) and
/// server trouble (500, 502, 503, 504) are tried again; cancelled by StopProvider. `what` names the call in
/// errors.
pub async fn call<T, F, Fut>(ctx: &Context, what: &str, mut f: F) -> Result<T, CloudError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, GaxError>>,
{
    let name = || sdk_operation::<Fut>().unwrap_or_else(|| what.to_owned());
    let call = retry::Call { cloud: "gcp", name: Some(&name), what, ..retry::Call::default() };
    let retry::Decoded(out) = retry::send(ctx, &crate::clouds::throttle::GCP, call, || {
        let attempt = f();
        async move { attempt.await.map(|v| Answer::Done(retry::Decoded(v))).map_err(|e| error_of(what, &e)) }
    })
    .await?;
    Ok(out)
}

/// The REST method a client crate's request is (`compute.instances.insert`, `lustre.CreateInstance`), read
/// from the type of the future its builder's `send` returns (`google_cloud_compute_v1::builder::instances::
/// Insert::send::{{closure}}`): the crates name each builder after its method and its module after the
/// collection. None when the type does not read so (another shape of future), and the call is then known by
/// what it does.
fn sdk_operation<Fut>() -> Option<String> {
    operation_of_type(std::any::type_name::<Fut>())
}

fn operation_of_type(name: &str) -> Option<String> {
    let name = name.split('<').next()?;
    let mut parts: Vec<&str> = name.split("::").collect();
    while parts.last().is_some_and(|p| p.starts_with('{') || *p == "send" || *p == "until_done" || *p == "poller") {
        parts.pop();
    }
    let [krate, "builder", collection, method] = parts[..] else { return None };
    let service = krate.strip_prefix("google_cloud_")?.split('_').next()?;
    let method = match service {
        // Compute's REST methods are camelCase (`bulkInsert`); Managed Lustre's gRPC methods keep their case.
        "compute" => {
            let mut c = method.chars();
            c.next().map(|f| f.to_ascii_lowercase().to_string() + c.as_str())?
        }
        _ => method.to_owned(),
    };
    let collection = match service {
        "compute" => collection.split('_').enumerate().map(|(i, w)| if i == 0 { w.to_owned() } else { title(w) }).collect::<String>(),
        _ => collection.to_owned(),
    };
    Some(if service == "compute" { format!("{service}.{collection}.{method}") } else { format!("{service}.{method}") })
}

fn title(w: &str) -> String {
    let mut c = w.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

fn last(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// How long-running operations are polled: Compute Engine's here ([`wait`]), Managed Lustre's by the
/// client's poller, both on the one schedule every wait uses ([`Backoff::STANDARD`]).
fn polling() -> google_cloud_gax::exponential_backoff::ExponentialBackoff {
    let Backoff { first, max } = Backoff::STANDARD;
    google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder::new()
        .with_initial_delay(first)
        .with_maximum_delay(max)
        .with_scaling(2.0)
        .clamp()
}

/// Waits for an operation to finish (polling its zone, region or global collection with backoff), and
/// returns Compute Engine's error if it failed: a DONE operation can carry one.
pub async fn wait(ctx: &Context, gcp: &Gcp, op: Operation, what: &str, timeout: Duration) -> Result<(), CloudError> {
    wait_done(ctx, gcp, op, what, timeout).await.map(|_| ())
}

/// [`wait`], returning the finished operation (bulkInsert's `instancesBulkInsertOperationMetadata` says how
/// many instances it made).
pub async fn wait_done(ctx: &Context, gcp: &Gcp, op: Operation, what: &str, timeout: Duration) -> Result<Operation, CloudError> {
    let name = op.name.clone().unwrap_or_default();
    let mut current = op;
    let mut poll = Poll::new(ctx, format!("waiting for {what}"), timeout);
    loop {
        if current.status == Some(google_cloud_compute_v1::model::operation::Status::Done) {
            if let Some(err) = current.error.as_ref().filter(|e| !e.errors.is_empty()) {
                let detail: Vec<String> = err
                    .errors
                    .iter()
                    .map(|e| format!("{}: {}", e.code.as_deref().unwrap_or("ERROR"), e.message.as_deref().unwrap_or_default()))
                    .collect();
                let code = err.errors.iter().find_map(|e| e.code.as_deref()).unwrap_or("ERROR");
                return Err(operation_error(code, format!("{what} failed: {}", detail.join("; "))));
            }
            return Ok(current);
        }
        poll.pause(None).await?;
        let project = gcp.project.clone();
        current = if let Some(zone) = current.zone.clone() {
            call(ctx, "reading an operation", || gcp.zone_ops.get().set_project(&project).set_zone(last(&zone)).set_operation(&name).send())
                .await?
        } else if let Some(region) = current.region.clone() {
            call(ctx, "reading an operation", || {
                gcp.region_ops.get().set_project(&project).set_region(last(&region)).set_operation(&name).send()
            })
            .await?
        } else {
            call(ctx, "reading an operation", || gcp.global_ops.get().set_project(&project).set_operation(&name).send()).await?
        };
    }
}

/// A request id for a create the service must not repeat (Compute's and Managed Lustre's `requestId`): a
/// random version-4 UUID, which both accept ("must be a valid UUID with the exception that zero UUID is not
/// supported").
pub fn request_id() -> String {
    let mut b = [0u8; 16];
    let _ = aws_lc_rs::rand::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    [&hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]].join("-")
}

/// Ids the resources use on Google Cloud: `gcp/<zone or region>/<name>`.
pub fn resource_id(location: &str, name: &str) -> String {
    crate::clouds::shared::resource_id(crate::catalog::Cloud::Gcp, &[location], name)
}

/// Splits `gcp/<location>/<name>`.
pub fn parse_id(id: &str) -> Option<(&str, &str)> {
    crate::clouds::shared::parse_id(crate::catalog::Cloud::Gcp, id).map(|[location, name]| (location, name))
}

/// The short name of a network or subnetwork given by name, partial URL or full self link.
pub fn short_name(reference: &str) -> &str {
    last(reference.trim_end_matches('/'))
}

/// Labels: GCP keys cannot hold `:`, so `hpc:cluster` is `hpc_cluster`.
pub fn labels(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tags.iter().map(|(k, v)| (k.replace(':', "_"), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_error_bodies_map_to_their_kinds() {
        use serde_json::json;
        // Compute Engine's rate limit: 403 with errors[].reason rateLimitExceeded (not a refusal).
        let body = json!({"error": {"code": 403, "message": "Rate Limit Exceeded",
                          "errors": [{"message": "Rate Limit Exceeded", "domain": "usageLimits", "reason": "rateLimitExceeded"}]}});
        let e = error(403, Some(Duration::from_secs(2)), &body, "listing instances: Rate Limit Exceeded (HTTP 403)");
        assert_eq!(e.kind, ErrorKind::Throttled { retry_after: Some(Duration::from_secs(2)) });
        assert_eq!(e.code.as_deref(), Some("rateLimitExceeded"));
        assert!(e.retryable());
        let denied = json!({"error": {"code": 403, "message": "Required 'compute.instances.list' permission", "status": "PERMISSION_DENIED",
                            "errors": [{"reason": "forbidden"}]}});
        assert_eq!(error(403, None, &denied, "m").kind, ErrorKind::Forbidden);
        let quota = json!({"error": {"code": 403, "errors": [{"reason": "quotaExceeded"}]}});
        assert_eq!(error(403, None, &quota, "m").kind, ErrorKind::Quota);
        let missing = json!({"error": {"code": 404, "status": "NOT_FOUND", "errors": [{"reason": "notFound"}]}});
        assert_eq!(error(404, None, &missing, "m").kind, ErrorKind::NotFound);
        let invalid = json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                             "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "instance.capacity_gib"}]}]}});
        assert_eq!(error(400, None, &invalid, "m").kind, ErrorKind::InvalidRequest { field: Some("instance.capacity_gib".into()) });
        // A DONE operation's error: the zone has no capacity.
        let short = operation_error("ZONE_RESOURCE_POOL_EXHAUSTED", "creating 4 x a3-highgpu-8g failed: ZONE_RESOURCE_POOL_EXHAUSTED: ...");
        assert_eq!(short.capacity_code(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"));
        assert_eq!(operation_error("QUOTA_EXCEEDED", "m").kind, ErrorKind::Quota);
    }

    #[test]
    fn any_rest_answer_is_json_or_an_error() {
        use crate::fuzz::{answers, check, hostile_str};
        use proptest::prelude::*;
        use serde_json::json;
        let realistic = vec![
            json!({"error": {"code": 403, "message": "m", "status": "PERMISSION_DENIED",
                             "errors": [{"reason": "rateLimitExceeded", "location": "x"}], "details": [{"fieldViolations": [{"field": "f"}]}]}}),
            json!({"name": "projects/123456"}),
        ];
        let text = prop_oneof![answers(realistic).prop_map(|j| j.to_string()), hostile_str()];
        check("answer", (any::<u16>(), text, hostile_str()), |(status, text, header)| {
            let out = answer(status, &text, "calling x");
            if (200..300).contains(&status) != out.is_ok() && out.is_ok() {
                return Err(format!("HTTP {status} was taken for a success"));
            }
            let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let retry_after = header.parse::<u64>().ok().map(Duration::from_secs);
            let _ = (number_of(&body), error(status, retry_after, &body, "m"), short_name(&header), last(&header), parse_id(&header));
            Ok(())
        });
    }

    #[test]
    fn operations_are_named_as_the_apis_name_them() {
        assert_eq!(
            operation_of_type("google_cloud_compute_v1::builder::instances::Insert::send::{{closure}}").as_deref(),
            Some("compute.instances.insert")
        );
        assert_eq!(
            operation_of_type("google_cloud_compute_v1::builder::resource_policies::BulkInsert::send::{{closure}}").as_deref(),
            Some("compute.resourcePolicies.bulkInsert")
        );
        assert_eq!(
            operation_of_type("google_cloud_lustre_v1::builder::lustre::CreateInstance::send::{{closure}}").as_deref(),
            Some("lustre.CreateInstance")
        );
        assert_eq!(operation_of_type("core::future::ready::Ready<u8>"), None);
        // The compiler's own name for a real builder's future reads the same way.
        fn name_of<F>(_: &F) -> &'static str {
            std::any::type_name::<F>()
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let name = rt.block_on(async {
            let client = Instances::builder()
                .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
                .with_endpoint("http://127.0.0.1:9")
                .build()
                .await
                .unwrap();
            let fut = client.insert().set_project("p").set_zone("z").send();
            name_of(&fut)
        });
        assert_eq!(operation_of_type(name).as_deref(), Some("compute.instances.insert"), "{name}");
        // Calls without a client crate, by URL.
        let base = "https://servicenetworking.googleapis.com/v1/services/servicenetworking.googleapis.com/connections";
        assert_eq!(rest_operation("POST", base), "servicenetworking.services.connections.insert");
        assert_eq!(
            rest_operation("POST", "http://127.0.0.1:9/v1/projects/p/locations/l/clusters/c/nodePools/np:setSize"),
            "clusters.nodePools.setSize"
        );
        assert_eq!(
            rest_operation("GET", "https://cloudresourcemanager.googleapis.com/v3/projects/ml-prod"),
            "cloudresourcemanager.projects.get"
        );
        assert_eq!(
            rest_operation("GET", "https://compute.googleapis.com/compute/beta/projects/p/zones/us-central1-a/instances?filter=x"),
            "compute.instances.list"
        );
    }

    /// An endpoint whose certificate nothing trusts is said at once, with how to trust it: by the REST calls
    /// in one attempt, and by the client crates' calls as well.
    #[tokio::test]
    async fn an_untrusted_certificate_is_reported_at_once_with_how_to_trust_it() {
        let (base, handshakes) = crate::fuzz::serve_untrusted_tls().await;
        let settings = CloudSettings {
            endpoint: Some(base.clone()),
            settings: [("project".to_owned(), "ml-prod".to_owned())].into(),
            ..CloudSettings::default()
        };
        let gcp = build(&settings).await.unwrap();
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let said = |e: &CloudError| {
            assert!(e.message.contains("the endpoint's TLS certificate is not trusted") && e.message.contains("trust store"), "{e}");
            assert!(!e.retryable(), "{e:?}");
        };
        let started = std::time::Instant::now();
        let url = format!("{base}/v3/projects/ml-prod");
        let e = rest(&ctx, &gcp, reqwest::Method::GET, &url, None, "reading the project").await.expect_err("untrusted");
        said(&e);
        assert_eq!(handshakes.load(std::sync::atomic::Ordering::SeqCst), 1, "one attempt");
        let e = call(&ctx, "listing instances", || gcp.instances.list().set_project("ml-prod").set_zone("us-central1-a").send())
            .await
            .expect_err("untrusted");
        said(&e);
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    }

    /// An endpoint elsewhere (a Private Service Connect endpoint, say) keeps Google's credentials; only an
    /// emulator on this machine is called with none.
    #[tokio::test]
    async fn only_an_endpoint_on_this_machine_goes_without_credentials() {
        let with = |endpoint: &str| CloudSettings { endpoint: Some(endpoint.into()), ..CloudSettings::default() };
        for local in ["http://127.0.0.1:9000", "http://localhost:8085/", "https://[::1]:8443"] {
            let c = credentials(&with(local)).unwrap();
            assert!(format!("{c:?}").contains("Anonymous"), "{local}: {c:?}");
        }
        // ADC, whatever it finds here (a key file, gcloud's login, the metadata server), or says there is none.
        match credentials(&with("https://compute-psc.p.googleapis.com")) {
            Ok(c) => assert!(!format!("{c:?}").contains("Anonymous"), "{c:?}"),
            Err(e) => assert!(e.message.contains("no Google Cloud credentials"), "{e}"),
        }
    }

    #[test]
    fn references_normalise_to_the_same_name() {
        for r in [
            "host-vpc",
            "projects/p/global/networks/host-vpc",
            "https://www.googleapis.com/compute/v1/projects/p/global/networks/host-vpc",
            "https://www.googleapis.com/compute/v1/projects/p/global/networks/host-vpc/",
        ] {
            assert_eq!(short_name(r), "host-vpc", "{r}");
        }
        assert_eq!(parse_id(&resource_id("us-central1-a", "train")), Some(("us-central1-a", "train")));
        assert_eq!(parse_id("aws/us-east-1/x"), None);
    }
}
