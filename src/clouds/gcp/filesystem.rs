//! `hpc_parallel_filesystem` on Google Cloud: Managed Lustre (google-cloud-lustre-v1) on the fabric's host
//! network, reached through private service access: a reserved global address range (`<name>-psa`) and
//! the network's Service Networking connection, which gets the range added (and removed on delete).
//! Capacity grows in place; an optional Cloud Storage import runs once after creation. The instance's
//! `hpc_owner` label and the range's description say whose they are; only the census's are changed or
//! deleted.
//! The lifecycle's backend for this kind, `Backend<FilesystemSpec>` on `backend::Gcp`, comes last, before the tests.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_lustre_v1::model::{Instance, instance::State};
use serde_json::{Value as Json, json};

use super::api::{self, Gcp, call};
use super::backend::{self, configured, in_zone, region_of, zone_and_name};
use super::{cluster, fabric, filesystem};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::retry;
use crate::clouds::shared::{self, Poll};
use crate::framework::{Context, Value};
use crate::model::FilesystemSpec;
use crate::ownership::Census;

/// What exists of a filesystem: the Lustre instance and its private-service-access pieces.
#[derive(Clone, Debug)]
pub struct FsLive {
    pub instance: Instance,
    pub address: bool,
    pub peered: bool,
}

impl FsLive {
    pub fn mount_point(&self) -> &str {
        &self.instance.mount_point
    }

    /// A ready mount command (the Managed Lustre guide's form).
    pub fn mount_command(&self) -> String {
        format!("sudo mkdir -p /lustre && sudo mount -t lustre {} /lustre", self.mount_point())
    }
}

pub fn instance_path(project: &str, zone: &str, name: &str) -> String {
    format!("projects/{project}/locations/{zone}/instances/{name}")
}

fn psa_name(fs: &str) -> String {
    format!("{fs}-psa")
}

/// Whether the filesystem's reserved range exists and is the census's (its description names the owner).
async fn own_range(ctx: &Context, gcp: &Gcp, fs: &str, census: &Census) -> Result<bool, CloudError> {
    let psa = psa_name(fs);
    match call(ctx, "reading the reserved range", || gcp.addresses.get().set_project(&gcp.project).set_address(&psa).send()).await {
        Ok(a) => {
            let described = a.description.as_deref().and_then(super::fabric::parse_description).unwrap_or_default();
            let marker = described.get("owner").map(String::as_str);
            Ok(census.admit("google_compute_global_address", &psa, marker, a.creation_timestamp.as_deref()))
        }
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the filesystem's reserved range exists and is the census's: `None` when that cannot be told.
pub async fn range_exists(ctx: &Context, gcp: &Gcp, fs: &str, census: &Census) -> Option<bool> {
    own_range(ctx, gcp, fs, census).await.ok()
}

/// The host network of the fabric, as `projects/<p>/global/networks/<name>`.
pub async fn host_network(ctx: &Context, gcp: &Gcp, fabric: &str, region: &str) -> Result<String, CloudError> {
    let live = super::fabric::observe(ctx, gcp, fabric, region, &Census::reading()).await?;
    let d = live
        .description()
        .ok_or_else(|| CloudError::other(format!("fabric {fabric} has no pieces in {}: apply the fabric first", gcp.project)))?;
    let name = match d.get("vpc") {
        Some(v) => api::short_name(v).to_owned(),
        None => format!("{fabric}-vpc"),
    };
    Ok(format!("projects/{}/global/networks/{name}", gcp.project))
}

// ------------------------------------------------------------------------------------ Service Networking

const SERVICE_NETWORKING: &str = "https://servicenetworking.googleapis.com";
/// The parent of the connections and the one connection Google's services use (servicenetworking v1).
const CONNECTIONS: &str = "services/servicenetworking.googleapis.com/connections";
const CONNECTION: &str = "services/servicenetworking.googleapis.com/connections/servicenetworking-googleapis-com";

/// A network as Service Networking names it: `projects/<project number>/global/networks/<name>` (Compute
/// and Managed Lustre take the project id; Service Networking wants the number).
async fn numbered(ctx: &Context, gcp: &Gcp, network: &str) -> Result<String, CloudError> {
    let number = api::project_number(ctx, gcp).await?;
    Ok(format!("projects/{number}/global/networks/{}", api::short_name(network)))
}

async fn psa_request(ctx: &Context, gcp: &Gcp, method: reqwest::Method, path: &str, body: Option<Json>) -> Result<Json, CloudError> {
    let url = format!("{}/v1/{path}", api::base(gcp, SERVICE_NETWORKING));
    api::rest(ctx, gcp, method, &url, body.as_ref(), "calling Service Networking").await
}

/// Waits for a Service Networking operation (google.longrunning) to be done, polling `operations.get` with
/// backoff; a done operation's `error` is the call's failure.
async fn psa_wait(ctx: &Context, gcp: &Gcp, mut op: Json, what: &str, timeout: Duration) -> Result<(), CloudError> {
    let mut poll = Poll::new(ctx, format!("waiting for {what}"), timeout);
    loop {
        let Some(name) = psa_pending(&op, what)? else { return Ok(()) };
        poll.pause(None).await?;
        op = psa_request(ctx, gcp, reqwest::Method::GET, &name, None).await?;
    }
}

/// Where a Service Networking operation stands: `None` when it is done, its name while it runs (to read it
/// again by), its error when it failed or has no name to follow.
fn psa_pending(op: &Json, what: &str) -> Result<Option<String>, CloudError> {
    if op["done"].as_bool() == Some(true) {
        return match op.get("error").filter(|e| !e.is_null()) {
            Some(e) => Err(format!("{what} failed: {}", e["message"].as_str().unwrap_or("the operation failed")).into()),
            None => Ok(None),
        };
    }
    match op["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => Ok(Some(name.to_owned())),
        None => Err(format!("{what}: Service Networking answered an operation without a name: {op}").into()),
    }
}

/// The reserved ranges of the first connection in a `connections.list` answer, if it lists one.
fn connection_ranges(out: &Json) -> Option<Vec<String>> {
    out["connections"].as_array().and_then(|c| c.first()).map(|c| {
        c["reservedPeeringRanges"].as_array().map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default()
    })
}

/// The reserved ranges of the network's private-service-access connection, if it has one.
async fn psa_ranges(ctx: &Context, gcp: &Gcp, network: &str) -> Result<Option<Vec<String>>, CloudError> {
    let network = numbered(ctx, gcp, network).await?;
    let out = psa_request(ctx, gcp, reqwest::Method::GET, &format!("{CONNECTIONS}?network={network}"), None).await?;
    Ok(connection_ranges(&out))
}

/// Sets the connection's reserved ranges (`force` when one is removed) and waits for it.
async fn psa_patch(ctx: &Context, gcp: &Gcp, network: &str, ranges: Vec<String>, force: bool, timeout: Duration) -> Result<(), CloudError> {
    let body = json!({"network": network, "reservedPeeringRanges": ranges});
    let path = format!("{CONNECTION}?updateMask=reservedPeeringRanges&force={force}");
    let op = psa_request(ctx, gcp, reqwest::Method::PATCH, &path, Some(body)).await?;
    psa_wait(ctx, gcp, op, "updating the private service access connection", timeout).await
}

/// How many reads in a row must find an edit of the connection in place before it counts as settled.
const PSA_SETTLE_READS: u32 = 3;
/// The spacing of those reads is how long the edit's own read, write and operation took, within these bounds:
/// another writer on the same service at the same time takes about as long (see [`psa_edit`]).
const PSA_SETTLE_SPACING: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));
/// How many writes one edit makes (its first and its repairs) before it fails as a conflict.
const PSA_WRITES: u32 = 6;

/// Edits of one network's connection take turns within this process (a lock per network), so that the
/// provider's own filesystems never need a repair of each other's edits; [`psa_edit`] is what keeps edits
/// from other processes safe.
fn psa_turn(network: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    static TURNS: std::sync::Mutex<BTreeMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>> = std::sync::Mutex::new(BTreeMap::new());
    TURNS.lock().unwrap_or_else(|e| e.into_inner()).entry(network.to_owned()).or_default().clone()
}

/// Adds (`keep`) or removes `range` on the network's connection, and stays until the change holds.
///
/// Service Networking's connection has no etag or fingerprint (servicenetworking.v1 `Connection`: network,
/// peering, reservedPeeringRanges, service) and a patch replaces its whole range list, so an edit is a
/// read-modify-write that cannot be made conditional on what was read. Two writers (two filesystems on one
/// network in two Terraform states: two provider processes, whose locks are their own) can both read the
/// list before either writes, and the list that lands second was made without the first writer's change. An
/// addition is sent without `force`, and the service refuses it when it would drop a range ("if a
/// previously defined allocated range is removed, force flag must be set to true"); but a removal needs
/// `force` and so drops a range added since its read, and an addition brings back a range removed since its
/// read. The first writer may have read its change back before that, so both applies would succeed. So an
/// edit verifies and repairs until its change holds:
///
/// 1. Read the list and write it back with our range added or taken out and nothing else changed: a list
///    this provider writes is always the list it just read, plus or minus its own range. A write that is
///    refused or fails is followed by a read: when the connection changed since the list was read (another
///    writer's change landed meanwhile), step 1 is made again from it; when it did not, the failure is the
///    edit's.
/// 2. Read it again [`PSA_SETTLE_READS`] times, spaced by how long step 1 took from its read to the end of
///    its operation (within [`PSA_SETTLE_SPACING`]). A read that finds our change undone starts step 1 again
///    from that read; when every read finds it in place the edit is done. After [`PSA_WRITES`] writes the edit
///    fails as a conflict, and the next apply starts it again.
///
/// Why no writer's change is undone for good: no write removes a range but the writer's own, so another
/// writer's change is undone only by a stale list, one read before that change landed and written after it.
/// Such a list lands less than its writer's read-to-land gap after the change it undoes. The change's owner
/// reads for [`PSA_SETTLE_READS`] spacings after its write landed, so when that gap is shorter than this
/// window the owner sees the damage and repairs it from a fresh read, which keeps every range then there,
/// the stale writer's own included. The spacing is the owner's own read-to-land gap: another writer on the
/// same service at the same time takes about as long, and the window is several of them.
/// Why it ends: a stale list exists only while some writer is between its read and its write; repairs are
/// made from fresh reads and the writers are few (filesystem applies), so the lists stop undoing each other
/// within a few writes, and [`PSA_WRITES`] bounds it.
///
/// What is left (RELIABILITY.md): a writer whose read-to-land gap is longer than the owner's window (a
/// process stalled between its read and its write, a patch whose operation runs far longer than the owner's
/// did, a person or another tool editing the ranges without these rules) can still undo a change after its
/// owner stopped reading. A filesystem's refresh reads the connection, so a range of a filesystem that is
/// lost that way shows as missing in the next plan and the next apply adds it back (a create also looks once
/// more when its instance is made); a destroyed filesystem's range brought back that way stays on the
/// connection until it is taken off by hand.
async fn psa_edit(ctx: &Context, gcp: &Gcp, network: &str, range: &str, keep: bool, timeout: Duration) -> Result<(), CloudError> {
    let numbered = numbered(ctx, gcp, network).await?;
    let turn = psa_turn(&numbered);
    let _turn = turn.lock().await;
    let done = |ranges: &Option<Vec<String>>| ranges.as_ref().is_some_and(|r| r.iter().any(|x| x == range)) == keep;
    let mut read_at = tokio::time::Instant::now();
    let mut current = psa_ranges(ctx, gcp, network).await?;
    let (mut writes, mut gap) = (0, Duration::ZERO);
    loop {
        if !done(&current) {
            if writes == PSA_WRITES {
                return Err(CloudError::new(
                    crate::clouds::ErrorKind::Conflict,
                    None,
                    format!(
                        "{range} was {} the private service access connection of {network} in {PSA_WRITES} writes: another \
                         writer keeps replacing its ranges; apply again once it is done",
                        if keep { "not kept on" } else { "not kept off" }
                    ),
                ));
            }
            if writes > 0 {
                let undone = if keep { "dropped from" } else { "brought back to" };
                tracing::info!(
                    "{range} was {undone} the private service access connection of {network} by another writer: making the change again"
                );
            }
            writes += 1;
            let read = current.clone();
            if let Err(e) = psa_write(ctx, gcp, &numbered, range, keep, current, timeout).await {
                // A refusal because another writer's change landed since the read (a connection made or deleted
                // meanwhile, a range that a list sent without force would drop) is followed by the change made
                // anew from what is there now; with the connection as it was read, the failure is ours.
                read_at = tokio::time::Instant::now();
                current = psa_ranges(ctx, gcp, network).await?;
                if current == read {
                    return Err(e);
                }
                continue;
            }
            gap = read_at.elapsed();
        } else if writes == 0 {
            return Ok(());
        }
        let spacing = gap.clamp(PSA_SETTLE_SPACING.0, PSA_SETTLE_SPACING.1);
        match psa_settle(ctx, gcp, network, &done, spacing, timeout).await? {
            None => return Ok(()),
            Some((at, undone)) => (read_at, current) = (at, undone),
        }
    }
}

/// Writes `current` (the connection's ranges as just read, `None` when there is no connection) with `range`
/// added or taken out, and nothing else changed: a patch, the connection's creation for its first range,
/// its deletion for its last.
async fn psa_write(
    ctx: &Context,
    gcp: &Gcp,
    numbered: &str,
    range: &str,
    keep: bool,
    current: Option<Vec<String>>,
    timeout: Duration,
) -> Result<(), CloudError> {
    match (current, keep) {
        (Some(mut ranges), true) => {
            ranges.push(range.to_owned());
            psa_patch(ctx, gcp, numbered, ranges, false, timeout).await
        }
        (None, true) => {
            let body = json!({"network": numbered, "reservedPeeringRanges": [range]});
            let op = psa_request(ctx, gcp, reqwest::Method::POST, CONNECTIONS, Some(body)).await?;
            psa_wait(ctx, gcp, op, "creating the private service access connection", timeout).await
        }
        (Some(ranges), false) => {
            let rest: Vec<String> = ranges.into_iter().filter(|r| r != range).collect();
            if rest.is_empty() {
                // deleteConnection: POST on the connection's name (servicenetworking v1).
                let op = psa_request(ctx, gcp, reqwest::Method::POST, CONNECTION, Some(json!({"consumerNetwork": numbered}))).await?;
                psa_wait(ctx, gcp, op, "deleting the private service access connection", timeout).await
            } else {
                psa_patch(ctx, gcp, numbered, rest, true, timeout).await
            }
        }
        (None, false) => Ok(()),
    }
}

/// Reads the connection [`PSA_SETTLE_READS`] times, `spacing` apart: `None` when every read finds the edit
/// in place (`done`), else the read that found it undone and when it was made.
async fn psa_settle(
    ctx: &Context,
    gcp: &Gcp,
    network: &str,
    done: &impl Fn(&Option<Vec<String>>) -> bool,
    spacing: Duration,
    timeout: Duration,
) -> Result<Option<(tokio::time::Instant, Option<Vec<String>>)>, CloudError> {
    let what = format!("waiting for the private service access connection of {network} to settle");
    let mut poll = Poll::on(ctx, what, timeout, shared::Backoff { first: spacing, max: spacing });
    for _ in 0..PSA_SETTLE_READS {
        poll.pause(None).await?;
        let at = tokio::time::Instant::now();
        let ranges = poll.check(psa_ranges(ctx, gcp, network)).await?;
        if !done(&ranges) {
            return Ok(Some((at, ranges)));
        }
    }
    Ok(None)
}

/// Adds `range` to the network's connection (creating it if there is none).
async fn psa_connect(ctx: &Context, gcp: &Gcp, network: &str, range: &str, timeout: Duration) -> Result<(), CloudError> {
    psa_edit(ctx, gcp, network, range, true, timeout).await
}

/// Removes `range` from the network's connection, deleting the connection when it was the last one.
async fn psa_disconnect(ctx: &Context, gcp: &Gcp, network: &str, range: &str, timeout: Duration) -> Result<(), CloudError> {
    psa_edit(ctx, gcp, network, range, false, timeout).await
}

/// Cloud Storage import paths: a path inside the bucket ends with '/' (lustre v1 GcsPath.uri); a bare
/// bucket stays as it is.
pub fn gcs_uri(uri: &str) -> String {
    match uri.strip_prefix("gs://") {
        Some(location) if location.contains('/') && !location.ends_with('/') => format!("{uri}/"),
        _ => uri.to_owned(),
    }
}

// ----------------------------------------------------------------------------------------------- Lustre

/// The filesystem's instance and PSA pieces, or None when the instance is gone (or not the census's).
pub async fn observe(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    name: &str,
    network: Option<&str>,
    census: &Census,
) -> Result<Option<FsLive>, CloudError> {
    let path = instance_path(&gcp.project, zone, name);
    let instance =
        match call(ctx, &format!("reading Managed Lustre instance {name}"), || gcp.lustre.get_instance().set_name(&path).send()).await {
            Ok(i) => i,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
    if instance.state == State::Deleting {
        return Ok(None);
    }
    let created = instance.create_time.as_ref().map(|t| format!("{t:?}"));
    if !census.admit("google_lustre_instance", name, instance.labels.get("hpc_owner").map(String::as_str), created.as_deref()) {
        return Ok(None);
    }
    let network = network.map(str::to_owned).unwrap_or_else(|| instance.network.clone());
    let psa = psa_name(name);
    let address = own_range(ctx, gcp, name, census).await?;
    let peered = psa_ranges(ctx, gcp, &network).await?.is_some_and(|r| r.contains(&psa));
    Ok(Some(FsLive { instance, address, peered }))
}

/// A Managed Lustre long-running operation, driven one request at a time (the start, then each
/// `operations.get`) so that each is a log line of its own. The start goes through the one retry policy
/// (`retry::send`: a rate limit or a transient error starts it again, and the request id keeps that from
/// making it twice); the polls follow the one poll loop (`shared::Poll`: its schedule, `timeout` and
/// StopProvider) and ride out those errors as the client's polling policy says. `operation` names the
/// start (`lustre.CreateInstance`).
async fn lro<R, M, P, F>(ctx: &Context, what: &str, operation: &str, timeout: Duration, mut start: F) -> Result<R, CloudError>
where
    F: FnMut() -> P,
    P: google_cloud_lro::Poller<R, M>,
{
    use google_cloud_lro::PollingResult;
    let starting = retry::Call { cloud: "gcp", operation: operation.into(), what, ..retry::Call::default() };
    let retry::Decoded((mut poller, mut answer)) = retry::send(ctx, &crate::clouds::throttle::GCP, starting, || {
        let mut poller = start();
        async move {
            match poller.poll().await {
                Some(PollingResult::Completed(Err(e))) => Err(api::error_of(what, &e)),
                answer => Ok(retry::Answer::Done(retry::Decoded((poller, answer)))),
            }
        }
    })
    .await?;
    let mut poll = Poll::new(ctx, format!("waiting for {what}"), timeout);
    let polling = retry::Call { cloud: "gcp", operation: "lustre.GetOperation".into(), what, ..retry::Call::default() };
    let mut last_error = None;
    loop {
        match answer {
            None => return Err(last_error.unwrap_or_else(|| CloudError::other(format!("{what}: the operation ended without an answer")))),
            Some(PollingResult::Completed(out)) => return out.map_err(|e| api::error_of(what, &e)),
            Some(PollingResult::InProgress(_)) => last_error = None,
            // The client's polling policy decides whether the operation is asked after again (its next poll
            // then answers None and this error is the outcome).
            Some(PollingResult::PollingError(e)) => last_error = Some(api::error_of(what, &e)),
        }
        poll.pause(None).await?;
        let began = tokio::time::Instant::now();
        answer = poll.check(async { Ok::<_, CloudError>(poller.poll().await) }).await?;
        match &answer {
            Some(PollingResult::Completed(Err(e)) | PollingResult::PollingError(e)) => {
                retry::log_attempt(&polling, 1, began, Err(&api::error_of(what, e)));
            }
            Some(_) => retry::log_attempt(&polling, 1, began, Ok((None, None))),
            None => {}
        }
    }
}

pub struct Options<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub timeout: Duration,
}

/// Creates what is missing (range, connection, instance, then the Cloud Storage import), grows capacity
/// and updates labels.
pub async fn converge(ctx: &Context, gcp: &Gcp, spec: &FilesystemSpec, o: &Options<'_>, census: &Census) -> Result<FsLive, CloudError> {
    let f = &spec.fabric;
    let zone = f.zone.clone().unwrap_or_default();
    let network = host_network(ctx, gcp, &f.name, &f.region).await?;
    let p = &gcp.project;
    let psa = psa_name(&spec.name);
    let live = observe(ctx, gcp, &zone, &spec.name, Some(&network), census).await?;
    let has_address = match &live {
        Some(l) => l.address,
        None => own_range(ctx, gcp, &spec.name, census).await?,
    };
    census.gate()?;
    let owner = census.marker().map(|m| format!(" owner={m}")).unwrap_or_default();
    if !has_address {
        let body: google_cloud_compute_v1::model::Address = serde_json::from_value(json!({
            "name": psa, "purpose": "VPC_PEERING", "addressType": "INTERNAL", "prefixLength": 20, "network": network,
            "description": format!("hpc-provider filesystem={}{owner} private service access for Managed Lustre", spec.name),
        }))
        .map_err(|e| e.to_string())?;
        let what = format!("reserving range {psa}");
        let rid = api::request_id();
        let op = call(ctx, &what, || gcp.addresses.insert().set_project(p).set_request_id(&rid).set_body(body.clone()).send()).await?;
        api::wait(ctx, gcp, op, &what, o.timeout).await?;
    }
    if !live.as_ref().is_some_and(|l| l.peered) {
        psa_connect(ctx, gcp, &network, &psa, o.timeout).await?;
    }
    let path = instance_path(p, &zone, &spec.name);
    match &live {
        None => {
            let instance = Instance::new()
                .set_filesystem(&spec.filesystem_name)
                .set_capacity_gib(spec.capacity_gib as i64)
                .set_per_unit_storage_throughput(i64::from(spec.throughput_per_tib))
                .set_network(&network)
                .set_labels(o.labels.clone())
                .set_description(match &spec.data_repository {
                    Some(uri) => format!("hpc-provider fabric={} import={uri}", f.name),
                    None => format!("hpc-provider fabric={}", f.name),
                });
            let what = format!("creating Managed Lustre instance {} ({} GiB) in {zone}", spec.name, spec.capacity_gib);
            // A refused start is retried; once started, polls ride out throttling (see api::client!), so the
            // instance is never asked for twice.
            // One request id for every attempt of this create: a start the service took whose answer was lost is
            // answered again with its operation, never made twice (CreateInstanceRequest.requestId).
            let request_id = api::request_id();
            lro(ctx, &what, "lustre.CreateInstance", o.timeout, || {
                gcp.lustre
                    .create_instance()
                    .set_parent(format!("projects/{p}/locations/{zone}"))
                    .set_instance_id(&spec.name)
                    .set_request_id(&request_id)
                    .set_instance(instance.clone())
                    .poller()
            })
            .await?;
            if let Some(uri) = &spec.data_repository {
                let what = format!("importing {uri} into {}", spec.name);
                // ImportDataRequest.requestId: a retried import after a lost answer is not a second job.
                let request_id = api::request_id();
                lro(ctx, &what, "lustre.ImportData", o.timeout, || {
                    gcp.lustre
                        .import_data()
                        .set_name(&path)
                        .set_request_id(&request_id)
                        .set_gcs_path(google_cloud_lustre_v1::model::GcsPath::new().set_uri(gcs_uri(uri)))
                        .set_lustre_path(google_cloud_lustre_v1::model::LustrePath::new().set_path("/"))
                        .poller()
                })
                .await?;
            }
        }
        Some(l) => {
            let mut mask = Vec::new();
            let mut update = l.instance.clone();
            if l.instance.capacity_gib < spec.capacity_gib as i64 {
                update = update.set_capacity_gib(spec.capacity_gib as i64);
                mask.push("capacity_gib");
            }
            let have: BTreeMap<String, String> = l.instance.labels.clone().into_iter().collect();
            if have != *o.labels {
                update = update.set_labels(o.labels.clone());
                mask.push("labels");
            }
            if !mask.is_empty() {
                let what = format!("updating Managed Lustre instance {}", spec.name);
                lro(ctx, &what, "lustre.UpdateInstance", o.timeout, || {
                    gcp.lustre
                        .update_instance()
                        .set_instance(update.clone())
                        .set_update_mask(google_cloud_wkt::FieldMask::default().set_paths(mask.clone()))
                        .poller()
                })
                .await?;
            }
        }
    }
    let vanished = || CloudError::other(format!("Managed Lustre instance {path} vanished after it was created"));
    let live = observe(ctx, gcp, &zone, &spec.name, Some(&network), census).await?.ok_or_else(vanished)?;
    if live.peered {
        return Ok(live);
    }
    // The range was taken off the connection while the instance was made (a list another writer read before
    // it was added, landing after the edit settled; see psa_edit): it goes back before the apply ends.
    psa_connect(ctx, gcp, &network, &psa, o.timeout).await?;
    observe(ctx, gcp, &zone, &spec.name, Some(&network), census).await?.ok_or_else(vanished)
}

/// Deletes the instance, its range's place in the network's connection, and the reserved range, each if it
/// is the census's. `network` (the fabric's host network) lets a create that failed before the instance
/// existed be cleaned up too.
pub async fn delete(
    ctx: &Context,
    gcp: &Gcp,
    zone: &str,
    name: &str,
    network: Option<&str>,
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let p = &gcp.project;
    let path = instance_path(p, zone, name);
    let live = observe(ctx, gcp, zone, name, None, census).await?;
    let range = match &live {
        Some(l) => l.address,
        None => own_range(ctx, gcp, name, census).await?,
    };
    if let Some(l) = &live {
        let what = format!("deleting Managed Lustre instance {name}");
        match lro(ctx, &what, "lustre.DeleteInstance", timeout, || gcp.lustre.delete_instance().set_name(&path).poller()).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        if range {
            psa_disconnect(ctx, gcp, &l.instance.network, &psa_name(name), timeout).await?;
        }
    } else if let (Some(network), true) = (network, range) {
        psa_disconnect(ctx, gcp, network, &psa_name(name), timeout).await?;
    }
    if !range {
        // Another owner's range (or none) of the same name stays as it is.
        return Ok(());
    }
    let psa = psa_name(name);
    let what = format!("releasing range {psa}");
    match call(ctx, &what, || gcp.addresses.delete().set_project(p).set_address(&psa).send()).await {
        Ok(op) => api::wait(ctx, gcp, op, &what, timeout).await,
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The configuration an import rebuilds from the instance.
pub fn imported_config(zone: &str, live: &FsLive, fabric_ref: Value, defaults: &BTreeMap<String, String>) -> Value {
    let i = &live.instance;
    let name = i.name.rsplit('/').next().unwrap_or_default().to_owned();
    let user: BTreeMap<String, String> = i
        .labels
        .iter()
        .filter(|(k, v)| !k.starts_with("hpc_") && defaults.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let _ = zone;
    let described = super::fabric::parse_description(&i.description).unwrap_or_default();
    Value::object([
        ("name", Value::from(name)),
        ("fabric", fabric_ref),
        ("data_repository", Value::from(described.get("import").cloned())),
        ("capacity_gib", Value::int(i.capacity_gib)),
        ("throughput_per_tib", Value::int(i.per_unit_storage_throughput)),
        ("filesystem_name", Value::from(i.filesystem.as_str())),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ])
}

/// A filesystem state brought to what exists: capacity, tier and mount point as found; the private service
/// access pieces that are gone marked missing.
fn refreshed(state: &Value, live: &filesystem::FsLive) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    let (capacity, tier) = (live.instance.capacity_gib, live.instance.per_unit_storage_throughput);
    out.insert("capacity_gib".into(), Value::int(capacity));
    out.insert("throughput_per_tib".into(), Value::int(tier));
    out.insert("throughput_mbps".into(), Value::int(crate::clouds::shared::throughput_mbps(capacity, tier, 1024)));
    out.insert("mount_target".into(), Value::from(live.mount_point()));
    out.insert("mount_command".into(), Value::from(live.mount_command()));
    let mut expansion = shared::patch_piece(
        state.get("expansion"),
        "google_lustre_instance",
        None,
        &[("capacity_gib", capacity.to_string()), ("per_unit_storage_throughput", tier.to_string())],
    );
    expansion = shared::mark_missing(&expansion, |k| match k {
        "google_compute_global_address" => live.address,
        "google_service_networking_connection" => live.peered,
        _ => true,
    });
    out.insert("expansion".into(), expansion);
    Value::Map(out)
}

#[async_trait]
impl Backend<FilesystemSpec> for backend::Gcp {
    async fn configured(&self, ctx: &Context) -> Result<(), CloudError> {
        configured(ctx).await
    }

    fn id(&self, spec: &FilesystemSpec) -> Option<String> {
        Some(api::resource_id(spec.fabric.zone.as_deref().unwrap_or_default(), &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        in_zone(v.get("fabric").get("zone"))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FilesystemSpec>) -> Outcome {
        let (ctx, census, spec) = (step.ctx, step.census, change.spec);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(change.prior.clone(), e),
        };
        let zone = spec.fabric.zone.clone().unwrap_or_default();
        let name = &spec.name;
        let labels = api::labels(change.tags);
        let options = filesystem::Options { labels: &labels, timeout: step.timeout };
        let state = change.state.clone();
        let e = match filesystem::converge(ctx, &client, spec, &options, census).await {
            Ok(live) => {
                let state = shared::with_attr(&state, "mount_target", Value::from(live.mount_point()));
                return Outcome::done(shared::with_attr(&state, "mount_command", Value::from(live.mount_command())));
            }
            Err(e) => e,
        };
        let creating = change.creating();
        let left = match filesystem::observe(ctx, &client, &zone, name, None, census).await {
            Ok(Some(live)) => refreshed(&state, &live),
            // The instance does not exist, but its reserved range may: keep the state (the CLI taints it)
            // so that the next apply or a destroy finds and removes what was made.
            _ if creating && filesystem::range_exists(ctx, &client, name, census).await != Some(false) => state,
            _ if creating => Value::Null,
            _ => change.prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FilesystemSpec>) -> Outcome {
        let ctx = step.ctx;
        let (zone, name) = zone_and_name(prior);
        let client = match api::connect(ctx).await {
            Ok(c) => c,
            Err(e) => return Outcome::failed(prior.clone(), e),
        };
        let fabric = prior.get("fabric").get("name").as_str().unwrap_or_default();
        let network = filesystem::host_network(ctx, &client, fabric, region_of(zone)).await.ok();
        let done = filesystem::delete(ctx, &client, zone, name, network.as_deref(), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FilesystemSpec>) -> Result<Option<Value>, CloudError> {
        let (ctx, census) = (step.ctx, step.census);
        let (zone, name) = zone_and_name(state);
        let client = api::connect(ctx).await?;
        match filesystem::observe(ctx, &client, zone, name, None, census).await? {
            Some(live) => Ok(Some(refreshed(state, &live))),
            // Only the reserved range is left (a create that failed part-way): still ours to remove.
            None if filesystem::range_exists(ctx, &client, name, census).await == Some(true) => {
                Ok(Some(shared::with_missing(state, |k| k != "google_lustre_instance")))
            }
            None => Ok(None),
        }
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((zone, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not a Google Cloud filesystem id: give \"gcp/<zone>/<name>\", e.g. \"gcp/us-central1-a/scratch\"."
            )));
        };
        let ctx = step.ctx;
        let client = api::connect(ctx).await.map_err(ImportError::failed)?;
        let live = match filesystem::observe(ctx, &client, zone, name, None, step.census).await.map_err(ImportError::failed)? {
            Some(live) => live,
            None => return Err(ImportError::failed(format!("no Managed Lustre instance {name} in {zone}"))),
        };
        let region = region_of(zone);
        let described = fabric::parse_description(&live.instance.description).unwrap_or_default();
        let Some(fabric_name) = described.get("fabric").cloned() else {
            return Err(ImportError::failed("the instance's description does not name its fabric (it was not made by this provider)"));
        };
        let found = fabric::observe(ctx, &client, &fabric_name, region, &Census::reading()).await.map_err(ImportError::failed)?;
        let d = found.description().unwrap_or_default();
        let fabric_ref = fabric::fabric_ref(zone, region, &fabric_name, &d);
        let defaults = api::labels(step.default_tags);
        let mut config = filesystem::imported_config(zone, &live, fabric_ref, &defaults);
        if let Some(cluster_name) = live.instance.labels.get("hpc_cluster") {
            let nodes = cluster::nodes(ctx, &client, zone, cluster_name, &Census::reading()).await.map_err(ImportError::failed)?;
            let per_node =
                d.get("instance_type").and_then(|t| crate::catalog::find_sku(Cloud::Gcp, t)).map_or(0, |s| i64::from(s.gpu_count));
            let workload =
                nodes.first().and_then(|n| cluster::metadata(&n.instance, "hpc-workload")).unwrap_or_else(|| "pretraining".into());
            config = shared::with_attr(
                &config,
                "cluster",
                Value::object([
                    ("id", Value::from(api::resource_id(zone, cluster_name))),
                    ("name", Value::from(cluster_name.as_str())),
                    ("gpus_total", Value::int(nodes.len() as i64 * per_node)),
                    ("workload", Value::from(workload)),
                ]),
            );
        }
        let assigned = BTreeMap::from([
            ("id".to_owned(), Value::from(id)),
            ("mount_target".to_owned(), Value::from(live.mount_point())),
            ("mount_command".to_owned(), Value::from(live.mount_command())),
        ]);
        Ok(Imported::new(config, assigned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::{answers, check, hostile_str};

    fn lustre() -> Json {
        json!({"name": "projects/p/locations/z/instances/scratch", "capacityGib": "36000", "perUnitStorageThroughput": "500",
               "mountPoint": "10.0.0.2@tcp:/scratch", "filesystem": "scratch", "network": "projects/p/global/networks/n",
               "labels": {"hpc_owner": "o-1", "team": "ml"}, "description": "hpc:fabric=lib;import=gs://b/x", "state": "ACTIVE"})
    }

    /// Managed Lustre's `capacityGib` and `perUnitStorageThroughput` are int64: a product past i64
    /// overflowed (a refresh panicked in a debug build).
    #[test]
    fn a_capacity_too_large_to_count_is_no_overflow() {
        let mut i = lustre();
        i["capacityGib"] = json!(i64::MAX.to_string());
        let live = FsLive { instance: serde_json::from_value(i).unwrap(), address: true, peered: true };
        assert_eq!(refreshed(&Value::Null, &live).get("throughput_mbps"), &Value::int(i64::MAX / 1024));
    }

    #[test]
    fn any_lustre_or_service_networking_answer_reads_without_a_panic() {
        let op = json!({"name": "operations/x", "done": false});
        let connections = json!({"connections": [{"reservedPeeringRanges": ["a-psa", "b-psa"]}]});
        check("psa", answers(vec![op, connections]), |j| {
            let _ = (psa_pending(&j, "creating x"), connection_ranges(&j));
            Ok(())
        });
        check("refreshed", (answers(vec![lustre()]), hostile_str()), |(i, uri)| {
            let _ = gcs_uri(&uri);
            // What the client crate cannot read as an Instance never reaches us.
            let Ok(instance) = serde_json::from_value::<Instance>(i) else { return Ok(()) };
            let live = FsLive { instance, address: false, peered: true };
            let _ = (refreshed(&Value::Null, &live), imported_config("z", &live, Value::Null, &BTreeMap::new()));
            Ok(())
        });
    }

    /// The private-service-access read (Resource Manager's project number, then Service Networking's
    /// connections, both through `api::rest`) fed answers mutated from the emulator's (#50): the ranges
    /// or an error naming the call, never a panic or a hang.
    #[test]
    fn any_answer_to_the_private_service_access_read_gives_its_ranges_or_an_error_naming_the_call() {
        use crate::fuzz::{check_served, names_the_call, recorded, served};
        let routes = vec![
            ("/v3/projects/p ", served(recorded("gcp-project.json"), &[])),
            ("/connections?", served(recorded("gcp-connections.json"), &[])),
        ];
        let calls = ["reading the number of project p", "calling Service Networking"];
        let made: std::sync::Mutex<Option<Gcp>> = Default::default();
        check_served("gcp psa_ranges", routes, |base| {
            let (made, cached) = (&made, made.lock().unwrap().as_ref().map(Gcp::fresh));
            async move {
                let gcp = match cached {
                    Some(gcp) => gcp,
                    None => {
                        let gcp = api::local(&base).await;
                        made.lock().unwrap().insert(gcp).fresh()
                    }
                };
                let ctx = crate::framework::Context::new(tokio_util::sync::CancellationToken::new(), None);
                match psa_ranges(&ctx, &gcp, "projects/p/global/networks/n").await {
                    Ok(_) => Ok(()),
                    Err(e) => names_the_call(&e.message, &calls),
                }
            }
        });
    }

    /// Found by the fuzz above: an error answer that was a whole list (or a proxy's page) was quoted whole
    /// in the error.
    #[test]
    fn an_error_quotes_at_most_a_thousand_bytes_of_the_answer() {
        let connections = crate::fuzz::recorded("gcp-connections.json");
        let many = json!({"connections": vec![connections["connections"][0].clone(); 100]}).to_string();
        let e = api::answer(409, &many, "calling Service Networking").expect_err("a 409 is an error");
        assert!(e.message.starts_with("calling Service Networking: ") && e.message.len() < 1200, "{} bytes: {e}", e.message.len());
    }

    #[test]
    fn cloud_storage_paths_end_with_a_slash() {
        assert_eq!(super::gcs_uri("gs://ml-datasets/tokenized"), "gs://ml-datasets/tokenized/");
        assert_eq!(super::gcs_uri("gs://ml-datasets/tokenized/"), "gs://ml-datasets/tokenized/");
        assert_eq!(super::gcs_uri("gs://ml-datasets"), "gs://ml-datasets");
    }
}
