//! A real Slurm on 127.0.0.1 (Debian's `slurmctld`, `slurmd`, `munge`, which the test command installs),
//! run with the configuration a plan or an apply rendered, to ask Slurm's own commands what it made of it.
//!
//! What is changed in the rendered configuration, and only that, because this machine is not the cloud:
//! the controller's host is this machine (slurmctld serves only where its host name is a `SlurmctldHost`),
//! ports, state, spool, pid and log paths are a temporary directory's, Slurm runs as root, the process
//! tracking and task plugins are `linuxproc` and `none` (the cgroup plugins need systemd's cgroup
//! delegation, which a test machine has not), the GPU device files are this directory's (NVIDIA's and AMD's,
//! as their drivers lay them out), the health
//! check runs every 5 seconds, `SlurmdParameters=config_overrides` lets this machine register as
//! the node type it is not, and accounting is off (`AccountingStorage*`, `JobAcctGather*` left out: slurmdbd
//! and its MariaDB run on the booted controllers of the acceptance suite, `slurm_boots_`, not here). The node itself fetches everything else from the controller (configless), as
//! a cloud node does.
//!
//! Another version runs from a root that holds it (`Install::Root`: Debian 13's 24.11 in a root the test
//! command makes with `mmdebstrap` from Debian's packages, `HPC_SLURM_24_11_ROOT`): its programs are run
//! with `chroot`, slurmd in a mount namespace of its own with /proc and /sys (hwloc reads them), its munged
//! is the root's, its files are in a directory under the root's /tmp. There, also, `CgroupPlugin=disabled`
//! (24.11's slurmd starts the cgroup plugin even when nothing uses it) and the health check is `/bin/true`
//! (the self-check's fakes are this machine's; the drain is tested on 22.05).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The rendered files of one Slurm cluster.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    pub slurm_conf: String,
    pub gres_conf: String,
    pub cgroup_conf: String,
    pub topology_conf: Option<String>,
    /// `topology.yaml` (25.05 and later), when the configuration has one.
    pub topology_yaml: Option<String>,
    pub healthcheck: String,
}

/// Where Slurm's programs are: this machine's (Debian 12's 22.05), or a root that holds another version.
#[derive(Clone, Debug)]
pub enum Install {
    Host,
    Root(PathBuf),
}

impl Install {
    /// Debian 13's Slurm 24.11, in the root the test command makes (`HPC_SLURM_24_11_ROOT`).
    /// Debian testing's Slurm (26.05 when this was written; `topology.yaml`), in the root the test command
    /// makes (`HPC_SLURM_TESTING_ROOT`).
    pub fn slurm_testing() -> Install {
        let root = std::env::var_os("HPC_SLURM_TESTING_ROOT").map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "HPC_SLURM_TESTING_ROOT is not set: ./scripts/test.sh makes Debian testing's Slurm root with mmdebstrap (scripts/lib.sh, \
                 ensure_slurm_testing) and sets it"
            )
        });
        assert!(root.join("usr/sbin/slurmctld").exists(), "{}: no usr/sbin/slurmctld", root.display());
        Install::Root(root)
    }

    pub fn slurm_24_11() -> Install {
        let root = std::env::var_os("HPC_SLURM_24_11_ROOT").map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "HPC_SLURM_24_11_ROOT is not set: ./scripts/test.sh makes Debian 13's Slurm 24.11 root with mmdebstrap (scripts/lib.sh, \
                 ensure_slurm_24_11) and sets it"
            )
        });
        assert!(root.join("usr/sbin/slurmctld").exists(), "{}: no usr/sbin/slurmctld", root.display());
        Install::Root(root)
    }

    /// A program's path as the process running it sees it.
    fn tool(&self, name: &str) -> PathBuf {
        let base = match self {
            Install::Host => Path::new("/"),
            Install::Root(r) => r.as_path(),
        };
        for dir in ["usr/sbin", "usr/bin", "sbin", "bin"] {
            if base.join(dir).join(name).exists() {
                return Path::new("/").join(dir).join(name);
            }
        }
        panic!(
            "{name} is not installed under {}: the test command installs Debian's slurmctld, slurmd, slurm-client and munge \
             (apt-get install slurmctld slurmd slurm-client munge); run ./scripts/test.sh, or install them",
            base.display()
        )
    }

    /// A command running `name` of this installation.
    fn command(&self, name: &str) -> Command {
        match self {
            Install::Host => Command::new(self.tool(name)),
            Install::Root(r) => {
                let mut c = Command::new("chroot");
                c.arg(r).arg(self.tool(name));
                c
            }
        }
    }

    /// slurmd's command: in a root, in a mount namespace of its own with /proc and /sys mounted in it (gone
    /// with the namespace).
    fn daemon_command(&self, name: &str) -> Command {
        match self {
            Install::Host => self.command(name),
            Install::Root(r) => {
                let mut c = Command::new("unshare");
                c.args(["-m", "--propagation", "private", "sh", "-c"])
                    .arg(r#"mount -t proc proc "$0/proc" && mount --rbind /sys "$0/sys" && exec chroot "$0" "$@""#)
                    .arg(r)
                    .arg(self.tool(name));
                c
            }
        }
    }

    /// A directory for one Slurm's files: its path here, and as the programs see it.
    fn workdir(&self) -> (tempfile::TempDir, PathBuf) {
        match self {
            Install::Host => {
                let d = tempfile::tempdir().unwrap();
                let p = d.path().to_owned();
                (d, p)
            }
            Install::Root(r) => {
                let d = tempfile::tempdir_in(r.join("tmp")).unwrap();
                let inner = Path::new("/").join(d.path().strip_prefix(r).unwrap());
                (d, inner)
            }
        }
    }

    /// One munged for the process and installation, on Slurm's default socket (a configless slurmd asks that
    /// socket before it has any configuration), with a key of its own: started unless one answers there
    /// already.
    fn munge(&self) {
        // One munged per installation (each root has its own socket), started once per process.
        static STARTED: OnceLock<std::sync::Mutex<std::collections::BTreeMap<PathBuf, std::sync::Arc<OnceLock<()>>>>> = OnceLock::new();
        let key = match self {
            Install::Host => PathBuf::from("/"),
            Install::Root(r) => r.clone(),
        };
        let once = STARTED.get_or_init(Default::default).lock().unwrap().entry(key).or_default().clone();
        once.get_or_init(|| {
            let answers =
                || self.command("munge").args(["-n"]).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
            if answers() {
                return;
            }
            let (outer, inner) = match self {
                Install::Host => (Path::new("/").to_owned(), Path::new("/").to_owned()),
                Install::Root(r) => (r.clone(), Path::new("/").to_owned()),
            };
            let rel = format!("tmp/hpc-munge-{}", std::process::id());
            std::fs::create_dir_all(outer.join(&rel)).unwrap();
            std::fs::create_dir_all(outer.join("run/munge")).expect("run/munge (the tests run as root, as CI does)");
            let key = outer.join(&rel).join("munge.key");
            // The same key in every test process: processes racing to start munged on the one socket end up with
            // one of theirs answering all of them, and any of them decodes what another encoded.
            let bytes: Vec<u8> = (0..1024u32).map(|i| (i * 7919 % 251) as u8).collect();
            std::fs::write(&key, bytes).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
            let at = |f: &str| inner.join(&rel).join(f).display().to_string();
            let status = self
                .command("munged")
                .arg(format!("--key-file={}", at("munge.key")))
                .arg(format!("--pid-file={}", at("munged.pid")))
                .arg(format!("--log-file={}", at("munged.log")))
                .arg(format!("--seed-file={}", at("munged.seed")))
                .arg("--force")
                .status()
                .expect("munged starts");
            assert!(status.success(), "munged failed to start");
            let until = Instant::now() + Duration::from_secs(10);
            while !answers() {
                assert!(Instant::now() < until, "munged does not answer on run/munge/munge.socket.2 ({self:?})");
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
}

/// A running slurmctld (and the slurmds started against it); stopped when dropped.
pub struct Slurm {
    pub dir: tempfile::TempDir,
    /// `dir` as the programs see it.
    inner: PathBuf,
    install: Install,
    port: u16,
    slurmd_port: u16,
    children: Vec<Child>,
}

/// The rendered files with this machine's changes, in `etc` (`inner` as the programs see it; a topology
/// file the configuration no longer has removed).
fn write_files(rendered: &Rendered, install: &Install, etc: &Path, inner: &Path, port: u16, slurmd_port: u16) {
    let mut conf = local_slurm_conf(&rendered.slurm_conf, inner, port, slurmd_port);
    let mut cgroup = rendered.cgroup_conf.clone();
    if let Install::Root(_) = install {
        conf = conf.replace(&format!("HealthCheckProgram={}/hpc-slurm-healthcheck", inner.display()), "HealthCheckProgram=/bin/true");
        cgroup = cgroup.lines().filter(|l| !l.starts_with("CgroupPlugin=")).map(|l| format!("{l}\n")).collect();
        cgroup.push_str("CgroupPlugin=disabled\n");
    }
    std::fs::write(etc.join("slurm.conf"), conf).unwrap();
    std::fs::write(etc.join("gres.conf"), local_gres_conf(&rendered.gres_conf, etc, inner)).unwrap();
    std::fs::write(etc.join("cgroup.conf"), cgroup).unwrap();
    match &rendered.topology_yaml {
        Some(t) => std::fs::write(etc.join("topology.yaml"), t).unwrap(),
        None => {
            let _ = std::fs::remove_file(etc.join("topology.yaml"));
        }
    }
    match &rendered.topology_conf {
        Some(t) => std::fs::write(etc.join("topology.conf"), t).unwrap(),
        None => {
            let _ = std::fs::remove_file(etc.join("topology.conf"));
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn hostname() -> String {
    let out = Command::new("hostname").arg("-s").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The rendered slurm.conf with this machine's changes (see the module documentation).
fn local_slurm_conf(rendered: &str, dir: &Path, ctld_port: u16, slurmd_port: u16) -> String {
    let d = dir.display();
    let replaced = [
        "SlurmctldHost",
        "SlurmctldPort",
        "SlurmdPort",
        "SlurmUser",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "SlurmctldPidFile",
        "SlurmdPidFile",
        "SlurmctldLogFile",
        "SlurmdLogFile",
        "ProctrackType",
        "TaskPlugin",
        "HealthCheckProgram",
        "HealthCheckInterval",
        "Prolog",
        "Epilog",
        "AccountingStorageType",
        "AccountingStorageHost",
        "AccountingStoragePort",
        "JobAcctGatherType",
        "JobAcctGatherFrequency",
    ];
    let mut out: String =
        rendered.lines().filter(|l| !replaced.iter().any(|k| l.starts_with(&format!("{k}=")))).map(|l| format!("{l}\n")).collect();
    out.push_str(&format!(
        "# This machine's changes (tests/slurm/harness.rs)\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmctldPort={ctld_port}\n\
         SlurmdPort={slurmd_port}\n\
         SlurmUser=root\n\
         StateSaveLocation={d}/state\n\
         SlurmdSpoolDir={d}/spool/%n\n\
         SlurmctldPidFile={d}/slurmctld.pid\n\
         SlurmdPidFile={d}/slurmd-%n.pid\n\
         SlurmctldLogFile={d}/log/slurmctld.log\n\
         SlurmdLogFile={d}/log/slurmd-%n.log\n\
         ProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\n\
         HealthCheckProgram={d}/hpc-slurm-healthcheck\n\
         HealthCheckInterval=5\n\
         Prolog={d}/hpc-slurm-prolog\n\
         Epilog={d}/hpc-slurm-epilog\n\
         SlurmdParameters=config_overrides\n",
        host = hostname()
    ));
    out
}

/// gres.conf with the device files in `dir/dev` (made as character devices, as a GPU's are; `inner` is `dir`
/// as the programs see it): an 8-GPU node's, laid out as the drivers make them. NVIDIA's `nvidia0` to `nvidia7`
/// (major 195); AMD's render nodes eight minor numbers apart, `dri/renderD128`, `renderD136`, ..., `renderD184`
/// (major 226: the amdgpu driver keeps eight per GPU for its partitions), and no other.
fn local_gres_conf(rendered: &str, dir: &Path, inner: &Path) -> String {
    let dev = dir.join("dev");
    std::fs::create_dir_all(dev.join("dri")).unwrap();
    let devices = (0..8u32)
        .map(|i| (format!("nvidia{i}"), 195, i))
        .chain((0..8u32).map(|i| (format!("dri/renderD{}", 128 + 8 * i), 226, 128 + 8 * i)));
    for (name, major, minor) in devices {
        let path = dev.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        let made = Command::new("mknod").arg(&path).args(["c", &major.to_string(), &minor.to_string()]).status().is_ok_and(|s| s.success());
        if !made {
            std::fs::write(&path, b"").unwrap();
        }
    }
    rendered
        .replace("/dev/nvidia", &format!("{}/dev/nvidia", inner.display()))
        .replace("/dev/dri/", &format!("{}/dev/dri/", inner.display()))
}

impl Slurm {
    /// slurmctld with `rendered`, answering.
    pub fn start(rendered: &Rendered) -> Slurm {
        Slurm::start_with(&Install::Host, rendered)
    }

    /// slurmctld of `install` with `rendered`, answering.
    pub fn start_with(install: &Install, rendered: &Rendered) -> Slurm {
        install.munge();
        let (dir, inner) = install.workdir();
        for sub in ["state", "spool", "log"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let (port, slurmd_port) = (free_port(), free_port());
        let etc = dir.path();
        write_files(rendered, install, etc, &inner, port, slurmd_port);
        let hc = etc.join("hpc-slurm-healthcheck");
        // Its settings file is this directory's (slurmd runs it with an empty environment).
        let settings = inner.join("healthcheck.settings");
        std::fs::write(
            &hc,
            rendered.healthcheck.replace(hpc_provider::planner::slurm::HEALTHCHECK_SETTINGS, &settings.display().to_string()),
        )
        .unwrap();
        std::fs::set_permissions(&hc, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Slurm's prolog and epilog as the nodes install them (they do nothing where NVIDIA's IMEX is not installed).
        for (file, text) in [
            ("hpc-slurm-prolog", hpc_provider::clouds::slurm::prolog_program()),
            ("hpc-slurm-epilog", hpc_provider::clouds::slurm::epilog_program()),
        ] {
            std::fs::write(etc.join(file), text).unwrap();
            std::fs::set_permissions(etc.join(file), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut slurm = Slurm { dir, inner, install: install.clone(), port, slurmd_port, children: vec![] };
        slurm.start_ctld();
        slurm
    }

    /// slurmctld (children[0]) started with this directory's files, answering.
    fn start_ctld(&mut self) {
        let ctld = self
            .install
            .command("slurmctld")
            .args(["-D", "-i", "-f"])
            .arg(self.conf())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("slurmctld starts");
        if self.children.is_empty() {
            self.children.push(ctld);
        } else {
            self.children[0] = ctld;
        }
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if self.run("scontrol", &["ping"]).is_ok_and(|o| o.contains("is UP")) {
                break;
            }
            if Instant::now() > until {
                panic!("slurmctld did not come up:\n{}", self.log("slurmctld.log"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What a controller's `hpc-slurm-sync` does with a new configuration: the files written, slurmctld
    /// restarted (its state kept), then `scontrol reconfigure` (the configless slurmds fetch it again).
    pub fn reconfigure(&mut self, rendered: &Rendered) {
        write_files(rendered, &self.install, self.dir.path(), &self.inner, self.port, self.slurmd_port);
        let ctld = &mut self.children[0];
        let _ = Command::new("kill").arg(ctld.id().to_string()).status();
        let _ = ctld.wait();
        self.start_ctld();
        self.ok("scontrol", &["reconfigure"]);
    }

    /// slurm.conf, as the programs see it.
    pub fn conf(&self) -> PathBuf {
        self.inner.join("slurm.conf")
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join("log").join(name)).unwrap_or_default()
    }

    /// A Slurm command against this controller: its output, or its output and status as the error.
    pub fn run(&self, cmd: &str, args: &[&str]) -> Result<String, String> {
        let out = self.install.command(cmd).args(args).env("SLURM_CONF", self.conf()).current_dir(self.dir.path()).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if out.status.success() { Ok(text) } else { Err(format!("{cmd} {args:?}: {}: {text}", out.status)) }
    }

    /// A Slurm command that must succeed.
    pub fn ok(&self, cmd: &str, args: &[&str]) -> String {
        self.run(cmd, args).unwrap_or_else(|e| panic!("{e}\nslurmctld.log:\n{}", self.log("slurmctld.log")))
    }

    /// A real slurmd registering as `node`, configless (`--conf-server`); its health check gets `env` (the
    /// self-check's fakes) through the settings file.
    pub fn slurmd(&mut self, node: &str, env: &[(&str, String)]) {
        let mut settings: String = env.iter().map(|(k, v)| format!("{k}='{v}'\n")).collect();
        settings.push_str(&format!("SLURM_CONF='{}'\n", self.conf().display()));
        std::fs::write(self.dir.path().join("healthcheck.settings"), settings).unwrap();
        std::fs::create_dir_all(self.dir.path().join("spool").join(node)).unwrap();
        let child = self
            .install
            .daemon_command("slurmd")
            .args(["-D", "-N", node, "--conf-server"])
            .arg(format!("127.0.0.1:{}", self.port))
            // The health check's scontrol finds the controller through the same file.
            .env("SLURM_CONF", self.conf())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("slurmd starts");
        self.children.push(child);
    }

    /// Stops every slurmd started so far (one host runs one slurmd at a time: they share its port).
    pub fn stop_slurmds(&mut self) {
        for mut c in self.children.drain(1..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits until `node` is in a state `want` accepts (`scontrol show node`'s State=), then gives it.
    pub fn wait_node(&self, node: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let shown = self.ok("scontrol", &["show", "node", node]);
            if want(&shown) {
                return shown;
            }
            if Instant::now() > until {
                panic!(
                    "{node} is not {what}:\n{shown}\nslurmd log:\n{}\nslurmctld log:\n{}",
                    self.log(&format!("slurmd-{node}.log")),
                    self.log("slurmctld.log")
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `sbatch --test-only` of a batch script: whether and where Slurm would start it ("to start at ... on nodes"),
    /// or its refusal as the error. Needs no slurmd.
    pub fn test_only(&self, name: &str, script: &str) -> Result<String, String> {
        let file = format!("{}.sh", name.replace('/', "_"));
        std::fs::write(self.dir.path().join(&file), script).unwrap();
        self.run("sbatch", &["--test-only", &self.inner.join(&file).display().to_string()])
    }

    /// Submits `script` and waits for the job's end: its final state.
    pub fn job(&self, args: &[&str]) -> String {
        let id = self.ok("sbatch", &[&["--parsable"][..], args].concat()).trim().to_owned();
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let shown = self.ok("scontrol", &["show", "job", &id]);
            let state = shown.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or_default().to_owned();
            if !matches!(state.as_str(), "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "") {
                return state;
            }
            if Instant::now() > until {
                panic!("job {id} did not end:\n{shown}\nslurmctld log:\n{}", self.log("slurmctld.log"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
