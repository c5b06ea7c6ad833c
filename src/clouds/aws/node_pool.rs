//! An EKS managed node group of GPU nodes (botocore's `eks` model, `CreateNodegroup`): a launch template of
//! our own with one EFA interface per network card and the fabric's cluster placement group, as a cluster's;
//! the node group names it and holds the size, capacity type, labels and taints. The in-cluster half is the
//! EFA device plugin (eks-charts `aws-efa-k8s-device-plugin`), whose resource pods request.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{network_interfaces, placement_group};
use crate::catalog::Fabric;
use crate::clouds::kubernetes::{InCluster, effect_constant, pool_tags, tolerations_yaml};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Defaults, NodeAmount, NodePoolSpec, Piece, Placement, tag_string};

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
    let template = format!("{n}-lt");
    let mut out = Vec::new();
    if c.ssh_public_key.is_some() {
        out.push(Piece::new("aws_key_pair", format!("{n}-key")).set("tags", &tags));
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
            .set_opt("key_name", c.ssh_public_key.as_ref().map(|_| format!("aws_key_pair.{n}-key")))
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
