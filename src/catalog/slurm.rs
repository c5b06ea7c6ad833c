//! The Slurm versions `hpc_slurm_cluster` renders configuration for, and what each supports that the
//! rendering depends on. Every row is read from SchedMD's own changelogs and man pages (SchedMD/slurm:
//! `CHANGELOG/slurm-<version>.md`, `doc/man/man5/topology.conf.5` and `topology.yaml.5` at each release's
//! tag), quoted in the notes. Pure data.

/// How a version writes the block topology (`topology/block`), if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockSyntax {
    /// 23.11: `BlockName=... Nodes=...` lines and an optional `BlockLevels`.
    Levels,
    /// 24.05 and later: `BlockSizes=<planning base block size>`; before 25.05 every block must hold at least
    /// that many nodes.
    Sizes,
}

#[derive(Debug)]
pub struct SlurmVersion {
    /// `22.05`: the major release (the configuration does not change within one).
    pub version: &'static str,
    /// `topology/block` and how its file is written.
    pub block: Option<BlockSyntax>,
    /// `topology.yaml` with several named topologies and a partition's `Topology=` (25.05).
    pub yaml: bool,
    /// Blocks may hold fewer nodes than the base block size (25.05: "Allow topology/block Block definitions
    /// to have fewer nodes than the minimum BlockSize").
    pub short_blocks: bool,
    /// `SlurmctldParameters=cloud_reg_addrs` is still a parameter (before 23.11, which "Remove[d]
    /// cloud_reg_addrs and ma[de] it default behavior").
    pub cloud_reg_addrs_parameter: bool,
    /// `PrivateData=cloud` is needed to list CLOUD nodes (before 23.02: "Change cloud nodes to show by default.
    /// PrivateData=cloud is no longer needed").
    pub private_data_cloud: bool,
    /// Which distributions package it, for messages.
    pub packaged: &'static str,
}

pub static SLURM_VERSIONS: &[SlurmVersion] = &[
    // 21.08's slurm.conf(5) (tag slurm-21-08-8-2) has cloud_reg_addrs, enable_configless, SuspendExcParts and
    // PrivateData=cloud; what the stock Ubuntu 22.04 GPU images install.
    SlurmVersion {
        version: "21.08",
        block: None,
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: true,
        private_data_cloud: true,
        packaged: "Ubuntu 22.04 (the clouds' stock GPU images)",
    },
    SlurmVersion {
        version: "22.05",
        block: None,
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: true,
        private_data_cloud: true,
        packaged: "Debian 12 (bookworm)",
    },
    SlurmVersion {
        version: "23.02",
        block: None,
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: true,
        private_data_cloud: false,
        packaged: "",
    },
    SlurmVersion {
        version: "23.11",
        block: Some(BlockSyntax::Levels),
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        packaged: "Ubuntu 24.04",
    },
    SlurmVersion {
        version: "24.05",
        block: Some(BlockSyntax::Sizes),
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        packaged: "",
    },
    SlurmVersion {
        version: "24.11",
        block: Some(BlockSyntax::Sizes),
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        packaged: "Debian 13 (trixie)",
    },
    SlurmVersion {
        version: "25.05",
        block: Some(BlockSyntax::Sizes),
        yaml: true,
        short_blocks: true,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        packaged: "",
    },
    SlurmVersion {
        version: "25.11",
        block: Some(BlockSyntax::Sizes),
        yaml: true,
        short_blocks: true,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        packaged: "",
    },
];

/// A version by its major release (`22.05`; a patch release `22.05.8` names its major).
pub fn find(version: &str) -> Option<&'static SlurmVersion> {
    let major: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
    SLURM_VERSIONS.iter().find(|v| v.version == major)
}

/// The versions, for messages.
pub fn names() -> Vec<&'static str> {
    SLURM_VERSIONS.iter().map(|v| v.version).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_release_names_its_major_and_the_block_topology_arrived_in_23_11() {
        assert_eq!(find("22.05.8").map(|v| v.version), Some("22.05"));
        assert!(find("21.07").is_none() && find("22").is_none());
        assert_eq!(find("21.08.5").map(|v| v.version), Some("21.08"), "what the stock Ubuntu 22.04 images install");
        let block: Vec<&str> = SLURM_VERSIONS.iter().filter(|v| v.block.is_some()).map(|v| v.version).collect();
        assert_eq!(block.first(), Some(&"23.11"));
        assert_eq!(find("23.11").unwrap().block, Some(BlockSyntax::Levels));
        assert!(SLURM_VERSIONS.iter().filter(|v| v.yaml).all(|v| v.block == Some(BlockSyntax::Sizes)));
    }
}
