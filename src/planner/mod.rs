//! The planner: configuration in, the exact vendor pieces out. PURE: no IO, no clock, no randomness;
//! BTreeMaps and stable names keep the output deterministic. It validates (spec.rs), applies the
//! reference architecture's checklist as warnings, and asks the cloud's expander (`clouds::*`) for the
//! pieces. The neutral spec speaks of placement, fabric, node groups and Lustre; vendor words live in
//! `clouds/` and `catalog/`.

pub mod cost;
pub mod nccl;
pub mod node_pool;
pub mod rack;
pub mod slurm;
pub mod spec;

use std::collections::BTreeMap;

use crate::catalog::{self, Cloud, Fabric};
use crate::clouds;
use crate::framework::{AttributePath, Diagnostics};
pub use crate::model::{
    CapacityType, ClusterSpec, Defaults, FabricSpec, FilesystemSpec, Network, Piece, Placement, Workload, expansion_type, expansion_value,
    tag_string,
};
use crate::nodes::node_names;

pub struct FabricPlan {
    pub spec: FabricSpec,
    pub pieces: Vec<Piece>,
}

pub fn plan_fabric(spec: FabricSpec, defaults: &Defaults, diags: &mut Diagnostics) -> Option<FabricPlan> {
    check_tag_count(spec.cloud, &spec.tags, defaults, diags);
    if spec.cloud == Cloud::Gcp && defaults.gcp_project.is_none() && !matches!(spec.sku.fabric, Fabric::None) {
        diags.error_at(
            AttributePath::attr("cloud"),
            "Missing Google Cloud project",
            "The GPU VPCs and their network profile are named by project: set project in the provider's gcp block.",
        );
        return None;
    }
    let pieces = clouds::expander(spec.cloud).fabric(&spec, defaults);
    Some(FabricPlan { spec, pieces })
}

pub struct ClusterPlan {
    pub spec: ClusterSpec,
    pub pieces: Vec<Piece>,
    pub node_names: Vec<String>,
    pub gpus_total: u32,
    pub node_environment: BTreeMap<String, String>,
    pub expected_busbw: Option<catalog::BusBandwidth>,
}

/// The NCCL environment jobs on nodes of `sku` need: the cloud's, plus multi-node NVLink on a rack-scale type.
pub fn node_environment(sku: &catalog::Sku) -> BTreeMap<String, String> {
    let mut env = clouds::expander(sku.cloud).node_environment(sku);
    if sku.nvlink_domain.is_some() {
        env.extend(rack::mnnvl_environment().iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    }
    env
}

/// Tags on every piece: the provider's defaults, the resource's own, and ours must fit the cloud's limit.
fn check_tag_count(cloud: Cloud, own: &BTreeMap<String, String>, defaults: &Defaults, diags: &mut Diagnostics) {
    clouds::rules::rules(cloud).default_tags(&defaults.default_tags, diags);
    let mut all = defaults.default_tags.clone();
    all.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    let limit = catalog::limits::tag_limit(cloud);
    if all.len() + catalog::limits::OWN_TAGS_MAX > limit {
        diags.error_at(
            AttributePath::attr("tags"),
            "Too many tags",
            format!(
                "{cloud} allows {limit} tags on a resource. This resource would carry {} (default_tags and tags together) plus up to {} \
                 the provider writes to find what it created: keep default_tags and tags to at most {} together.",
                all.len(),
                catalog::limits::OWN_TAGS_MAX,
                limit - catalog::limits::OWN_TAGS_MAX
            ),
        );
    }
}

pub fn plan_cluster(spec: ClusterSpec, defaults: &Defaults, diags: &mut Diagnostics) -> ClusterPlan {
    check_tag_count(spec.fabric.cloud, &spec.tags, defaults, diags);
    cluster_checklist(&spec, diags);
    let expander = clouds::expander(spec.fabric.cloud);
    let (pieces, node_environment) = (expander.cluster(&spec, defaults), node_environment(spec.fabric.sku));
    ClusterPlan {
        node_names: node_names(&spec.name, spec.node_count),
        gpus_total: spec.node_count * spec.fabric.sku.gpu_count,
        expected_busbw: catalog::expected_busbw(spec.fabric.sku),
        node_environment,
        pieces,
        spec,
    }
}

/// GPUs that are built for training at scale; inference on them is usually a costly mistake.
const TRAINING_GPUS: [&str; 7] = ["H100", "H200", "B200", "B300", "GB200", "GB300", "MI300X"];

/// The reference architecture's checklist, as warnings (the user may know better).
fn cluster_checklist(spec: &ClusterSpec, diags: &mut Diagnostics) {
    let sku = spec.fabric.sku;
    let training = spec.workload.trains();
    // AWS reserved capacity (an ODCR or a capacity block) is co-located already, and launching it into a
    // placement group it was not made for fails: "none" is the advice there, not a mistake.
    let aws_reserved = spec.fabric.cloud == Cloud::Aws && matches!(spec.capacity, CapacityType::Reservation | CapacityType::CapacityBlock);
    if training && spec.node_count > 1 && spec.fabric.placement == Placement::None && !aws_reserved {
        diags.warning_at(
            AttributePath::attr("fabric"),
            "No proximity placement",
            format!(
                "This {}-node {} cluster is on a fabric with placement = \"none\": nodes may land far apart in the {} network, and collective \
                 operations slow down with every hop. Use placement = \"cluster\" on the fabric unless capacity forces otherwise.",
                spec.node_count,
                spec.workload.as_str(),
                spec.fabric.cloud
            ),
        );
    }
    let weak_fabric = matches!(sku.fabric, Fabric::None | Fabric::GpuDirectTcpx) || sku.network_bandwidth_gbps.is_some_and(|b| b < 1600);
    if training && spec.node_count > 1 && weak_fabric {
        let better: Vec<&str> = catalog::skus(spec.fabric.cloud)
            .filter(|s| {
                matches!(s.fabric, Fabric::Efa | Fabric::InfiniBand | Fabric::Roce) && s.network_bandwidth_gbps.unwrap_or(0) >= 3200
            })
            .map(|s| s.name)
            .collect();
        diags.warning_at(
            AttributePath::attr("fabric"),
            "Training without an RDMA fabric",
            format!(
                "{} has {} ({} Gbps between nodes), not a full RDMA fabric; multi-node {} will be bound by the network. Node types with \
                 3200 Gbps RDMA on {}: {}.",
                sku.name,
                sku.fabric.as_str(),
                sku.network_bandwidth_gbps.map_or("unknown".into(), |b| b.to_string()),
                spec.workload.as_str(),
                spec.fabric.cloud,
                crate::framework::one_of(&better)
            ),
        );
    }
    if spec.workload == Workload::Inference && TRAINING_GPUS.contains(&sku.gpu_model) {
        let inference: Vec<&str> =
            catalog::skus(spec.fabric.cloud).filter(|s| !TRAINING_GPUS.contains(&s.gpu_model)).map(|s| s.name).collect();
        let hint = if inference.is_empty() {
            format!("The catalog has no inference node types on {} yet.", spec.fabric.cloud)
        } else {
            format!("Inference node types on {}: {}.", spec.fabric.cloud, crate::framework::one_of(&inference))
        };
        diags.warning_at(
            AttributePath::attr("workload"),
            "Inference on a training node type",
            format!(
                "{} ({}x {}) is built for training; serving models on it usually costs several times more than an inference GPU. {hint}",
                sku.name, sku.gpu_count, sku.gpu_model
            ),
        );
    }
    if spec.fabric.cloud == Cloud::Aws
        && matches!(spec.capacity, CapacityType::Reservation | CapacityType::CapacityBlock)
        && spec.fabric.placement == Placement::Cluster
    {
        diags.warning_at(
            AttributePath::attr("capacity_type"),
            "Placement group with reserved capacity",
            "Launching reserved capacity into a cluster placement group fails with InsufficientInstanceCapacity when the reservation was not made \
             for that placement group. Reserved capacity is already co-located: consider placement = \"none\" on the fabric.",
        );
    }
}

pub struct FilesystemPlan {
    pub spec: FilesystemSpec,
    pub pieces: Vec<Piece>,
    pub throughput_mbps: u64,
}

/// Filesystem throughput the checklist asks for, per GPU (MB/s). Derivation in notes/planner-rules.md:
/// a full checkpoint (16 bytes per parameter) written in under 5% of a 30-minute interval.
pub fn min_throughput_per_gpu(workload: Workload) -> u64 {
    match workload {
        Workload::Pretraining => 50,
        Workload::Finetuning => 25,
        Workload::Inference | Workload::Media => 0,
    }
}

pub fn plan_filesystem(spec: FilesystemSpec, defaults: &Defaults, diags: &mut Diagnostics) -> FilesystemPlan {
    check_tag_count(spec.fabric.cloud, &spec.tags, defaults, diags);
    // OCI counts capacity in GB and its tiers per TB (10^12 bytes); the others in GiB and per TiB.
    let unit = if spec.fabric.cloud == Cloud::Oci { 1000 } else { 1024 };
    let throughput_mbps = spec.capacity_gib * u64::from(spec.throughput_per_tib) / unit;
    if let Some(cluster) = &spec.cluster {
        let needed = min_throughput_per_gpu(cluster.workload) * u64::from(cluster.gpus_total);
        if throughput_mbps < needed {
            diags.warning_at(
                AttributePath::attr("throughput_per_tib"),
                "Filesystem throughput too low for the cluster",
                format!(
                    "{} GiB at {} MB/s per TiB gives {throughput_mbps} MB/s, but {} GPUs doing {} want at least {needed} MB/s ({} MB/s per GPU) or \
                     checkpoints and data loading will stall the GPUs. Raise throughput_per_tib or capacity_gib.",
                    spec.capacity_gib,
                    spec.throughput_per_tib,
                    cluster.gpus_total,
                    cluster.workload.as_str(),
                    min_throughput_per_gpu(cluster.workload)
                ),
            );
        }
    }
    let pieces = clouds::expander(spec.fabric.cloud).filesystem(&spec, defaults);
    FilesystemPlan { spec, pieces, throughput_mbps }
}
