//! An EKS managed node group of GPU nodes (botocore's `eks` model, `CreateNodegroup`): a launch template of
//! our own with one EFA interface per network card and the fabric's cluster placement group, as a cluster's;
//! the node group names it and holds the size, capacity type, labels and taints. The in-cluster half is the
//! EFA device plugin (eks-charts `aws-efa-k8s-device-plugin`), whose resource pods request.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    CapacityReservationTarget, LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplatePlacementRequest,
    LaunchTemplateVersion, MarketType, RequestLaunchTemplateData, ResourceType,
};
use aws_sdk_eks::types::{
    AmiTypes, CapacityTypes, LaunchTemplateSpecification as EksLaunchTemplate, NodeRepairConfig, Nodegroup, NodegroupScalingConfig,
    NodegroupStatus, NodegroupUpdateConfig, Taint as EksTaint, TaintEffect as EksTaintEffect, UpdateLabelsPayload, UpdateTaintsPayload,
};
use base64::Engine;

use super::api::{self, Aws, tag_spec};
use super::backend::{self, fabric_region};
use super::{cluster, fabric, network_interfaces, placement_group};
use crate::catalog::Fabric;
use crate::clouds::backend::{Backend, Change, ClusterFacts, ImportError, Imported, NodePoolBackend, Outcome, Step};
use crate::clouds::error::{CloudError, ErrorKind};
use crate::clouds::kubernetes::{InCluster, effect_constant, pool_tags, tolerations_yaml};
use crate::clouds::shared::with_attr;
use crate::framework::{AttributePath, Diagnostics};
use crate::framework::{Context, Value};
use crate::model::{CapacityType, Defaults, NodeAmount, NodePoolSpec, Piece, Placement, tag_string};
use crate::model::{Repair, TaintEffect};
use crate::ownership::{Census, marker_in};

/// EKS cluster names: 1-100 characters, a letter or digit first, then letters, digits, `-` and `_`
/// (`CreateCluster`'s `name` pattern).
fn eks_cluster_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 100
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'))
}

/// A node IAM role's ARN: `arn:<partition>:iam::<account>:role/<path and name>`.
fn role_arn(s: &str) -> bool {
    let parts: Vec<&str> = s.splitn(6, ':').collect();
    parts.len() == 6
        && parts[0] == "arn"
        && parts[1].starts_with("aws")
        && parts[2] == "iam"
        && parts[3].is_empty()
        && parts[4].len() == 12
        && parts[4].bytes().all(|c| c.is_ascii_digit())
        && parts[5].strip_prefix("role/").is_some_and(|n| !n.is_empty())
}

/// The EKS-optimized accelerated AMI family the node group boots when no image is given.
fn ami_type(spec: &NodePoolSpec) -> &'static str {
    if spec.nodes.fabric.sku.arm64() { "AL2023_ARM_64_NVIDIA" } else { "AL2023_x86_64_NVIDIA" }
}

pub fn fits(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    if !eks_cluster_name(&spec.kubernetes_cluster) {
        diags.error_at(
            AttributePath::attr("kubernetes_cluster"),
            "Invalid EKS cluster name",
            format!(
                "{:?} is not an EKS cluster's name: 1 to 100 letters, digits, `-` or `_`, starting with a letter or digit. Give the name \
                 (aws_eks_cluster.<x>.name, or data.aws_eks_cluster.<x>.name), not its ARN.",
                spec.kubernetes_cluster
            ),
        );
        ok = false;
    }
    match spec.node_role.as_deref() {
        None => {
            diags.error_at(
                AttributePath::attr("node_role"),
                "Missing node role",
                "An EKS node group's nodes join with an IAM role (CreateNodegroup's nodeRole): set node_role to the role's ARN, \
                 arn:aws:iam::<account>:role/<name>, with AmazonEKSWorkerNodePolicy, AmazonEC2ContainerRegistryReadOnly and the CNI policy.",
            );
            ok = false;
        }
        Some(r) if !role_arn(r) => {
            diags.error_at(
                AttributePath::attr("node_role"),
                "Invalid node role",
                format!("{r:?} is not an IAM role ARN: arn:aws:iam::<12-digit account>:role/<name>."),
            );
            ok = false;
        }
        Some(_) => {}
    }
    if spec.nodes.image.is_some() && spec.kubernetes_version.is_some() {
        diags.error_at(
            AttributePath::attr("kubernetes_version"),
            "Version with a custom AMI",
            "A node group whose launch template names an AMI runs the kubelet that AMI carries, and EKS refuses a version beside it: \
             remove kubernetes_version (the AMI decides), or remove image to boot the EKS accelerated AMI of that version.",
        );
        ok = false;
    }
    if spec.nodes.capacity == CapacityType::CapacityBlock && spec.autoscaling.is_some() {
        diags.error_at(
            AttributePath::attr("autoscaling"),
            "Autoscaling a capacity block",
            "A capacity block's instances exist only for the block's time, and EKS scales a CAPACITY_BLOCK node group by a schedule of its \
             own, not the cluster autoscaler: remove autoscaling and set node_count to the block's instances.",
        );
        ok = false;
    }
    ok
}

pub fn node_pool(spec: &NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
    let c = &spec.nodes;
    let n = &c.name;
    let f = &c.fabric;
    let tags = tag_string(&pool_tags(spec, d));
    let template = super::cluster::template_name(&ec2_prefix(n));
    let key = super::cluster::key_name(&ec2_prefix(n));
    let mut out = Vec::new();
    if c.ssh_public_key.is_some() {
        out.push(Piece::new("aws_key_pair", &key).set("tags", &tags));
    }
    // EKS sets the market itself for SPOT and refuses spot options in the template; a capacity block and a
    // reservation are named in the template.
    let (market, capacity_type) = match c.capacity {
        CapacityType::Spot => (None, "SPOT"),
        CapacityType::CapacityBlock => (Some("capacity-block"), "CAPACITY_BLOCK"),
        _ => (None, "ON_DEMAND"),
    };
    out.push(
        Piece::new("aws_launch_template", &template)
            .set("instance_type", f.sku.name)
            .set("image_id", c.image.as_deref().unwrap_or("(none: the node group's ami_type)"))
            .set("placement.group_name", if f.placement == Placement::Cluster { placement_group(&f.name) } else { "(none)".into() })
            .set_opt("instance_market_options.market_type", market)
            .set_opt("capacity_reservation_specification.capacity_reservation_target", c.reservation_id.as_deref())
            .set_opt("key_name", c.ssh_public_key.as_ref().map(|_| format!("aws_key_pair.{key}")))
            .set_opt("user_data", c.user_data_summary().map(|s| format!("{s}, a MIME part EKS merges with its bootstrap")))
            .set("metadata_options.http_tokens", "required")
            // Pods on the node reach the instance metadata through one more hop than the node.
            .set("metadata_options.http_put_response_hop_limit", 2)
            .set("efa_interfaces", c.rdma_interfaces)
            .set("tags", &tags),
    );
    out.extend(network_interfaces(c, &template));
    let taints: Vec<String> = spec.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, effect_constant(t.effect))).collect();
    let (min, max) = spec.autoscaling.unwrap_or((c.node_count, c.node_count));
    out.push(
        Piece::new("aws_eks_node_group", n.as_str())
            .set("cluster_name", &spec.kubernetes_cluster)
            .set("node_role_arn", spec.node_role.as_deref().unwrap_or_default())
            .set("subnet_ids", c.network_label("subnet"))
            .set("launch_template", format!("aws_launch_template.{template} (the version this apply makes)"))
            .set("ami_type", if c.image.is_some() { "CUSTOM" } else { ami_type(spec) })
            .set("capacity_type", capacity_type)
            .set("scaling_config.desired_size", c.node_count)
            .set("scaling_config.min_size", min)
            .set("scaling_config.max_size", max)
            .set_opt("version", spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}")))
            .set("labels", tag_string(labels))
            .set("taints", if taints.is_empty() { "(none)".into() } else { taints.join(", ") })
            .set("node_repair_config.enabled", c.day2.repair == crate::model::Repair::Replace)
            .set(
                "update_config",
                match c.day2.batch_size {
                    NodeAmount::Count(n) => format!("max_unavailable = {}", n.min(100)),
                    NodeAmount::Percent(p) => format!("max_unavailable_percentage = {p}"),
                },
            )
            .set("client_request_token", "one per create, kept across retries")
            .set(
                "requires",
                "the fabric's VPC is the EKS cluster's; every interface carries the cluster's security group (DescribeCluster) beside the \
                 fabric's EFA group, as EKS adds none to a launch template that names interfaces",
            )
            .set("tags", &tags),
    );
    out
}

pub fn kubernetes(spec: &NodePoolSpec) -> InCluster {
    let c = &spec.nodes;
    let mut device_resources = BTreeMap::new();
    if let Some(resource) = c.fabric.sku.fabric.kubernetes_resource()
        && c.rdma_interfaces > 0
    {
        device_resources.insert(resource.to_owned(), c.rdma_interfaces);
    }
    let mut y = String::new();
    if c.fabric.sku.fabric == Fabric::Efa {
        y.push_str("# Helm values for the EFA device plugin, which makes each node's EFA interfaces the extended resource\n");
        let _ = writeln!(y, "# vpc.amazonaws.com/efa ({} on each {} node):", c.rdma_interfaces, c.fabric.sku.name);
        y.push_str("#   helm repo add eks https://aws.github.io/eks-charts\n");
        y.push_str("#   helm upgrade --install efa eks/aws-efa-k8s-device-plugin -n kube-system -f <this file>\n");
        y.push_str("# EKS labels nodes with EFA interfaces vpc.amazonaws.com/efa.present=true.\n");
        y.push_str("nodeSelector:\n  vpc.amazonaws.com/efa.present: \"true\"\ntolerations:\n");
        y.push_str(&tolerations_yaml(spec, 2));
    } else {
        let _ = writeln!(y, "# {} has no EFA: no RDMA device plugin is needed; NCCL uses the node's ENA network.", c.fabric.sku.name);
    }
    InCluster {
        topology_levels: [
            "topology.k8s.aws/network-node-layer-1",
            "topology.k8s.aws/network-node-layer-2",
            "topology.k8s.aws/network-node-layer-3",
            "kubernetes.io/hostname",
        ]
        .map(str::to_owned)
        .to_vec(),
        labels: BTreeMap::new(),
        device_plugin: y,
        device_resources,
    }
}

// ------------------------------------------------------------------------------------------ backend

/// The EC2 name prefix of a pool's own pieces, apart from any cluster's: `<pool>-pool-lt`, `<pool>-pool-key`.
pub fn ec2_prefix(pool: &str) -> String {
    format!("{pool}-pool")
}

/// The tag every piece of a pool carries with its name.
pub const TAG: &str = "hpc:node-pool";

/// The piece kind the census knows a node group by.
const NODE_GROUP: &str = "aws_eks_node_group";

/// `aws/<region>/<EKS cluster>/<pool>`: a node group's name is unique within its cluster only.
pub fn pool_id(region: &str, cluster: &str, pool: &str) -> String {
    crate::clouds::shared::resource_id(crate::catalog::Cloud::Aws, &[region, cluster], pool)
}

fn parse_pool_id(id: &str) -> Option<[&str; 3]> {
    crate::clouds::shared::parse_id(crate::catalog::Cloud::Aws, id)
}

/// What the EKS cluster the pool joins is, read with DescribeCluster (never changed).
struct EksCluster {
    vpc: Option<String>,
    security_group: Option<String>,
    version: Option<String>,
    status: Option<String>,
}

async fn eks_cluster(aws: &Aws, name: &str) -> Result<EksCluster, CloudError> {
    let out = aws.eks.describe_cluster().name(name).send().await.map_err(|e| {
        let err = api::error(&e);
        if err.is_not_found() {
            err.context(format!(
                "kubernetes_cluster: no EKS cluster {name:?} in {}; name an existing cluster in the fabric's region",
                aws.region
            ))
        } else {
            err.context(format!("reading EKS cluster {name}"))
        }
    })?;
    let c = out.cluster();
    let vpc = c.and_then(|c| c.resources_vpc_config()).and_then(|v| v.vpc_id()).map(str::to_owned);
    let security_group = c.and_then(|c| c.resources_vpc_config()).and_then(|v| v.cluster_security_group_id()).map(str::to_owned);
    let version = c.and_then(|c| c.version()).map(str::to_owned);
    let status = c.and_then(|c| c.status()).map(|s| s.as_str().to_owned());
    Ok(EksCluster { vpc, security_group, version, status })
}

/// What exists of a pool: its launch template's latest version and tags, its key pair, its node group.
#[derive(Default)]
pub struct PoolLive {
    pub template: Option<(LaunchTemplateVersion, BTreeMap<String, String>)>,
    pub key: bool,
    pub public_key: Option<String>,
    pub group: Option<Nodegroup>,
}

impl PoolLive {
    fn is_empty(&self) -> bool {
        self.template.is_none() && !self.key && self.group.is_none()
    }
}

/// The pool's node group, if it exists and the census admits it (DescribeNodegroup carries its tags).
async fn node_group(aws: &Aws, cluster: &str, pool: &str, census: &Census) -> Result<Option<Nodegroup>, CloudError> {
    match aws.eks.describe_nodegroup().cluster_name(cluster).nodegroup_name(pool).send().await {
        Ok(out) => Ok(out.nodegroup.filter(|g| {
            let tags: BTreeMap<String, String> =
                g.tags().map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
            census.admit(NODE_GROUP, pool, marker_in(&tags), g.created_at().map(|t| t.to_string()).as_deref())
        })),
        Err(e) if api::error(&e).is_not_found() => Ok(None),
        Err(e) => Err(api::error(&e).context(format!("reading node group {pool} of EKS cluster {cluster}"))),
    }
}

/// Everything of the pool the census admits: three calls at any size (the nodes are the node group's).
pub async fn observe(aws: &Aws, cluster: &str, pool: &str, census: &Census) -> Result<PoolLive, CloudError> {
    let prefix = ec2_prefix(pool);
    let template = cluster::template(aws, &prefix, census).await?;
    let (key, public_key) = cluster::key(aws, &prefix, census).await?;
    let group = node_group(aws, cluster, pool, census).await?;
    Ok(PoolLive { template, key, public_key, group })
}

/// The launch template's data: the node type, the image when one is given, one EFA interface per network
/// card in the fabric's EFA group and the cluster's security group, the fabric's placement group, the
/// capacity block's market or the reservation, IMDSv2 with a hop more for pods, the key, the user data as
/// a MIME part EKS merges with its bootstrap. No subnet and no zone: the node group's subnet decides.
fn template_data(spec: &NodePoolSpec, groups: &[String], placement: Option<String>) -> RequestLaunchTemplateData {
    let c = &spec.nodes;
    let mut data = RequestLaunchTemplateData::builder()
        .instance_type(c.fabric.sku.name.into())
        .set_image_id(c.image.clone())
        .set_network_interfaces(Some(cluster::interfaces(c, None, groups)))
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_tokens(LaunchTemplateHttpTokensState::Required)
                .http_put_response_hop_limit(2)
                .build(),
        );
    if let Some(group) = placement {
        data = data.placement(LaunchTemplatePlacementRequest::builder().group_name(group).build());
    }
    if c.capacity == CapacityType::CapacityBlock {
        data = data
            .instance_market_options(LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build());
    }
    if let Some(r) = &c.reservation_id {
        data = data.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(r).build())
                .build(),
        );
    }
    if c.ssh_public_key.is_some() {
        data = data.key_name(cluster::key_name(&ec2_prefix(&c.name)));
    }
    if let Some(u) = &c.user_data {
        data = data.user_data(base64::engine::general_purpose::STANDARD.encode(eks_user_data(u.expose())));
    }
    data.build()
}

/// User data as EKS takes it beside its own bootstrap: a MIME multi-part document (a user's document
/// already in that form as it is, a script as its one part).
fn eks_user_data(user: &str) -> String {
    if crate::clouds::user_data::is_mime(user) {
        return user.to_owned();
    }
    let kind = if user.starts_with("#cloud-config") { "text/cloud-config" } else { "text/x-shellscript" };
    format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"HPC-POOL\"\n\n--HPC-POOL\nContent-Type: {kind}; charset=\"us-ascii\"\n\n{user}\n--HPC-POOL--\n"
    )
}

/// What the template's description records: the node configuration it was made for, with the groups.
fn template_revision(spec: &NodePoolSpec, groups: &[String]) -> String {
    let c = &spec.nodes;
    let made_from = format!(
        "{}\ngroups={}\ntype={}\ncapacity={}\nreservation={}",
        c.user_data.as_ref().map(|u| u.expose_str()).unwrap_or_default(),
        groups.join(","),
        c.fabric.sku.name,
        c.capacity.as_str(),
        c.reservation_id.as_deref().unwrap_or_default()
    );
    crate::model::node_revision(c.image.as_deref(), &made_from, c.ssh_public_key.as_deref().map(str::trim), c.rdma_interfaces)
}

pub struct Options<'a> {
    pub tags: &'a BTreeMap<String, String>,
    pub stale_tags: &'a [String],
    pub retag: bool,
    pub timeout: Duration,
}

fn eks_taint(t: &crate::model::Taint) -> EksTaint {
    let effect = match t.effect {
        TaintEffect::NoSchedule => EksTaintEffect::NoSchedule,
        TaintEffect::PreferNoSchedule => EksTaintEffect::PreferNoSchedule,
        TaintEffect::NoExecute => EksTaintEffect::NoExecute,
    };
    EksTaint::builder().key(&t.key).set_value((!t.value.is_empty()).then(|| t.value.clone())).effect(effect).build()
}

fn scaling(spec: &NodePoolSpec, live: Option<&NodegroupScalingConfig>) -> NodegroupScalingConfig {
    let c = &spec.nodes;
    let (min, max) = spec.autoscaling.unwrap_or((c.node_count, c.node_count));
    // An autoscaled pool's size is the autoscaler's once it runs: the apply keeps it within the bounds.
    let desired = match (spec.autoscaling, live.and_then(|l| l.desired_size())) {
        (Some(_), Some(now)) => (now as u32).clamp(min, max),
        _ => c.node_count,
    };
    NodegroupScalingConfig::builder().min_size(min as i32).max_size(max as i32).desired_size(desired as i32).build()
}

fn update_config(spec: &NodePoolSpec) -> NodegroupUpdateConfig {
    match spec.nodes.day2.batch_size {
        NodeAmount::Count(n) => NodegroupUpdateConfig::builder().max_unavailable(n.clamp(1, 100) as i32).build(),
        NodeAmount::Percent(p) => NodegroupUpdateConfig::builder().max_unavailable_percentage(p.clamp(1, 100) as i32).build(),
    }
}

fn live_labels(g: &Nodegroup) -> BTreeMap<String, String> {
    g.labels().map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
}

/// A live taint as the configuration writes it: (key, value, effect).
fn live_taints(g: &Nodegroup) -> BTreeSet<(String, String, String)> {
    g.taints()
        .iter()
        .map(|t| {
            let effect = match t.effect() {
                Some(EksTaintEffect::PreferNoSchedule) => "PreferNoSchedule",
                Some(EksTaintEffect::NoExecute) => "NoExecute",
                _ => "NoSchedule",
            };
            (t.key().unwrap_or_default().to_owned(), t.value().unwrap_or_default().to_owned(), effect.to_owned())
        })
        .collect()
}

fn wanted_taints(spec: &NodePoolSpec) -> BTreeSet<(String, String, String)> {
    spec.taints.iter().map(|t| (t.key.clone(), t.value.clone(), t.effect.as_str().to_owned())).collect()
}

/// Waits until the node group is ACTIVE again after a create or an update; a failed one is an error with
/// the health issues EKS reports.
async fn settled(ctx: &Context, aws: &Aws, spec: &NodePoolSpec, timeout: Duration) -> Result<Nodegroup, CloudError> {
    let (cluster, pool) = (&spec.kubernetes_cluster, &spec.nodes.name);
    crate::clouds::shared::wait_for(ctx, &format!("node group {pool} to be ACTIVE"), timeout, async || {
        let out = aws
            .eks
            .describe_nodegroup()
            .cluster_name(cluster)
            .nodegroup_name(pool)
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("reading node group {pool}")))?;
        let Some(g) = out.nodegroup else { return Err(CloudError::other(format!("node group {pool} is gone"))) };
        match g.status() {
            Some(NodegroupStatus::Active) => Ok(Some(g)),
            Some(NodegroupStatus::CreateFailed | NodegroupStatus::Degraded | NodegroupStatus::DeleteFailed) => {
                let issues: Vec<String> = g
                    .health()
                    .map(|h| {
                        h.issues()
                            .iter()
                            .map(|i| format!("{}: {}", i.code().map(|c| c.as_str()).unwrap_or("?"), i.message().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                Err(CloudError::other(format!(
                    "node group {pool} is {}: {}",
                    g.status().map(|s| s.as_str()).unwrap_or_default(),
                    if issues.is_empty() { "EKS gives no reason".to_owned() } else { issues.join("; ") }
                )))
            }
            _ => Ok(None),
        }
    })
    .await
}

/// Makes what is missing and brings what exists to `spec`: the key pair, the launch template (a new version
/// when the node configuration changed, which the node group then rolls out with UpdateNodegroupVersion, as
/// EKS replaces nodes by `update_strategy`), the node group (CreateNodegroup with one client request token
/// per create; UpdateNodegroupConfig for size, labels and taints in place).
pub async fn converge(
    ctx: &Context,
    aws: &Aws,
    spec: &NodePoolSpec,
    labels: &BTreeMap<String, String>,
    o: &Options<'_>,
    census: &Census,
) -> Result<(), CloudError> {
    let c = &spec.nodes;
    let (pool, prefix) = (&c.name, ec2_prefix(&c.name));
    let eks = eks_cluster(aws, &spec.kubernetes_cluster).await?;
    // The fabric's pieces are another resource's: read to join them, never changed.
    let fabric::Joined { security_group: sg, subnet, vpc: fabric_vpc, placement_group: placement } = fabric::joined(aws, &c.fabric).await?;
    if eks.vpc.is_some() && eks.vpc != fabric_vpc {
        return Err(CloudError::new(
            ErrorKind::InvalidRequest { field: Some("kubernetes_cluster".into()) },
            None,
            format!(
                "EKS cluster {} is in VPC {}, the fabric {} in {}: a node group's subnets are in its cluster's VPC. Give the fabric the \
                 cluster's VPC (hpc_gpu_fabric.network with the cluster's vpc_id and a subnet of it), or join a cluster in the fabric's VPC",
                spec.kubernetes_cluster,
                eks.vpc.as_deref().unwrap_or_default(),
                c.fabric.name,
                fabric_vpc.as_deref().unwrap_or("no VPC")
            ),
        ));
    }
    let mut live = observe(aws, &spec.kubernetes_cluster, pool, census).await?;
    census.gate()?;
    // The fabric's EFA group lets the nodes reach each other; the cluster's lets them reach the control plane.
    let mut groups = vec![sg];
    groups.extend(eks.security_group.clone());
    if let Some(key) = &c.ssh_public_key {
        if !live.key {
            cluster::import_key(aws, &prefix, key, &fabric::named(o.tags, &cluster::key_name(&prefix))).await?;
        } else if !live.public_key.as_deref().is_some_and(|k| cluster::same_key(k, key)) {
            cluster::delete_key(aws, &prefix).await?;
            cluster::import_key(aws, &prefix, key, &fabric::named(o.tags, &cluster::key_name(&prefix))).await?;
        }
    } else if live.key {
        cluster::delete_key(aws, &prefix).await?;
    }
    let revision = template_revision(spec, &groups);
    let description = format!("{}{revision}", cluster::REVISION_PREFIX);
    let template_name = cluster::template_name(&prefix);
    let current = live.template.as_ref().filter(|(v, _)| cluster::template_revision(v) == Some(revision.as_str()));
    let (template_id, version) = match (current, &live.template) {
        (Some((v, _)), _) => (v.launch_template_id().unwrap_or_default().to_owned(), v.version_number().unwrap_or(1)),
        (None, Some((v, _))) => {
            let id = v.launch_template_id().unwrap_or_default().to_owned();
            let made = aws
                .ec2
                .create_launch_template_version()
                .client_token(api::client_token())
                .launch_template_id(&id)
                .version_description(&description)
                .launch_template_data(template_data(spec, &groups, placement))
                .send()
                .await
                .map_err(|e| api::error(&e).context(format!("updating launch template {template_name}")))?;
            (id, made.launch_template_version().and_then(|v| v.version_number()).unwrap_or(1))
        }
        (None, None) => {
            let made = aws
                .ec2
                .create_launch_template()
                .client_token(api::client_token())
                .launch_template_name(&template_name)
                .version_description(&description)
                .launch_template_data(template_data(spec, &groups, placement))
                .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &fabric::named(o.tags, &template_name)))
                .send()
                .await
                .map_err(|e| api::error(&e).context(format!("creating launch template {template_name}")))?;
            let t = made.launch_template();
            (t.and_then(|t| t.launch_template_id()).unwrap_or_default().to_owned(), t.and_then(|t| t.latest_version_number()).unwrap_or(1))
        }
    };
    if o.retag && !template_id.is_empty() {
        fabric::retag(aws, std::slice::from_ref(&template_id), &fabric::named(o.tags, &template_name), o.stale_tags).await?;
    }
    let template = EksLaunchTemplate::builder().id(&template_id).version(version.to_string()).build();
    let Some(group) = live.group.take() else {
        let capacity = match c.capacity {
            CapacityType::Spot => CapacityTypes::Spot,
            CapacityType::CapacityBlock => CapacityTypes::CapacityBlock,
            _ => CapacityTypes::OnDemand,
        };
        let ami = match (&c.image, c.fabric.sku.arm64()) {
            (Some(_), _) => AmiTypes::Custom,
            (None, true) => AmiTypes::Al2023Arm64Nvidia,
            (None, false) => AmiTypes::Al2023X8664Nvidia,
        };
        let mut create = aws
            .eks
            .create_nodegroup()
            .cluster_name(&spec.kubernetes_cluster)
            .nodegroup_name(pool)
            .scaling_config(scaling(spec, None))
            .subnets(&subnet)
            .node_role(spec.node_role.as_deref().unwrap_or_default())
            .launch_template(template)
            .ami_type(ami)
            .capacity_type(capacity)
            .update_config(update_config(spec))
            .node_repair_config(NodeRepairConfig::builder().enabled(c.day2.repair == Repair::Replace).build())
            .set_version(spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}")))
            .set_labels(Some(labels.clone().into_iter().collect()))
            .set_tags(Some(o.tags.clone().into_iter().collect()))
            .client_request_token(api::client_token());
        for t in &spec.taints {
            create = create.taints(eks_taint(t));
        }
        create
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("creating node group {pool} in EKS cluster {}", spec.kubernetes_cluster)))?;
        settled(ctx, aws, spec, o.timeout).await?;
        return Ok(());
    };
    // What changed in place: size, labels, taints.
    let now = live_labels(&group);
    let add: BTreeMap<String, String> =
        labels.iter().filter(|(k, v)| now.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let remove: Vec<String> = now.keys().filter(|k| !labels.contains_key(*k)).cloned().collect();
    let (had, want) = (live_taints(&group), wanted_taints(spec));
    let wanted_scaling = scaling(spec, group.scaling_config());
    let same_scaling = group.scaling_config().is_some_and(|s| {
        (s.min_size(), s.max_size(), s.desired_size())
            == (wanted_scaling.min_size(), wanted_scaling.max_size(), wanted_scaling.desired_size())
    });
    if !add.is_empty() || !remove.is_empty() || had != want || !same_scaling {
        let mut update = aws.eks.update_nodegroup_config().cluster_name(&spec.kubernetes_cluster).nodegroup_name(pool);
        if !same_scaling {
            update = update.scaling_config(wanted_scaling);
        }
        if !add.is_empty() || !remove.is_empty() {
            update = update.labels(
                UpdateLabelsPayload::builder()
                    .set_add_or_update_labels((!add.is_empty()).then(|| add.into_iter().collect()))
                    .set_remove_labels((!remove.is_empty()).then_some(remove))
                    .build(),
            );
        }
        if had != want {
            let added: Vec<EksTaint> = spec
                .taints
                .iter()
                .filter(|t| !had.contains(&(t.key.clone(), t.value.clone(), t.effect.as_str().to_owned())))
                .map(eks_taint)
                .collect();
            let removed: Vec<EksTaint> = group
                .taints()
                .iter()
                .filter(|t| !spec.taints.iter().any(|w| Some(w.key.as_str()) == t.key() && eks_taint(w).effect() == t.effect()))
                .cloned()
                .collect();
            update = update.taints(
                UpdateTaintsPayload::builder()
                    .set_add_or_update_taints((!added.is_empty()).then_some(added))
                    .set_remove_taints((!removed.is_empty()).then_some(removed))
                    .build(),
            );
        }
        update.send().await.map_err(|e| api::error(&e).context(format!("updating node group {pool}")))?;
        settled(ctx, aws, spec, o.timeout).await?;
    }
    // A new template version, or another Kubernetes version: the rolling update.
    let live_version = group.launch_template().and_then(|t| t.version()).map(str::to_owned);
    let kubelet = spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}"));
    let new_kubelet = kubelet.as_deref().filter(|k| group.version() != Some(*k));
    if live_version.as_deref() != Some(version.to_string().as_str()) || new_kubelet.is_some() {
        aws.eks
            .update_nodegroup_version()
            .cluster_name(&spec.kubernetes_cluster)
            .nodegroup_name(pool)
            .launch_template(EksLaunchTemplate::builder().id(&template_id).version(version.to_string()).build())
            .set_version(new_kubelet.map(str::to_owned))
            .client_request_token(api::client_token())
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("rolling node group {pool} to launch template version {version}")))?;
        settled(ctx, aws, spec, o.timeout).await?;
    }
    if o.retag {
        let arn = group.nodegroup_arn().unwrap_or_default();
        if !o.stale_tags.is_empty() {
            aws.eks
                .untag_resource()
                .resource_arn(arn)
                .set_tag_keys(Some(o.stale_tags.to_vec()))
                .send()
                .await
                .map_err(|e| api::error(&e).context(format!("untagging node group {pool}")))?;
        }
        aws.eks
            .tag_resource()
            .resource_arn(arn)
            .set_tags(Some(o.tags.clone().into_iter().collect()))
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("tagging node group {pool}")))?;
    }
    Ok(())
}

/// Deletes the node group (EKS drains and terminates its nodes) and waits until it is gone, then the launch
/// template and the key pair; only what the census admits.
pub async fn delete(ctx: &Context, aws: &Aws, cluster: &str, pool: &str, timeout: Duration, census: &Census) -> Result<(), CloudError> {
    let prefix = ec2_prefix(pool);
    if node_group(aws, cluster, pool, census).await?.is_some() {
        match aws.eks.delete_nodegroup().cluster_name(cluster).nodegroup_name(pool).send().await {
            Ok(_) => {}
            Err(e) if api::error(&e).is_not_found() => {}
            Err(e) => return Err(api::error(&e).context(format!("deleting node group {pool}"))),
        }
        crate::clouds::shared::wait_for(ctx, &format!("node group {pool} to be deleted"), timeout, async || {
            node_group(aws, cluster, pool, &Census::reading()).await.map(|g| g.is_none().then_some(()))
        })
        .await?;
    }
    if cluster::template(aws, &prefix, census).await?.is_some() {
        match aws.ec2.delete_launch_template().launch_template_name(cluster::template_name(&prefix)).send().await {
            Ok(_) => {}
            Err(e) if api::error(&e).is_not_found() => {}
            Err(e) => return Err(api::error(&e).context(format!("deleting launch template {}", cluster::template_name(&prefix)))),
        }
    }
    if cluster::key(aws, &prefix, census).await?.0 {
        cluster::delete_key(aws, &prefix).await?;
    }
    Ok(())
}

/// A pool's state brought to what runs: size (or the autoscaler's bounds), labels and taints as the node
/// group has them, the launch template marked missing when it is gone.
fn refreshed(state: &Value, live: &PoolLive) -> Value {
    let Some(g) = &live.group else { return state.clone() };
    let mut out = state.clone();
    if let Some(s) = g.scaling_config() {
        if state.get("autoscaling").is_null() {
            out = with_attr(&out, "node_count", Value::int(i64::from(s.desired_size().unwrap_or(0))));
        } else {
            out = with_attr(
                &out,
                "autoscaling",
                Value::object([
                    ("min_count", Value::int(i64::from(s.min_size().unwrap_or(0)))),
                    ("max_count", Value::int(i64::from(s.max_size().unwrap_or(0)))),
                ]),
            );
        }
    }
    out = crate::clouds::kubernetes::with_live_labels_and_taints(&out, &live_labels(g), live_taints(g));
    if live.template.is_none() {
        out = crate::clouds::shared::with_missing(&out, |kind| !kind.starts_with("aws_launch_template"));
    }
    out
}

/// The configuration of an imported pool, from its node group and launch template.
async fn imported_config(
    aws: &Aws,
    cluster: &str,
    pool: &str,
    live: &PoolLive,
    defaults: &BTreeMap<String, String>,
) -> Result<Value, CloudError> {
    let Some(g) = &live.group else {
        return Err(CloudError::new(
            ErrorKind::NotFound,
            None,
            format!("no node group {pool:?} in EKS cluster {cluster:?} in {}", aws.region),
        ));
    };
    let tags: BTreeMap<String, String> = g.tags().map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    let fabric_name = tags
        .get(fabric::TAG)
        .cloned()
        .ok_or_else(|| CloudError::other(format!("node group {pool} has no {} tag: it was not made by this provider", fabric::TAG)))?;
    let data = live.template.as_ref().and_then(|(v, _)| v.launch_template_data());
    let instance_type = data.and_then(|d| d.instance_type()).map(|t| t.as_str().to_owned()).unwrap_or_default();
    let placement =
        if data.and_then(|d| d.placement()).and_then(|p| p.group_name()).is_some_and(|g| !g.is_empty()) { "cluster" } else { "none" };
    let efa = data.map_or(0, |d| d.network_interfaces().iter().filter(|n| matches!(n.interface_type(), Some("efa" | "efa-only"))).count());
    let reservation = data
        .and_then(|d| d.capacity_reservation_specification())
        .and_then(|c| c.capacity_reservation_target())
        .and_then(|t| t.capacity_reservation_id())
        .map(str::to_owned);
    let capacity = match (g.capacity_type(), &reservation) {
        (Some(CapacityTypes::Spot), _) => "spot",
        (Some(CapacityTypes::CapacityBlock), _) => "capacity-block",
        (_, Some(_)) => "reservation",
        _ => "on-demand",
    };
    let image = data.and_then(|d| d.image_id()).map(str::to_owned);
    let user_data = data
        .and_then(|d| d.user_data())
        .and_then(|u| base64::engine::general_purpose::STANDARD.decode(u).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .map(|u| user_part(&u));
    let s = g.scaling_config();
    let (min, max, desired) = (
        s.and_then(|s| s.min_size()).unwrap_or(0),
        s.and_then(|s| s.max_size()).unwrap_or(0),
        s.and_then(|s| s.desired_size()).unwrap_or(0),
    );
    let autoscaling = if min == max && max == desired {
        Value::Null
    } else {
        Value::object([("min_count", Value::int(i64::from(min))), ("max_count", Value::int(i64::from(max)))])
    };
    let labels: BTreeMap<String, String> =
        live_labels(g).into_iter().filter(|(k, _)| !crate::clouds::kubernetes::reserved_key(k)).collect();
    let taints: Vec<Value> = live_taints(g).into_iter().map(crate::clouds::kubernetes::taint_block).collect();
    let repair = g.node_repair_config().and_then(|r| r.enabled()).unwrap_or(false);
    // What a configuration leaves out comes back null: the default batch (a quarter) and repair (replace).
    let batch = g
        .update_config()
        .and_then(|u| u.max_unavailable_percentage().map(|p| format!("{p}%")).or(u.max_unavailable().map(|n| n.to_string())))
        .filter(|b| b != "25%");
    // The fabric's zone is its subnet's, which the node group runs in.
    let zone = match g.subnets().first() {
        Some(subnet) => aws
            .ec2
            .describe_subnets()
            .subnet_ids(subnet)
            .send()
            .await
            .map_err(|e| api::error(&e).context(format!("reading subnet {subnet} of node group {pool}")))?
            .subnets()
            .first()
            .and_then(|s| s.availability_zone())
            .map(str::to_owned),
        None => None,
    };
    let fabric_ref = Value::object([
        ("id", Value::from(api::resource_id(&aws.region, &fabric_name))),
        ("cloud", Value::from("aws")),
        ("region", Value::from(aws.region.as_str())),
        ("zone", Value::from(zone)),
        ("name", Value::from(fabric_name.as_str())),
        ("instance_type", Value::from(instance_type.as_str())),
        ("placement", Value::from(placement)),
    ]);
    Ok(Value::object([
        ("name", Value::from(pool)),
        ("fabric", fabric_ref),
        ("kubernetes_cluster", Value::from(cluster)),
        // A custom AMI decides the kubelet; EKS's AMI is the version the group reports.
        ("kubernetes_version", if image.is_some() { Value::Null } else { Value::from(g.version().map(str::to_owned)) }),
        ("node_count", Value::int(i64::from(desired))),
        ("capacity_type", if capacity == "on-demand" { Value::Null } else { Value::from(capacity) }),
        ("reservation_id", Value::from(reservation)),
        ("image", Value::from(image)),
        ("user_data", Value::from(user_data)),
        ("ssh_public_key", Value::from(live.public_key.as_deref().map(|k| k.trim().to_owned()))),
        ("node_role", Value::from(g.node_role().map(str::to_owned))),
        ("repair", if repair { Value::Null } else { Value::from("report") }),
        (
            "labels",
            if labels.is_empty() { Value::Null } else { Value::Map(labels.into_iter().map(|(k, v)| (k, Value::from(v))).collect()) },
        ),
        ("taint", Value::list(taints)),
        ("autoscaling", autoscaling),
        ("update_strategy", batch.map_or(Value::Null, |b| Value::object([("batch_size", Value::from(b))]))),
        ("rdma_interfaces", if efa == 0 { Value::Null } else { Value::int(efa as i64) }),
        ("tags", crate::clouds::shared::imported_tags(crate::catalog::Cloud::Aws, &tags, defaults)),
    ]))
}

/// The user's part of user data [`eks_user_data`] wrapped.
fn user_part(doc: &str) -> String {
    if let Some(rest) = doc.split("--HPC-POOL\n").nth(1) {
        let body = rest.split_once("\n\n").map_or(rest, |(_, b)| b);
        return body.strip_suffix("\n--HPC-POOL--\n").unwrap_or(body).to_owned();
    }
    doc.to_owned()
}

#[async_trait]
impl NodePoolBackend for backend::Aws {
    /// DescribeCluster, once: the cluster is in the fabric's region, and ACTIVE.
    async fn cluster_facts(&self, ctx: &Context, spec: &NodePoolSpec) -> Result<Option<ClusterFacts>, CloudError> {
        let client = api::connect(ctx, &spec.nodes.fabric.region).await;
        let mut refusals = Vec::new();
        let found = match eks_cluster(&client, &spec.kubernetes_cluster).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => {
                refusals.push((
                    "kubernetes_cluster",
                    "No such EKS cluster".to_owned(),
                    format!(
                        "No EKS cluster {:?} in {}, the fabric's region: a node group joins a cluster in its own region. Name an existing \
                         cluster there (aws_eks_cluster.<x>.name), or use a fabric in the cluster's region.",
                        spec.kubernetes_cluster, spec.nodes.fabric.region
                    ),
                ));
                return Ok(Some(ClusterFacts { version: None, refusals }));
            }
            Err(e) => return Err(e),
        };
        if let Some(status) = found.status.as_deref().filter(|s| *s != "ACTIVE" && *s != "UPDATING") {
            refusals.push((
                "kubernetes_cluster",
                "EKS cluster not active".to_owned(),
                format!(
                    "EKS cluster {} is {status}: node groups join an ACTIVE cluster. Apply once it is ACTIVE.",
                    spec.kubernetes_cluster
                ),
            ));
        }
        Ok(Some(ClusterFacts { version: found.version.as_deref().and_then(crate::clouds::kubernetes::minor_version), refusals }))
    }
}

#[async_trait]
impl Backend<NodePoolSpec> for backend::Aws {
    async fn configured(&self, _ctx: &Context) -> Result<(), CloudError> {
        Ok(())
    }

    fn id(&self, spec: &NodePoolSpec) -> Option<String> {
        Some(pool_id(&spec.nodes.fabric.region, &spec.kubernetes_cluster, &spec.nodes.name))
    }

    fn place(&self, v: &Value) -> String {
        format!("in EKS cluster {} in {}", v.get("kubernetes_cluster").as_str().unwrap_or_default(), fabric_region(v))
    }

    async fn apply(&self, step: &Step<'_>, change: &Change<'_, NodePoolSpec>) -> Outcome {
        let spec = change.spec;
        let client = api::connect(step.ctx, &spec.nodes.fabric.region).await;
        let stale = change.stale_tags();
        let options = Options { tags: change.tags, stale_tags: &stale, retag: change.retag(), timeout: step.timeout };
        let labels: BTreeMap<String, String> = change
            .planned
            .get("node_labels")
            .as_map()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default();
        match converge(step.ctx, &client, spec, &labels, &options, step.census).await {
            Ok(()) => Outcome::done(change.state.clone()),
            Err(e) => match observe(&client, &spec.kubernetes_cluster, &spec.nodes.name, step.census).await {
                Ok(live) if live.is_empty() && change.creating() => Outcome::failed(Value::Null, e),
                Ok(live) => Outcome::failed(refreshed(change.state, &live), e),
                Err(_) => Outcome::failed(change.state.clone(), e),
            },
        }
    }

    async fn delete(&self, step: &Step<'_>, prior: &Value, _spec: Option<&NodePoolSpec>) -> Outcome {
        let pool = prior.get("name").as_str().unwrap_or_default();
        let cluster = prior.get("kubernetes_cluster").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, fabric_region(prior)).await;
        let Err(e) = delete(step.ctx, &client, cluster, pool, step.timeout, step.census).await else {
            return Outcome::done(Value::Null);
        };
        let left = match observe(&client, cluster, pool, step.census).await {
            Ok(live) if live.is_empty() => Value::Null,
            Ok(live) => refreshed(prior, &live),
            Err(_) => prior.clone(),
        };
        Outcome::failed(left, e)
    }

    async fn read(&self, step: &Step<'_>, state: &Value, _spec: Option<&NodePoolSpec>) -> Result<Option<Value>, CloudError> {
        let pool = state.get("name").as_str().unwrap_or_default();
        let cluster = state.get("kubernetes_cluster").as_str().unwrap_or_default();
        let client = api::connect(step.ctx, fabric_region(state)).await;
        let live = observe(&client, cluster, pool, step.census).await?;
        // Without its node group the pool is gone (what is left of it, a template, goes with the next apply).
        Ok(live.group.is_some().then(|| refreshed(state, &live)))
    }

    async fn import(&self, step: &Step<'_>, id: &str) -> Result<Imported, ImportError> {
        let Some([region, cluster, pool]) = parse_pool_id(id) else {
            return Err(ImportError::BadId(format!(
                "{id:?} is not an AWS node pool id: give \"aws/<region>/<EKS cluster>/<pool name>\", e.g. \"aws/us-east-1/ml-prod/gpu\"."
            )));
        };
        let client = api::connect(step.ctx, region).await;
        let live = observe(&client, cluster, pool, step.census).await.map_err(ImportError::failed)?;
        let config = imported_config(&client, cluster, pool, &live, step.default_tags).await.map_err(ImportError::failed)?;
        Ok(Imported::new(config, BTreeMap::from([("id".to_owned(), Value::from(id))])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_roles() {
        assert!(eks_cluster_name("ml-prod_1"));
        assert!(!eks_cluster_name("arn:aws:eks:us-east-1:123456789012:cluster/ml"));
        assert!(!eks_cluster_name(""));
        assert!(role_arn("arn:aws:iam::123456789012:role/eks-gpu-nodes"));
        assert!(!role_arn("arn:aws:iam::123456789012:instance-profile/x"));
        assert!(!role_arn("eks-gpu-nodes"));
    }
}
