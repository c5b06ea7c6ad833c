//! `data "hpc_gpu_selfcheck"` through its public API: the state it reads, its diagnostics, the MIME document
//! it composes, and the script itself, run by bash against fake tools and a fake sysfs. Hermetic: no
//! network, no root; the tools that could touch the machine (logger, systemctl, poweroff, docker) are fakes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use hpc_provider::catalog::{Cloud, SKUS};
use hpc_provider::framework::codec::encode_msgpack;
use hpc_provider::framework::{Context, DataSource, Diagnostics, Severity, Value};
use hpc_provider::resources::gpu_selfcheck::{DEFAULT_DCGM_EXPORTER_IMAGE, GpuSelfcheck};
use tokio_util::sync::CancellationToken;

const CLOUD_CONFIG: &str = "#cloud-config\npackages: [htop]\n";

fn config(cloud: &str, instance_type: &str, extra: &[(&str, Value)]) -> Value {
    let mut c = Value::object([("cloud", Value::from(cloud)), ("instance_type", Value::from(instance_type))]);
    if let Value::Map(m) = &mut c {
        m.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    }
    c
}

async fn read(config: &Value) -> (Value, Diagnostics) {
    let mut d = Diagnostics::new();
    let v = GpuSelfcheck.read(&Context::new(CancellationToken::new(), None), config, &mut d).await;
    (v, d)
}

/// The state of a read that must succeed without diagnostics.
async fn state(config: &Value) -> Value {
    let (v, d) = read(config).await;
    assert!(d.is_empty(), "{d:?}");
    v
}

fn text<'a>(state: &'a Value, attr: &str) -> &'a str {
    state.get(attr).as_str().unwrap_or_else(|| panic!("{attr} is not a string: {state:?}"))
}

/// The boundary of a multipart document, from its first header.
fn boundary(doc: &str) -> &str {
    let first = doc.lines().next().unwrap();
    first.split("boundary=\"").nth(1).and_then(|b| b.strip_suffix('"')).unwrap_or_else(|| panic!("no boundary in {first:?}"))
}

/// The parts of a multipart document: (headers, body), bodies exactly as given.
fn parts(doc: &str) -> Vec<(String, String)> {
    let b = boundary(doc);
    let (_, rest) = doc.split_once(&format!("\n--{b}\n")).expect("a first part");
    let (rest, tail) = rest.rsplit_once(&format!("\n--{b}--")).expect("a closing boundary");
    assert_eq!(tail, "\n", "nothing after the closing boundary");
    rest.split(&format!("\n--{b}\n"))
        .map(|p| {
            let (headers, body) = p.split_once("\n\n").expect("headers end with a blank line");
            (headers.to_owned(), body.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn p5_expects_8_gpus_and_32_efa_devices_and_composes_with_cloud_config() {
    let c = config("aws", "p5.48xlarge", &[("install_dcgm_exporter", Value::from(true)), ("user_data", Value::from(CLOUD_CONFIG))]);
    let v = state(&c).await;
    assert_eq!(v.get("expected_gpus"), &Value::int(8));
    assert_eq!(v.get("expected_rdma_devices"), &Value::int(32));
    // Configuration comes back as given: defaults are applied inside, not written into the state.
    assert_eq!(v.get("user_data").as_str(), Some(CLOUD_CONFIG));
    assert!(v.get("on_failure").is_null());

    let script = text(&v, "script");
    assert!(script.starts_with("#!/bin/bash\n"), "{script}");
    assert!(script.contains("\nset -euo pipefail\n"));
    for line in ["EXPECTED_GPUS=8", "FABRIC=efa", "RDMA_MIN=32", "ON_FAILURE=${HPC_SELFCHECK_ON_FAILURE:-poweroff}", "GPU_VENDOR=nvidia"] {
        assert!(script.lines().any(|l| l == line), "{line} missing:\n{script}");
    }
    assert!(script.contains(&format!("DCGM_EXPORTER_IMAGE='{DEFAULT_DCGM_EXPORTER_IMAGE}'")));
    assert!(script.contains("/var/log/hpc-selfcheck.log"));

    let doc = text(&v, "combined_user_data");
    assert!(doc.starts_with("Content-Type: multipart/mixed; boundary=\""), "{doc}");
    assert_eq!(doc.lines().nth(1), Some("MIME-Version: 1.0"), "{doc}");
    let p = parts(doc);
    assert_eq!(p.len(), 2, "{doc}");
    assert!(p[0].0.starts_with("Content-Type: text/x-shellscript;"), "{}", p[0].0);
    assert_eq!(p[0].1, script, "the self-check goes first, byte for byte");
    assert!(p[1].0.starts_with("Content-Type: text/cloud-config;"), "{}", p[1].0);
    assert_eq!(p[1].1, CLOUD_CONFIG, "the user's part is kept byte for byte");

    // The state fits the schema exactly, and the composed user data is sensitive like its input.
    let schema = GpuSelfcheck.schema();
    encode_msgpack(&v, &schema.value_type()).unwrap();
    for attr in ["user_data", "combined_user_data"] {
        assert!(schema.block.find_attribute(attr).unwrap().sensitive, "{attr} must be sensitive");
    }
    assert!(!schema.block.find_attribute("script").unwrap().sensitive);
    // The same configuration reads the same, so a re-plan is empty.
    assert_eq!(state(&c).await, v);
}

#[tokio::test]
async fn without_user_data_the_document_has_the_self_check_alone() {
    let v = state(&config("azure", "Standard_ND96isr_H100_v5", &[])).await;
    let doc = text(&v, "combined_user_data");
    let p = parts(doc);
    assert_eq!(p.len(), 1, "{doc}");
    assert_eq!(p[0].1, text(&v, "script"));
    assert!(text(&v, "script").lines().any(|l| l == "DCGM_EXPORTER_IMAGE="), "no exporter unless asked for");
    assert!(text(&v, "script").lines().any(|l| l == "FABRIC=infiniband"));
    assert_eq!(v.get("expected_rdma_devices"), &Value::int(8));
}

#[tokio::test]
async fn a_script_user_data_is_a_shell_script_part_and_other_text_is_warned_about() {
    let v = state(&config("gcp", "a3-megagpu-8g", &[("user_data", Value::from("#!/bin/sh\necho hello"))])).await;
    let p = parts(text(&v, "combined_user_data"));
    assert!(p[1].0.starts_with("Content-Type: text/x-shellscript;"), "{}", p[1].0);
    assert_eq!(p[1].1, "#!/bin/sh\necho hello", "no line break added");

    let (v, d) = read(&config("gcp", "a3-megagpu-8g", &[("user_data", Value::from("echo hello\n"))])).await;
    assert!(!d.has_errors(), "{d:?}");
    assert_eq!(d.0[0].summary, "User data is not a script");
    assert_eq!(d.0[0].path.as_ref().unwrap().to_string(), "user_data");
    assert!(parts(text(&v, "combined_user_data"))[1].0.starts_with("Content-Type: text/x-shellscript;"));
}

#[tokio::test]
async fn too_much_user_data_for_aws_is_a_warning_at_user_data() {
    let big = format!("#!/bin/sh\n{}\n", "#".repeat(16 * 1024));
    let (v, d) = read(&config("aws", "p5.48xlarge", &[("user_data", Value::from(big))])).await;
    assert!(!v.is_null());
    let w = d.iter().find(|d| d.summary == "Combined user data too large").unwrap_or_else(|| panic!("{d:?}"));
    assert_eq!(w.severity, Severity::Warning);
    assert!(w.detail.contains("16 KB"), "{}", w.detail);
}

#[tokio::test]
async fn rdma_expectations_follow_the_fabric() {
    // GPUDirect-TCPXO: 8 GPU NICs, counted as gVNICs with the host NIC.
    let v = state(&config("gcp", "a3-megagpu-8g", &[])).await;
    assert_eq!(v.get("expected_rdma_devices"), &Value::int(8));
    assert!(text(&v, "script").lines().any(|l| l == "RDMA_MIN=9"));
    // Unknown in the catalog: null, and the script asks for at least one.
    let v = state(&config("oci", "BM.GPU.L40S.4", &[])).await;
    assert!(v.get("expected_rdma_devices").is_null());
    assert!(text(&v, "script").lines().any(|l| l == "RDMA_MIN=1"));
    // Fewer EFA interfaces than the card count, as the cluster allows; 0 skips the check.
    let v = state(&config("aws", "p5.48xlarge", &[("rdma_interfaces", Value::int(16))])).await;
    assert_eq!(v.get("expected_rdma_devices"), &Value::int(16));
    assert!(text(&v, "script").lines().any(|l| l == "RDMA_MIN=16"));
    let v = state(&config("aws", "p5.48xlarge", &[("rdma_interfaces", Value::int(0))])).await;
    assert!(text(&v, "script").lines().any(|l| l == "FABRIC=none"));
}

#[tokio::test]
async fn each_bad_input_is_an_error_at_its_attribute() {
    let cases: [(Value, &str, &str, &str); 6] = [
        (config("ibm", "p5.48xlarge", &[]), "cloud", "Unsupported cloud", r#""aws", "azure", "gcp" or "oci""#),
        (config("aws", "p4d.24xlarge", &[]), "instance_type", "Unsupported instance type", r#""p5.48xlarge", "p5e.48xlarge""#),
        (
            config("aws", "p5.48xlarge", &[("on_failure", Value::from("reboot"))]),
            "on_failure",
            "Unsupported failure action",
            r#""poweroff" or "log""#,
        ),
        (
            config("oci", "BM.GPU.MI300X.8", &[("install_dcgm_exporter", Value::from(true))]),
            "install_dcgm_exporter",
            "DCGM exporter needs NVIDIA GPUs",
            "AMD MI300X",
        ),
        (
            config("aws", "p5.48xlarge", &[("rdma_interfaces", Value::int(33))]),
            "rdma_interfaces",
            "Unsupported RDMA interface count",
            "0 to 32",
        ),
        (
            config("aws", "p5.48xlarge", &[("dcgm_exporter_image", Value::from("my image"))]),
            "dcgm_exporter_image",
            "Invalid container image",
            "not a container image reference",
        ),
    ];
    for (c, path, summary, detail) in cases {
        let (v, d) = read(&c).await;
        assert!(v.is_null(), "{path}");
        assert_eq!(d.0.len(), 1, "{d:?}");
        let e = &d.0[0];
        assert_eq!((e.severity, e.summary.as_str()), (Severity::Error, summary));
        assert_eq!(e.path.as_ref().unwrap().to_string(), path);
        assert!(e.detail.contains(detail), "{}", e.detail);
        // validate() reports the same, so plan stops before any read.
        let mut vd = Diagnostics::new();
        GpuSelfcheck.validate(&c, &mut vd);
        assert_eq!(vd, d);
    }
}

#[test]
fn unknown_values_pass_validation() {
    let mut d = Diagnostics::new();
    GpuSelfcheck.validate(&config("aws", "p5.48xlarge", &[("user_data", Value::Unknown)]), &mut d);
    GpuSelfcheck.validate(&Value::object([("cloud", Value::Unknown), ("instance_type", Value::Unknown)]), &mut d);
    assert!(d.is_empty(), "{d:?}");
    // Known values are still checked next to unknown ones.
    GpuSelfcheck.validate(&config("aws", "p5.48xlarge", &[("user_data", Value::Unknown), ("on_failure", Value::from("x"))]), &mut d);
    assert_eq!(d.0.len(), 1);
}

/// Any configuration: a diagnostic or a state that fits the schema, and the user's data kept byte for byte.
#[test]
fn any_configuration_reads_to_a_diagnostic_or_a_valid_state() {
    use proptest::prelude::*;
    // Mostly real node types (so most cases get through to a state), some that are not.
    let skus: Vec<(&str, &str)> = SKUS.iter().map(|s| (s.cloud.as_str(), s.name)).collect();
    let node_type = prop_oneof![
        4 => proptest::sample::select(skus),
        1 => (proptest::sample::select(vec!["aws", "gcp", "ibm"]), proptest::sample::select(vec!["", "p5", "a3-highgpu-8g"])),
    ];
    let user_data = prop_oneof![
        Just(None),
        "\\PC{0,40}".prop_map(Some),
        "(#!|#cloud-config|Content-Type: |content-type:)[ -~\\n\\r]{0,40}".prop_map(Some),
    ];
    let strategy = (
        node_type,
        proptest::option::of(any::<bool>()),
        proptest::option::weighted(0.2, "[ -~]{0,12}"),
        user_data,
        proptest::option::weighted(0.3, prop_oneof![4 => Just("poweroff".to_string()), 4 => Just("log".to_string()), 1 => "[a-z]{0,6}"]),
        proptest::option::weighted(0.3, prop_oneof![4 => (-1i64..34).prop_map(Value::int), 1 => any::<f64>().prop_map(Value::float)]),
    );
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let ty = GpuSelfcheck.schema().value_type();
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 256,
        failure_persistence: None,
        ..Default::default()
    });
    let read_ok = std::cell::Cell::new(0usize);
    runner
        .run(&strategy, |((cloud, it), dcgm, image, user, on_failure, rdma)| {
            let c = config(
                cloud,
                it,
                &[
                    ("install_dcgm_exporter", Value::from(dcgm)),
                    ("dcgm_exporter_image", Value::from(image)),
                    ("user_data", Value::from(user.clone())),
                    ("on_failure", Value::from(on_failure)),
                    ("rdma_interfaces", rdma.unwrap_or_default()),
                ],
            );
            let (v, d) = rt.block_on(read(&c));
            read_ok.set(read_ok.get() + usize::from(!d.has_errors()));
            if d.has_errors() {
                prop_assert!(v.is_null());
                prop_assert!(d.iter().all(|e| e.path.is_some()), "{d:?}");
                return Ok(());
            }
            prop_assert!(encode_msgpack(&v, &ty).is_ok());
            let p = parts(text(&v, "combined_user_data"));
            prop_assert_eq!(&p[0].1, text(&v, "script"));
            match user.as_deref().filter(|u| !u.trim().is_empty()) {
                Some(u) if !u.get(..13).is_some_and(|h| h.eq_ignore_ascii_case("content-type:")) => {
                    prop_assert_eq!(p.len(), 2);
                    prop_assert_eq!(p[1].1.as_str(), u);
                }
                Some(_) => prop_assert_eq!(p.len(), 2),
                None => prop_assert_eq!(p.len(), 1),
            }
            Ok(())
        })
        .unwrap();
    assert!(read_ok.get() > 64, "only {} of 256 cases read a state", read_ok.get());
}

// ------------------------------------------------------------------------------------ the script, run

/// A fake node: a bin directory put first on PATH, a sysfs root, and a log file, all in a temp dir.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let node = Node { dir: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(node.path("bin")).unwrap();
        // PATH holds the fakes and only the ordinary tools the script uses, so whatever GPU, RDMA or
        // container tools the machine running the tests has stay out of it.
        std::fs::create_dir_all(node.path("host")).unwrap();
        for tool in ["awk", "cat", "cut", "date", "grep", "mkdir", "readlink", "sleep", "sort", "sync", "tee", "wc"] {
            let found = host_tool(tool).unwrap_or_else(|| panic!("{tool} not found on PATH"));
            std::os::unix::fs::symlink(found, node.path("host").join(tool)).unwrap();
        }
        std::fs::create_dir_all(node.path("sys/class/infiniband")).unwrap();
        std::fs::create_dir_all(node.path("sys/class/net")).unwrap();
        // Everything that could reach outside the temp dir records its call instead.
        for tool in ["logger", "systemctl", "poweroff", "shutdown", "docker"] {
            node.tool(tool, &format!("echo \"{tool} $*\" >> \"{}\"", node.path("calls").display()));
        }
        node
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn tool(&self, name: &str, body: &str) {
        let path = self.path("bin").join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// `nvidia-smi -L` listing `n` H100s.
    fn nvidia_gpus(&self, n: usize) {
        let lines: String = (0..n).map(|i| format!("echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000{i})'\n")).collect();
        self.tool("nvidia-smi", &format!("[ \"$1\" = -L ] || exit 9\n{lines}"));
    }

    /// `nvidia-smi -L` listing `n` GB200s, and `nvidia-smi -q` with each GPU's Fabric section: `states[i]`
    /// its State, all in clique `clique` of one cluster UUID.
    fn nvlink_gpus(&self, states: &[&str], clique: &str) {
        let list: String = (0..states.len()).map(|i| format!("echo 'GPU {i}: NVIDIA GB200 (UUID: GPU-0000000{i})'\n")).collect();
        let query: String = states
            .iter()
            .enumerate()
            .map(|(i, state)| {
                format!(
                    "echo 'GPU 0000000{i}:01:00.0'\necho '    Product Name                          : NVIDIA GB200'\necho '    Fabric'\n\
                     echo '        State                             : {state}'\necho '        Status                            : Success'\n\
                     echo '        CliqueId                          : {clique}'\n\
                     echo '        ClusterUUID                       : 5a1d3c7e-0b6f-4a44-9c1e-2f6d8e9a7b10'\n\
                     echo '        Health'\necho '            Bandwidth                     : Full'\n\
                     echo '    Processes                             : None'\n"
                )
            })
            .collect();
        self.tool("nvidia-smi", &format!("if [ \"$1\" = -L ]; then\n{list}exit 0\nfi\n[ \"$1\" = -q ] || exit 9\n{query}"));
    }

    /// `systemctl is-active` answering `active` for the units given, recording every call.
    fn active_units(&self, units: &[&str]) {
        let cases: String = units.iter().map(|u| format!("  *\" {u}\"*) exit 0 ;;\n")).collect();
        self.tool(
            "systemctl",
            &format!(
                "echo \"systemctl $*\" >> \"{}\"\ncase \" $*\" in\n{cases}  *is-active*) exit 3 ;;\nesac",
                self.path("calls").display()
            ),
        );
    }

    fn rdma_devices(&self, names: impl IntoIterator<Item = String>) {
        for name in names {
            std::fs::create_dir_all(self.path("sys/class/infiniband").join(name).join("ports/1")).unwrap();
        }
    }

    /// Network interfaces and the driver each one's device is bound to, as sysfs links them.
    fn net(&self, ifaces: &[(&str, &str)]) {
        for (name, driver) in ifaces {
            let drv = self.path("sys/bus/pci/drivers").join(driver);
            std::fs::create_dir_all(&drv).unwrap();
            let dev = self.path("sys/class/net").join(name).join("device");
            std::fs::create_dir_all(&dev).unwrap();
            std::os::unix::fs::symlink(&drv, dev.join("driver")).unwrap();
        }
    }

    fn run(&self, script: &str) -> Run {
        self.run_with(script, &[("HPC_SELFCHECK_DRY_RUN", "1")])
    }

    fn run_with(&self, script: &str, env: &[(&str, &str)]) -> Run {
        let file = self.path("selfcheck.sh");
        std::fs::write(&file, script).unwrap();
        let path = format!("{}:{}", self.path("bin").display(), self.path("host").display());
        let out = Command::new(host_tool("bash").expect("bash on PATH"))
            .arg(&file)
            .env("PATH", path)
            .env("HPC_SELFCHECK_SYSFS", self.path("sys"))
            .env("HPC_SELFCHECK_LOG", self.path("log/hpc-selfcheck.log"))
            .env("HPC_SELFCHECK_WAIT_SECONDS", "0")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        Run {
            code: out.status.code(),
            output: format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
            log: std::fs::read_to_string(self.path("log/hpc-selfcheck.log")).unwrap_or_default(),
            calls: std::fs::read_to_string(self.path("calls")).unwrap_or_default(),
        }
    }
}

#[derive(Debug)]
struct Run {
    code: Option<i32>,
    output: String,
    log: String,
    calls: String,
}

impl Run {
    fn passed(&self) -> &Run {
        assert_eq!(self.code, Some(0), "{self:#?}");
        assert!(self.log.contains("HPC SELFCHECK PASSED"), "{self:#?}");
        assert!(!self.powered_off(), "{self:#?}");
        self
    }

    /// Whether the script called a power-off tool (the fakes record their calls).
    fn powered_off(&self) -> bool {
        self.calls.lines().any(|l| ["systemctl poweroff", "poweroff", "shutdown"].iter().any(|t| l.starts_with(t)))
    }

    /// The failure line, on stdout (the console) and in the log, and the dry-run power-off.
    fn failed_with(&self, reason: &str) -> &Run {
        assert_eq!(self.code, Some(1), "{self:#?}");
        let line = format!("HPC SELFCHECK FAILED: {reason}");
        assert!(self.output.lines().any(|l| l.ends_with(&line)), "{line:?} not printed: {self:#?}");
        assert!(self.log.lines().any(|l| l.ends_with(&line)), "{line:?} not logged: {self:#?}");
        assert!(self.calls.contains(&format!("logger -t hpc-selfcheck -- {line}")), "{self:#?}");
        // Dry run: the action is printed, never taken.
        assert!(!self.powered_off(), "{self:#?}");
        self
    }
}

fn efa(n: usize) -> impl Iterator<Item = String> {
    (0..n).map(|i| format!("rdmap{}s0", 16 + i))
}

async fn script_of(cloud: &str, instance_type: &str, extra: &[(&str, Value)]) -> String {
    text(&state(&config(cloud, instance_type, extra)).await, "script").to_owned()
}

#[tokio::test]
async fn every_script_is_valid_bash() {
    let dir = tempfile::tempdir().unwrap();
    for sku in SKUS {
        let nvidia = !sku.gpu_model.starts_with("MI");
        for (dcgm, on_failure) in [(false, "poweroff"), (nvidia, "log")] {
            let extra = [("install_dcgm_exporter", Value::from(dcgm)), ("on_failure", Value::from(on_failure))];
            let script = script_of(sku.cloud.as_str(), sku.name, &extra).await;
            let file = dir.path().join("selfcheck.sh");
            std::fs::write(&file, &script).unwrap();
            let out = Command::new("bash").arg("-n").arg(&file).output().unwrap();
            assert!(out.status.success(), "{}: {}\n{script}", sku.name, String::from_utf8_lossy(&out.stderr));
        }
    }
    assert!(SKUS.iter().any(|s| s.cloud == Cloud::Oci && s.gpu_model == "MI300X"), "the AMD path is covered");
}

#[tokio::test]
async fn p5_passes_with_8_gpus_and_32_efa_devices_and_starts_the_exporter() {
    let script = script_of("aws", "p5.48xlarge", &[("install_dcgm_exporter", Value::from(true))]).await;
    let node = Node::new();
    node.nvidia_gpus(8);
    node.rdma_devices(efa(32));
    let run = node.run(&script);
    run.passed();
    assert!(run.log.contains("HPC SELFCHECK PASSED: 8 GPUs, 32 EFA devices"), "{run:#?}");
    let docker_run = format!(
        "docker run -d --name hpc-dcgm-exporter --gpus all --restart unless-stopped --cap-add SYS_ADMIN -p 9400:9400 {DEFAULT_DCGM_EXPORTER_IMAGE}"
    );
    assert!(run.calls.lines().any(|l| l == docker_run), "{run:#?}");
}

#[tokio::test]
async fn a_gb200_node_checks_its_nvlink_domain_and_imex() {
    let script = script_of("azure", "Standard_ND128isr_NDR_GB200_v6", &[]).await;
    assert!(script.contains("NVLINK_DOMAIN_NODES=18"), "{script}");
    // At boot under Slurm: IMEX installed, no peers yet (the prolog gives each job its domain): it passes.
    let node = Node::new();
    node.nvlink_gpus(&["Completed"; 4], "32766");
    node.rdma_devices((0..4).map(|i| format!("mlx5_ib{i}")));
    node.tool("nvidia-imex", "exit 0");
    node.active_units(&[]);
    let run = node.run(&script);
    run.passed();
    assert!(run.log.contains("NVLink domain 5a1d3c7e-0b6f-4a44-9c1e-2f6d8e9a7b10.32766"), "{run:#?}");
    assert!(run.log.contains("IMEX installed; its domain is set per job"), "{run:#?}");
    // With peers in its node list (a job's domain, or one set across the NVLink domain), IMEX must run with them.
    let peers = node.dir.path().join("nodes_config.cfg");
    std::fs::write(&peers, "10.0.0.4\n10.0.0.5\n").unwrap();
    node.active_units(&["nvidia-imex"]);
    let at = peers.display().to_string();
    let run = node.run_with(&script, &[("HPC_SELFCHECK_DRY_RUN", "1"), ("HPC_IMEX_NODES_CONFIG", at.as_str())]);
    run.passed();
    assert!(run.calls.contains("systemctl is-active --quiet nvidia-imex"), "{run:#?}");
    node.active_units(&[]);
    node.run_with(&script, &[("HPC_SELFCHECK_DRY_RUN", "1"), ("HPC_IMEX_NODES_CONFIG", at.as_str())])
        .failed_with("the nvidia-imex service is not active while its node list names 2 peers");
}

#[tokio::test]
async fn a_gb200_node_outside_its_nvlink_fabric_or_without_imex_takes_itself_out() {
    let script = script_of("oci", "BM.GPU.GB200.4", &[]).await;
    let node = Node::new();
    node.nvlink_gpus(&["Completed", "Completed", "In Progress", "Completed"], "32766");
    node.rdma_devices((0..4).map(|i| format!("mlx5_{i}")));
    node.active_units(&[]);
    node.run(&script).failed_with(
        "NVLink fabric not completed: 3 of 4 GPUs report State Completed (nvidia-smi -q, Fabric); NVIDIA's IMEX service \
         (nvidia-imex) is not installed: multi-node NVLink jobs need it on every node of the domain",
    );
    // A clique id of all zeros' UUID, or two cliques, is no domain.
    let split = Node::new();
    split.nvlink_gpus(&["Completed"; 4], "32766");
    split.tool(
        "nvidia-smi",
        &format!(
            "if [ \"$1\" = -L ]; then\n{}exit 0\nfi\nfor i in 0 1 2 3; do echo '    Fabric'; echo '        State : Completed'; echo '        Status : Success'; \
             echo \"        CliqueId : $((i % 2))\"; echo '        ClusterUUID : 5a1d3c7e-0b6f-4a44-9c1e-2f6d8e9a7b10'; done",
            (0..4).map(|i| format!("echo 'GPU {i}: NVIDIA GB200 (UUID: GPU-{i})'\n")).collect::<String>()
        ),
    );
    split.rdma_devices((0..4).map(|i| format!("mlx5_{i}")));
    split.tool("nvidia-imex", "exit 0");
    split.active_units(&["nvidia-imex"]);
    split.run(&script).failed_with("GPUs are not in one NVLink domain: 1 ClusterUUIDs, 2 CliqueIds");
}

#[tokio::test]
async fn p5_with_7_gpus_fails_and_would_power_off() {
    let script = script_of("aws", "p5.48xlarge", &[("install_dcgm_exporter", Value::from(true))]).await;
    let node = Node::new();
    node.nvidia_gpus(7);
    node.rdma_devices(efa(32));
    let run = node.run(&script);
    run.failed_with("expected 8 GPUs, found 7");
    assert!(run.output.contains("HPC_SELFCHECK_DRY_RUN=1: would power off"), "{run:#?}");
    assert!(!run.calls.contains("docker run"), "a failed node starts no exporter: {run:#?}");
}

#[tokio::test]
async fn missing_efa_devices_and_missing_driver_are_reported_together() {
    let script = script_of("aws", "p5.48xlarge", &[]).await;
    let node = Node::new();
    node.nvidia_gpus(0);
    node.rdma_devices(efa(30));
    // A Mellanox device is not an EFA device.
    node.rdma_devices(["mlx5_0".to_string()]);
    let run = node.run(&script);
    run.failed_with("expected 8 GPUs, found 0; expected at least 32 EFA devices, found 30");
}

#[tokio::test]
async fn libfabric_must_open_every_efa_device() {
    let script = script_of("aws", "p5.48xlarge", &[]).await;
    let node = Node::new();
    node.nvidia_gpus(8);
    node.rdma_devices(efa(32));
    // fi_info lists each device twice (two fabrics), one short of 32.
    let listing: String = efa(31).map(|d| format!("provider: efa\n    fabric: efa\n    domain: {d}-rdm\n")).collect();
    let listing = format!("{listing}{listing}");
    node.tool("fi_info", &format!("[ \"$*\" = '-p efa -t FI_EP_RDM' ] || exit 9\ncat <<'EOF'\n{listing}EOF"));
    node.run(&script).failed_with("expected libfabric to open at least 32 EFA devices, fi_info -p efa lists 31");
    let listing: String = efa(32).map(|d| format!("provider: efa\n    domain: {d}-rdm\n")).collect();
    node.tool("fi_info", &format!("cat <<'EOF'\n{listing}EOF"));
    node.run(&script).passed();
}

#[tokio::test]
async fn on_failure_log_only_logs() {
    let script = script_of("azure", "Standard_ND96isr_H100_v5", &[("on_failure", Value::from("log"))]).await;
    let node = Node::new();
    node.nvidia_gpus(8);
    node.rdma_devices((0..7).map(|i| format!("mlx5_ib{i}")));
    let run = node.run(&script);
    run.failed_with("expected at least 8 InfiniBand devices, found 7");
    assert!(!run.output.contains("would power off"), "{run:#?}");
    node.rdma_devices(["mlx5_ib7".to_string(), "mlx5_an0".to_string()]);
    node.run(&script).passed();
}

#[tokio::test]
async fn a3_mega_counts_gvnic_interfaces_whatever_their_names() {
    let script = script_of("gcp", "a3-megagpu-8g", &[]).await;
    let node = Node::new();
    node.nvidia_gpus(8);
    node.net(&[("lo", "none"), ("ens4", "gve"), ("docker0", "bridge")]);
    let gpu_nics: Vec<String> = (0..7).map(|i| format!("eth{}", i + 1)).collect();
    node.net(&gpu_nics.iter().map(|n| (n.as_str(), "gve")).collect::<Vec<_>>());
    node.run(&script).failed_with("expected at least 9 gVNIC interfaces, found 8");
    node.net(&[("enp0s12", "gve")]);
    node.run(&script).passed();
}

#[tokio::test]
async fn mi300x_counts_gpus_with_amd_smi_or_rocm_smi() {
    let script = script_of("oci", "BM.GPU.MI300X.8", &[]).await;
    assert!(script.lines().any(|l| l == "GPU_VENDOR=amd"));
    let node = Node::new();
    node.rdma_devices((0..8).map(|i| format!("mlx5_{i}")));
    // rocm-smi (no amd-smi): one line per GPU and property, so GPUs are counted once each.
    let rocm: String = (0..8).map(|i| format!("echo 'GPU[{i}]\t\t: Device ID: 0x74a1'\necho 'GPU[{i}]\t\t: Device Rev: 0x00'\n")).collect();
    node.tool("rocm-smi", &rocm);
    node.run(&script).passed();
    // amd-smi, when present, is preferred.
    let amd: String = (0..6).map(|i| format!("echo 'GPU: {i}'\necho '    BDF: 0000:0{i}:00.0'\n")).collect();
    node.tool("amd-smi", &format!("[ \"$1\" = list ] || exit 9\n{amd}"));
    node.run(&script).failed_with("expected 8 GPUs, found 6");
}

#[tokio::test]
async fn the_log_file_and_the_exporter_warning_when_docker_is_missing() {
    let script = script_of("aws", "p5.48xlarge", &[("install_dcgm_exporter", Value::from(true))]).await;
    let node = Node::new();
    std::fs::remove_file(node.path("bin/docker")).unwrap();
    node.nvidia_gpus(8);
    node.rdma_devices(efa(32));
    let run = node.run(&script);
    run.passed();
    assert!(run.log.contains("WARNING: docker not found, DCGM exporter not started"), "{run:#?}");
    assert!(run.log.lines().all(|l| l.contains(" hpc-selfcheck: ")), "{}", run.log);
}

/// A tool of the machine running the tests, from its PATH.
fn host_tool(tool: &str) -> Option<PathBuf> {
    std::env::var("PATH").unwrap_or_default().split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// The verdict reaches the cloud's own per-instance channel, where the cluster's refresh reads it: the
/// node's tag through the aws CLI, its label through gcloud, its freeform tags (kept, with the verdict
/// added) through the oci CLI. The metadata servers are faked by `curl`.
#[tokio::test]
async fn the_verdict_is_published_through_each_clouds_own_channel() {
    let log = [("on_failure", Value::from("log"))];
    let node = Node::new();
    // The interpreter itself (a shim on PATH may need tools the fake node does not have).
    let python =
        Command::new(host_tool("python3").expect("python3 on PATH")).args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    let python = PathBuf::from(String::from_utf8(python.stdout).unwrap().trim());
    let calls = node.path("calls").display().to_string();
    node.tool(
        "curl",
        r#"for a in "$@"; do last=$a; done
case $last in
  */api/token) echo tok ;;
  */instance-id) echo i-0abc ;;
  */placement/region) echo us-east-1 ;;
  */instance/name) echo d2-3 ;;
  */instance/zone) echo projects/p/zones/us-central1-a ;;
  */opc/v2/instance/) echo '{"id": "ocid1.instance.oc1..n3", "freeformTags": {"team": "ml", "hpc:cluster": "d2"}}' ;;
  *) exit 22 ;;
esac"#,
    );
    for cli in ["aws", "gcloud", "oci"] {
        node.tool(cli, &format!("echo \"{cli} $*\" >> \"{calls}\""));
    }
    node.nvidia_gpus(7);
    node.rdma_devices(efa(32));
    let aws = node.run_with(&script_of("aws", "p5.48xlarge", &log).await, &[]);
    assert_eq!(aws.code, Some(1), "{aws:#?}");
    assert!(
        aws.calls.contains("aws ec2 create-tags --region us-east-1 --resources i-0abc --tags Key=hpc:selfcheck,Value=fail-gpus-7-of-8"),
        "{aws:#?}"
    );
    assert!(aws.log.contains("verdict fail-gpus-7-of-8 published"), "{aws:#?}");

    let gcp = Node::new();
    std::fs::copy(node.path("bin/curl"), gcp.path("bin/curl")).unwrap();
    let gcp_calls = gcp.path("calls").display().to_string();
    gcp.tool("gcloud", &format!("echo \"gcloud $*\" >> \"{gcp_calls}\""));
    gcp.nvidia_gpus(1);
    let run = gcp.run_with(&script_of("gcp", "g2-standard-4", &log).await, &[]);
    run.passed();
    assert!(
        run.calls.contains("gcloud compute instances add-labels d2-3 --zone us-central1-a --labels hpc-selfcheck=ok --quiet"),
        "{run:#?}"
    );

    let oci = Node::new();
    std::os::unix::fs::symlink(&python, oci.path("host").join("python3")).unwrap();
    std::fs::copy(node.path("bin/curl"), oci.path("bin/curl")).unwrap();
    let oci_calls = oci.path("calls").display().to_string();
    oci.tool("oci", &format!("echo \"oci $*\" >> \"{oci_calls}\""));
    oci.nvidia_gpus(1);
    let run = oci.run_with(&script_of("oci", "VM.GPU.A10.1", &log).await, &[]);
    run.passed();
    let update = run.calls.lines().find(|l| l.starts_with("oci compute instance update")).unwrap_or_else(|| panic!("{run:#?}"));
    assert!(update.contains("--instance-id ocid1.instance.oc1..n3") && update.contains("--auth instance_principal"), "{update}");
    assert!(update.contains(r#""hpc:selfcheck": "ok""#) && update.contains(r#""team": "ml""#), "the other tags are kept: {update}");

    // Without permission (the CLI fails) the check's outcome stands, with a warning.
    let denied = Node::new();
    std::fs::copy(node.path("bin/curl"), denied.path("bin/curl")).unwrap();
    denied.tool("aws", "exit 255");
    denied.nvidia_gpus(8);
    denied.rdma_devices(efa(32));
    let run = denied.run_with(&script_of("aws", "p5.48xlarge", &log).await, &[]);
    run.passed();
    assert!(run.log.contains("WARNING: could not publish the verdict ok"), "{run:#?}");
    // publish_verdict = false keeps it on the node.
    let quiet = node.run_with(
        &script_of("aws", "p5.48xlarge", &[("on_failure", Value::from("log")), ("publish_verdict", Value::from(false))]).await,
        &[],
    );
    assert!(quiet.log.contains("verdict fail-gpus-7-of-8 (not published)"), "{quiet:#?}");
}
