//! The Google Cloud API clients (google-cloud-compute-v1) as the resources use them: one set per process
//! and configuration; Application Default Credentials or a service-account key for real use, anonymous
//! credentials with the endpoint override for emulators; our own retry (rate limits, quota, 5xx) and
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
use crate::clouds::shared::Backoff;
use crate::config::{CloudSettings, ProviderConfig};
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
pub async fn connect(ctx: &Context) -> Result<Gcp, String> {
    static CLIENTS: Mutex<BTreeMap<String, Gcp>> = Mutex::new(BTreeMap::new());
    let settings = ctx.configured::<ProviderConfig>().and_then(|c| c.clouds.get(&Cloud::Gcp)).cloned().unwrap_or_default();
    let key = format!("{:?}|{:?}", settings.endpoint, settings.settings);
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

fn credentials(settings: &CloudSettings) -> Result<google_cloud_auth::credentials::Credentials, String> {
    if let Some(key) = settings.settings.get("credentials") {
        let json: serde_json::Value =
            serde_json::from_str(key).map_err(|e| format!("the gcp block's credentials are not a service-account key (JSON): {e}"))?;
        return google_cloud_auth::credentials::service_account::Builder::new(json)
            .build()
            .map_err(|e| format!("the gcp block's service-account key cannot be used: {e}"));
    }
    if settings.endpoint.is_some() {
        // An emulator: no Google identity to present.
        return Ok(google_cloud_auth::credentials::anonymous::Builder::new().build());
    }
    google_cloud_auth::credentials::Builder::default().build().map_err(|e| {
        format!("no Google Cloud credentials: set credentials in the gcp block or configure Application Default Credentials ({e})")
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
        b.build().await.map_err(|e| format!("building the Google Cloud client: {e}"))?
    }};
}

async fn build(settings: &CloudSettings) -> Result<Gcp, String> {
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
        http: reqwest::Client::new(),
        credentials: creds.clone(),
        endpoint: settings.endpoint.clone(),
        number: Default::default(),
        zone_ops: client!(ZoneOperations, settings, creds),
        region_ops: client!(RegionOperations, settings, creds),
        global_ops: client!(GlobalOperations, settings, creds),
    })
}

/// The base URL of a Google API (`https://compute.googleapis.com`), or the endpoint override.
pub fn base(gcp: &Gcp, default: &str) -> String {
    gcp.endpoint.clone().unwrap_or_else(|| default.to_owned()).trim_end_matches('/').to_owned()
}

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
) -> Result<serde_json::Value, String> {
    let headers = match gcp.credentials.headers(http::Extensions::new()).await {
        Ok(google_cloud_auth::credentials::CacheableResource::New { data, .. }) => data,
        Ok(_) => http::HeaderMap::new(),
        Err(e) => return Err(format!("{what}: getting Google credentials: {e}")),
    };
    let mut delay = Duration::from_millis(250);
    let mut attempt = 1;
    let (status, text) = loop {
        crate::clouds::throttle::GCP.take(ctx.cancelled()).await;
        let mut request = gcp.http.request(method.clone(), url).headers(headers.clone());
        if let Some(b) = body {
            request = request.header("content-type", "application/json").body(b.to_string());
        }
        let sent = tokio::select! {
            _ = ctx.cancelled() => return Err(format!("{what}: interrupted (the CLI asked the provider to stop)")),
            r = async { match request.send().await { Ok(r) => Ok((r.status(), r.text().await.unwrap_or_default())), Err(e) => Err(e) } } => r,
        };
        let (status, text) = match sent {
            Ok(answer) => answer,
            Err(e) if attempt < ATTEMPTS && (e.is_connect() || e.is_timeout()) => (reqwest::StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            Err(e) => return Err(format!("{what}: {e}")),
        };
        if !(status.as_u16() == 429 || status.is_server_error()) || attempt == ATTEMPTS {
            break (status, text);
        }
        attempt += 1;
        tokio::select! {
            _ = ctx.cancelled() => return Err(format!("{what}: interrupted (the CLI asked the provider to stop)")),
            _ = tokio::time::sleep(crate::clouds::throttle::jitter(delay)) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(8));
    };
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|j| j["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        return Err(format!("{what}: {message} (HTTP {})", status.as_u16()));
    }
    serde_json::from_str(&text).map_err(|e| format!("{what}: the answer is not JSON: {e}"))
}

/// The project's number, from Cloud Resource Manager v3 (`projects.get` answers `name: projects/<number>`);
/// asked once per client.
pub async fn project_number(ctx: &Context, gcp: &Gcp) -> Result<String, String> {
    gcp.number
        .get_or_try_init(|| async {
            let url = format!("{}/v3/projects/{}", base(gcp, RESOURCE_MANAGER), gcp.project);
            let what = format!("reading the number of project {}", gcp.project);
            let project = rest(ctx, gcp, reqwest::Method::GET, &url, None, &what).await?;
            project["name"]
                .as_str()
                .and_then(|n| n.strip_prefix("projects/"))
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                .map(str::to_owned)
                .ok_or_else(|| format!("{what}: Cloud Resource Manager answered no project number: {project}"))
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

pub fn is_not_found(e: &GaxError) -> bool {
    e.http_status_code() == Some(404)
}

/// Rate limits (403 rateLimitExceeded, 429) and server trouble (500, 502, 503, 504) are worth retrying.
fn retryable(e: &GaxError) -> bool {
    match e.http_status_code() {
        Some(429 | 500 | 502 | 503 | 504) => true,
        Some(403) => format!("{e:?}").contains("rateLimitExceeded") || format!("{e:?}").contains("RATE_LIMIT"),
        _ => e.is_transport() || e.is_io() || e.is_connect(),
    }
}

/// Attempts per call. Under heavy throttling (the fault suite throttles 30% of calls) six attempts leave
/// 0.3^6 = 0.07% of calls failing, which over the few hundred calls of one apply fails about one apply in
/// ten; eight leave 0.007%. The backoff caps at 8 s, so a persistent error still reports within ~30 s.
const ATTEMPTS: u32 = 8;

/// Calls `f`, retrying rate limits and transient errors with backoff (250 ms doubling to 8 s), cancelled by
/// StopProvider. `what` names the call in errors.
pub async fn call<T, F, Fut>(ctx: &Context, what: &str, mut f: F) -> Result<T, GaxErrorIn>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, GaxError>>,
{
    let mut delay = Duration::from_millis(250);
    let mut attempt = 1;
    loop {
        // An in-flight call is abandoned when the CLI asks the provider to stop.
        crate::clouds::throttle::GCP.take(ctx.cancelled()).await;
        let result = tokio::select! {
            _ = ctx.cancelled() => return Err(GaxErrorIn::Stopped(what.to_owned())),
            r = f() => r,
        };
        match result {
            Ok(v) => return Ok(v),
            Err(e) if retryable(&e) && attempt < ATTEMPTS => {
                attempt += 1;
                tokio::select! {
                    _ = ctx.cancelled() => return Err(GaxErrorIn::Stopped(what.to_owned())),
                    _ = tokio::time::sleep(crate::clouds::throttle::jitter(delay)) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(8));
            }
            Err(e) => return Err(GaxErrorIn::Api(what.to_owned(), e)),
        }
    }
}

/// A failed call: the API's error with what was being done, or a stop.
#[derive(Debug)]
pub enum GaxErrorIn {
    Api(String, GaxError),
    Stopped(String),
}

impl GaxErrorIn {
    pub fn not_found(&self) -> bool {
        matches!(self, GaxErrorIn::Api(_, e) if is_not_found(e))
    }
}

impl std::fmt::Display for GaxErrorIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GaxErrorIn::Api(what, e) => write!(f, "{what}: {}", why(e)),
            GaxErrorIn::Stopped(what) => write!(f, "{what}: interrupted (the CLI asked the provider to stop)"),
        }
    }
}

impl From<GaxErrorIn> for String {
    fn from(e: GaxErrorIn) -> String {
        e.to_string()
    }
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
pub async fn wait(ctx: &Context, gcp: &Gcp, op: Operation, what: &str, timeout: Duration) -> Result<(), String> {
    wait_done(ctx, gcp, op, what, timeout).await.map(|_| ())
}

/// [`wait`], returning the finished operation (bulkInsert's `instancesBulkInsertOperationMetadata` says how
/// many instances it made).
pub async fn wait_done(ctx: &Context, gcp: &Gcp, op: Operation, what: &str, timeout: Duration) -> Result<Operation, String> {
    let name = op.name.clone().unwrap_or_default();
    let mut current = op;
    let deadline = tokio::time::Instant::now() + timeout;
    let backoff = Backoff::STANDARD;
    let mut delay = backoff.first;
    loop {
        if current.status == Some(google_cloud_compute_v1::model::operation::Status::Done) {
            if let Some(err) = current.error.as_ref().filter(|e| !e.errors.is_empty()) {
                let detail: Vec<String> = err
                    .errors
                    .iter()
                    .map(|e| format!("{}: {}", e.code.as_deref().unwrap_or("ERROR"), e.message.as_deref().unwrap_or_default()))
                    .collect();
                return Err(format!("{what} failed: {}", detail.join("; ")));
            }
            return Ok(current);
        }
        if tokio::time::Instant::now() + delay > deadline {
            return Err(format!("timed out after {} waiting for {what}", crate::clock::format_duration(timeout)));
        }
        tokio::select! {
            _ = ctx.cancelled() => return Err(crate::clouds::shared::interrupted(what)),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = backoff.next(delay);
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
