//! The GPU catalog: which instance types each cloud offers for which GPU, and the numbers the planner
//! relies on (GPUs, memory, RDMA interfaces, bandwidth). Every number carries its source and how well it
//! is confirmed, because several vendor pages disagree; the sources are those of `shared/docs/domain.md`
//! section 6 unless an entry names its own.
//!
//! Pure data: no IO. Vendor vocabulary is allowed here and in `clouds/`, nowhere else.

pub mod limits;
pub mod prices;
mod skus;
pub mod slurm;
pub mod slurm_keys;

use std::fmt;

pub use skus::SKUS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cloud {
    Aws,
    Azure,
    Gcp,
    Oci,
}

impl Cloud {
    pub const ALL: [Cloud; 4] = [Cloud::Aws, Cloud::Azure, Cloud::Gcp, Cloud::Oci];
    pub const NAMES: [&'static str; 4] = ["aws", "azure", "gcp", "oci"];

    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Azure => "azure",
            Cloud::Gcp => "gcp",
            Cloud::Oci => "oci",
        }
    }

    pub fn parse(s: &str) -> Option<Cloud> {
        Cloud::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The vendor's own name for its cloud, for messages.
    pub fn display_name(self) -> &'static str {
        match self {
            Cloud::Aws => "AWS",
            Cloud::Azure => "Azure",
            Cloud::Gcp => "Google Cloud",
            Cloud::Oci => "OCI",
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a figure is known. Unconfirmed figures are kept (they are the best available) but flagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confidence {
    /// From the vendor's own documentation or API.
    Confirmed,
    /// Two independent secondary sources agree.
    TwoSources,
    /// One secondary source, or sources that disagree.
    Unconfirmed,
}

impl Confidence {
    pub fn label(self) -> &'static str {
        match self {
            Confidence::Confirmed => "confirmed",
            Confidence::TwoSources => "two secondary sources",
            Confidence::Unconfirmed => "unconfirmed",
        }
    }
}

/// The inter-node fabric an instance type attaches to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fabric {
    /// AWS Elastic Fabric Adapter (libfabric, SRD).
    Efa,
    /// NVIDIA Quantum InfiniBand (Azure ND series).
    InfiniBand,
    /// RDMA over Converged Ethernet (GCP A3 Ultra/A4 MRDMA NICs, OCI cluster networks).
    Roce,
    /// GCP GPUDirect-TCPX (A3 High): TCP with GPU direct data path, no RDMA.
    GpuDirectTcpx,
    /// GCP GPUDirect-TCPXO (A3 Mega).
    GpuDirectTcpxo,
    /// No RDMA fabric: ordinary Ethernet only.
    None,
}

impl Fabric {
    pub fn as_str(self) -> &'static str {
        match self {
            Fabric::Efa => "efa",
            Fabric::InfiniBand => "infiniband",
            Fabric::Roce => "roce",
            Fabric::GpuDirectTcpx => "gpudirect-tcpx",
            Fabric::GpuDirectTcpxo => "gpudirect-tcpxo",
            Fabric::None => "none",
        }
    }

    /// The extended resource a Kubernetes pod requests for this fabric's devices, where the cloud's device
    /// plugin schedules them as one (EKS: EFA); elsewhere the devices come with the node.
    pub fn kubernetes_resource(self) -> Option<&'static str> {
        match self {
            Fabric::Efa => Some("vpc.amazonaws.com/efa"),
            _ => None,
        }
    }
}

/// Where one figure of a SKU comes from.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// The attribute the source backs (`gpu_memory_gb`, `rdma_interfaces`, ...), or `*` for all others.
    pub field: &'static str,
    pub text: &'static str,
    pub confidence: Confidence,
}

/// One GPU instance type (shape, machine type, VM size) and its figures.
#[derive(Clone, Copy, Debug)]
pub struct Sku {
    pub cloud: Cloud,
    pub name: &'static str,
    pub gpu_model: &'static str,
    pub gpu_count: u32,
    /// Memory per GPU in GB as the vendor states it.
    pub gpu_memory_gb: Option<u32>,
    pub fabric: Fabric,
    /// RDMA (or GPU NIC) interfaces per node: EFA interfaces, IB HCAs, RoCE NICs, GPU VPC NICs.
    pub rdma_interfaces: Option<u32>,
    /// Aggregate inter-node bandwidth per node in Gbps.
    pub network_bandwidth_gbps: Option<u32>,
    /// Local NVMe per node in GB.
    pub local_nvme_gb: Option<u32>,
    /// Logical CPUs the node's OS sees (vCPUs; on OCI bare metal, 2 per x86 OCPU and 1 per Grace core).
    pub vcpus: u32,
    /// System memory in MiB as the vendor states it (GB taken as 10^9 bytes), before the OS takes its share.
    pub memory_mib: u32,
    /// How the `vcpus` are laid out (its source is the `cpu` field's): a Slurm node line names them, so that a
    /// job is given whole cores and a hyperthread is not counted as a core.
    pub cpu: CpuTopology,
    /// Rack-scale node types (GB200/GB300 NVL72): the NVLink domain several nodes share.
    pub nvlink_domain: Option<NvlinkDomain>,
    pub sources: &'static [Source],
}

/// The CPUs of a node type: `sockets * cores_per_socket * threads_per_core` is its `vcpus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    pub sockets: u32,
    pub cores_per_socket: u32,
    /// 2 where the vCPUs are hyperthreads (SMT), 1 where each is a core (Arm, Azure's HPC sizes).
    pub threads_per_core: u32,
}

/// Which nodes of one fabric share an RDMA network on a cloud: what a Slurm topology may join under one switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaScope {
    /// Every node on the fabric's network: its placement groups only place nodes close together.
    Network,
    /// Only the nodes of one placement group (scale set, cluster network, compute cluster): each group is an RDMA
    /// network of its own, and nodes in none have no RDMA to share.
    PlacementGroup,
}

/// How far RDMA reaches on a cloud, with the source that says so.
pub fn rdma_scope(cloud: Cloud) -> (RdmaScope, &'static str) {
    match cloud {
        Cloud::Aws => (
            RdmaScope::Network,
            "AWS EC2 docs, Elastic Fabric Adapter: EFA's OS-bypass traffic stays within one subnet, which every cluster on the \
             fabric shares; a cluster placement group places instances, it is not a fabric of its own",
        ),
        Cloud::Gcp => (
            RdmaScope::Network,
            "Google Cloud docs, Networking and GPU machines: the GPU NICs are on the fabric's own VPC networks (GPUDirect or RoCE), \
             which every cluster on the fabric attaches to; a compact placement policy places VMs",
        ),
        Cloud::Azure => (
            RdmaScope::PlacementGroup,
            "Microsoft Learn, ND H100 v5: InfiniBand is \"automatically configured between VMs occupying the same virtual machine \
             scale set\"; VMs of different scale sets share none",
        ),
        Cloud::Oci => (
            RdmaScope::PlacementGroup,
            "OCI docs, cluster networks and compute clusters: RDMA connects the instances of one cluster network or compute \
             cluster; instances outside one have only their front-end VNIC",
        ),
    }
}

/// An NVLink domain that spans nodes (a GB200/GB300 NVL72 rack): `nodes` nodes whose GPUs share one NVLink
/// fabric. Clusters of such a node type are planned as whole domains.
#[derive(Clone, Copy, Debug)]
pub struct NvlinkDomain {
    pub nodes: u32,
    pub source: &'static str,
    pub confidence: Confidence,
}

impl Sku {
    /// The source of one figure, falling back to the SKU's general source.
    /// Whether the node's CPUs are Arm (NVIDIA Grace, on every GB200/GB300 node type): x86-64 images do not boot.
    pub fn arm64(&self) -> bool {
        self.gpu_model.starts_with("GB")
    }

    /// GPUs in one NVLink domain: the node's own, or the rack's for a rack-scale type.
    pub fn nvlink_domain_gpus(&self) -> u32 {
        self.nvlink_domain.map_or(self.gpu_count, |d| d.nodes * self.gpu_count)
    }

    pub fn source_of(&self, field: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.field == field).or_else(|| self.sources.iter().find(|s| s.field == "*"))
    }
}

/// All SKUs of a cloud, in catalog order.
pub fn skus(cloud: Cloud) -> impl Iterator<Item = &'static Sku> {
    SKUS.iter().filter(move |s| s.cloud == cloud)
}

/// A SKU by exact name within a cloud.
pub fn find_sku(cloud: Cloud, name: &str) -> Option<&'static Sku> {
    skus(cloud).find(|s| s.name == name)
}

/// GPU models offered by a cloud, sorted and deduplicated.
pub fn gpu_models(cloud: Cloud) -> Vec<&'static str> {
    let mut models: Vec<&str> = skus(cloud).map(|s| s.gpu_model).collect();
    models.sort_unstable();
    models.dedup();
    models
}

/// The catalog's canonical spelling of a GPU model given in any case (`h100` -> `H100`), if known anywhere.
pub fn canonical_gpu_model(model: &str) -> Option<&'static str> {
    SKUS.iter().map(|s| s.gpu_model).find(|m| m.eq_ignore_ascii_case(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sku_has_a_source_for_every_figure() {
        for sku in SKUS {
            for field in ["gpu_count", "gpu_memory_gb", "rdma_interfaces", "network_bandwidth_gbps"] {
                assert!(sku.source_of(field).is_some(), "{} has no source for {field}", sku.name);
            }
        }
    }

    #[test]
    fn every_skus_cpu_layout_is_its_vcpus_with_a_source() {
        for sku in SKUS {
            let c = sku.cpu;
            assert_eq!(c.sockets * c.cores_per_socket * c.threads_per_core, sku.vcpus, "{}", sku.name);
            assert!((1..=2).contains(&c.threads_per_core), "{}", sku.name);
            assert!(sku.sources.iter().any(|s| s.field == "cpu"), "{} has no source for its CPU layout", sku.name);
            // Grace (Arm) has no SMT.
            assert!(!sku.arm64() || c.threads_per_core == 1, "{}", sku.name);
        }
    }

    #[test]
    fn sku_names_are_unique_per_cloud() {
        for cloud in Cloud::ALL {
            let mut names: Vec<&str> = skus(cloud).map(|s| s.name).collect();
            let before = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(before, names.len(), "duplicate SKU on {cloud}");
        }
    }

    #[test]
    fn aws_h100_is_p5_with_32_efa_interfaces() {
        let p5 = find_sku(Cloud::Aws, "p5.48xlarge").unwrap();
        assert_eq!((p5.gpu_model, p5.gpu_count, p5.gpu_memory_gb), ("H100", 8, Some(80)));
        assert_eq!((p5.fabric, p5.rdma_interfaces, p5.network_bandwidth_gbps), (Fabric::Efa, Some(32), Some(3200)));
        assert_eq!(p5.source_of("rdma_interfaces").unwrap().confidence, Confidence::Confirmed);
    }

    #[test]
    fn every_cloud_offers_h100() {
        for cloud in Cloud::ALL {
            assert!(gpu_models(cloud).contains(&"H100"), "{cloud} lacks H100");
        }
        assert_eq!(canonical_gpu_model("h100"), Some("H100"));
        assert_eq!(canonical_gpu_model("h900"), None);
    }
}

/// NVENC hardware video encoders per GPU, with the source: what a `media` (transcoding) workload needs.
/// `None` for a GPU model nothing was found for.
pub fn video_encoders(gpu_model: &str) -> Option<(u32, &'static str, Confidence)> {
    const DYNAMO: &str = "NVIDIA Dynamo docs, \"Video Decode GPU Requirements\" (NVENC per GPU)";
    match gpu_model {
        "A100" | "H100" | "H200" | "B200" | "B300" | "GB200" | "GB300" => Some((0, DYNAMO, Confidence::Confirmed)),
        "L4" => Some((2, DYNAMO, Confidence::Confirmed)),
        "L40S" => Some((3, DYNAMO, Confidence::Confirmed)),
        "A10" | "A10G" => {
            Some((1, "A10 product brief as mirrored by Wikipedia's NVENC table (one secondary source)", Confidence::Unconfirmed))
        }
        _ => None,
    }
}

/// An all-reduce bus bandwidth to expect from a healthy node type, for fabric validation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BusBandwidth {
    /// GB/s as nccl-tests reports `busbw`.
    pub gbytes_per_sec: f64,
    /// "single-node" or "multi-node": what the published threshold measures.
    pub scope: &'static str,
    pub source: &'static str,
}

/// Published thresholds only (domain.md section 9); `None` where nothing was found.
pub fn expected_busbw(sku: &Sku) -> Option<BusBandwidth> {
    let (gbytes_per_sec, scope, source) = match (sku.cloud, sku.name) {
        (Cloud::Azure, "Standard_ND96isr_H100_v5") => (460.0, "single-node", "Azure/azurehpc-health-checks threshold (confirmed)"),
        (Cloud::Azure, "Standard_ND96isr_H200_v5") => (431.0, "single-node", "Azure/azurehpc-health-checks threshold (confirmed)"),
        (Cloud::Azure, "Standard_ND128isr_NDR_GB200_v6") => (432.0, "single-node", "Azure/azurehpc-health-checks threshold (confirmed)"),
        (Cloud::Oci, "BM.GPU.H100.8") => (365.0, "multi-node", "oracle-quickstart/oci-hpc health check GPU_SHAPES (two secondary sources)"),
        (Cloud::Oci, "BM.GPU.H200.8") => (365.0, "multi-node", "oracle-quickstart/oci-hpc health check GPU_SHAPES (two secondary sources)"),
        _ => return None,
    };
    Some(BusBandwidth { gbytes_per_sec, scope, source })
}
