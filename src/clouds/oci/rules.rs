//! OCI's validation rules (see `clouds/rules.rs`): a fabric lives in one availability domain of a
//! compartment; cluster networks are OCI's own placement, and compute clusters and cluster networks take
//! bare-metal RDMA shapes only; File Storage with Lustre links Object Storage.

use crate::catalog::{Cloud, Fabric, Sku};
use crate::clouds::rules::{Reported, Rules, missing_zone};
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

    /// GB200.4/GB300.4 share an NVLink domain only when launched by a GPU memory cluster on the rack's GPU
    /// memory fabric. This release does not make GPU memory clusters yet, and nodes launched one by one
    /// into the compute cluster would each be an NVLink island: refused before anything is made.
    fn cluster_capacity(
        &self,
        _capacity: CapacityType,
        sku: &Sku,
        _placement: Placement,
        _node_count: u32,
        diags: &mut Diagnostics,
    ) -> bool {
        if sku.nvlink_domain.is_none() {
            return true;
        }
        diags.error_at(
            AttributePath::attr("fabric"),
            "GPU memory clusters not supported yet",
            format!(
                "{} nodes join one NVLink domain only through an OCI GPU memory cluster on the rack's GPU memory fabric, which this \
                 release of the provider does not create yet; nodes launched one by one into the compute cluster would not share NVLink. \
                 On OCI use a node type without a rack-scale NVLink domain (BM.GPU.B200.8, BM.GPU.H200.8, ...), or build GB200/GB300 \
                 clusters on aws, azure or gcp.",
                sku.name
            ),
        );
        false
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
