//! AWS's validation rules (see `clouds/rules.rs`): a fabric lives in one availability zone of its region,
//! FSx for Lustre names its mount itself, takes provisioned metadata IOPS and links S3.

use crate::catalog::{Cloud, Sku, limits};
use crate::clouds::rules::{Rules, listed, missing_zone, zone_in_region};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Placement};

pub struct Aws;

impl Rules for Aws {
    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    fn fabric_zone(&self, region: &str, zone: Option<&str>, diags: &mut Diagnostics) -> bool {
        match zone {
            None => missing_zone(
                self.cloud(),
                "an availability zone such as \"us-east-1a\": a cluster placement group lives in one zone",
                diags,
            ),
            Some(z) => zone_in_region(crate::catalog::Cloud::Aws, region, z, diags),
        }
    }

    fn node_identity_form(&self) -> Option<&'static str> {
        Some(
            "an IAM instance profile (its name, or its ARN arn:aws:iam::<account>:instance-profile/<name>) whose role may tag only its \
             own instance: ec2:CreateTags on arn:aws:ec2:*:*:instance/* with the condition StringEquals {\"aws:ARN\": \
             \"${ec2:SourceInstanceARN}\"}",
        )
    }

    fn node_identity_ok(&self, identity: &str) -> bool {
        let name = |n: &str| !n.is_empty() && n.len() <= 128 && n.chars().all(|c| c.is_ascii_alphanumeric() || "+=,.@-_".contains(c));
        match identity.strip_prefix("arn:") {
            Some(rest) => {
                let parts: Vec<&str> = rest.splitn(5, ':').collect();
                matches!(parts.as_slice(), [partition, "iam", "", account, resource]
                    if partition.starts_with("aws") && account.len() == 12 && account.chars().all(|c| c.is_ascii_digit())
                        && resource.strip_prefix("instance-profile/").is_some_and(|p| p.rsplit('/').next().is_some_and(name)))
            }
            None => name(identity),
        }
    }

    fn most_nodes_listed(&self) -> Option<(u32, String)> {
        Some(listed("the nodes", "EC2's DescribeInstances", super::cluster::LIST_PAGE as usize))
    }

    fn reservation_target(&self) -> &'static str {
        "the capacity reservation id (cr-...), or for an UltraServer node type the Capacity Block id (cb-...)"
    }

    /// UltraServer node types (p6e-gb200) are sold only as UltraServers in Capacity Blocks, and the cluster
    /// launches each NVLink domain into one UltraServer of the block: `reservation_id` names the block.
    fn cluster_capacity(
        &self,
        capacity: CapacityType,
        sku: &Sku,
        _placement: Placement,
        _node_count: u32,
        diags: &mut Diagnostics,
    ) -> bool {
        let Some(ultraserver) = super::ultraserver_type(sku) else { return true };
        if capacity != CapacityType::CapacityBlock {
            diags.error_at(
                AttributePath::attr("capacity_type"),
                "UltraServer without a Capacity Block",
                format!(
                    "{} is sold only as UltraServers ({ultraserver}), bought through EC2 Capacity Blocks by UltraServer type: capacity_type \
                     {:?} cannot launch it. Buy a Capacity Block for {ultraserver} (DescribeCapacityBlockOfferings with UltraserverType, then \
                     PurchaseCapacityBlock) and set capacity_type = \"capacity-block\" with reservation_id = its id (cb-...).",
                    sku.name,
                    capacity.as_str()
                ),
            );
            return false;
        }
        true
    }

    fn reservation_id(&self, capacity: CapacityType, sku: &Sku, id: &str, diags: &mut Diagnostics) -> bool {
        let Some(ultraserver) = super::ultraserver_type(sku) else { return true };
        if capacity == CapacityType::CapacityBlock && !id.starts_with("cb-") {
            diags.error_at(
                AttributePath::attr("reservation_id"),
                "Capacity Block id expected",
                format!(
                    "{} launches one NVLink domain into each UltraServer ({ultraserver}) of a Capacity Block: set reservation_id to the \
                     Capacity Block's id (cb-...), not {id:?}. DescribeCapacityBlocks lists yours.",
                    sku.name
                ),
            );
            return false;
        }
        true
    }

    fn filesystem_name(&self, given: Option<&str>, diags: &mut Diagnostics) -> bool {
        if given.is_none() {
            return true;
        }
        diags.error_at(
            AttributePath::attr("filesystem_name"),
            "Filesystem name assigned by FSx",
            "FSx for Lustre chooses the mount name of a PERSISTENT_2 filesystem itself; remove filesystem_name and read it (or \
             mount_command) after apply.",
        );
        false
    }

    fn metadata_iops(&self, iops: u64, diags: &mut Diagnostics) -> bool {
        if limits::aws_metadata_iops_valid(iops) {
            return true;
        }
        diags.error_at(
            AttributePath::attr("metadata_iops"),
            "Unsupported metadata IOPS",
            format!("{iops} is not an FSx metadata IOPS value: use 1500, 3000, 6000, 12000, or a multiple of 12000 up to 192000."),
        );
        false
    }

    fn data_repository_ok(&self, repo: &str) -> bool {
        repo.starts_with("s3://")
    }

    fn data_repository_form(&self) -> &'static str {
        "s3://bucket/prefix"
    }
}
