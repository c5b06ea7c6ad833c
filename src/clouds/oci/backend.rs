//! The OCI backend's shared parts: the type that implements every resource kind's backend (each kind's
//! `Backend` impl sits beside that kind, in `fabric`, `cluster` and `filesystem`; each step connects to the
//! region's Core and Lustre endpoints) and what those share. A fabric's region and compartment are its own
//! settings; a cluster or filesystem finds them in its fabric's id (`oci/<region>/<compartment>/<name>`),
//! so their ids are known only once `apply` has read that.

use super::api;
use crate::clouds::backend::ImportError;
use crate::clouds::{CloudError, ErrorKind};
use crate::framework::{Context, Value};

/// The OCI backend of every resource kind.
pub struct Oci;

/// Any region: a client's configuration (API key, profile) does not depend on it, only its endpoints do.
const SOME_REGION: &str = "us-ashburn-1";

/// What a cluster or filesystem whose fabric has no OCI id says (and [`summary`] recognises).
const NO_FABRIC_ID: &str = "fabric has no OCI id (oci/<region>/<compartment>/<name>): apply the fabric first";

pub(super) fn no_fabric_id(what: &str) -> CloudError {
    CloudError::new(ErrorKind::InvalidRequest { field: Some("fabric".into()) }, None, format!("the {what}'s {NO_FABRIC_ID}"))
}

/// Whether the provider's `oci` block (or the config file profile it names) makes a client.
pub(super) fn configured(ctx: &Context) -> Result<(), CloudError> {
    api::connect(ctx, SOME_REGION).map(|_| ())
}

/// Authentication failures under their own summary; a fabric without an id as "Unknown fabric".
pub(super) fn summary(error: &CloudError) -> Option<&'static str> {
    match &error.kind {
        ErrorKind::Unauthenticated => Some("OCI authentication failed"),
        ErrorKind::InvalidRequest { field: Some(f) } if f == "fabric" => Some("Unknown fabric"),
        _ => None,
    }
}

/// `(region, compartment, name)` of an import id, or the id's right form with an example.
pub(super) fn import_id<'a>(id: &'a str, what: &str, example: &str) -> Result<(&'a str, &'a str, &'a str), ImportError> {
    api::parse_id(id).ok_or_else(|| {
        ImportError::BadId(format!(
            "{id:?} is not an OCI {what} id: give \"oci/<region>/<compartment OCID>/<{what} name>\", e.g. \
             \"oci/us-ashburn-1/ocid1.compartment.oc1..aaaa/{example}\"."
        ))
    })
}

pub(super) fn name_of(v: &Value) -> &str {
    v.get("name").as_str().unwrap_or_default()
}

/// Region and compartment of the fabric a cluster or filesystem is on, from the fabric's id.
pub(super) fn fabric_place(v: &Value) -> Option<(String, String)> {
    api::parse_id(v.get("fabric").get("id").as_str()?).map(|(r, c, _)| (r.to_owned(), c.to_owned()))
}

/// The region of a cluster's or filesystem's fabric for messages: from its id, else as the reference says.
pub(super) fn fabric_region(v: &Value) -> String {
    fabric_place(v).map_or_else(|| v.get("fabric").get("region").as_str().unwrap_or_default().to_owned(), |(r, _)| r)
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use std::collections::BTreeMap;

    use super::*;
    use crate::catalog::Cloud;
    use crate::clouds::backend::Backend;
    use crate::model::{ClusterSpec, FabricSpec, FilesystemSpec, Network, Placement};

    pub(crate) const COMPARTMENT: &str = "ocid1.compartment.oc1..lib";

    /// A state or configuration written as JSON.
    pub(crate) fn value(j: serde_json::Value) -> Value {
        match j {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::from(b),
            serde_json::Value::Number(n) => Value::int(n.as_i64().unwrap()),
            serde_json::Value::String(s) => Value::from(s),
            serde_json::Value::Array(items) => Value::list(items.into_iter().map(value)),
            serde_json::Value::Object(m) => Value::object(m.into_iter().map(|(k, v)| (k, value(v)))),
        }
    }

    pub(crate) fn on_fabric(fabric: serde_json::Value) -> Value {
        value(json!({"name": "lib", "fabric": fabric}))
    }

    pub(crate) fn fabric_ref(placement: Option<&str>) -> serde_json::Value {
        json!({"id": format!("oci/us-ashburn-1/{COMPARTMENT}/lib"), "region": "us-ashburn-1", "zone": "Uocm:US-ASHBURN-AD-2",
               "placement": placement})
    }

    #[test]
    fn messages_place_a_cluster_in_its_region_and_availability_domain() {
        let cluster: &dyn Backend<ClusterSpec> = &Oci;
        let fs: &dyn Backend<FilesystemSpec> = &Oci;
        let v = on_fabric(fabric_ref(None));
        assert_eq!(cluster.place(&v), "in us-ashburn-1 (Uocm:US-ASHBURN-AD-2)");
        assert_eq!(fs.place(&v), "in us-ashburn-1");
        assert_eq!(cluster.place(&on_fabric(json!({"id": null, "region": "us-phoenix-1"}))), "in us-phoenix-1");
    }

    #[test]
    fn authentication_failures_and_missing_fabric_ids_have_their_own_summaries() {
        let auth = CloudError::new(ErrorKind::Unauthenticated, Some("NotAuthenticated".into()), "no");
        assert_eq!(summary(&auth), Some("OCI authentication failed"));
        assert_eq!(summary(&no_fabric_id("cluster")), Some("Unknown fabric"));
        let limit = api::error(400, &serde_json::json!({"code": "LimitExceeded", "message": "too many"}), "creating VCN lib-vpc");
        assert_eq!(summary(&limit), None);
        // The words alone decide nothing.
        assert_eq!(summary(&CloudError::other(format!("{}: {NO_FABRIC_ID}", api::AUTH_FAILED))), None);
    }

    #[test]
    fn import_ids_need_a_compartment_ocid() {
        assert_eq!(
            import_id(&format!("oci/us-ashburn-1/{COMPARTMENT}/train"), "cluster", "train").ok(),
            Some(("us-ashburn-1", COMPARTMENT, "train"))
        );
        let Err(ImportError::BadId(text)) = import_id("oci/us-ashburn-1/train", "filesystem", "scratch") else { panic!("accepted") };
        assert_eq!(
            text,
            "\"oci/us-ashburn-1/train\" is not an OCI filesystem id: give \"oci/<region>/<compartment OCID>/<filesystem name>\", \
             e.g. \"oci/us-ashburn-1/ocid1.compartment.oc1..aaaa/scratch\"."
        );
    }

    #[test]
    fn fabric_ids_match_what_clusters_reference() {
        let fabric: &dyn Backend<FabricSpec> = &Oci;
        let spec = FabricSpec {
            name: "lib".into(),
            cloud: Cloud::Oci,
            region: "us-ashburn-1".into(),
            zone: Some("Uocm:US-ASHBURN-AD-2".into()),
            sku: crate::catalog::find_sku(Cloud::Oci, "BM.GPU.H100.8").unwrap(),
            network: Network::Create { cidr: "10.0.0.0/16".into() },
            placement: Placement::Cluster,
            max_distance: None,
            resource_group: None,
            compartment_id: Some(COMPARTMENT.into()),
            tags: BTreeMap::new(),
        };
        let id = fabric.id(&spec).unwrap();
        assert_eq!(id, format!("oci/us-ashburn-1/{COMPARTMENT}/lib"));
        assert_eq!(fabric_place(&on_fabric(json!({"id": id}))), Some(("us-ashburn-1".into(), COMPARTMENT.into())));
    }
}
