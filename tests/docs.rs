//! The documentation cannot drift from the code: registry pages are rendered from the schemas and must
//! equal `docs/`, and `docs/` holds the registry's pages only (design notes live in `notes/`).
//! `HPC_UPDATE_DOCS=1 cargo test --test docs` rewrites the generated pages. The registry's own doc tooling
//! (`tfplugindocs validate`) judges the pages in `tests/lint.rs`.

use std::path::{Path, PathBuf};

use hpc_provider::framework::ProviderDefinition;
use hpc_provider::framework::docs::{Import, Kind, render, render_function};
use hpc_provider::provider::HpcProvider;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every page the provider documents: (file under docs/, rendered content).
fn pages() -> Vec<(PathBuf, String)> {
    let p = HpcProvider;
    let mut pages = vec![(
        PathBuf::from("index.md"),
        render(Kind::Provider, "hpc", &p.schema(), &read(&root().join("examples/provider/provider.tf")), None),
    )];
    for ds in p.data_sources() {
        let name = ds.type_name();
        let example = read(&root().join(format!("examples/data-sources/{name}/data-source.tf")));
        let short = name.trim_start_matches("hpc_");
        pages.push((PathBuf::from(format!("data-sources/{short}.md")), render(Kind::DataSource, name, &ds.schema(), &example, None)));
    }
    for r in p.resources() {
        let name = r.type_name();
        let dir = root().join(format!("examples/resources/{name}"));
        let example = read(&dir.join("resource.tf"));
        // The files terraform-plugin-docs reads: every resource imports, by id; by identity where it has one.
        let command = read(&dir.join("import.sh"));
        let by_id = read(&dir.join("import-by-string-id.tf"));
        let identity = r.identity_schema();
        let by_identity_file = dir.join("import-by-identity.tf");
        assert_eq!(
            identity.is_some(),
            by_identity_file.exists(),
            "{name}: import-by-identity.tf must exist exactly when the resource has an identity schema"
        );
        let by_identity = identity.as_ref().map(|schema| (read(&by_identity_file), schema));
        let import = Import { command: &command, by_id: Some(&by_id), by_identity: by_identity.as_ref().map(|(b, s)| (b.as_str(), *s)) };
        let short = name.trim_start_matches("hpc_");
        pages.push((PathBuf::from(format!("resources/{short}.md")), render(Kind::Resource, name, &r.schema(), &example, Some(import))));
    }
    for f in p.functions() {
        let name = f.name();
        let example = read(&root().join(format!("examples/functions/{name}/function.tf")));
        pages.push((PathBuf::from(format!("functions/{name}.md")), render_function(name, &f.signature(), &example)));
    }
    pages
}

#[test]
fn registry_pages_match_the_schemas() {
    let update = std::env::var_os("HPC_UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (file, rendered) in pages() {
        let path = root().join("docs").join(&file);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &rendered).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(rendered.as_str()) {
            stale.push(file.display().to_string());
        }
    }
    assert!(stale.is_empty(), "docs out of date: {stale:?}; run HPC_UPDATE_DOCS=1 cargo test --test docs");
}

/// `docs/` is what the registry publishes: the index page and the pages of the registry's own
/// directories, nothing else (the registry's tooling skips other files silently, so this test is what keeps
/// design notes out).
#[test]
fn docs_holds_only_registry_pages() {
    let allowed = ["data-sources", "resources", "functions", "guides"];
    let mut strays = Vec::new();
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !allowed.contains(&name.as_str()) {
                strays.push(format!("docs/{name}/"));
                continue;
            }
            for page in std::fs::read_dir(&path).unwrap() {
                let page = page.unwrap().path();
                if page.is_dir() || page.extension().is_none_or(|e| e != "md") {
                    strays.push(format!("docs/{name}/{}", page.file_name().unwrap().to_string_lossy()));
                }
            }
        } else if name != "index.md" {
            strays.push(format!("docs/{name}"));
        }
    }
    assert!(strays.is_empty(), "not registry pages (design notes belong in notes/): {strays:?}");
}

/// Every page opens with the front matter the registry reads: a `page_title`, a `description`, and a
/// `subcategory` on every page but the index (which must not have one).
#[test]
fn every_page_has_the_registry_front_matter() {
    for (file, rendered) in pages() {
        let front = rendered
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n"))
            .map(|(front, _)| front)
            .unwrap_or_else(|| panic!("{}: no front matter", file.display()));
        let keys: Vec<&str> = front
            .lines()
            .filter(|l| !l.starts_with(' ') && !l.starts_with('#'))
            .filter_map(|l| l.split_once(':').map(|(k, _)| k))
            .collect();
        let expected: &[&str] =
            if file == Path::new("index.md") { &["page_title", "description"] } else { &["page_title", "subcategory", "description"] };
        assert_eq!(keys, expected, "{}:\n{front}", file.display());
        assert!(front.contains("\ndescription: |-\n  "), "{}: empty description:\n{front}", file.display());
    }
}
