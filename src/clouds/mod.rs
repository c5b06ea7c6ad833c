//! The clouds: one directory per cloud (its expander in `mod.rs`, its rules, its backend, its API client and
//! the observe/converge/delete of each resource kind) and the neutral files every cloud shares: the backend
//! interface and its selectors (`backend.rs`), the shared helpers (`shared.rs`) and the rate limiter
//! (`throttle.rs`). Expanders name pieces in the official providers' vocabulary (`aws_placement_group`, ...);
//! pieces other pieces refer to are written as `<kind>.<name>`, so the plan shows the wiring without
//! cloud-assigned ids. See ARCHITECTURE.md.

pub mod aws;
pub mod azure;
pub mod backend;
pub mod error;
pub mod gcp;
pub mod kubernetes;
pub mod oci;
pub mod quota;
pub mod retry;
pub mod rules;
pub mod shared;
pub mod slurm;
pub mod throttle;
pub mod user_data;

use std::collections::BTreeMap;

use crate::catalog::{Cloud, Sku};
use crate::model::{ClusterSpec, Defaults, FabricSpec, FilesystemSpec, Network, Piece};

pub use error::{CloudError, ErrorKind};
pub use shared::NodeAddress;

/// What a cloud's expander gives the planner: pure functions from a neutral spec to the cloud's pieces,
/// the node environment, and what to check when a cluster's all-reduce falls short.
pub trait Expander: Sync {
    fn fabric(&self, spec: &FabricSpec, defaults: &Defaults) -> Vec<Piece>;
    fn cluster(&self, spec: &ClusterSpec, defaults: &Defaults) -> Vec<Piece>;
    /// The groups of nodes the cloud places together (a placement group, a compact policy, a scale set, a
    /// compute cluster or cluster network), by name, with their node indices: each a leaf switch of a Slurm
    /// tree. Empty when nothing places the nodes together.
    fn placement_groups(&self, spec: &ClusterSpec) -> Vec<(String, Vec<u32>)>;
    /// A Slurm cluster's pieces (its subnet, controllers and login nodes), from its plan.
    fn slurm(&self, spec: &crate::model::SlurmSpec, plan: &crate::model::SlurmPlan, defaults: &Defaults) -> Vec<Piece>;
    /// Whether a Slurm cluster's configuration fits where the cloud carries it to the hosts; when not, an
    /// error at the attribute to change. Everywhere but AWS a metadata entry holds it whole.
    fn slurm_fits(
        &self,
        _spec: &crate::model::SlurmSpec,
        _config: &slurm::SlurmConfig,
        _defaults: &Defaults,
        _diags: &mut crate::framework::Diagnostics,
    ) -> bool {
        true
    }
    /// NCCL/libfabric settings jobs on the nodes need.
    fn node_environment(&self, sku: &Sku) -> BTreeMap<String, String>;
    fn filesystem(&self, spec: &FilesystemSpec, defaults: &Defaults) -> Vec<Piece>;
    /// What to check when the bus bandwidth points at placement or drivers.
    fn placement_advice(&self) -> &'static str;
    /// What to check when the bus bandwidth says the RDMA fabric is not in use.
    fn fabric_advice(&self) -> &'static str;
    /// A Kubernetes GPU node pool's pieces: the cloud's pool (node group, node pool, agent pool, or
    /// self-managed workers) with the node type's NICs and the fabric's placement; `labels` are every node's.
    fn node_pool(&self, spec: &crate::model::NodePoolSpec, defaults: &Defaults, labels: &BTreeMap<String, String>) -> Vec<Piece>;
    /// The cloud's own refusals of a pool (with the attribute and the fix); false after an error.
    fn node_pool_fits(&self, spec: &crate::model::NodePoolSpec, diags: &mut crate::framework::Diagnostics) -> bool;
    /// The in-cluster half of a pool: the topology labels, the RDMA device plugin or operator, the devices
    /// pods request.
    fn kubernetes(&self, spec: &crate::model::NodePoolSpec) -> kubernetes::InCluster;
}

/// Whether the cloud's import ids name a compartment between the location and the name
/// (`oci/<region>/<compartment OCID>/<name>`; elsewhere `<cloud>/<location>/<name>`).
pub fn id_has_compartment(cloud: Cloud) -> bool {
    match cloud {
        Cloud::Oci => true,
        Cloud::Aws | Cloud::Azure | Cloud::Gcp => false,
    }
}

/// The expander of `cloud`.
pub fn expander(cloud: Cloud) -> &'static dyn Expander {
    match cloud {
        Cloud::Aws => &aws::Expansion,
        Cloud::Azure => &azure::Expansion,
        Cloud::Gcp => &gcp::Expansion,
        Cloud::Oci => &oci::Expansion,
    }
}

/// Splits a network's CIDR into the subnet the fabric creates: the first block four bits longer
/// (at most /24), e.g. 10.0.0.0/16 -> 10.0.0.0/20.
pub fn first_subnet(cidr: &str) -> String {
    let (addr, prefix) = cidr.split_once('/').unwrap_or((cidr, "16"));
    let prefix: u8 = prefix.parse().unwrap_or(16);
    format!("{addr}/{}", (prefix + 4).min(24).max(prefix))
}

/// The tags of the piece that records a fabric's configuration for imports (Azure and OCI: its security
/// group): the given tags plus node type, placement, GPU, zone, and the created CIDR or the joined network
/// under `network_keys` (the VNet/VCN key, the subnet key).
pub fn recorded_config(
    spec: &crate::model::FabricSpec,
    gpu: Option<&str>,
    tags: &std::collections::BTreeMap<String, String>,
    network_keys: (&str, &str),
) -> std::collections::BTreeMap<String, String> {
    let mut t = tags.clone();
    t.insert("hpc:instance-type".into(), spec.sku.name.into());
    t.insert("hpc:placement".into(), spec.placement.as_str().into());
    if let Some(g) = gpu {
        t.insert("hpc:gpu".into(), g.into());
    }
    if let Some(z) = &spec.zone {
        t.insert("hpc:zone".into(), z.clone());
    }
    match &spec.network {
        Network::Create { cidr } => {
            t.insert("hpc:cidr".into(), cidr.clone());
        }
        Network::Existing { vpc_id, subnet_id } => {
            t.insert(network_keys.0.into(), vpc_id.clone());
            t.insert(network_keys.1.into(), subnet_id.clone());
        }
    }
    t
}

/// The configuration an import reads back from the tags [`recorded_config`] wrote (`network_keys` as
/// there), for the fabric `name` in `region` on `cloud`, with the cloud's own location attributes in
/// `location` (resource group, compartment).
pub fn config_from_record(
    cloud: crate::catalog::Cloud,
    name: &str,
    region: &str,
    tags: &BTreeMap<String, String>,
    network_keys: (&str, &str),
    location: &[(&str, crate::framework::Value)],
    defaults: &BTreeMap<String, String>,
) -> Result<crate::framework::Value, String> {
    use crate::framework::Value;
    let get = |k: &str| tags.get(k).map_or(Value::Null, |v| Value::from(v.as_str()));
    let instance_type = tags.get("hpc:instance-type").ok_or_else(|| format!("security group {name}-nsg has no hpc:instance-type tag"))?;
    let mut config = BTreeMap::from([
        ("name".to_owned(), Value::from(name)),
        ("cloud".to_owned(), Value::from(cloud.as_str())),
        ("region".to_owned(), Value::from(region)),
        ("zone".to_owned(), get("hpc:zone")),
        ("gpu".to_owned(), get("hpc:gpu")),
        ("instance_type".to_owned(), Value::from(instance_type.as_str())),
        ("vpc_id".to_owned(), get(network_keys.0)),
        ("subnet_id".to_owned(), get(network_keys.1)),
        ("cidr_block".to_owned(), get("hpc:cidr")),
        ("placement".to_owned(), get("hpc:placement")),
        ("tags".to_owned(), shared::imported_tags(cloud, tags, defaults)),
    ]);
    config.extend(location.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    Ok(Value::Map(config))
}

/// The reference for the fabric's network as a downstream piece sees it.
pub fn network_refs(network: &Network, vpc_kind: &str, subnet_kind: &str, fabric: &str) -> (String, String) {
    match network {
        Network::Existing { vpc_id, subnet_id } => (vpc_id.clone(), subnet_id.clone()),
        Network::Create { .. } => (format!("{vpc_kind}.{fabric}-vpc"), format!("{subnet_kind}.{fabric}-subnet")),
    }
}

/// `name-0 .. name-(n-1)`, for settings that list numbered networks or subnetworks compactly (node names
/// are [`crate::nodes`]'s).
pub fn name_range(name: &str, n: u32) -> String {
    match n {
        0 => String::from("(none)"),
        1 => format!("{name}-0"),
        _ => format!("{name}-0 .. {name}-{}", n - 1),
    }
}

/// A node environment from literal pairs.
pub fn env(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// What a piece gets for an image when the user does not pin one.
pub const DEFAULT_IMAGE: &str = "(cloud default GPU image; set image to pin one)";

#[cfg(test)]
mod tests {
    #[test]
    fn subnets() {
        assert_eq!(super::first_subnet("10.0.0.0/16"), "10.0.0.0/20");
        assert_eq!(super::first_subnet("10.1.2.0/24"), "10.1.2.0/24");
        assert_eq!(super::name_range("n", 3), "n-0 .. n-2");
    }
}
