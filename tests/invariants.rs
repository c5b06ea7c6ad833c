//! Architecture invariants from ARCHITECTURE.md, checked over the source tree.

use std::path::{Path, PathBuf};

fn sources(dir: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut out);
    out
}

#[test]
fn only_the_protocol_module_sees_tonic_and_prost() {
    for (path, text) in sources("src") {
        if path.components().any(|c| c.as_os_str() == "protocol") {
            continue;
        }
        for word in ["tonic::", "prost::", "use tonic", "use prost"] {
            assert!(!text.contains(word), "{} uses {word}", path.display());
        }
    }
}

#[test]
fn the_planner_and_expanders_do_no_io() {
    let mut files = sources("src/planner");
    // The expanders are `clouds/<cloud>.rs` or `clouds/<cloud>/mod.rs`; the API clients beside them
    // (`clouds/<cloud>/signing.rs`, ...) talk to clouds and are exempt, as is the clients' rate limiter
    // (`clouds/throttle.rs`).
    files.extend(sources("src/clouds").into_iter().filter(|(p, _)| {
        let parent = p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        (parent == "clouds" && !p.ends_with("throttle.rs")) || p.file_name().is_some_and(|f| f == "mod.rs")
    }));
    files.extend(sources("src/catalog"));
    assert!(files.len() >= 8);
    for (path, text) in files {
        for word in ["std::fs", "std::net", "tokio", "reqwest", "SystemTime", "Instant::now", "std::env", "rand::", "HashMap"] {
            assert!(!text.contains(word), "{} uses {word}: the planner must be pure and deterministic", path.display());
        }
    }
}

#[test]
fn vendor_piece_names_stay_in_clouds_and_catalog() {
    for (path, text) in sources("src/planner") {
        for prefix in ["\"aws_", "\"azurerm_", "\"google_", "\"oci_"] {
            assert!(!text.contains(prefix), "{} names a vendor piece ({prefix}...): that belongs in src/clouds", path.display());
        }
    }
}

/// Secrets are sensitive attributes: the CLI hides them in plans and logs.
#[test]
fn credentials_keys_and_user_data_are_sensitive() {
    use hpc_provider::framework::{Block, ProviderDefinition};
    fn check(block: &Block, at: &str, secret: &[&str], found: &mut usize) {
        for a in &block.attributes {
            if secret.contains(&a.name.as_str()) {
                *found += 1;
                assert!(a.sensitive, "{at}.{} holds a secret but is not sensitive", a.name);
            }
        }
        for b in &block.blocks {
            check(&b.block, &format!("{at}.{}", b.type_name), secret, found);
        }
    }
    let secret = ["access_key", "secret_key", "token", "client_secret", "credentials", "private_key", "user_data"];
    let provider = hpc_provider::provider::HpcProvider;
    let mut found = 0;
    check(&provider.schema().block, "provider", &secret, &mut found);
    for r in provider.resources() {
        check(&r.schema().block, r.type_name(), &secret, &mut found);
    }
    assert!(found >= 7, "only {found} secret attributes found; the list above is stale");
}

/// The ownership rule is one neutral module, and every cloud's observe, converge and delete go through it:
/// each takes the `Census` that admits only the resource instance's own pieces.
#[test]
fn every_cloud_operation_on_pieces_goes_through_the_census() {
    let (_, ownership) = sources("src").into_iter().find(|(p, _)| p.ends_with("ownership.rs")).expect("src/ownership.rs");
    for layer in ["crate::clouds", "crate::resources", "crate::protocol"] {
        assert!(!ownership.contains(layer), "src/ownership.rs uses {layer}: the rule must not depend on a cloud or a resource");
    }
    let mut checked = 0;
    for cloud in ["aws", "gcp", "azure", "oci"] {
        for kind in ["fabric", "cluster", "filesystem"] {
            let path = format!("src/clouds/{cloud}/{kind}.rs");
            let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&path)).unwrap();
            for op in ["observe", "converge", "delete"] {
                for (at, _) in text.match_indices(&format!("pub async fn {op}(")) {
                    let signature = &text[at..at + text[at..].find('{').unwrap()];
                    assert!(signature.contains("Census"), "{path}: {op} does not take the census:\n{signature}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} operations found: the file layout changed");
}
