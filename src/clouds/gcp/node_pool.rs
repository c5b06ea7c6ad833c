//! A GKE node pool of GPU nodes (`container.v1`, `projects.locations.clusters.nodePools`): in the fabric's
//! zone, in the fabric's compact placement policy (`placementPolicy.type = COMPACT` with `policyName`), with
//! the GPU NICs' networks as `networkConfig.additionalNodeNetworkConfigs` (the cluster must have
//! multi-networking on). The in-cluster half is a `GKENetworkParamSet` and a `Network` per GPU NIC network,
//! which pods name in their `networking.gke.io/interfaces` annotation, and Google's NCCL plugin installer.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::topology::{gpu_vpcs, is_roce, rdma_subnets};
use crate::catalog::Fabric;
use crate::clouds::kubernetes::{InCluster, effect_constant, pool_tags};
use crate::framework::{AttributePath, Diagnostics, one_of};
use crate::model::{CapacityType, Defaults, NodeAmount, NodePoolSpec, Piece, Placement, tag_string};

/// GKE node image types that carry the GPU driver installer and the multi-NIC support GPU pools need.
const IMAGE_TYPES: [&str; 2] = ["COS_CONTAINERD", "UBUNTU_CONTAINERD"];

/// `projects/<project>/locations/<location>/clusters/<name>` -> the location.
fn cluster_location(id: &str) -> Option<&str> {
    match id.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p, "locations", location, "clusters", c] if [p, location, c].iter().all(|s| !s.is_empty()) => Some(location),
        _ => None,
    }
}

/// The GPU NICs' networks and subnetworks a node of the fabric's type has, besides nic0's, in NIC order.
pub fn additional_networks(spec: &NodePoolSpec) -> Vec<(String, String)> {
    let (f, sku) = (&spec.nodes.fabric.name, spec.nodes.fabric.sku);
    let mut out = Vec::new();
    for i in 0..gpu_vpcs(sku) {
        out.push((format!("{f}-gpu-{i}"), format!("{f}-gpu-{i}")));
    }
    if is_roce(sku) {
        out.push((format!("{f}-gvnic-1"), format!("{f}-gvnic-1")));
        for i in 0..rdma_subnets(sku) {
            out.push((format!("{f}-rdma"), format!("{f}-rdma-{i}")));
        }
    }
    out
}

pub fn fits(spec: &NodePoolSpec, diags: &mut Diagnostics) -> bool {
    let mut ok = true;
    let f = &spec.nodes.fabric;
    match cluster_location(&spec.kubernetes_cluster) {
        None => {
            diags.error_at(
                AttributePath::attr("kubernetes_cluster"),
                "Invalid GKE cluster id",
                format!(
                    "{:?} is not a GKE cluster's id: projects/<project>/locations/<region or zone>/clusters/<name> (google_container_cluster.<x>.id).",
                    spec.kubernetes_cluster
                ),
            );
            ok = false;
        }
        Some(location) if location != f.region && Some(location) != f.zone.as_deref() => {
            diags.error_at(
                AttributePath::attr("kubernetes_cluster"),
                "Cluster and fabric in different places",
                format!(
                    "The cluster is in {location} and the fabric in {} ({}): a node pool's nodes are in its cluster's region, and the \
                     fabric's networks and compact placement are in its zone. Use a fabric in a zone of {location}, or a cluster in {}.",
                    f.zone.as_deref().unwrap_or(&f.region),
                    f.region,
                    f.region
                ),
            );
            ok = false;
        }
        Some(_) => {}
    }
    if let Some(image) = spec.nodes.image.as_deref().filter(|i| !IMAGE_TYPES.contains(i)) {
        diags.error_at(
            AttributePath::attr("image"),
            "Unsupported GKE image type",
            format!("On GKE, image is the node image type: {image:?} is not one. Valid values: {}.", one_of(&IMAGE_TYPES)),
        );
        ok = false;
    }
    ok
}

pub fn node_pool(spec: &NodePoolSpec, d: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece> {
    let c = &spec.nodes;
    let n = &c.name;
    let f = &c.fabric;
    let resource_labels = super::labels(&pool_tags(spec, d));
    let networks = additional_networks(spec);
    let taints: Vec<String> = spec.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, effect_constant(t.effect))).collect();
    let reservation = match c.capacity {
        CapacityType::Reservation => format!("SPECIFIC_RESERVATION {}", c.reservation_id.as_deref().unwrap_or_default()),
        CapacityType::Spot | CapacityType::FlexStart => "NO_RESERVATION".into(),
        _ => "ANY_RESERVATION".into(),
    };
    let pool = Piece::new("google_container_node_pool", n.as_str())
        .set("cluster", &spec.kubernetes_cluster)
        .set("node_locations", f.zone.as_deref().unwrap_or(&f.region))
        .set("initial_node_count", c.node_count)
        .set_opt("autoscaling", spec.autoscaling.map(|(min, max)| format!("total_min_node_count = {min}, total_max_node_count = {max}")))
        .set_opt("version", spec.kubernetes_version.map(|(a, b)| format!("{a}.{b}")))
        .set(
            "placement_policy",
            if f.placement == Placement::Cluster {
                format!("COMPACT, policy_name = google_compute_resource_policy.{}-placement", f.name)
            } else {
                "(none)".into()
            },
        )
        .set("node_config.machine_type", f.sku.name)
        .set("node_config.image_type", c.image.as_deref().unwrap_or(IMAGE_TYPES[0]))
        .set(
            "node_config.guest_accelerator",
            format!("{} x {}, gpu_driver_installation_config.gpu_driver_version = LATEST", f.sku.gpu_count, f.sku.gpu_model),
        )
        .set("node_config.gvnic.enabled", true)
        .set("node_config.reservation_affinity", reservation)
        .set("node_config.spot", c.capacity == CapacityType::Spot)
        .set("node_config.flex_start", c.capacity == CapacityType::FlexStart)
        .set_opt("node_config.service_account", spec.node_role.as_deref())
        .set("node_config.labels", tag_string(labels))
        .set("node_config.taints", if taints.is_empty() { "(none)".into() } else { taints.join(", ") })
        .set("node_config.resource_labels", &resource_labels)
        .set("management.auto_repair", c.day2.repair == crate::model::Repair::Replace)
        // A training pool's nodes change when the configuration says so, not when GKE picks a version.
        .set("management.auto_upgrade", false)
        .set(
            "upgrade_settings",
            format!(
                "SURGE, max_surge = 0, max_unavailable = {}",
                match c.day2.batch_size {
                    NodeAmount::Count(k) => k,
                    amount => amount.of(c.node_count),
                }
            ),
        );
    let mut out = vec![pool];
    if !networks.is_empty() {
        out.push(
            Piece::new("google_container_node_pool.network_config.additional_node_network_configs", format!("{n} gpu nics"))
                .count(networks.len() as u32)
                .set("networks", networks.iter().map(|(net, sub)| format!("{net}/{sub}")).collect::<Vec<_>>().join(", "))
                .set("requires", "networkConfig.enableMultiNetworking on the cluster (and ADVANCED_DATAPATH)"),
        );
    }
    out
}

pub fn kubernetes(spec: &NodePoolSpec) -> InCluster {
    let sku = spec.nodes.fabric.sku;
    let networks = additional_networks(spec);
    let mut y = String::new();
    let (device_mode, installer) = match sku.fabric {
        Fabric::Roce => ("RDMA", "gpudirect-rdma/nccl-rdma-installer.yaml"),
        Fabric::GpuDirectTcpxo => ("NetDevice", "gpudirect-tcpxo/nccl-tcpxo-installer.yaml"),
        Fabric::GpuDirectTcpx => ("NetDevice", "gpudirect-tcpx/nccl-tcpx-installer.yaml"),
        _ => ("", ""),
    };
    if networks.is_empty() {
        let _ = writeln!(y, "# {} has no GPU NICs besides nic0: no Network objects or NCCL plugin are needed.", sku.name);
    } else {
        let _ = writeln!(y, "# The GPU NICs' networks of {} as GKE objects; pods list them in their", sku.name);
        y.push_str("# networking.gke.io/interfaces annotation. Then Google's NCCL plugin installer DaemonSet:\n");
        let _ = writeln!(
            y,
            "#   kubectl apply -f https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/master/{installer}"
        );
        let prefix = if device_mode == "RDMA" { "rdma" } else { "gpu" };
        let mut devices = 0;
        for (network, subnet) in &networks {
            // A RoCE node's second gVNIC is on an ordinary L3 network; the GPU NICs are devices.
            let l3 = network.ends_with("-gvnic-1");
            let name = if l3 {
                "gvnic-1".to_owned()
            } else {
                devices += 1;
                format!("{prefix}-{}", devices - 1)
            };
            let _ = write!(
                y,
                "---\napiVersion: networking.gke.io/v1\nkind: GKENetworkParamSet\nmetadata:\n  name: {name}\nspec:\n  vpc: {network}\n  vpcSubnet: {subnet}\n"
            );
            if !l3 {
                let _ = writeln!(y, "  deviceMode: {device_mode}");
            }
            let _ = write!(
                y,
                "---\napiVersion: networking.gke.io/v1\nkind: Network\nmetadata:\n  name: {name}\nspec:\n  type: {}\n  parametersRef:\n    group: networking.gke.io\n    kind: GKENetworkParamSet\n    name: {name}\n",
                if l3 { "L3" } else { "Device" }
            );
        }
    }
    InCluster {
        topology_levels: [
            "cloud.google.com/gce-topology-block",
            "cloud.google.com/gce-topology-subblock",
            "cloud.google.com/gce-topology-host",
            "kubernetes.io/hostname",
        ]
        .map(str::to_owned)
        .to_vec(),
        labels: BTreeMap::new(),
        device_plugin: y,
        device_resources: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_name_their_location() {
        assert_eq!(cluster_location("projects/p/locations/us-central1/clusters/ml"), Some("us-central1"));
        assert_eq!(cluster_location("projects/p/zones/us-central1-a/clusters/ml"), None);
        assert_eq!(cluster_location("ml"), None);
    }
}
