//! The Google Cloud backend's shared parts: the type that implements every resource kind's backend (each
//! kind's `Backend` impl sits beside that kind, in `fabric`, `cluster` and `filesystem`; each step takes
//! the project's clients, `api::connect`, built once per configuration) and what those share. Ids are
//! `gcp/<zone>/<name>`; node and filesystem labels are the step's tags with `:` made `_` (`api::labels`).

use super::api;
use crate::clouds::CloudError;
use crate::framework::{Context, Value};

/// The Google Cloud backend of every resource kind.
pub struct Gcp;

/// `us-central1-a` -> `us-central1`.
pub fn region_of(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(region, _)| region)
}

pub(super) async fn configured(ctx: &Context) -> Result<(), CloudError> {
    api::connect(ctx).await.map(|_| ())
}

/// `in us-central1-a`: the zone of a fabric (`zone`) or of what lives on one (`fabric.zone`).
pub(super) fn in_zone(zone: &Value) -> String {
    format!("in {}", zone.as_str().unwrap_or_default())
}

/// A cluster's zone and name, from a state.
pub(super) fn zone_and_name(v: &Value) -> (&str, &str) {
    (v.get("fabric").get("zone").as_str().unwrap_or_default(), v.get("name").as_str().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Cloud;
    use crate::clouds::backend::Backend;
    use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec, Network};

    #[test]
    fn a_zone_is_in_the_region_before_its_last_dash() {
        assert_eq!(region_of("us-central1-a"), "us-central1");
        assert_eq!(region_of("europe-west4-b"), "europe-west4");
        assert_eq!(region_of("nodash"), "nodash");
    }

    #[test]
    fn fabric_and_cluster_ids_name_the_zone() {
        let sku = crate::catalog::find_sku(Cloud::Gcp, "a3-highgpu-8g").unwrap();
        let spec = FabricSpec {
            name: "train".into(),
            cloud: Cloud::Gcp,
            region: "us-central1".into(),
            zone: Some("us-central1-a".into()),
            sku,
            network: Network::Create { cidr: "10.0.0.0/16".into() },
            placement: crate::model::Placement::Cluster,
            max_distance: None,
            resource_group: None,
            compartment_id: None,
            tags: Default::default(),
        };
        assert_eq!(Backend::<FabricSpec>::id(&Gcp, &spec).as_deref(), Some("gcp/us-central1-a/train"));
        let state =
            Value::object([("zone", Value::from("us-central1-a")), ("fabric", Value::object([("zone", Value::from("us-central1-b"))]))]);
        assert_eq!(Backend::<FabricSpec>::place(&Gcp, &state), "in us-central1-a");
        assert_eq!(Backend::<ClusterSpec>::place(&Gcp, &state), "in us-central1-b");
        assert_eq!(Backend::<FilesystemSpec>::place(&Gcp, &state), "in us-central1-b");
    }
}
