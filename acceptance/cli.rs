//! Running the real OpenTofu and Terraform binaries against the freshly built provider.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One CLI under test, with its version (features are decided by it).
#[derive(Clone, Debug)]
pub struct Cli {
    pub name: &'static str,
    pub bin: PathBuf,
    pub opentofu: bool,
    pub version: (u32, u32, u32),
}

/// A CLI's version: major, minor, patch.
type Version = (u32, u32, u32);

/// The version a CLI reports, asked once per binary for the whole test run.
fn version_of(bin: &Path) -> Version {
    static SEEN: std::sync::Mutex<Vec<(PathBuf, Version)>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, v)) = seen.iter().find(|(b, _)| b == bin) {
        return *v;
    }
    let version = ask_version(bin);
    seen.push((bin.to_path_buf(), version));
    version
}

/// `version -json` has `terraform_version` on both CLIs.
fn ask_version(bin: &Path) -> (u32, u32, u32) {
    let out = Command::new(bin).args(["version", "-json"]).env("CHECKPOINT_DISABLE", "1").output().unwrap();
    // A CLI without a configuration file warns on stdout first.
    let text = String::from_utf8_lossy(&out.stdout);
    let body = text.find("{\n").map_or(&*text, |at| &text[at..]);
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{} version -json: {e}: {text}", bin.display()));
    let text = json["terraform_version"].as_str().unwrap_or_else(|| panic!("{} version -json: {json}", bin.display()));
    let mut parts = text.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

impl Cli {
    /// The CLI named by `var` (set by `scripts/test.sh`, which installs the CLIs); `None` when unset.
    fn from_env(name: &'static str, var: &str, opentofu: bool) -> Option<Cli> {
        let bin = std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)?;
        assert!(bin.is_file(), "{var}={} does not exist", bin.display());
        let version = version_of(&bin);
        Some(Cli { name, bin, opentofu, version })
    }

    fn required(name: &'static str, var: &str, opentofu: bool) -> Cli {
        Cli::from_env(name, var, opentofu).unwrap_or_else(|| {
            panic!("{var} is not set: run the acceptance tests through ./scripts/test.sh, which builds OpenTofu and installs Terraform")
        })
    }

    /// OpenTofu, the newest release the Go module proxy serves (built by `scripts/test.sh`).
    pub fn tofu() -> Cli {
        Cli::required("tofu", "HPC_TOFU", true)
    }

    /// The newest Terraform on the machine (the image's `/usr/local/bin/terraform`, 1.11 or later); `None`
    /// when the machine has none, which `scripts/test.sh` says before the tests run.
    pub fn terraform() -> Option<Cli> {
        Cli::from_env("terraform", "HPC_TERRAFORM", false)
    }

    /// Terraform 1.0.3, the oldest CLI supported.
    pub fn terraform_oldest() -> Cli {
        Cli::required("terraform_1_0", "HPC_TERRAFORM_OLDEST", false)
    }

    fn at_least(&self, tofu: (u32, u32), terraform: (u32, u32)) -> bool {
        let (major, minor) = if self.opentofu { tofu } else { terraform };
        (self.version.0, self.version.1) >= (major, minor)
    }

    /// Provider-defined functions: OpenTofu 1.7, Terraform 1.8.
    pub fn has_functions(&self) -> bool {
        self.at_least((1, 7), (1, 8))
    }

    /// Write-only arguments and ephemeral variables: OpenTofu 1.11, Terraform 1.11.
    pub fn has_write_only(&self) -> bool {
        self.at_least((1, 11), (1, 11))
    }

    /// `import` blocks with `identity` instead of `id`: OpenTofu 1.12, Terraform 1.12.
    pub fn has_import_identity(&self) -> bool {
        self.at_least((1, 12), (1, 12))
    }

    /// `import`, `moved` blocks and `terraform_data`: OpenTofu 1.6, Terraform 1.5.
    pub fn has_import_blocks(&self) -> bool {
        self.at_least((1, 6), (1, 5))
    }
}

/// A working directory holding a copy of one case and a CLI configuration whose dev_overrides point at
/// the provider binary cargo just built. `init` is skipped, as dev_overrides require.
pub struct Workdir {
    pub cli: Cli,
    pub dir: tempfile::TempDir,
    cwd: PathBuf,
    env: Vec<(String, String)>,
}

pub fn provider_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_terraform-provider-hpc")).parent().unwrap().to_path_buf()
}

impl Workdir {
    pub fn new(cli: &Cli, case: &str) -> Workdir {
        let dir = tempfile::Builder::new().prefix(&format!("hpc-acc-{}-{case}-", cli.name)).tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("acceptance/cases").join(case);
        copy_tree(&src, dir.path());
        let config = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"hpc-platform/hpc\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            provider_dir().display()
        );
        std::fs::write(dir.path().join("cli.tfrc"), config).unwrap();
        let cwd = dir.path().to_path_buf();
        Workdir { cli: cli.clone(), dir, cwd, env: Vec::new() }
    }

    /// A copy of `examples/` and `modules/` (so relative module sources resolve), working in `examples/<example>`.
    pub fn for_example(cli: &Cli, example: &str) -> Workdir {
        let mut w = Workdir::new(cli, "empty");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for tree in ["examples", "modules"] {
            copy_tree(&root.join(tree), &w.dir.path().join(tree));
        }
        w.cwd = w.dir.path().join("examples").join(example);
        w
    }

    /// A copy of `examples/` and `modules/`, working in `path` (relative to the repository root), e.g.
    /// `modules/training-cluster/examples/basic`.
    pub fn for_path(cli: &Cli, path: &str) -> Workdir {
        let mut w = Workdir::for_example(cli, ".");
        w.cwd = w.dir.path().join(path);
        w
    }

    /// An environment variable for every command run here (e.g. `TF_VAR_endpoint`).
    pub fn env(mut self, key: &str, value: &str) -> Workdir {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Replaces a file of the case.
    pub fn write(&self, file: &str, text: &str) {
        std::fs::write(self.path().join(file), text).unwrap();
    }

    pub fn path(&self) -> &Path {
        &self.cwd
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.cli.bin);
        cmd.args(args)
            .current_dir(self.path())
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("cli.tfrc"))
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env_remove("TF_LOG")
            .env_remove("TF_LOG_PATH");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs the CLI with `args` to its end; one that is still running after 15 minutes is killed and fails the
    /// case with what it had printed (a hung apply names its case instead of stalling the suite).
    pub fn run(&self, args: &[&str]) -> Run {
        let out = hpc_emulators::hosts::output_within(&mut self.command(args), std::time::Duration::from_secs(900))
            .unwrap_or_else(|e| panic!("{} {}: {e}", self.cli.bin.display(), args.join(" ")));
        Run::new(&self.cli, args, out)
    }

    /// The 1-based line of the first line in the case's main.tf containing `needle`.
    pub fn line_of(&self, needle: &str) -> usize {
        let text = std::fs::read_to_string(self.path().join("main.tf")).unwrap();
        text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} not in main.tf")) + 1
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let name = entry.file_name();
        if name == ".terraform" || name.to_string_lossy().contains("tfstate") {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Every directory under `examples/` that holds a configuration, relative to `examples/`.
pub fn example_dirs() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        let mut has_tf = false;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "tf") {
                has_tf = true;
            }
        }
        if has_tf {
            out.push(dir.strip_prefix(base).unwrap().to_string_lossy().into_owned());
        }
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub what: String,
}

impl Run {
    fn new(cli: &Cli, args: &[&str], out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            what: format!("{} {}", cli.name, args.join(" ")),
        }
    }

    /// Asserts the exit code, showing everything the CLI printed when it differs.
    pub fn expect_code(self, code: i32) -> Run {
        assert_eq!(self.code, Some(code), "{} exited {:?}\n--- stdout\n{}\n--- stderr\n{}", self.what, self.code, self.stdout, self.stderr);
        self
    }

    pub fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Checks the `nodes` output of `terraform output -json`: the named nodes in index order, each with its
/// own cloud id and its own private IPv4 address. Returns (name, id, address) per node.
pub fn assert_nodes(outputs: &serde_json::Value, names: &[&str]) -> Vec<(String, String, String)> {
    let nodes = outputs["nodes"]["value"].as_array().unwrap_or_else(|| panic!("no nodes output: {outputs}"));
    let found: Vec<(String, String, String)> = nodes
        .iter()
        .map(|n| {
            let field = |k: &str| n[k].as_str().unwrap_or_else(|| panic!("node without {k}: {n}")).to_owned();
            (field("name"), field("id"), field("private_ip"))
        })
        .collect();
    assert_eq!(found.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(), names, "{outputs}");
    for (name, id, ip) in &found {
        assert!(!id.is_empty(), "{name} has no id");
        assert!(ip.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_private()), "{name}: {ip:?} is not a private IPv4 address");
    }
    let distinct = |f: fn(&(String, String, String)) -> &String| found.iter().map(f).collect::<std::collections::BTreeSet<_>>().len();
    assert_eq!(distinct(|n| &n.1), found.len(), "node ids repeat: {found:?}");
    assert_eq!(distinct(|n| &n.2), found.len(), "node addresses repeat: {found:?}");
    found
}

/// White space folded to single spaces: the CLIs align attribute names to the longest in each block, so
/// the spacing of a plan line changes whenever a resource gains an attribute.
pub fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The resources' values as `show -json` has them, by address.
/// [`state_values`] of the resources in module `module` (`module.gpu`), by their full address.
pub fn state_values_in(w: &Workdir, module: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    let out = w.run(&["show", "-json"]).expect_code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    json["values"]["root_module"]["child_modules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["address"] == module)
        .flat_map(|m| m["resources"].as_array().cloned().unwrap_or_default())
        .map(|r| (r["address"].as_str().unwrap_or_default().to_owned(), r["values"].clone()))
        .collect()
}

pub fn state_values(w: &Workdir) -> std::collections::BTreeMap<String, serde_json::Value> {
    let out = w.run(&["show", "-json"]).expect_code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    json["values"]["root_module"]["resources"]
        .as_array()
        .map(|rs| rs.iter().map(|r| (r["address"].as_str().unwrap().to_owned(), r["values"].clone())).collect())
        .unwrap_or_default()
}

/// A cluster without a fabric, end to end: applied with the network it makes (`network` names it), an
/// empty re-plan, `check` on the outputs, an import that gives back the same state, and a destroy after
/// which `empty` (the emulator's inventory) holds.
pub fn own_network_lifecycle(
    w: &Workdir,
    address: &str,
    id: &str,
    nodes: &[&str],
    check: impl FnOnce(&serde_json::Value),
    empty: impl Fn() -> bool,
) {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
    let out: serde_json::Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_nodes(&out, nodes);
    let network = &out["network"]["value"];
    assert!(network["vpc_id"].as_str().is_some_and(|v| !v.is_empty()) && network["subnet_id"].as_str().is_some(), "{out}");
    check(&out);
    let created = state_values(w);
    w.run(&["state", "rm", address]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", address, id]).expect_code(0);
    assert_eq!(state_values(w), created, "{address} imported from {id}");
    let after = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(!after.contains("# hpc_"), "{after}");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert!(empty(), "{address}: the emulator still holds something after destroy");
}

/// A filesystem mirror for `init`: this test run's provider binary as hpc-platform/hpc (both CLIs' `init`
/// look up dev-overridden providers too), and with `with_local` hashicorp/local from the mirror
/// `./scripts/test.sh` builds (HPC_LOCAL_MIRROR). The CLI configuration of `w` then installs from it.
pub fn use_mirror(w: &Workdir, with_local: bool) {
    let mirror = w.dir.path().join("mirror");
    let version = env!("CARGO_PKG_VERSION");
    let hosts = ["registry.opentofu.org", "registry.terraform.io"];
    // Files, not symlinks: the CLIs do not follow a symlinked directory in a mirror.
    let place = |src: &Path, dir: &Path, file: &str| {
        std::fs::create_dir_all(dir).unwrap();
        if std::fs::hard_link(src, dir.join(file)).is_err() {
            std::fs::copy(src, dir.join(file)).unwrap();
        }
    };
    let mut sources = Vec::new();
    for host in hosts {
        if with_local {
            let local = std::env::var("HPC_LOCAL_MIRROR").unwrap_or_else(|_| {
                panic!(
                    "HPC_LOCAL_MIRROR is not set: run the acceptance tests through ./scripts/test.sh, which builds hashicorp/local into a mirror"
                )
            });
            let file = "terraform-provider-local_v1.4.0";
            let platform = "1.4.0/linux_amd64";
            let local_dir = Path::new(&local).join(host).join("hashicorp/local").join(platform);
            place(&local_dir.join(file), &mirror.join(host).join("hashicorp/local").join(platform), file);
            sources.push(format!("\"{host}/hashicorp/local\""));
        }
        let hpc = provider_dir().join("terraform-provider-hpc");
        place(
            &hpc,
            &mirror.join(host).join("hpc-platform/hpc").join(version).join("linux_amd64"),
            &format!("terraform-provider-hpc_v{version}"),
        );
        sources.push(format!("\"{host}/hpc-platform/hpc\""));
    }
    let sources = sources.join(", ");
    let config = format!(
        "provider_installation {{\n  dev_overrides {{\n    \"hpc-platform/hpc\" = \"{}\"\n  }}\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [{sources}]\n  }}\n  direct {{\n    exclude = [{sources}]\n  }}\n}}\n",
        provider_dir().display(),
        mirror.display()
    );
    std::fs::write(w.dir.path().join("cli.tfrc"), config).unwrap();
}
