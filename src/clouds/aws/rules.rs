//! AWS's validation rules (see `clouds/rules.rs`): a fabric lives in one availability zone of its region,
//! FSx for Lustre names its mount itself, takes provisioned metadata IOPS and links S3.

use crate::catalog::{Cloud, limits};
use crate::clouds::rules::{Rules, missing_zone, zone_in_region};
use crate::framework::{AttributePath, Diagnostics};

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
            Some(z) => zone_in_region(region, z, diags),
        }
    }

    fn reservation_target(&self) -> &'static str {
        "the capacity reservation id (cr-...)"
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
