//! AWS expansion: VPC and subnet (unless given), cluster placement group, EFA security group with
//! self-referencing all-traffic rules; launch template with one EFA interface per network card; instances;
//! FSx for Lustre PERSISTENT_2 with an optional S3 data repository association.

pub mod api;
pub mod backend;
pub mod calls;
pub mod cluster;
pub mod fabric;
pub mod filesystem;
pub mod node_pool;
pub mod quota;
pub mod rules;
pub mod slurm;

use std::collections::BTreeMap;

use super::{DEFAULT_IMAGE, first_subnet, network_refs};
use crate::catalog::Sku;
use crate::model::{CapacityType, ClusterSpec, Defaults, FabricSpec, FilesystemSpec, Network, Piece, Placement, tag_string};
use crate::nodes::{first_nodes_range, node_range};

fn placement_group(fabric: &str) -> String {
    format!("aws_placement_group.{fabric}-pg")
}

fn efa_security_group(fabric: &str) -> String {
    format!("aws_security_group.{fabric}-efa")
}

pub fn fabric(spec: &FabricSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:fabric", n)]));
    let zone = spec.zone.clone().unwrap_or_default();
    let mut out = Vec::new();
    if let Network::Create { cidr } = &spec.network {
        out.push(Piece::new("aws_vpc", format!("{n}-vpc")).set("cidr_block", cidr).set("enable_dns_hostnames", true).set("tags", &tags));
        // Nodes with several EFA interfaces get no automatic public IPv4: the subnet is private by design.
        out.push(
            Piece::new("aws_subnet", format!("{n}-subnet"))
                .set("vpc_id", format!("aws_vpc.{n}-vpc"))
                .set("cidr_block", first_subnet(cidr))
                .set("availability_zone", &zone)
                .set("map_public_ip_on_launch", false)
                .set("tags", &tags),
        );
    }
    let (vpc, _) = network_refs(&spec.network, "aws_vpc", "aws_subnet", n);
    if spec.placement == Placement::Cluster {
        out.push(Piece::new("aws_placement_group", format!("{n}-pg")).set("strategy", "cluster").set("tags", &tags));
    }
    let sg = efa_security_group(n);
    out.push(
        Piece::new("aws_security_group", format!("{n}-efa"))
            .set("vpc_id", &vpc)
            .set("description", "EFA: all traffic between members of this group")
            .set("tags", &tags),
    );
    for (kind, suffix) in [("aws_vpc_security_group_ingress_rule", "in"), ("aws_vpc_security_group_egress_rule", "out")] {
        out.push(
            Piece::new(kind, format!("{n}-efa-self-{suffix}"))
                .set("security_group_id", &sg)
                .set("referenced_security_group_id", &sg)
                .set("ip_protocol", "-1"),
        );
    }
    out
}

/// The UltraServer type an UltraServer-only node type is sold as: 18 instances on one NVLink domain.
pub fn ultraserver_type(sku: &Sku) -> Option<&'static str> {
    match sku.name {
        "p6e-gb200.36xlarge" => Some("u-p6e-gb200x72"),
        _ => None,
    }
}

/// One network interface of the launch template: network card, device index, interface type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nic {
    pub card: u32,
    pub device: u32,
    pub kind: &'static str,
}

/// The launch template's interfaces, the one layout the plan shows and apply sends:
/// - card 0 carries the primary interface: EFA with ENA, or plain ENA where card 0 is ENA-only (p6-b300,
///   p6e-gb200) or the type has no EFA;
/// - every further card one interface at device index 1, EFA-only (AWS "Maximize network bandwidth ...
///   with multiple network cards"); on p6e-gb200 even cards take EFA with ENA and odd cards EFA-only, as
///   aws-parallelcluster lays them out.
pub fn efa_layout(spec: &ClusterSpec) -> Vec<Nic> {
    let sku = spec.fabric.sku;
    let card0_ena_only = sku.name.starts_with("p6-b300") || ultraserver_type(sku).is_some() || sku.fabric != crate::catalog::Fabric::Efa;
    let extra = if card0_ena_only { spec.rdma_interfaces } else { spec.rdma_interfaces.saturating_sub(1) };
    let alternate = ultraserver_type(sku).is_some();
    let primary = Nic { card: 0, device: 0, kind: if card0_ena_only { "interface" } else { "efa" } };
    std::iter::once(primary)
        .chain((1..=extra).map(|card| Nic { card, device: 1, kind: if alternate && card % 2 == 0 { "efa" } else { "efa-only" } }))
        .collect()
}

/// Cards listed compactly: `1`, `1-16`, `2, 4, .., 16`.
fn card_list(cards: &[u32]) -> String {
    match cards {
        [] => String::new(),
        [one] => one.to_string(),
        [first, .., last] if cards.windows(2).all(|w| w[1] == w[0] + 1) => format!("{first}-{last}"),
        [first, second, .., last] => format!("{first}, {second}, .., {last}"),
        [first, last] => format!("{first}, {last}"),
    }
}

/// The launch template's interfaces as pieces: the primary one, then one piece per interface type.
fn network_interfaces(spec: &ClusterSpec, template: &str) -> Vec<Piece> {
    let sg = efa_security_group(&spec.fabric.name);
    let layout = efa_layout(spec);
    let kind = "aws_launch_template.network_interfaces";
    let primary = layout[0];
    let piece = Piece::new(kind, format!("{template} card 0"))
        .set("network_card_index", 0)
        .set("device_index", 0)
        .set("interface_type", primary.kind)
        .set("security_groups", &sg);
    // EC2 refuses associate_public_ip_address, even false, when a launch has several interfaces.
    let mut out = vec![if layout.len() == 1 { piece.set("associate_public_ip_address", false) } else { piece }];
    for interface_type in ["efa", "efa-only"] {
        let cards: Vec<u32> = layout[1..].iter().filter(|n| n.kind == interface_type).map(|n| n.card).collect();
        if cards.is_empty() {
            continue;
        }
        let list = card_list(&cards);
        out.push(
            Piece::new(kind, format!("{template} cards {list}"))
                .count(cards.len() as u32)
                .set("network_card_index", &list)
                .set("device_index", 1)
                .set("interface_type", interface_type)
                .set("security_groups", &sg),
        );
    }
    out
}

pub fn cluster(spec: &ClusterSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:cluster", n), ("hpc:fabric", &f.name)]));
    let template = format!("{n}-lt");
    let mut out = Vec::new();
    if spec.ssh_public_key.is_some() {
        out.push(Piece::new("aws_key_pair", format!("{n}-key")).set("tags", &tags));
    }
    let market = match spec.capacity {
        CapacityType::Spot => Some("spot"),
        CapacityType::CapacityBlock => Some("capacity-block"),
        _ => None,
    };
    out.push(
        Piece::new("aws_launch_template", &template)
            .set("instance_type", f.sku.name)
            .set("image_id", spec.image.as_deref().unwrap_or(DEFAULT_IMAGE))
            .set("placement.group_name", if f.placement == Placement::Cluster { placement_group(&f.name) } else { "(none)".into() })
            .set("placement.availability_zone", f.zone.as_deref().unwrap_or_default())
            .set("instance_market_options.market_type", market.unwrap_or("on-demand"))
            // An UltraServer cluster targets each domain's reservation at launch; the template names the block.
            .set_opt(
                "capacity_reservation_specification.capacity_reservation_target",
                spec.reservation_id.as_deref().filter(|_| ultraserver_type(f.sku).is_none()),
            )
            .set_opt("tags.hpc:capacity-block", spec.reservation_id.as_deref().filter(|_| ultraserver_type(f.sku).is_some()))
            .set_opt("key_name", spec.ssh_public_key.as_ref().map(|_| format!("aws_key_pair.{n}-key")))
            .set_opt("user_data", spec.user_data_summary())
            .set("metadata_options.http_tokens", "required")
            .set("efa_interfaces", spec.rdma_interfaces)
            .set("tags", &tags),
    );
    out.extend(network_interfaces(spec, &template));
    if let Some(ultraserver) = ultraserver_type(f.sku) {
        let block = spec.reservation_id.as_deref().unwrap_or_default();
        let domains = spec.nvlink_domains();
        out.push(
            Piece::new("aws_ec2_capacity_block", block)
                .set("ultraserver_type", ultraserver)
                .set("ultraservers_used", domains.len())
                .set("capacity_reservations", "one per UltraServer (DescribeCapacityBlocks), in the order listed")
                .set("read", "found, never created or deleted: the block is bought outside this configuration"),
        );
        for d in &domains {
            out.push(
                Piece::new("aws_instance", d.name.as_str())
                    .count(d.nodes.len() as u32)
                    .set("instance_type", f.sku.name)
                    .set("launch_template", format!("aws_launch_template.{template}"))
                    .set("subnet_id", spec.network_label("subnet"))
                    .set("names", node_range(n, &d.nodes))
                    .set(
                        "capacity_reservation_target",
                        format!("UltraServer {} of {block} (its capacity reservation {})", d.index + 1, d.index + 1),
                    )
                    .set("nvlink_domain", &d.name)
                    .set("launch", "RunInstances with MinCount = MaxCount per batch, into the domain's UltraServer"),
            );
        }
        return out;
    }
    out.push(
        Piece::new("aws_instance", n.as_str())
            .count(spec.node_count)
            .set("instance_type", f.sku.name)
            .set("launch_template", format!("aws_launch_template.{template}"))
            .set("subnet_id", spec.network_label("subnet"))
            .set("names", first_nodes_range(n, spec.node_count))
            .set("launch", "RunInstances with MinCount = MaxCount per batch"),
    );
    out
}

pub fn node_environment(sku: &Sku) -> BTreeMap<String, String> {
    if sku.fabric != crate::catalog::Fabric::Efa {
        // No EFA: NCCL's socket transport over the primary ENA interface.
        return super::env(&[("NCCL_SOCKET_IFNAME", "^lo,docker")]);
    }
    // aws-ofi-nccl over libfabric's EFA provider, GPUDirect RDMA on (AWS EFA user guide, NCCL on EFA).
    super::env(&[("FI_PROVIDER", "efa"), ("FI_EFA_USE_DEVICE_RDMA", "1"), ("FI_EFA_FORK_SAFE", "1"), ("NCCL_SOCKET_IFNAME", "^lo,docker")])
}

pub fn filesystem(spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
    let n = &spec.name;
    let f = &spec.fabric;
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:filesystem", n), ("hpc:fabric", &f.name)]));
    let metadata = match spec.metadata_iops {
        Some(iops) => format!("USER_PROVISIONED, iops {iops}"),
        None => "AUTOMATIC".into(),
    };
    let mut out = vec![
        Piece::new("aws_fsx_lustre_file_system", n.as_str())
            .set("deployment_type", "PERSISTENT_2")
            .set("storage_type", "SSD")
            .set("storage_capacity", spec.capacity_gib)
            .set("per_unit_storage_throughput", spec.throughput_per_tib)
            .set("metadata_configuration", metadata)
            .set("subnet_ids", format!("subnet of fabric {}", f.name))
            .set("security_group_ids", efa_security_group(&f.name))
            .set("data_compression_type", "LZ4")
            .set("tags", &tags),
    ];
    if let Some(repo) = &spec.data_repository {
        // PERSISTENT_2 takes no import_path: S3 links are data repository associations.
        out.push(
            Piece::new("aws_fsx_data_repository_association", format!("{n}-dra"))
                .set("file_system_id", format!("aws_fsx_lustre_file_system.{n}"))
                .set("file_system_path", "/")
                .set("data_repository_path", repo)
                .set("s3.auto_import_policy", "NEW, CHANGED, DELETED")
                .set("s3.auto_export_policy", "NEW, CHANGED, DELETED"),
        );
    }
    out
}

/// This cloud's expander, as the planner sees it.
pub struct Expansion;

/// A Slurm cluster's pieces: its subnet (the fabric network's last /28), the controllers at their fixed
/// addresses and the login nodes, in the fabric's EFA security group (open within itself).
pub fn slurm(spec: &crate::model::SlurmSpec, plan: &crate::model::SlurmPlan, d: &Defaults) -> Vec<Piece> {
    let (n, f) = (&spec.name, &spec.fabric);
    let tags = tag_string(&d.tags(&spec.tags, &[("hpc:slurm", n), ("hpc:fabric", &f.name)]));
    let subnet = format!("aws_subnet.{n}-control");
    let chunks = crate::clouds::slurm::aws_config_tags(&crate::clouds::slurm::slurm_config(plan, None)).len() - 1;
    let config = format!(
        "configuration {} in hpc:slurm-config-0..{} (gzip, base64); a change is written in place",
        crate::clouds::slurm::slurm_config(plan, None).revision,
        chunks.saturating_sub(1)
    );
    let mut out = vec![
        Piece::new("aws_subnet", format!("{n}-control"))
            .set("vpc_id", format!("aws_vpc.{}-vpc", f.name))
            .set("cidr_block", &plan.control_subnet)
            .set("availability_zone", f.zone.as_deref().unwrap_or_default())
            .set("tags", &tags),
    ];
    let image = spec.image.clone().unwrap_or_else(|| "(the clusters' default image: Deep Learning Base AMI, Ubuntu 22.04)".into());
    for (i, (host, address)) in plan.controllers.iter().enumerate() {
        out.push(
            Piece::new("aws_instance", host)
                .set("role", if i == 0 { "Slurm controller (slurmctld)" } else { "Slurm backup controller (slurmctld)" })
                .set("instance_type", &spec.controller_type)
                .set("ami", &image)
                .set("subnet_id", &subnet)
                .set("private_ip", address)
                .set("vpc_security_group_ids", format!("aws_security_group.{}-efa", f.name))
                .set("user_data", format!("installs Slurm {} and munge if missing, writes the fabric's key, takes the configuration from its tags (hpc-slurm-sync, every minute), starts munge and slurmctld", spec.version.version))
                .set("metadata_options.http_tokens", "required")
                .set("metadata_options.instance_metadata_tags", "enabled (the configuration is read from the tags)")
                .set("tags", &tags)
                .set("tags.hpc:slurm-config", &config),
        );
    }
    if !plan.logins.is_empty() {
        out.push(
            Piece::new("aws_instance", format!("{n}-login"))
                .count(plan.logins.len() as u32)
                .set("role", "Slurm login node (client commands)")
                .set("names", plan.logins.join(", "))
                .set("instance_type", &spec.login_type)
                .set("ami", &image)
                .set("subnet_id", &subnet)
                .set("vpc_security_group_ids", format!("aws_security_group.{}-efa", f.name))
                .set(
                    "user_data",
                    format!(
                        "installs the Slurm {} client commands and munge if missing, writes the key, takes the configuration from its tags (hpc-slurm-sync, every minute)",
                        spec.version.version
                    ),
                )
                .set("metadata_options.http_tokens", "required")
                .set("metadata_options.instance_metadata_tags", "enabled (the configuration is read from the tags)")
                .set("tags", &tags)
                .set("tags.hpc:slurm-config", &config),
        );
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

    fn slurm_fits(
        &self,
        spec: &crate::model::SlurmSpec,
        config: &crate::clouds::slurm::SlurmConfig,
        d: &Defaults,
        diags: &mut crate::framework::Diagnostics,
    ) -> bool {
        slurm::tags_fit(spec, config, d, diags)
    }

    /// The fabric's cluster placement group holds every node.
    fn placement_groups(&self, spec: &ClusterSpec) -> Vec<(String, Vec<u32>)> {
        if spec.fabric.placement != Placement::Cluster || spec.node_count == 0 {
            return Vec::new();
        }
        vec![(fabric::placement_group_name(&spec.fabric.name), (0..spec.node_count).collect())]
    }

    fn node_environment(&self, sku: &Sku) -> BTreeMap<String, String> {
        node_environment(sku)
    }

    fn filesystem(&self, spec: &FilesystemSpec, d: &Defaults) -> Vec<Piece> {
        filesystem(spec, d)
    }

    fn placement_advice(&self) -> &'static str {
        "On AWS, check: every instance in one cluster placement group (or one capacity block); every EFA interface \
         attached and up (fi_info -p efa lists them; p5.48xlarge has 32); FI_PROVIDER=efa and FI_EFA_USE_DEVICE_RDMA=1 \
         set and the aws-ofi-nccl plugin loaded (NCCL_DEBUG=INFO names it); the same GPU driver, EFA installer and \
         NCCL versions on every node."
    }

    fn fabric_advice(&self) -> &'static str {
        "On AWS, check: NCCL_DEBUG=INFO shows the Libfabric network of aws-ofi-nccl with the efa provider, not \
         Socket; FI_PROVIDER=efa set; the EFA interfaces attached (fi_info -p efa); the security group allowing all \
         traffic to and from itself (EFA needs it); every instance in one cluster placement group."
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
