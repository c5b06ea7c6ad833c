//! The per-cloud validation rules. The neutral spec parser (`planner/spec.rs`) parses and checks what every
//! cloud shares and calls these hooks where a rule depends on the cloud; each cloud implements them in
//! `clouds/<cloud>/rules.rs`, and [`rules`] finds a cloud's. A hook reports at the attribute it is about and
//! returns whether the value passed. Where a hook has a default, the default is the rule for the clouds
//! that lack the feature (the attribute is refused), so a cloud overrides only what it offers.

use std::collections::BTreeMap;

use crate::catalog::{Cloud, Sku};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Placement};

/// The most items a list of `per_page` items a page reads, and how it reads them, for
/// [`Rules::most_nodes_listed`]: "<what> with <call>, <n> a page for at most <pages> pages".
pub fn listed(what: &str, call: &str, per_page: usize) -> (u32, String) {
    let most = u32::try_from(crate::clouds::shared::Pages::most_items(per_page)).unwrap_or(u32::MAX);
    (most, format!("{what} with {call}, {per_page} a page for at most {} pages", crate::clouds::shared::Pages::MOST + 1))
}

/// A hook refused a value and reported why; the parser cannot go on with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported;

/// What a cloud adds to the neutral checks, in the order the parser calls the hooks.
pub trait Rules: Sync {
    fn cloud(&self) -> Cloud;

    // -------------------------------------------------------------------------------------- fabric

    /// The fabric's `zone` (none when not set) in `region`.
    fn fabric_zone(&self, region: &str, zone: Option<&str>, diags: &mut Diagnostics) -> bool {
        let _ = (region, zone, diags);
        true
    }

    /// A valid `placement` for the fabric's node type (`sku`, none when it did not resolve). `Err` stops
    /// the fabric there (the placement does not exist on this cloud); `Ok(false)` refuses it and goes on.
    fn placement(&self, placement: Placement, sku: Option<&Sku>, diags: &mut Diagnostics) -> Result<bool, Reported> {
        let _ = sku;
        if placement == Placement::ClusterNetwork {
            diags.error_at(
                AttributePath::attr("placement"),
                "Placement not offered",
                format!("\"cluster-network\" is OCI's RDMA placement. On {} use \"cluster\" or \"none\".", self.cloud()),
            );
            return Err(Reported);
        }
        Ok(true)
    }

    /// A `max_distance` that is set.
    fn max_distance(&self, distance: i64, placement: Placement, sku: Option<&Sku>, diags: &mut Diagnostics) -> bool {
        let _ = (distance, placement, sku);
        not_valid_here("max_distance", MAX_DISTANCE_GCP_COMPACT_ONLY, diags)
    }

    /// A `resource_group` that is set.
    fn resource_group(&self, diags: &mut Diagnostics) -> bool {
        not_valid_here("resource_group", "resource_group is an Azure setting; remove it or set cloud = \"azure\".", diags)
    }

    /// The fabric's `compartment_id` (none when not set).
    fn compartment_id(&self, compartment_id: Option<&str>, diags: &mut Diagnostics) -> bool {
        compartment_id.is_none()
            || not_valid_here("compartment_id", "compartment_id is an OCI setting; remove it or set cloud = \"oci\".", diags)
    }

    // ------------------------------------------------------------------------------ every resource

    /// The resource's own `tags`, as the cloud will carry them.
    fn tags(&self, tags: &BTreeMap<String, String>, diags: &mut Diagnostics) -> bool {
        let _ = (tags, diags);
        true
    }

    /// The provider's `default_tags`, which go on every piece on this cloud too (no attribute path: they
    /// are set in the provider block).
    fn default_tags(&self, tags: &BTreeMap<String, String>, diags: &mut Diagnostics) {
        let _ = (tags, diags);
    }

    // ------------------------------------------------------------------------------------- cluster

    /// The cluster's nodes: their type, `image` and `ssh_public_key` (none when not set).
    fn cluster_nodes(&self, sku: &Sku, image: Option<&str>, ssh_public_key: Option<&str>, diags: &mut Diagnostics) -> bool {
        let _ = (sku, image, ssh_public_key, diags);
        true
    }

    /// What `node_identity` names on this cloud (for a diagnostic: "set node_identity to ..."), or `None`
    /// where the nodes need none to publish their self-check.
    fn node_identity_form(&self) -> Option<&'static str>;

    /// Whether `identity` has this cloud's form of a node identity.
    fn node_identity_ok(&self, identity: &str) -> bool {
        let _ = identity;
        true
    }

    /// The cluster's `node_identity` (none when not set): of this cloud's form, and present where the nodes
    /// need one to publish their self-check and `update_strategy.wait_for_selfcheck` waits for it.
    fn node_identity(&self, identity: Option<&str>, wait_for_selfcheck: bool, diags: &mut Diagnostics) -> bool {
        let cloud = self.cloud();
        match (self.node_identity_form(), identity) {
            (None, Some(_)) => not_valid_here(
                "node_identity",
                &format!(
                    "On {cloud} the nodes publish their self-check without an identity of their own (through the scale set's Application \
                     Health extension probe): remove node_identity."
                ),
                diags,
            ),
            (Some(form), Some(id)) if !self.node_identity_ok(id) => {
                diags.error_at(
                    AttributePath::attr("node_identity"),
                    "Invalid node identity",
                    format!("{id:?} is not a node identity on {cloud}: set node_identity to {form}."),
                );
                false
            }
            (Some(form), None) if wait_for_selfcheck => {
                diags.error_at(
                    AttributePath::attr("node_identity"),
                    "Missing node identity",
                    format!(
                        "update_strategy.wait_for_selfcheck waits for each batch's nodes to publish their self-check verdict, which a \
                         node on {cloud} can publish only with an identity allowed to do so: without one the rolling update would wait \
                         until its timeout. Set node_identity to {form}, or set wait_for_selfcheck = false."
                    ),
                );
                false
            }
            _ => true,
        }
    }

    /// The most nodes a cluster's refresh can list on this cloud, and the listing that holds it there
    /// (completing "...: the refresh reads ..."); `None` where no list the refresh reads grows past what it
    /// follows ([`crate::clouds::shared::Pages`]) with the cluster.
    fn most_nodes_listed(&self) -> Option<(u32, String)>;

    /// `node_count` within what a refresh can list ([`Rules::most_nodes_listed`]): a larger cluster could be
    /// made and never refreshed, updated or destroyed by the provider.
    fn nodes_listed(&self, node_count: u32, diags: &mut Diagnostics) -> bool {
        let Some((most, listing)) = self.most_nodes_listed().filter(|(most, _)| node_count > *most) else { return true };
        diags.error_at(
            AttributePath::attr("node_count"),
            "Too many nodes to refresh",
            format!(
                "On {} a cluster can have at most {most} nodes: the refresh reads {listing}, so it could not read a cluster of \
                 {node_count} nodes back (nor update or destroy it). Split the nodes into clusters of at most {most} on the same fabric.",
                self.cloud()
            ),
        );
        false
    }

    /// What `reservation_id` names on this cloud, completing "set reservation_id to ...".
    fn reservation_target(&self) -> &'static str;

    /// A `reservation_id` that is set, with the capacity type it goes with.
    fn reservation_id(&self, capacity: CapacityType, sku: &Sku, id: &str, diags: &mut Diagnostics) -> bool {
        let _ = (capacity, sku, id, diags);
        true
    }

    /// The capacity the cluster launches into, with the fabric's placement, checked once the capacity
    /// type is known to be offered and the reservation settled.
    fn cluster_capacity(&self, capacity: CapacityType, sku: &Sku, placement: Placement, node_count: u32, diags: &mut Diagnostics) -> bool {
        let _ = (capacity, sku, placement, node_count, diags);
        true
    }

    // ---------------------------------------------------------------------------------- filesystem

    /// The `filesystem_name` as configured (none when not set; it already passed the neutral Lustre rule
    /// or was reported against it).
    fn filesystem_name(&self, given: Option<&str>, diags: &mut Diagnostics) -> bool {
        let _ = (given, diags);
        true
    }

    /// A `metadata_iops` that is set.
    fn metadata_iops(&self, iops: u64, diags: &mut Diagnostics) -> bool {
        let _ = iops;
        not_valid_here("metadata_iops", "metadata_iops provisions FSx for Lustre metadata performance; it only applies on aws.", diags)
    }

    /// Whether `repo` is an object store location this cloud's managed Lustre can link to.
    fn data_repository_ok(&self, repo: &str) -> bool;

    /// The form of a data repository location on this cloud, for the diagnostic.
    fn data_repository_form(&self) -> &'static str;

    /// The filesystem's weekly maintenance window from `maintenance_window` (none when not set), as (day,
    /// "HH:MM" UTC) where the cloud has one. `Err` when refused (reported).
    fn maintenance_window(&self, window: Option<&str>, diags: &mut Diagnostics) -> Result<Option<(String, String)>, Reported> {
        match window {
            Some(_) => {
                not_valid_here(
                    "maintenance_window",
                    "maintenance_window is required by Azure Managed Lustre only; remove it on other clouds.",
                    diags,
                );
                Err(Reported)
            }
            None => Ok(None),
        }
    }
}

/// The rules of `cloud`.
pub fn rules(cloud: Cloud) -> &'static dyn Rules {
    match cloud {
        Cloud::Aws => &super::aws::rules::Aws,
        Cloud::Azure => &super::azure::rules::Azure,
        Cloud::Gcp => &super::gcp::rules::Gcp,
        Cloud::Oci => &super::oci::rules::Oci,
    }
}

// ---------------------------------------------------------------------------- shared by the clouds

/// Refuses `attr`, an attribute that does not apply here; always false.
pub fn not_valid_here(attr: &str, detail: &str, diags: &mut Diagnostics) -> bool {
    diags.error_at(AttributePath::attr(attr), "Attribute not valid here", detail);
    false
}

/// Why `max_distance` is refused outside Google Cloud's compact placement.
pub const MAX_DISTANCE_GCP_COMPACT_ONLY: &str =
    "max_distance tunes Google Cloud's compact placement policy; it only applies with cloud = \"gcp\" and placement = \"cluster\".";

/// A fabric on `cloud` needs a zone; `what` says which and why.
pub fn missing_zone(cloud: Cloud, what: &str, diags: &mut Diagnostics) -> bool {
    diags.error_at(AttributePath::attr("zone"), "Missing zone", format!("On {cloud} the fabric needs {what}."));
    false
}

/// Zones named after their region, as each cloud names them: AWS a letter after the region (`us-east-1a`),
/// Google Cloud a hyphen and a letter (`us-central1-a`). A zone that is not so is refused, with the names the
/// region's zones have on that cloud.
pub fn zone_in_region(cloud: Cloud, region: &str, zone: &str, diags: &mut Diagnostics) -> bool {
    let sep = if cloud == Cloud::Gcp { "-" } else { "" };
    let letter = |rest: &str| rest.len() == 1 && rest.chars().all(|c| c.is_ascii_lowercase());
    let named = zone.strip_prefix(region).is_some_and(|rest| match cloud {
        Cloud::Gcp => rest.strip_prefix('-').is_some_and(letter),
        // An Availability Zone, or a Local or Wavelength Zone of the region (`us-west-2-lax-1a`).
        Cloud::Aws | Cloud::Azure | Cloud::Oci => letter(rest) || (rest.len() > 2 && rest.starts_with('-')),
    });
    if named {
        return true;
    }
    diags.error_at(
        AttributePath::attr("zone"),
        "Zone outside region",
        format!(
            "Zone {zone:?} is not a zone of region {region:?}: on {cloud} the zones of {region} are named \"{region}{sep}a\", \"{region}{sep}b\" \
             and so on. Give one of them, or set the region the zone is in."
        ),
    );
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cloud_has_its_rules() {
        for cloud in Cloud::ALL {
            assert_eq!(rules(cloud).cloud(), cloud);
        }
    }

    /// Google Cloud lists too few nodes a page for the largest cluster; the others list more than it has (or,
    /// on Azure, a scale set at a time), so their ceiling is `node_count`'s own.
    #[test]
    fn node_count_is_held_to_what_a_refresh_can_list() {
        let most = |cloud| rules(cloud).most_nodes_listed().map(|(n, _)| n);
        assert_eq!(most(Cloud::Gcp), Some(50_500));
        for cloud in [Cloud::Aws, Cloud::Oci] {
            assert!(most(cloud).is_some_and(|n| n >= crate::model::MOST_NODES), "{cloud}");
        }
        assert_eq!(most(Cloud::Azure), None);
        let mut diags = Diagnostics::new();
        assert!(rules(Cloud::Gcp).nodes_listed(50_500, &mut diags) && diags.is_empty());
        assert!(!rules(Cloud::Gcp).nodes_listed(50_501, &mut diags));
        assert!(rules(Cloud::Aws).nodes_listed(crate::model::MOST_NODES, &mut diags));
        let text = format!("{diags:?}");
        assert!(text.contains("Too many nodes to refresh") && text.contains("at most 50500 nodes"), "{text}");
    }
}
