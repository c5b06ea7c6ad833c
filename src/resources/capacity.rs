//! Capacity before money, the same on every cloud: the plan-time quota check (each quota read once per run
//! and place, the clusters of one plan claiming from it together, a diagnostic naming the quota, the need,
//! what is free and how to ask for more), and what an apply does when the cloud gives fewer nodes than it
//! adds (`capacity_policy`): release what it launched (`all-or-nothing`, or `at-least` below its minimum),
//! keep what came with a warning (`at-least`), or keep it and fail (`keep-partial`), with one diagnostic
//! naming zone, node type, capacity type and what could help, in the cloud's own words for the shortage.
//! The clouds supply the quota each node draws on and how to read it (`ClusterBackend::{quota, read_quota}`),
//! and their converge fails with a typed error (`CloudError` of kind `NoCapacity` with the cloud's code)
//! that the settlement decides on; their converge uses the cloud's own all-or-nothing
//! launch where there is one (RunInstances `MinCount`, bulkInsert `minCount`).

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::Cloud;
use crate::clouds::backend::{self, Step};
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared;
use crate::clouds::{CloudError, NodeAddress};
use crate::config::{ProviderConfig, QuotaCheck};
use crate::framework::{AttributePath, Context, Diagnostics, Value};
use crate::model::{CapacityPolicy, ClusterSpec};
use crate::ownership::Census;

/// The nodes a state or plan has now (`node_count`; 0 for none).
fn node_count(v: &Value) -> u32 {
    v.get("node_count").as_number().and_then(|n| n.as_i64()).map_or(0, |n| n.max(0) as u32)
}

/// At plan time: whether the quota the cluster's new nodes draw on has room for them, with the other
/// clusters planned in this run that draw on it. No call when the cluster does not grow, the check is
/// off, or the cloud's block has no credentials; a quota that cannot be read is a warning.
pub async fn check_quota(ctx: &Context, prior: &Value, spec: &ClusterSpec, diags: &mut Diagnostics) {
    let Some(config) = ctx.configured::<ProviderConfig>() else { return };
    if config.quota_check == QuotaCheck::Off {
        return;
    }
    let added = spec.node_count.saturating_sub(node_count(prior));
    if added == 0 {
        return;
    }
    let cloud = spec.fabric.cloud;
    let backend = backend::cluster(cloud);
    if backend.configured(ctx).await.is_err() {
        return;
    }
    let families = backend.quotas(spec);
    if families.is_empty() {
        if let Some(why) = backend.unread_quota(spec) {
            diags.warning_at(
                AttributePath::attr("node_count"),
                "Quota not checked",
                format!(
                    "{}: {why}. This plan adds {added} node(s) without checking it; an apply short of quota fails at the cloud.",
                    spec.name
                ),
            );
        }
        return;
    }
    let claimant = backend.id(spec).unwrap_or_else(|| format!("{}/{}", cloud.as_str(), spec.name));
    // By quota: cloud, scope and id, without case (Azure's casing of family names varies between its APIs).
    let key = |scope: &str, id: &str| format!("{}/{scope}/{id}", cloud.as_str()).to_lowercase();
    let mut ledger = config.quotas.inner.lock().await;
    // What this run has not read yet, by scope: one read for each scope, which answers for all of them.
    let mut unread: BTreeMap<&str, Vec<QuotaFamily>> = BTreeMap::new();
    for f in families.iter().filter(|f| !ledger.readings.contains_key(&key(&f.scope, &f.id))) {
        unread.entry(f.scope.as_str()).or_default().push(f.clone());
    }
    for (scope, asked) in unread {
        match backend.read_quotas(ctx, &asked).await {
            Ok(got) => {
                let came = got.len();
                for (id, r) in got {
                    ledger.readings.entry(key(scope, &id)).or_insert(Ok((r.limit, r.used)));
                }
                for f in &asked {
                    let missing =
                        || Err(format!("{}'s answer for {scope} lists no {} ({came} quotas came back)", cloud.display_name(), f.id));
                    ledger.readings.entry(key(scope, &f.id)).or_insert_with(missing);
                }
            }
            Err(e) => {
                let e = String::from(e);
                for f in &asked {
                    ledger.readings.insert(key(scope, &f.id), Err(e.clone()));
                }
            }
        }
    }
    // Each quota with this cluster's claim on it and what the other clusters of the plan claim.
    let mut checked = Vec::new();
    for family in families {
        let k = key(&family.scope, &family.id);
        let reading = ledger.readings[&k].clone().map(|(limit, used)| QuotaReading { limit, used });
        let claims = ledger.claims.entry(k).or_default();
        let others: u64 = claims.iter().filter(|(c, _)| **c != claimant).map(|(_, v)| *v).sum();
        claims.insert(claimant.clone(), u64::from(added) * family.per_node);
        checked.push((family, reading, others));
    }
    drop(ledger);
    // The quotas that could not be read, one warning for each reason (one failed read is one warning).
    let mut failed: BTreeMap<String, Vec<&QuotaFamily>> = BTreeMap::new();
    for (family, reading, _) in &checked {
        if let Err(e) = reading {
            failed.entry(e.clone()).or_default().push(family);
        }
    }
    for (e, quotas) in failed {
        let named: Vec<String> = quotas.iter().map(|f| format!("{:?} ({})", f.name, f.id)).collect();
        let (what, them) = if named.len() == 1 { ("quota", "it") } else { ("quotas", "them") };
        diags.warning_at(
            AttributePath::attr("node_count"),
            "Quota not checked",
            format!(
                "Cluster {}: the {} {what} {} in {} could not be read, so this plan was not checked against {them}: {e}. The plan \
                 goes on; an apply short of quota fails at the cloud.",
                spec.name,
                cloud.display_name(),
                named.join(" and "),
                quotas[0].scope
            ),
        );
    }
    for (family, reading, others) in &checked {
        if let Ok(r) = reading
            && let Some((summary, detail)) = shortfall(spec, added, family, *r, *others)
        {
            match config.quota_check {
                QuotaCheck::Warning => diags.warning_at(AttributePath::attr("node_count"), summary, detail),
                _ => diags.error_at(AttributePath::attr("node_count"), summary, detail),
            }
        }
    }
}

/// The diagnostic of a plan whose `added` nodes need more of `family` than is free (after `others`, what
/// other clusters of this plan take), or `None` when they fit.
pub fn shortfall(spec: &ClusterSpec, added: u32, family: &QuotaFamily, r: QuotaReading, others: u64) -> Option<(String, String)> {
    let need = u64::from(added) * family.per_node;
    let free = r.free().saturating_sub(others);
    if need <= free {
        return None;
    }
    let unit = family.unit;
    let fits = free / family.per_node.max(1);
    let taken = if others > 0 { format!(", {others} of which other clusters in this plan take") } else { String::new() };
    let existing = spec.node_count - added;
    let fewer = if fits > 0 { format!(" or plan node_count = {} (what fits)", u64::from(existing) + fits) } else { String::new() };
    let desired = r.used + others + need;
    Some((
        format!("Not enough {} quota for {}", spec.fabric.cloud.display_name(), spec.name),
        format!(
            "Cluster {} adds {added} x {} in {}: {need} {unit} of the quota {:?} ({}), at {} {unit} a node. The quota is {} {unit}, {} in \
             use, {} free{taken}. Ask for at least {desired} {unit}: {}. Or launch into a reservation you hold (capacity_type = \
             \"reservation\"){fewer}.",
            spec.name,
            spec.fabric.sku.name,
            family.scope,
            family.name,
            family.id,
            family.per_node,
            r.limit,
            r.used,
            r.free(),
            family.request.replace("<n>", &desired.to_string()).replace(&format!("<{unit}>"), &desired.to_string()),
        ),
    ))
}

/// The names of the nodes a state lists in `nodes`.
fn node_names(v: &Value) -> BTreeSet<String> {
    v.get("nodes").as_list().unwrap_or_default().iter().filter_map(|n| n.get("name").as_str().map(str::to_owned)).collect()
}

/// The nodes a state lists, as addresses (with the revision the state says each runs).
fn addresses(v: &Value, keep: impl Fn(&str) -> bool) -> Vec<NodeAddress> {
    v.get("nodes")
        .as_list()
        .unwrap_or_default()
        .iter()
        .filter_map(|n| {
            let name = n.get("name").as_str()?.to_owned();
            keep(&name).then(|| NodeAddress {
                revision: v.get("node_revisions").get(&name).as_str().map(str::to_owned),
                selfcheck: v.get("selfcheck").get(&name).as_str().map(str::to_owned),
                maintenance: v.get("scheduled_maintenance").get(&name).as_str().map(str::to_owned),
                id: n.get("id").as_str().unwrap_or_default().to_owned(),
                private_ip: n.get("private_ip").as_str().map(str::to_owned),
                name,
                health: None,
            })
        })
        .collect()
}

/// The state an apply that kept fewer nodes than planned returns when it succeeds: the plan's known values
/// (as the CLI requires), with what the cloud assigned for the unknown ones, the nodes as they are; the
/// refresh before the next plan shows the shortfall, which that plan adds.
fn as_planned(planned: &Value, state: &Value) -> Value {
    let mut out = planned.as_map().cloned().unwrap_or_default();
    for (name, value) in out.iter_mut() {
        if value.is_unknown() {
            *value = state.get(name).clone();
        }
    }
    Value::Map(out)
}

/// The cloud's own code for "no capacity" (`InsufficientInstanceCapacity`, `ZONE_RESOURCE_POOL_EXHAUSTED`,
/// `AllocationFailed`, `Out of host capacity`), from the first error whose typed cause is a capacity error.
fn capacity_code(errors: &[crate::framework::Diagnostic]) -> Option<String> {
    errors.iter().find_map(|d| d.cause::<CloudError>()?.capacity_code().map(str::to_owned))
}

/// After the nodes' converge of a create or an update: when fewer nodes exist than planned, the policy
/// decides what is kept, and the cloud's "no capacity" becomes one diagnostic. `step_diags` are the
/// converge's; the result goes to `diags`.
#[allow(clippy::too_many_arguments)]
pub async fn settle(
    ctx: &Context,
    spec: &ClusterSpec,
    prior: &Value,
    planned: &Value,
    state: Value,
    cloud: Cloud,
    census: &Census,
    timeout: std::time::Duration,
    step_diags: Diagnostics,
    diags: &mut Diagnostics,
) -> Value {
    let live = node_names(&state);
    let wanted = spec.node_count;
    if !step_diags.has_errors() || live.len() as u32 >= wanted || state.is_null() {
        diags.extend(step_diags);
        return state;
    }
    let backend = backend::cluster(cloud);
    let (errors, others): (Vec<_>, Vec<_>) = step_diags.0.into_iter().partition(|d| d.severity == crate::framework::Severity::Error);
    diags.extend(Diagnostics(others));
    let said: Vec<String> = errors.iter().map(|d| d.detail.clone()).collect();
    let code = capacity_code(&errors);
    let had = node_names(prior);
    let made: Vec<String> = live.iter().filter(|n| !had.contains(*n)).cloned().collect();
    let zone = spec.fabric.zone.clone().unwrap_or_else(|| spec.fabric.region.clone());
    let came = format!("{} of {wanted} nodes exist", live.len());
    let summary = match code {
        Some(_) => format!("Not enough {} capacity in {zone}", spec.fabric.sku.name),
        None => errors.first().map_or_else(|| "Creating the cluster's nodes failed".to_owned(), |d| d.summary.clone()),
    };
    let cause = match &code {
        Some(code) => format!(
            "{} has no more {} capacity for {} nodes in {zone} ({code}): {came}.",
            cloud.display_name(),
            spec.fabric.sku.name,
            spec.capacity.as_str()
        ),
        None => format!("{came}."),
    };
    let help = if code.is_some() {
        format!(" What can help: {}.", crate::clouds::quota::capacity_options(spec).join("; "))
    } else {
        String::new()
    };
    let raw = format!(" The cloud said: {}", said.join(" | "));
    let policy = spec.capacity_policy;
    if policy.keeps(live.len() as u32, wanted) {
        if let CapacityPolicy::AtLeast(min) = policy {
            diags.warning(
                format!("{} of {wanted} nodes: capacity short", live.len()),
                format!(
                    "Cluster {}: {cause} capacity_policy = \"at-least\" with min_nodes = {min} keeps them; the next plan adds the \
                     missing {}.{help}{raw}",
                    spec.name,
                    wanted - live.len() as u32
                ),
            );
            return as_planned(planned, &state);
        }
        diags.error(
            summary,
            format!(
                "Cluster {}: {cause} capacity_policy = \"keep-partial\" keeps them in state; apply again to try for the rest, or destroy.{help}{raw}",
                spec.name
            ),
        );
        return state;
    }
    // Fewer than the policy keeps: what this apply launched is released before the apply fails.
    let rule = match policy {
        CapacityPolicy::AtLeast(min) => format!("capacity_policy = \"at-least\" needs min_nodes = {min}"),
        _ => "capacity_policy = \"all-or-nothing\" keeps none of them".to_owned(),
    };
    let default_tags = super::common::defaults(ctx).default_tags;
    let step = Step { ctx, census, default_tags: &default_tags, timeout };
    if !made.is_empty()
        && let Err(e) = backend.release_nodes(&step, spec, &made).await
    {
        diags.error(
            summary,
            format!(
                "Cluster {}: {cause} {rule}, but releasing the {} launched failed: {e}. The nodes that exist are kept in state; apply \
                 again or destroy.{help}{raw}",
                spec.name,
                made.len()
            ),
        );
        return state;
    }
    let kept = addresses(&state, |n| had.contains(n));
    let released = if made.is_empty() { "nothing was launched".to_owned() } else { format!("the {} launched were released", made.len()) };
    diags.error(
        summary,
        format!(
            "Cluster {}: {cause} {rule}: {released}, and {} node(s) run (the state says so). Apply again when there is capacity.{help}{raw}",
            spec.name,
            kept.len()
        ),
    );
    shared::with_nodes(&state, cloud, backend.node_piece(), &kept)
}

/// The planned `capacity_policy` and `min_nodes`.
pub fn outputs(spec: &ClusterSpec) -> BTreeMap<String, Value> {
    let p = spec.capacity_policy;
    BTreeMap::from([
        ("capacity_policy".to_owned(), Value::from(p.as_str())),
        ("min_nodes".to_owned(), p.min_nodes().map_or(Value::Null, |m| Value::int(i64::from(m)))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(per_node: u64) -> QuotaFamily {
        QuotaFamily {
            cloud: Cloud::parse("aws").unwrap(),
            scope: "us-east-1".into(),
            id: "L-417A185B".into(),
            name: "Running On-Demand P instances".into(),
            unit: "vCPUs",
            per_node,
            request: "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B --desired-value <n>"
                .into(),
        }
    }

    fn spec(nodes: u32) -> ClusterSpec {
        let config = Value::object([
            ("name", Value::from("train")),
            ("cloud", Value::from("aws")),
            ("region", Value::from("us-east-1")),
            ("zone", Value::from("us-east-1a")),
            ("instance_type", Value::from("p5.48xlarge")),
            ("workload", Value::from("inference")),
            ("node_count", Value::int(i64::from(nodes))),
        ]);
        crate::planner::spec::parse_cluster(&config, &mut Diagnostics::new()).expect("spec")
    }

    #[test]
    fn a_shortfall_names_the_quota_the_need_what_is_free_and_the_request_with_the_value_to_ask_for() {
        let (summary, detail) = shortfall(&spec(4), 4, &family(192), QuotaReading { limit: 512, used: 192 }, 0).unwrap();
        assert_eq!(summary, "Not enough AWS quota for train");
        for part in [
            "adds 4 x p5.48xlarge in us-east-1",
            "768 vCPUs of the quota \"Running On-Demand P instances\" (L-417A185B)",
            "The quota is 512 vCPUs, 192 in use, 320 free",
            "--desired-value 960",
            "node_count = 1 (what fits)",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
    }

    #[test]
    fn other_clusters_of_the_plan_take_their_share_first_and_a_fit_says_nothing() {
        let r = QuotaReading { limit: 1000, used: 0 };
        assert!(shortfall(&spec(4), 4, &family(192), r, 0).is_none());
        let (_, detail) = shortfall(&spec(4), 4, &family(192), r, 384).unwrap();
        assert!(detail.contains("1000 free, 384 of which other clusters in this plan take"), "{detail}");
    }

    /// A state of `n` nodes `train-0` ...
    fn with_nodes(n: usize) -> Value {
        let nodes = (0..n).map(|i| Value::object([("name", Value::from(format!("train-{i}"))), ("id", Value::from(format!("i-{i}")))]));
        Value::object([("name", Value::from("train")), ("node_count", Value::int(n as i64)), ("nodes", Value::list(nodes))])
    }

    #[tokio::test]
    async fn settlement_decides_on_the_typed_error_not_on_its_words() {
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let mut spec = spec(4);
        spec.capacity_policy = CapacityPolicy::KeepPartial;
        let settle_with = |error: CloudError| {
            let (ctx, spec) = (&ctx, &spec);
            async move {
                let mut step = Diagnostics::new();
                step.error("Creating the cluster failed", format!("Cluster train in us-east-1: {error}."));
                step.caused_by(error);
                let mut diags = Diagnostics::new();
                let census = Census::reading();
                let state = with_nodes(3);
                settle(
                    ctx,
                    spec,
                    &Value::Null,
                    &state,
                    state.clone(),
                    Cloud::Aws,
                    &census,
                    std::time::Duration::from_secs(1),
                    step,
                    &mut diags,
                )
                .await;
                diags.0.into_iter().next().unwrap()
            }
        };
        // The message names no code: the kind and code decide.
        let short = CloudError::new(crate::clouds::ErrorKind::NoCapacity, Some("InsufficientInstanceCapacity".into()), "EC2 said no");
        let d = settle_with(short).await;
        assert_eq!(d.summary, "Not enough p5.48xlarge capacity in us-east-1a");
        assert!(d.detail.contains("(InsufficientInstanceCapacity)") && d.detail.contains("What can help"), "{}", d.detail);
        // The code's words in the message of another kind decide nothing.
        let worded = CloudError::other("launching: InsufficientInstanceCapacity: no");
        let d = settle_with(worded).await;
        assert_eq!(d.summary, "Creating the cluster failed");
        assert!(!d.detail.contains("What can help"), "{}", d.detail);
    }

    #[test]
    fn the_policy_defaults_follow_the_workload_and_min_new_is_what_the_cloud_must_launch_at_once() {
        assert_eq!(spec(4).capacity_policy, CapacityPolicy::AtLeast(1));
        assert_eq!(CapacityPolicy::default_for(crate::model::Workload::Pretraining), CapacityPolicy::AllOrNothing);
        assert_eq!(CapacityPolicy::AllOrNothing.min_new(0, 4), 4);
        assert_eq!(CapacityPolicy::AtLeast(2).min_new(0, 4), 2);
        assert_eq!(CapacityPolicy::AtLeast(2).min_new(3, 1), 1);
        assert_eq!(CapacityPolicy::KeepPartial.min_new(0, 4), 1);
        assert_eq!(CapacityPolicy::KeepPartial.min_new(4, 0), 0);
        assert!(!CapacityPolicy::AllOrNothing.keeps(3, 4));
        assert!(CapacityPolicy::AtLeast(2).keeps(3, 4) && !CapacityPolicy::AtLeast(2).keeps(1, 4));
    }
}
