//! `hpc_gpu_cluster` on AWS: a launch template with one EFA interface per network card, and the nodes,
//! launched in batches into the fabric's placement group, with RunInstances MinCount the fewest new nodes the
//! capacity policy keeps (all-or-nothing: MinCount = MaxCount, so EC2 launches the batch whole or not at
//! all; at-least and keep-partial: EC2 launches between MinCount and MaxCount, and a shortfall is an error
//! naming InsufficientInstanceCapacity with the nodes that came). Every node carries
//! `hpc:cluster = <cluster>` and `hpc:node = <cluster>-<i>`, so a refresh is one filtered
//! DescribeInstances (paginated) whatever the node count. Only the nodes, launch template and key pair whose
//! `hpc:owner` tag the census admits are kept, changed or deleted.
//!
//! Day 2: the same refresh reads the nodes' health with three DescribeInstanceStatus listings in the nodes'
//! zone, filtered to what is impaired or scheduled (paged, neither per node nor over the whole account: kept
//! for the cluster's own instance ids; scheduled stops and retirements are repairs, scheduled reboots and
//! system maintenance are reported with their window), and the verdict
//! each node's self-check published in its `hpc:selfcheck` tag (DescribeInstances already carries it). Every
//! node launched is tagged `hpc:revision = <spec.revision()>`; the launch template's latest version records
//! the revision it was made for in its version description, and a configuration of another revision gets a
//! new version, which the nodes launched after it take.
//!
//! An UltraServer node type (p6e-gb200) launches each NVLink domain into one UltraServer of the Capacity
//! Block `reservation_id` names: an apply reads the block once (DescribeCapacityBlocks) and launches domain k
//! into the k-th of its capacity reservations, as listed. The block is bought, never made or deleted here.
//! The lifecycle's backend for this kind, `Backend<ClusterSpec>` and `ClusterBackend` on `backend::Aws`, comes last, before the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    CapacityReservationSpecification, CapacityReservationTarget, Instance, InstanceStateName, InstanceStatus, InstanceStatusSummary,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateHttpTokensState, LaunchTemplateInstanceMarketOptionsRequest,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplatePlacementRequest, LaunchTemplateSpecification, LaunchTemplateVersion, MarketType, RequestLaunchTemplateData,
    ResourceType,
};

use super::api::{self, Aws, filter, tag_filter, tag_spec};
use super::backend::{self, fabric_region};
use super::fabric;
use super::{cluster, quota};
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ClusterBackend, ImportError, Imported, Outcome, Step};
use crate::clouds::error::{CloudError, ErrorKind};
use crate::clouds::quota::{QuotaFamily, QuotaReading};
use crate::clouds::shared;
use crate::clouds::shared::{REVISION_TAG, SELFCHECK_TAG};
use crate::framework::{Context, Value};
use crate::model::{CapacityType, ClusterSpec};
use crate::ownership::{Census, marker_in};

pub const TAG: &str = "hpc:cluster";
pub const NODE_TAG: &str = "hpc:node";
/// Nodes per RunInstances call (MaxCount).
pub const BATCH: usize = 100;
/// States a node counts in; `shutting-down` and `terminated` nodes are gone.
const ALIVE: [&str; 4] = ["pending", "running", "stopping", "stopped"];
/// The launch template tag naming an UltraServer cluster's Capacity Block (its launches name the block's
/// reservations one by one; the template names none), so an import finds `reservation_id` again.
pub const BLOCK_TAG: &str = "hpc:capacity-block";
/// How a launch template version's description records the node configuration revision it was made for.
pub const REVISION_PREFIX: &str = "hpc:revision=";
/// Instance statuses per DescribeInstanceStatus page (the most EC2 gives).
const STATUS_PAGE: i32 = 1000;

pub fn template_name(cluster: &str) -> String {
    format!("{cluster}-lt")
}

pub fn key_name(cluster: &str) -> String {
    format!("{cluster}-key")
}

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub id: String,
    pub name: String,
    pub index: Option<u32>,
    pub private_ip: Option<String>,
    /// Its `hpc:revision` tag: the node configuration it was launched with.
    pub revision: Option<String>,
    /// Its `hpc:selfcheck` tag: the verdict its boot-time self-check published.
    pub selfcheck: Option<String>,
    /// Why EC2 holds it unhealthy (failed status checks, a scheduled stop or retirement), when it does.
    pub health: Option<String>,
    /// The maintenance EC2 has scheduled on it (a reboot, system maintenance), with its window.
    pub maintenance: Option<String>,
    /// Its availability zone.
    pub zone: Option<String>,
}

/// What exists of a cluster and is the census's.
#[derive(Clone, Debug, Default)]
pub struct ClusterLive {
    /// The launch template exists and is this owner's.
    pub has_template: bool,
    /// Its latest version (not read by a refresh, which needs only that it exists).
    pub template: Option<LaunchTemplateVersion>,
    /// The launch template's tags (read with it for an apply or an import).
    pub template_tags: BTreeMap<String, String>,
    pub nodes: Vec<Node>,
    /// The key pair `<cluster>-key` exists and is this owner's.
    pub key: bool,
    /// Its public key as EC2 gives it back (for an apply: a new `ssh_public_key` replaces it).
    pub public_key: Option<String>,
}

impl ClusterLive {
    pub fn is_empty(&self) -> bool {
        !self.has_template && self.nodes.is_empty()
    }

    /// The nodes in index order (duplicates and strays after the numbered ones), with their instance ids
    /// and private addresses.
    pub fn addresses(&self) -> Vec<crate::clouds::NodeAddress> {
        let mut nodes: Vec<&Node> = self.nodes.iter().collect();
        nodes.sort_by_key(|n| (n.index.unwrap_or(u32::MAX), n.name.clone(), n.id.clone()));
        nodes
            .into_iter()
            .map(|n| crate::clouds::NodeAddress {
                name: n.name.clone(),
                id: n.id.clone(),
                private_ip: n.private_ip.clone(),
                revision: n.revision.clone(),
                health: n.health.clone(),
                maintenance: n.maintenance.clone(),
                selfcheck: n.selfcheck.clone(),
            })
            .collect()
    }
}

fn node_of(cluster: &str, i: &Instance) -> Node {
    let tags = api::tag_map(i.tags());
    let name = tags.get(NODE_TAG).cloned().unwrap_or_default();
    let index = crate::nodes::node_index(cluster, &name);
    Node {
        id: i.instance_id().unwrap_or_default().to_owned(),
        name,
        index,
        private_ip: i.private_ip_address().map(str::to_owned),
        revision: tags.get(REVISION_TAG).filter(|r| !r.is_empty()).cloned(),
        selfcheck: tags.get(SELFCHECK_TAG).filter(|v| !v.is_empty()).cloned(),
        health: None,
        maintenance: None,
        zone: i.placement().and_then(|p| p.availability_zone()).map(str::to_owned),
    }
}

/// Instances a page of the nodes' DescribeInstances asks for: EC2's largest page. With the pages a list
/// follows ([`crate::clouds::shared::Pages::most_items`]), it bounds the nodes a refresh can read.
pub const LIST_PAGE: i32 = 1000;

/// All live nodes of a cluster the census admits: one filtered DescribeInstances, paginated ([`LIST_PAGE`]).
pub async fn nodes(aws: &Aws, cluster: &str, census: &Census) -> Result<Vec<Node>, CloudError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = crate::clouds::shared::Pages::new("EC2", "NextToken");
    loop {
        let page = aws
            .ec2
            .describe_instances()
            .filters(tag_filter(TAG, cluster))
            .filters(filter("instance-state-name", &ALIVE))
            .set_next_token(token.take())
            .max_results(LIST_PAGE)
            .send()
            .await
            .map_err(|e| api::error(&e).context("listing the cluster's nodes"))?;
        for r in page.reservations() {
            for i in r.instances() {
                let node = node_of(cluster, i);
                let tags = api::tag_map(i.tags());
                let shown = if node.name.is_empty() { node.id.clone() } else { format!("{} ({})", node.name, node.id) };
                if census.admit("aws_instance", &shown, marker_in(&tags), i.launch_time().map(|t| t.to_string()).as_deref()) {
                    out.push(node);
                }
            }
        }
        match pages.next(page.next_token().filter(|t| !t.is_empty()).map(str::to_owned), "listing the cluster's nodes")? {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// The scheduled events EC2 carries out by stopping or retiring the instance (a stop moves it to another host
/// when it is started again; a retirement stops an EBS-backed instance and terminates an instance-store one):
/// a node with one is unhealthy and a day-2 repair remakes it.
pub const STOPPING_EVENTS: [&str; 2] = ["instance-retirement", "instance-stop"];
/// The scheduled events EC2 carries out in their window with the instance staying what it is: a reboot of
/// the instance or of its host, power or network maintenance. Reported with their window
/// (`scheduled_maintenance`), not repaired.
pub const MAINTENANCE_EVENTS: [&str; 3] = ["instance-reboot", "system-reboot", "system-maintenance"];

/// The nodes with what EC2 says of their health, whatever the account holds: three DescribeInstanceStatus
/// listings in the nodes' availability zone (normally the one of the fabric), each asking EC2 only for
/// what is wrong or announced (filters are ANDed, a filter's values ORed, so the three cannot be one call):
/// instances whose instance status check is impaired, those whose system status check is impaired, and
/// those with a scheduled event (of any state, as a stopped instance can be scheduled for retirement).
/// The answers are kept for these nodes' ids. EC2 takes no tag filter here, and instance ids would make the
/// calls grow with the cluster (at most 100 per call, and not with MaxResults); each listing is paged by
/// [`STATUS_PAGE`], so the calls grow only with the instances in the zone that are impaired or scheduled
/// for an event at once. No call when there are no nodes.
pub async fn with_health(aws: &Aws, mut nodes: Vec<Node>) -> Result<Vec<Node>, CloudError> {
    if nodes.is_empty() {
        return Ok(nodes);
    }
    let ids: BTreeSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    let zones: BTreeSet<&str> = nodes.iter().filter_map(|n| n.zone.as_deref()).collect();
    let zones: Vec<&str> = zones.into_iter().collect();
    let events: Vec<&str> = STOPPING_EVENTS.iter().chain(&MAINTENANCE_EVENTS).copied().collect();
    let asks = [
        ("instance-status.status", vec!["impaired"], false),
        ("system-status.status", vec!["impaired"], false),
        ("event.code", events, true),
    ];
    let mut found: BTreeMap<String, InstanceStatus> = BTreeMap::new();
    for (name, values, all) in asks {
        for status in statuses(aws, &zones, name, &values, all).await? {
            if let Some(id) = status.instance_id().filter(|id| ids.contains(id)) {
                found.insert(id.to_owned(), status);
            }
        }
    }
    for n in &mut nodes {
        let condition = found.get(&n.id).map(condition).unwrap_or_default();
        n.health = condition.unhealthy;
        n.maintenance = condition.maintenance;
    }
    Ok(nodes)
}

/// Every instance status DescribeInstanceStatus gives for one filter in `zones` (all zones when none is
/// known), paged; `all` includes instances that are not running.
async fn statuses(aws: &Aws, zones: &[&str], name: &str, values: &[&str], all: bool) -> Result<Vec<InstanceStatus>, CloudError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = crate::clouds::shared::Pages::new("EC2", "NextToken");
    loop {
        let mut ask = aws.ec2.describe_instance_status().filters(filter(name, values)).include_all_instances(all);
        if !zones.is_empty() {
            ask = ask.filters(filter("availability-zone", zones));
        }
        let page = ask.max_results(STATUS_PAGE).set_next_token(token.take()).send().await.map_err(|e| {
            api::error(&e).context(format!("reading the nodes' health (DescribeInstanceStatus, {name} {})", values.join(",")))
        })?;
        out.extend(page.instance_statuses().iter().cloned());
        match pages
            .next(page.next_token().filter(|t| !t.is_empty()).map(str::to_owned), "reading the nodes' health (DescribeInstanceStatus)")?
        {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// What EC2's status of an instance says of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    /// Why it is unhealthy (a day-2 repair acts on it): an impaired status check with the time it has been
    /// impaired since, a scheduled stop or retirement with its date.
    pub unhealthy: Option<String>,
    /// The maintenance EC2 has scheduled on it, with its window: reported, not repaired.
    pub maintenance: Option<String>,
}

/// The condition of an instance from its status: impaired status checks and scheduled stops and
/// retirements make it unhealthy; scheduled reboots and system maintenance are maintenance, as the EC2
/// User Guide's scheduled events describe them (the instance is rebooted, its host rebooted, or it "might
/// be temporarily affected by network maintenance or power maintenance"), which EC2 carries out in the
/// window itself; replacing the node for it would cost more than the reboot it avoids. (Azure's
/// `maintenanceRedeployStatus` and OCI's `timeMaintenanceRebootDue` are still repair reasons there.) An
/// event code EC2 adds later is reported as maintenance, not acted on. Events carried out or canceled
/// (EC2 keeps them a week, their description starting `[Completed]` or `[Canceled]`) say nothing.
pub fn condition(status: &InstanceStatus) -> Condition {
    let mut unhealthy = Vec::new();
    let mut maintenance = Vec::new();
    for (check, summary) in [("system", status.system_status()), ("instance", status.instance_status())] {
        if let Some(why) = summary.and_then(|s| impaired(check, s)) {
            unhealthy.push(why);
        }
    }
    for event in status.events() {
        let description = event.description().unwrap_or_default();
        if description.starts_with("[Completed]") || description.starts_with("[Canceled]") {
            continue;
        }
        let Some(code) = event.code().map(|c| c.as_str()) else { continue };
        let from = event.not_before().map(|t| crate::clock::utc_minute_of(t.secs()));
        let to = event.not_after().map(|t| crate::clock::utc_minute_of(t.secs()));
        if STOPPING_EVENTS.contains(&code) {
            unhealthy.push(match from {
                Some(t) => format!("scheduled {code} from {t}"),
                None => format!("scheduled {code}"),
            });
        } else {
            maintenance.push(match (from, to) {
                (Some(f), Some(t)) => format!("scheduled {code} from {f} to {t}"),
                (Some(f), None) => format!("scheduled {code} from {f}"),
                (None, Some(t)) => format!("scheduled {code} until {t}"),
                (None, None) => format!("scheduled {code}"),
            });
        }
    }
    let joined = |v: Vec<String>| (!v.is_empty()).then(|| v.join("; "));
    Condition { unhealthy: joined(unhealthy), maintenance: joined(maintenance) }
}

fn impaired(check: &str, summary: &InstanceStatusSummary) -> Option<String> {
    if summary.status().map(|s| s.as_str()) != Some("impaired") {
        return None;
    }
    let since = summary.details().iter().filter_map(|d| d.impaired_since()).min_by_key(|t| (t.secs(), t.subsec_nanos()));
    Some(match since {
        Some(t) => format!("{check} status check impaired since {}", crate::clock::utc_minute_of(t.secs())),
        None => format!("{check} status check impaired"),
    })
}

/// The cluster's launch template id and tags, if it exists and the census admits it
/// (DescribeLaunchTemplates carries its tags).
async fn template_id(aws: &Aws, cluster: &str, census: &Census) -> Result<Option<(String, BTreeMap<String, String>)>, CloudError> {
    let name = template_name(cluster);
    let described = match aws.ec2.describe_launch_templates().launch_template_names(&name).send().await {
        Ok(out) => out,
        Err(e) if api::error(&e).is_not_found() => return Ok(None),
        Err(e) => return Err(api::error(&e).context(format!("reading launch template {name}"))),
    };
    let Some(lt) = described.launch_templates().first() else { return Ok(None) };
    let created = lt.create_time().map(|t| t.to_string());
    let tags = api::tag_map(lt.tags());
    let ours = census.admit("aws_launch_template", &name, marker_in(&tags), created.as_deref());
    Ok(ours.then(|| (lt.launch_template_id().unwrap_or_default().to_owned(), tags)))
}

/// The cluster's launch template (latest version) and its tags, if it exists and the census admits it.
pub async fn template(
    aws: &Aws,
    cluster: &str,
    census: &Census,
) -> Result<Option<(LaunchTemplateVersion, BTreeMap<String, String>)>, CloudError> {
    let Some((_, tags)) = template_id(aws, cluster, census).await? else {
        return Ok(None);
    };
    let name = template_name(cluster);
    match aws.ec2.describe_launch_template_versions().launch_template_name(&name).versions("$Latest").send().await {
        Ok(out) => Ok(out.launch_template_versions().first().cloned().map(|v| (v, tags))),
        Err(e) if api::error(&e).is_not_found() => Ok(None),
        Err(e) => Err(api::error(&e).context(format!("reading launch template {name}"))),
    }
}

/// The revision a launch template version was made for (its description), if it records one.
pub fn template_revision(version: &LaunchTemplateVersion) -> Option<&str> {
    version.version_description()?.strip_prefix(REVISION_PREFIX)
}

/// Whether the cluster's key pair exists and is the census's, and its public key.
pub(super) async fn key(aws: &Aws, cluster: &str, census: &Census) -> Result<(bool, Option<String>), CloudError> {
    match aws.ec2.describe_key_pairs().key_names(key_name(cluster)).include_public_key(true).send().await {
        Ok(out) => Ok(out
            .key_pairs()
            .first()
            .filter(|k| census.admit("aws_key_pair", &key_name(cluster), marker_in(&api::tag_map(k.tags())), None))
            .map_or((false, None), |k| (true, k.public_key().map(str::to_owned)))),
        Err(e) if api::code(&e) == Some("InvalidKeyPair.NotFound") => Ok((false, None)),
        Err(e) => Err(api::error(&e).context(format!("reading key pair {}", key_name(cluster)))),
    }
}

/// Everything of the cluster the census admits, for an apply or an import: the launch template's latest
/// version, the nodes with their health, the key pair.
pub async fn observe(aws: &Aws, cluster: &str, census: &Census) -> Result<ClusterLive, CloudError> {
    let mut live = find(aws, cluster, census).await?;
    live.nodes = with_health(aws, std::mem::take(&mut live.nodes)).await?;
    Ok(live)
}

/// [`observe`] without the nodes' health (what a delete or a look ahead needs).
pub async fn find(aws: &Aws, cluster: &str, census: &Census) -> Result<ClusterLive, CloudError> {
    let template = template(aws, cluster, census).await?;
    let (key, public_key) = key(aws, cluster, census).await?;
    let (template, template_tags) = template.map_or((None, BTreeMap::new()), |(v, t)| (Some(v), t));
    Ok(ClusterLive {
        has_template: template.is_some(),
        template,
        template_tags,
        nodes: nodes(aws, cluster, census).await?,
        key,
        public_key,
    })
}

/// What a refresh needs: whether the launch template is there, the nodes and their health (five calls at
/// any size).
pub async fn refresh(aws: &Aws, cluster: &str, census: &Census) -> Result<ClusterLive, CloudError> {
    let has_template = template_id(aws, cluster, census).await?.is_some();
    let nodes = with_health(aws, nodes(aws, cluster, census).await?).await?;
    Ok(ClusterLive { has_template, nodes, ..Default::default() })
}

/// The interfaces of the launch template, as [`super::efa_layout`] lays them out (the plan shows the same),
/// each in `groups`; in `subnet` where the template says it (an EKS node group's template must not: the
/// node group's subnets decide).
pub(super) fn interfaces(
    spec: &ClusterSpec,
    subnet: Option<&str>,
    groups: &[String],
) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
    let layout = super::efa_layout(spec);
    let single = layout.len() == 1;
    layout
        .into_iter()
        .map(|nic| {
            let request = LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .network_card_index(nic.card as i32)
                .device_index(nic.device as i32)
                .interface_type(nic.kind)
                .set_subnet_id(subnet.map(str::to_owned))
                .set_groups(Some(groups.to_vec()))
                .delete_on_termination(true);
            // EC2 refuses AssociatePublicIpAddress, even false, on a launch with more than one interface
            // (InvalidParameterCombination); there the private subnet (no public IPv4 on launch) decides.
            if single { request.associate_public_ip_address(false) } else { request }.build()
        })
        .collect()
}

pub async fn default_image(aws: &Aws) -> Result<String, CloudError> {
    const NAME: &str = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*";
    let out = aws
        .ec2
        .describe_images()
        .owners("amazon")
        .filters(filter("name", &[NAME]))
        .filters(filter("state", &["available"]))
        .send()
        .await
        .map_err(|e| api::error(&e).context("looking up the AWS Deep Learning Base GPU AMI"))?;
    let mut images: Vec<_> = out.images().iter().filter_map(|i| Some((i.creation_date().unwrap_or_default(), i.image_id()?))).collect();
    images.sort();
    images.last().map(|(_, id)| (*id).to_owned()).ok_or_else(|| {
        CloudError::other(format!(
            "no image is set and no AWS Deep Learning Base GPU AMI ({NAME}) is offered in {}: set image to an AMI id",
            aws.region
        ))
    })
}

/// What converge left behind, for the state: the nodes that exist.
#[derive(Debug, Default)]
pub struct Converged {
    pub nodes: Vec<Node>,
}

pub struct Options<'a> {
    pub tags: &'a BTreeMap<String, String>,
    pub stale_tags: &'a [String],
    pub retag: bool,
    pub timeout: Duration,
}

/// Creates the launch template if missing, launches the nodes that are missing, terminates the ones
/// beyond `node_count`, and waits for them. On error, whatever exists is reported with it.
pub async fn converge(ctx: &Context, aws: &Aws, spec: &ClusterSpec, o: &Options<'_>, census: &Census) -> Result<Converged, CloudError> {
    let name = &spec.name;
    let mut live = observe(aws, name, census).await?;
    census.gate()?;
    // The fabric's pieces are another resource's: read to join them, never changed.
    let fabric::Joined { security_group: sg, subnet, placement_group: group, .. } = fabric::joined(aws, &spec.fabric).await?;
    // An UltraServer cluster's Capacity Block, read once and checked before anything is made or launched.
    let ultraservers = ultraserver_reservations(aws, spec).await?;
    let mut lt_tags = o.tags.clone();
    lt_tags.insert("hpc:workload".into(), spec.workload.as_str().into());
    if ultraservers.is_some()
        && let Some(block) = &spec.reservation_id
    {
        lt_tags.insert(BLOCK_TAG.into(), block.clone());
    }
    if spec.image.is_none() {
        // An import must not pin the image the lookup chose: the configuration left it to the provider.
        lt_tags.insert(DEFAULT_IMAGE_TAG.into(), "true".into());
    }
    // The provider's own tags a node publishes (self-check) or is launched with (revision) are never removed.
    let stale: Vec<String> = o.stale_tags.iter().filter(|k| !node_only_tag(k)).cloned().collect();
    // A latest version of another revision (or of none: an earlier release made it, and may have set
    // AssociatePublicIpAddress beside several interfaces, which EC2 refuses) gets a new version; the nodes
    // launched after it (replacements, a rolling update's batches) take it.
    let revision = spec.revision();
    let outdated = live.template.as_ref().filter(|t| template_revision(t) != Some(revision.as_str()));
    if let Some(key) = &spec.ssh_public_key {
        if !live.key {
            import_key(aws, name, key, o.tags).await?;
        } else if outdated.is_some() && !live.public_key.as_deref().is_some_and(|k| same_key(k, key)) {
            // A key pair's material cannot change: the new key replaces it (running nodes keep theirs).
            delete_key(aws, name).await?;
            import_key(aws, name, key, o.tags).await?;
        }
    }
    if live.template.is_none() || outdated.is_some() {
        // An image the provider chose stays the template's until the configuration names one.
        let kept = outdated
            .filter(|_| spec.image.is_none() && live.template_tags.contains_key(DEFAULT_IMAGE_TAG))
            .and_then(|t| t.launch_template_data())
            .and_then(|d| d.image_id())
            .map(str::to_owned);
        let image = match (&spec.image, kept) {
            (Some(i), _) => i.clone(),
            (None, Some(kept)) => kept,
            (None, None) => default_image(aws).await?,
        };
        let data = template_data(spec, image, &subnet, &sg, group.clone(), ultraservers.is_some());
        let description = format!("{REVISION_PREFIX}{revision}");
        if let Some(id) = outdated.and_then(|t| t.launch_template_id()).map(str::to_owned) {
            aws.ec2
                .create_launch_template_version()
                .client_token(api::client_token())
                .launch_template_id(&id)
                .version_description(&description)
                .launch_template_data(data)
                .send()
                .await
                .map_err(|e| api::error(&e).context(format!("updating launch template {} to revision {revision}", template_name(name))))?;
            // Its tags follow the configuration (the default-image mark comes and goes with `image`).
            let mut gone = stale.clone();
            if spec.image.is_some() && live.template_tags.contains_key(DEFAULT_IMAGE_TAG) {
                gone.push(DEFAULT_IMAGE_TAG.into());
            }
            fabric::retag(aws, &[id], &fabric::named(&lt_tags, &template_name(name)), &gone).await?;
        } else {
            aws.ec2
                .create_launch_template()
                .client_token(api::client_token())
                .launch_template_name(template_name(name))
                .version_description(&description)
                .launch_template_data(data)
                .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &fabric::named(&lt_tags, &template_name(name))))
                .send()
                .await
                .map_err(|e| api::error(&e).context(format!("creating launch template {}", template_name(name))))?;
        }
        let made = template(aws, name, census).await?;
        live.has_template = made.is_some();
        live.template = made.map(|(v, _)| v);
    } else if o.retag {
        let id = live.template.as_ref().and_then(|t| t.launch_template_id()).unwrap_or_default().to_owned();
        fabric::retag(aws, &[id], &lt_tags, &stale).await?;
    }

    // Which nodes to keep, launch and terminate.
    let wanted: Vec<String> = crate::nodes::node_names(name, spec.node_count);
    let mut keep: BTreeMap<String, Node> = BTreeMap::new();
    let mut extra: Vec<String> = Vec::new();
    for node in live.nodes {
        if wanted.contains(&node.name) && !keep.contains_key(&node.name) {
            keep.insert(node.name.clone(), node);
        } else {
            extra.push(node.id);
        }
    }
    if o.retag && !keep.is_empty() {
        // Each node keeps its own revision and self-check tags: they are not in `o.tags`, and never stale.
        let ids: Vec<String> = keep.values().map(|n| n.id.clone()).collect();
        fabric::retag(aws, &ids, o.tags, &stale).await?;
    }
    let missing: Vec<(u32, String)> =
        wanted.iter().enumerate().filter(|(_, n)| !keep.contains_key(*n)).map(|(i, n)| (i as u32, n.clone())).collect();
    let mut launched = Vec::new();
    let mut result: Result<(), CloudError> = Ok(());
    // The fewest new nodes the capacity policy keeps: EC2's own all-or-nothing (MinCount) takes them.
    let need = spec.capacity_policy.min_new(keep.len() as u32, missing.len() as u32);
    for (batch, reservation) in launch_batches(spec, &missing, ultraservers.as_deref()) {
        let got = launched.len() as u32;
        let min = min_count(need, got, batch.len() as u32, ultraservers.is_some());
        let running = (keep.len() + launched.len()) as u32;
        match launch(ctx, aws, spec, &batch, reservation, min, running, o).await {
            Ok(nodes) => launched.extend(nodes),
            Err((nodes, e)) => {
                launched.extend(nodes);
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() && !extra.is_empty() {
        result = terminate(ctx, aws, &extra, o.timeout).await;
        if result.is_err() {
            // The ones not yet gone are still nodes of the cluster.
            launched.extend(nodes(aws, name, census).await.unwrap_or_default().into_iter().filter(|n| extra.contains(&n.id)));
        }
    }
    let mut all: Vec<Node> = keep.into_values().collect();
    all.extend(launched);
    match result {
        Ok(()) => Ok(Converged { nodes: all }),
        Err(e) => Err(e.map_message(|e| format!("{e} ({} of {} nodes exist)", all.len(), spec.node_count))),
    }
}

/// The launch template tag saying the configuration set no image (the provider looked one up).
pub const DEFAULT_IMAGE_TAG: &str = "hpc:default-image";

/// Tags each node has of its own, which no configuration sets and a retag never removes.
pub fn node_only_tag(key: &str) -> bool {
    key == SELFCHECK_TAG || key == REVISION_TAG
}

/// Whether two OpenSSH public keys are the same key (EC2 may give one back without its comment).
pub(super) fn same_key(a: &str, b: &str) -> bool {
    let key = |k: &str| k.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    key(a) == key(b)
}

/// What the launch template holds for `spec`: image, type, one EFA interface per network card, placement,
/// market, reservation, key pair and user data. `ultraservers`: the reservations are named at launch.
fn template_data(
    spec: &ClusterSpec,
    image: String,
    subnet: &str,
    sg: &str,
    group: Option<String>,
    ultraservers: bool,
) -> RequestLaunchTemplateData {
    let mut data = RequestLaunchTemplateData::builder()
        .image_id(image)
        .instance_type(spec.fabric.sku.name.into())
        .set_network_interfaces(Some(interfaces(spec, Some(subnet), &[sg.to_owned()])))
        .placement(
            LaunchTemplatePlacementRequest::builder()
                .availability_zone(spec.fabric.zone.clone().unwrap_or_default())
                .set_group_name(group)
                .build(),
        )
        .metadata_options({
            let options = LaunchTemplateInstanceMetadataOptionsRequest::builder().http_tokens(LaunchTemplateHttpTokensState::Required);
            // A node joining Slurm reads its node name from its Name tag in the instance metadata.
            if spec.slurm.is_some() {
                options.instance_metadata_tags(aws_sdk_ec2::types::LaunchTemplateInstanceMetadataTagsState::Enabled).build()
            } else {
                options.build()
            }
        });
    let market = match spec.capacity {
        CapacityType::Spot => Some(MarketType::Spot),
        CapacityType::CapacityBlock => Some(MarketType::CapacityBlock),
        _ => None,
    };
    if let Some(m) = market {
        data = data.instance_market_options(LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(m).build());
    }
    // A Capacity Block id (cb-...) is no capacity reservation: an UltraServer cluster names the block's
    // reservations at launch, one per NVLink domain.
    if let Some(r) = spec.reservation_id.as_ref().filter(|_| !ultraservers) {
        data = data.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(r).build())
                .build(),
        );
    }
    if spec.ssh_public_key.is_some() {
        data = data.key_name(key_name(&spec.name));
    }
    // The instance profile the self-check publishes its verdict with (node_identity), by ARN or name.
    if let Some(identity) = &spec.node_identity {
        let profile = aws_sdk_ec2::types::LaunchTemplateIamInstanceProfileSpecificationRequest::builder();
        let profile = if identity.starts_with("arn:") { profile.arn(identity) } else { profile.name(identity) };
        data = data.iam_instance_profile(profile.build());
    }
    if let Some(u) = crate::clouds::slurm::node_user_data(spec, 0) {
        data = data.user_data(crate::clouds::user_data::aws_encoded(u.expose()));
    }
    data.build()
}

/// The capacity reservations of the Capacity Block an UltraServer cluster launches into, one per UltraServer
/// in the order DescribeCapacityBlocks lists them; `None` for any other node type. Refused, before anything
/// is launched, when the block is not an UltraServer block of the node type's UltraServer type or holds fewer
/// UltraServers than `node_count` has NVLink domains.
pub async fn ultraserver_reservations(aws: &Aws, spec: &ClusterSpec) -> Result<Option<Vec<String>>, CloudError> {
    let Some(ultraserver) = super::ultraserver_type(spec.fabric.sku) else { return Ok(None) };
    let block = spec.reservation_id.as_deref().unwrap_or_default();
    let out = aws
        .ec2
        .describe_capacity_blocks()
        .capacity_block_ids(block)
        .send()
        .await
        .map_err(|e| api::error(&e).context(format!("reading Capacity Block {block}")))?;
    let found =
        out.capacity_blocks().iter().find(|b| b.capacity_block_id() == Some(block)).ok_or_else(|| {
            format!("Capacity Block {block} was not found in {}: set reservation_id to a block you bought there", aws.region)
        })?;
    let per = spec.nvlink_domain_nodes().unwrap_or(1);
    check_block(spec, ultraserver, block, found.ultraserver_type(), found.capacity_reservation_ids(), per).map(Some)
}

/// The domain -> reservation rule applied to what DescribeCapacityBlocks answered.
fn check_block(
    spec: &ClusterSpec,
    ultraserver: &str,
    block: &str,
    block_type: Option<&str>,
    reservations: &[String],
    per: u32,
) -> Result<Vec<String>, CloudError> {
    let domains = spec.nvlink_domains().len();
    match block_type {
        Some(t) if t == ultraserver => {}
        Some(other) => {
            return Err(format!(
                "Capacity Block {block} holds {other} UltraServers, not {ultraserver}: each NVLink domain of {per} {} nodes needs one \
                 {ultraserver}; nothing was launched",
                spec.fabric.sku.name
            )
            .into());
        }
        None => {
            return Err(format!(
                "Capacity Block {block} is a block of instances, not of UltraServers: {} launches only into {ultraserver} UltraServers; \
                 nothing was launched",
                spec.fabric.sku.name
            )
            .into());
        }
    }
    if reservations.len() < domains {
        return Err(format!(
            "Capacity Block {block} holds {} {ultraserver} UltraServer(s), but node_count = {} needs {domains} NVLink domains of {per} \
             nodes, one UltraServer each: buy a block with at least {domains} UltraServers or lower node_count; nothing was launched",
            reservations.len(),
            spec.node_count
        )
        .into());
    }
    Ok(reservations.to_vec())
}

/// RunInstances `MinCount` for a batch of `size` when the policy needs `need` new nodes and `got` came in the
/// batches before: what is still needed, at least 1, at most the batch (all-or-nothing: every batch whole).
/// An UltraServer's NVLink domain launches whole or not at all.
fn min_count(need: u32, got: u32, size: u32, ultraserver: bool) -> u32 {
    if ultraserver || size == 0 {
        return size;
    }
    need.saturating_sub(got).clamp(1, size)
}

/// The missing nodes as RunInstances batches: at most [`BATCH`] nodes each; for an UltraServer cluster, per
/// NVLink domain, each with that domain's capacity reservation.
fn launch_batches<'a>(
    spec: &ClusterSpec,
    missing: &[(u32, String)],
    reservations: Option<&'a [String]>,
) -> Vec<(Vec<String>, Option<&'a str>)> {
    let Some(reservations) = reservations else {
        return missing.chunks(BATCH).map(|c| (c.iter().map(|(_, n)| n.clone()).collect(), None)).collect();
    };
    let per = spec.nvlink_domain_nodes().unwrap_or(1);
    let mut by_domain: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (index, name) in missing {
        by_domain.entry(crate::nodes::domain_of(*index, per)).or_default().push(name.clone());
    }
    let mut out = Vec::new();
    for (domain, names) in by_domain {
        let reservation = reservations.get(domain as usize).map(String::as_str);
        out.extend(names.chunks(BATCH).map(|c| (c.to_vec(), reservation)));
    }
    out
}

pub(super) async fn import_key(aws: &Aws, cluster: &str, public_key: &str, tags: &BTreeMap<String, String>) -> Result<(), CloudError> {
    aws.ec2
        .import_key_pair()
        .key_name(key_name(cluster))
        .public_key_material(aws_sdk_ec2::primitives::Blob::new(public_key.trim().as_bytes()))
        .tag_specifications(tag_spec(ResourceType::KeyPair, tags))
        .send()
        .await
        .map_err(|e| api::error(&e).context(format!("importing ssh_public_key as key pair {}", key_name(cluster))))?;
    Ok(())
}

/// Launches one batch (MinCount `min`, MaxCount the batch: EC2 launches at least `min` or none), names the
/// nodes it launched and waits until they run. Fewer than the batch (EC2 had capacity for only some) is an
/// error naming InsufficientInstanceCapacity, with the nodes that came. `reservation` (an UltraServer's
/// capacity reservation) overrides the launch template's capacity reservation target. `running_before` is how
/// many of the cluster's nodes run already, for the progress line.
#[allow(clippy::too_many_arguments)]
async fn launch(
    ctx: &Context,
    aws: &Aws,
    spec: &ClusterSpec,
    names: &[String],
    reservation: Option<&str>,
    min: u32,
    running_before: u32,
    o: &Options<'_>,
) -> Result<Vec<Node>, (Vec<Node>, CloudError)> {
    let n = names.len() as i32;
    let where_ = spec.fabric.zone.as_deref().unwrap_or(&aws.region).to_owned();
    let mut tags = o.tags.clone();
    tags.insert(TAG.into(), spec.name.clone());
    // Each node records the configuration it is made with; a rolling update remakes the others.
    let revision = spec.revision();
    let mut node_tags = tags.clone();
    node_tags.insert(REVISION_TAG.into(), revision.clone());
    let target = reservation.map(|r| {
        CapacityReservationSpecification::builder()
            .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(r).build())
            .build()
    });
    let out = aws
        .ec2
        .run_instances()
        // One token for the batch, whatever the attempts (the SDK sends the request again as it was).
        .client_token(api::client_token())
        .launch_template(LaunchTemplateSpecification::builder().launch_template_name(template_name(&spec.name)).version("$Latest").build())
        .min_count(min as i32)
        .max_count(n)
        .set_capacity_reservation_specification(target)
        .tag_specifications(tag_spec(ResourceType::Instance, &node_tags))
        .tag_specifications(tag_spec(ResourceType::Volume, &tags))
        .send()
        .await
        .map_err(|e| {
            let into = reservation.map(|r| format!(" into capacity reservation {r}")).unwrap_or_default();
            (Vec::new(), api::error(&e).context(format!("launching {n} x {}{into} in {where_}{}", spec.fabric.sku.name, at_least(min, n))))
        })?;
    let launched: Vec<(String, Option<String>)> =
        out.instances().iter().filter_map(|i| Some((i.instance_id()?.to_owned(), i.private_ip_address().map(str::to_owned)))).collect();
    let ids: Vec<String> = launched.iter().map(|(id, _)| id.clone()).collect();
    let mut nodes = Vec::new();
    for ((id, private_ip), node) in launched.iter().zip(names) {
        let result = aws
            .ec2
            .create_tags()
            .resources(id)
            .tags(aws_sdk_ec2::types::Tag::builder().key(NODE_TAG).value(node).build())
            .tags(aws_sdk_ec2::types::Tag::builder().key("Name").value(node).build())
            .send()
            .await;
        let index = crate::nodes::node_index(&spec.name, node);
        nodes.push(Node {
            id: id.clone(),
            name: node.clone(),
            index,
            private_ip: private_ip.clone(),
            revision: Some(revision.clone()),
            ..Default::default()
        });
        if let Err(e) = result {
            // Untagged nodes would be lost track of: terminate the rest of the batch rather than leak them.
            let rest: Vec<String> = ids.iter().filter(|i| !nodes.iter().any(|n| &n.id == *i)).cloned().collect();
            let _ = aws.ec2.terminate_instances().set_instance_ids(Some(rest)).send().await;
            return Err((nodes, api::error(&e).context(format!("naming node {node} ({id})"))));
        }
    }
    let what = format!("{n} node(s) of {} to run", spec.name);
    let progress = crate::clouds::shared::Progress::new();
    // What EC2 did not launch of the batch had no capacity (MinCount let it launch fewer).
    let short = names.len().saturating_sub(ids.len()) as u32;
    let waited = crate::clouds::shared::wait_for(ctx, &what, o.timeout, || {
        let ids = ids.clone();
        let progress = &progress;
        async move {
            let out = aws
                .ec2
                .describe_instances()
                .set_instance_ids(Some(ids.clone()))
                .send()
                .await
                .map_err(|e| api::error(&e).context("reading new nodes"))?;
            let mut running = 0;
            for i in out.reservations().iter().flat_map(|r| r.instances()) {
                let state = i.state().and_then(|s| s.name()).cloned();
                match state {
                    Some(InstanceStateName::Running) => running += 1,
                    Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated) => {
                        let reason = i.state_reason().and_then(|r| r.message()).unwrap_or("no reason given");
                        let node = api::tag_map(i.tags()).get(NODE_TAG).cloned().unwrap_or_default();
                        let message = format!(
                            "node {node} ({}) went to {} instead of running: {reason}",
                            i.instance_id().unwrap_or_default(),
                            i.state().and_then(|s| s.name()).map(|s| s.as_str().to_owned()).unwrap_or_default()
                        );
                        // The state reason's code (`Server.InsufficientInstanceCapacity`) says what the kind is.
                        let code = i.state_reason().and_then(|r| r.code()).map(|c| c.strip_prefix("Server.").unwrap_or(c));
                        return Err(match code {
                            Some(c) => CloudError::new(api::kind_of(c), Some(c.to_owned()), message),
                            None => CloudError::other(message),
                        });
                    }
                    _ => {}
                }
            }
            progress.nodes(
                &spec.name,
                crate::clouds::shared::NodeCounts {
                    running: running_before.saturating_add(u32::try_from(running).unwrap_or(u32::MAX)),
                    total: spec.node_count,
                    starting: u32::try_from(ids.len().saturating_sub(running)).unwrap_or(u32::MAX),
                    pending_capacity: short,
                },
            );
            Ok((running == ids.len()).then_some(()))
        }
    })
    .await;
    match waited {
        Ok(()) if nodes.len() < names.len() => {
            let k = nodes.len();
            let e = format!(
                "launching {n} x {} in {where_}{}: EC2 launched {k} of {n}: InsufficientInstanceCapacity: there was capacity for \
                 {k} {} now, not for the other {}",
                spec.fabric.sku.name,
                at_least(min, n),
                spec.fabric.sku.name,
                names.len() - k
            );
            Err((nodes, CloudError::new(ErrorKind::NoCapacity, Some("InsufficientInstanceCapacity".into()), e)))
        }
        Ok(()) => Ok(nodes),
        Err(e) => Err((nodes, e)),
    }
}

/// ` (at least 2)` where a launch may take fewer than it asks for.
fn at_least(min: u32, n: i32) -> String {
    if (min as i32) < n { format!(" (at least {min})") } else { String::new() }
}

/// Terminates instances and waits until they are gone.
pub async fn terminate(ctx: &Context, aws: &Aws, ids: &[String], timeout: Duration) -> Result<(), CloudError> {
    for chunk in ids.chunks(1000) {
        aws.ec2
            .terminate_instances()
            .set_instance_ids(Some(chunk.to_vec()))
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("terminating {} node(s)", chunk.len())))?;
    }
    let ids = ids.to_vec();
    crate::clouds::shared::wait_for(ctx, &format!("{} node(s) to terminate", ids.len()), timeout, || {
        let ids = ids.clone();
        async move {
            let out = aws
                .ec2
                .describe_instances()
                .filters(filter("instance-id", &ids.iter().map(String::as_str).collect::<Vec<_>>()))
                .filters(filter("instance-state-name", &["pending", "running", "stopping", "stopped", "shutting-down"]))
                .send()
                .await
                .map_err(|e| api::error(&e).context("reading terminating nodes"))?;
            Ok(out.reservations().iter().all(|r| r.instances().is_empty()).then_some(()))
        }
    })
    .await
}

/// Terminates every node the census admits, then deletes the launch template and key pair if they are its.
pub async fn delete(ctx: &Context, aws: &Aws, cluster: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let live = find(aws, cluster, census).await?;
    let ids: Vec<String> = live.nodes.iter().map(|n| n.id.clone()).collect();
    if !ids.is_empty() {
        terminate(ctx, aws, &ids, timeout).await?;
    }
    if live.has_template {
        match aws.ec2.delete_launch_template().launch_template_name(template_name(cluster)).send().await {
            Ok(_) => {}
            Err(e) if api::error(&e).is_not_found() => {}
            Err(e) => return Err(api::error(&e).context(format!("deleting launch template {}", template_name(cluster)))),
        }
    }
    if !live.key {
        return Ok(());
    }
    delete_key(aws, cluster).await
}

pub(super) async fn delete_key(aws: &Aws, cluster: &str) -> Result<(), CloudError> {
    match aws.ec2.delete_key_pair().key_name(key_name(cluster)).send().await {
        Ok(_) => Ok(()),
        Err(e) if api::error(&e).is_not_found() => Ok(()),
        Err(e) => Err(api::error(&e).context(format!("deleting key pair {}", key_name(cluster)))),
    }
}

/// The nodes of `names` that exist and the census admits (one listing), in the order listed.
async fn named_nodes(aws: &Aws, cluster: &str, names: &[String], census: &Census) -> Result<Vec<Node>, CloudError> {
    let mut found = nodes(aws, cluster, census).await?;
    found.retain(|n| names.contains(&n.name));
    found.sort_by_key(|n| (n.index.unwrap_or(u32::MAX), n.id.clone()));
    Ok(found)
}

/// Day 2: terminates the named nodes (one TerminateInstances for all of them) and waits until they are
/// gone; the apply that follows launches them again under their names, into their reservation or
/// UltraServer. Names with no node the census admits are skipped.
pub async fn remove(
    ctx: &Context,
    aws: &Aws,
    cluster: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let ids: Vec<String> = named_nodes(aws, cluster, names, census).await?.into_iter().map(|n| n.id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    terminate(ctx, aws, &ids, timeout).await
}

/// Day 2: reboots the named nodes (one RebootInstances for all of them) and waits until they all run.
pub async fn reboot(
    ctx: &Context,
    aws: &Aws,
    cluster: &str,
    names: &[String],
    timeout: Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let found = named_nodes(aws, cluster, names, census).await?;
    if found.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = found.iter().map(|n| n.id.clone()).collect();
    let shown = found.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ");
    for chunk in ids.chunks(1000) {
        aws.ec2
            .reboot_instances()
            .set_instance_ids(Some(chunk.to_vec()))
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("rebooting {shown}")))?;
    }
    crate::clouds::shared::wait_for(ctx, &format!("{shown} to run again after the reboot"), timeout, || {
        let ids = ids.clone();
        async move {
            let out = aws
                .ec2
                .describe_instances()
                .filters(filter("instance-id", &ids.iter().map(String::as_str).collect::<Vec<_>>()))
                .send()
                .await
                .map_err(|e| api::error(&e).context("reading rebooted nodes"))?;
            let mut running = 0;
            for i in out.reservations().iter().flat_map(|r| r.instances()) {
                match i.state().and_then(|s| s.name()) {
                    Some(InstanceStateName::Running) => running += 1,
                    Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated) => {
                        let node = api::tag_map(i.tags()).get(NODE_TAG).cloned().unwrap_or_default();
                        return Err(
                            format!("node {node} ({}) was terminated during its reboot", i.instance_id().unwrap_or_default()).into()
                        );
                    }
                    _ => {}
                }
            }
            Ok((running == ids.len()).then_some(()))
        }
    })
    .await
}

/// The configuration an import reconstructs from the launch template, its tags and the nodes.
pub async fn imported_config(
    aws: &Aws,
    cluster: &str,
    live: &ClusterLive,
    defaults: &BTreeMap<String, String>,
) -> Result<(Value, BTreeMap<String, String>), CloudError> {
    let Some(version) = &live.template else {
        return Err(format!("no cluster named {cluster:?} in {}: no launch template {}", aws.region, template_name(cluster)).into());
    };
    // Its tags came with it; the nodes' own (`hpc:revision`, `hpc:selfcheck`) are never read as the user's.
    let tags = live.template_tags.clone();
    let fabric_name = tags
        .get(fabric::TAG)
        .cloned()
        .ok_or_else(|| CloudError::other(format!("launch template {} has no {} tag", template_name(cluster), fabric::TAG)))?;
    let data = version
        .launch_template_data()
        .ok_or_else(|| CloudError::other(format!("launch template {} has no data", template_name(cluster))))?;
    let instance_type = data.instance_type().map(|t| t.as_str().to_owned()).unwrap_or_default();
    let zone = data.placement().and_then(|p| p.availability_zone()).unwrap_or_default();
    let placement = if data.placement().and_then(|p| p.group_name()).is_some_and(|g| !g.is_empty()) { "cluster" } else { "none" };
    let efa = data.network_interfaces().iter().filter(|n| matches!(n.interface_type(), Some("efa" | "efa-only"))).count();
    let market = data.instance_market_options().and_then(|m| m.market_type()).map(|m| m.as_str().to_owned());
    // An UltraServer cluster's template names no reservation; its tag names the Capacity Block.
    let reservation = data
        .capacity_reservation_specification()
        .and_then(|c| c.capacity_reservation_target())
        .and_then(|t| t.capacity_reservation_id())
        .or(tags.get(BLOCK_TAG).map(String::as_str));
    let capacity = match (market.as_deref(), reservation) {
        (Some("spot"), _) => "spot",
        (Some("capacity-block"), _) => "capacity-block",
        (_, Some(_)) => "reservation",
        _ => "on-demand",
    };
    let whole = data.user_data().and_then(crate::clouds::user_data::decoded);
    // The Slurm join the nodes were made with, key included: adopted, never made anew.
    let slurm = crate::clouds::slurm::join_value(whole.as_deref());
    let user_data = crate::clouds::slurm::user_part(whole);
    let ssh = match data.key_name() {
        Some(k) => aws
            .ec2
            .describe_key_pairs()
            .key_names(k)
            .include_public_key(true)
            .send()
            .await
            .ok()
            .and_then(|o| o.key_pairs().first().and_then(|p| p.public_key()).map(|p| p.trim().to_owned())),
        None => None,
    };
    let user = crate::clouds::shared::user_tags(crate::catalog::Cloud::Aws, &tags, defaults);
    let fabric_ref = Value::object([
        ("id", Value::from(api::resource_id(&aws.region, &fabric_name))),
        ("cloud", Value::from("aws")),
        ("region", Value::from(aws.region.as_str())),
        ("zone", Value::from(zone)),
        ("name", Value::from(fabric_name.as_str())),
        ("instance_type", Value::from(instance_type.as_str())),
        ("placement", Value::from(placement)),
    ]);
    let config = Value::object([
        ("name", Value::from(cluster)),
        ("fabric", fabric_ref),
        ("node_count", Value::int(live.nodes.len() as i64)),
        ("capacity_type", Value::from(capacity)),
        ("reservation_id", Value::from(reservation.map(str::to_owned))),
        ("image", if tags.contains_key(DEFAULT_IMAGE_TAG) { Value::Null } else { Value::from(data.image_id().map(str::to_owned)) }),
        ("user_data", Value::from(user_data)),
        ("slurm", slurm),
        ("ssh_public_key", Value::from(ssh)),
        ("node_identity", Value::from(data.iam_instance_profile().and_then(|p| p.arn().or(p.name())).map(str::to_owned))),
        ("workload", Value::from(tags.get("hpc:workload").cloned())),
        // Ethernet node types have no EFA count to set (the planner refuses one).
        ("rdma_interfaces", if efa == 0 { Value::Null } else { Value::int(efa as i64) }),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]);
    Ok((config, tags))
}

/// The node piece of a cluster's expansion.
const NODES: &str = "aws_instance";

/// A cluster state brought to what exists: node count, names and GPUs as found (on an UltraServer node
/// type, each NVLink domain's node piece with its own nodes); a launch template that is gone (with its
/// interfaces) marked missing.
fn refreshed_cluster(state: &Value, live: &cluster::ClusterLive) -> Value {
    let nodes = live.addresses();
    let out = with_domain_nodes(&shared::with_nodes(state, Cloud::Aws, NODES, &nodes), &nodes);
    if live.has_template {
        return out;
    }
    shared::with_missing(&out, |k| !k.starts_with("aws_launch_template"))
}

/// Nodes per NVLink domain of a cluster state whose node type is an UltraServer's (one piece per domain).
fn domain_nodes(state: &Value) -> Option<u32> {
    let sku = crate::catalog::find_sku(Cloud::Aws, state.get("instance_type").as_str()?)?;
    super::ultraserver_type(sku)?;
    sku.nvlink_domain.map(|d| d.nodes)
}

/// On an UltraServer node type, each domain's node piece (`<cluster>-nvl<k>`) counts and names the nodes of
/// that domain that exist, and is marked missing when none does; other states are returned as they are.
fn with_domain_nodes(state: &Value, nodes: &[shared::NodeAddress]) -> Value {
    let Some(per) = domain_nodes(state) else { return state.clone() };
    let name = state.get("name").as_str().unwrap_or_default().to_owned();
    let Some(pieces) = state.get("expansion").as_list() else { return state.clone() };
    let index = |node: &str| crate::nodes::node_index(&name, node);
    let domain = |piece: &str| crate::nodes::domain_index(&name, piece);
    let pieces: Vec<Value> = pieces
        .iter()
        .map(|p| {
            let k = p.get("name").as_str().and_then(domain);
            let (Some(k), Some(NODES)) = (k, p.get("kind").as_str()) else { return p.clone() };
            let mut mine: Vec<u32> =
                nodes.iter().filter_map(|n| index(&n.name)).filter(|i| crate::nodes::domain_of(*i, per) == k).collect();
            mine.sort_unstable();
            mine.dedup();
            let whole: Vec<u32> = crate::nodes::whole_domain(k, per).collect();
            let names = if mine == whole {
                crate::nodes::node_range(&name, &mine)
            } else {
                mine.iter().map(|i| crate::nodes::node_name(&name, *i)).collect::<Vec<_>>().join(", ")
            };
            let patched = shared::patch_piece(&Value::list([p.clone()]), NODES, Some(mine.len() as i64), &[("names", names)]);
            let patched = patched.as_list().and_then(|l| l.first().cloned()).unwrap_or_else(|| p.clone());
            if mine.is_empty() { shared::marked_missing(&patched) } else { patched }
        })
        .collect();
    shared::with_attr(state, "expansion", Value::list(pieces))
}

/// The state after a successful apply: where the plan left `nodes` (or the day-2 maps: `node_revisions`,
/// `unhealthy_nodes`, `scheduled_maintenance`, `selfcheck`) unknown, the nodes as they now are.
fn with_addresses(state: &Value, planned: &Value, nodes: &[shared::NodeAddress]) -> Value {
    let mut out = state.clone();
    if planned.get("nodes").is_unknown() {
        out = shared::with_attr(&out, "nodes", shared::nodes_value(nodes));
    }
    for (attr, value) in shared::node_day2(state, nodes) {
        if planned.get(&attr).is_unknown() {
            out = shared::with_attr(&out, &attr, value);
        }
    }
    out
}

#[async_trait]
impl Backend<ClusterSpec> for backend::Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), CloudError> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    fn id(&self, spec: &ClusterSpec) -> Option<String> {
        Some(api::resource_id(&spec.fabric.region, &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", fabric_region(v))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, ClusterSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        let stale = change.stale_tags();
        let options = cluster::Options { tags: change.tags, stale_tags: &stale, retag: change.retag(), timeout: step.timeout };
        match cluster::converge(step.ctx, &client, spec, &options, step.census).await {
            Ok(converged) => {
                let live = cluster::ClusterLive { has_template: true, nodes: converged.nodes, ..Default::default() };
                Outcome::done(with_addresses(change.state, change.planned, &live.addresses()))
            }
            // The nodes that exist are kept in state.
            Err(e) => match cluster::observe(&client, &spec.name, step.census).await {
                Ok(live) => Outcome::failed(refreshed_cluster(change.state, &live), e),
                Err(_) => Outcome::failed(change.state.clone(), e),
            },
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&ClusterSpec>) -> Outcome {
        let name = prior.get("name").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, fabric_region(prior)).await;
        let Err(e) = cluster::delete(step.ctx, &client, name, step.timeout, step.census).await else {
            return Outcome::done(Value::Null);
        };
        // What is left stays in state.
        let left = match cluster::observe(&client, name, step.census).await {
            Ok(live) if live.is_empty() => Value::Null,
            Ok(live) => refreshed_cluster(prior, &live),
            Err(_) => prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&ClusterSpec>) -> Result<Option<Value>, CloudError> {
        let name = state.get("name").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, fabric_region(state)).await;
        let live = cluster::refresh(&client, name, step.census).await?;
        Ok((!live.is_empty()).then(|| refreshed_cluster(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS cluster id: give \"aws/<region>/<cluster name>\", e.g. \"aws/us-east-1/train-nodes\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = cluster::observe(&client, name, step.census).await.map_err(ImportError::failed)?;
        let (config, _) = cluster::imported_config(&client, name, &live, step.default_tags).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[async_trait]
impl ClusterBackend for backend::Aws {
    async fn remove_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        cluster::remove(step.ctx, &client, &spec.name, names, step.timeout, step.census).await
    }

    async fn reboot_nodes(&self, step: &Step<'_>, spec: &ClusterSpec, names: &[String]) -> Result<(), CloudError> {
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        cluster::reboot(step.ctx, &client, &spec.name, names, step.timeout, step.census).await
    }

    fn node_piece(&self) -> &'static str {
        NODES
    }

    async fn look_for_nodes(&self, step: &Step<'_>, spec: &ClusterSpec) -> Result<(), CloudError> {
        let client = api::connect(step.ctx, &spec.fabric.region).await;
        cluster::find(&client, &spec.name, step.census).await.map(|_| ())
    }

    fn upgrade(&self, version: i64, state: Value) -> Value {
        without_public_ip_flag(version, state)
    }

    fn quota(&self, spec: &ClusterSpec) -> Option<QuotaFamily> {
        quota::family(spec)
    }

    async fn read_quota(&self, ctx: &Context, family: &QuotaFamily) -> Result<QuotaReading, CloudError> {
        let client = api::connect(ctx, &family.scope).await;
        quota::read(&client, family).await
    }
}

/// State written before schema version 1 describes an AWS launch template whose primary interface sets
/// associate_public_ip_address beside the EFA interfaces; EC2 refuses that, this release sends no such flag
/// (and gives an existing template a new version without it), so the description loses it too.
fn without_public_ip_flag(version: i64, state: Value) -> Value {
    if version >= 1 {
        return state;
    }
    let Value::Map(mut map) = state else { return state };
    let Some(Value::List(pieces)) = map.get("expansion").cloned() else { return Value::Map(map) };
    let several = pieces.iter().filter(|p| p.get("kind").as_str() == Some("aws_launch_template.network_interfaces")).count() > 1;
    if !several {
        return Value::Map(map);
    }
    let pieces = pieces
        .into_iter()
        .map(|p| match p {
            Value::Map(mut piece) => {
                if let Some(Value::Map(settings)) = piece.get_mut("settings") {
                    settings.remove("associate_public_ip_address");
                }
                Value::Map(piece)
            }
            other => other,
        })
        .collect();
    map.insert("expansion".into(), Value::List(pieces));
    Value::Map(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Cloud;
    use crate::model::{FabricRef, Placement, Workload};
    use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat};

    fn spec(instance_type: &str, nodes: u32, reservation: &str) -> ClusterSpec {
        ClusterSpec {
            day2: Default::default(),
            capacity_policy: crate::model::CapacityPolicy::AllOrNothing,
            user_data_version: None,
            name: "gb".into(),
            fabric: FabricRef {
                name: "fab".into(),
                cloud: Cloud::Aws,
                region: "us-east-1".into(),
                zone: Some("us-east-1a".into()),
                sku: crate::catalog::find_sku(Cloud::Aws, instance_type).unwrap(),
                placement: Placement::None,
            },
            own_fabric: None,
            gpu: None,
            node_count: nodes,
            capacity: CapacityType::CapacityBlock,
            reservation_id: Some(reservation.into()),
            image: Some("ami-0arm64".into()),
            user_data: None,
            user_data_write_only: false,
            ssh_public_key: None,
            node_identity: None,
            workload: Workload::Pretraining,
            rdma_interfaces: 16,
            tags: Default::default(),
            running_groups: Vec::new(),
            slurm: None,
        }
    }

    fn missing(indices: impl IntoIterator<Item = u32>) -> Vec<(u32, String)> {
        indices.into_iter().map(|i| (i, format!("gb-{i}"))).collect()
    }

    #[test]
    fn each_nvlink_domain_launches_into_its_own_ultraservers_reservation_as_the_plan_shows() {
        let s = spec("p6e-gb200.36xlarge", 54, "cb-1");
        let reservations: Vec<String> = ["cr-a", "cr-b", "cr-c", "cr-d"].map(String::from).to_vec();
        let batches = launch_batches(&s, &missing(0..54), Some(&reservations));
        let shape: Vec<(usize, &str, &str, Option<&str>)> =
            batches.iter().map(|(names, r)| (names.len(), names[0].as_str(), names.last().unwrap().as_str(), *r)).collect();
        assert_eq!(
            shape,
            [(18, "gb-0", "gb-17", Some("cr-a")), (18, "gb-18", "gb-35", Some("cr-b")), (18, "gb-36", "gb-53", Some("cr-c"))]
        );
        // The plan's node pieces are the same domains, in the same order.
        let planned: Vec<String> = crate::clouds::aws::cluster(&s, &crate::model::Defaults::default())
            .into_iter()
            .filter(|p| p.kind == "aws_instance")
            .map(|p| p.settings["capacity_reservation_target"].clone())
            .collect();
        assert_eq!(planned.len(), batches.len());
        assert!(planned[2].starts_with("UltraServer 3 of cb-1"), "{planned:?}");
        // A lost node goes back into its own domain's reservation; a new domain into the next one.
        assert_eq!(launch_batches(&s, &missing([20]), Some(&reservations)), [(vec!["gb-20".to_owned()], Some("cr-b"))]);
        assert_eq!(launch_batches(&s, &missing(36..54), Some(&reservations))[0].1, Some("cr-c"));
        // Other node types: batches of up to 100, no reservation override.
        let p5 = spec("p5.48xlarge", 150, "cr-x");
        let plain: Vec<(usize, Option<&str>)> = launch_batches(&p5, &missing(0..150), None).iter().map(|(n, r)| (n.len(), *r)).collect();
        assert_eq!(plain, [(100, None), (50, None)]);
    }

    #[test]
    fn min_count_is_what_the_policy_still_needs_at_least_one_at_most_the_batch() {
        use crate::model::CapacityPolicy::{AllOrNothing, AtLeast, KeepPartial};
        // One batch of 4 missing nodes, none running.
        assert_eq!(min_count(AllOrNothing.min_new(0, 4), 0, 4, false), 4);
        assert_eq!(min_count(AtLeast(2).min_new(0, 4), 0, 4, false), 2);
        assert_eq!(min_count(KeepPartial.min_new(0, 4), 0, 4, false), 1);
        // Two running already cover at-least 2: any one more is kept.
        assert_eq!(min_count(AtLeast(2).min_new(2, 2), 0, 2, false), 1);
        // 150 missing in batches of 100 and 50: all-or-nothing takes each whole; at-least 120 needs 20 more
        // after the first 100, and then any.
        let need = AllOrNothing.min_new(0, 150);
        assert_eq!((min_count(need, 0, 100, false), min_count(need, 100, 50, false)), (100, 50));
        let need = AtLeast(120).min_new(0, 150);
        assert_eq!((min_count(need, 0, 100, false), min_count(need, 100, 50, false)), (100, 20));
        assert_eq!(min_count(need, 130, 20, false), 1);
        // An NVLink domain launches whole.
        assert_eq!(min_count(1, 0, 18, true), 18);
    }

    #[test]
    fn a_block_with_fewer_ultraservers_than_domains_or_of_another_type_is_refused() {
        let s = spec("p6e-gb200.36xlarge", 54, "cb-1");
        let two: Vec<String> = ["cr-a", "cr-b"].map(String::from).to_vec();
        let e = check_block(&s, "u-p6e-gb200x72", "cb-1", Some("u-p6e-gb200x72"), &two, 18).unwrap_err().to_string();
        for part in [
            "Capacity Block cb-1",
            "holds 2 u-p6e-gb200x72 UltraServer(s)",
            "node_count = 54 needs 3 NVLink domains",
            "nothing was launched",
        ] {
            assert!(e.contains(part), "{part:?} not in {e}");
        }
        let e = check_block(&s, "u-p6e-gb200x72", "cb-1", Some("u-p6e-gb200x36"), &two, 18).unwrap_err().to_string();
        assert!(e.contains("u-p6e-gb200x36"), "{e}");
        let e = check_block(&s, "u-p6e-gb200x72", "cb-1", None, &two, 18).unwrap_err().to_string();
        assert!(e.contains("not of UltraServers"), "{e}");
        let three: Vec<String> = ["cr-a", "cr-b", "cr-c"].map(String::from).to_vec();
        assert_eq!(check_block(&s, "u-p6e-gb200x72", "cb-1", Some("u-p6e-gb200x72"), &three, 18).unwrap(), three);
    }

    fn at(text: &str) -> DateTime {
        DateTime::from_str(text, DateTimeFormat::DateTime).unwrap()
    }

    fn check(status: &str, since: Option<&str>) -> InstanceStatusSummary {
        let detail = aws_sdk_ec2::types::InstanceStatusDetails::builder()
            .name(aws_sdk_ec2::types::StatusName::Reachability)
            .status(if status == "impaired" { aws_sdk_ec2::types::StatusType::Failed } else { aws_sdk_ec2::types::StatusType::Passed })
            .set_impaired_since(since.map(at))
            .build();
        InstanceStatusSummary::builder().status(status.into()).details(detail).build()
    }

    fn event(code: &str, description: &str, not_before: Option<&str>) -> aws_sdk_ec2::types::InstanceStatusEvent {
        aws_sdk_ec2::types::InstanceStatusEvent::builder()
            .code(code.into())
            .description(description)
            .set_not_before(not_before.map(at))
            .build()
    }

    fn windowed(code: &str, from: &str, to: &str) -> aws_sdk_ec2::types::InstanceStatusEvent {
        aws_sdk_ec2::types::InstanceStatusEvent::builder()
            .code(code.into())
            .description("The instance is scheduled for a reboot")
            .not_before(at(from))
            .not_after(at(to))
            .build()
    }

    fn unhealthy(status: &InstanceStatus) -> Option<String> {
        condition(status).unhealthy
    }

    /// EC2's answers are typed, but their strings and times are the cloud's: any tags, names, event codes,
    /// descriptions and times (to the ends of i64) read as a node and a condition without a panic.
    #[test]
    fn any_instance_and_status_answer_reads_without_a_panic() {
        use crate::fuzz::{check, hostile_str};
        use aws_sdk_ec2::types::{Instance, InstanceStatusDetails, InstanceStatusEvent, LaunchTemplateVersion, Placement, Tag};
        use proptest::prelude::*;
        let text = || {
            prop_oneof![
                hostile_str(),
                proptest::sample::select(vec![
                    "impaired",
                    "ok",
                    "instance-stop",
                    "system-reboot",
                    "hpc:node",
                    "hpc:revision",
                    "train-3",
                    "[Completed] x"
                ])
                .prop_map(str::to_owned)
            ]
        };
        let time =
            prop_oneof![Just(i64::MIN), Just(i64::MAX), any::<i64>(), -100_000_000_000i64..100_000_000_000].prop_map(DateTime::from_secs);
        let strategy = (proptest::collection::vec((text(), text()), 0..4), text(), text(), text(), time.clone(), time);
        check("node_of/condition", strategy, |(tags, name, code, description, from, to)| {
            let tags: Vec<Tag> = tags.into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
            let i = Instance::builder()
                .set_tags(Some(tags))
                .instance_id(&name)
                .placement(Placement::builder().availability_zone(&code).build())
                .build();
            let _ = (node_of(&name, &i), node_of("train", &i), api::tag_map(i.tags()), api::kind_of(&code));
            let summary = InstanceStatusSummary::builder()
                .status(code.as_str().into())
                .details(InstanceStatusDetails::builder().impaired_since(from).build())
                .build();
            let event =
                InstanceStatusEvent::builder().code(code.as_str().into()).description(&description).not_before(from).not_after(to).build();
            let status = InstanceStatus::builder().system_status(summary.clone()).instance_status(summary).events(event).build();
            let _ = condition(&status);
            let _ = template_revision(&LaunchTemplateVersion::builder().version_description(&description).build());
            Ok(())
        });
    }

    #[test]
    fn impaired_checks_and_pending_stops_are_reasons_with_their_times_and_carried_out_events_are_not() {
        let healthy = InstanceStatus::builder().system_status(check("ok", None)).instance_status(check("ok", None)).build();
        assert_eq!(condition(&healthy), Condition::default());
        let system = InstanceStatus::builder()
            .system_status(check("impaired", Some("2026-12-01T10:02:37.123Z")))
            .instance_status(check("initializing", None))
            .build();
        assert_eq!(unhealthy(&system).as_deref(), Some("system status check impaired since 2026-12-01T10:02Z"));
        let both = InstanceStatus::builder()
            .system_status(check("impaired", None))
            .instance_status(check("impaired", Some("2026-12-02T08:00:00Z")))
            .events(event("instance-retirement", "The instance is running on degraded hardware", Some("2026-12-05T00:00:00Z")))
            .events(event("system-reboot", "[Completed] scheduled reboot", Some("2026-11-01T00:00:00Z")))
            .events(event("instance-stop", "[Canceled] scheduled stop", Some("2026-11-02T00:00:00Z")))
            .build();
        assert_eq!(
            condition(&both),
            Condition {
                unhealthy: Some(
                    "system status check impaired; instance status check impaired since 2026-12-02T08:00Z; scheduled instance-retirement \
                     from 2026-12-05T00:00Z"
                        .into()
                ),
                maintenance: None
            }
        );
        let stop = InstanceStatus::builder().events(event("instance-stop", "The instance is running on degraded hardware", None)).build();
        assert_eq!(unhealthy(&stop).as_deref(), Some("scheduled instance-stop"));
    }

    #[test]
    fn scheduled_reboots_and_system_maintenance_are_maintenance_with_their_window_not_reasons() {
        let reboot = InstanceStatus::builder()
            .system_status(check("ok", None))
            .events(windowed("system-reboot", "2026-12-05T00:00:00Z", "2026-12-05T02:00:00Z"))
            .events(windowed("instance-reboot", "2026-12-06T00:00:00Z", "2026-12-06T02:00:00Z"))
            .build();
        assert_eq!(
            condition(&reboot),
            Condition {
                unhealthy: None,
                maintenance: Some(
                    "scheduled system-reboot from 2026-12-05T00:00Z to 2026-12-05T02:00Z; scheduled instance-reboot from \
                     2026-12-06T00:00Z to 2026-12-06T02:00Z"
                        .into()
                )
            }
        );
        let only_event = InstanceStatus::builder().events(event("system-maintenance", "scheduled maintenance", None)).build();
        assert_eq!(condition(&only_event).maintenance.as_deref(), Some("scheduled system-maintenance"));
        assert_eq!(unhealthy(&only_event), None);
        // Maintenance beside an impaired check: both said, each in its place.
        let impaired = InstanceStatus::builder()
            .instance_status(check("impaired", None))
            .events(windowed("system-maintenance", "2026-12-05T00:00:00Z", "2026-12-05T02:00:00Z"))
            .build();
        let c = condition(&impaired);
        assert_eq!(
            (c.unhealthy.as_deref(), c.maintenance.as_deref()),
            (Some("instance status check impaired"), Some("scheduled system-maintenance from 2026-12-05T00:00Z to 2026-12-05T02:00Z"))
        );
    }

    #[test]
    fn the_nodes_own_tags_are_never_stale_and_keys_compare_without_their_comment() {
        assert!(node_only_tag("hpc:selfcheck") && node_only_tag("hpc:revision") && !node_only_tag("hpc:cluster"));
        assert!(same_key("ssh-ed25519 AAAAC3Nza ml@example", "ssh-ed25519 AAAAC3Nza"));
        assert!(!same_key("ssh-ed25519 AAAAC3Nza ml@example", "ssh-ed25519 AAAAC3Nzb ml@example"));
    }

    fn piece(kind: &str, name: &str) -> Value {
        Value::object([
            ("kind", Value::from(kind)),
            ("name", Value::from(name)),
            ("count", Value::int(1)),
            ("settings", Value::object([("names", Value::from("x")), ("data_repository_path", Value::from("s3://old"))])),
        ])
    }

    fn missing_pieces(state: &Value) -> Vec<String> {
        let pieces = state.get("expansion").as_list().unwrap_or_default().to_vec();
        pieces
            .iter()
            .filter(|p| p.get("settings").get("missing").is_present())
            .map(|p| p.get("kind").as_str().unwrap().to_owned())
            .collect()
    }

    fn cluster_state() -> Value {
        Value::object([
            ("name", Value::from("train")),
            ("fabric", Value::object([("region", Value::from("us-east-1"))])),
            ("instance_type", Value::from("p5.48xlarge")),
            ("node_count", Value::int(3)),
            (
                "expansion",
                Value::list([
                    piece("aws_key_pair", "train-key"),
                    piece("aws_launch_template", "train-lt"),
                    piece("aws_launch_template.network_interfaces", "train-lt card 0"),
                    piece("aws_instance", "train"),
                ]),
            ),
        ])
    }

    fn live(has_template: bool) -> cluster::ClusterLive {
        let node = |i: u32| cluster::Node {
            id: format!("i-{i}"),
            name: format!("train-{i}"),
            index: Some(i),
            private_ip: Some(format!("10.0.0.{i}")),
            ..Default::default()
        };
        cluster::ClusterLive { has_template, nodes: vec![node(1), node(0)], ..Default::default() }
    }

    #[test]
    fn a_cluster_refresh_marks_a_deleted_launch_template_and_its_interfaces_missing() {
        let out = refreshed_cluster(&cluster_state(), &live(false));
        assert_eq!(missing_pieces(&out), ["aws_launch_template", "aws_launch_template.network_interfaces"]);
        assert_eq!(out.get("node_count"), &Value::int(2));
        let names: Vec<&str> = out.get("node_names").as_list().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert_eq!(names, ["train-0", "train-1"]);
        let instances = &out.get("expansion").as_list().unwrap()[3];
        assert_eq!(instances.get("count"), &Value::int(2));
        assert_eq!(instances.get("settings").get("names").as_str(), Some("train-0 .. train-1"));
    }

    #[test]
    fn a_cluster_refresh_with_its_launch_template_marks_nothing() {
        let out = refreshed_cluster(&cluster_state(), &live(true));
        assert!(missing_pieces(&out).is_empty(), "{:?}", missing_pieces(&out));
        assert_eq!(out.get("nodes").as_list().unwrap()[0].get("id").as_str(), Some("i-0"));
    }

    #[test]
    fn an_ultraserver_cluster_refresh_counts_each_nvlink_domains_own_nodes() {
        let state = Value::object([
            ("name", Value::from("gb")),
            ("instance_type", Value::from("p6e-gb200.36xlarge")),
            (
                "expansion",
                Value::list([piece("aws_launch_template", "gb-lt"), piece("aws_instance", "gb-nvl0"), piece("aws_instance", "gb-nvl1")]),
            ),
        ]);
        let node = |i: u32| cluster::Node { id: format!("i-{i}"), name: format!("gb-{i}"), index: Some(i), ..Default::default() };
        let pieces = |nodes: Vec<cluster::Node>| {
            let out = refreshed_cluster(&state, &cluster::ClusterLive { has_template: true, nodes, ..Default::default() });
            out.get("expansion").as_list().unwrap()[1..]
                .iter()
                .map(|p| (p.get("count").clone(), p.get("settings").get("names").as_str().unwrap().to_owned()))
                .collect::<Vec<_>>()
        };
        // Node gb-20 lost: its domain shows 17, the other its whole 18.
        let found = pieces((0..36).filter(|i| *i != 20).map(node).collect());
        assert_eq!(found[0], (Value::int(18), "gb-0 .. gb-17".to_owned()));
        assert_eq!(found[1].0, Value::int(17));
        assert!(found[1].1.starts_with("gb-18, gb-19, gb-21"), "{:?}", found[1]);
        // A domain with no node left is missing.
        let out = refreshed_cluster(
            &state,
            &cluster::ClusterLive { has_template: true, nodes: (0..18).map(node).collect(), ..Default::default() },
        );
        assert_eq!(missing_pieces(&out), ["aws_instance"]);
        assert_eq!(out.get("node_count"), &Value::int(18));
    }

    #[test]
    fn nodes_are_filled_in_only_where_the_plan_left_them_unknown() {
        let nodes = live(true).addresses();
        let state = Value::object([("nodes", Value::Null)]);
        let unknown = Value::object([("nodes", Value::Unknown)]);
        assert_eq!(with_addresses(&state, &unknown, &nodes).get("nodes").as_list().map(<[Value]>::len), Some(2));
        assert_eq!(with_addresses(&state, &state, &nodes), state);
        // The day-2 maps likewise: each node's revision, its health and its self-check verdict.
        let mut nodes = nodes;
        nodes[0].revision = Some("r2".into());
        nodes[0].health = Some("system status check impaired since 2026-12-01T10:02Z".into());
        nodes[1].selfcheck = Some("ok".into());
        nodes[1].maintenance = Some("scheduled system-reboot from 2026-12-05T00:00Z to 2026-12-05T02:00Z".into());
        let unknown = Value::object([
            ("node_revisions", Value::Unknown),
            ("unhealthy_nodes", Value::Unknown),
            ("scheduled_maintenance", Value::Unknown),
            ("selfcheck", Value::Unknown),
        ]);
        let out = with_addresses(&Value::object([("revision", Value::from("r1"))]), &unknown, &nodes);
        assert_eq!(out.get("node_revisions").get("train-0").as_str(), Some("r2"));
        assert_eq!(out.get("node_revisions").get("train-1").as_str(), Some("r1"), "a node without its own takes the state's");
        assert_eq!(out.get("unhealthy_nodes").as_map().map(|m| m.keys().cloned().collect::<Vec<_>>()), Some(vec!["train-0".to_owned()]));
        assert_eq!(out.get("selfcheck").get("train-1").as_str(), Some("ok"));
        assert_eq!(
            out.get("scheduled_maintenance").get("train-1").as_str(),
            Some("scheduled system-reboot from 2026-12-05T00:00Z to 2026-12-05T02:00Z"),
            "maintenance is reported, and is no reason"
        );
    }
}
