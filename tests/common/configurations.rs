//! The directories of a tree that hold Terraform configurations, for the test binaries that check every
//! module and example (`#[path = "common/configurations.rs"] mod configurations;`, without the rest of
//! `common`).

use std::path::{Path, PathBuf};

/// Directories under `dir` (itself included) that hold `.tf` files, sorted.
pub fn under(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut has_tf = false;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "tf") {
                has_tf = true;
            }
        }
        if has_tf {
            out.push(dir.to_path_buf());
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}
