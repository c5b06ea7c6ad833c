//! What every cloud's backend shares, written once: the waiter (backoff, deadline, cancellation, and its
//! progress lines at info: node counts when they change, otherwise one line per 20 s), the
//! timeouts from a `timeouts` block, the `<cloud>/<location>/<name>` ids, the user's tags with
//! each cloud's own reserved keys left out, and the edits a refresh makes to a state (pieces marked
//! missing, node lists brought to what exists). No cloud's vocabulary here.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::catalog::Cloud;
use crate::clouds::CloudError;
use crate::framework::{Context, Value};

/// How a waiter polls: from `first`, doubling up to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The one schedule every wait uses: 200 ms doubling to 5 s.
    pub const STANDARD: Backoff = Backoff { first: Duration::from_millis(200), max: Duration::from_secs(5) };

    /// The delay after `delay`.
    pub fn next(self, delay: Duration) -> Duration {
        (delay * 2).min(self.max)
    }
}

/// The longest pause a cloud's own hint (ARM's `Retry-After` on an operation monitor) can ask of a poll.
pub const LONGEST_HINT: Duration = Duration::from_secs(10);

/// What a timed-out wait says; `doing` is the wait in words (`waiting for nodes to run`, `creating x`).
pub fn timed_out(timeout: Duration, doing: &str) -> String {
    format!(
        "timed out after {} while {doing}; raise the timeout in the resource's timeouts block if the cloud is slow",
        crate::clock::format_duration(timeout)
    )
}

/// What a wait the CLI interrupted says.
pub fn interrupted(doing: &str) -> String {
    format!("interrupted while {doing} (the CLI asked the provider to stop)")
}

/// The one poll loop of every long wait (an operation, a work request, a lifecycle state, a monitor, a
/// dependant still going away): the deadline, the schedule and StopProvider, kept once. A wait checks, and
/// when it must go on calls [`Poll::pause`], which sleeps until the next check or ends the wait with a
/// typed timed-out or interrupted error. The check itself runs inside [`Poll::check`], so StopProvider
/// abandons a call in flight too.
pub struct Poll<'a> {
    ctx: &'a Context,
    doing: String,
    timeout: Duration,
    started: tokio::time::Instant,
    deadline: tokio::time::Instant,
    delay: Duration,
    schedule: Backoff,
    progress: Progress,
}

impl<'a> Poll<'a> {
    /// A wait of at most `timeout` on [`Backoff::STANDARD`]; `doing` names it in errors.
    pub fn new(ctx: &'a Context, doing: impl Into<String>, timeout: Duration) -> Poll<'a> {
        Poll::on(ctx, doing, timeout, Backoff::STANDARD)
    }

    /// A wait on a schedule of its own (a fixed interval is `first == max`).
    pub fn on(ctx: &'a Context, doing: impl Into<String>, timeout: Duration, schedule: Backoff) -> Poll<'a> {
        let started = tokio::time::Instant::now();
        let (doing, deadline, progress) = (doing.into(), started + timeout, Progress::new());
        Poll { ctx, doing, timeout, started, deadline, delay: schedule.first, schedule, progress }
    }

    /// Runs one check, abandoned when StopProvider fires.
    pub async fn check<T, E: From<CloudError>>(&self, check: impl std::future::Future<Output = Result<T, E>>) -> Result<T, E> {
        tokio::select! {
            _ = self.ctx.cancelled() => Err(self.interrupted().into()),
            c = check => c,
        }
    }

    /// Sleeps until the next check: the cloud's `hint` when it gave one (at most [`LONGEST_HINT`]), else the
    /// schedule's next delay. A pause that would pass the deadline ends the wait as timed out.
    /// A wait that goes on past [`PROGRESS_EVERY`] says so at info, once per that interval: `still waiting
    /// for ...: 40 s so far (the timeout is 60 min)`.
    pub async fn pause(&mut self, hint: Option<Duration>) -> Result<(), CloudError> {
        let (doing, started, timeout) = (&self.doing, self.started, self.timeout);
        self.progress.tick(|| {
            let elapsed = started.elapsed().as_secs();
            let line = format!("still {doing}: {elapsed} s so far (the timeout is {})", minutes(timeout));
            (line, elapsed)
        });
        let wait = hint.map_or(self.delay, |h| h.min(LONGEST_HINT));
        if tokio::time::Instant::now() + wait > self.deadline {
            return Err(CloudError::timed_out(timed_out(self.timeout, &self.doing)));
        }
        tokio::select! {
            _ = self.ctx.cancelled() => return Err(self.interrupted()),
            _ = tokio::time::sleep(wait) => {}
        }
        self.delay = self.schedule.next(self.delay);
        Ok(())
    }

    fn interrupted(&self) -> CloudError {
        CloudError::interrupted(interrupted(&self.doing))
    }
}

/// How often a long wait says it is still going when nothing it counts has changed.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(20);

/// `90 s`, `12 min`, `2 h 5 min`.
fn minutes(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// How far a cluster's nodes have come, for its progress line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeCounts {
    /// Nodes running.
    pub running: u32,
    /// Nodes the cluster is to have.
    pub total: u32,
    /// Nodes launched and not yet running (provisioning, staging, booting).
    pub starting: u32,
    /// Nodes the cloud had no capacity for yet.
    pub pending_capacity: u32,
}

impl NodeCounts {
    /// `train: 12/64 nodes running, 49 starting, 3 pending capacity`.
    pub fn line(&self, cluster: &str) -> String {
        let mut line = format!("{cluster}: {}/{} nodes running", self.running, self.total);
        if self.starting > 0 {
            line.push_str(&format!(", {} starting", self.starting));
        }
        if self.pending_capacity > 0 {
            line.push_str(&format!(", {} pending capacity", self.pending_capacity));
        }
        line
    }
}

/// The progress lines of one long wait, at info: a line when what it counts changes, and otherwise at most
/// one per [`PROGRESS_EVERY`], never one per poll, so that a two-hour apply reads as a few hundred lines.
/// Nothing is formatted unless info is on.
#[derive(Default)]
pub struct Progress {
    last: std::sync::Mutex<Option<(String, tokio::time::Instant)>>,
}

impl Progress {
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Logs `state` when it differs from the last state logged, or when [`PROGRESS_EVERY`] has passed.
    fn report(&self, state: String, write: impl FnOnce(&str)) {
        let now = tokio::time::Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.as_ref().is_none_or(|(was, at)| *was != state || now.duration_since(*at) >= PROGRESS_EVERY);
        if due {
            write(&state);
            *last = Some((state, now));
        }
    }

    /// A cluster's node counts: logged when they change, else every [`PROGRESS_EVERY`].
    pub fn nodes(&self, cluster: &str, counts: NodeCounts) {
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        self.report(counts.line(cluster), |line| {
            let NodeCounts { running, total, starting, pending_capacity } = counts;
            tracing::info!(cluster, running, total, starting, pending_capacity, "{line}");
        });
    }

    /// A wait with nothing to count: `line` (with the seconds waited) once per [`PROGRESS_EVERY`], the first
    /// after that long, so that short waits say nothing.
    pub fn tick(&self, line: impl FnOnce() -> (String, u64)) {
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        let now = tokio::time::Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let since = last.get_or_insert_with(|| (String::new(), now)).1;
        if now.duration_since(since) >= PROGRESS_EVERY {
            let (line, waited_s) = line();
            tracing::info!(waited_s, "{line}");
            *last = Some((String::new(), now));
        }
    }
}

/// Runs `work` (a client's own poller, say) for at most `timeout`, abandoned when StopProvider fires.
pub async fn within<T>(
    ctx: &Context,
    doing: &str,
    timeout: Duration,
    work: impl std::future::Future<Output = Result<T, CloudError>>,
) -> Result<T, CloudError> {
    tokio::select! {
        _ = ctx.cancelled() => Err(CloudError::interrupted(interrupted(doing))),
        out = tokio::time::timeout(timeout, work) => out.unwrap_or_else(|_| Err(CloudError::timed_out(timed_out(timeout, doing)))),
    }
}

/// Polls `check` until it yields a value, on [`Backoff::STANDARD`], until `timeout` passes or StopProvider
/// cancels. `check` returns `Ok(None)` to keep waiting and `Err` for a terminal failure; `what` is what is
/// waited for (`nodes to run`).
pub async fn wait_for<T, E, F, Fut>(ctx: &Context, what: &str, timeout: Duration, mut check: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, E>>,
    E: From<CloudError>,
{
    let mut poll = Poll::new(ctx, format!("waiting for {what}"), timeout);
    loop {
        if let Some(done) = poll.check(check()).await? {
            return Ok(done);
        }
        poll.pause(None).await?;
    }
}

/// A resource's timeout for `op` from its `timeouts` block, or `default`.
pub fn timeout(state: &Value, op: &str, default: Duration) -> Duration {
    // Plans refuse more than a day; a state written otherwise is held to it too, so no deadline overflows.
    let asked = state.get("timeouts").get(op).as_str().and_then(crate::clock::parse_duration);
    asked.map_or(default, |s| Duration::from_secs(s.min(crate::clock::LONGEST_TIMEOUT_SECS)))
}

/// The ids the resources use: `<cloud>/<location...>/<name>`; the location says which API to ask.
pub fn resource_id(cloud: Cloud, location: &[&str], name: &str) -> String {
    let mut parts = vec![cloud.as_str()];
    parts.extend_from_slice(location);
    parts.push(name);
    parts.join("/")
}

/// The `N` parts after `<cloud>/` of an id written by [`resource_id`], each non-empty, or `None`.
pub fn parse_id<const N: usize>(cloud: Cloud, id: &str) -> Option<[&str; N]> {
    let rest = id.strip_prefix(cloud.as_str())?.strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    let parts: [&str; N] = parts.try_into().ok()?;
    parts.iter().all(|p| !p.is_empty()).then_some(parts)
}

/// Tag keys a cloud or its consoles write themselves, which are never the user's: on AWS the `aws:`
/// prefix and the console's `Name`; elsewhere none beyond the provider's own `hpc:` keys.
pub fn reserved_tag(cloud: Cloud, key: &str) -> bool {
    if key.starts_with("hpc:") {
        return true;
    }
    match cloud {
        Cloud::Aws => key.starts_with("aws:") || key == "Name",
        Cloud::Azure | Cloud::Gcp | Cloud::Oci => false,
    }
}

/// The user's own tags: those on a piece, less the ones this provider or the cloud writes and the
/// provider's defaults.
pub fn user_tags(cloud: Cloud, live: &BTreeMap<String, String>, defaults: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    live.iter().filter(|(k, v)| !reserved_tag(cloud, k) && defaults.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The `tags` attribute of an imported object: the user's own tags, null when there are none.
pub fn imported_tags(cloud: Cloud, live: &BTreeMap<String, String>, defaults: &BTreeMap<String, String>) -> Value {
    let user = user_tags(cloud, live, defaults);
    if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }
}

/// Keys of the tags a piece had before a change and no longer gets: removed from the cloud.
pub fn stale_tags(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    before.keys().filter(|k| !after.contains_key(*k)).cloned().collect()
}

/// The page links a list has followed (ARM's `nextLink`, OCI's `opc-next-page`): a link given again (a page
/// pointing at itself or at an earlier page) would page for ever, and the list fails instead; so does one
/// past [`Pages::MOST`] pages.
pub struct Pages {
    cloud: &'static str,
    link: &'static str,
    seen: std::collections::BTreeSet<String>,
}

impl Pages {
    /// The links a list follows at most: with its first page, 101 pages. At 1,000 items a page that is more
    /// than a cluster's nodes can be (100,000); where a cloud gives fewer a page (Compute Engine at most
    /// 500), the cloud's rules hold `node_count` to [`Pages::most_items`] so that a refresh can list it.
    pub const MOST: usize = 100;

    /// The most items a list of `per_page` items a page can hold: its first page and [`Pages::MOST`] more.
    pub const fn most_items(per_page: usize) -> usize {
        (Self::MOST + 1) * per_page
    }

    /// The pages of one list; `cloud` and `link` (`nextLink`) name them in errors.
    pub fn new(cloud: &'static str, link: &'static str) -> Pages {
        Pages { cloud, link, seen: Default::default() }
    }

    /// The next link to follow, `None` at the end; an error for a link seen before or one page too many.
    pub fn next(&mut self, link: Option<String>, what: &str) -> Result<Option<String>, CloudError> {
        let Some(link) = link else { return Ok(None) };
        if self.seen.len() >= Self::MOST {
            return Err(CloudError::other(format!("{what}: {} gave more than {} pages", self.cloud, Self::MOST)));
        }
        if !self.seen.insert(link.clone()) {
            return Err(CloudError::other(format!("{what}: {} gave the page {link} again (its {} loops)", self.cloud, self.link)));
        }
        Ok(Some(link))
    }
}

/// A filesystem's throughput in MB/s from its capacity and its throughput per `unit` of capacity (1024 GiB
/// a TiB, 1000 GB a TB), as the cloud reports them. A cloud's figures are not trusted to be in range: a
/// product past i64 is i64's end, not an overflow.
pub fn throughput_mbps(capacity: i64, per_unit: i64, unit: i64) -> i64 {
    capacity.saturating_mul(per_unit) / unit
}

/// A string map attribute as a BTreeMap.
pub fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_map().map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()).unwrap_or_default()
}

// ------------------------------------------------------------------------------------ state edits

/// What a refresh writes into a piece that no longer exists; the plan then shows it going away again.
pub const MISSING: &str = "deleted outside; the next apply recreates it";

/// One piece marked missing.
pub fn marked_missing(piece: &Value) -> Value {
    let mut piece = piece.as_map().cloned().unwrap_or_default();
    if let Some(Value::Map(settings)) = piece.get_mut("settings") {
        settings.insert("missing".into(), Value::from(MISSING));
    }
    Value::Map(piece)
}

/// The expansion with the pieces whose kind `exists` rejects marked `missing`: what a refresh found.
/// Marking rather than dropping keeps the list aligned, so the plan shows exactly the missing pieces.
pub fn mark_missing(expansion: &Value, exists: impl Fn(&str) -> bool) -> Value {
    let Some(items) = expansion.as_list() else { return expansion.clone() };
    Value::list(items.iter().map(|p| if p.get("kind").as_str().is_none_or(&exists) { p.clone() } else { marked_missing(p) }))
}

/// The expansion with one piece's `count` and settings replaced by what a refresh found.
pub fn patch_piece(expansion: &Value, kind: &str, count: Option<i64>, settings: &[(&str, String)]) -> Value {
    let Some(items) = expansion.as_list() else { return expansion.clone() };
    Value::list(items.iter().map(|p| {
        if p.get("kind").as_str() != Some(kind) {
            return p.clone();
        }
        let mut piece = p.as_map().cloned().unwrap_or_default();
        if let Some(n) = count {
            piece.insert("count".into(), Value::int(n));
        }
        if let Some(Value::Map(map)) = piece.get_mut("settings") {
            for (k, v) in settings {
                if map.contains_key(*k) {
                    map.insert((*k).to_owned(), Value::from(v.as_str()));
                }
            }
        }
        Value::Map(piece)
    }))
}

/// A state with one attribute replaced.
pub fn with_attr(state: &Value, name: &str, value: Value) -> Value {
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert(name.into(), value);
    Value::Map(out)
}

/// A state with its expansion's pieces whose kind `exists` rejects marked missing.
pub fn with_missing(state: &Value, exists: impl Fn(&str) -> bool) -> Value {
    with_attr(state, "expansion", mark_missing(state.get("expansion"), exists))
}

/// A live node as the cluster's `nodes` attribute shows it: its name, the cloud's id for it, and the
/// private address of its primary interface (what hostfiles and job launchers use).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAddress {
    pub name: String,
    pub id: String,
    pub private_ip: Option<String>,
    /// The node configuration revision it was made with (its `hpc:revision` tag, `hpc-revision` label on
    /// Google Cloud); `None` for a node an earlier release made, which runs the state's revision.
    pub revision: Option<String>,
    /// Why the cloud holds it unhealthy (a failed status check, a scheduled retirement or maintenance, a
    /// state other than running), in a sentence with the time the cloud gave; `None` when healthy. A
    /// day-2 repair acts on it.
    pub health: Option<String>,
    /// Maintenance the cloud has scheduled on it and carries out itself in its window, with the window
    /// (AWS: a scheduled instance or system reboot, system maintenance); `None` when there is none. Not a
    /// fault: it is reported (`scheduled_maintenance`, a plan warning) and no repair acts on it.
    pub maintenance: Option<String>,
    /// The verdict its boot-time self-check published through the cloud (`hpc:selfcheck` tag, `hpc-selfcheck`
    /// label on Google Cloud): `ok` or `fail-...`; `None` before it reports (or without the self-check).
    pub selfcheck: Option<String>,
}

/// The tag (label on Google Cloud) a node's self-check publishes its verdict in.
pub const SELFCHECK_TAG: &str = "hpc:selfcheck";
pub const SELFCHECK_LABEL: &str = "hpc-selfcheck";
/// The tag (label on Google Cloud) that records the node configuration revision a node was made with.
pub const REVISION_TAG: &str = "hpc:revision";
pub const REVISION_LABEL: &str = "hpc-revision";

/// Why a self-check verdict makes a node unhealthy, in words: `fail-gpus-7-of-8` is "self-check: 7 of 8
/// GPUs". The verdict is label-safe (lowercase letters, digits, `-`) so it fits every cloud's channel.
pub fn selfcheck_reason(verdict: &str) -> Option<String> {
    let v = verdict.trim();
    if v.is_empty() || v == "ok" || v == "pending" {
        return None;
    }
    let what = v.strip_prefix("fail-").unwrap_or(v);
    let parts: Vec<&str> = what.split('-').collect();
    let words = match parts.as_slice() {
        ["gpus", n, "of", m] => format!("{n} of {m} GPUs"),
        ["rdma", n, "of", m] => format!("{n} of {m} RDMA devices"),
        ["nvlink", n, "of", m] => format!("NVLink fabric completed on {n} of {m} GPUs"),
        ["nvlink", "domain"] => "GPUs not in one NVLink domain".to_owned(),
        ["imex"] => "nvidia-imex not active".to_owned(),
        ["imex", n, "of", m] => format!("IMEX domain has {n} of {m} nodes ready"),
        ["libfabric", n, "of", m] => format!("libfabric opens {n} of {m} EFA devices"),
        ["error"] | ["error", ..] => "the check could not finish".to_owned(),
        _ => what.replace('-', " "),
    };
    Some(format!("self-check: {words}"))
}

/// Why a node is unhealthy: what the cloud says first, then what the node said of itself.
pub fn unhealthy_reason(node: &NodeAddress) -> Option<String> {
    node.health.clone().or_else(|| node.selfcheck.as_deref().and_then(selfcheck_reason))
}

/// The `nodes` attribute.
pub fn nodes_value(nodes: &[NodeAddress]) -> Value {
    Value::list(nodes.iter().map(|n| {
        Value::object([
            ("name", Value::from(n.name.as_str())),
            ("id", Value::from(n.id.as_str())),
            ("private_ip", n.private_ip.as_deref().map_or(Value::Null, Value::from)),
        ])
    }))
}

/// Node names written compactly when they run from 0 without gaps, else listed.
pub fn names_setting(cluster: &str, names: &[String]) -> String {
    if crate::nodes::are_first_nodes(cluster, names) {
        crate::nodes::first_nodes_range(cluster, names.len() as u32)
    } else {
        names.join(", ")
    }
}

/// A cluster state brought to the nodes that exist: count, names, addresses and GPUs as found, and the
/// node piece (`node_piece`) of the expansion too.
pub fn with_nodes(state: &Value, cloud: Cloud, node_piece: &str, nodes: &[NodeAddress]) -> Value {
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let name = state.get("name").as_str().unwrap_or_default();
    let per_node =
        state.get("instance_type").as_str().and_then(|t| crate::catalog::find_sku(cloud, t)).map_or(0, |s| i64::from(s.gpu_count));
    let mut out = state.as_map().cloned().unwrap_or_default();
    out.insert("node_count".into(), Value::int(names.len() as i64));
    out.insert("gpus_total".into(), Value::int(names.len() as i64 * per_node));
    out.insert("node_names".into(), Value::list(names.iter().map(|n| Value::from(n.as_str()))));
    out.insert("nodes".into(), nodes_value(nodes));
    let expansion = patch_piece(state.get("expansion"), node_piece, Some(names.len() as i64), &[("names", names_setting(name, &names))]);
    out.insert("expansion".into(), expansion);
    out.extend(node_day2(state, nodes));
    Value::Map(out)
}

/// `unhealthy_nodes`, `scheduled_maintenance`, `selfcheck` and `node_revisions` of the nodes found. A node without a revision
/// (made by an earlier release) runs the one the state says it runs, or the state's `revision`.
pub fn node_day2(state: &Value, nodes: &[NodeAddress]) -> BTreeMap<String, Value> {
    let known = state.get("node_revisions");
    let fallback = state.get("revision").as_str().map(str::to_owned);
    let mut unhealthy = BTreeMap::new();
    let mut maintenance = BTreeMap::new();
    let mut selfcheck = BTreeMap::new();
    let mut revisions = BTreeMap::new();
    for n in nodes {
        if let Some(why) = unhealthy_reason(n) {
            unhealthy.insert(n.name.clone(), Value::from(why));
        }
        if let Some(window) = &n.maintenance {
            maintenance.insert(n.name.clone(), Value::from(window.as_str()));
        }
        if let Some(v) = &n.selfcheck {
            selfcheck.insert(n.name.clone(), Value::from(v.as_str()));
        }
        let revision = n.revision.clone().or_else(|| known.get(&n.name).as_str().map(str::to_owned)).or_else(|| fallback.clone());
        if let Some(r) = revision {
            revisions.insert(n.name.clone(), Value::from(r));
        }
    }
    BTreeMap::from([
        ("unhealthy_nodes".to_owned(), Value::Map(unhealthy)),
        ("scheduled_maintenance".to_owned(), Value::Map(maintenance)),
        ("selfcheck".to_owned(), Value::Map(selfcheck)),
        ("node_revisions".to_owned(), Value::Map(revisions)),
    ])
}

/// The hosts of a Slurm cluster state: its controllers, then its login nodes, by host name.
pub fn slurm_hosts(state: &Value) -> (Vec<String>, Vec<String>) {
    let name = state.get("name").as_str().unwrap_or_default();
    let backup = state.get("backup_controller").as_bool() == Some(true);
    let controllers = (0..if backup { 2 } else { 1 }).map(|i| crate::nodes::controller_name(name, i)).collect();
    let logins = state.get("login_nodes").as_number().and_then(|n| n.as_i64()).map_or(1, |n| n.max(0) as u32);
    (controllers, (0..logins).map(|i| crate::nodes::login_name(name, i)).collect())
}

/// A Slurm cluster's hosts as the cloud shows them: the address of each, and the configuration revision
/// its metadata carries.
pub struct SlurmHostsLive<'a> {
    pub address: &'a dyn Fn(&str) -> Option<String>,
    /// None: the host does not exist; Some(None): it carries no configuration.
    pub revision: &'a dyn Fn(&str) -> Option<Option<String>>,
}

/// A Slurm cluster's state brought to what exists: `login_addresses` (each login node's address, in order)
/// and `login_command` (to the first login node, else the controller, as `user`), `config_revision` (the
/// state's while every host carries it; else the other one found, `none` for a host carrying none, so the
/// next plan writes the configuration again), and the expansion's pieces `exists(kind, name)` rejects
/// marked missing, so the next plan makes them again.
pub fn slurm_state(state: &Value, user: &str, exists: impl Fn(&str, &str) -> bool, live: SlurmHostsLive<'_>) -> Value {
    let address = live.address;
    let (controllers, logins) = slurm_hosts(state);
    let recorded = state.get("config_revision").as_str().unwrap_or_default().to_owned();
    let other = controllers
        .iter()
        .chain(&logins)
        .filter_map(|h| (live.revision)(h))
        .map(|r| r.unwrap_or_else(|| "none".to_owned()))
        .find(|r| *r != recorded);
    let addresses: Vec<Option<String>> = logins.iter().map(|h| address(h)).collect();
    let first = addresses.iter().flatten().next().cloned().or_else(|| controllers.first().and_then(|c| address(c)));
    let expansion = match state.get("expansion").as_list() {
        Some(items) => Value::list(items.iter().map(|p| {
            let (kind, name) = (p.get("kind").as_str().unwrap_or_default(), p.get("name").as_str().unwrap_or_default());
            if exists(kind, name) { p.clone() } else { marked_missing(p) }
        })),
        None => state.get("expansion").clone(),
    };
    let mut out = with_attr(state, "expansion", expansion);
    out = with_attr(&out, "login_addresses", Value::list(addresses.into_iter().map(|a| a.map_or(Value::Null, Value::from))));
    if let Some(r) = other
        && !state.get("config_revision").is_null()
    {
        out = with_attr(&out, "config_revision", Value::from(r));
    }
    with_attr(&out, "login_command", first.map_or(Value::Null, |a| Value::from(super::slurm::login_command(user, &a))))
}

/// A controller or login node of a Slurm cluster, as an import finds it.
pub struct SlurmHostFound {
    pub host: String,
    pub instance_type: String,
    /// Its tags (Google Cloud: its labels).
    pub tags: BTreeMap<String, String>,
    /// The SSH public key it lets in, where the cloud gives it back with the host.
    pub ssh_public_key: Option<String>,
}

/// What an import of Slurm cluster `name` rebuilds from its hosts (found by `hpc:slurm`, the census's only)
/// and the configuration its controller's metadata carries (`payload`, [`super::slurm::slurm_config`]'s): the
/// version, the controllers and login nodes with their types, the state location, the health check interval,
/// the rendered files with their revision, the user's tags, the fabric's name (its `hpc:fabric` tag) and
/// `region`. The rest of the fabric reference and the partitions are the configuration's (the first plan
/// fills them in place; the hosts are not made again), and so are the image and the SSH key, which only a
/// host made again would use.
pub fn slurm_imported(
    cloud: Cloud,
    id: &str,
    region: &str,
    name: &str,
    hosts: &[SlurmHostFound],
    payload: Option<&str>,
    default_tags: &BTreeMap<String, String>,
) -> Result<crate::clouds::backend::Imported, crate::clouds::backend::ImportError> {
    use crate::clouds::backend::{ImportError, Imported};
    let failed = |why: String| ImportError::failed(CloudError::other(why));
    let controller = crate::nodes::controller_name(name, 0);
    let Some(primary) = hosts.iter().find(|h| h.host == controller) else {
        return Err(failed(format!("no Slurm cluster {name:?} here: no instance {controller} tagged hpc:slurm = {name}")));
    };
    let Some((revision, files)) = payload.and_then(super::slurm::config_of_payload) else {
        return Err(failed(format!(
            "{controller} carries no Slurm configuration this provider wrote (its metadata has none, or one it cannot read)"
        )));
    };
    let conf = files.get("slurm.conf").cloned().unwrap_or_default();
    let setting = |key: &str| conf.lines().find_map(|l| l.strip_prefix(&format!("{key}="))).map(str::to_owned);
    let version = conf
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# slurm.conf for Slurm "))
        .and_then(|l| l.split(',').next())
        .filter(|v| crate::catalog::slurm::find(v).is_some())
        .ok_or_else(|| failed(format!("{controller}'s slurm.conf does not say a Slurm version this provider writes for")))?;
    let addresses: Vec<String> = conf
        .lines()
        .filter_map(|l| l.strip_prefix("SlurmctldHost="))
        .filter_map(|h| h.split_once('(').map(|(_, a)| a.trim_end_matches(')').to_owned()))
        .collect();
    let logins: Vec<&SlurmHostFound> = hosts.iter().filter(|h| h.host.starts_with(&format!("{name}-login"))).collect();
    let backup = hosts.iter().any(|h| h.host == crate::nodes::controller_name(name, 1));
    let text = |f: &str| files.get(f).map_or(Value::Null, |t| Value::from(t.as_str()));
    let plugin = match setting("TopologyPlugin").as_deref() {
        Some("topology/tree") => "topology/tree",
        Some("topology/block") => "topology/block",
        _ if files.contains_key("topology.yaml") => "topology.yaml",
        _ => "none",
    };
    let control_subnet = addresses.first().and_then(|a| a.parse::<std::net::Ipv4Addr>().ok()).map(|a| {
        let base = u32::from(a) & !0xf;
        format!("{}/28", std::net::Ipv4Addr::from(base))
    });
    let interval = setting("HealthCheckInterval").and_then(|v| v.parse::<i64>().ok());
    let fabric = primary.tags.get("hpc:fabric").cloned().unwrap_or_default();
    let config = Value::object([
        ("name", Value::from(name)),
        ("fabric", Value::object([("name", Value::from(fabric)), ("cloud", Value::from(cloud.as_str())), ("region", Value::from(region))])),
        ("slurm_version", Value::from(version)),
        ("controller_instance_type", Value::from(primary.instance_type.as_str())),
        ("backup_controller", if backup { Value::from(true) } else { Value::Null }),
        ("state_save_location", setting("StateSaveLocation").map_or(Value::Null, Value::from)),
        ("login_instance_type", Value::from(logins.first().map_or(primary.instance_type.as_str(), |l| l.instance_type.as_str()))),
        ("login_nodes", Value::int(logins.len() as i64)),
        ("topology", Value::from("auto")),
        ("health_check_interval", interval.map_or(Value::Null, Value::int)),
        ("accounting", if files.contains_key("slurmdbd.conf") { Value::from(true) } else { Value::Null }),
        ("ssh_public_key", Value::from(primary.ssh_public_key.clone())),
        ("tags", imported_tags(cloud, &primary.tags, default_tags)),
    ]);
    let assigned = BTreeMap::from([
        ("id".to_owned(), Value::from(id)),
        ("control_subnet".to_owned(), control_subnet.map_or(Value::Null, Value::from)),
        ("controller_address".to_owned(), addresses.first().map_or(Value::Null, |a| Value::from(a.as_str()))),
        ("backup_controller_address".to_owned(), addresses.get(1).map_or(Value::Null, |a| Value::from(a.as_str()))),
        ("slurm_conf".to_owned(), Value::from(conf.as_str())),
        ("gres_conf".to_owned(), text("gres.conf")),
        ("cgroup_conf".to_owned(), text("cgroup.conf")),
        ("slurmdbd_conf".to_owned(), text("slurmdbd.conf")),
        ("topology_conf".to_owned(), text("topology.conf")),
        ("topology_yaml".to_owned(), text("topology.yaml")),
        ("topology_plugin".to_owned(), Value::from(plugin)),
        ("config_revision".to_owned(), Value::from(revision)),
        ("healthcheck_program".to_owned(), Value::from(super::slurm::healthcheck_program())),
        ("nccl_tests".to_owned(), Value::Map(BTreeMap::new())),
        ("expansion".to_owned(), Value::list([])),
    ]);
    Ok(Imported::new(config, assigned))
}

/// The most of a cloud's answer an error message quotes: any error body a cloud documents fits, a list
/// or a proxy's page answered in its place does not fill a diagnostic.
pub const QUOTED: usize = 1000;

/// `text` as an error quotes it: whole up to [`QUOTED`] bytes, else its start (cut at a character) and
/// how long it was.
pub fn quoted(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= QUOTED {
        return text.into();
    }
    let mut cut = QUOTED;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes in all)", &text[..cut], text.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_holds_most_items_and_not_one_page_more() {
        // Pages of 2 items: the first page is read without a link, each further one after its link.
        let per_page = 2;
        let mut pages = Pages::new("Compute Engine", "nextPageToken");
        let mut listed = per_page;
        while let Some(_next) = pages.next(Some(format!("p{listed}")), "x").ok().flatten() {
            listed += per_page;
        }
        assert_eq!(listed, Pages::most_items(per_page), "a page past the last one followed is refused");
        assert_eq!(Pages::most_items(500), 50_500);
    }

    #[test]
    fn a_long_answer_is_quoted_by_its_start_cut_at_a_character() {
        assert_eq!(quoted("short"), "short");
        let long = "é".repeat(QUOTED);
        let q = quoted(&long);
        assert!(q.starts_with(&"é".repeat(QUOTED / 2)) && q.ends_with(&format!("... ({} bytes in all)", 2 * QUOTED)), "{q}");
        assert!(q.len() < QUOTED + 40);
    }

    #[tokio::test(start_paused = true)]
    async fn progress_is_logged_when_the_counts_change_or_every_twenty_seconds_never_per_poll() {
        let (logged, _guard) = crate::clouds::retry::capture_logs();
        let progress = Progress::new();
        let counts = |running, starting, pending_capacity| NodeCounts { running, total: 64, starting, pending_capacity };
        progress.nodes("train", counts(0, 61, 3));
        for _ in 0..10 {
            tokio::time::advance(Duration::from_secs(1)).await;
            progress.nodes("train", counts(0, 61, 3));
        }
        progress.nodes("train", counts(12, 49, 3));
        tokio::time::advance(PROGRESS_EVERY).await;
        progress.nodes("train", counts(12, 49, 3));
        let text = String::from_utf8(logged.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "one line at the start, one at the change, one after 20 s unchanged:\n{text}");
        assert!(lines[0].contains("train: 0/64 nodes running, 61 starting, 3 pending capacity"), "{text}");
        assert!(lines[1].contains("INFO") && lines[1].contains("train: 12/64 nodes running, 49 starting, 3 pending capacity"), "{text}");
        assert!(lines[1].contains("running=12") && lines[1].contains("pending_capacity=3"), "{text}");
        assert_eq!(counts(64, 0, 0).line("train"), "train: 64/64 nodes running");
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_wait_says_it_is_still_waiting_every_twenty_seconds() {
        let (logged, _guard) = crate::clouds::retry::capture_logs();
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let mut poll = Poll::on(
            &ctx,
            "waiting for file system fs-1",
            Duration::from_secs(3600),
            Backoff { first: Duration::from_secs(5), max: Duration::from_secs(5) },
        );
        for _ in 0..12 {
            poll.pause(None).await.unwrap();
        }
        let text = String::from_utf8(logged.lock().unwrap().clone()).unwrap();
        // 60 s of polls every 5 s: a line at 20 s and at 40 s, none per poll.
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains("still waiting for file system fs-1: 20 s so far (the timeout is 60 min)"), "{text}");
    }

    #[test]
    fn a_slurm_host_carrying_another_configuration_shows_in_config_revision() {
        let state = Value::object([
            ("name", Value::from("ml")),
            ("login_nodes", Value::int(1)),
            ("config_revision", Value::from("aaaa")),
            ("expansion", Value::list([])),
        ]);
        let address = |_: &str| Some("10.0.255.244".to_owned());
        let read = |revisions: &dyn Fn(&str) -> Option<Option<String>>| {
            slurm_state(&state, "u", |_, _| true, SlurmHostsLive { address: &address, revision: revisions })
                .get("config_revision")
                .as_str()
                .map(str::to_owned)
        };
        // Every host carries the state's: as it was.
        assert_eq!(read(&|_| Some(Some("aaaa".into()))).as_deref(), Some("aaaa"));
        // The login node was given another outside: that one, so the plan writes the configuration again.
        assert_eq!(read(&|h| Some(Some(if h == "ml-login0" { "bbbb" } else { "aaaa" }.into()))).as_deref(), Some("bbbb"));
        // One carries none: `none`.
        assert_eq!(read(&|h| Some((h != "ml-controller").then(|| "aaaa".to_owned()))).as_deref(), Some("none"));
        // A host that does not exist is the expansion's business (made again), not the revision's.
        assert_eq!(read(&|h| (h != "ml-controller").then(|| Some("aaaa".to_owned()))).as_deref(), Some("aaaa"));
    }

    fn ctx() -> Context {
        Context::new(tokio_util::sync::CancellationToken::new(), None)
    }

    #[tokio::test]
    async fn a_wait_ends_when_stop_provider_cancels_it() {
        let c = ctx();
        let token = c.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            token.cancel();
        });
        let started = std::time::Instant::now();
        let out: Result<(), String> = wait_for(&c, "nodes to run", Duration::from_secs(3600), || async { Ok(None) }).await;
        let err = out.unwrap_err();
        assert!(err.contains("interrupted while waiting for nodes to run"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2), "cancellation took {:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_wait_times_out_with_the_timeout_named() {
        let out: Result<(), String> = wait_for(&ctx(), "fs-1 to become AVAILABLE", Duration::from_millis(500), || async { Ok(None) }).await;
        let err = out.unwrap_err();
        assert!(
            err.contains("timed out after 500ms while waiting for fs-1 to become AVAILABLE") && err.contains("timeouts block"),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_follows_the_schedule_or_the_clouds_hint_up_to_ten_seconds() {
        let c = ctx();
        let mut poll = Poll::new(&c, "waiting for x", Duration::from_secs(3600));
        let mut pauses = Vec::new();
        for hint in [None, None, Some(Duration::from_secs(3)), Some(Duration::from_secs(600)), None, None, None, None, None] {
            let before = tokio::time::Instant::now();
            poll.pause(hint).await.unwrap();
            pauses.push(before.elapsed().as_millis());
        }
        // 200 ms doubling to 5 s; a hint replaces one pause (capped) without resetting the schedule.
        assert_eq!(pauses, [200, 400, 3000, 10_000, 3200, 5000, 5000, 5000, 5000]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_ends_before_a_pause_would_pass_its_deadline() {
        let c = ctx();
        let mut poll = Poll::new(&c, "creating vm-1", Duration::from_secs(1));
        poll.pause(None).await.unwrap();
        poll.pause(None).await.unwrap();
        let e = poll.pause(None).await.unwrap_err();
        assert_eq!(e.kind, crate::clouds::ErrorKind::TimedOut);
        assert!(e.message.starts_with("timed out after 1s while creating vm-1"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn work_within_a_timeout_is_abandoned_when_it_runs_out() {
        let out: Result<(), CloudError> = within(&ctx(), "creating fs-1", Duration::from_secs(5), std::future::pending()).await;
        assert_eq!(out.unwrap_err().kind, crate::clouds::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_wait_returns_the_first_answer_and_stops_at_a_terminal_failure() {
        let mut polls = 0;
        let out = wait_for(&ctx(), "x", Duration::from_secs(10), || {
            polls += 1;
            let n = polls;
            async move { Ok::<_, CloudError>((n == 3).then_some(n)) }
        })
        .await;
        assert_eq!(out, Ok(3));
        let failed: Result<(), String> = wait_for(&ctx(), "x", Duration::from_secs(10), || async {
            Err("node went to terminated: Server.InsufficientInstanceCapacity".to_owned())
        })
        .await;
        assert_eq!(failed.unwrap_err(), "node went to terminated: Server.InsufficientInstanceCapacity");
    }

    #[test]
    fn timeouts_come_from_the_timeouts_block() {
        let state = Value::object([("timeouts", Value::object([("create", Value::from("90m"))]))]);
        assert_eq!(timeout(&state, "create", Duration::from_secs(60)), Duration::from_secs(5400));
        assert_eq!(timeout(&state, "delete", Duration::from_secs(60)), Duration::from_secs(60));
        assert_eq!(timeout(&Value::Null, "create", Duration::from_secs(7)), Duration::from_secs(7));
    }

    #[test]
    fn ids_round_trip_on_every_cloud() {
        for cloud in Cloud::ALL {
            let id = resource_id(cloud, &["here"], "train");
            assert_eq!(parse_id::<2>(cloud, &id), Some(["here", "train"]), "{id}");
            assert_eq!(parse_id::<3>(cloud, &id), None);
        }
        assert_eq!(parse_id::<2>(Cloud::Aws, "gcp/us-central1-a/x"), None);
        assert_eq!(parse_id::<2>(Cloud::Aws, "aws//x"), None);
        assert_eq!(parse_id::<2>(Cloud::Aws, "aws/us-east-1/a/b"), None);
    }

    #[test]
    fn only_aws_reserves_the_name_tag() {
        let live: BTreeMap<String, String> = [("Name", "n"), ("hpc:owner", "o"), ("aws:cloudformation:stack", "s"), ("team", "ml")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let kept = |c| user_tags(c, &live, &BTreeMap::new()).into_keys().collect::<Vec<_>>();
        assert_eq!(kept(Cloud::Aws), ["team"]);
        assert_eq!(kept(Cloud::Azure), ["Name", "aws:cloudformation:stack", "team"]);
        assert_eq!(kept(Cloud::Oci), ["Name", "aws:cloudformation:stack", "team"]);
    }

    #[test]
    fn durations_read_as_written() {
        assert_eq!(Backoff::STANDARD.next(Duration::from_secs(4)), Duration::from_secs(5));
    }

    #[test]
    fn node_names_compact_only_without_gaps() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(names_setting("n", &names(&["n-0", "n-1", "n-2"])), "n-0 .. n-2");
        assert_eq!(names_setting("n", &names(&["n-0", "n-2"])), "n-0, n-2");
    }
}
