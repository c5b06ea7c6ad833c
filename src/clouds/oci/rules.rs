//! OCI's validation rules (see `clouds/rules.rs`): a fabric lives in one availability domain of a
//! compartment; cluster networks are OCI's own placement, and compute clusters and cluster networks take
//! bare-metal RDMA shapes only; File Storage with Lustre links Object Storage.

use crate::catalog::{Cloud, Fabric, Sku};
use crate::clouds::rules::{Reported, Rules, missing_zone};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::Placement;

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
