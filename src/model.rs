//! The neutral model every layer shares: the validated specs a configuration becomes, the vendor pieces
//! an expansion lists, and the provider settings the planner needs. Plain data, no IO and no cloud
//! vocabulary; the planner (`planner/spec.rs`) builds the specs, the clouds' expanders and backends read them.

use std::collections::BTreeMap;

use crate::catalog::{Cloud, Sku};
use crate::framework::{Type, Value};
use crate::nodes;
use crate::redact::{ExposeOption, Secret};

/// Placement policy of a fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Proximity placement: AWS cluster placement group, Azure PPG, GCP compact policy, OCI compute cluster.
    Cluster,
    /// OCI only: a cluster network (RDMA placement through an instance pool).
    ClusterNetwork,
    None,
}

impl Placement {
    pub const NAMES: [&'static str; 3] = ["cluster", "cluster-network", "none"];
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Cluster => "cluster",
            Placement::ClusterNetwork => "cluster-network",
            Placement::None => "none",
        }
    }
    pub fn parse(s: &str) -> Option<Placement> {
        [Placement::Cluster, Placement::ClusterNetwork, Placement::None].into_iter().find(|p| p.as_str() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Network {
    Existing { vpc_id: String, subnet_id: String },
    Create { cidr: String },
}

#[derive(Clone, Debug)]
pub struct FabricSpec {
    pub name: String,
    pub cloud: Cloud,
    pub region: String,
    pub zone: Option<String>,
    pub sku: &'static Sku,
    pub network: Network,
    pub placement: Placement,
    pub max_distance: Option<i64>,
    pub resource_group: Option<String>,
    pub compartment_id: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl ClusterSpec {
    /// Nodes per NVLink domain for a rack-scale node type (GB200/GB300 NVL72), `None` otherwise.
    pub fn nvlink_domain_nodes(&self) -> Option<u32> {
        self.fabric.sku.nvlink_domain.map(|d| d.nodes)
    }

    /// The cluster's NVLink domains in order, each with its nodes' indices (`<name>-<i>`): whole domains of
    /// consecutive nodes. Empty for a node type whose NVLink stays inside the node.
    pub fn nvlink_domains(&self) -> Vec<NvlinkDomainPlan> {
        let Some(per) = self.nvlink_domain_nodes() else { return Vec::new() };
        (0..nodes::domain_count(self.node_count, per))
            .map(|d| NvlinkDomainPlan {
                index: d,
                name: nodes::domain_name(&self.name, d),
                nodes: nodes::domain_nodes(d, per, self.node_count).collect(),
            })
            .collect()
    }

    /// What the plan shows of the user data: its size, or only that it is write-only.
    pub fn user_data_summary(&self) -> Option<String> {
        let text = self.user_data.as_ref()?;
        Some(if self.user_data_write_only { "write-only (not stored)".to_owned() } else { format!("{} bytes", text.expose().len()) })
    }

    /// How the plan names the subnet (`what` = "subnet") or Google host network (`what` = "host network")
    /// the nodes join: the fabric's, the one given to a cluster without a fabric, or the one it makes.
    pub fn network_label(&self, what: &str) -> String {
        match self.own_fabric.as_ref().map(|f| &f.network) {
            Some(Network::Existing { vpc_id, subnet_id }) => {
                if what == "subnet" {
                    subnet_id.clone()
                } else {
                    vpc_id.clone()
                }
            }
            Some(Network::Create { .. }) => {
                let made = if what == "subnet" { format!("{}-subnet", self.name) } else { format!("{}-vpc", self.name) };
                format!("{what} {made} (made with this cluster)")
            }
            None => format!("{what} of fabric {}", self.fabric.name),
        }
    }
}

/// What a cluster or filesystem knows of its fabric (the `fabric = hpc_gpu_fabric.x` object).
#[derive(Clone, Debug)]
pub struct FabricRef {
    pub name: String,
    pub cloud: Cloud,
    pub region: String,
    pub zone: Option<String>,
    pub sku: &'static Sku,
    pub placement: Placement,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityType {
    OnDemand,
    Spot,
    Reservation,
    CapacityBlock,
    FlexStart,
}

impl CapacityType {
    pub const NAMES: [&'static str; 5] = ["on-demand", "spot", "reservation", "capacity-block", "flex-start"];
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reservation => "reservation",
            CapacityType::CapacityBlock => "capacity-block",
            CapacityType::FlexStart => "flex-start",
        }
    }
    pub fn parse(s: &str) -> Option<CapacityType> {
        [Self::OnDemand, Self::Spot, Self::Reservation, Self::CapacityBlock, Self::FlexStart].into_iter().find(|c| c.as_str() == s)
    }
    /// Which clouds offer it: capacity blocks are AWS's; flex start (DWS) is Google's.
    pub fn offered_on(self, cloud: Cloud) -> bool {
        match self {
            CapacityType::CapacityBlock => cloud == Cloud::Aws,
            CapacityType::FlexStart => cloud == Cloud::Gcp,
            _ => true,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Pretraining,
    Finetuning,
    Inference,
    /// Video transcoding: needs hardware video encoders (NVENC).
    Media,
}

impl Workload {
    pub const NAMES: [&'static str; 4] = ["pretraining", "finetuning", "inference", "media"];
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Pretraining => "pretraining",
            Workload::Finetuning => "finetuning",
            Workload::Inference => "inference",
            Workload::Media => "media",
        }
    }
    pub fn parse(s: &str) -> Option<Workload> {
        [Self::Pretraining, Self::Finetuning, Self::Inference, Self::Media].into_iter().find(|w| w.as_str() == s)
    }

    /// Whether the nodes train together (and so want RDMA and proximity placement).
    pub fn trains(self) -> bool {
        matches!(self, Workload::Pretraining | Workload::Finetuning)
    }
}

/// The most nodes a cluster may have (`node_count`'s ceiling); a cloud whose refresh lists fewer holds it
/// lower (`Rules::most_nodes_listed`).
pub const MOST_NODES: u32 = 100_000;

#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub name: String,
    pub fabric: FabricRef,
    /// No fabric was given: the fabric the cluster makes for itself (its own network, or the one it joins,
    /// with no proximity placement).
    pub own_fabric: Option<FabricSpec>,
    /// Without a fabric, the `gpu` it names (recorded where the cloud has nowhere else to keep it).
    pub gpu: Option<String>,
    pub node_count: u32,
    pub capacity: CapacityType,
    pub reservation_id: Option<String>,
    pub image: Option<String>,
    /// The user's user data: redacted from every `Debug` (it often carries tokens).
    pub user_data: Option<Secret<String>>,
    /// `user_data` came from the write-only `user_data_wo`: plans and states never show anything of it.
    pub user_data_write_only: bool,
    /// `user_data_wo_version`, which stands for the write-only user data in the node revision.
    pub user_data_version: Option<i64>,
    pub ssh_public_key: Option<String>,
    /// The identity the nodes publish their self-check with (`node_identity`): an AWS instance profile, a
    /// Google service account, an OCI dynamic group.
    pub node_identity: Option<String>,
    pub workload: Workload,
    pub rdma_interfaces: u32,
    pub tags: BTreeMap<String, String>,
    /// Day 2: how unhealthy nodes are repaired and configuration changes rolled onto the nodes.
    pub day2: Day2,
    /// What an apply does when the cloud gives fewer nodes than planned.
    pub capacity_policy: CapacityPolicy,
    /// The node groups the cluster runs in now, in order, with their sizes, as the prior state records them
    /// (Azure's scale sets; empty on a create and on clouds whose nodes stand alone). A change is laid out
    /// around them, so that no running group is resized the other way (see `clouds/azure/mod.rs`).
    pub running_groups: Vec<u32>,
    /// The Slurm cluster the nodes join (`slurm`, the fabric's `slurm_join`); None for nodes outside Slurm.
    pub slurm: Option<SlurmJoin>,
}

/// What a GPU node needs to join a Slurm cluster: the controllers' addresses and the key its daemons share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmJoin {
    pub controllers: Vec<String>,
    /// None while it is not known (a plan before the fabric's apply makes it): the nodes' revision is then
    /// unknown too. The munge key: a credential, redacted from every `Debug`.
    pub key: Option<Secret<String>>,
}

/// What a filesystem knows of the cluster it feeds (the `cluster = hpc_gpu_cluster.x` object).
#[derive(Clone, Debug)]
pub struct ClusterRef {
    pub name: String,
    pub gpus_total: u32,
    pub workload: Workload,
}

#[derive(Clone, Debug)]
pub struct FilesystemSpec {
    pub name: String,
    pub filesystem_name: String,
    pub fabric: FabricRef,
    pub cluster: Option<ClusterRef>,
    pub capacity_gib: u64,
    pub throughput_per_tib: u32,
    pub data_repository: Option<String>,
    pub metadata_iops: Option<u64>,
    pub maintenance_window: Option<(String, String)>,
    pub tags: BTreeMap<String, String>,
}

/// One vendor piece of an expansion, named in the official providers' vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub kind: String,
    pub name: String,
    pub count: u32,
    pub settings: BTreeMap<String, String>,
}

impl Piece {
    pub fn new(kind: &str, name: impl Into<String>) -> Piece {
        Piece { kind: kind.to_owned(), name: name.into(), count: 1, settings: BTreeMap::new() }
    }

    pub fn count(mut self, n: u32) -> Piece {
        self.count = n;
        self
    }

    pub fn set(mut self, key: &str, value: impl ToString) -> Piece {
        self.settings.insert(key.to_owned(), value.to_string());
        self
    }

    pub fn set_opt(self, key: &str, value: Option<impl ToString>) -> Piece {
        match value {
            Some(v) => self.set(key, v),
            None => self,
        }
    }
}

/// The type of the `expansion` attribute: a plain list of objects, which every supported CLI renders
/// element by element (protocol-6 nested attributes render badly in Terraform 1.0).
pub fn expansion_type() -> Type {
    Type::list(Type::object([
        ("kind", Type::String),
        ("name", Type::String),
        ("count", Type::Number),
        ("settings", Type::map(Type::String)),
    ]))
}

pub fn expansion_value(pieces: &[Piece]) -> Value {
    Value::list(pieces.iter().map(|p| {
        Value::object([
            ("kind", Value::from(p.kind.as_str())),
            ("name", Value::from(p.name.as_str())),
            ("count", Value::int(i64::from(p.count))),
            ("settings", Value::Map(p.settings.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect())),
        ])
    }))
}

/// What the planner needs from the provider configuration.
#[derive(Clone, Debug, Default)]
pub struct Defaults {
    pub default_tags: BTreeMap<String, String>,
    pub gcp_project: Option<String>,
    /// The provider's `prices`: USD per node-hour by instance type, per GB-month by `<cloud>-lustre-<tier>`.
    pub prices: BTreeMap<String, f64>,
}

impl Defaults {
    /// Tags on every piece: provider defaults, then the resource's, then ours (which find pieces again).
    pub fn tags(&self, own: &BTreeMap<String, String>, ours: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut all = self.default_tags.clone();
        all.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        all.extend(ours.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        all
    }
}

/// `k=v, k2=v2`, for a piece's settings.
pub fn tag_string(tags: &BTreeMap<String, String>) -> String {
    tags.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// Node names are stable and known at plan time: `<cluster>-0` .. `<cluster>-(n-1)`.
/// One NVLink domain of a cluster as planned: its position, its name (`<cluster>-nvl<k>`, the name each
/// cloud's per-domain piece carries and the block `topology.conf` lists) and the indices of its nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvlinkDomainPlan {
    pub index: u32,
    pub name: String,
    pub nodes: Vec<u32>,
}

/// What an apply does with a node the refresh found unhealthy (`repair`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Repair {
    /// Delete it and make it again under its own name, in its placement and reservation.
    #[default]
    Replace,
    /// Restart it in place.
    Reboot,
    /// Show it in the plan and change nothing (teams that drain through Slurm first).
    Report,
}

impl Repair {
    pub const NAMES: [&'static str; 3] = ["replace", "reboot", "report"];
    pub fn as_str(self) -> &'static str {
        match self {
            Repair::Replace => "replace",
            Repair::Reboot => "reboot",
            Repair::Report => "report",
        }
    }
    pub fn parse(s: &str) -> Option<Repair> {
        [Repair::Replace, Repair::Reboot, Repair::Report].into_iter().find(|r| r.as_str() == s)
    }
}

/// What an apply does with a node the cloud has scheduled maintenance on (`on_maintenance`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnMaintenance {
    /// Show it in the plan (`scheduled_maintenance`, with its window) and leave the node alone: the cloud
    /// carries the maintenance out itself.
    #[default]
    Report,
    /// Remake it under its own name ahead of the window (a new instance, or on Azure the VM redeployed to
    /// another host and reimaged), within `max_repairs`, whatever `repair` says.
    Replace,
}

impl OnMaintenance {
    pub const NAMES: [&'static str; 2] = ["report", "replace"];
    pub fn as_str(self) -> &'static str {
        match self {
            OnMaintenance::Report => "report",
            OnMaintenance::Replace => "replace",
        }
    }
    pub fn parse(s: &str) -> Option<OnMaintenance> {
        [OnMaintenance::Report, OnMaintenance::Replace].into_iter().find(|r| r.as_str() == s)
    }
}

/// What an apply does when the cloud gives fewer nodes than it adds (`capacity_policy`, `min_nodes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityPolicy {
    /// Nothing is kept unless every node came: what the apply launched is released before it fails.
    AllOrNothing,
    /// What came is kept when at least this many nodes exist (the apply succeeds, warns of the shortfall,
    /// and the next plan adds the rest); below it, what the apply launched is released and it fails.
    AtLeast(u32),
    /// What came is kept and the apply fails; the next apply retries the rest (the behaviour before
    /// the policy existed).
    KeepPartial,
}

impl CapacityPolicy {
    pub const NAMES: [&'static str; 3] = ["all-or-nothing", "at-least", "keep-partial"];

    pub fn as_str(self) -> &'static str {
        match self {
            CapacityPolicy::AllOrNothing => "all-or-nothing",
            CapacityPolicy::AtLeast(_) => "at-least",
            CapacityPolicy::KeepPartial => "keep-partial",
        }
    }

    /// The policy a workload gets when `capacity_policy` is not set: nodes that train together are no use
    /// partly (pre-training, fine-tuning); serving nodes are (inference, media: at least 1).
    pub fn default_for(workload: Workload) -> CapacityPolicy {
        if workload.trains() { CapacityPolicy::AllOrNothing } else { CapacityPolicy::AtLeast(1) }
    }

    /// `min_nodes`: set for `at-least` only.
    pub fn min_nodes(self) -> Option<u32> {
        match self {
            CapacityPolicy::AtLeast(n) => Some(n),
            _ => None,
        }
    }

    /// The fewest of `missing` nodes an apply must get, with `existing` already running, for the policy to
    /// keep them: what a cloud's own all-or-nothing launch takes (RunInstances `MinCount`, bulkInsert
    /// `minCount`). 0 when nothing is missing.
    pub fn min_new(self, existing: u32, missing: u32) -> u32 {
        if missing == 0 {
            return 0;
        }
        match self {
            CapacityPolicy::AllOrNothing => missing,
            CapacityPolicy::AtLeast(m) => m.saturating_sub(existing).clamp(1, missing),
            CapacityPolicy::KeepPartial => 1,
        }
    }

    /// Whether `live` nodes of the `wanted` are kept after a shortfall.
    pub fn keeps(self, live: u32, wanted: u32) -> bool {
        match self {
            CapacityPolicy::AllOrNothing => live >= wanted,
            CapacityPolicy::AtLeast(m) => live >= m.min(wanted),
            CapacityPolicy::KeepPartial => true,
        }
    }
}

/// A number of nodes given as a count (`2`) or a share of the cluster (`25%`, rounded up, at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAmount {
    Count(u32),
    Percent(u32),
}

impl NodeAmount {
    pub fn parse(s: &str) -> Option<NodeAmount> {
        let s = s.trim();
        match s.strip_suffix('%') {
            Some(p) => p.trim().parse().ok().filter(|p| (1..=100).contains(p)).map(NodeAmount::Percent),
            None => s.parse().ok().filter(|n| *n >= 1).map(NodeAmount::Count),
        }
    }

    /// How many nodes of a cluster of `nodes` this is: at least 1, at most `nodes`.
    pub fn of(self, nodes: u32) -> u32 {
        let n = match self {
            NodeAmount::Count(c) => c,
            NodeAmount::Percent(p) => (u64::from(nodes) * u64::from(p)).div_ceil(100) as u32,
        };
        n.clamp(1, nodes.max(1))
    }

    pub fn label(self) -> String {
        match self {
            NodeAmount::Count(c) => c.to_string(),
            NodeAmount::Percent(p) => format!("{p}%"),
        }
    }
}

/// Day-2 settings of a cluster: `repair`, `max_repairs` and the `update_strategy` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Day2 {
    pub repair: Repair,
    /// What an apply does with a node the cloud has scheduled maintenance on.
    pub on_maintenance: OnMaintenance,
    /// At most this many unhealthy nodes are repaired by one apply; the rest wait for the next.
    pub max_repairs: NodeAmount,
    /// Nodes remade at a time when the node configuration changes.
    pub batch_size: NodeAmount,
    /// Whether each batch's nodes must report a passing self-check before the next batch starts.
    pub wait_for_selfcheck: bool,
}

impl Default for Day2 {
    fn default() -> Day2 {
        Day2 {
            repair: Repair::Replace,
            on_maintenance: OnMaintenance::Report,
            max_repairs: NodeAmount::Percent(20),
            batch_size: NodeAmount::Percent(25),
            wait_for_selfcheck: false,
        }
    }
}

impl ClusterSpec {
    /// The node configuration's revision: a short digest of what a node is made from (image, user data or
    /// the write-only user data's version, SSH key, RDMA interfaces). Nodes carry the revision they were made
    /// with; a node of another revision is remade by a rolling update.
    pub fn revision(&self) -> String {
        // A state keeps only the write-only user data's version: it stands for it either way.
        let user_data = if self.user_data_write_only || (self.user_data.is_none() && self.user_data_version.is_some()) {
            format!("wo:{}", self.user_data_version.map_or_else(String::new, |v| v.to_string()))
        } else {
            self.user_data.exposed().unwrap_or_default().to_owned()
        };
        // The identity nodes run as is part of what they are made from (a change remakes them); a cluster
        // without one keeps the revision it had before node_identity existed.
        let user_data = match &self.node_identity {
            None => user_data,
            Some(identity) => format!("{user_data}\nidentity={identity}"),
        };
        // Joining Slurm (its controllers and key) is part of what the nodes are made from; a cluster outside
        // Slurm keeps the revision it had before.
        let user_data = match &self.slurm {
            None => user_data,
            Some(join) => {
                let key = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, join.key.exposed().unwrap_or_default().as_bytes());
                let key: String = key.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
                format!("{user_data}\nslurm={} key={key}", join.controllers.join(","))
            }
        };
        node_revision(self.image.as_deref(), &user_data, self.ssh_public_key.as_deref(), self.rdma_interfaces)
    }
}

/// The revision of a node configuration (see [`ClusterSpec::revision`]).
pub fn node_revision(image: Option<&str>, user_data: &str, ssh_public_key: Option<&str>, rdma_interfaces: u32) -> String {
    let text =
        format!("image={}\nuser_data={}\nssh={}\nrdma={}\n", image.unwrap_or(""), user_data, ssh_public_key.unwrap_or(""), rdma_interfaces);
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes());
    digest.as_ref()[..5].iter().map(|b| format!("{b:02x}")).collect()
}

/// `hpc_slurm_cluster`: a Slurm controller (with an optional backup), login nodes, and partitions, each of
/// the nodes of one GPU cluster on the same fabric.
#[derive(Clone, Debug)]
pub struct SlurmSpec {
    pub name: String,
    pub fabric: FabricRef,
    /// The fabric's created network, in whose last /28 the controllers and login nodes get their subnet.
    pub cidr: String,
    pub version: &'static crate::catalog::slurm::SlurmVersion,
    pub controller_type: String,
    pub backup: bool,
    /// Where slurmctld keeps its state; shared storage both controllers mount when there is a backup.
    pub state_save_location: String,
    pub login_type: String,
    pub login_nodes: u32,
    pub partitions: Vec<Partition>,
    pub topology: TopologyChoice,
    /// Seconds between Slurm's health checks of a node (`HealthCheckInterval`).
    pub health_check_interval: u32,
    pub image: Option<String>,
    pub ssh_public_key: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// The key the cluster's daemons share (the fabric's `slurm_join.key`); None while it is not known. A
    /// credential, redacted from every `Debug`.
    pub key: Option<Secret<String>>,
    /// slurm.conf parameters of the user's own (`custom_settings`), written after the provider's: names the
    /// version's parser knows and the provider does not write itself.
    pub custom_settings: BTreeMap<String, String>,
    /// Job accounting (`accounting`): slurmdbd on the primary controller with its database beside it.
    pub accounting: bool,
}

/// A partition: the nodes of one GPU cluster.
#[derive(Clone, Debug)]
pub struct Partition {
    pub name: String,
    pub default: bool,
    /// `MaxTime` as Slurm writes it (`INFINITE`, `7-00:00:00`, minutes).
    pub max_time: String,
    pub nodes: SlurmNodes,
}

/// What Slurm needs of a GPU cluster: its node type, its nodes' names, and how the cloud placed them.
#[derive(Clone, Debug)]
pub struct SlurmNodes {
    pub cluster: String,
    pub sku: &'static Sku,
    pub names: Vec<String>,
    /// Nodes the cloud places close together (a placement group, compact policy, scale set, compute cluster).
    pub placement_groups: Vec<NodeGroup>,
    /// Rack-scale node types: the NVLink domains.
    pub nvlink_domains: Vec<NodeGroup>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeGroup {
    pub name: String,
    pub nodes: Vec<String>,
}

/// Which topology plugin the configuration asks for (`topology`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologyChoice {
    /// Block for rack-scale partitions where the version has it, tree otherwise (said in the plan).
    Auto,
    Tree,
    Block,
    None,
}

impl TopologyChoice {
    pub const NAMES: [&'static str; 4] = ["auto", "tree", "block", "none"];
    pub fn parse(s: &str) -> Option<TopologyChoice> {
        [TopologyChoice::Auto, TopologyChoice::Tree, TopologyChoice::Block, TopologyChoice::None].into_iter().find(|t| t.as_str() == s)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyChoice::Auto => "auto",
            TopologyChoice::Tree => "tree",
            TopologyChoice::Block => "block",
            TopologyChoice::None => "none",
        }
    }
}

/// What the plan makes of a Slurm cluster.
#[derive(Clone, Debug)]
pub struct SlurmPlan {
    /// The control subnet: the last /28 of the fabric's network.
    pub control_subnet: String,
    /// The controllers' host names and addresses, primary first.
    pub controllers: Vec<(String, String)>,
    /// The login nodes' host names.
    pub logins: Vec<String>,
    pub slurm_conf: String,
    pub gres_conf: String,
    pub cgroup_conf: String,
    /// `slurmdbd.conf` with accounting (the primary controller's alone: it holds no password).
    pub slurmdbd_conf: Option<String>,
    pub topology: Topology,
    pub healthcheck: String,
    /// An `sbatch`-ready NCCL all-reduce over each partition's nodes.
    pub nccl_tests: BTreeMap<String, String>,
}

/// The topology the configuration names, and its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// `topology/tree`, `topology/block`, `topology.yaml` (several, named per partition) or `none`.
    pub kind: &'static str,
    pub conf: Option<String>,
    pub yaml: Option<String>,
}

impl SlurmPlan {
    /// The plan as a planned (or prior) `hpc_slurm_cluster` state shows it: what an apply builds, exactly as
    /// the plan showed it. None when the state does not say it (a configuration still unknown).
    pub fn from_state(state: &Value) -> Option<SlurmPlan> {
        let text = |k: &str| state.get(k).as_str().map(str::to_owned);
        let name = state.get("name").as_str()?;
        let mut controllers = vec![(nodes::controller_name(name, 0), text("controller_address")?)];
        if let Some(backup) = text("backup_controller_address") {
            controllers.push((nodes::controller_name(name, 1), backup));
        }
        let logins = state.get("login_nodes").as_number().and_then(|n| n.as_i64()).map_or(1, |n| n.max(0) as u32);
        let kind = match state.get("topology_plugin").as_str()? {
            "topology/tree" => "topology/tree",
            "topology/block" => "topology/block",
            "topology.yaml" => "topology.yaml",
            _ => "none",
        };
        Some(SlurmPlan {
            control_subnet: text("control_subnet")?,
            controllers,
            logins: (0..logins).map(|i| nodes::login_name(name, i)).collect(),
            slurm_conf: text("slurm_conf")?,
            gres_conf: text("gres_conf")?,
            cgroup_conf: text("cgroup_conf")?,
            slurmdbd_conf: text("slurmdbd_conf"),
            topology: Topology { kind, conf: text("topology_conf"), yaml: text("topology_yaml") },
            healthcheck: text("healthcheck_program")?,
            nccl_tests: state
                .get("nccl_tests")
                .as_map()
                .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
                .unwrap_or_default(),
        })
    }
}

/// A Kubernetes taint on a pool's nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub const NAMES: [&'static str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A GPU node pool joined to a Kubernetes cluster made elsewhere (`hpc_gpu_node_pool`). Its nodes are
/// described as a cluster's are (fabric, node type, count, capacity, image, tags), so the pieces a pool
/// shares with a cluster (launch template, placement, RDMA interfaces) come from the same code.
#[derive(Clone, Debug)]
pub struct NodePoolSpec {
    /// The nodes; `nodes.name` is the pool's name.
    pub nodes: ClusterSpec,
    /// The Kubernetes cluster the pool joins, never made or changed here: its name on EKS, its resource id
    /// on AKS, its path on GKE (`projects/../locations/../clusters/..`), its OCID on OKE.
    pub kubernetes_cluster: String,
    /// The kubelet version the pool runs (`1.33`), or the cluster's when None.
    pub kubernetes_version: Option<(u32, u32)>,
    /// The cloud's autoscaler bounds (`min_count`, `max_count`), when the pool autoscales.
    pub autoscaling: Option<(u32, u32)>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// The identity the nodes run as: the node IAM role's ARN on EKS, the service account on GKE (AKS
    /// and OKE take the cluster's).
    pub node_role: Option<String>,
}
