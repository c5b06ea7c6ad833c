//! Installing the provider the way users do: `scripts/release.sh` makes a release of the binary cargo built
//! for these tests (zip, SHA256SUMS, their GPG signature with a throwaway key, the registry manifest), and
//! `scripts/registry.py` serves it over HTTPS on 127.0.0.1 as a provider registry and as a network mirror.
//! The CLIs `init` a configuration that says only `source = "hpc-platform/hpc"` and the version, and then
//! plan, apply and destroy on the AWS emulator with what they installed; an archive changed after the
//! release and a signature by another key are refused with the CLI's own error. One release serves every
//! case; each case serves its own copy of it on a port of its own.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

use base64::Engine;
use hpc_emulators::harness::{admin, start_aws};

use crate::cli::{Cli, Workdir, assert_nodes, fold};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sha256_hex(data: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The CLIs' `h1:` hash of a provider package, computed here from the binary alone (Go's dirhash Hash1:
/// sha256 over "<sha256 hex>  <name>\n" per file): a lock file that holds it proves the archive held exactly
/// this binary under this name.
fn h1_of_binary() -> String {
    let binary = std::fs::read(&shared().binary).unwrap();
    let summary = format!("{}  terraform-provider-hpc_v{VERSION}\n", sha256_hex(&binary));
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, summary.as_bytes());
    format!("h1:{}", base64::engine::general_purpose::STANDARD.encode(digest.as_ref()))
}

fn zip_name() -> String {
    format!("terraform-provider-hpc_{VERSION}_linux_amd64.zip")
}

fn sums_name() -> String {
    format!("terraform-provider-hpc_{VERSION}_SHA256SUMS")
}

/// A tool the cases need from the machine, or a failure that says which and why.
fn require(tool: &str, why: &str) {
    let found = Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    assert!(found, "{tool} is not on PATH: {why}");
}

/// A GnuPG keyring of its own in a temporary directory, with one passphrase-less signing key.
struct Keyring {
    home: tempfile::TempDir,
    fingerprint: String,
}

impl Keyring {
    fn new(name: &str) -> Keyring {
        require("gpg", "the install cases sign their release with a throwaway GnuPG key (Debian: apt-get install gnupg)");
        // Short: gpg-agent's socket lives in it.
        let home = tempfile::Builder::new().prefix("hpc-gpg-").tempdir().unwrap();
        let gen_key = Command::new("gpg")
            .env("GNUPGHOME", home.path())
            .args(["--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key"])
            .arg(format!("{name} <{name}@hpc-provider.invalid>"))
            .args(["rsa3072", "sign", "never"])
            .output()
            .unwrap();
        assert!(gen_key.status.success(), "gpg --quick-gen-key: {}", String::from_utf8_lossy(&gen_key.stderr));
        let listed = Command::new("gpg").env("GNUPGHOME", home.path()).args(["--batch", "--with-colons", "--list-keys"]).output().unwrap();
        let fingerprint = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("fpr:").map(|rest| rest.trim_matches(':').to_owned()))
            .unwrap_or_else(|| panic!("no key in {}: {}", home.path().display(), String::from_utf8_lossy(&listed.stdout)));
        let keyring = Keyring { home, fingerprint };
        keyring.stop_agent();
        keyring
    }

    /// gpg starts an agent for the keyring on first use; it is stopped after each use so none outlives the tests.
    fn stop_agent(&self) {
        let _ = Command::new("gpgconf").arg("--homedir").arg(self.home.path()).args(["--kill", "gpg-agent"]).status();
    }

    /// A detached binary signature of `file` by this keyring's key.
    fn sign(&self, file: &Path, signature: &Path) {
        let out = Command::new("gpg")
            .env("GNUPGHOME", self.home.path())
            .args(["--batch", "--yes", "--quiet", "--local-user", &self.fingerprint, "--detach-sign", "--output"])
            .arg(signature)
            .arg(file)
            .output()
            .unwrap();
        self.stop_agent();
        assert!(out.status.success(), "gpg --detach-sign: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// Runs `scripts/release.sh --out <out>` on `binary`, signing with `key`.
fn run_release(binary: &Path, key: &Keyring, out: &Path) -> std::process::Output {
    let output = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .arg("--out")
        .arg(out)
        .env("HPC_RELEASE_BINARY", binary)
        .env("GNUPGHOME", key.home.path())
        .env("HPC_RELEASE_KEY", &key.fingerprint)
        .env_remove("HPC_RELEASE_DEMO")
        .env_remove("HPC_STAGE_FILE")
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap();
    key.stop_agent();
    output
}

/// One release for every case, of a copy of the binary cargo built for this test run (the copy: a build
/// beside the tests may replace cargo's file), the key that signed it, and a CA with a certificate for
/// 127.0.0.1 that the registry serves and the CLIs trust (SSL_CERT_FILE).
struct Shared {
    binary: PathBuf,
    dir: PathBuf,
    key: Keyring,
    other_key: Keyring,
    ca: PathBuf,
    cert: PathBuf,
    cert_key: PathBuf,
    _tmp: tempfile::TempDir,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        require("python3", "scripts/release.sh makes the zips and scripts/registry.py serves them with Python's standard library");
        let tmp = tempfile::Builder::new().prefix("hpc-release-").tempdir().unwrap();
        let key = Keyring::new("release");
        let binary = tmp.path().join("terraform-provider-hpc");
        std::fs::copy(env!("CARGO_BIN_EXE_terraform-provider-hpc"), &binary).unwrap();
        let dir = tmp.path().join("dist");
        let out = run_release(&binary, &key, &dir);
        assert!(
            out.status.success(),
            "scripts/release.sh failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "install tests' CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let mut leaf_params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        leaf_params.distinguished_name.push(rcgen::DnType::CommonName, "127.0.0.1");
        let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
        let (ca_pem, cert, cert_key) = (tmp.path().join("ca.pem"), tmp.path().join("cert.pem"), tmp.path().join("key.pem"));
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        std::fs::write(&cert, leaf.pem()).unwrap();
        std::fs::write(&cert_key, leaf_key.serialize_pem()).unwrap();

        let other_key = Keyring::new("someone-else");
        Shared { binary, dir, key, other_key, ca: ca_pem, cert, cert_key, _tmp: tmp }
    })
}

/// `scripts/registry.py` serving a copy of the release (changed by `tamper` first), until dropped.
struct Registry {
    url: String,
    child: Child,
    _stdin: ChildStdin,
    /// The copy it serves.
    dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start(tamper: impl FnOnce(&Path)) -> Registry {
        let s = shared();
        let dir = tempfile::Builder::new().prefix("hpc-served-").tempdir().unwrap();
        for entry in std::fs::read_dir(&s.dir).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
        tamper(dir.path());
        let mut child = Command::new("python3")
            .arg(root().join("scripts/registry.py"))
            .arg(dir.path())
            .arg("--cert")
            .arg(&s.cert)
            .arg("--key")
            .arg(&s.cert_key)
            .arg("--exit-with-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start scripts/registry.py");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        let url = first.trim().to_owned();
        assert!(url.starts_with("https://127.0.0.1:"), "scripts/registry.py printed {first:?} instead of its URL");
        let stdin = child.stdin.take().unwrap();
        Registry { url, child, _stdin: stdin, dir }
    }
}

/// The registry protocol for both CLIs' default hosts: `source = "hpc-platform/hpc"` resolves here.
fn registry_config(url: &str) -> String {
    ["registry.opentofu.org", "registry.terraform.io"]
        .map(|host| format!("host \"{host}\" {{\n  services = {{\n    \"providers.v1\" = \"{url}/v1/providers/\"\n  }}\n}}\n"))
        .concat()
}

/// The network mirror for the provider, every other provider direct.
fn mirror_config(url: &str) -> String {
    let ours = "\"registry.opentofu.org/hpc-platform/hpc\", \"registry.terraform.io/hpc-platform/hpc\"";
    format!(
        "provider_installation {{\n  network_mirror {{\n    url     = \"{url}/mirror/\"\n    include = [{ours}]\n  }}\n  direct {{\n    exclude = [{ours}]\n  }}\n}}\n"
    )
}

/// A configuration that pins the provider by version only, as a user's does, with a fabric and a 2-node
/// cluster on the AWS emulator.
fn configuration() -> String {
    format!(
        r#"terraform {{
  required_providers {{
    hpc = {{
      source  = "hpc-platform/hpc"
      version = "{VERSION}"
    }}
  }}
}}

variable "endpoint" {{ type = string }}

provider "hpc" {{
  aws {{
    region     = "us-east-1"
    endpoint   = var.endpoint
    access_key = "test"
    secret_key = "test"
  }}
}}

resource "hpc_gpu_fabric" "f" {{
  name          = "installed"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "p5.48xlarge"
}}

resource "hpc_gpu_cluster" "c" {{
  name       = "installed"
  fabric     = hpc_gpu_fabric.f
  node_count = 2
  image      = "ami-12c6146b"
}}

output "nodes" {{ value = hpc_gpu_cluster.c.nodes }}
"#
    )
}

/// A working directory with the configuration and `cli_config`, trusting the tests' CA, its provider
/// pointed at the AWS emulator at `endpoint` (a case that only runs `init` needs none).
fn workdir(cli: &Cli, cli_config: &str, endpoint: Option<&str>) -> Workdir {
    let mut w = Workdir::new(cli, "empty").env("SSL_CERT_FILE", &shared().ca.display().to_string());
    if let Some(endpoint) = endpoint {
        w = w.env("TF_VAR_endpoint", endpoint);
    }
    w.write("main.tf", &configuration());
    std::fs::write(w.dir.path().join("cli.tfrc"), cli_config).unwrap();
    w
}

fn registry_host(cli: &Cli) -> &'static str {
    if cli.opentofu { "registry.opentofu.org" } else { "registry.terraform.io" }
}

/// The hashes `.terraform.lock.hcl` records for `address`, after checking the block's version.
fn locked_hashes(w: &Workdir, address: &str) -> std::collections::BTreeSet<String> {
    let lock = std::fs::read_to_string(w.path().join(".terraform.lock.hcl")).expect("init wrote no .terraform.lock.hcl");
    let start = lock.find(&format!("provider \"{address}\" {{")).unwrap_or_else(|| panic!("no {address} in the lock file:\n{lock}"));
    let block = &lock[start..start + lock[start..].find("\n}").unwrap()];
    assert!(fold(block).contains(&format!("version = \"{VERSION}\" constraints = \"{VERSION}\"")), "{block}");
    block.split('"').filter(|s| s.starts_with("h1:") || s.starts_with("zh:")).map(str::to_owned).collect()
}

/// What `init` unpacked is this test run's binary, executable.
fn assert_installed_binary(w: &Workdir, address: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = w.path().join(format!(".terraform/providers/{address}/{VERSION}/linux_amd64/terraform-provider-hpc_v{VERSION}"));
    let installed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(installed == std::fs::read(&shared().binary).unwrap(), "{} is not the released binary", path.display());
    assert!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o111 != 0, "{} is not executable", path.display());
}

/// Plan, apply, an empty re-plan and destroy with the provider `init` installed, on the AWS emulator; then
/// `init` again keeps what the lock file says.
fn lifecycle(w: &Workdir, endpoint: &str) {
    let plan = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0);
    assert!(plan.stdout.contains("Plan: 2 to add, 0 to change, 0 to destroy."), "{}", plan.stdout);
    // Installed, not overridden: the CLIs warn of dev_overrides on every command.
    assert!(!plan.output().contains("Provider development overrides"), "{}", plan.output());
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
    let out: serde_json::Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_nodes(&out, &["installed-0", "installed-1"]);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_eq!(admin(endpoint, "GET", "inventory", None)["empty"], true, "the emulator still holds something after destroy");
    let again = w.run(&["init", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(again.contains("Reusing previous version of hpc-platform/hpc from the dependency lock file"), "{again}");
    assert!(again.contains(&format!("Using previously-installed hpc-platform/hpc v{VERSION}")), "{again}");
}

/// (a) `init` from the provider network mirror.
pub fn install_from_a_network_mirror(cli: &Cli) {
    let registry = Registry::start(|_| {});
    let emulator = start_aws();
    let w = workdir(cli, &mirror_config(&registry.url), Some(&emulator.endpoint));
    let init = w.run(&["init", "-no-color", "-input=false"]).expect_code(0);
    assert!(init.stdout.contains(&format!("- Installed hpc-platform/hpc v{VERSION} (verified checksum)")), "{}", init.output());
    let address = format!("{}/hpc-platform/hpc", registry_host(cli));
    let zip = std::fs::read(shared().dir.join(zip_name())).unwrap();
    // The mirror lists the h1: and zh: hashes; OpenTofu records both, Terraform only the h1: it computed
    // itself from the package (it records a mirror's hashes only for signed packages).
    let mut expected = std::collections::BTreeSet::from([h1_of_binary()]);
    if cli.opentofu {
        expected.insert(format!("zh:{}", sha256_hex(&zip)));
    }
    assert_eq!(locked_hashes(&w, &address), expected, "{}", init.output());
    assert_installed_binary(&w, &address);
    lifecycle(&w, &emulator.endpoint);
}

/// (b) `init` from the registry protocol: the download is checked against SHA256SUMS and their signature
/// by the key the registry gives.
pub fn install_from_the_registry(cli: &Cli) {
    let registry = Registry::start(|_| {});
    let emulator = start_aws();
    let w = workdir(cli, &registry_config(&registry.url), Some(&emulator.endpoint));
    let init = w.run(&["init", "-no-color", "-input=false"]).expect_code(0);
    let key_id = &shared().key.fingerprint[24..];
    // OpenTofu calls a community key "signed"; Terraform "self-signed" (no partner trust signature).
    let how = if cli.opentofu { "signed" } else { "self-signed" };
    let installed = format!("- Installed hpc-platform/hpc v{VERSION} ({how}, key ID {key_id})");
    assert!(init.stdout.contains(&installed), "{installed:?} missing:\n{}", init.output());
    let address = format!("{}/hpc-platform/hpc", registry_host(cli));
    // Every archive of the signed SHA256SUMS (the zips and the manifest) as zh:, and the package's h1:.
    let zip = std::fs::read(shared().dir.join(zip_name())).unwrap();
    let manifest = std::fs::read(shared().dir.join(format!("terraform-provider-hpc_{VERSION}_manifest.json"))).unwrap();
    let expected =
        std::collections::BTreeSet::from([h1_of_binary(), format!("zh:{}", sha256_hex(&zip)), format!("zh:{}", sha256_hex(&manifest))]);
    assert_eq!(locked_hashes(&w, &address), expected, "{}", init.output());
    assert_installed_binary(&w, &address);
    lifecycle(&w, &emulator.endpoint);
}

/// An archive whose contents are this test run's binary with one byte more: a well-formed provider
/// package, which only the checksums tell from the released one.
fn swap_in_another_binary(dir: &Path) {
    let script = r#"
import sys, zipfile
path, name = sys.argv[1], sys.argv[2]
with open(sys.argv[3], "rb") as f:
    data = f.read() + b"\0"
info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
info.create_system, info.external_attr = 3, (0o100755 & 0xFFFF) << 16
with zipfile.ZipFile(path, "w") as z:
    z.writestr(info, data)
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(dir.join(zip_name()))
        .arg(format!("terraform-provider-hpc_v{VERSION}"))
        .arg(&shared().binary)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn assert_refused(w: &Workdir, message: &str) {
    let init = w.run(&["init", "-no-color", "-input=false"]).expect_code(1);
    let text = fold(&init.output());
    assert!(text.contains("Error: Failed to install provider"), "{}", init.output());
    assert!(text.contains(&fold(message)), "{message:?} missing:\n{}", init.output());
    // OpenTofu leaves its install lock (`linux_amd64.lock`) behind, but no package.
    let installed: Vec<PathBuf> = walk_files(&w.path().join(".terraform/providers"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("terraform-provider-hpc")))
        .collect();
    assert!(installed.is_empty(), "a refused provider was installed: {installed:?}");
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flat_map(|e| {
            let path = e.unwrap().path();
            if path.is_dir() { walk_files(&path) } else { vec![path] }
        })
        .collect()
}

/// (c) An archive that differs from what SHA256SUMS says, served by the registry and by the mirror, and
/// with SHA256SUMS rewritten to match it (the signature then no longer does): `init` refuses each.
pub fn install_refuses_a_tampered_archive(cli: &Cli) {
    let genuine = sha256_hex(&std::fs::read(shared().dir.join(zip_name())).unwrap());
    let registry = Registry::start(swap_in_another_binary);
    let served = sha256_hex(&std::fs::read(registry.dir.path().join(zip_name())).unwrap());
    assert_ne!(served, genuine);

    let w = workdir(cli, &registry_config(&registry.url), None);
    assert_refused(&w, &format!("archive has incorrect checksum zh:{served} (expected zh:{genuine})"));

    let w = workdir(cli, &mirror_config(&registry.url), None);
    assert_refused(&w, &format!("provider package doesn't match the expected checksum \"zh:{genuine}\""));

    let rewritten = Registry::start(|dir| {
        swap_in_another_binary(dir);
        let sums = dir.join(sums_name());
        let text = std::fs::read_to_string(&sums).unwrap();
        let served = sha256_hex(&std::fs::read(dir.join(zip_name())).unwrap());
        std::fs::write(&sums, text.replace(&genuine, &served)).unwrap();
    });
    let w = workdir(cli, &registry_config(&rewritten.url), None);
    assert_refused(&w, "openpgp: invalid signature");
}

/// (d) SHA256SUMS signed by a key other than the one the registry gives: `init` refuses the package.
pub fn install_refuses_a_signature_by_another_key(cli: &Cli) {
    let registry = Registry::start(|dir| {
        let sums = dir.join(sums_name());
        shared().other_key.sign(&sums, &dir.join(format!("{}.sig", sums_name())));
    });
    let w = workdir(cli, &registry_config(&registry.url), None);
    assert_refused(&w, "authentication signature from unknown issuer");
}

/// The one entry of a zip: name, Unix mode, time and sha256 of the contents, as Python's zipfile reads it.
fn zip_entries(zip: &Path) -> String {
    let script = r#"
import hashlib, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for i in z.infolist():
        print(i.filename, oct(i.external_attr >> 16), i.date_time, hashlib.sha256(z.read(i)).hexdigest())
"#;
    let out = Command::new("python3").args(["-c", script]).arg(zip).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// (e) The release is reproducible: a second run (later, elsewhere) gives the same zip and SHA256SUMS; the
/// zip holds the binary alone, executable, at the last commit's time.
#[test]
fn install_release_archives_are_reproducible() {
    let s = shared();
    let again = tempfile::Builder::new().prefix("hpc-release-again-").tempdir().unwrap();
    let out = run_release(&s.binary, &s.key, again.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for file in [zip_name(), sums_name()] {
        let (a, b) = (std::fs::read(s.dir.join(&file)).unwrap(), std::fs::read(again.path().join(&file)).unwrap());
        assert!(a == b, "{file} differs between two releases of the same binary");
    }
    let sums = std::fs::read_to_string(s.dir.join(sums_name())).unwrap();
    let listed: Vec<&str> = sums.lines().map(|l| l.split_once("  ").unwrap().1).collect();
    assert_eq!(listed, [zip_name(), format!("terraform-provider-hpc_{VERSION}_manifest.json")], "{sums}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.dir.join(format!("terraform-provider-hpc_{VERSION}_manifest.json"))).unwrap()).unwrap();
    assert_eq!(manifest, serde_json::json!({"version": 1, "metadata": {"protocol_versions": ["6.0"]}}));

    let committed = Command::new("git")
        .arg("-C")
        .arg(root())
        .args(["log", "-1", "--format=%cd", "--date=format-local:%Y, %-m, %-d, %-H, %-M"])
        .env("TZ", "UTC")
        .output()
        .unwrap();
    let time = String::from_utf8_lossy(&committed.stdout).trim().to_owned();
    let entries = zip_entries(&s.dir.join(zip_name()));
    let binary = sha256_hex(&std::fs::read(&s.binary).unwrap());
    assert!(entries.starts_with(&format!("terraform-provider-hpc_v{VERSION} 0o100755 (")), "{entries}");
    assert!(entries.trim_end().ends_with(&binary) && entries.lines().count() == 1, "{entries}");
    assert!(entries.contains(&format!("({time}, ")), "entry time is not the last commit's ({time}): {entries}");
    // Only the platform built here; the others are named, each with the reason.
    let said = String::from_utf8_lossy(&out.stdout);
    for platform in ["darwin_arm64", "windows_amd64", "linux_arm64"] {
        assert!(said.contains(&format!("{platform}: not built: ")), "{said}");
    }
}

/// Runs release.sh in a copy of the tree whose Cargo.toml and CHANGELOG.md went through `cargo` and
/// `changelog`; asserts it is refused and leaves nothing behind, and returns what it said.
fn refused_release(cargo: impl Fn(&str) -> String, changelog: impl Fn(&str) -> String) -> String {
    let s = shared();
    let tree = tempfile::Builder::new().prefix("hpc-release-tree-").tempdir().unwrap();
    for dir in ["scripts", "acceptance/tools/tofu", "acceptance/tools/local-provider"] {
        std::fs::create_dir_all(tree.path().join(dir)).unwrap();
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, tree.path().join(dir).join(path.file_name().unwrap())).unwrap();
            }
        }
    }
    std::fs::copy(root().join("terraform-registry-manifest.json"), tree.path().join("terraform-registry-manifest.json")).unwrap();
    for (file, edit) in [("Cargo.toml", &cargo as &dyn Fn(&str) -> String), ("CHANGELOG.md", &changelog)] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        std::fs::write(tree.path().join(file), edit(&text)).unwrap();
    }
    let out = Command::new("bash")
        .arg(tree.path().join("scripts/release.sh"))
        .arg("--out")
        .arg(tree.path().join("dist"))
        .env("HPC_RELEASE_BINARY", &s.binary)
        .env("GNUPGHOME", s.key.home.path())
        .env("HPC_RELEASE_KEY", &s.key.fingerprint)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("HPC_RELEASE_DEMO")
        .env_remove("HPC_STAGE_FILE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(walk_files(&tree.path().join("dist")).is_empty(), "a refused release left files behind");
    err
}

/// Without a named key a release is refused, saying how to name one or ask for a demo release, and writes
/// nothing: it never signs with a throwaway key unless asked.
#[test]
fn install_release_is_refused_without_a_signing_key() {
    let s = shared();
    let out_dir = tempfile::Builder::new().prefix("hpc-release-nokey-").tempdir().unwrap();
    let dist = out_dir.path().join("dist");
    let out = Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .arg("--out")
        .arg(&dist)
        .env("HPC_RELEASE_BINARY", &s.binary)
        .env_remove("HPC_RELEASE_KEY")
        .env_remove("HPC_RELEASE_DEMO")
        .env_remove("HPC_STAGE_FILE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no signing key") && err.contains("HPC_RELEASE_KEY") && err.contains("--demo"), "{err}");
    assert!(!dist.exists(), "a refused release made {}", dist.display());
}

/// A release whose version has no entry in CHANGELOG.md is refused before anything is built.
#[test]
fn install_release_is_refused_without_a_changelog_entry() {
    let bump = |cargo: &str| {
        let bumped = cargo.replacen(&format!("version = \"{VERSION}\""), "version = \"99.0.0\"", 1);
        assert_ne!(bumped, cargo);
        bumped
    };
    let err = refused_release(bump, str::to_owned);
    assert!(err.contains(&format!("CHANGELOG.md's newest entry is '## {VERSION} (")) && err.contains("not version 99.0.0"), "{err}");
}

/// A version whose CHANGELOG entry is still headed "(Unreleased)" is not released.
#[test]
fn install_release_is_refused_while_the_changelog_says_unreleased() {
    let undate = |changelog: &str| {
        let heading = changelog.lines().find(|l| l.starts_with("## ")).unwrap();
        changelog.replacen(heading, &format!("## {VERSION} (Unreleased)"), 1)
    };
    let err = refused_release(str::to_owned, undate);
    assert!(err.contains(&format!("CHANGELOG.md's entry for {VERSION} is headed (Unreleased)")), "{err}");
}
