//! The Azure backend's shared parts: the type that implements every resource kind's backend (each kind's
//! `Backend` impl sits beside that kind, in `fabric`, `cluster` and `filesystem`; each step takes the ARM
//! client of the provider's `azure` block) and what those share. A fabric lives in its resource group
//! (`azure/<group>/<name>`); a cluster or filesystem in its fabric's, which only the fabric's id names, so
//! their ids are made in `apply` from the planned `fabric.id`.

use super::api::{self, Arm};
use super::cluster;
use crate::clouds::{CloudError, ErrorKind};
use crate::framework::{Context, Value};

/// The Azure backend of every resource kind.
pub struct Azure;

/// What a cluster or filesystem whose fabric has no Azure id says; [`UNKNOWN_FABRIC_SUMMARY`] is its summary.
pub(super) const UNKNOWN_FABRIC: &str = "its fabric has no Azure id (azure/<resource group>/<name>): apply the fabric first";
const UNKNOWN_FABRIC_SUMMARY: &str = "Unknown fabric";

/// [`UNKNOWN_FABRIC`] as an error: an invalid `fabric`.
pub(super) fn unknown_fabric() -> CloudError {
    CloudError::new(ErrorKind::InvalidRequest { field: Some("fabric".into()) }, None, UNKNOWN_FABRIC)
}

pub(super) fn unknown_fabric_summary(error: &CloudError) -> Option<&'static str> {
    matches!(&error.kind, ErrorKind::InvalidRequest { field: Some(f) } if f == "fabric").then_some(UNKNOWN_FABRIC_SUMMARY)
}

/// The resource group of the fabric a cluster or filesystem state (or plan) names.
pub(super) fn group_of(v: &Value) -> Option<String> {
    v.get("fabric").get("id").as_str().and_then(cluster::group_of_fabric)
}

/// `in <resource group>` for a cluster or filesystem, as their messages always said.
pub(super) fn group_place(v: &Value) -> String {
    group_of(v).map_or_else(|| "on Azure".to_owned(), |g| format!("in {g}"))
}

pub(super) async fn arm(ctx: &Context) -> Result<Arm, CloudError> {
    api::connect(ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_of_a_fabric_comes_from_its_azure_id() {
        assert_eq!(cluster::group_of_fabric("azure/ml-rg/train"), Some("ml-rg".to_owned()));
        assert_eq!(cluster::group_of_fabric("aws/us-east-1/train"), None);
        assert_eq!(cluster::group_of_fabric("azure/train"), None);
        assert_eq!(cluster::group_of_fabric("azure//train"), None);
        let state = Value::object([("fabric", Value::object([("id", Value::from("azure/ml-rg/train"))]))]);
        assert_eq!(group_place(&state), "in ml-rg");
        assert_eq!(group_place(&Value::object([("fabric", Value::object([("id", Value::Null)]))])), "on Azure");
    }

    #[test]
    fn an_unknown_fabric_keeps_its_own_summary() {
        assert_eq!(unknown_fabric_summary(&unknown_fabric()), Some("Unknown fabric"));
        // The decision is the kind's: the same words from the cloud are not an unknown fabric.
        assert_eq!(unknown_fabric_summary(&CloudError::other(UNKNOWN_FABRIC)), None);
        let short = crate::clouds::azure::api::error(409, None, &serde_json::json!({"code": "AllocationFailed"}), "no capacity");
        assert_eq!(unknown_fabric_summary(&short), None);
    }
}
