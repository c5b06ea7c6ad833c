//! Azure's validation rules (see `clouds/rules.rs`): fabrics may name their resource group; GRID-driver
//! sizes need an image with that driver, and Linux scale sets a login key; capacity reservation groups
//! and InfiniBand exclude each other; Azure Managed Lustre mounts as "lustrefs", links a blob container
//! and takes a weekly maintenance window.

use std::collections::BTreeMap;

use crate::catalog::{Cloud, Fabric, Sku};
use crate::clouds::rules::{Reported, Rules};
use crate::framework::{AttributePath, Diagnostics};
use crate::model::{CapacityType, Placement};

pub struct Azure;

/// The one filesystem name Azure Managed Lustre serves.
pub const FILESYSTEM_NAME: &str = "lustrefs";

/// The window when none is given.
const DEFAULT_MAINTENANCE_WINDOW: (&str, &str) = ("Sunday", "02:00");

/// Characters ARM refuses in a tag name ("Tag names can't contain these characters: <, >, %, &, \\, ?, /").
const TAG_NAME_REFUSED: [char; 7] = ['<', '>', '%', '&', '\\', '?', '/'];

/// Why ARM would refuse a tag `k`, if it would: a name with a refused character, or longer than 512.
fn tag_name_refusal(k: &str) -> Option<String> {
    if let Some(c) = k.chars().find(|c| TAG_NAME_REFUSED.contains(c)) {
        return Some(format!("{k:?} contains {c:?}: Azure refuses tag names with any of < > % & \\ ? /"));
    }
    (k.chars().count() > 512).then(|| format!("{k:?} is longer than the 512 characters Azure allows in a tag name"))
}

impl Rules for Azure {
    fn tags(&self, tags: &BTreeMap<String, String>, diags: &mut Diagnostics) -> bool {
        let mut ok = true;
        for k in tags.keys() {
            if let Some(why) = tag_name_refusal(k) {
                diags.error_at(AttributePath::attr("tags").and_key(k), "Invalid Azure tag name", format!("{why}. Rename the tag."));
                ok = false;
            }
        }
        ok
    }

    fn default_tags(&self, tags: &BTreeMap<String, String>, diags: &mut Diagnostics) {
        for k in tags.keys() {
            if let Some(why) = tag_name_refusal(k) {
                diags.error("Invalid Azure tag name", format!("default_tags in the provider block: {why}. Rename the tag."));
            }
        }
    }

    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn resource_group(&self, _diags: &mut Diagnostics) -> bool {
        true
    }

    fn cluster_nodes(&self, sku: &Sku, image: Option<&str>, ssh_public_key: Option<&str>, diags: &mut Diagnostics) -> bool {
        let mut ok = true;
        // NVadsA10 v5 runs NVIDIA's GRID driver, which the default Azure HPC image (datacenter driver) lacks.
        if sku.name.starts_with("Standard_NV") && image.is_none() {
            diags.error_at(
                AttributePath::attr("image"),
                "Missing image",
                format!(
                    "{} needs NVIDIA's GRID driver, which the provider's default image ({}) does not carry. Set image to an image with the GRID \
                     driver (e.g. one built with the NVIDIA GPU Driver Extension), as a publisher:offer:sku:version URN or a gallery image id.",
                    sku.name,
                    super::cluster::DEFAULT_IMAGE
                ),
            );
            ok = false;
        }
        // Azure refuses a Linux scale set that can be logged into neither by key nor by password ("Authentication
        // using either SSH or by user name and password must be enabled in Linux profile"); the provider never
        // turns password login on.
        if ssh_public_key.is_none_or(|k| k.trim().is_empty()) {
            diags.error_at(
                AttributePath::attr("ssh_public_key"),
                "Missing SSH key",
                "Azure refuses a Linux scale set with neither an SSH key nor a password, and the provider keeps password login off. Set \
                 ssh_public_key to an OpenSSH public key (\"ssh-ed25519 AAAA...\" or \"ssh-rsa AAAA...\", RSA at least 2048 bits).",
            );
            ok = false;
        }
        ok
    }

    fn node_identity_form(&self) -> Option<&'static str> {
        None
    }

    /// A cluster is scale sets of at most 100 VMs each, and the refresh lists each set's VMs and NICs on
    /// their own: a list of 100 items fits in the pages it follows even at one item a page.
    fn most_nodes_listed(&self) -> Option<(u32, String)> {
        None
    }

    fn reservation_target(&self) -> &'static str {
        "the capacity reservation group id"
    }

    fn cluster_capacity(
        &self,
        capacity: CapacityType,
        sku: &Sku,
        _placement: Placement,
        _node_count: u32,
        diags: &mut Diagnostics,
    ) -> bool {
        if capacity == CapacityType::Reservation && sku.fabric == Fabric::InfiniBand {
            diags.error_at(
                AttributePath::attr("capacity_type"),
                "Reservation conflicts with InfiniBand",
                format!("Azure capacity reservation groups require single_placement_group = false, but InfiniBand between {} VMs needs a single placement group. Use \"on-demand\" or \"spot\".", sku.name),
            );
            return false;
        }
        true
    }

    fn filesystem_name(&self, given: Option<&str>, diags: &mut Diagnostics) -> bool {
        if given.is_none_or(|n| n == FILESYSTEM_NAME) {
            return true;
        }
        diags.error_at(
            AttributePath::attr("filesystem_name"),
            "Filesystem name fixed by Azure Managed Lustre",
            "Azure Managed Lustre filesystems are always mounted as \"lustrefs\"; remove filesystem_name.",
        );
        false
    }

    // AMLFS takes the container's resource id ("Resource ID of storage container"), not its URL.
    fn data_repository_ok(&self, repo: &str) -> bool {
        super::filesystem::container_parts(repo).is_some()
    }

    fn data_repository_form(&self) -> &'static str {
        "/subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.Storage/storageAccounts/<account>/blobServices/default/containers/<container>"
    }

    fn maintenance_window(&self, window: Option<&str>, diags: &mut Diagnostics) -> Result<Option<(String, String)>, Reported> {
        let Some(w) = window else {
            let (day, time) = DEFAULT_MAINTENANCE_WINDOW;
            return Ok(Some((day.into(), time.into())));
        };
        match parse_window(w) {
            Some(p) => Ok(Some(p)),
            None => {
                diags.error_at(
                    AttributePath::attr("maintenance_window"),
                    "Invalid maintenance window",
                    format!("{w:?} is not a weekly window. Use a day and a UTC time: \"Sunday 02:00\"."),
                );
                Err(Reported)
            }
        }
    }
}

/// A weekly window, "Sunday 02:00" (any case for the day), as (day, "HH:MM").
fn parse_window(w: &str) -> Option<(String, String)> {
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    let (day, time) = w.split_once(' ')?;
    let day = DAYS.iter().find(|d| d.eq_ignore_ascii_case(day))?;
    let (h, m) = time.split_once(':')?;
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60 && time.len() == 5).then(|| (day.to_string(), format!("{h:02}:{m:02}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        assert_eq!(parse_window("sunday 02:00"), Some(("Sunday".into(), "02:00".into())));
        assert_eq!(parse_window("Funday 02:00"), None);
    }

    #[test]
    fn filesystem_name_is_lustrefs() {
        let mut d = Diagnostics::new();
        assert!(Azure.filesystem_name(None, &mut d) && Azure.filesystem_name(Some("lustrefs"), &mut d));
        assert!(d.is_empty());
        assert!(!Azure.filesystem_name(Some("abc"), &mut d));
        assert_eq!(d.iter().count(), 1);
    }
}
