//! Google Cloud's validation rules (see `clouds/rules.rs`): GPU instances and compact placement are zonal,
//! `max_distance` tunes compact placement (which holds a bounded number of VMs), tags become labels with
//! their stricter rule, and Managed Lustre links Cloud Storage.

use std::collections::BTreeMap;

use crate::catalog::{Cloud, Sku, limits};
use crate::clouds::rules::{MAX_DISTANCE_GCP_COMPACT_ONLY, Rules, listed, missing_zone, not_valid_here, zone_in_region};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Placement};

pub struct Gcp;

/// Google Cloud labels are stricter than tags elsewhere: lowercase letters, digits, `_` and `-`, at most
/// 63 characters, keys starting with a letter.
fn label_ok(k: &str, v: &str) -> bool {
    let ok_chars = |s: &str| s.len() <= 63 && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    ok_chars(k) && k.starts_with(|c: char| c.is_ascii_lowercase()) && ok_chars(v)
}

impl Rules for Gcp {
    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }

    fn fabric_zone(&self, region: &str, zone: Option<&str>, diags: &mut Diagnostics) -> bool {
        match zone {
            None => missing_zone(self.cloud(), "a zone such as \"us-central1-a\": GPU instances and compact placement are zonal", diags),
            Some(z) => zone_in_region(crate::catalog::Cloud::Gcp, region, z, diags),
        }
    }

    fn max_distance(&self, distance: i64, placement: Placement, sku: Option<&Sku>, diags: &mut Diagnostics) -> bool {
        if placement != Placement::Cluster {
            return not_valid_here("max_distance", MAX_DISTANCE_GCP_COMPACT_ONLY, diags);
        }
        if let Some(s) = sku.filter(|s| s.nvlink_domain.is_some()) {
            diags.error_at(
                AttributePath::attr("max_distance"),
                "Attribute not valid here",
                format!(
                    "{} nodes are placed by NVLink domain: each domain's compact placement policy carries gpuTopology 1x72, which \
                     Compute Engine does not combine with maxDistance. Remove max_distance.",
                    s.name
                ),
            );
            return false;
        }
        if !(1..=3).contains(&distance) {
            diags.error_at(
                AttributePath::attr("max_distance"),
                "Value out of range",
                format!("max_distance takes 1, 2 or 3; got {distance}."),
            );
            return false;
        }
        if distance == 1
            && let Some(s) = sku.filter(|s| matches!(s.name, "a3-ultragpu-8g" | "a4-highgpu-8g"))
        {
            diags.error_at(
                AttributePath::attr("max_distance"),
                "Placement distance not allowed",
                format!("max_distance = 1 is not allowed for {} (A3 Ultra and A4 accept 2 or 3; Compute Engine rejects 1 with \"No more than 0 instances\")", s.name),
            );
            return false;
        }
        true
    }

    fn tags(&self, tags: &BTreeMap<String, String>, diags: &mut Diagnostics) -> bool {
        let mut ok = true;
        for (k, v) in tags {
            if !label_ok(k, v) {
                diags.error_at(
                    AttributePath::attr("tags").and_key(k),
                    "Invalid Google Cloud label",
                    format!("{k}={v:?} cannot be a Google Cloud label: keys and values take lowercase letters, digits, '_' and '-' (at most 63), and keys start with a letter."),
                );
                ok = false;
            }
        }
        ok
    }

    fn default_tags(&self, tags: &BTreeMap<String, String>, diags: &mut Diagnostics) {
        for (k, v) in tags {
            if !label_ok(k, v) {
                diags.error(
                    "Invalid Google Cloud label",
                    format!("default_tags[{k:?}] = {v:?} in the provider block cannot be a Google Cloud label: keys and values take lowercase letters, digits, '_' and '-' (at most 63), and keys start with a letter."),
                );
            }
        }
    }

    fn node_identity_form(&self) -> Option<&'static str> {
        Some(
            "a service account's email (<name>@<project>.iam.gserviceaccount.com) allowed to set the labels of the instances it runs \
             (compute.instances.get and compute.instances.setLabels, e.g. in a custom role granted on the project)",
        )
    }

    fn node_identity_ok(&self, identity: &str) -> bool {
        let Some((account, domain)) = identity.split_once('@') else { return false };
        let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        !account.is_empty()
            && account.len() <= 100
            && account.chars().all(ok)
            && domain.ends_with("gserviceaccount.com")
            && domain.chars().all(|c| ok(c) || c == '.')
    }

    fn most_nodes_listed(&self) -> Option<(u32, String)> {
        Some(listed("the nodes", "Compute Engine's instances.list", super::cluster::LIST_PAGE as usize))
    }

    fn reservation_target(&self) -> &'static str {
        "the reservation name"
    }

    fn cluster_capacity(&self, capacity: CapacityType, sku: &Sku, placement: Placement, node_count: u32, diags: &mut Diagnostics) -> bool {
        // A4X comes only in reservations (all-capacity mode), and its instances must be bound to one.
        if sku.nvlink_domain.is_some() && capacity != CapacityType::Reservation {
            diags.error_at(
                AttributePath::attr("capacity_type"),
                "A4X without a reservation",
                format!(
                    "{} capacity comes only from a reservation in all-capacity mode, and its instances must consume it \
                     (SPECIFIC_RESERVATION): capacity_type {:?} cannot get it. Set capacity_type = \"reservation\" and reservation_id \
                     to the reservation's name.",
                    sku.name,
                    capacity.as_str()
                ),
            );
            return false;
        }
        if sku.nvlink_domain.is_some() && placement != Placement::Cluster {
            diags.error_at(
                AttributePath::attr("fabric"),
                "A4X without compact placement",
                format!(
                    "{} instances find their NVLink domain through a compact placement policy with gpuTopology 1x72: the fabric needs \
                     placement = \"cluster\".",
                    sku.name
                ),
            );
            return false;
        }
        if placement == Placement::Cluster && node_count > limits::GCP_COMPACT_PLACEMENT_MAX_VMS {
            diags.error_at(
                AttributePath::attr("node_count"),
                "Too many nodes for compact placement",
                format!(
                    "A Google Cloud compact placement policy holds at most {} VMs; node_count is {node_count}.",
                    limits::GCP_COMPACT_PLACEMENT_MAX_VMS
                ),
            );
            return false;
        }
        true
    }

    fn data_repository_ok(&self, repo: &str) -> bool {
        repo.starts_with("gs://")
    }

    fn data_repository_form(&self) -> &'static str {
        "gs://bucket/prefix/"
    }
}
