//! OCI expansion: VCN and subnet (unless given), a network security group open within itself, and the RDMA
//! placement (a compute cluster, or a cluster network built by the cluster); an instance configuration with
//! the RDMA agent plugins enabled and the instances (for GB200/GB300, launched per NVLink domain by a GPU
//! memory cluster on a GPU memory fabric the provider finds); File Storage with Lustre.

pub mod api;
pub mod backend;
pub mod cluster;
pub mod fabric;
pub mod filesystem;
pub mod limits;
pub mod memory;
pub mod node_pool;
pub mod rules;
pub mod signing;
pub mod slurm;

use std::collections::BTreeMap;

use super::{DEFAULT_IMAGE, first_subnet, network_refs};
use crate::catalog::Sku;
use crate::model::{CapacityType, ClusterSpec, Defaults, FabricSpec, FilesystemSpec, Network, Piece, Placement, tag_string};
use crate::nodes::{first_nodes_range, node_range};

/// The Oracle Cloud Agent plugins RDMA clusters need; without them the RDMA NICs stay unconfigured.
pub const RDMA_PLUGINS: [&str; 3] =
    ["Compute HPC RDMA Authentication", "Compute HPC RDMA Auto-Configuration", "Compute RDMA GPU Monitoring"];

pub fn fabric(spec: &FabricSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:fabric", n)]));
    let compartment = spec.compartment_id.clone().unwrap_or_default();
    let ad = spec.zone.clone().unwrap_or_default();
    let mut out = Vec::new();
    if let Network::Create { cidr } = &spec.network {
        out.push(
            Piece::new("oci_core_vcn", format!("{n}-vpc"))
                .set("compartment_id", &compartment)
                .set("cidr_blocks", cidr)
                .set("freeform_tags", &tags),
        );
        out.push(
            Piece::new("oci_core_subnet", format!("{n}-subnet"))
                .set("vcn_id", format!("oci_core_vcn.{n}-vpc"))
                .set("cidr_block", first_subnet(cidr))
                .set("prohibit_public_ip_on_vnic", true)
                .set("freeform_tags", &tags),
        );
    }
    let (vcn, _) = network_refs(&spec.network, "oci_core_vcn", "oci_core_subnet", n);
    out.push(
        Piece::new("oci_core_network_security_group", format!("{n}-nsg"))
            .set("vcn_id", vcn)
            .set("compartment_id", &compartment)
            .set("freeform_tags", &tags),
    );
    out.push(
        Piece::new("oci_core_network_security_group_security_rule", format!("{n}-nsg-self"))
            .count(2)
            .set("directions", "INGRESS, EGRESS")
            .set("protocol", "all")
            .set("source_and_destination", format!("oci_core_network_security_group.{n}-nsg")),
    );
    if spec.placement == Placement::Cluster {
        out.push(
            Piece::new("oci_core_compute_cluster", format!("{n}-cc"))
                .set("availability_domain", &ad)
                .set("compartment_id", &compartment)
                .set("freeform_tags", &tags),
        );
    }
    out
}

pub fn cluster(spec: &ClusterSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:cluster", n), ("hpc:fabric", &f.name)]));
    let ad = f.zone.clone().unwrap_or_default();
    let config = format!("oci_core_instance_configuration.{n}-ic");
    let preemptible = spec.capacity == CapacityType::Spot;
    let mut out = vec![
        Piece::new("oci_core_instance_configuration", format!("{n}-ic"))
            .set("shape", f.sku.name)
            .set("image", spec.image.as_deref().unwrap_or(DEFAULT_IMAGE))
            .set(
                "agent_config.plugins_config",
                if f.sku.fabric == crate::catalog::Fabric::None {
                    "(agent defaults: no RDMA NICs)".to_owned()
                } else {
                    RDMA_PLUGINS.iter().map(|p| format!("{p}: ENABLED")).collect::<Vec<_>>().join(", ")
                },
            )
            .set_opt("preemptible_instance_config", preemptible.then_some("TERMINATE, preserve_boot_volume = false"))
            .set_opt("capacity_reservation_id", spec.reservation_id.as_deref())
            .set_opt("metadata.user_data", spec.user_data_summary())
            .set("freeform_tags", &tags),
    ];
    match f.placement {
        Placement::ClusterNetwork => out.push(
            Piece::new("oci_core_cluster_network", format!("{n}-cn"))
                .set("instance_pools.size", spec.node_count)
                .set("instance_pools.instance_configuration_id", &config)
                .set("placement_configuration.availability_domain", &ad)
                .set("placement_configuration.primary_subnet_id", spec.network_label("subnet"))
                .set("freeform_tags", &tags),
        ),
        // GB200/GB300 NVL72: each NVLink domain is a GPU memory cluster over the fabric's compute cluster, on a
        // GPU memory fabric found at apply, and its 18 nodes are the instances that memory cluster launches.
        Placement::Cluster if f.sku.nvlink_domain.is_some() => {
            let compute_cluster = format!("oci_core_compute_cluster.{}-cc", f.name);
            for d in spec.nvlink_domains() {
                let k = d.name.as_str();
                out.push(
                    Piece::new(memory::FABRIC, k)
                        .set("availability_domain", &ad)
                        .set("selection", memory::FABRIC_CHOICE)
                        .set("lifecycle", memory::FABRIC_LIFECYCLE),
                );
                out.push(
                    Piece::new(memory::CLUSTER, k)
                        .set("display_name", k)
                        .set("availability_domain", &ad)
                        .set("size", d.nodes.len())
                        .set("compute_cluster_id", &compute_cluster)
                        .set("instance_configuration_id", &config)
                        .set("gpu_memory_fabric_id", format!("{}.{k}", memory::FABRIC))
                        .set("freeform_tags", &tags),
                );
                out.push(
                    Piece::new("oci_core_instance", k)
                        .count(d.nodes.len() as u32)
                        .set("shape", f.sku.name)
                        .set("availability_domain", &ad)
                        .set("names", node_range(n, &d.nodes))
                        .set("launched_by", format!("{}.{k}", memory::CLUSTER))
                        .set("instance_configuration_id", &config)
                        .set("compute_cluster_id", &compute_cluster)
                        .set("subnet_id", spec.network_label("subnet")),
                );
            }
        }
        placement => out.push(
            Piece::new("oci_core_instance", n.as_str())
                .count(spec.node_count)
                .set("shape", f.sku.name)
                .set("availability_domain", &ad)
                .set("names", first_nodes_range(n, spec.node_count))
                .set("instance_configuration_id", &config)
                .set(
                    "compute_cluster_id",
                    if placement == Placement::Cluster { format!("oci_core_compute_cluster.{}-cc", f.name) } else { "(none)".into() },
                )
                .set("subnet_id", spec.network_label("subnet")),
        ),
    }
    out
}

pub fn node_environment(sku: &Sku) -> BTreeMap<String, String> {
    if sku.fabric == crate::catalog::Fabric::None {
        // A VM shape on Ethernet: NCCL's socket transport over the primary VNIC.
        return super::env(&[("NCCL_SOCKET_IFNAME", "ens3")]);
    }
    // RoCE v2 settings used by oracle-quickstart/oci-hpc's NCCL jobs.
    super::env(&[
        ("NCCL_IB_GID_INDEX", "3"),
        ("NCCL_IB_TC", "41"),
        ("NCCL_IB_SL", "0"),
        ("NCCL_IB_QPS_PER_CONNECTION", "4"),
        ("NCCL_IB_SPLIT_DATA_ON_QPS", "0"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
    ])
}

pub fn filesystem(spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:filesystem", n), ("hpc:fabric", &f.name)]));
    let mut out = vec![
        Piece::new("oci_lustre_file_storage_lustre_file_system", n.as_str())
            .set("availability_domain", f.zone.as_deref().unwrap_or_default())
            .set("capacity_in_gbs", spec.capacity_gib)
            .set("file_system_name", &spec.filesystem_name)
            .set("performance_tier", format!("MBPS_PER_TB_{}", spec.throughput_per_tib))
            .set("subnet_id", format!("subnet of fabric {}", f.name))
            .set("root_squash_configuration.identity_squash", "NONE")
            .set("freeform_tags", &tags),
    ];
    if let Some(repo) = &spec.data_repository {
        out.push(
            Piece::new("oci_lustre_file_storage_object_storage_link", format!("{n}-link"))
                .set("lustre_file_system_id", format!("oci_lustre_file_storage_lustre_file_system.{n}"))
                .set("file_system_path", "/")
                .set("object_storage_prefix", filesystem::object_storage_prefix(repo).unwrap_or_else(|| repo.clone())),
        );
    }
    out
}

/// This cloud's expander, as the planner sees it.
pub struct Expansion;

/// A Slurm cluster's pieces: its subnet in the fabric's VCN (that network's last /28), the controllers at
/// their fixed addresses and the login nodes, in the fabric's network security group (open within itself).
pub fn slurm(spec: &crate::model::SlurmSpec, plan: &crate::model::SlurmPlan, d: &Defaults) -> Vec<Piece> {
    let (n, f) = (&spec.name, &spec.fabric);
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:slurm", n), ("hpc:fabric", &f.name)]));
    let subnet = format!("oci_core_subnet.{n}-control");
    let mut out = vec![
        Piece::new("oci_core_subnet", format!("{n}-control"))
            .set("vcn_id", format!("oci_core_vcn.{}-vpc", f.name))
            .set("cidr_block", &plan.control_subnet)
            .set("prohibit_public_ip_on_vnic", true)
            .set("freeform_tags", &tags),
    ];
    let image = spec.image.clone().unwrap_or_else(|| "(the newest platform image OCI offers for the shape)".into());
    let config = format!(
        "configuration {} (gzip, base64), with hpc_slurm_config_revision; a change is written in place (UpdateInstance)",
        crate::clouds::slurm::slurm_config(plan, None).revision
    );
    let mut vm = |host: &str, role: &str, shape: &str, address: Option<&str>| {
        out.push(
            Piece::new("oci_core_instance", host)
                .set("role", role)
                .set("shape", shape)
                .set("availability_domain", f.zone.as_deref().unwrap_or_default())
                .set("source_details.source_id", &image)
                .set("create_vnic_details.subnet_id", &subnet)
                .set_opt("create_vnic_details.private_ip", address)
                .set("create_vnic_details.nsg_ids", format!("oci_core_network_security_group.{}-nsg", f.name))
                .set(
                    "metadata.user_data",
                    format!(
                        "installs Slurm {} and munge if missing, writes the fabric's key, takes the configuration from its metadata \
                         (hpc-slurm-sync, every minute)",
                        spec.version.version
                    ),
                )
                .set("metadata.hpc_slurm_config", &config)
                .set("freeform_tags", &tags),
        );
    };
    for (i, (host, address)) in plan.controllers.iter().enumerate() {
        let role = if i == 0 { "Slurm controller (slurmctld)" } else { "Slurm backup controller (slurmctld)" };
        vm(host, role, &spec.controller_type, Some(address));
    }
    for host in &plan.logins {
        vm(host, "Slurm login node (client commands)", &spec.login_type, None);
    }
    out
}

impl super::Expander for Expansion {
    fn fabric(&self, spec: &FabricSpec, d: &Defaults) -> Vec<Piece> {
        fabric(spec, d)
    }

    fn cluster(&self, spec: &ClusterSpec, d: &Defaults) -> Vec<Piece> {
        cluster(spec, d)
    }

    fn slurm(&self, spec: &crate::model::SlurmSpec, plan: &crate::model::SlurmPlan, d: &Defaults) -> Vec<Piece> {
        slurm(spec, plan, d)
    }

    /// The cluster's cluster network, or the fabric's compute cluster, holds every node.
    fn placement_groups(&self, spec: &ClusterSpec) -> Vec<(String, Vec<u32>)> {
        let name = match spec.fabric.placement {
            Placement::ClusterNetwork => format!("{}-cn", spec.name),
            Placement::Cluster => format!("{}-cc", spec.fabric.name),
            Placement::None => return Vec::new(),
        };
        if spec.node_count == 0 { Vec::new() } else { vec![(name, (0..spec.node_count).collect())] }
    }

    fn node_environment(&self, sku: &Sku) -> BTreeMap<String, String> {
        node_environment(sku)
    }

    fn filesystem(&self, spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
        filesystem(spec, d)
    }

    fn placement_advice(&self) -> &'static str {
        "On OCI, check: every node in the same cluster network or compute cluster; the RDMA plugins (Compute HPC \
         RDMA Authentication and Auto-Configuration) enabled and every RDMA interface up with an address \
         (ibdev2netdev; BM.GPU.H100.8 has 16); NCCL_IB_HCA and NCCL_IB_GID_INDEX set as the shape needs; the same \
         GPU driver, OFED and NCCL versions on every node (oracle-quickstart/oci-hpc's health check runs these checks)."
    }

    fn fabric_advice(&self) -> &'static str {
        "On OCI, check: NCCL_DEBUG=INFO shows the IB network, not Socket; the nodes launched in a cluster network or \
         compute cluster (outside one they have only the front-end VNIC); the RDMA plugins (Compute HPC RDMA \
         Authentication and Auto-Configuration) enabled and the RDMA interfaces configured with addresses."
    }

    fn node_pool(&self, spec: &crate::model::NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
        node_pool::node_pool(spec, d, labels)
    }

    fn node_pool_fits(&self, spec: &crate::model::NodePoolSpec, diags: &mut crate::framework::Diagnostics) -> bool {
        node_pool::fits(spec, diags)
    }

    fn kubernetes(&self, spec: &crate::model::NodePoolSpec) -> super::kubernetes::InCluster {
        node_pool::kubernetes(spec)
    }
}

#[cfg(test)]
mod observe_fuzz;
