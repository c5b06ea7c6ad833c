//! The documentation cannot drift from the code: registry pages are rendered from the schemas and must
//! equal `docs/`, and module READMEs must list exactly the module's variables and outputs.
//! `HPC_UPDATE_DOCS=1 cargo test --test docs` rewrites the generated pages.

use std::path::{Path, PathBuf};

use hpc_provider::framework::ProviderDefinition;
use hpc_provider::framework::docs::{Kind, render, render_function};
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
        let example = read(&root().join(format!("examples/resources/{name}/resource.tf")));
        let import = read(&root().join(format!("examples/resources/{name}/import.md")));
        let short = name.trim_start_matches("hpc_");
        pages.push((PathBuf::from(format!("resources/{short}.md")), render(Kind::Resource, name, &r.schema(), &example, Some(&import))));
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
