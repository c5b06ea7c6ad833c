//! Day 2 of a cluster, written once for every cloud: unhealthy nodes repaired by name (`repair`,
//! `max_repairs`) and node configuration changes rolled onto the nodes in batches (`update_strategy`).
//!
//! The refresh brings, per node, what the cloud and the node's self-check say (`unhealthy_nodes`,
//! `selfcheck`) and which node configuration revision it runs (`node_revisions`). From the refreshed state
//! and the configuration, [`work`] decides what an apply does, the same way at plan and at apply: the plan
//! shows it (the maps' diffs, and a warning naming each node with its reason and each batch), and
//! [`apply`] does exactly that through the cloud's backend (`reboot_nodes`, `remove_nodes`, then the
//! backend's converge, which makes the removed nodes again under their names with the new configuration).
//! A rolling update interrupted half way leaves nodes of both revisions, each node's own revision in the
//! cloud (its tag or label), so the next plan carries on with the nodes not yet updated.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::lifecycle::{At, Kind};
use crate::catalog::Cloud;
use crate::clouds::ErrorKind;
use crate::clouds::backend::{self, Step};
use crate::clouds::shared::{Backoff, Poll};
use crate::framework::{ApplyRequest, AttributePath, Context, Diagnostics, ReadOutcome, Value};
use crate::model::{ClusterSpec, OnMaintenance, Repair};
use crate::ownership::Census;

/// The attributes this module plans.
pub const ATTRS: [&str; 4] = ["unhealthy_nodes", "scheduled_maintenance", "selfcheck", "node_revisions"];

/// What one apply does to the nodes beyond the backend's converge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub repair: Repair,
    /// Unhealthy nodes this apply repairs, in index order, with the reason.
    pub repairs: Vec<(String, String)>,
    /// Unhealthy nodes beyond `max_repairs`, left for a later apply.
    pub capped: Vec<(String, String)>,
    /// Nodes with maintenance scheduled that this apply remakes ahead of the window (`on_maintenance =
    /// "replace"`), in index order, with the window; within `max_repairs` after the repairs.
    pub moves: Vec<(String, String)>,
    /// Nodes with maintenance scheduled beyond `max_repairs`, left for a later apply.
    pub moves_capped: Vec<(String, String)>,
    /// Nodes running another revision than the configuration's, in the batches they are remade in.
    pub batches: Vec<Vec<String>>,
    pub wait_for_selfcheck: bool,
}

impl Work {
    pub fn is_empty(&self) -> bool {
        self.repairs.is_empty() && self.moves.is_empty() && self.batches.is_empty()
    }

    /// Nodes remade (new instance, new id): replaced ones, the ones moved off a maintenance, and every
    /// batch's.
    pub fn remade(&self) -> Vec<&str> {
        let replaced = self.repairs.iter().filter(|_| self.repair == Repair::Replace).map(|(n, _)| n.as_str());
        let moved = self.moves.iter().map(|(n, _)| n.as_str());
        replaced.chain(moved).chain(self.batches.iter().flatten().map(String::as_str)).collect()
    }

    /// Nodes remade before the converge, under the new revision: replaced ones and moved ones.
    fn remade_first(&self) -> Vec<String> {
        let replaced = self.repairs.iter().filter(|_| self.repair == Repair::Replace);
        replaced.chain(&self.moves).map(|(n, _)| n.clone()).collect()
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_list().unwrap_or_default().iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()
}

/// What an apply from `prior` (the refreshed state) to `planned` does to the nodes. Nothing on a create,
/// and nothing while the node names or the revision are still unknown.
pub fn work(spec: &ClusterSpec, prior: &Value, planned: &Value) -> Work {
    let mut out = Work { repair: spec.day2.repair, wait_for_selfcheck: spec.day2.wait_for_selfcheck, ..Work::default() };
    if prior.is_null() || !planned.get("node_names").is_wholly_known() {
        return out;
    }
    let wanted = strings(planned.get("node_names"));
    let existing: Vec<String> = strings(prior.get("node_names")).into_iter().filter(|n| wanted.contains(n)).collect();
    let listed = |attr: &str, skip: &[(String, String)]| -> Vec<(String, String)> {
        let mut nodes: Vec<(String, String)> = prior
            .get(attr)
            .as_map()
            .map(|m| {
                m.iter()
                    .filter(|(n, _)| existing.contains(n) && !skip.iter().any(|(s, _)| s == *n))
                    .map(|(n, why)| (n.clone(), why.as_str().unwrap_or("unhealthy").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        nodes.sort_by_key(|(n, _)| (crate::nodes::order(&spec.name, n), n.clone()));
        nodes
    };
    let mut unhealthy = listed("unhealthy_nodes", &[]);
    let cap = spec.day2.max_repairs.of(spec.node_count) as usize;
    if spec.day2.repair != Repair::Report {
        out.capped = unhealthy.split_off(cap.min(unhealthy.len()));
        out.repairs = unhealthy;
    } else {
        out.capped = unhealthy;
    }
    // A node both unhealthy and with maintenance scheduled is the repair's.
    if spec.day2.on_maintenance == OnMaintenance::Replace {
        let taken: Vec<(String, String)> = out.repairs.iter().chain(&out.capped).cloned().collect();
        let mut scheduled = listed("scheduled_maintenance", &taken);
        let room = cap.saturating_sub(out.repairs.len());
        out.moves_capped = scheduled.split_off(room.min(scheduled.len()));
        out.moves = scheduled;
    }
    let Some(revision) = planned.get("revision").as_str() else { return out };
    let first = out.remade_first();
    let replaced: Vec<&str> = first.iter().map(String::as_str).collect();
    let runs = |n: &str| prior.get("node_revisions").get(n).as_str().or_else(|| prior.get("revision").as_str()).map(str::to_owned);
    let stale: Vec<String> =
        existing.iter().filter(|n| !replaced.contains(&n.as_str())).filter(|n| runs(n).is_some_and(|r| r != revision)).cloned().collect();
    let size = spec.day2.batch_size.of(spec.node_count) as usize;
    out.batches = stale.chunks(size.max(1)).map(<[String]>::to_vec).collect();
    out
}

/// The planned `unhealthy_nodes`, `selfcheck` and `node_revisions` (known, so the apply must end with
/// exactly these), `nodes` unknown when nodes are remade, and the warnings that say what the apply does.
pub fn plan(spec: &ClusterSpec, prior: &Value, planned: &mut Value, diags: &mut Diagnostics) {
    let w = work(spec, prior, planned);
    let Value::Map(map) = planned else { return };
    let names = strings(map.get("node_names").unwrap_or(&Value::Null));
    let names_known = map.get("node_names").is_some_and(Value::is_wholly_known);
    if !names_known {
        for attr in ATTRS {
            map.insert(attr.into(), Value::Unknown);
        }
        return;
    }
    let remade = w.remade();
    let rebooted: Vec<&str> = if w.repair == Repair::Reboot { w.repairs.iter().map(|(n, _)| n.as_str()).collect() } else { vec![] };
    let repaired: Vec<&str> = if w.repair == Repair::Report { vec![] } else { w.repairs.iter().map(|(n, _)| n.as_str()).collect() };
    let keep = |attr: &str, drop: &dyn Fn(&str) -> bool| -> Value {
        let kept = prior.get(attr).as_map().map(|m| {
            m.iter().filter(|(n, _)| names.contains(n) && !drop(n)).map(|(n, v)| (n.clone(), v.clone())).collect::<BTreeMap<_, _>>()
        });
        Value::Map(kept.unwrap_or_default())
    };
    let unhealthy = keep("unhealthy_nodes", &|n| repaired.contains(&n) || remade.contains(&n));
    let selfcheck = keep("selfcheck", &|n| remade.contains(&n) || rebooted.contains(&n));
    // A node remade is a new instance, with no maintenance scheduled; the others keep theirs until a refresh.
    let maintenance = keep("scheduled_maintenance", &|n| remade.contains(&n));
    map.insert("unhealthy_nodes".into(), unhealthy);
    map.insert("scheduled_maintenance".into(), maintenance.clone());
    map.insert("selfcheck".into(), selfcheck);
    let revisions = match map.get("revision").and_then(Value::as_str) {
        Some(r) => Value::Map(names.iter().map(|n| (n.clone(), Value::from(r))).collect()),
        None => Value::Unknown,
    };
    map.insert("node_revisions".into(), revisions);
    if !remade.is_empty() {
        map.insert("nodes".into(), Value::Unknown);
    }
    explain(spec, &w, diags);
    if spec.day2.on_maintenance == OnMaintenance::Report {
        announce(&maintenance, diags);
    }
}

/// The plan's warning for the nodes the cloud has scheduled maintenance on. It is no repair: the cloud
/// carries it out in its window (a reboot of the node or its host, power or network maintenance), and
/// remaking a node to dodge it would cost a whole node to spare a reboot; so it is said, with the window,
/// for the user to drain the node first, and the apply leaves the node alone whatever `repair` says
/// (unless `on_maintenance = "replace"`, whose own warnings say what is remade and what waits).
fn announce(maintenance: &Value, diags: &mut Diagnostics) {
    let Some(nodes) = maintenance.as_map().filter(|m| !m.is_empty()) else { return };
    let listed = nodes.iter().map(|(n, w)| format!("{n}: {}", w.as_str().unwrap_or_default())).collect::<Vec<_>>().join("\n");
    diags.warning_at(
        AttributePath::attr("scheduled_maintenance"),
        format!("{} node{} with maintenance scheduled by the cloud", nodes.len(), if nodes.len() == 1 { "" } else { "s" }),
        format!(
            "The cloud carries it out in the window given; the apply does not repair or replace these nodes for it. Drain them before \
             the window (e.g. through Slurm) if jobs must not be interrupted, or set on_maintenance = \"replace\" to have the apply \
             remake them ahead of it.\n{listed}"
        ),
    );
}

fn explain(spec: &ClusterSpec, w: &Work, diags: &mut Diagnostics) {
    let listed = |nodes: &[(String, String)]| nodes.iter().map(|(n, why)| format!("{n}: {why}")).collect::<Vec<_>>().join("\n");
    if !w.repairs.is_empty() {
        let verb = match w.repair {
            Repair::Replace => "replaced under its own name",
            Repair::Reboot => "rebooted",
            Repair::Report => unreachable!("report repairs nothing"),
        };
        diags.warning_at(
            AttributePath::attr("unhealthy_nodes"),
            format!("{} unhealthy node{} to repair", w.repairs.len(), if w.repairs.len() == 1 { "" } else { "s" }),
            format!("Each is {verb} (repair = \"{}\"); healthy nodes are not touched.\n{}", w.repair.as_str(), listed(&w.repairs)),
        );
    }
    if !w.capped.is_empty() {
        let why = if w.repair == Repair::Report {
            "repair = \"report\": the apply changes nothing for them; drain them (e.g. through Slurm) and set repair = \"replace\", or replace them yourself.".to_owned()
        } else {
            format!(
                "max_repairs = \"{}\" lets one apply repair {} of the {} nodes; these wait for a later apply (raise max_repairs to repair them now).",
                spec.day2.max_repairs.label(),
                spec.day2.max_repairs.of(spec.node_count),
                spec.node_count
            )
        };
        diags.warning_at(
            AttributePath::attr("unhealthy_nodes"),
            format!("{} unhealthy node{} not repaired by this apply", w.capped.len(), if w.capped.len() == 1 { "" } else { "s" }),
            format!("{why}\n{}", listed(&w.capped)),
        );
    }
    if !w.moves.is_empty() {
        diags.warning_at(
            AttributePath::attr("scheduled_maintenance"),
            format!("{} node{} to remake ahead of scheduled maintenance", w.moves.len(), if w.moves.len() == 1 { "" } else { "s" }),
            format!(
                "on_maintenance = \"replace\": each is remade under its own name before the cloud's window, in its placement and \
                 reservation; the other nodes are not touched.\n{}",
                listed(&w.moves)
            ),
        );
    }
    if !w.moves_capped.is_empty() {
        diags.warning_at(
            AttributePath::attr("scheduled_maintenance"),
            format!(
                "{} node{} with maintenance scheduled not remade by this apply",
                w.moves_capped.len(),
                if w.moves_capped.len() == 1 { "" } else { "s" }
            ),
            format!(
                "max_repairs = \"{}\" lets one apply remake {} of the {} nodes, repairs first; these wait for a later apply (raise \
                 max_repairs to remake them now).\n{}",
                spec.day2.max_repairs.label(),
                spec.day2.max_repairs.of(spec.node_count),
                spec.node_count,
                listed(&w.moves_capped)
            ),
        );
    }
    if !w.batches.is_empty() {
        let n: usize = w.batches.iter().map(Vec::len).sum();
        let batches =
            w.batches.iter().enumerate().map(|(i, b)| format!("batch {}: {}", i + 1, b.join(", "))).collect::<Vec<_>>().join("\n");
        let wait = if w.wait_for_selfcheck {
            "each batch's nodes must publish a passing self-check before the next batch starts"
        } else {
            "each batch's nodes must be running before the next batch starts"
        };
        diags.warning_at(
            AttributePath::attr("update_strategy"),
            format!("Rolling update of {n} node{} in {} batch{}", if n == 1 { "" } else { "s" }, w.batches.len(), if w.batches.len() == 1 { "" } else { "es" }),
            format!(
                "The node configuration changed (revision {}): the nodes are remade under their own names, batch by batch, while the \
                 others keep running; {wait}. An interrupted update carries on with the nodes not yet updated at the next apply.\n{batches}",
                spec.revision()
            ),
        );
    }
}

/// The state after a successful apply carries the planned maps (they are known), whatever a node said
/// in between; a refresh brings the news.
pub fn settle(mut state: Value, planned: &Value) -> Value {
    if let Value::Map(m) = &mut state {
        for attr in ATTRS {
            let p = planned.get(attr);
            if !p.is_unknown() && !p.is_null() {
                m.insert(attr.into(), p.clone());
            } else if m.get(attr).is_none_or(Value::is_null) {
                m.insert(attr.into(), Value::Map(BTreeMap::new()));
            }
        }
    }
    state
}

/// The nodes' part of an update (the lifecycle's update step of a cluster): repairs, then the backend's
/// converge, then each batch (remove, converge, wait), stopping at the first failure with the state as the
/// cloud has it.
pub async fn apply(lifecycle: &Kind<ClusterSpec>, at: &At<'_>, spec: &ClusterSpec, timeout: Duration, diags: &mut Diagnostics) -> Value {
    let (ctx, req, cloud, census) = (at.ctx, at.req, at.cloud, at.census);
    let (prior, planned) = (req.prior, req.planned);
    let w = work(spec, prior, planned);
    if w.is_empty() {
        let state = lifecycle.converge(ctx, req, spec, cloud, census, diags).await;
        return if diags.has_errors() { state } else { settle(state, planned) };
    }
    let backend = backend::cluster(cloud);
    let default_tags = super::common::defaults(ctx).default_tags;
    let started = Instant::now();
    let step = Step { ctx, census, default_tags: &default_tags, timeout };
    // What each node runs so far, for the state a failure returns: a node the backend finds without a
    // revision of its own (an earlier release made it) keeps the one the prior state gave it.
    let new_revision = planned.get("revision").clone();
    let mut runs: BTreeMap<String, Value> = strings(planned.get("node_names"))
        .into_iter()
        .map(|n| {
            let r = prior.get("node_revisions").get(&n);
            let r = if r.is_present() {
                r.clone()
            } else if prior.get("node_names").as_list().is_some_and(|l| l.contains(&Value::from(n.as_str()))) {
                prior.get("revision").clone()
            } else {
                new_revision.clone()
            };
            (n, r)
        })
        .collect();
    for n in w.remade_first() {
        runs.insert(n, new_revision.clone());
    }
    let so_far = |runs: &BTreeMap<String, Value>| {
        let mut p = planned.as_map().cloned().unwrap_or_default();
        p.insert("node_revisions".into(), Value::Map(runs.clone()));
        Value::Map(p)
    };
    let mut current = so_far(&runs);
    // The backend finds the cluster's pieces by its id (e.g. the OCI compartment) before any converge.
    if let Some(id) = prior.get("id").as_str() {
        census.set_import_id(id);
    }
    if !w.repairs.is_empty() || !w.moves.is_empty() {
        let names: Vec<String> = w.repairs.iter().chain(&w.moves).map(|(n, _)| n.clone()).collect();
        let rebooted: Vec<String> = if w.repair == Repair::Reboot { w.repairs.iter().map(|(n, _)| n.clone()).collect() } else { vec![] };
        let removed = w.remade_first();
        let mut done = Ok(());
        if !rebooted.is_empty() {
            done = backend.reboot_nodes(&step, spec, &rebooted).await;
        }
        if done.is_ok() && !removed.is_empty() {
            done = backend.remove_nodes(&step, spec, &removed).await;
        }
        if let Err(e) = done {
            diags.error(
                "Repairing the cluster's nodes failed",
                format!(
                    "Cluster {}: repairing {}: {e}. The state shows the nodes as the cloud has them; apply again to finish.",
                    spec.name,
                    names.join(", ")
                ),
            );
            return as_found(ctx, lifecycle, prior, cloud, census, diags).await;
        }
    }
    let mut state = lifecycle.converge(ctx, &ApplyRequest { planned: &current, ..*req }, spec, cloud, census, diags).await;
    if diags.has_errors() {
        return state;
    }
    for (k, batch) in w.batches.iter().enumerate() {
        let left = timeout.saturating_sub(started.elapsed());
        let step = Step { ctx, census, default_tags: &default_tags, timeout: left };
        let which = format!("batch {} of {} ({})", k + 1, w.batches.len(), batch.join(", "));
        if let Err(e) = backend.remove_nodes(&step, spec, batch).await {
            diags.error(
                "Rolling update failed",
                format!(
                    "Cluster {}: remaking {which}: {e}. The nodes not yet updated keep their configuration; apply again to carry on.",
                    spec.name
                ),
            );
            return as_found(ctx, lifecycle, &state, cloud, census, diags).await;
        }
        for n in batch {
            runs.insert(n.clone(), new_revision.clone());
        }
        current = so_far(&runs);
        state = lifecycle.converge(ctx, &ApplyRequest { planned: &current, ..*req }, spec, cloud, census, diags).await;
        if diags.has_errors() {
            return state;
        }
        if w.wait_for_selfcheck
            && let Err(e) =
                wait_for_selfcheck(ctx, lifecycle, cloud, census, batch, timeout.saturating_sub(started.elapsed()), &state, diags).await
        {
            diags.error(
                "Rolling update stopped",
                format!(
                    "Cluster {}: {which}: {e}. The later batches were not started; apply again to carry on with them (or fix the \
                     configuration or the nodes first).",
                    spec.name
                ),
            );
            // The converge just returned the nodes as they are; a read now could be cancelled with the apply.
            return state;
        }
    }
    settle(state, planned)
}

/// Until every node of `batch` publishes `ok`; a failed verdict stops at once.
#[allow(clippy::too_many_arguments)]
async fn wait_for_selfcheck(
    ctx: &Context,
    lifecycle: &Kind<ClusterSpec>,
    cloud: Cloud,
    census: &Census,
    batch: &[String],
    timeout: Duration,
    state: &Value,
    diags: &mut Diagnostics,
) -> Result<(), String> {
    let every = poll_interval();
    let waiting = format!("waiting for {} to publish a passing self-check", batch.join(", "));
    let mut poll = Poll::on(ctx, waiting, timeout, Backoff { first: every, max: every });
    loop {
        let mut quiet = Diagnostics::new();
        if let Some(found) = found(lifecycle.observe(ctx, state, &[], cloud, census, &mut quiet).await) {
            let verdicts = found.get("selfcheck");
            let failed: Vec<String> = batch
                .iter()
                .filter_map(|n| verdicts.get(n).as_str().filter(|v| v.starts_with("fail")).map(|v| (n, v)))
                .map(|(n, v)| format!("{n}: {}", crate::clouds::shared::selfcheck_reason(v).unwrap_or_else(|| v.to_owned())))
                .collect();
            if !failed.is_empty() {
                return Err(format!("the self-check failed on the remade nodes ({})", failed.join("; ")));
            }
            if batch.iter().all(|n| verdicts.get(n).as_str() == Some("ok")) {
                return Ok(());
            }
        } else if quiet.has_errors() {
            diags.extend(quiet);
        }
        poll.pause(None).await.map_err(|e| match e.kind {
            ErrorKind::TimedOut => format!(
                "timed out after {} waiting for {} to publish a passing self-check (raise the update timeout in the timeouts block, \
                 or set update_strategy.wait_for_selfcheck = false)",
                crate::clock::format_duration(timeout),
                batch.join(", ")
            ),
            _ => e.message,
        })?;
    }
}

/// How often a rolling update reads the self-check verdicts (`HPC_DAY2_POLL_MS` for tests).
fn poll_interval() -> Duration {
    std::env::var("HPC_DAY2_POLL_MS").ok().and_then(|v| v.parse().ok()).map_or(Duration::from_secs(15), Duration::from_millis)
}

/// The cluster as the cloud has it (after a failed step), or `last` (what the state was) when a refresh
/// cannot tell.
async fn as_found(
    ctx: &Context,
    lifecycle: &Kind<ClusterSpec>,
    last: &Value,
    cloud: Cloud,
    census: &Census,
    diags: &mut Diagnostics,
) -> Value {
    let mut quiet = Diagnostics::new();
    let state = found(lifecycle.observe(ctx, last, &[], cloud, census, &mut quiet).await).unwrap_or_else(|| last.clone());
    if quiet.has_errors() {
        diags.extend(quiet);
    }
    state
}

/// Whether a refresh outcome found the cluster.
pub fn found(outcome: ReadOutcome) -> Option<Value> {
    match outcome {
        ReadOutcome::Found { state, .. } => Some(state),
        ReadOutcome::Gone => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Resource;
    use crate::model::NodeAmount;

    fn spec(extra: serde_json::Value) -> ClusterSpec {
        let mut config = serde_json::json!({
            "name": "d2", "node_count": 4, "image": "ami-new",
            "fabric": {"id": null, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "name": "f", "instance_type": "p5.48xlarge", "placement": "cluster"},
        });
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        let schema = super::super::gpu_cluster::GpuCluster.schema();
        let value = crate::framework::codec::decode_json(config.to_string().as_bytes(), &schema.value_type()).unwrap();
        let mut diags = Diagnostics::new();
        crate::planner::spec::parse_cluster(&value, &mut diags).unwrap_or_else(|| panic!("{diags:?}"))
    }

    fn map(pairs: &[(&str, &str)]) -> Value {
        Value::Map(pairs.iter().map(|(k, v)| ((*k).to_owned(), Value::from(*v))).collect())
    }

    fn names(n: u32) -> Value {
        Value::list((0..n).map(|i| Value::from(format!("d2-{i}"))))
    }

    /// A refreshed state of 4 nodes at `old`, with the given unhealthy nodes and node revisions.
    fn prior(unhealthy: &[(&str, &str)], revisions: &[(&str, &str)]) -> Value {
        Value::object([
            ("node_names", names(4)),
            ("revision", Value::from("old")),
            ("unhealthy_nodes", map(unhealthy)),
            ("selfcheck", map(&[("d2-0", "ok"), ("d2-3", "fail-gpus-7-of-8")])),
            ("node_revisions", map(revisions)),
        ])
    }

    fn planned(s: &ClusterSpec, revision: &str) -> Value {
        let _ = s;
        Value::object([("node_names", names(4)), ("revision", Value::from(revision)), ("nodes", Value::list([]))])
    }

    const OLD: [(&str, &str); 4] = [("d2-0", "old"), ("d2-1", "old"), ("d2-2", "old"), ("d2-3", "old")];

    #[test]
    fn one_unhealthy_node_is_planned_for_replacement_by_name_with_its_reason_and_nothing_else() {
        let s = spec(serde_json::json!({}));
        let rev = s.revision();
        let p = prior(&[("d2-3", "self-check: 7 of 8 GPUs")], &OLD.map(|(n, _)| (n, rev.as_str())));
        let mut plan = planned(&s, &rev);
        let mut diags = Diagnostics::new();
        super::plan(&s, &p, &mut plan, &mut diags);
        let w = work(&s, &p, &plan);
        assert_eq!(w.repairs, [("d2-3".to_owned(), "self-check: 7 of 8 GPUs".to_owned())]);
        assert!(w.batches.is_empty() && w.capped.is_empty(), "{w:?}");
        assert_eq!(plan.get("unhealthy_nodes"), &map(&[]));
        // The replaced node's verdict goes with it; the others' stay.
        assert_eq!(plan.get("selfcheck"), &map(&[("d2-0", "ok")]));
        assert!(plan.get("nodes").is_unknown());
        let text = format!("{diags:?}");
        assert!(text.contains("1 unhealthy node to repair") && text.contains("d2-3: self-check: 7 of 8 GPUs"), "{text}");
        assert!(!diags.has_errors());
    }

    #[test]
    fn maintenance_is_remade_only_when_asked_after_the_repairs_and_within_max_repairs() {
        let rev = spec(serde_json::json!({})).revision();
        let mut p = prior(&[("d2-0", "state STOPPED")], &OLD.map(|(n, _)| (n, rev.as_str())));
        let scheduled =
            [("d2-0", "maintenance reboot due 2026-12-05T00:00Z"), ("d2-2", "maintenance reboot due 2026-12-05T00:00Z"), ("d2-3", "m")];
        if let Value::Map(m) = &mut p {
            m.insert("scheduled_maintenance".into(), map(&scheduled));
        }
        // Report (the default): nothing is done for it; the plan warns of every node's window.
        let s = spec(serde_json::json!({"max_repairs": "2"}));
        let mut plan = planned(&s, &rev);
        let mut diags = Diagnostics::new();
        super::plan(&s, &p, &mut plan, &mut diags);
        let w = work(&s, &p, &plan);
        assert_eq!((w.repairs.len(), w.moves.len(), w.moves_capped.len()), (1, 0, 0), "{w:?}");
        assert!(
            format!("{diags:?}").contains("2 nodes with maintenance scheduled by the cloud"),
            "d2-0 is replaced for its repair: {diags:?}"
        );
        // Replace: the repair comes first (d2-0 is both), then the scheduled nodes while max_repairs lasts.
        let s = spec(serde_json::json!({"max_repairs": "2", "on_maintenance": "replace", "repair": "reboot"}));
        let mut plan = planned(&s, &rev);
        let mut diags = Diagnostics::new();
        super::plan(&s, &p, &mut plan, &mut diags);
        let w = work(&s, &p, &plan);
        assert_eq!(w.repairs, [("d2-0".to_owned(), "state STOPPED".to_owned())]);
        assert_eq!(w.moves.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["d2-2"]);
        assert_eq!(w.moves_capped.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["d2-3"]);
        assert_eq!(w.remade(), ["d2-2"], "the rebooted node is not remade; the moved one is");
        assert_eq!(plan.get("scheduled_maintenance"), &map(&[scheduled[0], scheduled[2]]), "the moved node's maintenance goes with it");
        let text = format!("{diags:?}");
        assert!(
            text.contains("1 node to remake ahead of scheduled maintenance") && text.contains("d2-2: maintenance reboot due"),
            "{text}"
        );
        assert!(text.contains("1 node with maintenance scheduled not remade by this apply") && text.contains("d2-3: m"), "{text}");
        assert!(!text.contains("by the cloud\""), "no second warning of the same nodes: {text}");
    }

    #[test]
    fn max_repairs_caps_one_apply_and_report_repairs_nothing() {
        let s = spec(serde_json::json!({"max_repairs": "1"}));
        let rev = s.revision();
        let bad = [("d2-1", "system status check impaired since 2026-12-01T10:02Z"), ("d2-2", "state STOPPED"), ("d2-3", "x")];
        let p = prior(&bad, &OLD.map(|(n, _)| (n, rev.as_str())));
        let mut plan = planned(&s, &rev);
        super::plan(&s, &p, &mut plan, &mut Diagnostics::new());
        let w = work(&s, &p, &plan);
        assert_eq!(w.repairs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["d2-1"]);
        assert_eq!(w.capped.len(), 2);
        assert_eq!(plan.get("unhealthy_nodes"), &map(&bad[1..]));

        let s = spec(serde_json::json!({"repair": "report"}));
        let mut plan = planned(&s, &rev);
        let mut diags = Diagnostics::new();
        super::plan(&s, &p, &mut plan, &mut diags);
        assert!(work(&s, &p, &plan).is_empty());
        // Nothing changes: the plan is empty, and says why.
        assert_eq!(plan.get("unhealthy_nodes"), p.get("unhealthy_nodes"));
        assert_eq!(plan.get("selfcheck"), p.get("selfcheck"));
        assert!(!plan.get("nodes").is_unknown());
        assert!(format!("{diags:?}").contains("repair = \\\"report\\\""), "{diags:?}");
    }

    #[test]
    fn scheduled_maintenance_is_announced_with_its_window_and_repaired_by_no_policy() {
        let window = "scheduled system-reboot from 2026-12-05T00:00Z to 2026-12-05T02:00Z";
        for repair in ["replace", "reboot", "report"] {
            let s = spec(serde_json::json!({"repair": repair}));
            let rev = s.revision();
            let mut p = prior(&[("d2-3", "scheduled instance-retirement from 2026-12-05T00:00Z")], &OLD.map(|(n, _)| (n, rev.as_str())));
            if let Value::Map(m) = &mut p {
                m.insert("scheduled_maintenance".into(), map(&[("d2-1", window), ("d2-3", window)]));
            }
            let mut plan = planned(&s, &rev);
            let mut diags = Diagnostics::new();
            super::plan(&s, &p, &mut plan, &mut diags);
            let w = work(&s, &p, &plan);
            assert!(w.repairs.iter().chain(&w.capped).all(|(n, _)| n == "d2-3"), "{repair}: {w:?}");
            // d2-3 is remade by replace (a new instance has no maintenance); otherwise both keep theirs.
            let (kept, said) = if repair == "replace" {
                (map(&[("d2-1", window)]), "1 node with maintenance scheduled by the cloud")
            } else {
                (map(&[("d2-1", window), ("d2-3", window)]), "2 nodes with maintenance scheduled by the cloud")
            };
            assert_eq!(plan.get("scheduled_maintenance"), &kept, "{repair}");
            let text = format!("{diags:?}");
            assert!(text.contains(said) && text.contains(&format!("d2-1: {window}")), "{repair}: {text}");
        }
    }

    #[test]
    fn a_configuration_change_rolls_in_batches_and_an_interrupted_update_carries_on_with_the_rest() {
        let s =
            spec(serde_json::json!({"update_strategy": {"batch_size": "2", "wait_for_selfcheck": true}, "node_identity": "hpc-selfcheck"}));
        let rev = s.revision();
        let p = prior(&[], &OLD);
        let mut plan = planned(&s, &rev);
        let mut diags = Diagnostics::new();
        super::plan(&s, &p, &mut plan, &mut diags);
        let w = work(&s, &p, &plan);
        assert_eq!(w.batches, [vec!["d2-0".to_owned(), "d2-1".to_owned()], vec!["d2-2".to_owned(), "d2-3".to_owned()]]);
        assert!(w.wait_for_selfcheck);
        assert_eq!(plan.get("node_revisions"), &map(&OLD.map(|(n, _)| (n, rev.as_str()))));
        assert_eq!(plan.get("selfcheck"), &map(&[]));
        let text = format!("{diags:?}");
        assert!(text.contains("Rolling update of 4 nodes in 2 batches") && text.contains("batch 2: d2-2, d2-3"), "{text}");

        // Half way: the first batch runs the new revision.
        let half = prior(&[], &[("d2-0", rev.as_str()), ("d2-1", rev.as_str()), ("d2-2", "old"), ("d2-3", "old")]);
        let w = work(&s, &half, &planned(&s, &rev));
        assert_eq!(w.batches, [vec!["d2-2".to_owned(), "d2-3".to_owned()]]);
        // A percentage rounds up: 25% of 4 is one node a batch.
        let s = spec(serde_json::json!({}));
        assert_eq!(work(&s, &p, &planned(&s, &s.revision())).batches.len(), 4);
    }

    #[test]
    fn a_replaced_node_that_is_also_stale_is_remade_once_and_new_nodes_are_not_rolled() {
        let s = spec(serde_json::json!({"node_count": 6, "update_strategy": {"batch_size": "50%"}}));
        let rev = s.revision();
        let p = prior(&[("d2-1", "state STOPPED")], &OLD);
        let mut plan = Value::object([
            ("node_names", Value::list((0..6).map(|i| Value::from(format!("d2-{i}"))))),
            ("revision", Value::from(rev.as_str())),
        ]);
        super::plan(&s, &p, &mut plan, &mut Diagnostics::new());
        let w = work(&s, &p, &plan);
        assert_eq!(w.repairs.len(), 1);
        // 50% of 6 = 3 a batch, of the three stale nodes not being replaced anyway.
        assert_eq!(w.batches, [vec!["d2-0".to_owned(), "d2-2".to_owned(), "d2-3".to_owned()]]);
        assert_eq!(plan.get("node_revisions").as_map().unwrap().len(), 6);
    }

    #[test]
    fn node_amounts_are_counts_or_percentages_rounded_up() {
        assert_eq!(NodeAmount::parse("2"), Some(NodeAmount::Count(2)));
        assert_eq!(NodeAmount::parse("25%"), Some(NodeAmount::Percent(25)));
        for bad in ["0", "0%", "101%", "-1", "two", ""] {
            assert_eq!(NodeAmount::parse(bad), None, "{bad}");
        }
        assert_eq!(NodeAmount::Percent(20).of(4), 1);
        assert_eq!(NodeAmount::Percent(25).of(10), 3);
        assert_eq!(NodeAmount::Count(9).of(4), 4);
        assert_eq!(NodeAmount::Percent(1).of(1000), 10);
    }

    #[test]
    fn bad_day2_settings_are_refused_at_their_attribute_with_the_valid_values() {
        let schema = super::super::gpu_cluster::GpuCluster.schema();
        for (extra, path, words) in [
            (serde_json::json!({"repair": "recycle"}), "repair", r#"\"replace\", \"reboot\" or \"report\""#),
            (serde_json::json!({"on_maintenance": "redeploy"}), "on_maintenance", r#"\"report\" or \"replace\""#),
            (serde_json::json!({"max_repairs": "0"}), "max_repairs", "percentage"),
            (serde_json::json!({"update_strategy": {"batch_size": "half"}}), "batch_size", "node count"),
        ] {
            let mut config = serde_json::json!({
                "name": "d2", "node_count": 4,
                "fabric": {"id": null, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "name": "f", "instance_type": "p5.48xlarge", "placement": "cluster"},
            });
            for (k, v) in extra.as_object().unwrap() {
                config[k] = v.clone();
            }
            let value = crate::framework::codec::decode_json(config.to_string().as_bytes(), &schema.value_type()).unwrap();
            let mut diags = Diagnostics::new();
            assert!(crate::planner::spec::parse_cluster(&value, &mut diags).is_none());
            let text = format!("{diags:?}");
            assert!(text.contains(path) && text.contains(words), "{text}");
        }
    }

    #[test]
    fn the_revision_follows_the_node_configuration_only() {
        let a = spec(serde_json::json!({}));
        assert_eq!(a.revision(), spec(serde_json::json!({"node_count": 8, "repair": "report"})).revision());
        assert_ne!(a.revision(), spec(serde_json::json!({"image": "ami-other"})).revision());
        assert_ne!(a.revision(), spec(serde_json::json!({"user_data": "#!/bin/sh"})).revision());
        assert_ne!(a.revision(), spec(serde_json::json!({"ssh_public_key": "ssh-ed25519 AAAA"})).revision());
        assert_eq!(a.revision().len(), 10);
    }
}
