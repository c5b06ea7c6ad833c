//! The node side as files (`node/`): every program a host runs passes shellcheck (Debian's, which the test
//! command installs), holds to `set -u`, and so does the user data the provider renders from them, with its
//! settings quoted whatever they hold. What the programs do is proven on booted hosts (acceptance, `slurm_`).

use std::path::{Path, PathBuf};
use std::process::Command;

use hpc_provider::catalog::{self, Cloud};
use hpc_provider::clouds::slurm::{Role, join_script, setup_script, with_settings};
use hpc_provider::model::{FabricRef, Placement, SlurmJoin, SlurmSpec, TopologyChoice};
use hpc_provider::redact::Secret;

fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// shellcheck's findings on `text` (as a file named `name`), or none.
fn shellcheck(name: &str, text: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let out = Command::new("shellcheck")
        .arg("--shell=bash")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("shellcheck: {e}: the test command installs Debian's shellcheck (apt-get install shellcheck)"));
    if out.status.success() { Ok(()) } else { Err(format!("{name}:\n{}", String::from_utf8_lossy(&out.stdout))) }
}

fn node_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(node_dir()).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_none_or(|e| e == "sh")).collect();
    files.sort();
    files
}

#[test]
fn every_node_program_passes_shellcheck_and_stops_on_an_unset_variable() {
    let files = node_files();
    assert!(files.len() >= 4, "{files:?}");
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(text.starts_with("#!/bin/bash\n"), "{}: not a bash script", f.display());
        let strict = text.lines().any(|l| l.starts_with("set -") && l.split_whitespace().nth(1).is_some_and(|o| o.contains('u')));
        // Slurm runs the health check with an empty environment: it reads only what it sets itself.
        if !strict && !f.ends_with("hpc-slurm-healthcheck") {
            problems.push(format!("{}: no set -u", f.display()));
        }
        if let Err(e) = shellcheck(&f.file_name().unwrap().to_string_lossy(), &text) {
            problems.push(e);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn spec(cloud: Cloud, sku: &str) -> SlurmSpec {
    let sku = catalog::find_sku(cloud, sku).unwrap();
    SlurmSpec {
        name: "ml".into(),
        fabric: FabricRef { name: "f".into(), cloud, region: "r".into(), zone: None, sku, placement: Placement::Cluster },
        cidr: "10.0.0.0/16".into(),
        version: catalog::slurm::find("22.05").unwrap(),
        controller_type: "c".into(),
        backup: false,
        // What a value with quotes and expansions in it becomes: the same text on the host.
        state_save_location: "/var/spool/it's $(not run)".into(),
        login_type: "c".into(),
        login_nodes: 1,
        partitions: vec![],
        topology: TopologyChoice::Auto,
        health_check_interval: 300,
        image: None,
        ssh_public_key: None,
        tags: Default::default(),
        key: None,
        custom_settings: Default::default(),
        accounting: false,
    }
}

#[test]
fn the_user_data_rendered_from_them_passes_shellcheck_on_every_cloud() {
    let clouds = [
        (Cloud::Aws, "p5.48xlarge"),
        (Cloud::Gcp, "a3-highgpu-8g"),
        (Cloud::Azure, "Standard_ND96isr_H100_v5"),
        (Cloud::Oci, "BM.GPU.H100.8"),
    ];
    let mut problems = Vec::new();
    for (cloud, sku) in clouds {
        let s = spec(cloud, sku);
        for role in [Role::Controller, Role::Login] {
            let text = setup_script(&s, role, "ml-controller", Some("a2V5"));
            if let Err(e) = shellcheck(&format!("setup-{cloud}-{}.sh", role.as_str()), &text) {
                problems.push(e);
            }
        }
        let join = SlurmJoin { controllers: vec!["10.0.255.244".into()], key: Some(Secret::new("a2V5".into())) };
        if let Err(e) = shellcheck(&format!("join-{cloud}.sh"), &join_script(cloud, "train", &join, 100)) {
            problems.push(e);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn settings_reach_the_script_as_written_whatever_they_hold() {
    let tricky = "it's \"$(touch /tmp/hpc-should-not-exist)\" `x` $HOME \\ \n next line";
    let script = "#!/bin/bash\n# a comment\nset -eu\nprintf '%s' \"$HPC_X\"\n";
    let rendered = with_settings("test", &[("HPC_X", tricky.to_owned())], script);
    let out = Command::new("bash").arg("-c").arg(&rendered).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), tricky);
    assert!(!rendered.contains("# a comment"), "comments stay in the file, not in the user data: {rendered}");
}

/// The MAC check `hpc-slurm-sync` runs (its Python, read from the program itself) on the text a payload
/// decodes to: the result and what it says.
fn sync_mac_check(text: &[u8], key: &[u8]) -> (bool, String) {
    let program = std::fs::read_to_string(node_dir().join("hpc-slurm-sync")).unwrap();
    let start = program.find("python3 -c '").expect("hpc-slurm-sync checks the MAC with python3 -c") + "python3 -c '".len();
    let code = &program[start..start + program[start..].find("\n' \"$key\"").expect("the check's end")];
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("munge.key");
    std::fs::write(&key_file, key).unwrap();
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(code)
        .arg(&key_file)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(text).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The text a payload carries (base64 of gzip).
fn payload_text(payload: &str) -> Vec<u8> {
    use base64::Engine;
    use std::io::Read as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(payload).unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut text).unwrap();
    text
}

/// A controller takes the provider's configuration and refuses one that whoever may write its tags or
/// metadata put there: made under another key, altered after it was made, or carrying no MAC.
#[test]
fn the_sync_program_takes_the_providers_configuration_and_refuses_a_forged_one() {
    use hpc_provider::clouds::slurm::config_payload;
    let key = b"the cluster's munge key, 32 bytes and more of it";
    // A file that ends with a blank line: the check reads bytes, not a shell variable.
    let files = vec![("slurm.conf", "ClusterName=ml\nSlurmctldHost=ml-controller\n\n".to_owned()), ("gres.conf", String::new())];
    let genuine = payload_text(&config_payload(&files, key).payload);
    assert_eq!(sync_mac_check(&genuine, key), (true, String::new()));

    let (ok, said) = sync_mac_check(&payload_text(&config_payload(&files, b"another key").payload), key);
    assert!(!ok && said.contains("does not verify"), "{said}");

    let altered = String::from_utf8(genuine.clone())
        .unwrap()
        .replace("SlurmctldHost=ml-controller\n", "SlurmctldHost=ml-controller\nProlog=/tmp/x\n");
    let (ok, said) = sync_mac_check(altered.as_bytes(), key);
    assert!(!ok && said.contains("does not verify"), "{said}");

    let text = String::from_utf8(genuine).unwrap();
    let unsigned: String = text.lines().filter(|l| !l.starts_with("# hpc-slurm-mac ")).map(|l| format!("{l}\n")).collect();
    let (ok, said) = sync_mac_check(unsigned.as_bytes(), key);
    assert!(!ok && said.contains("carries no MAC"), "{said}");

    let (ok, said) = sync_mac_check(text.as_bytes(), b"");
    assert!(!ok, "an empty key file verifies nothing: {said}");
}
