//! Azure expansion: resource group, VNet and subnet (unless given), network security group, proximity
//! placement group; InfiniBand VM scale sets of at most 100 VMs each (Uniform, single placement group,
//! one fault domain, no overprovisioning); Azure Managed Lustre.

pub mod api;
pub mod backend;
pub mod cluster;
pub mod fabric;
pub mod filesystem;
pub mod node_names;
pub mod node_pool;
pub mod quota;
pub mod rules;
pub mod slurm;

use std::collections::BTreeMap;

use super::{DEFAULT_IMAGE, first_subnet, network_refs};
use crate::catalog::Sku;
use crate::catalog::limits::AZURE_VMSS_MAX_IB_NODES;
use crate::model::{CapacityType, ClusterSpec, Defaults, FabricSpec, FilesystemSpec, Network, Piece, Placement, tag_string};

fn resource_group(spec: &FabricSpec) -> String {
    spec.resource_group.clone().unwrap_or_else(|| format!("azurerm_resource_group.{}-rg", spec.name))
}

pub fn fabric(spec: &FabricSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:fabric", n)]));
    let rg = resource_group(spec);
    let mut out = Vec::new();
    if spec.resource_group.is_none() {
        out.push(Piece::new("azurerm_resource_group", format!("{n}-rg")).set("location", &spec.region).set("tags", &tags));
    }
    if let Network::Create { cidr } = &spec.network {
        out.push(
            Piece::new("azurerm_virtual_network", format!("{n}-vpc"))
                .set("resource_group_name", &rg)
                .set("location", &spec.region)
                .set("address_space", cidr)
                .set("tags", &tags),
        );
        out.push(
            Piece::new("azurerm_subnet", format!("{n}-subnet"))
                .set("virtual_network_name", format!("azurerm_virtual_network.{n}-vpc"))
                .set("address_prefixes", first_subnet(cidr)),
        );
    }
    let (_, subnet) = network_refs(&spec.network, "azurerm_virtual_network", "azurerm_subnet", n);
    out.push(Piece::new("azurerm_network_security_group", format!("{n}-nsg")).set("resource_group_name", &rg).set("tags", &tags));
    out.push(
        Piece::new("azurerm_subnet_network_security_group_association", format!("{n}-nsg"))
            .set("subnet_id", subnet)
            .set("network_security_group_id", format!("azurerm_network_security_group.{n}-nsg")),
    );
    if spec.placement == Placement::Cluster {
        out.push(
            Piece::new("azurerm_proximity_placement_group", format!("{n}-ppg"))
                .set("resource_group_name", &rg)
                .set("location", &spec.region)
                .set("allowed_vm_sizes", spec.sku.name)
                .set_opt("zone", spec.zone.as_deref())
                .set("tags", &tags),
        );
    }
    out
}

/// Sizes of the scale sets a cluster is split into: as few as the 100-VM placement-group limit allows,
/// as even as possible (150 -> 75 + 75).
pub fn scale_set_sizes(nodes: u32) -> Vec<u32> {
    let sets = nodes.div_ceil(AZURE_VMSS_MAX_IB_NODES).max(1);
    (0..sets).map(|i| nodes / sets + u32::from(i < nodes % sets)).collect()
}

/// The scale sets of a cluster made anew: [`scale_set_sizes`], except that a rack-scale node type (18 VMs
/// per NVL72 rack) is split only between racks, so no NVLink domain spans two scale sets: at most 90 VMs
/// (5 racks) each.
fn new_scale_sets(nodes: u32, rack: Option<u32>) -> Vec<u32> {
    let Some(per) = rack else { return scale_set_sizes(nodes) };
    let racks = nodes.div_ceil(per);
    let racks_per_set = (AZURE_VMSS_MAX_IB_NODES / per).max(1);
    let sets = racks.div_ceil(racks_per_set).max(1);
    (0..sets).map(|i| (racks / sets + u32::from(i < racks % sets)) * per).collect()
}

/// The scale sets of a cluster: a new cluster's are [`new_scale_sets`]; a running cluster's change is laid
/// out around the sets that run (`spec.running_groups`), because a node is named by its position and a
/// resized set adds or removes VMs at its end:
/// - a grow fills the last set (up to 100 VMs, or the whole racks that fit) and adds sets for the rest,
///   split as a new cluster's would be: 100 -> 101 is 100 + 1, not 51 + 50 (which would delete 49 VMs);
/// - a shrink takes from the last sets, emptied ones going away: 100 + 100 -> 150 is 100 + 50;
/// - no set other than the last grows, and no running set is resized the other way, so every node kept
///   keeps its name; sets an earlier release split evenly keep their sizes.
pub fn cluster_scale_sets(spec: &ClusterSpec) -> Vec<u32> {
    let rack = spec.nvlink_domain_nodes();
    let running: Vec<u32> = spec.running_groups.iter().copied().filter(|n| *n > 0).collect();
    if running.is_empty() {
        return new_scale_sets(spec.node_count, rack);
    }
    let unit = rack.unwrap_or(1);
    let full = (AZURE_VMSS_MAX_IB_NODES / unit).max(1) * unit;
    let wanted = rack.map_or(spec.node_count, |per| spec.node_count.div_ceil(per) * per);
    let mut sets = running;
    let total: u32 = sets.iter().sum();
    if wanted >= total {
        let mut more = wanted - total;
        if let Some(last) = sets.last_mut() {
            let room = full.saturating_sub(*last) / unit * unit;
            let fill = room.min(more);
            *last += fill;
            more -= fill;
        }
        if more > 0 {
            sets.extend(new_scale_sets(more, rack));
        }
    } else {
        let mut cut = total - wanted;
        while cut > 0 {
            let Some(last) = sets.last_mut() else { break };
            if *last <= cut {
                cut -= *last;
                sets.pop();
            } else {
                *last -= cut;
                cut = 0;
            }
        }
        if sets.is_empty() {
            sets.push(0);
        }
    }
    sets
}

pub fn cluster(spec: &ClusterSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:cluster", n), ("hpc:fabric", &f.name)]));
    let sizes = cluster_scale_sets(spec);
    let racks = |size: u32| {
        spec.nvlink_domain_nodes().map(|per| {
            format!(
                "{} NVL72 rack(s) of {per} VMs; Azure places the VMs in racks (no API selects one), the self-check logs each VM's NVLink domain",
                size / per
            )
        })
    };
    sizes
        .iter()
        .enumerate()
        .map(|(i, size)| {
            Piece::new("azurerm_linux_virtual_machine_scale_set", cluster::scale_set_name(n, i))
                .set("sku", f.sku.name)
                .set("instances", size)
                .set_opt("nvlink_domains", racks(*size))
                .set("orchestration", "Uniform")
                .set("single_placement_group", true)
                .set("platform_fault_domain_count", 1)
                .set("overprovision", false)
                .set("upgrade_mode", "Manual")
                .set(
                    "proximity_placement_group_id",
                    if f.placement == Placement::Cluster {
                        format!("azurerm_proximity_placement_group.{}-ppg", f.name)
                    } else {
                        "(none)".into()
                    },
                )
                .set("priority", if spec.capacity == CapacityType::Spot { "Spot" } else { "Regular" })
                .set_opt("eviction_policy", (spec.capacity == CapacityType::Spot).then_some("Delete"))
                .set_opt("capacity_reservation_group_id", spec.reservation_id.as_deref())
                .set("source_image", spec.image.as_deref().unwrap_or(DEFAULT_IMAGE))
                .set_opt("zones", f.zone.as_deref())
                .set("subnet_id", spec.network_label("subnet"))
                .set_opt("custom_data", spec.user_data_summary())
                .set("tags", &tags)
        })
        .collect()
}

pub fn node_environment(sku: &Sku) -> BTreeMap<String, String> {
    if sku.fabric == crate::catalog::Fabric::None {
        // NV-series on Ethernet: NCCL's socket transport over the primary NIC.
        return super::env(&[("NCCL_SOCKET_IFNAME", "eth0")]);
    }
    // Azure HPC image guidance for ND-series NCCL over InfiniBand.
    let mut env: BTreeMap<String, String> = super::env(&[
        ("NCCL_IB_PCI_RELAXED_ORDERING", "1"),
        ("UCX_IB_PCI_RELAXED_ORDERING", "on"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
    ]);
    if matches!(sku.name, "Standard_ND96isr_H100_v5" | "Standard_ND96isr_H200_v5") {
        env.insert("NCCL_TOPO_FILE".into(), "/opt/microsoft/ndv5-topo.xml".into());
    }
    env
}

pub fn filesystem(spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:filesystem", n), ("hpc:fabric", &f.name)]));
    let (day, time) = spec.maintenance_window.clone().unwrap_or_else(|| ("Sunday".into(), "02:00".into()));
    let mut lustre = Piece::new("azurerm_managed_lustre_file_system", n.as_str())
        .set("sku_name", format!("AMLFS-Durable-Premium-{}", spec.throughput_per_tib))
        .set("storage_capacity_in_tb", spec.capacity_gib / 1024)
        .set("zones", f.zone.as_deref().unwrap_or("1"))
        .set("subnet_id", format!("subnet of fabric {} (a /24 or larger)", f.name))
        .set("maintenance_window", format!("{day} {time} UTC"))
        .set("tags", &tags);
    if let Some(repo) = &spec.data_repository {
        lustre = lustre
            .set("hsm_setting.container_id", repo)
            .set("hsm_setting.logging_container_id", crate::clouds::azure::filesystem::logging_container(repo))
            .set(
                "hsm_setting.required_roles",
                "Contributor and Storage Blob Data Contributor for \"HPC Cache Resource Provider\" on the storage account",
            );
    }
    vec![lustre]
}

/// This cloud's expander, as the planner sees it.
pub struct Expansion;

/// A Slurm cluster's pieces: its subnet (the fabric network's last /28, with the fabric's security group),
/// each controller's NIC at its fixed address and VM, and the login nodes'.
pub fn slurm(spec: &crate::model::SlurmSpec, plan: &crate::model::SlurmPlan, d: &Defaults) -> Vec<Piece> {
    let (n, f) = (&spec.name, &spec.fabric);
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:slurm", n), ("hpc:fabric", &f.name)]));
    let subnet = format!("azurerm_subnet.{n}-control");
    let mut out = vec![
        Piece::new("azurerm_subnet", format!("{n}-control"))
            .set("virtual_network_name", format!("azurerm_virtual_network.{}-vpc", f.name))
            .set("address_prefixes", &plan.control_subnet)
            .set("network_security_group_id", format!("azurerm_network_security_group.{}-nsg", f.name)),
    ];
    let image = spec.image.clone().unwrap_or_else(|| format!("{} (the clusters' default image)", cluster::DEFAULT_IMAGE));
    let config = format!(
        "configuration {} (gzip, base64), tag hpc:slurm-config its revision; a change is written in place (PATCH)",
        crate::clouds::slurm::slurm_config(plan, None).revision
    );
    let mut vm = |host: &str, role: &str, size: &str, address: Option<&str>| {
        out.push(
            Piece::new("azurerm_network_interface", format!("{host}-nic"))
                .set("subnet_id", &subnet)
                .set("private_ip_address_allocation", if address.is_some() { "Static" } else { "Dynamic" })
                .set_opt("private_ip_address", address)
                .set("tags", &tags),
        );
        out.push(
            Piece::new("azurerm_linux_virtual_machine", host)
                .set("role", role)
                .set("size", size)
                .set("source_image", &image)
                .set("network_interface_ids", format!("azurerm_network_interface.{host}-nic"))
                .set(
                    "custom_data",
                    format!(
                        "installs Slurm {} and munge if missing, writes the fabric's key, takes the configuration from its user data \
                         (hpc-slurm-sync, every minute)",
                        spec.version.version
                    ),
                )
                .set("user_data", &config)
                .set("tags", &tags),
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

    /// Each scale set is its own InfiniBand fabric ("automatically configured between VMs occupying the
    /// same virtual machine scale set").
    fn placement_groups(&self, spec: &ClusterSpec) -> Vec<(String, Vec<u32>)> {
        let mut first = 0;
        cluster_scale_sets(spec)
            .into_iter()
            .enumerate()
            .map(|(j, size)| {
                let nodes = (first..first + size).collect();
                first += size;
                (cluster::scale_set_name(&spec.name, j), nodes)
            })
            .collect()
    }

    fn node_environment(&self, sku: &Sku) -> BTreeMap<String, String> {
        node_environment(sku)
    }

    fn filesystem(&self, spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
        filesystem(spec, d)
    }

    fn placement_advice(&self) -> &'static str {
        "On Azure, check: every VM in one InfiniBand VM scale set with a single placement group (a scale set of more \
         than 100 VMs spans several); all InfiniBand ports Active (ibstat); NCCL_IB_PCI_RELAXED_ORDERING=1 and the \
         VM size's NCCL_TOPO_FILE set; the same GPU driver, OFED and NCCL versions on every node \
         (Azure/azurehpc-health-checks runs these checks)."
    }

    fn fabric_advice(&self) -> &'static str {
        "On Azure, check: NCCL_DEBUG=INFO shows the IB network, not Socket; the VM size has InfiniBand (the \"r\" \
         in ND96isr) and its driver is loaded (ibstat lists the ports); every VM in one InfiniBand VM scale set with \
         a single placement group (VMs in different scale sets share no InfiniBand fabric); NCCL_IB_* not pointing at \
         missing devices."
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
mod tests {
    #[test]
    fn scale_sets_split_evenly_under_100() {
        assert_eq!(super::scale_set_sizes(4), vec![4]);
        assert_eq!(super::scale_set_sizes(100), vec![100]);
        assert_eq!(super::scale_set_sizes(150), vec![75, 75]);
        assert_eq!(super::scale_set_sizes(201), vec![67, 67, 67]);
        let gb200 = crate::catalog::find_sku(crate::catalog::Cloud::Azure, "Standard_ND128isr_NDR_GB200_v6").unwrap();
        let cluster = |nodes: u32| crate::model::ClusterSpec {
            day2: Default::default(),
            capacity_policy: crate::model::CapacityPolicy::AllOrNothing,
            user_data_version: None,
            name: "t".into(),
            fabric: crate::model::FabricRef {
                name: "f".into(),
                cloud: crate::catalog::Cloud::Azure,
                region: "eastus".into(),
                zone: None,
                sku: gb200,
                placement: crate::model::Placement::Cluster,
            },
            own_fabric: None,
            gpu: None,
            node_count: nodes,
            capacity: crate::model::CapacityType::OnDemand,
            reservation_id: None,
            image: None,
            user_data: None,
            user_data_write_only: false,
            ssh_public_key: None,
            node_identity: None,
            workload: crate::model::Workload::Pretraining,
            rdma_interfaces: 4,
            tags: Default::default(),
            running_groups: Vec::new(),
            slurm: None,
        };
        // Racks are never split: 36 VMs stay in one scale set, 108 (6 racks) become 3 + 3 racks, not 100 + 8.
        assert_eq!(super::cluster_scale_sets(&cluster(36)), vec![36]);
        assert_eq!(super::cluster_scale_sets(&cluster(90)), vec![90]);
        assert_eq!(super::cluster_scale_sets(&cluster(108)), vec![54, 54]);
        // A running GB200 cluster of 90 (one set of 5 racks) grows by a set of one rack: the 90 stay.
        let running = |nodes: u32, sets: &[u32]| crate::model::ClusterSpec { running_groups: sets.to_vec(), ..cluster(nodes) };
        assert_eq!(super::cluster_scale_sets(&running(108, &[90])), vec![90, 18]);
        assert_eq!(super::cluster_scale_sets(&running(72, &[54, 54])), vec![54, 18]);
        assert_eq!(super::cluster_scale_sets(&running(144, &[54, 54])), vec![54, 90]);
    }

    fn h100(nodes: u32, running: &[u32]) -> Vec<u32> {
        let sku = crate::catalog::find_sku(crate::catalog::Cloud::Azure, "Standard_ND96isr_H100_v5").unwrap();
        let mut spec = crate::model::ClusterSpec {
            day2: Default::default(),
            capacity_policy: crate::model::CapacityPolicy::AllOrNothing,
            user_data_version: None,
            name: "t".into(),
            fabric: crate::model::FabricRef {
                name: "f".into(),
                cloud: crate::catalog::Cloud::Azure,
                region: "eastus".into(),
                zone: None,
                sku,
                placement: crate::model::Placement::Cluster,
            },
            own_fabric: None,
            gpu: None,
            node_count: nodes,
            capacity: crate::model::CapacityType::OnDemand,
            reservation_id: None,
            image: None,
            user_data: None,
            user_data_write_only: false,
            ssh_public_key: None,
            node_identity: None,
            workload: crate::model::Workload::Pretraining,
            rdma_interfaces: 8,
            tags: Default::default(),
            running_groups: Vec::new(),
            slurm: None,
        };
        spec.running_groups = running.to_vec();
        super::cluster_scale_sets(&spec)
    }

    #[test]
    fn a_grow_fills_the_last_running_set_and_adds_sets_without_resizing_any_other() {
        assert_eq!(h100(101, &[100]), [100, 1], "not 51 + 50, which deletes 49 running VMs");
        assert_eq!(h100(250, &[100]), [100, 75, 75]);
        assert_eq!(h100(60, &[40]), [60]);
        assert_eq!(h100(180, &[75, 75]), [75, 100, 5], "sets an earlier release split evenly keep their sizes");
        assert_eq!(h100(150, &[100, 50]), [100, 50], "no change keeps the layout");
        assert_eq!(h100(101, &[]), [51, 50], "a new cluster is split evenly");
    }

    #[test]
    fn a_shrink_takes_from_the_last_sets_and_never_grows_one() {
        assert_eq!(h100(150, &[100, 100]), [100, 50]);
        assert_eq!(h100(90, &[51, 50]), [51, 39]);
        assert_eq!(h100(40, &[51, 50]), [40]);
        assert_eq!(h100(0, &[51, 50]), [0]);
    }

    #[test]
    fn every_layout_keeps_each_running_set_but_the_last_and_reaches_the_node_count() {
        for before in [1u32, 37, 99, 100, 101, 150, 199, 200, 201, 350] {
            let running = h100(before, &[]);
            for after in [0u32, 1, 50, 99, 100, 101, 150, 200, 201, 299, 300, 301, 420] {
                let sets = h100(after, &running);
                assert_eq!(sets.iter().sum::<u32>(), after, "{before} -> {after}: {sets:?}");
                assert!(sets.iter().all(|s| *s <= 100), "{before} -> {after}: {sets:?}");
                // Every set before the last one changed keeps its size: nodes keep their names.
                let kept = sets.len().min(running.len());
                let changed = (0..kept).filter(|i| sets[*i] != running[*i]).collect::<Vec<_>>();
                assert!(changed.len() <= 1 && changed.iter().all(|i| *i + 1 == kept), "{before} {running:?} -> {after} {sets:?}");
            }
        }
    }
}

#[cfg(test)]
mod observe_fuzz;
