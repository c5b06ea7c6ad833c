//! OCI's validation rules (see `clouds/rules.rs`): a fabric lives in one availability domain of a
//! compartment; cluster networks are OCI's own placement, and compute clusters and cluster networks take
//! bare-metal RDMA shapes only; GB200/GB300 (GPU memory clusters) take a compute cluster only; File Storage
//! with Lustre links Object Storage.

use crate::catalog::{Cloud, Fabric, Sku};
use crate::clouds::rules::{Reported, Rules, listed, missing_zone};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Placement};

pub struct Oci;

impl Rules for Oci {
    fn cloud(&self) -> Cloud {
        Cloud::Oci
    }

    fn fabric_zone(&self, _region: &str, zone: Option<&str>, diags: &mut Diagnostics) -> bool {
        zone.is_some()
            || missing_zone(
                self.cloud(),
                "an availability domain such as \"Uocm:US-ASHBURN-AD-1\": cluster networks and Lustre are per AD",
                diags,
            )
    }

    fn placement(&self, placement: Placement, sku: Option<&Sku>, diags: &mut Diagnostics) -> Result<bool, Reported> {
        if placement != Placement::Cluster
            && let Some(s) = sku.filter(|s| s.nvlink_domain.is_some())
        {
            diags.error_at(AttributePath::attr("placement"), "Placement not offered", memory_clusters_need(s, placement));
            return Ok(false);
        }
        if placement != Placement::None
            && let Some(s) = sku.filter(|s| s.fabric == Fabric::None)
        {
            diags.error_at(
                AttributePath::attr("placement"),
                "Placement not offered",
                format!(
                    "{} has no RDMA network, and OCI compute clusters and cluster networks take bare-metal RDMA shapes only. Use placement = \"none\".",
                    s.name
                ),
            );
            return Ok(false);
        }
        Ok(true)
    }

    fn compartment_id(&self, compartment_id: Option<&str>, diags: &mut Diagnostics) -> bool {
        if compartment_id.is_some() {
            return true;
        }
        diags.error_at(
            AttributePath::attr("compartment_id"),
            "Missing compartment",
            "On OCI the fabric needs compartment_id, the OCID of the compartment to build in (ocid1.compartment... or the tenancy OCID).",
        );
        false
    }

    /// GB200.4/GB300.4 nodes share an NVLink domain only when a GPU memory cluster launches them, and a
    /// GPU memory cluster is built over a compute cluster: the fabric a cluster of these shapes is on must
    /// have placement "cluster" (an imported or older fabric may say otherwise).
    fn cluster_capacity(
        &self,
        _capacity: CapacityType,
        sku: &Sku,
        placement: Placement,
        _node_count: u32,
        diags: &mut Diagnostics,
    ) -> bool {
        if sku.nvlink_domain.is_none() || placement == Placement::Cluster {
            return true;
        }
        diags.error_at(AttributePath::attr("fabric"), "GPU memory clusters need a compute cluster", memory_clusters_need(sku, placement));
        false
    }

    fn node_identity_form(&self) -> Option<&'static str> {
        Some(
            "the OCID of the dynamic group the nodes belong to (ocid1.dynamicgroup.oc1..<id>), whose policy lets its instance \
             principals update their own instance (e.g. \"Allow dynamic-group <name> to use instances in compartment <name>\"); \
             the nodes authenticate as instance principals",
        )
    }

    fn node_identity_ok(&self, identity: &str) -> bool {
        identity.starts_with("ocid1.dynamicgroup.") && identity.len() <= 255 && !identity.contains(char::is_whitespace)
    }

    /// ListInstances reads every instance of the compartment in the availability domain, the cluster's
    /// among them: what else runs there counts too, which a plan cannot know (the refresh then says so).
    fn most_nodes_listed(&self) -> Option<(u32, String)> {
        Some(listed("the availability domain's instances", "ListInstances", super::api::LIST_PAGE))
    }

    fn reservation_target(&self) -> &'static str {
        "the capacity reservation OCID"
    }

    fn data_repository_ok(&self, repo: &str) -> bool {
        super::filesystem::object_storage_prefix(repo).is_some()
    }

    fn data_repository_form(&self) -> &'static str {
        "oci://bucket@namespace/prefix"
    }
}

/// Why a GB200/GB300 shape needs placement "cluster".
fn memory_clusters_need(sku: &Sku, placement: Placement) -> String {
    format!(
        "{} nodes share their NVL72 rack's NVLink domain only when an OCI GPU memory cluster launches them, and GPU memory \
         clusters are built over a compute cluster: the fabric needs placement = \"cluster\", not {:?}.",
        sku.name,
        placement.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gb200_and_gb300_take_a_compute_cluster_only() {
        for shape in ["BM.GPU.GB200.4", "BM.GPU.GB300.4"] {
            let sku = crate::catalog::find_sku(Cloud::Oci, shape).unwrap();
            for placement in [Placement::ClusterNetwork, Placement::None] {
                let mut diags = Diagnostics::new();
                assert_eq!(Oci.placement(placement, Some(sku), &mut diags).ok(), Some(false), "{shape} {placement:?}");
                let mut cluster = Diagnostics::new();
                assert!(!Oci.cluster_capacity(CapacityType::OnDemand, sku, placement, 36, &mut cluster), "{shape} {placement:?}");
                let text = format!("{diags:?} {cluster:?}");
                assert!(text.contains("placement = \\\"cluster\\\"") && text.contains("GPU memory cluster"), "{text}");
            }
            let mut diags = Diagnostics::new();
            assert_eq!(Oci.placement(Placement::Cluster, Some(sku), &mut diags).ok(), Some(true));
            assert!(Oci.cluster_capacity(CapacityType::OnDemand, sku, Placement::Cluster, 36, &mut diags));
            assert!(!diags.has_errors(), "{diags:?}");
        }
    }
}
