//! Azure Resource Manager as the resources use it: azure_identity for credentials (service principal with
//! a client secret, Azure CLI, managed identity), and a small ARM client of our own on reqwest with typed
//! JSON for the few resource types (the official Rust crates have no resource-manager clients). It honours
//! 429 Retry-After, retries 5xx, polls Azure-AsyncOperation / Location, and is cancelled by StopProvider.
//! An emulator or private endpoint with its own CA is trusted through `HPC_AZURE_CA_FILE` (a PEM file).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use serde_json::Value as Json;

use crate::catalog::Cloud;
use crate::clouds::retry::{self, Answer};
use crate::clouds::shared::Poll;
use crate::clouds::{CloudError, ErrorKind};
use crate::config::{CloudSettings, CredentialSource, ProviderConfig};
use crate::framework::{Context, Value};
use crate::redact::Secret;

const ARM: &str = "https://management.azure.com";

/// How to trust an endpoint whose TLS certificate did not verify.
const TRUST: &str = "for an emulator or a private endpoint with a CA of its own, set HPC_AZURE_CA_FILE to that CA's certificate \
                     (a PEM file); otherwise add the CA to this machine's trust store (the system's certificates, or SSL_CERT_FILE)";
const SCOPE: &str = "https://management.azure.com/.default";

#[derive(Clone)]
pub struct Arm {
    pub subscription: String,
    base: String,
    http: reqwest::Client,
    credential: Option<Arc<dyn TokenCredential>>,
}

impl std::fmt::Debug for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arm({})", self.base)
    }
}

/// The ARM client for the provider's `azure` block, built once per process and configuration.
pub async fn connect(ctx: &Context) -> Result<Arm, CloudError> {
    static CLIENTS: Mutex<BTreeMap<String, Arm>> = Mutex::new(BTreeMap::new());
    let settings = ctx.configured::<ProviderConfig>().and_then(|c| c.clouds.get(&Cloud::Azure)).cloned().unwrap_or_default();
    let key = settings.client_key();
    if let Some(found) = CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(found.clone());
    }
    let arm = build(&settings)?;
    CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, arm.clone());
    Ok(arm)
}

/// [`connect`], with a failure reported as a diagnostic.
pub async fn connect_or_report(ctx: &Context, diags: &mut crate::framework::Diagnostics) -> Option<Arm> {
    match connect(ctx).await {
        Ok(c) => Some(c),
        Err(e) => {
            diags.error("Azure is not configured", e);
            None
        }
    }
}

fn build(settings: &CloudSettings) -> Result<Arm, CloudError> {
    let s = |k: &str| settings.settings.get(k).cloned();
    let secret = |k: &str| settings.secret(k).map(|v| v.expose().clone());
    let subscription = s("subscription_id").ok_or("set subscription_id in the provider's azure block")?;
    let mut http = reqwest::Client::builder().timeout(Duration::from_secs(120));
    if let Ok(path) = std::env::var("HPC_AZURE_CA_FILE") {
        let pem = std::fs::read(&path).map_err(|e| CloudError::other(format!("HPC_AZURE_CA_FILE={path}: {e}")))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .map_err(|e| CloudError::other(format!("HPC_AZURE_CA_FILE={path} is not a PEM certificate: {e}")))?;
        http = http.add_root_certificate(cert);
    }
    let http = http.build().map_err(|e| CloudError::other(format!("building the HTTPS client: {e}")))?;
    let credential: Option<Arc<dyn TokenCredential>> =
        if let (Some(tenant), Some(client), Some(secret)) = (s("tenant_id"), s("client_id"), secret("client_secret")) {
            Some(
                azure_identity::ClientSecretCredential::new(&tenant, client, secret.into(), None)
                    .map_err(|e| CloudError::other(format!("the azure block's service principal cannot be used: {e}")))?,
            )
        } else if s("use_msi").as_deref() == Some("true") {
            Some(azure_identity::ManagedIdentityCredential::new(None).map_err(|e| CloudError::other(format!("managed identity: {e}")))?)
        } else if settings.credential_source(Cloud::Azure) == CredentialSource::Emulator {
            // An emulator on this machine: it wants a bearer token of any kind.
            None
        } else {
            // `use_cli`, or nothing said: the Azure CLI's account, an endpoint elsewhere included.
            Some(azure_identity::AzureCliCredential::new(None).map_err(|e| CloudError::other(format!("Azure CLI credential: {e}")))?)
        };
    Ok(Arm {
        subscription,
        base: settings.endpoint.clone().unwrap_or_else(|| ARM.to_owned()).trim_end_matches('/').to_owned(),
        http,
        credential,
    })
}

/// How ARM says a long-running operation is to be followed (each operation's spec declares which).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Monitor {
    /// `Azure-AsyncOperation`: a status resource, `{"status": "InProgress" | "Succeeded" | "Failed" | "Canceled"}`.
    AsyncOperation(String),
    /// `Location` only: 202 while running, then the final answer (200 or 204, often with no body at all).
    Location(String),
}

/// An ARM answer: status, how to follow it if it is long-running, and the JSON body.
pub struct Reply {
    pub status: u16,
    pub monitor: Option<Monitor>,
    pub retry_after: Option<Duration>,
    pub body: Json,
    /// ARM's `x-ms-request-id`, which Azure support asks for.
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

/// The ARM operation a request is, as a person reads it in the log: the method and the resource type the
/// path names after its last provider namespace (`PUT virtualMachineScaleSets`, `GET
/// virtualMachineScaleSets/virtualMachines`, `POST virtualMachineScaleSets/delete` for an action), or
/// `resourceGroups` and `subscriptions` above them, or an operation's status (`GET operationStatuses`).
pub fn operation(method: &str, url: &str) -> String {
    let path = url.split('?').next().unwrap_or_default();
    let path = path.split_once("://").map_or(path, |(_, rest)| rest.find('/').map_or("", |i| &rest[i..]));
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let kind = match segs.iter().rposition(|s| s.eq_ignore_ascii_case("providers")) {
        // `/providers/<Namespace>/<type>/<name>/<type>/<name>...`: the types are every other segment.
        Some(at) if at + 2 < segs.len() => segs[at + 2..].iter().step_by(2).copied().collect::<Vec<_>>().join("/"),
        _ => segs
            .iter()
            .rev()
            .find(|s| s.eq_ignore_ascii_case("resourceGroups") || s.eq_ignore_ascii_case("subscriptions"))
            .or(segs.last())
            .copied()
            .unwrap_or_default()
            .to_owned(),
    };
    format!("{method} {kind}")
}

impl Reply {
    /// An answer from its status, a header reader and its body text: `Azure-AsyncOperation` (any status) or
    /// `Location` (on 201 and 202) to follow, `Retry-After` in seconds, and the body as JSON (null when it is
    /// not JSON).
    pub fn of(status: u16, header: impl Fn(&str) -> Option<String>, text: &str) -> Reply {
        let monitor = header("azure-asyncoperation")
            .map(Monitor::AsyncOperation)
            .or_else(|| header("location").filter(|_| status == 202 || status == 201).map(Monitor::Location));
        let retry_after = header("retry-after").and_then(|s| s.trim().parse::<u64>().ok()).map(Duration::from_secs);
        let request_id = header("x-ms-request-id");
        Reply { status, monitor, retry_after, body: serde_json::from_str(text).unwrap_or(Json::Null), request_id }
    }

    /// ARM's `{"error": {"code", "message"}}` as `Code: message`, or the status and the body, quoted at
    /// most [`QUOTED`](crate::clouds::shared::QUOTED) bytes long (an answer may be a whole list).
    pub fn error(&self) -> String {
        let e = &self.body["error"];
        let text = match (e["code"].as_str(), e["message"].as_str()) {
            (Some(c), Some(m)) => format!("{c}: {m}"),
            _ => format!("HTTP {}: {}", self.status, self.body),
        };
        crate::clouds::shared::quoted(&text).into_owned()
    }

    /// The answer as a [`CloudError`], `what` said first: `creating virtualNetworks/v: Code: message`.
    pub fn failure(&self, what: &str) -> CloudError {
        error(self.status, self.retry_after, &self.body["error"], format!("{what}: {}", self.error()))
    }
}

/// An ARM error (`{"code", "message", "target", "details": [{"code", ...}]}`, the object under `error` or a
/// failed operation's) as a [`CloudError`]: the status gives the kind, the code refines it (Microsoft Learn,
/// "Troubleshoot common Azure deployment errors"): allocation failures are no capacity, quota codes a quota,
/// conflicts and throttling as named; an invalid request names its `target`. A code found only among the
/// details (a deployment's `AllocationFailed` under `Conflict`) counts too.
pub fn error(status: u16, retry_after: Option<Duration>, e: &Json, message: impl Into<String>) -> CloudError {
    let code = e["code"].as_str();
    let details: Vec<&str> = e["details"].as_array().into_iter().flatten().filter_map(|d| d["code"].as_str()).collect();
    let mut out = CloudError::from_status(status, retry_after, code, message);
    for c in code.into_iter().chain(details) {
        let kind = match c {
            "OverconstrainedZonalAllocationRequest"
            | "OverconstrainedAllocationRequest"
            | "ZonalAllocationFailed"
            | "AllocationFailed"
            | "SkuNotAvailable" => ErrorKind::NoCapacity,
            "QuotaExceeded" => ErrorKind::Quota,
            // Compute answers a request over the vCPU quota with OperationNotAllowed (409).
            "OperationNotAllowed" if status == 409 => ErrorKind::Quota,
            "TooManyRequests" | "SubscriptionRequestsThrottled" | "ResourceRequestsThrottled" => ErrorKind::Throttled { retry_after },
            "ResourceNotFound" | "ResourceGroupNotFound" | "NotFound" => ErrorKind::NotFound,
            "AuthorizationFailed" | "LinkedAuthorizationFailed" => ErrorKind::Forbidden,
            "InvalidAuthenticationToken" | "AuthenticationFailed" | "ExpiredAuthenticationToken" => ErrorKind::Unauthenticated,
            "InUseSubnetCannotBeDeleted" | "Conflict" | "AnotherOperationInProgress" => ErrorKind::Conflict,
            "InvalidParameter" | "InvalidRequestContent" | "BadRequest" | "InvalidResourceName" => {
                ErrorKind::InvalidRequest { field: e["target"].as_str().map(str::to_owned) }
            }
            _ => continue,
        };
        out.kind = kind;
        out.code = Some(c.to_owned());
        if out.kind == ErrorKind::NoCapacity {
            break;
        }
    }
    out
}

impl Arm {
    /// `/subscriptions/<sub>/resourceGroups/<rg>`.
    pub fn group_id(&self, rg: &str) -> String {
        format!("/subscriptions/{}/resourceGroups/{rg}", self.subscription)
    }

    async fn token(&self) -> Result<Option<Secret<String>>, CloudError> {
        match &self.credential {
            Some(c) => c
                .get_token(&[SCOPE], None)
                .await
                .map(|t| Some(Secret::new(t.token.secret().to_owned())))
                .map_err(|e| CloudError::new(ErrorKind::Unauthenticated, None, format!("getting an Azure token: {e}"))),
            None => Ok(Some(Secret::new("emulator".into()))),
        }
    }

    /// One request under the one retry policy (`clouds::retry`): 429 after its Retry-After, 5xx with
    /// backoff; cancelled by StopProvider.
    pub async fn send(&self, ctx: &Context, method: reqwest::Method, url: &str, body: Option<&Json>) -> Result<Reply, CloudError> {
        self.send_with(ctx, method, url, body, &[]).await
    }

    /// [`send`](Arm::send) with request headers of its own (`If-None-Match`).
    async fn send_with(
        &self,
        ctx: &Context,
        method: reqwest::Method,
        url: &str,
        body: Option<&Json>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, CloudError> {
        let url = if url.starts_with("http") { url.to_owned() } else { format!("{}{url}", self.base) };
        // A link ARM gave (nextLink, Location, Azure-AsyncOperation) is followed only on the configured host:
        // the bearer token goes nowhere else.
        if !same_origin(&url, &self.base) {
            return Err(CloudError::new(
                ErrorKind::Forbidden,
                None,
                format!(
                    "Azure Resource Manager answered with a link to {}, not to {}: it was not followed (the token is sent only there)",
                    origin(&url),
                    origin(&self.base)
                ),
            ));
        }
        let bucket = match method {
            reqwest::Method::GET => &crate::clouds::throttle::AZURE_READS,
            reqwest::Method::DELETE => &crate::clouds::throttle::AZURE_DELETES,
            _ => &crate::clouds::throttle::AZURE_WRITES,
        };
        let path = url.split('?').next().unwrap_or_default();
        let path = path.strip_prefix(self.base.as_str()).unwrap_or(path);
        let name = || operation(method.as_str(), path);
        let what = "calling Azure Resource Manager";
        let call = retry::Call { cloud: "azure", name: Some(&name), method: method.as_str(), path, what, ..retry::Call::default() };
        retry::send(ctx, bucket, call, || {
            let (method, url) = (method.clone(), url.clone());
            async move {
                let mut request = self.http.request(method, &url);
                if let Some(token) = self.token().await? {
                    request = request.bearer_auth(token.expose());
                }
                for (name, value) in headers {
                    request = request.header(*name, *value);
                }
                if let Some(b) = body {
                    request = request.header("content-type", "application/json").body(b.to_string());
                }
                let r = request.send().await.map_err(|e| retry::transport("calling Azure Resource Manager", &e, TRUST))?;
                let status = r.status().as_u16();
                let headers = r.headers().clone();
                let text = r.text().await.unwrap_or_default();
                let reply = Reply::of(status, |n| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned), &text);
                let retry_after = reply.retry_after;
                Ok(if status == 429 || status >= 500 { Answer::Again(reply, retry_after) } else { Answer::Done(reply) })
            }
        })
        .await
    }

    /// GET a resource: None when it does not exist.
    pub async fn get(&self, ctx: &Context, id: &str, api: &str) -> Result<Option<Json>, CloudError> {
        // A failure with no answer to word it (a redirect loop, a link to another host) names the read too.
        let reply = self
            .send(ctx, reqwest::Method::GET, &format!("{id}?api-version={api}"), None)
            .await
            .map_err(|e| e.context(format!("reading {id}")))?;
        match reply.status {
            200 => Ok(Some(reply.body)),
            404 => Ok(None),
            _ => Err(reply.failure(&format!("reading {id}"))),
        }
    }

    /// All items of a list, following nextLink. `url` may carry the operation's own query (`$expand=...`).
    pub async fn list(&self, ctx: &Context, url: &str, api: &str) -> Result<Vec<Json>, CloudError> {
        let joint = if url.contains('?') { '&' } else { '?' };
        let mut next = Some(format!("{url}{joint}api-version={api}"));
        let mut pages = crate::clouds::shared::Pages::new("Azure Resource Manager", "nextLink");
        let mut out = Vec::new();
        while let Some(u) = next.take() {
            let reply = self.send(ctx, reqwest::Method::GET, &u, None).await.map_err(|e| e.context(format!("listing {url}")))?;
            if reply.status == 404 {
                return Ok(out);
            }
            if reply.status != 200 {
                return Err(reply.failure(&format!("listing {url}")));
            }
            let (items, link) = page(&reply.body);
            out.extend(items);
            next = pages.next(link, &format!("listing {url}"))?;
        }
        Ok(out)
    }

    /// PUT a resource and wait until its provisioning finishes (Azure-AsyncOperation or the resource's
    /// provisioningState). A PUT replaces the whole resource, so `body` is all of it. A [`Write::Create`]
    /// sends `If-None-Match: *`: ARM makes the resource only if none is there, and a 412 means another
    /// writer made one since it was found missing, which is a Conflict naming the piece and leaves theirs as
    /// it is (unless it is this very create's own, an earlier attempt whose answer was lost). Errors carry
    /// ARM's code and message.
    pub async fn put(
        &self,
        ctx: &Context,
        id: &str,
        api: &str,
        body: &Json,
        write: Write<'_>,
        timeout: Duration,
    ) -> Result<Json, CloudError> {
        let what = format!("{} {}", write.verb(), short(id));
        let headers: &[(&str, &str)] = match write {
            Write::Create => &[("if-none-match", "*")],
            Write::Update => &[],
            Write::UpdateIf(etag) => &[("if-match", etag)],
        };
        let reply = self.send_with(ctx, reqwest::Method::PUT, &format!("{id}?api-version={api}"), Some(body), headers).await?;
        if reply.status == 412 && write == Write::Create {
            // Something is there: a read that finds nothing lags the write (ARM's reads are eventually
            // consistent), so it is read again for a while before the holder is judged.
            let mut poll = Poll::new(ctx, format!("reading {} after ARM said it exists", short(id)), LAGGING_READ);
            let found = loop {
                match self.get(ctx, id, api).await? {
                    Some(found) => break Some(found),
                    None => {
                        if poll.pause(None).await.is_err() {
                            break None;
                        }
                    }
                }
            };
            match found {
                Some(found) if landed(body, &found) => {}
                found => return Err(taken(id, found.as_ref(), &reply)),
            }
        } else if reply.status == 412 {
            // Stale: another writer changed the resource since it was read. A Conflict, so that
            // `rewrite` reads it again and makes the change anew; nothing of theirs was overwritten.
            return Err(reply.failure(&format!("{what} (another writer changed it since it was read; If-Match refused)")));
        } else if !(200..=202).contains(&reply.status) {
            return Err(reply.failure(&what));
        } else if let Some(monitor) = &reply.monitor {
            self.wait(ctx, monitor, &what, timeout).await?;
        }
        self.settled(ctx, id, api, &what, timeout).await
    }

    /// A read-modify-write of one resource under its etag: PUTs what `change` makes of the resource as read
    /// (`read`, or read now when None) with `If-Match` its etag, and when another writer changed it in
    /// between (412) reads it again and makes the change anew from that ([`retry::guarded`]), so what they
    /// wrote is never overwritten by a body made from an older read. `change` gives None when the resource
    /// as read needs nothing. A resource gone meanwhile is NotFound.
    pub async fn rewrite(
        &self,
        ctx: &Context,
        id: &str,
        api: &str,
        read: Option<Json>,
        timeout: Duration,
        change: impl Fn(&Json) -> Option<Json>,
    ) -> Result<(), CloudError> {
        let again = || async {
            self.get(ctx, id, api).await?.ok_or_else(|| CloudError::new(ErrorKind::NotFound, None, format!("{} vanished", short(id))))
        };
        let first = match read {
            Some(found) => found,
            None => again().await?,
        };
        let change = &change;
        retry::guarded(
            first,
            |found: Json| async move {
                match change(&found) {
                    Some(body) => self.put(ctx, id, api, &body, Write::of(&found), timeout).await.map(|_| ()),
                    None => Ok(()),
                }
            },
            again,
        )
        .await
    }

    /// PATCH a resource (its UpdateTags or Update operation: only what `body` names changes; `tags` replace
    /// the resource's tags whole) and wait until the write is done.
    pub async fn patch(&self, ctx: &Context, id: &str, api: &str, body: &Json, timeout: Duration) -> Result<Json, CloudError> {
        let what = format!("updating {}", short(id));
        let reply = self.send(ctx, reqwest::Method::PATCH, &format!("{id}?api-version={api}"), Some(body)).await?;
        if !(200..=202).contains(&reply.status) {
            return Err(reply.failure(&what));
        }
        if let Some(monitor) = &reply.monitor {
            self.wait(ctx, monitor, &what, timeout).await?;
        }
        self.settled(ctx, id, api, &what, timeout).await
    }

    /// A change written to a resource in place (a scale-set VM's `VirtualMachineScaleSetVMs_Update`, a scale
    /// set's `VirtualMachineScaleSets_Update`), followed to its end when ARM hands out a monitor. Unlike
    /// [`put`](Arm::put) it does not wait on the resource's provisioningState: a VM or scale set an earlier
    /// allocation failure left `Failed` takes the change all the same. With `if_match` (the etag the change
    /// was made from) a 412 means another writer changed the resource since: a Conflict, nothing written.
    #[allow(clippy::too_many_arguments)]
    pub async fn update(
        &self,
        ctx: &Context,
        method: reqwest::Method,
        id: &str,
        api: &str,
        body: &Json,
        if_match: Option<&str>,
        timeout: Duration,
    ) -> Result<(), CloudError> {
        let what = format!("updating {}", short(id));
        let headers: Vec<(&str, &str)> = if_match.map(|e| vec![("if-match", e)]).unwrap_or_default();
        let reply = self.send_with(ctx, method, &format!("{id}?api-version={api}"), Some(body), &headers).await?;
        if reply.status == 412 {
            return Err(reply.failure(&format!("{what} (another writer changed it since it was read; If-Match refused)")));
        }
        if !(200..=202).contains(&reply.status) {
            return Err(reply.failure(&what));
        }
        match &reply.monitor {
            Some(monitor) => self.wait(ctx, monitor, &what, timeout).await,
            None => Ok(()),
        }
    }

    /// A read-modify-write of a resource's tags alone, under its etag: PATCHes `{"tags": ...}` (the tags
    /// replaced whole, as ARM's PATCH of tags does) with what `change` makes of the resource as read, and
    /// when another writer changed it in between (412) reads it again and makes the change anew. `change`
    /// gives None when the resource as read (`read`, or read now when None) needs nothing. Nothing but the
    /// tags is sent, so no model or capacity is written again.
    pub async fn retag(
        &self,
        ctx: &Context,
        id: &str,
        api: &str,
        read: Option<Json>,
        timeout: Duration,
        change: impl Fn(&Json) -> Option<BTreeMap<String, String>>,
    ) -> Result<(), CloudError> {
        let again = || async {
            self.get(ctx, id, api).await?.ok_or_else(|| CloudError::new(ErrorKind::NotFound, None, format!("{} vanished", short(id))))
        };
        let first = match read {
            Some(found) => found,
            None => again().await?,
        };
        let change = &change;
        retry::guarded(
            first,
            |found: Json| async move {
                let Some(tags) = change(&found) else { return Ok(()) };
                let etag = found["etag"].as_str();
                self.update(ctx, reqwest::Method::PATCH, id, api, &serde_json::json!({"tags": tags}), etag, timeout).await
            },
            again,
        )
        .await
    }

    /// The resource once its write is done: without a monitor (an update answered 200, say), its own
    /// provisioningState tells, as azure-core's pollers read it. `what` names the write in messages.
    pub async fn settled(&self, ctx: &Context, id: &str, api: &str, what: &str, timeout: Duration) -> Result<Json, CloudError> {
        let mut poll = Poll::new(ctx, what, timeout);
        let mut missing = 0;
        loop {
            let Some(found) = self.get(ctx, id, api).await? else {
                // ARM reads may lag a write for a moment: NotFound right after it is retried a few times.
                missing += 1;
                if missing >= 5 {
                    return Err(format!("{} vanished while {what}", short(id)).into());
                }
                poll.pause(None).await?;
                continue;
            };
            match found["properties"]["provisioningState"].as_str() {
                None => return Ok(found),
                Some(s) if s.eq_ignore_ascii_case("Succeeded") => return Ok(found),
                Some(s) if s.eq_ignore_ascii_case("Failed") || s.eq_ignore_ascii_case("Canceled") => {
                    return Err(format!("{what}: provisioning {s}").into());
                }
                Some(_) => {}
            }
            poll.pause(None).await?;
        }
    }

    /// POST a resource's action (a scale set's `restart`, `reimage`, ...) and follow it to its end: long-running
    /// actions answer 202 with a Location (or Azure-AsyncOperation) to poll, quick ones 200. `what` names it
    /// in messages ("restarting scaleSets/c-0").
    pub async fn action(&self, ctx: &Context, url: &str, api: &str, body: &Json, what: &str, timeout: Duration) -> Result<(), CloudError> {
        let reply = self.send(ctx, reqwest::Method::POST, &format!("{url}?api-version={api}"), Some(body)).await?;
        match reply.status {
            200 | 204 => Ok(()),
            201 | 202 => match &reply.monitor {
                Some(monitor) => self.wait(ctx, monitor, what, timeout).await,
                None => Ok(()),
            },
            _ => Err(reply.failure(what)),
        }
    }

    /// DELETE a resource and wait until it is gone; a missing resource is fine.
    pub async fn delete(&self, ctx: &Context, id: &str, api: &str, timeout: Duration) -> Result<(), CloudError> {
        let reply = self.send(ctx, reqwest::Method::DELETE, &format!("{id}?api-version={api}"), None).await?;
        match reply.status {
            200 | 204 | 404 => Ok(()),
            202 | 201 => match &reply.monitor {
                Some(monitor) => self.wait(ctx, monitor, &format!("deleting {}", short(id)), timeout).await,
                None => Ok(()),
            },
            _ => Err(reply.failure(&format!("deleting {}", short(id)))),
        }
    }

    /// Follows a long-running operation to its end. An `Azure-AsyncOperation` status resource is polled
    /// until its `status` is terminal (Failed or Canceled report ARM's error). A `Location` URL answers 202
    /// while the operation runs and then its final answer: 200 or 204 (with or without a body) is done, an
    /// error status carries ARM's error.
    async fn wait(&self, ctx: &Context, monitor: &Monitor, what: &str, timeout: Duration) -> Result<(), CloudError> {
        let mut poll = Poll::new(ctx, what, timeout);
        let mut url = match monitor {
            Monitor::AsyncOperation(u) | Monitor::Location(u) => u.clone(),
        };
        loop {
            let reply = self.send(ctx, reqwest::Method::GET, &url, None).await?;
            let failed = |e: &Json, fallback: &str| {
                let message = format!(
                    "{what} failed: {}: {}",
                    e["code"].as_str().unwrap_or(fallback),
                    e["message"].as_str().unwrap_or("ARM gave no detail")
                );
                // A failed operation's own status is 200; its error object says what failed.
                error(if reply.status < 400 { 0 } else { reply.status }, reply.retry_after, e, message)
            };
            match monitor {
                Monitor::AsyncOperation(_) => match reply.body["status"].as_str() {
                    Some(s) if s.eq_ignore_ascii_case("Succeeded") => return Ok(()),
                    Some(s) if s.eq_ignore_ascii_case("Failed") || s.eq_ignore_ascii_case("Canceled") => {
                        return Err(failed(&reply.body["error"], s));
                    }
                    _ if reply.status >= 400 => return Err(failed(&reply.body["error"], "Failed")),
                    _ => {}
                },
                Monitor::Location(_) => match reply.status {
                    202 => {
                        // The service may move the monitor along.
                        if let Some(Monitor::Location(next)) = &reply.monitor {
                            url = next.clone();
                        }
                    }
                    200..=299 => return Ok(()),
                    _ => return Err(failed(&reply.body["error"], &format!("HTTP {}", reply.status))),
                },
            }
            // Retry-After as the service gives it (at most 10 s), else the standard backoff.
            poll.pause(reply.retry_after).await?;
        }
    }
}

/// One page of an ARM list: its `value` items (none when it has no array) and its `nextLink`, if any.
pub fn page(body: &Json) -> (Vec<Json>, Option<String>) {
    let items = body["value"].as_array().cloned().unwrap_or_default();
    (items, body["nextLink"].as_str().filter(|l| !l.is_empty()).map(str::to_owned))
}

/// `scheme://host[:port]` of a URL (lowercased), or the URL itself when it has none.
fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!("{}://{}", u.scheme(), u.host_str().unwrap_or_default()) + &u.port().map(|p| format!(":{p}")).unwrap_or_default(),
        Err(_) => url.to_owned(),
    }
}

/// Whether two URLs share scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    matches!((reqwest::Url::parse(a), reqwest::Url::parse(b)), (Ok(x), Ok(y)) if x.scheme() == y.scheme() && x.host_str() == y.host_str() && x.port_or_known_default() == y.port_or_known_default())
}

/// What a PUT is to the resource: the create of one found missing (create only: `If-None-Match: *`), the
/// update of one that exists and is the caller's, with a body made from the configuration alone, or the
/// update of one as it was read (`If-Match` the etag it was read with: ARM refuses it with 412 when another
/// writer changed the resource since, and the caller reads it again, see [`Arm::rewrite`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write<'a> {
    Create,
    Update,
    UpdateIf(&'a str),
}

impl Write<'_> {
    fn verb(self) -> &'static str {
        match self {
            Write::Create => "creating",
            Write::Update | Write::UpdateIf(_) => "updating",
        }
    }

    /// An update of `found` as read: under its etag when it has one (the kinds whose models carry it).
    pub fn of(found: &Json) -> Write<'_> {
        found["etag"].as_str().map_or(Write::Update, Write::UpdateIf)
    }
}

/// How long a read that finds nothing is tried again after ARM refused a create because the resource exists.
const LAGGING_READ: Duration = Duration::from_secs(30);

/// Whether the resource a refused create found at its id is that create's own (a retried request whose
/// first answer was lost): a tagged resource by the owner's marker alone (`hpc:owner`; tags Azure Policy
/// adds, and fields a service fills in or leaves out of its answer, say nothing about who made it), an
/// untagged one (a subnet, which has no tags) by holding every property the create sent.
fn landed(sent: &Json, found: &Json) -> bool {
    if sent.get("tags").is_some() {
        let marker = |j: &Json| tags_of(j).get(crate::ownership::KEY).cloned();
        return marker(sent).is_some() && marker(sent) == marker(found);
    }
    holds(&found["properties"], &sent["properties"])
}

/// `found` has every field of `sent` with the same value (strings compared as ARM compares ids, without case):
/// what a write would leave as it is.
pub fn holds(found: &Json, sent: &Json) -> bool {
    match (found, sent) {
        (Json::Object(f), Json::Object(s)) => s.iter().all(|(k, v)| f.get(k).is_some_and(|x| holds(x, v))),
        (Json::Array(f), Json::Array(s)) => f.len() == s.len() && f.iter().zip(s).all(|(x, v)| holds(x, v)),
        (Json::String(f), Json::String(s)) => f.eq_ignore_ascii_case(s),
        (f, s) => f == s,
    }
}

/// The Conflict of a create refused because the resource is there now: someone else made it after it was
/// found missing (another state creating the same names at the same moment). Theirs is left as it is.
fn taken(id: &str, found: Option<&Json>, reply: &Reply) -> CloudError {
    let holder = found.map(tags_of).and_then(|t| t.get("hpc:owner").cloned()).map(|o| format!(" (hpc:owner {o})")).unwrap_or_default();
    let code = reply.body["error"]["code"].as_str().unwrap_or("PreconditionFailed");
    CloudError::new(
        ErrorKind::Conflict,
        Some(code.to_owned()),
        format!(
            "creating {}: another writer created it{holder} after this apply found it missing (ARM refused the create-only PUT, \
             If-None-Match: *, with 412 {code}); theirs was left as it is: choose another name, or delete theirs, then apply again",
            short(id)
        ),
    )
}

/// The last two segments of an id, `virtualNetworks/train-vnet`, for messages.
pub fn short(id: &str) -> String {
    let segs: Vec<&str> = id.trim_end_matches('/').rsplit('/').take(2).collect();
    segs.into_iter().rev().collect::<Vec<_>>().join("/")
}

/// ARM ids compare case-insensitively.
pub fn same_id(a: &str, b: &str) -> bool {
    a.trim_end_matches('/').eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// Ids the resources use on Azure: `azure/<resource group>/<name>`.
pub fn resource_id(group: &str, name: &str) -> String {
    crate::clouds::shared::resource_id(crate::catalog::Cloud::Azure, &[group], name)
}

/// Splits `azure/<resource group>/<name>`.
pub fn parse_id(id: &str) -> Option<(&str, &str)> {
    crate::clouds::shared::parse_id(crate::catalog::Cloud::Azure, id).map(|[group, name]| (group, name))
}

/// An ARM resource's `tags` object (string values only).
pub fn tags_of(resource: &Json) -> BTreeMap<String, String> {
    resource["tags"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default()
}

/// The `tags` attribute an import rebuilds from a piece's tags: the user's own (Azure reserves no key of
/// its own, so a user's `Name` is kept), less the provider's `hpc:` keys and its `default_tags`; null
/// when none are left.
pub fn imported_tags(tags: &BTreeMap<String, String>, defaults: &BTreeMap<String, String>) -> Value {
    crate::clouds::shared::imported_tags(Cloud::Azure, tags, defaults)
}

#[cfg(test)]
impl Arm {
    /// A client that is never called, for tests of request bodies.
    pub fn offline(subscription: &str) -> Arm {
        Arm { subscription: subscription.into(), base: ARM.into(), http: reqwest::Client::new(), credential: None }
    }

    /// A client of subscription `s` against `base` (a local server), with the emulators' token.
    pub fn local(base: &str) -> Arm {
        Arm { subscription: "s".into(), base: base.trim_end_matches('/').into(), http: reqwest::Client::new(), credential: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Only an emulator on this machine is called with no Azure identity; an endpoint elsewhere is called
    /// with the Azure CLI's account, as the real cloud is, never with the emulator's stand-in token.
    #[test]
    fn only_an_endpoint_on_this_machine_goes_without_credentials() {
        let with = |endpoint: &str| CloudSettings {
            endpoint: Some(endpoint.into()),
            settings: [("subscription_id".to_owned(), "00000000-0000-0000-0000-000000000001".to_owned())].into(),
            ..CloudSettings::default()
        };
        for local in ["https://127.0.0.1:8443", "https://localhost:8443/", "https://[::1]:8443"] {
            assert!(build(&with(local)).unwrap().credential.is_none(), "{local}");
        }
        for remote in ["https://management.private.example.com", "https://10.0.0.4:8443"] {
            assert!(build(&with(remote)).unwrap().credential.is_some(), "{remote}");
        }
    }

    /// An endpoint whose certificate nothing trusts fails the same way at every attempt: said at once, with
    /// how to trust it, in one attempt.
    #[tokio::test]
    async fn an_untrusted_certificate_is_reported_at_once_with_how_to_trust_it() {
        let (base, handshakes) = crate::fuzz::serve_untrusted_tls().await;
        let arm = Arm { subscription: "s".into(), base, http: reqwest::Client::new(), credential: None };
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let started = std::time::Instant::now();
        let e = arm.get(&ctx, "/subscriptions/s", "2022-12-01").await.expect_err("nothing trusts the certificate");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}: {e}", started.elapsed());
        assert!(e.message.contains("the endpoint's TLS certificate is not trusted") && e.message.contains("HPC_AZURE_CA_FILE"), "{e}");
        assert!(!e.retryable(), "{e:?}");
        assert_eq!(handshakes.load(std::sync::atomic::Ordering::SeqCst), 1, "one attempt");
    }

    #[tokio::test]
    async fn a_link_to_another_host_is_not_followed_and_gets_no_token() {
        let arm = Arm { subscription: "s".into(), base: "https://127.0.0.1:8443".into(), http: reqwest::Client::new(), credential: None };
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        for link in ["https://attacker.example/subscriptions/s?api-version=1", "http://127.0.0.1:8443/x", "https://127.0.0.1:9443/x"] {
            let e = arm.send(&ctx, reqwest::Method::GET, link, None).await.err().unwrap_or_else(|| panic!("{link} was followed"));
            assert_eq!(e.kind, ErrorKind::Forbidden, "{link}: {e}");
            assert!(e.message.contains("was not followed"), "{e}");
        }
        assert!(same_origin("https://127.0.0.1:8443/subscriptions/s/x?api-version=2", &arm.base));
        assert!(same_origin("https://management.azure.com/x", "https://management.azure.com:443"));
    }

    #[test]
    fn arm_error_bodies_map_to_their_kinds() {
        // A failed scale-set operation: the allocation failure under the operation's error.
        let failed = json!({"code": "AllocationFailed", "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."});
        let e = error(0, None, &failed, "creating virtualMachineScaleSets/c-0 failed: AllocationFailed: Allocation failed.");
        assert_eq!((e.kind.clone(), e.capacity_code()), (ErrorKind::NoCapacity, Some("AllocationFailed")));
        // A code only among the details counts.
        let nested = json!({"code": "Conflict", "details": [{"code": "ZonalAllocationFailed"}]});
        assert_eq!(error(409, None, &nested, "m").capacity_code(), Some("ZonalAllocationFailed"));
        let throttled = json!({"code": "SubscriptionRequestsThrottled", "message": "Number of requests exceeded the limit"});
        assert_eq!(error(429, Some(Duration::from_secs(17)), &throttled, "m").retry_after(), Some(Duration::from_secs(17)));
        assert_eq!(error(409, None, &json!({"code": "OperationNotAllowed"}), "m").kind, ErrorKind::Quota);
        assert_eq!(error(404, None, &json!({"code": "ResourceGroupNotFound"}), "m").kind, ErrorKind::NotFound);
        assert_eq!(error(403, None, &json!({"code": "AuthorizationFailed"}), "m").kind, ErrorKind::Forbidden);
        let invalid = json!({"code": "InvalidParameter", "target": "computerNamePrefix"});
        assert_eq!(error(400, None, &invalid, "m").kind, ErrorKind::InvalidRequest { field: Some("computerNamePrefix".into()) });
    }

    #[test]
    fn operations_are_named_by_method_and_resource_type() {
        let vmss = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/train";
        assert_eq!(operation("PUT", &format!("{vmss}?api-version=2024-07-01")), "PUT virtualMachineScaleSets");
        assert_eq!(
            operation("GET", &format!("https://management.azure.com{vmss}/virtualMachines?api-version=1")),
            "GET virtualMachineScaleSets/virtualMachines"
        );
        assert_eq!(operation("POST", &format!("{vmss}/delete")), "POST virtualMachineScaleSets/delete");
        assert_eq!(operation("PUT", "/subscriptions/s/resourceGroups/rg?api-version=1"), "PUT resourceGroups");
        assert_eq!(
            operation("GET", "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/o-1"),
            "GET locations/operations"
        );
    }

    #[test]
    fn a_refused_create_is_its_own_only_when_the_resource_holds_what_it_sent_and_is_otherwise_a_conflict() {
        // A tagged resource: by its tags (they hold the owner's marker).
        let sent = json!({"location": "eastus", "tags": {"hpc:owner": "o-1", "team": "ml"}, "properties": {}});
        assert!(landed(&sent, &json!({"tags": {"hpc:owner": "o-1", "team": "ml"}, "properties": {"provisioningState": "Succeeded"}})));
        assert!(!landed(&sent, &json!({"tags": {"hpc:owner": "o-2", "team": "ml"}})));
        // Tags Azure Policy added, and fields the service fills in, leave it this create's own.
        assert!(landed(&sent, &json!({"tags": {"hpc:owner": "o-1", "team": "ml", "policy-added": "1"}, "properties": {"x": 1}})));
        // No marker sent or found: never assumed to be ours.
        assert!(!landed(&json!({"tags": {"team": "ml"}}), &json!({"tags": {"team": "ml"}})));
        // A subnet: by every property sent, ids without case.
        let subnet = json!({"properties": {"addressPrefix": "10.0.0.0/24", "networkSecurityGroup": {"id": "/s/RG/nsg"}}});
        let found = json!({"properties": {"addressPrefix": "10.0.0.0/24", "networkSecurityGroup": {"id": "/s/rg/NSG"},
                                          "provisioningState": "Succeeded"}});
        assert!(landed(&subnet, &found));
        assert!(!landed(&subnet, &json!({"properties": {"addressPrefix": "10.0.9.0/24"}})));
        // Someone else's: a Conflict naming the piece and its holder.
        let reply = Reply {
            status: 412,
            monitor: None,
            retry_after: None,
            body: json!({"error": {"code": "PreconditionFailed", "message": "exists"}}),
            request_id: None,
        };
        let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/x-nsg";
        let e = taken(id, Some(&json!({"tags": {"hpc:owner": "o-2"}})), &reply);
        assert_eq!((e.kind.clone(), e.code.as_deref()), (ErrorKind::Conflict, Some("PreconditionFailed")));
        assert!(e.message.starts_with("creating networkSecurityGroups/x-nsg: another writer created it (hpc:owner o-2)"), "{e}");
    }

    /// A page whose nextLink is itself (or an earlier page) ended the list never: it was asked for again and
    /// again until the apply's deadline, each time under the read bucket.
    #[tokio::test]
    async fn a_next_link_that_loops_ends_the_list_with_an_error() {
        let base = crate::fuzz::serve(|line| {
            let page = if line.contains("page=2") { 2 } else { 1 };
            // Page 1 links to page 2, page 2 back to page 1.
            let next = if page == 1 { "page=2" } else { "page=1" };
            (200, vec![], format!(r#"{{"value": [{{"id": "{page}"}}], "nextLink": "/list?{next}&api-version=1"}}"#))
        })
        .await;
        let arm = Arm { subscription: "s".into(), base: base.clone(), http: reqwest::Client::new(), credential: None };
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let listed = tokio::time::timeout(Duration::from_secs(10), arm.list(&ctx, &format!("{base}/list?page=1"), "1")).await;
        let e = listed.expect("the list ends").expect_err("a looping nextLink is an error");
        assert!(e.message.contains("again (its nextLink loops)"), "{e}");
    }

    #[test]
    fn any_answer_reads_as_a_reply_and_any_error_body_as_an_error() {
        use crate::fuzz::{answers, check, hostile_str, json};
        use proptest::prelude::*;
        let headers = proptest::collection::btree_map(
            proptest::sample::select(vec!["azure-asyncoperation", "location", "retry-after"]).prop_map(str::to_owned),
            prop_oneof![hostile_str(), any::<u64>().prop_map(|n| n.to_string()), Just(" 7 ".to_owned())],
            0..4,
        );
        let realistic = vec![
            json!({"error": {"code": "Conflict", "message": "m", "target": "t", "details": [{"code": "ZonalAllocationFailed"}]}}),
            json!({"value": [{"id": "/subscriptions/s/x", "tags": {"hpc:owner": "o"}}], "nextLink": "https://management.azure.com/x?page=2"}),
            json!({"status": "Failed", "error": {"code": "AllocationFailed", "message": "no"}}),
        ];
        let body = prop_oneof![answers(realistic).prop_map(|j| j.to_string()), hostile_str()];
        check("Reply::of", (any::<u16>(), headers, body), |(status, headers, text)| {
            let reply = Reply::of(status, |n| headers.get(n).cloned(), &text);
            let _ = (reply.error(), reply.failure("reading x"), page(&reply.body));
            let e = error(status, reply.retry_after, &reply.body["error"], "m");
            if reply.retry_after.is_some() && e.retry_after().is_some() && e.retry_after() != reply.retry_after {
                return Err(format!("the Retry-After given was not kept: {e:?}"));
            }
            Ok(())
        });
        check("landed/taken", (json(), json(), hostile_str()), |(sent, found, id)| {
            let _ = (landed(&sent, &found), tags_of(&found), short(&id), same_id(&id, &id), origin(&id), same_origin(&id, ARM));
            let reply = Reply { status: 412, monitor: None, retry_after: None, body: sent, request_id: None };
            let e = taken(&id, Some(&found), &reply);
            if e.kind != ErrorKind::Conflict {
                return Err(format!("{e:?}"));
            }
            Ok(())
        });
    }

    #[test]
    fn a_list_follows_each_link_once() {
        let mut pages = crate::clouds::shared::Pages::new("Azure Resource Manager", "nextLink");
        assert_eq!(pages.next(Some("a".into()), "x").unwrap().as_deref(), Some("a"));
        assert!(pages.next(Some("a".into()), "x").is_err());
        let mut many = crate::clouds::shared::Pages::new("Azure Resource Manager", "nextLink");
        for i in 0..crate::clouds::shared::Pages::MOST {
            many.next(Some(i.to_string()), "x").unwrap();
        }
        assert!(many.next(Some("last".into()), "x").is_err());
        assert_eq!(page(&json!({"value": 5, "nextLink": ""})), (vec![], None));
    }

    #[test]
    fn ids_compare_without_case_and_read_short() {
        assert!(same_id(
            "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/v",
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/virtualnetworks/v/"
        ));
        assert_eq!(short("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v"), "virtualNetworks/v");
        assert_eq!(parse_id(&resource_id("ml-rg", "train")), Some(("ml-rg", "train")));
    }
}
