//! A Google Cloud fabric's topology, written once: which networks, subnetworks, firewall rules and
//! placement policy a fabric has, their names, MTUs and address ranges. The plan's pieces
//! ([`Topology::pieces`]) and the resources apply creates, refreshes and deletes (`fabric::desired`) are
//! both read from it, so what is planned and what is made cannot disagree.
//!
//! A3 High and A3 Mega get one GPU NIC VPC per GPU NIC (4 and 8, MTU 8244); A3 Ultra, A4 and A4X a second
//! gVNIC VPC and one RoCE VPC with the zone's RoCE network profile and one subnet per MRDMA NIC (8 on A3
//! Ultra and A4, 4 on A4X; MTU 8896). A4X's fabric makes no compact placement policy: each cluster on it
//! makes one per NVLink domain (`gpu_topology`), which takes its place.

use crate::catalog::{Fabric, Sku};
use crate::model::{FabricSpec, Network, Piece, Placement};

/// The MTU of every network of a GPUDirect-TCPX/TCPXO or Ethernet fabric.
pub const GPU_MTU: i64 = 8244;
/// The MTU of every network of a RoCE fabric (A3 Ultra, A4, A4X).
pub const ROCE_MTU: i64 = 8896;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Network,
    Subnetwork,
    Firewall,
    Policy,
}

impl Kind {
    /// The official provider's name for a kind of piece.
    pub fn piece_kind(self) -> &'static str {
        match self {
            Kind::Network => "google_compute_network",
            Kind::Subnetwork => "google_compute_subnetwork",
            Kind::Firewall => "google_compute_firewall",
            Kind::Policy => "google_compute_resource_policy",
        }
    }

    /// The kind of an official provider's piece name.
    pub fn of_piece(kind: &str) -> Option<Kind> {
        [Kind::Network, Kind::Subnetwork, Kind::Firewall, Kind::Policy].into_iter().find(|k| k.piece_kind() == kind)
    }
}

/// What one Google Cloud resource of the fabric is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A custom-mode VPC; `profile` is the RoCE network profile's URL.
    Network { mtu: i64, profile: Option<String> },
    /// A subnetwork of the network named `network`.
    Subnetwork { network: String, range: String },
    /// An ingress rule allowing every protocol from `source` on the network named `network`.
    Firewall { network: String, source: String },
    /// The compact placement policy.
    Policy { max_distance: Option<i64> },
}

/// One Google Cloud resource: its name and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    pub name: String,
    pub shape: Shape,
}

/// One piece of the plan and the resources it stands for (a counted piece stands for several).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub kind: Kind,
    pub piece: String,
    pub members: Vec<Resource>,
}

/// Every piece of a fabric, in the plan's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub region: String,
    pub groups: Vec<Group>,
}

/// The GPU NIC VPCs of a GPUDirect-TCPX/TCPXO machine family (one per GPU NIC), none otherwise.
pub fn gpu_vpcs(sku: &Sku) -> u32 {
    match sku.fabric {
        Fabric::GpuDirectTcpx | Fabric::GpuDirectTcpxo => sku.rdma_interfaces.unwrap_or(0),
        _ => 0,
    }
}

pub fn is_roce(sku: &Sku) -> bool {
    sku.fabric == Fabric::Roce
}

/// The subnets of a RoCE fabric's RDMA network, one per MRDMA NIC: 8 on A3 Ultra and A4, 4 on A4X (none
/// on other machine families).
pub fn rdma_subnets(sku: &Sku) -> u32 {
    if is_roce(sku) { sku.rdma_interfaces.unwrap_or(8) } else { 0 }
}

/// The GPU slice a rack-scale machine type's placement policy asks for, `1x<GPUs per NVLink domain>`
/// (A4X: `1x72`, 18 nodes of 4 GPUs); `None` where NVLink stays inside the node.
pub fn gpu_topology(sku: &Sku) -> Option<String> {
    sku.nvlink_domain.map(|d| format!("1x{}", d.nodes * sku.gpu_count))
}

/// Whether the fabric makes the compact placement policy: with placement = "cluster", except on a
/// rack-scale machine type (A4X), where every cluster makes one policy per NVLink domain instead.
pub fn fabric_policy(spec: &FabricSpec) -> bool {
    spec.placement == Placement::Cluster && gpu_topology(spec.sku).is_none()
}

/// Full URL of the zone's RoCE network profile (partial URLs without the project are rejected).
pub fn roce_profile(project: &str, zone: &str) -> String {
    format!("https://www.googleapis.com/compute/v1/projects/{project}/global/networkProfiles/{zone}-vpc-roce")
}

fn network(name: String, mtu: i64, profile: Option<String>) -> Resource {
    Resource { name, shape: Shape::Network { mtu, profile } }
}

fn subnetwork(name: String, network: String, range: String) -> Resource {
    Resource { name, shape: Shape::Subnetwork { network, range } }
}

fn firewall(name: String, network: String, source: String) -> Resource {
    Resource { name, shape: Shape::Firewall { network, source } }
}

fn group(kind: Kind, piece: String, members: Vec<Resource>) -> Group {
    Group { kind, piece, members }
}

/// The topology of a fabric in `project` (the RoCE network profile's URL names it).
pub fn topology(spec: &FabricSpec, project: &str) -> Topology {
    let n = &spec.name;
    let sku = spec.sku;
    let roce = is_roce(sku);
    let mut groups = Vec::new();
    if let Network::Create { cidr } = &spec.network {
        let host = format!("{n}-vpc");
        groups.push(group(Kind::Network, host.clone(), vec![network(host.clone(), if roce { ROCE_MTU } else { GPU_MTU }, None)]));
        let subnet = format!("{n}-subnet");
        groups.push(group(Kind::Subnetwork, subnet.clone(), vec![subnetwork(subnet, host.clone(), crate::clouds::first_subnet(cidr))]));
        let internal = format!("{n}-internal");
        groups.push(group(Kind::Firewall, internal.clone(), vec![firewall(internal, host, cidr.clone())]));
    }
    let count = gpu_vpcs(sku);
    if count > 0 {
        let gpu = |i: u32| format!("{n}-gpu-{i}");
        groups.push(group(Kind::Network, format!("{n}-gpu"), (0..count).map(|i| network(gpu(i), GPU_MTU, None)).collect()));
        groups.push(group(
            Kind::Subnetwork,
            format!("{n}-gpu"),
            (0..count).map(|i| subnetwork(gpu(i), gpu(i), format!("192.168.{i}.0/24"))).collect(),
        ));
        groups.push(group(
            Kind::Firewall,
            format!("{n}-gpu-internal"),
            (0..count).map(|i| firewall(format!("{}-internal", gpu(i)), gpu(i), "192.168.0.0/16".into())).collect(),
        ));
    }
    if roce {
        // Two gVNIC VPCs in all: the host VPC and this one; then the RDMA VPC, a subnet per MRDMA NIC.
        let gvnic = format!("{n}-gvnic-1");
        let range = "192.168.64.0/24".to_owned();
        groups.push(group(Kind::Network, gvnic.clone(), vec![network(gvnic.clone(), ROCE_MTU, None)]));
        groups.push(group(Kind::Subnetwork, gvnic.clone(), vec![subnetwork(gvnic.clone(), gvnic.clone(), range.clone())]));
        let internal = format!("{gvnic}-internal");
        groups.push(group(Kind::Firewall, internal.clone(), vec![firewall(internal, gvnic, range)]));
        let rdma = format!("{n}-rdma");
        let profile = roce_profile(project, spec.zone.as_deref().unwrap_or_default());
        groups.push(group(Kind::Network, rdma.clone(), vec![network(rdma.clone(), ROCE_MTU, Some(profile))]));
        groups.push(group(
            Kind::Subnetwork,
            rdma.clone(),
            (0..rdma_subnets(sku))
                .map(|i| subnetwork(format!("{n}-rdma-{i}"), rdma.clone(), format!("192.168.{}.0/24", 128 + i)))
                .collect(),
        ));
    }
    if fabric_policy(spec) {
        let name = format!("{n}-placement");
        let policy = Resource { name: name.clone(), shape: Shape::Policy { max_distance: spec.max_distance } };
        groups.push(group(Kind::Policy, name, vec![policy]));
    }
    Topology { region: spec.region.clone(), groups }
}

/// One value when all agree, else the first and the last: `192.168.0.0/24 .. 192.168.3.0/24`.
fn span<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let values: Vec<&str> = values.into_iter().collect();
    match (values.first(), values.last()) {
        (Some(first), _) if values.iter().all(|v| v == first) => (*first).to_owned(),
        (Some(first), Some(last)) => format!("{first} .. {last}"),
        _ => String::new(),
    }
}

impl Topology {
    /// Every resource with the piece it belongs to, in the plan's order.
    pub fn resources(&self) -> impl Iterator<Item = (&Group, &Resource)> {
        self.groups.iter().flat_map(|g| g.members.iter().map(move |r| (g, r)))
    }

    /// The plan piece of the network named `name`.
    fn network_piece(&self, name: &str) -> Option<&str> {
        self.resources().find(|(g, r)| g.kind == Kind::Network && r.name == name).map(|(g, _)| g.piece.as_str())
    }

    /// The plan's pieces, one per group.
    pub fn pieces(&self) -> Vec<Piece> {
        self.groups.iter().map(|g| self.piece(g)).collect()
    }

    fn piece(&self, g: &Group) -> Piece {
        let count = g.members.len() as u32;
        let mut p = Piece::new(g.kind.piece_kind(), g.piece.as_str()).count(count);
        let names = || span(g.members.iter().map(|r| r.name.as_str()));
        // A piece named after its network (`train-gpu`, `train-gpu-internal` of `train-gpu`) does not
        // repeat which one it is; the host network's subnet and rule (`train-subnet`, `train-internal`) do.
        let network = |networks: Vec<&str>| {
            let piece = self.network_piece(networks.first()?)?;
            (g.piece != piece && g.piece != format!("{piece}-internal")).then(|| format!("google_compute_network.{piece}"))
        };
        match g.kind {
            Kind::Network => {
                let mtu: Vec<String> = g
                    .members
                    .iter()
                    .filter_map(|r| match &r.shape {
                        Shape::Network { mtu, .. } => Some(mtu.to_string()),
                        _ => None,
                    })
                    .collect();
                let profile = g.members.iter().find_map(|r| match &r.shape {
                    Shape::Network { profile, .. } => profile.clone(),
                    _ => None,
                });
                p = p
                    .set("auto_create_subnetworks", false)
                    .set("mtu", span(mtu.iter().map(String::as_str)))
                    .set_opt("network_profile", profile);
                if count > 1 {
                    p = p.set("names", names());
                }
            }
            Kind::Subnetwork => {
                let (networks, ranges): (Vec<&str>, Vec<&str>) = g
                    .members
                    .iter()
                    .filter_map(|r| match &r.shape {
                        Shape::Subnetwork { network, range } => Some((network.as_str(), range.as_str())),
                        _ => None,
                    })
                    .unzip();
                p = p.set("region", &self.region).set("ip_cidr_range", span(ranges)).set_opt("network", network(networks));
                if count > 1 {
                    p = p.set("names", names());
                }
            }
            Kind::Firewall => {
                let (networks, sources): (Vec<&str>, Vec<&str>) = g
                    .members
                    .iter()
                    .filter_map(|r| match &r.shape {
                        Shape::Firewall { network, source } => Some((network.as_str(), source.as_str())),
                        _ => None,
                    })
                    .unzip();
                p = p.set("allow", "all protocols").set("source_ranges", span(sources)).set_opt("network", network(networks));
            }
            Kind::Policy => {
                let max_distance = g.members.iter().find_map(|r| match &r.shape {
                    Shape::Policy { max_distance } => *max_distance,
                    _ => None,
                });
                p = p
                    .set("region", &self.region)
                    .set("group_placement_policy.collocation", "COLLOCATED")
                    .set_opt("group_placement_policy.max_distance", max_distance);
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Cloud, skus};
    use crate::clouds::gcp::fabric::desired;
    use crate::model::Defaults;

    fn spec(sku: &'static Sku, network: Network, placement: Placement, max_distance: Option<i64>) -> FabricSpec {
        FabricSpec {
            name: "train".into(),
            cloud: Cloud::Gcp,
            region: "us-central1".into(),
            zone: Some("us-central1-a".into()),
            sku,
            network,
            placement,
            max_distance,
            resource_group: None,
            compartment_id: None,
            tags: Default::default(),
        }
    }

    /// Every Google Cloud machine type on a new and an existing network, with and without placement.
    fn every_fabric() -> Vec<FabricSpec> {
        let networks = [
            Network::Create { cidr: "10.20.0.0/16".into() },
            Network::Existing { vpc_id: "corp-vpc".into(), subnet_id: "corp-gpu".into() },
        ];
        let mut out = Vec::new();
        for sku in skus(Cloud::Gcp) {
            for network in &networks {
                out.push(spec(sku, network.clone(), Placement::Cluster, Some(2)));
                out.push(spec(sku, network.clone(), Placement::Cluster, None));
                out.push(spec(sku, network.clone(), Placement::None, None));
            }
        }
        out
    }

    fn span_of(values: Vec<String>) -> String {
        span(values.iter().map(String::as_str))
    }

    #[test]
    fn the_planned_pieces_are_the_resources_apply_creates() {
        let d = Defaults { gcp_project: Some("ml-prod".into()), ..Defaults::default() };
        for spec in every_fabric() {
            let pieces = crate::clouds::gcp::fabric(&spec, &d);
            let items = desired(&spec, "ml-prod", None, None);
            let what = format!("{} {:?} {:?}", spec.sku.name, spec.network, spec.placement);
            // Every resource apply makes belongs to exactly one planned piece, and each piece to some.
            for item in &items {
                let owners = pieces.iter().filter(|p| p.name == item.piece && p.kind == item.kind.piece_kind()).count();
                assert_eq!(owners, 1, "{what}: {} {}", item.kind.piece_kind(), item.name);
            }
            for piece in &pieces {
                let mine: Vec<_> = items.iter().filter(|i| i.piece == piece.name && i.kind.piece_kind() == piece.kind).collect();
                assert_eq!(mine.len() as u32, piece.count, "{what}: {}", piece.name);
                let field = |f: fn(&serde_json::Value) -> Option<String>| span_of(mine.iter().filter_map(|i| f(&i.body)).collect());
                let setting = |k: &str| piece.settings.get(k).cloned();
                if piece.count > 1 && piece.kind != "google_compute_firewall" {
                    assert_eq!(setting("names"), Some(field(|b| b["name"].as_str().map(str::to_owned))), "{what}: {}", piece.name);
                }
                match Kind::of_piece(&piece.kind) {
                    Some(Kind::Network) => {
                        assert_eq!(setting("mtu"), Some(field(|b| Some(b["mtu"].to_string()))), "{what}: {}", piece.name);
                        assert_eq!(
                            setting("network_profile"),
                            mine.iter().find_map(|i| i.body["networkProfile"].as_str().map(str::to_owned))
                        );
                        assert!(mine.iter().all(|i| i.body["autoCreateSubnetworks"] == false));
                    }
                    Some(Kind::Subnetwork) => {
                        assert_eq!(setting("ip_cidr_range"), Some(field(|b| b["ipCidrRange"].as_str().map(str::to_owned))), "{what}");
                        assert_eq!(setting("region").as_deref(), Some("us-central1"));
                    }
                    Some(Kind::Firewall) => {
                        assert_eq!(setting("source_ranges"), Some(field(|b| b["sourceRanges"][0].as_str().map(str::to_owned))), "{what}");
                    }
                    Some(Kind::Policy) => {
                        let distance = mine[0].body["groupPlacementPolicy"].get("maxDistance").map(|d| d.to_string());
                        assert_eq!(setting("group_placement_policy.max_distance"), distance, "{what}");
                    }
                    None => panic!("{what}: unknown piece kind {}", piece.kind),
                }
            }
        }
    }

    #[test]
    fn each_machine_family_gets_its_networks() {
        let names = |sku: &str| {
            let sku = crate::catalog::find_sku(Cloud::Gcp, sku).unwrap();
            let spec = spec(sku, Network::Create { cidr: "10.20.0.0/16".into() }, Placement::Cluster, None);
            desired(&spec, "p", None, None)
                .into_iter()
                .filter(|i| i.kind == Kind::Network)
                .map(|i| (i.name, i.body["mtu"].as_i64()))
                .collect::<Vec<_>>()
        };
        let gpu = |i: u32| (format!("train-gpu-{i}"), Some(GPU_MTU));
        let mut high = vec![("train-vpc".to_owned(), Some(GPU_MTU))];
        high.extend((0..4).map(gpu));
        assert_eq!(names("a3-highgpu-8g"), high);
        assert_eq!(names("a3-megagpu-8g").len(), 9);
        let roce = |n: &str| (n.to_owned(), Some(ROCE_MTU));
        assert_eq!(names("a4-highgpu-8g"), [roce("train-vpc"), roce("train-gvnic-1"), roce("train-rdma")]);
        assert_eq!(names("g2-standard-4"), [("train-vpc".to_owned(), Some(GPU_MTU))]);
    }

    #[test]
    fn a4x_has_4_rdma_subnets_and_leaves_placement_to_its_clusters() {
        let shape = |sku: &str| {
            let sku = crate::catalog::find_sku(Cloud::Gcp, sku).unwrap();
            let spec = spec(sku, Network::Create { cidr: "10.20.0.0/16".into() }, Placement::Cluster, None);
            let items = desired(&spec, "p", None, None);
            let rdma = items.iter().filter(|i| i.kind == Kind::Subnetwork && i.name.starts_with("train-rdma-")).count();
            let policies: Vec<String> = items.iter().filter(|i| i.kind == Kind::Policy).map(|i| i.name.clone()).collect();
            (rdma, policies)
        };
        assert_eq!(shape("a4x-highgpu-4g"), (4, vec![]));
        assert_eq!(shape("a4-highgpu-8g"), (8, vec!["train-placement".to_owned()]));
        assert_eq!(shape("a3-ultragpu-8g"), (8, vec!["train-placement".to_owned()]));
        let a4x = crate::catalog::find_sku(Cloud::Gcp, "a4x-highgpu-4g").unwrap();
        assert_eq!(gpu_topology(a4x).as_deref(), Some("1x72"));
        assert_eq!(gpu_topology(crate::catalog::find_sku(Cloud::Gcp, "a4-highgpu-8g").unwrap()), None);
    }

    #[test]
    fn a_range_shows_its_ends_and_one_value_once() {
        assert_eq!(span(["192.168.0.0/24", "192.168.1.0/24", "192.168.3.0/24"]), "192.168.0.0/24 .. 192.168.3.0/24");
        assert_eq!(span(["192.168.0.0/16", "192.168.0.0/16"]), "192.168.0.0/16");
        assert_eq!(span(["x"]), "x");
    }
}
