//! The documentation cannot drift from the code: registry pages are rendered from the schemas and must
//! equal `docs/`, and module READMEs must list exactly the module's variables and outputs.
//! `HPC_UPDATE_DOCS=1 cargo test --test docs` rewrites the generated pages.

use std::path::{Path, PathBuf};

use hpc_provider::framework::ProviderDefinition;
use hpc_provider::framework::docs::{Kind, render};
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

/// `variable "name" {` / `output "name" {` blocks of a module, with their description lines.
fn declared(main_tf: &str, keyword: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut current: Option<String> = None;
    for line in main_tf.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix(&format!("{keyword} \"")) {
            current = rest.split('"').next().map(str::to_owned);
        } else if let (Some(name), Some(desc)) = (&current, t.strip_prefix("description = \"")) {
            found.push((name.clone(), desc.trim_end_matches('"').to_owned()));
            current = None;
        }
    }
    found
}

#[test]
fn module_readmes_list_every_input_and_output() {
    for entry in std::fs::read_dir(root().join("modules")).unwrap() {
        let dir = entry.unwrap().path();
        let main_tf = read(&dir.join("main.tf"));
        let readme = read(&dir.join("README.md"));
        for keyword in ["variable", "output"] {
            let items = declared(&main_tf, keyword);
            assert!(!items.is_empty() || keyword == "variable", "{}: no {keyword}s found", dir.display());
            for (name, desc) in &items {
                let row = format!("| {name} | {desc} |");
                assert!(readme.contains(&row), "{}/README.md lacks the row for {keyword} {name}: {row}", dir.display());
            }
            let table_rows = readme
                .split(if keyword == "variable" { "## Inputs" } else { "## Outputs" })
                .nth(1)
                .map(|s| s.split("\n## ").next().unwrap_or(s).lines().filter(|l| l.starts_with("| ") && !l.starts_with("| Name")).count())
                .unwrap_or(0);
            assert_eq!(table_rows, items.len(), "{}/README.md lists {table_rows} {keyword}s, main.tf has {}", dir.display(), items.len());
        }
    }
}
