//! Google Cloud expansion: host VPC (unless given), the GPU NIC VPCs the machine family needs (A3 High 4,
//! A3 Mega 8, MTU 8244; A3 Ultra/A4/A4X a second gVNIC VPC plus one RoCE VPC with the zone's RoCE network
//! profile and a subnet per MRDMA NIC, 8 or on A4X 4), firewall rules, the compact placement policy (on A4X
//! one per NVLink domain, gpu_topology 1x72, made by the cluster); instances created by bulkInsert with one
//! NIC per GPU VPC; Google Cloud Managed Lustre with private service access.

pub mod api;
pub mod backend;
pub mod cluster;
pub mod fabric;
pub mod filesystem;
pub mod node_pool;
pub mod quota;
pub mod rules;
pub mod slurm;
pub mod topology;

use std::collections::BTreeMap;

use super::{DEFAULT_IMAGE, name_range};
use crate::catalog::{Fabric, Sku};
use crate::model::{CapacityType, ClusterSpec, Defaults, FabricSpec, FilesystemSpec, Piece, Placement};
use crate::nodes::{first_nodes_range, node_range};

/// GCP labels: lowercase keys and values; our `hpc:` keys become `hpc_`.
fn labels(tags: &BTreeMap<String, String>) -> String {
    tags.iter().map(|(k, v)| format!("{}={v}", k.replace(':', "_"))).collect::<Vec<_>>().join(", ")
}

use topology::{gpu_vpcs, is_roce};

/// The fabric's pieces, as its [`topology`] describes them (the same one apply creates).
pub fn fabric(spec: &FabricSpec, d: &Defaults) -> Vec<Piece> {
    topology::topology(spec, d.gcp_project.as_deref().unwrap_or_default()).pieces()
}

pub fn cluster(spec: &ClusterSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let sku = f.sku;
    let tags = labels(&d.tags(&spec.tags, &[("hpc:cluster", n), ("hpc:fabric", &f.name)]));
    let (model, reservation) = match spec.capacity {
        CapacityType::Spot => ("SPOT", "NO_RESERVATION".to_string()),
        CapacityType::FlexStart => ("FLEX_START", "NO_RESERVATION".to_string()),
        CapacityType::Reservation => ("STANDARD", format!("SPECIFIC_RESERVATION {}", spec.reservation_id.as_deref().unwrap_or_default())),
        _ => ("STANDARD", "ANY_RESERVATION".to_string()),
    };
    let nodes = |piece: &str, count: u32, names: String, policies: String| {
        Piece::new("google_compute_instance", piece)
            .count(count)
            .set("machine_type", sku.name)
            .set("zone", f.zone.as_deref().unwrap_or_default())
            .set("names", names)
            .set("create", "instances.bulkInsert per batch (count, name pattern)")
            .set("resource_policies", policies)
            .set("scheduling.on_host_maintenance", "TERMINATE")
            .set("scheduling.provisioning_model", model)
            .set("reservation_affinity", reservation.clone())
            .set("boot_disk.image", spec.image.as_deref().unwrap_or(DEFAULT_IMAGE))
            .set_opt("metadata.startup-script", spec.user_data_summary())
            .set("labels", tags.clone())
    };
    let mut out = Vec::new();
    if let Some(shape) = topology::gpu_topology(sku) {
        // A4X: one compact policy per NVLink domain (an 18-node sub-block), made by the cluster in place of
        // the fabric's, and each domain's nodes created into it.
        for domain in spec.nvlink_domains() {
            out.push(
                Piece::new("google_compute_resource_policy", domain.name.as_str())
                    .set("region", &f.region)
                    .set("group_placement_policy.collocation", "COLLOCATED")
                    .set("group_placement_policy.gpu_topology", &shape),
            );
            out.push(nodes(
                &domain.name,
                domain.nodes.len() as u32,
                node_range(n, &domain.nodes),
                format!("google_compute_resource_policy.{}", domain.name),
            ));
        }
    } else {
        let policies = if f.placement == Placement::Cluster {
            format!("google_compute_resource_policy.{}-placement", f.name)
        } else {
            "(none)".into()
        };
        out.push(nodes(n, spec.node_count, first_nodes_range(n, spec.node_count), policies));
    }
    let nic = "google_compute_instance.network_interface";
    out.push(Piece::new(nic, format!("{n} nic0")).set("network", spec.network_label("host network")).set("nic_type", "GVNIC"));
    let count = gpu_vpcs(sku);
    if count > 0 {
        out.push(
            Piece::new(nic, format!("{n} gpu nics"))
                .count(count)
                .set("networks", name_range(&format!("{}-gpu", f.name), count))
                .set("nic_type", "GVNIC"),
        );
    }
    if is_roce(sku) {
        let rdma = topology::rdma_subnets(sku);
        out.push(Piece::new(nic, format!("{n} nic1")).set("network", format!("{}-gvnic-1", f.name)).set("nic_type", "GVNIC"));
        out.push(
            Piece::new(nic, format!("{n} rdma nics"))
                .count(rdma)
                .set("network", format!("{}-rdma", f.name))
                .set("subnetworks", name_range(&format!("{}-rdma", f.name), rdma))
                .set("nic_type", "MRDMA"),
        );
    }
    out
}

pub fn node_environment(sku: &Sku) -> BTreeMap<String, String> {
    let ifnames = |count: u32| (1..=count).map(|i| format!("eth{i}")).collect::<Vec<_>>().join(",");
    let pairs: Vec<(&str, String)> = match sku.fabric {
        // GPUDirect-TCPX (A3 High), as the cluster toolkit's a3high blueprints set it.
        Fabric::GpuDirectTcpx => vec![
            ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0".into()),
            ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", ifnames(4)),
            ("NCCL_SOCKET_IFNAME", "eth0".into()),
            ("NCCL_CROSS_NIC", "0".into()),
            ("LD_LIBRARY_PATH", "/usr/local/tcpx/lib64".into()),
        ],
        // GPUDirect-TCPXO (A3 Mega, "FasTrak").
        Fabric::GpuDirectTcpxo => vec![
            ("NCCL_FASTRAK_CTRL_DEV", "eth0".into()),
            ("NCCL_FASTRAK_IFNAME", ifnames(8)),
            ("NCCL_SOCKET_IFNAME", "eth0".into()),
            ("NCCL_CROSS_NIC", "0".into()),
            ("NCCL_FASTRAK_NUM_FLOWS", "2".into()),
            ("LD_LIBRARY_PATH", "/var/lib/tcpxo/lib64".into()),
        ],
        // Ethernet only (G2): NCCL's socket transport over the host NIC.
        Fabric::None => vec![("NCCL_SOCKET_IFNAME", "eth0".into())],
        // RoCE with Google's gIB NCCL plugin (A3 Ultra, A4).
        _ => vec![
            ("NCCL_NET", "gIB".into()),
            ("NCCL_CROSS_NIC", "0".into()),
            ("NCCL_NET_GDR_LEVEL", "PIX".into()),
            ("NCCL_SOCKET_IFNAME", "eth0,eth1".into()),
            ("LD_LIBRARY_PATH", "/usr/local/gib/lib64".into()),
        ],
    };
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

pub fn filesystem(spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = labels(&d.tags(&spec.tags, &[("hpc:filesystem", n), ("hpc:fabric", &f.name)]));
    let network = format!("host network of fabric {}", f.name);
    vec![
        // Managed Lustre is reached through private service access on the host network.
        Piece::new("google_compute_global_address", format!("{n}-psa"))
            .set("purpose", "VPC_PEERING")
            .set("address_type", "INTERNAL")
            .set("prefix_length", 20)
            .set("network", &network),
        Piece::new("google_service_networking_connection", format!("{n}-psa"))
            .set("service", "servicenetworking.googleapis.com")
            .set("reserved_peering_ranges", format!("google_compute_global_address.{n}-psa"))
            .set("network", &network),
        Piece::new("google_lustre_instance", n.as_str())
            .set("instance_id", n)
            .set("location", f.zone.as_deref().unwrap_or_default())
            .set("filesystem", &spec.filesystem_name)
            .set("capacity_gib", spec.capacity_gib)
            .set("per_unit_storage_throughput", spec.throughput_per_tib)
            .set("network", &network)
            .set_opt("import_data.gcs_path", spec.data_repository.as_deref())
            .set("labels", tags),
    ]
}

/// This cloud's expander, as the planner sees it.
pub struct Expansion;

/// A Slurm cluster's pieces: its subnetwork in the fabric's host network (that network's last /28), a
/// firewall rule that lets it reach the nodes, the controllers at their fixed addresses and the login nodes.
pub fn slurm(spec: &crate::model::SlurmSpec, plan: &crate::model::SlurmPlan, d: &Defaults) -> Vec<Piece> {
    let (n, f) = (&spec.name, &spec.fabric);
    let labels = crate::model::tag_string(&d.tags(&spec.tags, &[("hpc-slurm", n), ("hpc-fabric", &f.name)]));
    let subnet = format!("google_compute_subnetwork.{n}-control");
    let mut out = vec![
        Piece::new("google_compute_subnetwork", format!("{n}-control"))
            .set("network", format!("google_compute_network.{}-vpc", f.name))
            .set("ip_cidr_range", &plan.control_subnet)
            .set("region", &f.region),
        Piece::new("google_compute_firewall", format!("{n}-control"))
            .set("network", format!("google_compute_network.{}-vpc", f.name))
            .set("direction", "INGRESS")
            .set("allow", "all protocols")
            .set("source_ranges", &spec.cidr),
    ];
    let image = spec.image.clone().unwrap_or_else(|| format!("{} (the clusters' default image)", cluster::DEFAULT_IMAGE));
    let config = format!(
        "configuration {} (gzip, base64), with hpc-slurm-config-revision; a change is written in place (setMetadata)",
        crate::clouds::slurm::slurm_config(plan, None).revision
    );
    let mut vm = |host: &str, role: &str, machine: &str, address: Option<&str>| {
        out.push(
            Piece::new("google_compute_instance", host)
                .set("role", role)
                .set("machine_type", machine)
                .set("zone", f.zone.as_deref().unwrap_or_default())
                .set("boot_disk.image", &image)
                .set("network_interface.subnetwork", &subnet)
                .set_opt("network_interface.network_ip", address)
                .set(
                    "metadata.user-data",
                    format!(
                        "installs Slurm {} and munge if missing, writes the fabric's key, takes the configuration from its metadata \
                         (hpc-slurm-sync, every minute)",
                        spec.version.version
                    ),
                )
                .set("metadata.hpc-slurm-config", &config)
                .set("labels", &labels),
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

    /// The fabric's compact placement policy holds every node (A4X: each NVLink domain has its own).
    fn placement_groups(&self, spec: &ClusterSpec) -> Vec<(String, Vec<u32>)> {
        if spec.fabric.placement != Placement::Cluster || spec.node_count == 0 {
            return Vec::new();
        }
        vec![(format!("{}-placement", spec.fabric.name), (0..spec.node_count).collect())]
    }

    fn node_environment(&self, sku: &Sku) -> BTreeMap<String, String> {
        node_environment(sku)
    }

    fn filesystem(&self, spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
        filesystem(spec, d)
    }

    fn placement_advice(&self) -> &'static str {
        "On Google Cloud, check: every VM in one compact placement policy (on A4X, each NVLink domain's 18 VMs in \
         their domain's gpu_topology 1x72 policy, sharing one sub-block in resourceStatus.physicalHostTopology); every \
         GPU NIC attached on its own VPC network; on A3 Mega the GPUDirect-TCPXO plugin and its receive-datapath \
         manager running with NCCL_FASTRAK_* set, on A3 Ultra, A4 and A4X the RoCE NICs with the gIB plugin \
         (NCCL_NET=gIB); the same GPU driver and NCCL plugin versions on every node."
    }

    fn fabric_advice(&self) -> &'static str {
        "On Google Cloud, check: NCCL_DEBUG=INFO shows the GPUDirect (FasTrak/TCPXO) or gIB network, not Socket; \
         the GPU NICs attached on their own VPC networks (MTU 8244); on A3 Mega the receive-datapath manager running \
         and NCCL_FASTRAK_* set, on A3 Ultra, A4 and A4X the RoCE network profile and NCCL_NET=gIB; every VM in one \
         compact placement policy (on A4X, one per NVLink domain)."
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
