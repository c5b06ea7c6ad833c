//! The AWS backend's shared parts: the type that implements every resource kind's backend (each kind's
//! `Backend` impl sits beside that kind, in `fabric`, `cluster` and `filesystem`) and what those share.

use crate::framework::Value;

/// The AWS backend of every resource kind.
pub struct Aws;

/// The region a cluster or filesystem lives in, from its fabric reference.
pub(super) fn fabric_region(v: &Value) -> &str {
    v.get("fabric").get("region").as_str().unwrap_or_default()
}
