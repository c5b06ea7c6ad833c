//! Service rules the planner validates against: managed Lustre sizes and throughput tiers, metadata IOPS,
//! scale limits. Each rule names its source; see `shared/docs/domain.md` section 6 and
//! `shared/docs/limits-and-reliability.md`.

use super::Cloud;

/// Throughput tiers (MB/s per TiB) each cloud's managed Lustre offers.
pub fn lustre_throughput_tiers(cloud: Cloud) -> &'static [u32] {
    match cloud {
        // FSx PERSISTENT_2 per_unit_storage_throughput; Google Managed Lustre; OCI MBPS_PER_TB_*.
        Cloud::Aws | Cloud::Gcp | Cloud::Oci => &[125, 250, 500, 1000],
        // AMLFS-Durable-Premium-40/125/250/500.
        Cloud::Azure => &[40, 125, 250, 500],
    }
}

/// How a cloud's managed Lustre behaves where a plan must know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LustreService {
    /// The name clients mount is fixed by the service (AMLFS: `lustrefs`).
    pub fixed_name: Option<&'static str>,
    /// The service picks the name clients mount itself (FSx: the mount name), known once it exists.
    pub names_itself: bool,
    /// Capacity grows in place (never shrinks anywhere).
    pub grows_in_place: bool,
    /// The throughput tier changes in place.
    pub tier_in_place: bool,
    /// A weekly maintenance window is part of the filesystem.
    pub maintenance_window: bool,
}

pub fn lustre_service(cloud: Cloud) -> LustreService {
    let base =
        LustreService { fixed_name: None, names_itself: false, grows_in_place: true, tier_in_place: false, maintenance_window: false };
    match cloud {
        // FSx for Lustre: UpdateFileSystem changes StorageCapacity and PerUnitStorageThroughput; MountName is FSx's.
        Cloud::Aws => LustreService { names_itself: true, tier_in_place: true, ..base },
        // AMLFS is sized at creation, serves `lustrefs`, and has a maintenance window.
        Cloud::Azure => LustreService { fixed_name: Some("lustrefs"), grows_in_place: false, maintenance_window: true, ..base },
        Cloud::Gcp | Cloud::Oci => base,
    }
}

/// Why a capacity is not accepted, with the valid alternatives around it.
#[derive(Debug, PartialEq, Eq)]
pub struct CapacityError {
    pub rule: String,
    pub nearest: Vec<u64>,
}

/// Checks a Lustre capacity (GiB) against the cloud's rule for the tier. `Ok` carries the source.
pub fn check_lustre_capacity(cloud: Cloud, tier: u32, gib: u64) -> Result<&'static str, CapacityError> {
    match cloud {
        Cloud::Aws => {
            // FSx API StorageCapacity for PERSISTENT_2 SSD: 1200, 2400, then multiples of 2400 GiB.
            let ok = gib == 1200 || (gib >= 2400 && gib.is_multiple_of(2400));
            let below = if gib < 2400 { 1200 } else { gib / 2400 * 2400 };
            let above = if gib < 1200 {
                1200
            } else if gib < 2400 {
                2400
            } else {
                (gib / 2400 + 1) * 2400
            };
            ok.then_some("FSx API StorageCapacity (PERSISTENT_2 SSD)").ok_or_else(|| CapacityError {
                rule: "FSx for Lustre PERSISTENT_2 takes 1200 GiB, 2400 GiB, or a multiple of 2400 GiB".into(),
                nearest: dedup(vec![below, above]),
            })
        }
        Cloud::Azure => {
            // AMLFS: minimum and step per SKU, in TiB: 48 (-40), 16 (-125), 8 (-250), 4 (-500).
            let step_tib = match tier {
                40 => 48,
                125 => 16,
                250 => 8,
                _ => 4,
            };
            let step = step_tib * 1024;
            let ok = gib >= step && gib.is_multiple_of(step);
            ok.then_some("MicrosoftDocs azure-managed-lustre create-file-system-portal.md (2024-11)").ok_or_else(|| CapacityError {
                rule: format!("AMLFS-Durable-Premium-{tier} takes multiples of {step_tib} TiB ({step} GiB)"),
                nearest: dedup(vec![(gib / step).max(1) * step, (gib / step + 1) * step]),
            })
        }
        Cloud::Gcp => {
            // Google Managed Lustre "Performance tiers": (minimum = step, threshold, step above, maximum).
            let (step, threshold, big, max) = match tier {
                1000 => (9_000, 1_530_000, 72_000, 10_008_000),
                500 => (18_000, 3_060_000, 144_000, 20_016_000),
                250 => (36_000, 6_120_000, 288_000, 40_032_000),
                _ => (72_000, 12_240_000, 72_000, 12_240_000),
            };
            let unit = if gib > threshold { big } else { step };
            let ok = gib >= step && gib <= max && gib.is_multiple_of(unit);
            ok.then_some("Google Cloud Managed Lustre docs, \"Performance tiers\"").ok_or_else(|| CapacityError {
                rule: format!(
                    "Managed Lustre at {tier} MB/s/TiB takes {step} to {threshold} GiB in steps of {step}, then steps of {big} up to {max} GiB"
                ),
                nearest: dedup(vec![((gib / unit).max(1) * unit).min(max), ((gib / unit + 1) * unit).min(max)]),
            })
        }
        Cloud::Oci => {
            // OCI File Storage with Lustre: minimum 31,200, steps of 10,400 up to 124,800, then 41,600
            // (capacity_in_gbs; OCI's GB are binary, like its block volume sizes).
            let unit = if gib > 124_800 { 41_600 } else { 10_400 };
            let ok = gib >= 31_200 && gib.is_multiple_of(unit);
            ok.then_some("OCI docs, \"Managing Lustre file systems\" / \"Increasing File System Capacity\"").ok_or_else(|| CapacityError {
                rule: "OCI Lustre takes at least 31200 GB, in steps of 10400 GB up to 124800 GB and of 41600 GB above".into(),
                nearest: dedup(vec![((gib / unit) * unit).max(31_200), ((gib / unit + 1) * unit).max(31_200)]),
            })
        }
    }
}

fn dedup(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v.dedup();
    v
}

/// FSx PERSISTENT_2 user-provisioned metadata IOPS: 1500, 3000, 6000, 12000, then multiples of 12000
/// up to 192000 (FSx API MetadataConfiguration).
pub fn aws_metadata_iops_valid(iops: u64) -> bool {
    matches!(iops, 1500 | 3000 | 6000) || ((12_000..=192_000).contains(&iops) && iops.is_multiple_of(12_000))
}

/// Azure: one VM scale set placement group holds at most 100 VMs, and InfiniBand needs a single
/// placement group ("Working with large virtual machine scale sets"; setup-infiniband.md).
pub const AZURE_VMSS_MAX_IB_NODES: u32 = 100;
/// AWS Capacity Blocks: up to 64 instances each.
pub const AWS_CAPACITY_BLOCK_MAX_INSTANCES: u32 = 64;
/// GCP compact placement policy: 1,500 VMs (GKE "compact placement"; slurm-gcp PLACEMENT_MAX_CNT).
pub const GCP_COMPACT_PLACEMENT_MAX_VMS: u32 = 1500;
/// AWS user data: 16 KB before base64 encoding.
pub const AWS_USER_DATA_MAX_BYTES: usize = 16 * 1024;

/// The most user data each cloud takes, in bytes of the text as written, and the rule in words.
/// AWS: 16 KB before base64 (EC2 User Guide, "Run commands when you launch an EC2 instance"). Google Cloud:
/// a metadata value holds at most 256 KB ("About VM metadata", limits). Azure: `customData` at most 65,535
/// characters once base64-encoded (Compute REST API, OSProfile). OCI: all instance metadata together at most
/// 32,000 bytes, the user data base64-encoded within it (Core API, LaunchInstanceDetails.metadata).
pub fn user_data_limit(cloud: Cloud) -> (usize, &'static str) {
    match cloud {
        Cloud::Aws => (AWS_USER_DATA_MAX_BYTES, "EC2 accepts at most 16 KB of user data"),
        Cloud::Gcp => (256 * 1024, "a Google Cloud metadata value holds at most 256 KB"),
        // 65,535 base64 characters decode to 49,149 bytes.
        Cloud::Azure => (49_149, "Azure takes at most 65,535 characters of base64 custom data (49,149 bytes of text)"),
        // Leave room in the 32,000 bytes for the SSH key: 31,000 base64 characters are 23,250 bytes of text.
        Cloud::Oci => {
            (23_250, "OCI takes at most 32,000 bytes of instance metadata, user data base64-encoded (about 23,000 bytes of text)")
        }
    }
}

/// The most tags (labels) one resource may carry: AWS 50 ("Tag your Amazon EC2 resources"), Azure 50
/// ("Use tags to organize your Azure resources"), Google Cloud 64 labels ("Labels overview", requirements),
/// OCI 64 per resource (Tagging "Limits": free-form and defined tags together).
pub fn tag_limit(cloud: Cloud) -> usize {
    match cloud {
        Cloud::Aws | Cloud::Azure => 50,
        Cloud::Gcp | Cloud::Oci => 64,
    }
}

/// The most tags of its own the provider adds to one piece (`hpc:fabric`, `hpc:cluster`, `hpc:node`, and on
/// the pieces that record a configuration for import up to six more).
pub const OWN_TAGS_MAX: usize = 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsx_capacity_steps() {
        assert!(check_lustre_capacity(Cloud::Aws, 250, 1200).is_ok());
        assert!(check_lustre_capacity(Cloud::Aws, 250, 4800).is_ok());
        let e = check_lustre_capacity(Cloud::Aws, 250, 3000).unwrap_err();
        assert_eq!(e.nearest, vec![2400, 4800]);
        assert_eq!(check_lustre_capacity(Cloud::Aws, 250, 1000).unwrap_err().nearest, vec![1200]);
    }

    #[test]
    fn amlfs_gcp_oci_steps() {
        assert!(check_lustre_capacity(Cloud::Azure, 500, 4 * 1024).is_ok());
        assert!(check_lustre_capacity(Cloud::Azure, 40, 16 * 1024).is_err());
        assert!(check_lustre_capacity(Cloud::Gcp, 500, 36_000).is_ok());
        assert!(check_lustre_capacity(Cloud::Gcp, 500, 9_000).is_err());
        assert!(check_lustre_capacity(Cloud::Gcp, 1000, 1_584_000).is_ok());
        assert!(check_lustre_capacity(Cloud::Gcp, 1000, 1_539_000).is_err());
        assert!(check_lustre_capacity(Cloud::Oci, 125, 31_200).is_ok());
        assert!(check_lustre_capacity(Cloud::Oci, 125, 20_800).is_err());
        assert!(check_lustre_capacity(Cloud::Oci, 125, 166_400).is_ok());
    }

    #[test]
    fn metadata_iops() {
        assert!(aws_metadata_iops_valid(1500) && aws_metadata_iops_valid(24_000) && !aws_metadata_iops_valid(2000));
        assert!(!aws_metadata_iops_valid(204_000));
    }
}
