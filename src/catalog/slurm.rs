//! The Slurm versions `hpc_slurm_cluster` renders configuration for, and what each supports that the
//! rendering depends on. Every row is read from SchedMD's own changelogs and man pages (SchedMD/slurm:
//! `CHANGELOG/slurm-<version>.md`, `doc/man/man5/topology.conf.5` and `topology.yaml.5` at each release's
//! tag), quoted in the notes. Pure data.

/// How a version writes the block topology (`topology/block`), if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockSyntax {
    /// 23.11: `BlockName=... Nodes=...` lines and an optional `BlockLevels`. Every block must hold as many nodes
    /// as the first, or slurmctld stops (topology_block.c at slurm-23-11: "children count no equal bblock_node_cnt").
    Levels,
    /// 24.05 and later: `BlockSizes=<planning base block size>`; before 25.05 every block must hold at least
    /// that many nodes, or slurmctld stops (block_record.c at slurm-24-11: "children count lower than
    /// bblock_node_cnt").
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
    /// The cgroup/v2 plugin, which cgroup v2 hosts (Ubuntu 22.04 and later, Debian 12) need for `proctrack/cgroup` and
    /// `task/cgroup` (22.05 RELEASE_NOTES: "Added support for Cgroup Version 2"; 21.08 ships `src/plugins/cgroup/v1`
    /// only, and its cgroup.conf(5) names `cgroup/v1` and `autodetect` alone).
    pub cgroup_v2: bool,
    /// `sbatch --segment` (24.05 CHANGELOG: "Add --segment to job allocation to be used in topology/block"). From 24.05 a
    /// job of several segments may not name its nodes (eval_nodes_block.c: "requires nodes with segment are not
    /// supported").
    pub segment: bool,
    /// `TreeWidth` when slurm.conf does not set it: 50 before 23.11, 16 from 23.11 ("Change TreeWidth default from 50 to
    /// 16").
    pub tree_width_default: u16,
    /// slurmd forwards messages to cloud nodes it has no address for (23.11: "Enable fanout for dynamic and unaddresable
    /// cloud nodes"). Before, cloud nodes without DNS need `TreeWidth` at least the node count (elastic_computing.shtml
    /// at 22.05: TreeWidth "at least as large as the maximum node count. The value may not exceed 65533").
    pub cloud_fanout: bool,
    /// Which distributions package it, for messages.
    pub packaged: &'static str,
}

/// The largest `TreeWidth` Slurm takes (slurm.conf(5): "The value may not exceed 65533").
pub const TREE_WIDTH_MAX: u16 = 65533;

pub static SLURM_VERSIONS: &[SlurmVersion] = &[
    // 21.08's slurm.conf(5) (tag slurm-21-08-8-2) has cloud_reg_addrs, enable_configless, SuspendExcParts and
    // PrivateData=cloud; what the stock Ubuntu 22.04 GPU images install. Its cgroup plugins are v1 only
    // (src/plugins/cgroup/v1; cgroup.conf(5): CgroupPlugin "cgroup/v1|autodetect", default cgroup/v1), which
    // Ubuntu 22.04's cgroup v2 cannot mount.
    SlurmVersion {
        version: "21.08",
        block: None,
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: true,
        private_data_cloud: true,
        cgroup_v2: false,
        segment: false,
        tree_width_default: 50,
        cloud_fanout: false,
        packaged: "Ubuntu 22.04 (the clouds' stock GPU images)",
    },
    // 22.05: cgroup/v2 (RELEASE_NOTES "Added support for Cgroup Version 2"; cgroup.conf(5) CgroupPlugin default
    // "autodetect"); TreeWidth still 50 and no fanout to cloud nodes without an address.
    SlurmVersion {
        version: "22.05",
        block: None,
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: true,
        private_data_cloud: true,
        cgroup_v2: true,
        segment: false,
        tree_width_default: 50,
        cloud_fanout: false,
        packaged: "Debian 12 (bookworm)",
    },
    SlurmVersion {
        version: "23.02",
        block: None,
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: true,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: false,
        tree_width_default: 50,
        cloud_fanout: false,
        packaged: "",
    },
    // 23.11: topology/block (topology.conf(5) at slurm-23-11, blocks of equal size only); NEWS: "Change TreeWidth
    // default from 50 to 16", "Enable fanout for dynamic and unaddresable cloud nodes", "Remove cloud_reg_addrs and
    // make it default behavior".
    SlurmVersion {
        version: "23.11",
        block: Some(BlockSyntax::Levels),
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: false,
        tree_width_default: 16,
        cloud_fanout: true,
        packaged: "Ubuntu 24.04",
    },
    // 24.05: BlockSizes (NEWS: "Replaced the BlockLevels with BlockSizes in topology.conf") and sbatch --segment
    // ("Add --segment to job allocation to be used in topology/block").
    SlurmVersion {
        version: "24.05",
        block: Some(BlockSyntax::Sizes),
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: true,
        tree_width_default: 16,
        cloud_fanout: true,
        packaged: "",
    },
    SlurmVersion {
        version: "24.11",
        block: Some(BlockSyntax::Sizes),
        yaml: false,
        short_blocks: false,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: true,
        tree_width_default: 16,
        cloud_fanout: true,
        packaged: "Debian 13 (trixie)",
    },
    // 25.05: topology.yaml, and CHANGELOG/slurm-25.05.md: "Allow topology/block Block definitions to have fewer nodes
    // than the minimum BlockSize".
    SlurmVersion {
        version: "25.05",
        block: Some(BlockSyntax::Sizes),
        yaml: true,
        short_blocks: true,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: true,
        tree_width_default: 16,
        cloud_fanout: true,
        packaged: "",
    },
    SlurmVersion {
        version: "25.11",
        block: Some(BlockSyntax::Sizes),
        yaml: true,
        short_blocks: true,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: true,
        tree_width_default: 16,
        cloud_fanout: true,
        packaged: "",
    },
    // 26.05 (CHANGELOG/slurm-26.05.md at slurm-26-05-3-1): nothing the rendering relies on changed ("Skip
    // segmentation when job fits within a single segment", "topology/block - Validate BlockSizes and fatal when
    // they are invalid" hold for what is rendered since 24.05); what Debian testing packages (26.05.5).
    SlurmVersion {
        version: "26.05",
        block: Some(BlockSyntax::Sizes),
        yaml: true,
        short_blocks: true,
        cloud_reg_addrs_parameter: false,
        private_data_cloud: false,
        cgroup_v2: true,
        segment: true,
        tree_width_default: 16,
        cloud_fanout: true,
        packaged: "Debian testing (forky)",
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

    /// Where each setting a fix depends on arrived: the first version that has it, and every later one too.
    #[test]
    fn each_feature_arrives_in_its_release_and_stays() {
        let first = |has: fn(&SlurmVersion) -> bool| {
            let at = SLURM_VERSIONS.iter().position(has).map(|i| SLURM_VERSIONS[i].version);
            let stays = SLURM_VERSIONS.iter().skip_while(|v| !has(v)).all(has);
            (at, stays)
        };
        assert_eq!(first(|v| v.cgroup_v2), (Some("22.05"), true));
        assert_eq!(first(|v| v.block.is_some()), (Some("23.11"), true));
        assert_eq!(first(|v| v.cloud_fanout), (Some("23.11"), true));
        assert_eq!(first(|v| v.segment), (Some("24.05"), true));
        assert_eq!(first(|v| v.short_blocks), (Some("25.05"), true));
        assert_eq!(first(|v| v.yaml), (Some("25.05"), true));
        let widths: Vec<(&str, u16)> = SLURM_VERSIONS.iter().map(|v| (v.version, v.tree_width_default)).collect();
        assert!(widths.iter().all(|(v, w)| *w == if *v < "23.11" { 50 } else { 16 }), "{widths:?}");
        // A version with --segment has the block topology it is for.
        assert!(SLURM_VERSIONS.iter().filter(|v| v.segment).all(|v| v.block == Some(BlockSyntax::Sizes)));
    }
}
