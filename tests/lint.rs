//! The ecosystem's own tools over what users read and copy, as CI runs them:
//!
//! - `tfplugindocs validate` (terraform-plugin-docs, the registry's doc tooling) on `docs/`, against the
//!   schema the built provider reports through OpenTofu (`providers schema -json`);
//! - TFLint with `.tflint.hcl` (the terraform ruleset's `recommended` preset and the standard module
//!   structure, typed and documented variables and outputs, required providers and versions, naming, unused
//!   declarations) on every module and example;
//! - `tofu validate` on every module and example, with the built provider (`dev_overrides`) and
//!   hashicorp/local from its filesystem mirror;
//!
//! and that the linters refuse what they are here to catch: a page without front matter, a module whose
//! provider has no version constraint.
//!
//! The tools come from `./scripts/test.sh` (scripts/lib.sh: `ensure_tfplugindocs`, `ensure_tflint`,
//! `ensure_tofu`, `ensure_local_provider`), which sets `HPC_TFPLUGINDOCS`, `HPC_TFLINT`, `HPC_TOFU` and
//! `HPC_LOCAL_MIRROR`.

#[path = "common/configurations.rs"]
mod configurations;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A tool's path from the environment; without it the test fails and says how to get the tool.
fn tool(var: &str, how: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "{var} is not set: ./scripts/test.sh sets it ({how} in scripts/lib.sh, e.g. `source scripts/lib.sh && {how}` prints the path)"
        )
    })
}

fn tfplugindocs() -> PathBuf {
    tool("HPC_TFPLUGINDOCS", "ensure_tfplugindocs")
}

fn tflint() -> PathBuf {
    tool("HPC_TFLINT", "ensure_tflint")
}

fn tofu() -> PathBuf {
    tool("HPC_TOFU", "ensure_tofu")
}

/// The directory holding the provider binary cargo built for this test.
fn provider_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_terraform-provider-hpc")).parent().unwrap().to_path_buf()
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out: Output = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if name == ".terraform" || name == ".terraform.lock.hcl" || name.to_string_lossy().ends_with(".tfstate") {
            continue;
        }
        if path.is_dir() {
            copy_tree(&path, &to.join(name));
        } else {
            std::fs::copy(&path, to.join(name)).unwrap();
        }
    }
}

/// Directories under `dir` (itself included) that hold `.tf` files, sorted.
fn configurations(dir: &Path) -> Vec<PathBuf> {
    configurations::under(dir)
}

/// A registry page's snippet (`examples/resources/<name>`, `data-sources`, `functions`, `provider`): a
/// fragment shown on a page, not a configuration of its own.
fn is_snippet(relative: &Path) -> bool {
    ["examples/resources", "examples/data-sources", "examples/functions", "examples/provider"].iter().any(|s| relative.starts_with(s))
}

/// The terraform block a snippet leaves out, as a user's configuration around it would have it.
const SNIPPET_VERSIONS: &str = "terraform {\n  required_version = \">= 1.0\"\n  required_providers {\n    hpc = {\n      source  = \"hpc-platform/hpc\"\n      version = \"0.1.0\"\n    }\n  }\n}\n";

/// A copy of `examples/` and `modules/` (relative module sources resolve in it), each snippet given the
/// terraform block it leaves out; and every configuration in it, as (path in the copy, path in the repository).
fn working_copy() -> (tempfile::TempDir, Vec<(PathBuf, PathBuf)>) {
    let dir = tempfile::tempdir().unwrap();
    for tree in ["examples", "modules"] {
        copy_tree(&root().join(tree), &dir.path().join(tree));
    }
    let versions = SNIPPET_VERSIONS.replace("0.1.0", env!("CARGO_PKG_VERSION"));
    let mut configs = Vec::new();
    for tree in ["modules", "examples"] {
        for config in configurations(&dir.path().join(tree)) {
            let relative = config.strip_prefix(dir.path()).unwrap().to_path_buf();
            let has_terraform_block = std::fs::read_dir(&config)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "tf"))
                .any(|p| std::fs::read_to_string(p).unwrap().lines().any(|l| l.starts_with("terraform {")));
            if is_snippet(&relative) && !has_terraform_block {
                std::fs::write(config.join("versions.tf"), &versions).unwrap();
            }
            configs.push((config, relative));
        }
    }
    (dir, configs)
}

fn run_tflint(dir: &Path, snippet: bool) -> (bool, String) {
    let mut cmd = Command::new(tflint());
    cmd.arg(format!("--chdir={}", dir.display()))
        .arg(format!("--config={}", root().join(".tflint.hcl").display()))
        .arg("--format=compact")
        .arg("--no-color")
        .env("TFLINT_LOG", "")
        .env_remove("TFLINT_PLUGIN_DIR");
    if snippet {
        // A page's snippet is one file by the registry's convention (resource.tf, data-source.tf, ...),
        // not a module with main.tf, variables.tf and outputs.tf; every other rule holds for it.
        cmd.arg("--disable-rule=terraform_standard_module_structure");
    }
    run(&mut cmd)
}

#[test]
fn every_module_and_example_passes_tflint() {
    let (_copy, configs) = working_copy();
    assert!(configs.len() > 30, "configurations found: {configs:?}");
    let mut failures = Vec::new();
    for (dir, relative) in &configs {
        let (ok, output) = run_tflint(dir, is_snippet(relative));
        if !ok || !output.trim().is_empty() {
            failures.push(format!("{}:\n{output}", relative.display()));
        }
    }
    assert!(failures.is_empty(), "tflint (.tflint.hcl) found issues:\n{}", failures.join("\n"));
}

/// A module copy with one thing broken, and the rule that must refuse it.
#[test]
fn tflint_refuses_an_unpinned_provider_and_an_undocumented_module() {
    let versions_tf = std::fs::read_to_string(root().join("modules/training-cluster/versions.tf")).unwrap();
    let outputs_tf = std::fs::read_to_string(root().join("modules/training-cluster/outputs.tf")).unwrap();
    let variables_tf = std::fs::read_to_string(root().join("modules/training-cluster/variables.tf")).unwrap();
    let without_version: String =
        versions_tf.lines().filter(|l| !l.trim_start().starts_with("version ")).map(|l| format!("{l}\n")).collect();
    assert_ne!(without_version, versions_tf, "no version line found in:\n{versions_tf}");
    let undocumented = outputs_tf.replacen("  description = \"Id of the fabric.\"\n", "", 1);
    assert_ne!(undocumented, outputs_tf, "the fabric_id output's description not found");
    let untyped = variables_tf.replacen("  type        = string\n", "", 1);
    assert_ne!(untyped, variables_tf);
    let cases = [
        ("versions.tf", without_version, "terraform_required_providers"),
        ("outputs.tf", undocumented, "terraform_documented_outputs"),
        ("variables.tf", untyped, "terraform_typed_variables"),
    ];
    for (file, text, rule) in cases {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&root().join("modules/training-cluster"), dir.path());
        let (ok, output) = run_tflint(dir.path(), false);
        assert!(ok && output.trim().is_empty(), "the unbroken copy must pass:\n{output}");
        std::fs::write(dir.path().join(file), text).unwrap();
        let (ok, output) = run_tflint(dir.path(), false);
        assert!(!ok && output.contains(rule), "{file} broken: {rule} must refuse it, tflint said:\n{output}");
    }
}

/// A CLI configuration: the built provider for `hpc-platform/hpc` (and, for tfplugindocs, under the
/// address it looks the schema up by); with a mirror, `init` installs hashicorp/local from it, and looks the
/// dev-overridden provider up there too (the override still decides which binary runs).
fn cli_config(dir: &Path, mirror: Option<&Path>) -> PathBuf {
    let overrides =
        format!("    \"hpc-platform/hpc\" = \"{0}\"\n    \"registry.terraform.io/hashicorp/hpc\" = \"{0}\"\n", provider_dir().display());
    let install = match mirror {
        Some(mirror) => {
            let sources = "\"registry.opentofu.org/hashicorp/local\", \"registry.opentofu.org/hpc-platform/hpc\"";
            format!(
                "  filesystem_mirror {{\n    path    = \"{}\"\n    include = [{sources}]\n  }}\n  direct {{\n    exclude = [{sources}]\n  }}\n",
                mirror.display()
            )
        }
        None => "  direct {}\n".to_owned(),
    };
    let path = dir.join("cli.tfrc");
    std::fs::write(&path, format!("provider_installation {{\n  dev_overrides {{\n{overrides}  }}\n{install}}}\n")).unwrap();
    path
}

/// A filesystem mirror in `dir` with the built provider and hashicorp/local (from `HPC_LOCAL_MIRROR`).
fn mirror(dir: &Path) -> PathBuf {
    let local = PathBuf::from(std::env::var_os("HPC_LOCAL_MIRROR").unwrap_or_else(|| {
        panic!("HPC_LOCAL_MIRROR is not set: ./scripts/test.sh sets it (ensure_local_provider in scripts/lib.sh builds hashicorp/local into a mirror)")
    }));
    let mirror = dir.join("mirror");
    let version = env!("CARGO_PKG_VERSION");
    // Files, not symlinks: the CLIs do not follow a symlinked directory in a mirror.
    let place = |src: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if std::fs::hard_link(src, to).is_err() {
            std::fs::copy(src, to).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        }
    };
    let platform = "1.4.0/linux_amd64/terraform-provider-local_v1.4.0";
    let host = "registry.opentofu.org";
    place(&local.join(host).join("hashicorp/local").join(platform), &mirror.join(host).join("hashicorp/local").join(platform));
    place(
        Path::new(env!("CARGO_BIN_EXE_terraform-provider-hpc")),
        &mirror.join(host).join(format!("hpc-platform/hpc/{version}/linux_amd64/terraform-provider-hpc_v{version}")),
    );
    mirror
}

fn tofu_in(dir: &Path, cli_config: &Path) -> Command {
    let mut cmd = Command::new(tofu());
    cmd.current_dir(dir)
        .env("TF_CLI_CONFIG_FILE", cli_config)
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .env_remove("TF_LOG")
        .env_remove("TF_PLUGIN_CACHE_DIR");
    cmd
}

#[test]
fn every_module_and_example_validates_with_tofu() {
    let (copy, configs) = working_copy();
    let config = cli_config(copy.path(), Some(&mirror(copy.path())));
    // The hpc_nccl_check page's example reads the cluster of the hpc_gpu_cluster page's example, and an
    // nccl-tests log.
    let nccl_check = copy.path().join("examples/data-sources/hpc_nccl_check");
    std::fs::copy(root().join("examples/resources/hpc_gpu_cluster/resource.tf"), nccl_check.join("cluster.tf")).unwrap();
    std::fs::copy(root().join("tests/fixtures/nccl/healthy.txt"), nccl_check.join("allreduce.log")).unwrap();
    let mut failures = Vec::new();
    for (dir, relative) in &configs {
        // A resource page's import examples are alternatives (an import block by id, or by identity): each
        // is validated with the page's example, on its own.
        let by_id = dir.join("import-by-string-id.tf");
        let by_identity = dir.join("import-by-identity.tf");
        let aside = copy.path().join("aside.tf");
        let alternatives: Vec<Option<&Path>> =
            if by_id.exists() && by_identity.exists() { vec![Some(by_identity.as_path()), Some(by_id.as_path())] } else { vec![None] };
        for set_aside in alternatives {
            if let Some(file) = set_aside {
                std::fs::rename(file, &aside).unwrap();
            }
            if let Some(failure) = validate(dir, relative, &config) {
                failures.push(failure);
            }
            if let Some(file) = set_aside {
                std::fs::rename(&aside, file).unwrap();
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `tofu validate` in `dir` (after `get`, or `init` when it needs another provider); what went wrong, if anything.
fn validate(dir: &Path, relative: &Path, config: &Path) -> Option<String> {
    // Only the dev-overridden provider: `get` installs the local modules. Another provider
    // (hashicorp/local): `init`, which installs it from the mirror.
    let text: String = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tf"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let setup: &[&str] =
        if text.contains("hashicorp/local") { &["init", "-backend=false", "-input=false", "-no-color"] } else { &["get", "-no-color"] };
    let (ok, output) = run(tofu_in(dir, config).args(setup));
    if !ok {
        return Some(format!("{}: tofu {}:\n{output}", relative.display(), setup[0]));
    }
    let (ok, output) = run(tofu_in(dir, config).args(["validate", "-no-color"]));
    if !ok || !output.contains("The configuration is valid") {
        return Some(format!("{}: tofu validate:\n{output}", relative.display()));
    }
    None
}

/// The provider's schema as `tofu providers schema -json` reports it from the built binary, under the
/// address tfplugindocs looks it up by (`registry.terraform.io/hashicorp/<name>`, as it does when it builds
/// a provider itself).
fn providers_schema(dir: &Path) -> PathBuf {
    let config = cli_config(dir, None);
    let work = dir.join("schema");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("main.tf"),
        "terraform {\n  required_providers {\n    hpc = {\n      source = \"registry.terraform.io/hashicorp/hpc\"\n    }\n  }\n}\n",
    )
    .unwrap();
    let out = tofu_in(&work, &config).args(["providers", "schema", "-json"]).output().unwrap();
    assert!(out.status.success(), "tofu providers schema -json: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the schema as JSON");
    assert!(json["provider_schemas"]["registry.terraform.io/hashicorp/hpc"]["resource_schemas"]["hpc_gpu_cluster"].is_object());
    let path = dir.join("schema.json");
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

fn tfplugindocs_validate(provider_dir: &Path, schema: &Path) -> (bool, String) {
    run(Command::new(tfplugindocs())
        .arg("validate")
        .arg("--provider-name=hpc")
        .arg(format!("--provider-dir={}", provider_dir.display()))
        .arg(format!("--providers-schema={}", schema.display())))
}

#[test]
fn docs_pass_tfplugindocs_validate() {
    let tmp = tempfile::tempdir().unwrap();
    let schema = providers_schema(tmp.path());
    let (ok, output) = tfplugindocs_validate(root(), &schema);
    assert!(ok, "tfplugindocs validate refused docs/:\n{output}");
    // It did look at the pages (and at the schema: the mismatch check).
    assert!(output.contains("running file checks on docs/resources/gpu_cluster.md"), "{output}");
    assert!(output.contains("running file mismatch check"), "{output}");
}

/// A copy of docs/ with one thing broken is refused, with the validator's own words.
#[test]
fn tfplugindocs_refuses_broken_docs() {
    let tmp = tempfile::tempdir().unwrap();
    let schema = providers_schema(tmp.path());
    let page = std::fs::read_to_string(root().join("docs/resources/gpu_cluster.md")).unwrap();
    let (front, body) = page.strip_prefix("---\n").and_then(|p| p.split_once("\n---\n")).expect("the page's front matter");
    let index = std::fs::read_to_string(root().join("docs/index.md")).unwrap();
    type Break = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Break, &str)> = vec![
        (
            "a page without front matter",
            Box::new({
                let body = body.to_owned();
                move |docs: &Path| std::fs::write(docs.join("resources/gpu_cluster.md"), &body).unwrap()
            }),
            "resources/gpu_cluster.md: error checking file frontmatter: no frontmatter found",
        ),
        (
            "a page with the legacy website's layout key",
            Box::new({
                let page = format!("---\n{front}\nlayout: \"hpc\"\n---\n{body}");
                move |docs: &Path| std::fs::write(docs.join("resources/gpu_cluster.md"), &page).unwrap()
            }),
            "YAML frontmatter should not contain layout",
        ),
        (
            "an index with a subcategory",
            Box::new({
                let index = index.replacen("page_title: ", "subcategory: \"\"\npage_title: ", 1);
                move |docs: &Path| std::fs::write(docs.join("index.md"), &index).unwrap()
            }),
            "YAML frontmatter should not contain subcategory",
        ),
        (
            "a resource without its page",
            Box::new(|docs: &Path| std::fs::remove_file(docs.join("resources/gpu_fabric.md")).unwrap()),
            "missing documentation file for resource: hpc_gpu_fabric",
        ),
    ];
    for (what, break_it, refusal) in cases {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&root().join("docs"), &dir.path().join("docs"));
        let (ok, output) = tfplugindocs_validate(dir.path(), &schema);
        assert!(ok, "the unbroken copy must pass:\n{output}");
        break_it(&dir.path().join("docs"));
        let (ok, output) = tfplugindocs_validate(dir.path(), &schema);
        assert!(!ok && output.contains(refusal), "{what}: tfplugindocs must refuse it with {refusal:?}; it said:\n{output}");
    }
}
