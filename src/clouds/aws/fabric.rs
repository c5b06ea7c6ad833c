//! `hpc_gpu_fabric` on AWS: VPC and subnet (unless given), cluster placement group, EFA security group
//! with self-referencing all-traffic rules. Every piece carries `hpc:fabric = <name>`; the security group
//! also records the subnet and node type, so clusters, filesystems and imports find everything again.
//! Apply converges (creates what is missing), so a failed create resumes and drift is repaired. Only pieces
//! the census admits (this owner's `hpc:owner`) are used, changed or deleted.
//! The lifecycle's backend for this kind, `Backend<FabricSpec>` on `backend::Aws`, comes last, before the tests.

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_ec2::types::{AttributeBooleanValue, IpPermission, PlacementStrategy, ResourceType, SecurityGroup, UserIdGroupPair};

use super::api::{self, Aws, ec2_tags, filter, tag_filter, tag_spec};
use super::{backend, fabric};
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Outcome, Step};
use crate::clouds::error::CloudError;
use crate::clouds::shared;
use crate::framework::{Context, Value};
use crate::model::{FabricSpec, Network, Placement};
use crate::ownership::Census;

/// A configuration the cloud's answer shows to be wrong, naming the attribute.
fn invalid(field: &str, message: String) -> CloudError {
    CloudError::new(crate::clouds::ErrorKind::InvalidRequest { field: Some(field.to_owned()) }, None, message)
}

pub const TAG: &str = "hpc:fabric";

pub fn placement_group_name(fabric: &str) -> String {
    format!("{fabric}-pg")
}

pub fn security_group_name(fabric: &str) -> String {
    format!("{fabric}-efa")
}

/// What exists of a fabric.
#[derive(Clone, Debug, Default)]
pub struct FabricLive {
    /// VPC id, CIDR, and whether this fabric created it.
    pub vpc: Option<(String, String, bool)>,
    /// Subnet id and availability zone.
    pub subnet: Option<(String, String)>,
    pub placement_group: Option<String>,
    pub security_group: Option<SecurityGroup>,
}

impl FabricLive {
    pub fn is_empty(&self) -> bool {
        self.placement_group.is_none() && self.security_group.is_none() && !self.vpc.as_ref().is_some_and(|v| v.2)
    }

    pub fn sg_id(&self) -> Option<&str> {
        self.security_group.as_ref().and_then(|g| g.group_id())
    }

    pub fn sg_tags(&self) -> BTreeMap<String, String> {
        self.security_group.as_ref().map(|g| api::tag_map(g.tags())).unwrap_or_default()
    }

    /// Whether the security group lets its members reach each other with all traffic, inbound or outbound.
    pub fn self_rule(&self, egress: bool) -> bool {
        let Some(g) = &self.security_group else { return false };
        let rules = if egress { g.ip_permissions_egress() } else { g.ip_permissions() };
        rules.iter().any(|p| p.ip_protocol() == Some("-1") && p.user_id_group_pairs().iter().any(|pair| pair.group_id() == g.group_id()))
    }
}

/// Finds a fabric's pieces: one filtered call per kind, keeping the ones `census` admits. `network` names
/// the VPC and subnet when known.
pub async fn observe(aws: &Aws, name: &str, network: Option<(&str, &str)>, census: &Census) -> Result<FabricLive, CloudError> {
    let mut live = FabricLive::default();
    let groups = aws
        .ec2
        .describe_security_groups()
        .filters(tag_filter(TAG, name))
        .filters(filter("group-name", &[&security_group_name(name)]))
        .send()
        .await
        .map_err(|e| api::error(&e).context("listing the fabric's security groups"))?;
    live.security_group = groups
        .security_groups()
        .iter()
        .find(|g| {
            let id = g.group_id().unwrap_or_default();
            census.admit_tagged("aws_security_group", &format!("{} ({id})", security_group_name(name)), &api::tag_map(g.tags()), None)
        })
        .cloned();
    let pgs = aws
        .ec2
        .describe_placement_groups()
        .filters(tag_filter(TAG, name))
        .send()
        .await
        .map_err(|e| api::error(&e).context("listing placement groups"))?;
    live.placement_group = pgs
        .placement_groups()
        .iter()
        .filter(|g| g.state().is_none_or(|s| s.as_str() != "deleted" && s.as_str() != "deleting"))
        .filter(|g| census.admit_tagged("aws_placement_group", g.group_name().unwrap_or_default(), &api::tag_map(g.tags()), None))
        .find_map(|g| g.group_name().map(str::to_owned));

    let sg_tags = live.sg_tags();
    let (vpc_id, subnet_id) = match network {
        Some((v, s)) => (Some(v.to_owned()), Some(s.to_owned())),
        None => (live.security_group.as_ref().and_then(|g| g.vpc_id()).map(str::to_owned), sg_tags.get("hpc:subnet").cloned()),
    };
    // A VPC created by the fabric carries its tag and its owner's marker; one given by the user does not.
    let vpcs = match &vpc_id {
        Some(id) => aws.ec2.describe_vpcs().filters(filter("vpc-id", &[id])).send().await,
        None => aws.ec2.describe_vpcs().filters(tag_filter(TAG, name)).send().await,
    }
    .map_err(|e| api::error(&e).context("listing VPCs"))?;
    let by_tag = vpc_id.is_none();
    live.vpc = vpcs
        .vpcs()
        .iter()
        .map(|v| (v, api::tag_map(v.tags())))
        .filter(|(v, tags)| !by_tag || census.admit_tagged("aws_vpc", v.vpc_id().unwrap_or_default(), tags, None))
        .map(|(v, tags)| {
            let ours = tags.get(TAG).map(String::as_str) == Some(name) && census.claims(crate::ownership::marker_in(&tags));
            (v.vpc_id().unwrap_or_default().to_owned(), v.cidr_block().unwrap_or_default().to_owned(), ours)
        })
        .next();
    let subnets = match &subnet_id {
        Some(id) => aws.ec2.describe_subnets().filters(filter("subnet-id", &[id])).send().await,
        None => aws.ec2.describe_subnets().filters(tag_filter(TAG, name)).send().await,
    }
    .map_err(|e| api::error(&e).context("listing subnets"))?;
    let by_tag = subnet_id.is_none();
    live.subnet = subnets
        .subnets()
        .iter()
        .filter(|s| !by_tag || census.admit_tagged("aws_subnet", s.subnet_id().unwrap_or_default(), &api::tag_map(s.tags()), None))
        .map(|s| (s.subnet_id().unwrap_or_default().to_owned(), s.availability_zone().unwrap_or_default().to_owned()))
        .next();
    Ok(live)
}

/// The ids a converge produced.
#[derive(Clone, Debug, Default)]
pub struct FabricIds {
    pub vpc_id: Option<String>,
    pub subnet_id: Option<String>,
}

/// Creates whatever of the fabric is missing and brings tags up to date. On error, the ids made so far
/// come back with it so the state keeps track of them.
pub async fn converge(
    aws: &Aws,
    spec: &FabricSpec,
    gpu: Option<&str>,
    tags: &BTreeMap<String, String>,
    stale_tag_keys: &[String],
    census: &Census,
) -> Result<FabricIds, (FabricIds, CloudError)> {
    let name = &spec.name;
    let mut ids = FabricIds::default();
    let known = match &spec.network {
        Network::Existing { vpc_id, subnet_id } => Some((vpc_id.as_str(), subnet_id.as_str())),
        Network::Create { .. } => None,
    };
    let live = observe(aws, name, known, census).await.map_err(|e| (ids.clone(), e))?;
    census.gate().map_err(|e| (ids.clone(), e.into()))?;
    let zone = spec.zone.clone().unwrap_or_default();
    let mut owned: Vec<String> = Vec::new();

    match &spec.network {
        Network::Existing { vpc_id, subnet_id } => {
            if live.vpc.is_none() {
                return Err((ids, invalid("vpc_id", format!("VPC {vpc_id} (vpc_id) does not exist in {}", aws.region))));
            }
            match &live.subnet {
                None => {
                    return Err((ids, invalid("subnet_id", format!("subnet {subnet_id} (subnet_id) does not exist in {}", aws.region))));
                }
                Some((_, az)) if *az != zone => {
                    return Err((
                        ids,
                        invalid(
                            "subnet_id",
                            format!(
                                "subnet {subnet_id} is in {az}, not in the fabric's zone {zone}: give a subnet in {zone} or set zone = \"{az}\""
                            ),
                        ),
                    ));
                }
                _ => {}
            }
            ids.vpc_id = Some(vpc_id.clone());
            ids.subnet_id = Some(subnet_id.clone());
        }
        Network::Create { cidr } => {
            let vpc_id = match &live.vpc {
                Some((id, _, _)) => id.clone(),
                None => {
                    let what = format!("creating VPC {name}-vpc");
                    let vpc_tags = named(tags, &format!("{name}-vpc"));
                    let vt = &vpc_tags;
                    let id = api::create_untokened(
                        "CreateVpc",
                        &what,
                        || async move {
                            let out = aws
                                .ec2
                                .create_vpc()
                                .cidr_block(cidr)
                                .tag_specifications(tag_spec(ResourceType::Vpc, vt))
                                .customize()
                                .config_override(api::no_retries())
                                .send()
                                .await
                                .map_err(|e| api::error(&e))?;
                            Ok(out.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_owned())
                        },
                        || async move {
                            let out = aws
                                .ec2
                                .describe_vpcs()
                                .set_filters(Some(api::made_filters(vt)))
                                .send()
                                .await
                                .map_err(|e| api::error(&e).context("looking for the VPC"))?;
                            Ok(out.vpcs().iter().find_map(|v| v.vpc_id()).map(str::to_owned))
                        },
                    )
                    .await
                    .map_err(|e| (ids.clone(), e.context(what.clone())))?;
                    ids.vpc_id = Some(id.clone());
                    aws.ec2
                        .modify_vpc_attribute()
                        .vpc_id(&id)
                        .enable_dns_hostnames(AttributeBooleanValue::builder().value(true).build())
                        .send()
                        .await
                        .map_err(|e| (ids.clone(), api::error(&e).context(format!("enabling DNS host names on {id}"))))?;
                    id
                }
            };
            ids.vpc_id = Some(vpc_id.clone());
            owned.push(vpc_id.clone());
            let subnet_id = match &live.subnet {
                Some((id, _)) => id.clone(),
                None => {
                    let subnet_tags = named(tags, &format!("{name}-subnet"));
                    create_subnet(aws, &vpc_id, &crate::clouds::first_subnet(cidr), &zone, &subnet_tags)
                        .await
                        .map_err(|e| (ids.clone(), e.context(format!("creating subnet {name}-subnet in {zone}"))))?
                }
            };
            ids.subnet_id = Some(subnet_id.clone());
            owned.push(subnet_id);
        }
    }
    let vpc_id = ids.vpc_id.clone().unwrap_or_default();
    let subnet_id = ids.subnet_id.clone().unwrap_or_default();

    if spec.placement == Placement::Cluster && live.placement_group.is_none() {
        let pg = placement_group_name(name);
        let pg_tags = named(tags, &pg);
        let (pg_ref, pt) = (&pg, &pg_tags);
        api::create_untokened(
            "CreatePlacementGroup",
            &format!("creating cluster placement group {pg}"),
            || async move {
                aws.ec2
                    .create_placement_group()
                    .group_name(pg_ref)
                    .strategy(PlacementStrategy::Cluster)
                    .tag_specifications(tag_spec(ResourceType::PlacementGroup, pt))
                    .customize()
                    .config_override(api::no_retries())
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| api::error(&e))
            },
            || async move {
                let out = aws
                    .ec2
                    .describe_placement_groups()
                    .set_filters(Some(api::made_filters(pt)))
                    .send()
                    .await
                    .map_err(|e| api::error(&e).context("looking for the placement group"))?;
                Ok(out
                    .placement_groups()
                    .iter()
                    .any(|g| g.state().is_none_or(|s| s.as_str() != "deleted" && s.as_str() != "deleting"))
                    .then_some(()))
            },
        )
        .await
        .map_err(|e| (ids.clone(), e.context(format!("creating cluster placement group {pg}"))))?;
    }

    // The security group records what a cluster or an import needs to find the rest.
    let mut sg_tags = named(tags, &security_group_name(name));
    sg_tags.insert("hpc:subnet".into(), subnet_id.clone());
    sg_tags.insert("hpc:instance-type".into(), spec.sku.name.into());
    if let Some(gpu) = gpu {
        sg_tags.insert("hpc:gpu".into(), gpu.to_owned());
    }
    let sg_id = match live.sg_id() {
        Some(id) => id.to_owned(),
        None => {
            let (group, st, vpc) = (security_group_name(name), &sg_tags, &vpc_id);
            let g = &group;
            api::create_untokened(
                "CreateSecurityGroup",
                &format!("creating security group {group}"),
                || async move {
                    let out = aws
                        .ec2
                        .create_security_group()
                        .group_name(g)
                        .description("EFA: all traffic between members of this group")
                        .vpc_id(vpc)
                        .tag_specifications(tag_spec(ResourceType::SecurityGroup, st))
                        .customize()
                        .config_override(api::no_retries())
                        .send()
                        .await
                        .map_err(|e| api::error(&e))?;
                    Ok(out.group_id().unwrap_or_default().to_owned())
                },
                || async move {
                    let out = aws
                        .ec2
                        .describe_security_groups()
                        .set_filters(Some(api::made_filters(st)))
                        .filters(filter("group-name", &[g]))
                        .filters(filter("vpc-id", &[vpc]))
                        .send()
                        .await
                        .map_err(|e| api::error(&e).context("looking for the security group"))?;
                    Ok(out.security_groups().iter().find_map(|g| g.group_id()).map(str::to_owned))
                },
            )
            .await
            .map_err(|e| (ids.clone(), e.context(format!("creating security group {group}"))))?
        }
    };
    let self_rule =
        IpPermission::builder().ip_protocol("-1").user_id_group_pairs(UserIdGroupPair::builder().group_id(&sg_id).build()).build();
    if !live.self_rule(false) {
        aws.ec2
            .authorize_security_group_ingress()
            .group_id(&sg_id)
            .ip_permissions(self_rule.clone())
            .send()
            .await
            .map(|_| ())
            .or_else(already_there)
            .map_err(|e| (ids.clone(), api::error(&e).context(format!("adding the EFA self-referencing inbound rule to {sg_id}"))))?;
    }
    if !live.self_rule(true) {
        aws.ec2
            .authorize_security_group_egress()
            .group_id(&sg_id)
            .ip_permissions(self_rule)
            .send()
            .await
            .map(|_| ())
            .or_else(already_there)
            .map_err(|e| (ids.clone(), api::error(&e).context(format!("adding the EFA self-referencing outbound rule to {sg_id}"))))?;
    }

    // Tags of pieces that already existed: bring them to what the configuration says.
    let mut resources = owned;
    resources.push(sg_id.clone());
    if let Some(pg) = &live.placement_group
        && let Some(id) = pg_id(aws, pg).await
    {
        resources.push(id);
    }
    if live.security_group.is_some() || !stale_tag_keys.is_empty() {
        retag(aws, &resources, tags, stale_tag_keys).await.map_err(|e| (ids.clone(), e))?;
        aws.ec2
            .create_tags()
            .resources(&sg_id)
            .set_tags(Some(ec2_tags(&sg_tags)))
            .send()
            .await
            .map_err(|e| (ids.clone(), api::error(&e).context(format!("tagging {sg_id}"))))?;
    }
    Ok(ids)
}

async fn pg_id(aws: &Aws, name: &str) -> Option<String> {
    let out = aws.ec2.describe_placement_groups().group_names(name).send().await.ok()?;
    out.placement_groups().first().and_then(|g| g.group_id()).map(str::to_owned)
}

/// Sets `tags` on `resources` and removes `stale` keys (tags the configuration no longer has).
pub async fn retag(aws: &Aws, resources: &[String], tags: &BTreeMap<String, String>, stale: &[String]) -> Result<(), CloudError> {
    for chunk in resources.chunks(500) {
        if !stale.is_empty() {
            aws.ec2
                .delete_tags()
                .set_resources(Some(chunk.to_vec()))
                .set_tags(Some(stale.iter().map(|k| aws_sdk_ec2::types::Tag::builder().key(k).build()).collect()))
                .send()
                .await
                .map_err(|e| api::error(&e).context("removing tags"))?;
        }
        aws.ec2
            .create_tags()
            .set_resources(Some(chunk.to_vec()))
            .set_tags(Some(ec2_tags(tags)))
            .send()
            .await
            .map_err(|e| api::error(&e).context("tagging"))?;
    }
    Ok(())
}

/// `tags` plus a `Name`, which the console shows.
/// A rule EC2 says is there already (`InvalidPermission.Duplicate`) is what the call wanted: the answer of
/// the SDK's first attempt was lost, and its retry found the rule made.
fn already_there<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(
    e: aws_sdk_ec2::error::SdkError<E, R>,
) -> Result<(), aws_sdk_ec2::error::SdkError<E, R>> {
    use aws_sdk_ec2::error::ProvideErrorMetadata as _;
    if e.code() == Some("InvalidPermission.Duplicate") { Ok(()) } else { Err(e) }
}

/// Makes a subnet tagged with `tags` (its `Name` and owner's marker among them), at most once (see
/// [`api::create_untokened`]); its id.
pub async fn create_subnet(aws: &Aws, vpc_id: &str, cidr: &str, zone: &str, tags: &BTreeMap<String, String>) -> Result<String, CloudError> {
    api::create_untokened(
        "CreateSubnet",
        "creating a subnet",
        || async move {
            let out = aws
                .ec2
                .create_subnet()
                .vpc_id(vpc_id)
                .cidr_block(cidr)
                .availability_zone(zone)
                .tag_specifications(tag_spec(ResourceType::Subnet, tags))
                .customize()
                .config_override(api::no_retries())
                .send()
                .await
                .map_err(|e| api::error(&e))?;
            Ok(out.subnet().and_then(|s| s.subnet_id()).unwrap_or_default().to_owned())
        },
        || async move {
            let out = aws
                .ec2
                .describe_subnets()
                .set_filters(Some(api::made_filters(tags)))
                .filters(filter("vpc-id", &[vpc_id]))
                .filters(filter("cidr-block", &[cidr]))
                .send()
                .await
                .map_err(|e| api::error(&e).context("looking for the subnet"))?;
            Ok(out.subnets().iter().find_map(|s| s.subnet_id()).map(str::to_owned))
        },
    )
    .await
}

pub fn named(tags: &BTreeMap<String, String>, name: &str) -> BTreeMap<String, String> {
    let mut t = tags.clone();
    t.insert("Name".into(), name.to_owned());
    t
}

/// What nodes join of a fabric: its EFA security group, the subnet it records, its VPC, and its cluster
/// placement group where the fabric places nodes in one.
pub struct Joined {
    pub security_group: String,
    pub subnet: String,
    pub vpc: Option<String>,
    pub placement_group: Option<String>,
}

/// The fabric's pieces nodes join, read (they are another resource's, never changed here); an error that
/// says what to apply when one is missing.
pub async fn joined(aws: &Aws, fabric: &crate::model::FabricRef) -> Result<Joined, CloudError> {
    let f = observe(aws, &fabric.name, None, &Census::reading()).await?;
    let sg = f.sg_id().map(str::to_owned).ok_or_else(|| {
        CloudError::other(format!(
            "fabric {} has no security group {} in {}: apply the fabric first",
            fabric.name,
            security_group_name(&fabric.name),
            aws.region
        ))
    })?;
    let subnet = f
        .sg_tags()
        .get("hpc:subnet")
        .cloned()
        .ok_or_else(|| CloudError::other(format!("security group {sg} does not record the fabric's subnet")))?;
    let placement_group = match fabric.placement {
        crate::model::Placement::Cluster => Some(f.placement_group.clone().ok_or_else(|| {
            CloudError::other(format!(
                "the fabric's cluster placement group {} is missing: apply again so the fabric recreates it",
                placement_group_name(&fabric.name)
            ))
        })?),
        _ => None,
    };
    let vpc = f.security_group.as_ref().and_then(|g| g.vpc_id()).map(str::to_owned);
    Ok(Joined { security_group: sg, subnet, vpc, placement_group })
}

/// Deletes every piece of the fabric this owner has, leaving a user's own VPC and subnet alone.
pub async fn delete(
    ctx: &Context,
    aws: &Aws,
    name: &str,
    network: Option<(&str, &str)>,
    timeout: std::time::Duration,
    census: &Census,
) -> Result<(), CloudError> {
    let live = observe(aws, name, network, census).await?;
    if let Some(sg) = live.sg_id() {
        // Interfaces of terminating instances hold the group for a while: retry DependencyViolation.
        let sg = sg.to_owned();
        crate::clouds::shared::wait_for(ctx, &format!("security group {sg} to be released"), timeout, || {
            let sg = sg.clone();
            async move {
                match aws.ec2.delete_security_group().group_id(&sg).send().await {
                    Ok(_) => Ok(Some(())),
                    Err(e) if api::code(&e) == Some("DependencyViolation") => Ok(None),
                    Err(e) if api::code(&e) == Some("InvalidGroup.NotFound") => Ok(Some(())),
                    Err(e) => Err(api::error(&e).context(format!("deleting security group {sg}"))),
                }
            }
        })
        .await?;
    }
    if let Some(pg) = &live.placement_group {
        match aws.ec2.delete_placement_group().group_name(pg).send().await {
            Ok(_) => {}
            Err(e) if api::code(&e) == Some("InvalidPlacementGroup.Unknown") => {}
            Err(e) => return Err(api::error(&e).context(format!("deleting placement group {pg}"))),
        }
    }
    if let Some((vpc, _, true)) = &live.vpc {
        if let Some((subnet, _)) = &live.subnet {
            match aws.ec2.delete_subnet().subnet_id(subnet).send().await {
                Ok(_) => {}
                Err(e) if api::code(&e) == Some("InvalidSubnetID.NotFound") => {}
                Err(e) => return Err(api::error(&e).context(format!("deleting subnet {subnet}"))),
            }
        }
        match aws.ec2.delete_vpc().vpc_id(vpc).send().await {
            Ok(_) => {}
            Err(e) if api::code(&e) == Some("InvalidVpcID.NotFound") => {}
            Err(e) => return Err(api::error(&e).context(format!("deleting VPC {vpc}"))),
        }
    }
    Ok(())
}

/// Which planned pieces exist, by kind, for the refreshed expansion.
pub fn present_kinds(live: &FabricLive) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if live.vpc.as_ref().is_some_and(|v| v.2) {
        kinds.push("aws_vpc");
        if live.subnet.is_some() {
            kinds.push("aws_subnet");
        }
    }
    if live.placement_group.is_some() {
        kinds.push("aws_placement_group");
    }
    if live.security_group.is_some() {
        kinds.push("aws_security_group");
    }
    if live.self_rule(false) {
        kinds.push("aws_vpc_security_group_ingress_rule");
    }
    if live.self_rule(true) {
        kinds.push("aws_vpc_security_group_egress_rule");
    }
    kinds
}

/// The configuration an import reconstructs from what exists (what `hpc_gpu_fabric` would have been
/// given to build it), and the ids.
pub fn imported_config(region: &str, name: &str, live: &FabricLive, defaults: &BTreeMap<String, String>) -> Result<Value, CloudError> {
    let Some(group) = &live.security_group else {
        return Err(
            format!("no fabric named {name:?} in {region}: no security group {} tagged {TAG} = {name}", security_group_name(name)).into()
        );
    };
    let tags = api::tag_map(group.tags());
    let instance_type = tags.get("hpc:instance-type").cloned().ok_or_else(|| {
        format!(
            "security group {} has no hpc:instance-type tag, so the node type it serves is unknown",
            group.group_id().unwrap_or_default()
        )
    })?;
    let zone = live
        .subnet
        .as_ref()
        .map(|s| s.1.clone())
        .ok_or_else(|| CloudError::other(format!("the subnet of fabric {name} no longer exists")))?;
    let (vpc, subnet, cidr) = match &live.vpc {
        Some((_, cidr, true)) => (Value::Null, Value::Null, Value::from(cidr.as_str())),
        Some((id, _, false)) => {
            (Value::from(id.as_str()), Value::from(live.subnet.as_ref().map(|s| s.0.as_str()).unwrap_or_default()), Value::Null)
        }
        None => return Err(format!("the VPC of fabric {name} no longer exists").into()),
    };
    let user = crate::clouds::shared::user_tags(crate::catalog::Cloud::Aws, &tags, defaults);
    Ok(Value::object([
        ("name", Value::from(name)),
        ("cloud", Value::from("aws")),
        ("region", Value::from(region)),
        ("zone", Value::from(zone)),
        ("gpu", tags.get("hpc:gpu").map_or(Value::Null, |g| Value::from(g.as_str()))),
        ("instance_type", Value::from(instance_type)),
        ("vpc_id", vpc),
        ("subnet_id", subnet),
        ("cidr_block", cidr),
        ("placement", Value::from(if live.placement_group.is_some() { "cluster" } else { "none" })),
        ("tags", if user.is_empty() { Value::Null } else { Value::Map(user.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) }),
    ]))
}

/// The existing network a fabric joins, from a state or configuration (none when it made its own).
fn given_network(v: &Value) -> Option<(&str, &str)> {
    if v.get("cidr_block").is_present() {
        return None;
    }
    Some((v.get("vpc_id").as_str()?, v.get("subnet_id").as_str()?))
}

fn region_and_name(v: &Value) -> (&str, &str) {
    (v.get("region").as_str().unwrap_or_default(), v.get("name").as_str().unwrap_or_default())
}

#[async_trait]
impl Backend<FabricSpec> for backend::Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), CloudError> {
        // The SDK's credential chain is resolved per call; a client is always made.
        Ok(())
    }

    fn id(&self, spec: &FabricSpec) -> Option<String> {
        Some(api::resource_id(&spec.region, &spec.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in {}", v.get("region").as_str().unwrap_or_default())
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, FabricSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.region).await;
        let stale = change.stale_tags();
        let gpu = change.config.get("gpu").as_str();
        let (ids, error) = match fabric::converge(&client, spec, gpu, change.tags, &stale, step.census).await {
            Ok(ids) => (ids, None),
            Err((ids, e)) => (ids, Some(e)),
        };
        let mut state = change.state.clone();
        if let Some(v) = ids.vpc_id {
            state = shared::with_attr(&state, "vpc_id", Value::from(v));
        }
        if let Some(s) = ids.subnet_id {
            state = shared::with_attr(&state, "subnet_id", Value::from(s));
        }
        Outcome { state, error }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&FabricSpec>) -> Outcome {
        let (region, name) = region_and_name(prior);
        let client = api::connect(step.ctx, region).await;
        let done = fabric::delete(step.ctx, &client, name, given_network(prior), step.timeout, step.census).await;
        Outcome::of(done, Value::Null, || prior.clone())
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&FabricSpec>) -> Result<Option<Value>, CloudError> {
        let (region, name) = region_and_name(state);
        let client = api::connect(step.ctx, region).await;
        let live = fabric::observe(&client, name, given_network(state), step.census).await?;
        if live.is_empty() {
            return Ok(None);
        }
        let kinds = fabric::present_kinds(&live);
        Ok(Some(shared::with_missing(state, |k| kinds.contains(&k))))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some((region, name)) = api::parse_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS fabric id: give \"aws/<region>/<fabric name>\", e.g. \"aws/us-east-1/train\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = fabric::observe(&client, name, None, step.census).await.map_err(ImportError::failed)?;
        let config = fabric::imported_config(region, name, &live, step.default_tags).map_err(ImportError::failed)?;
        let mut assigned = BTreeMap::from([("id".to_owned(), Value::from(id))]);
        if let Some((vpc, _, _)) = &live.vpc {
            assigned.insert("vpc_id".to_owned(), Value::from(vpc.as_str()));
        }
        if let Some((subnet, _)) = &live.subnet {
            assigned.insert("subnet_id".to_owned(), Value::from(subnet.as_str()));
        }
        // A fabric with a Slurm cluster: its join, key included, as its nodes carry it (never made anew).
        let join = slurm_join_of(&client, name).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, assigned).with_slurm_join(join))
    }
}

/// The Slurm join the fabric's GPU nodes boot with, from the user data of their launch templates (tagged with
/// the fabric): one filtered list, then one read per template until a join is found; null without one.
async fn slurm_join_of(aws: &Aws, fabric: &str) -> Result<Value, CloudError> {
    let templates = aws
        .ec2
        .describe_launch_templates()
        .filters(tag_filter("hpc:fabric", fabric))
        .send()
        .await
        .map_err(|e| api::error(&e).context("listing the fabric's launch templates"))?;
    for t in templates.launch_templates() {
        let Some(id) = t.launch_template_id() else { continue };
        let versions = aws
            .ec2
            .describe_launch_template_versions()
            .launch_template_id(id)
            .versions("$Latest")
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("reading launch template {id}")))?;
        let user_data = versions
            .launch_template_versions()
            .first()
            .and_then(|v| v.launch_template_data())
            .and_then(|d| d.user_data())
            .and_then(crate::clouds::user_data::decoded);
        let join = crate::clouds::slurm::join_value(user_data.as_deref());
        if join.is_present() {
            return Ok(join);
        }
    }
    Ok(Value::Null)
}
