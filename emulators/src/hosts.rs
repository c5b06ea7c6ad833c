//! The emulated clouds' hypervisor: boots an instance an emulator launched as a Linux host on this machine,
//! so that what runs on the cloud's hosts (their user data, cloud-init, Slurm's daemons) runs for real
//! against the emulator's instance metadata service. Never linked into the provider.
//!
//! A host is an image (a Debian root made with `mmdebstrap` from Debian's packages, read-only) under an
//! overlay of its own, with systemd as PID 1 in mount, UTS, IPC, PID, network and cgroup namespaces of its
//! own (`hosts/boot.sh`). The hosts of one [`Network`] share a bridge in a network namespace of its own (the
//! cloud's subnet), which also holds the cloud's link-local metadata address (169.254.169.254:80): a relay
//! there passes each host's connection to the emulator's metadata listener for the instance of that address
//! (`POST /_admin/metadata`), as the cloud answers each instance from its own records, and a DHCP server
//! (Debian's dnsmasq) answers the instances' addresses, as the clouds' DHCP does. Nothing is made outside the
//! host's and the network's namespaces, their temporary directories, and cgroups below the caller's own.
//!
//! What a host cannot have here and is stood in for is listed, each with the reason, in `hosts/STAND-INS.md`
//! ([`STAND_INS`] is the same list; a test keeps the two equal). Nothing else is changed: the image is as
//! Debian packages it, the user data is the instance's, and cloud-init is Debian's.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The boot script (see its header).
const BOOT_SCRIPT: &str = include_str!("../hosts/boot.sh");

/// The clouds' link-local metadata address.
pub const METADATA_ADDRESS: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);

/// Which cloud a host is an instance of: what its image is set up for (the cloud's cloud-init datasource)
/// and what it stands in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    Aws,
    Gcp,
    Azure,
    Oci,
}

/// One thing a host stands in for, and why (hosts/STAND-INS.md lists the same).
#[derive(Debug)]
pub struct StandIn {
    pub what: &'static str,
    pub platforms: &'static str,
    pub why: &'static str,
}

/// Everything a booted host stands in for. hosts/STAND-INS.md's table lists the same `what`s.
pub const STAND_INS: &[StandIn] = &[
    StandIn {
        what: "GPU device files",
        platforms: "all",
        why: "this machine has no GPUs: the node's /dev has character devices where the node type's GPUs would be \
              (NVIDIA's /dev/nvidia<N>, major 195; AMD's render nodes /dev/dri/renderD<N>, major 226), which slurmd's \
              gres.conf File= names",
    },
    StandIn {
        what: "nvidia-smi",
        platforms: "all",
        why: "NVIDIA's driver is not here: a script answers `nvidia-smi -L` with the node type's GPUs, as many as \
              /etc/hpc-emulated/gpus says (a test lowers it to make a GPU fall off), for the node self-check",
    },
    StandIn {
        what: "RDMA devices",
        platforms: "all",
        why: "no EFA or InfiniBand adapter is here: /sys/class/infiniband holds an entry per adapter the node type has \
              (EFA's rdmap<N>s0 on AWS, mlx5_<N> elsewhere), which the node self-check counts",
    },
    StandIn {
        what: "/sys/hypervisor/uuid",
        platforms: "aws",
        why: "cloud-init's Ec2 datasource identifies EC2 from this file (or DMI, which cloud-init does not read in a \
              container); it holds an `ec2` UUID, as a Xen or Nitro instance's does",
    },
    StandIn {
        what: "cloud-init's NoCloud datasource",
        platforms: "gcp, azure",
        why: "cloud-init's GCE datasource trusts the platform only through DMI (`Google Compute Engine`) and its Azure \
              datasource needs the provisioning media (ovf-env.xml) and the wireserver (168.63.129.16); neither can be \
              had in a container. The user data cloud-init runs is the instance's own, unchanged: on Google the \
              instance's `user-data` metadata attribute, read from the emulator's metadata server; on Azure the VM's \
              customData, as the provisioning media carry it",
    },
    StandIn {
        what: "network configuration",
        platforms: "all",
        why: "the harness gives the host its address, the cloud's gateway and the metadata route from outside, and \
              cloud-init's network rendering is off (`network: {config: disabled}`): the image would otherwise hand \
              eth0 to a DHCP client racing the harness. The address is the emulator's, and a DHCP server answers it \
              (cloud-init's local stage asks)",
    },
    StandIn {
        what: "metadata.google.internal",
        platforms: "gcp",
        why: "Google's images resolve it through /etc/hosts (169.254.169.254), as here; there is no DNS server here",
    },
];

/// A cloud subnet: a bridge in a network namespace of its own, the gateway, the metadata relay and a DHCP
/// server. Hosts booted on it reach each other and the metadata address; nothing else.
pub struct Network {
    /// Holds the namespace (`unshare --net sleep`).
    holder: Child,
    dir: tempfile::TempDir,
    prefix: u8,
    gateway: Ipv4Addr,
    relay: Arc<Relay>,
    dhcp: Option<Child>,
}

/// Where the relay sends each host's metadata connections: the emulator's listener for its instance.
struct Relay {
    routes: Mutex<HashMap<Ipv4Addr, SocketAddr>>,
    stop: AtomicBool,
}

/// A booted host: its PID 1 runs until [`Host::stop`] or drop.
pub struct Host {
    pub name: String,
    pub address: Ipv4Addr,
    /// The emulated instance's id.
    pub instance_id: String,
    /// `unshare` (its child is the host's PID 1).
    launcher: Child,
    /// The host's PID 1, as this machine numbers it.
    pid: u32,
    dir: tempfile::TempDir,
    cgroups: Vec<PathBuf>,
    relay: Arc<Relay>,
}

/// What to boot.
#[derive(Clone, Debug)]
pub struct HostSpec {
    /// The emulated instance's name (its Name tag, instance name, VM name or display name), for messages and the
    /// host's first host name (cloud-init then sets the one its metadata gives).
    pub name: String,
    pub platform: Platform,
    /// The image's root directory.
    pub image: PathBuf,
    /// The instance's private address in the network.
    pub address: Ipv4Addr,
    /// The instance's MAC address, as the emulator has it (a locally administered one is made otherwise).
    pub mac: Option<String>,
    /// The emulator's metadata listener for this instance (`POST /_admin/metadata`'s port on 127.0.0.1).
    pub metadata_port: u16,
    /// For the NoCloud stand-in (Google, Azure): the user data the instance boots with.
    pub user_data: Option<Vec<u8>>,
    /// The instance id, as its cloud-init sees it (NoCloud's `instance-id`; elsewhere from the metadata).
    pub instance_id: String,
    /// The stand-in GPUs: device files for this many NVIDIA or AMD GPUs.
    pub gpus: Option<Gpus>,
}

/// Stand-in GPUs (device files and `nvidia-smi`) and RDMA devices (entries of /sys/class/infiniband).
#[derive(Clone, Copy, Debug)]
pub struct Gpus {
    pub count: u32,
    pub amd: bool,
    /// RDMA devices (EFA on AWS, InfiniBand or RoCE HCAs elsewhere); 0 for none.
    pub rdma: u32,
}

/// Where a host's stand-in `nvidia-smi` reads how many GPUs to report: a test writes a smaller number there
/// to make a GPU fall off the bus.
pub const GPU_COUNT_FILE: &str = "/etc/hpc-emulated/gpus";

/// The stand-in `nvidia-smi`: `-L` lists the GPUs (as many as GPU_COUNT_FILE says), as the driver's does;
/// anything else prints nothing.
const NVIDIA_SMI: &str = "#!/bin/sh\n\
# A stand-in for NVIDIA's nvidia-smi on an emulated host (terraform-provider-hpc, emulators/hosts/STAND-INS.md).\n\
n=$(cat /etc/hpc-emulated/gpus 2>/dev/null || echo 0)\n\
case \"$*\" in\n\
  *-L*) i=0; while [ \"$i\" -lt \"$n\" ]; do printf 'GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-%012d)\\n' \"$i\" \"$i\"; i=$((i + 1)); done ;;\n\
esac\n";

fn sh(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!("{cmd:?}: {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())))
    }
}

/// `ip` in the network namespace of `pid`.
fn ip_in(pid: u32, args: &[&str]) -> io::Result<String> {
    sh(Command::new("nsenter").arg("-t").arg(pid.to_string()).arg("-n").arg("ip").args(args))
}

/// A child that is killed when the thread that made it ends (the test, or the process, going away must not
/// leave hosts running).
fn dies_with_parent(cmd: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe and touches nothing of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

fn parse_cidr(cidr: &str) -> io::Result<(Ipv4Addr, u8)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("{cidr:?} is not an IPv4 CIDR block"));
    let (a, p) = cidr.split_once('/').ok_or_else(bad)?;
    let addr: Ipv4Addr = a.parse().map_err(|_| bad())?;
    let prefix: u8 = p.parse().map_err(|_| bad())?;
    if prefix > 30 {
        return Err(bad());
    }
    let base = u32::from(addr) & (u32::MAX << (32 - prefix));
    Ok((Ipv4Addr::from(base), prefix))
}

impl Network {
    /// A network for the hosts of `cidr` (the cloud network's block, e.g. the VPC's `10.0.0.0/16`): its
    /// gateway is the block's first address, as on the clouds.
    pub fn new(cidr: &str) -> io::Result<Network> {
        let (base, prefix) = parse_cidr(cidr)?;
        let gateway = Ipv4Addr::from(u32::from(base) + 1);
        let dir = tempfile::Builder::new().prefix("hpc-network-").tempdir()?;
        let mut holder = Command::new("unshare");
        holder.args(["--net", "sleep", "infinity"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let holder = dies_with_parent(&mut holder).spawn()?;
        let pid = holder.id();
        let relay = Arc::new(Relay { routes: Mutex::new(HashMap::new()), stop: AtomicBool::new(false) });
        let mut net = Network { holder, dir, prefix, gateway, relay, dhcp: None };
        // The namespace exists once unshare has exec'd sleep.
        let until = Instant::now() + Duration::from_secs(10);
        while fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim() != "sleep").unwrap_or(true) {
            if Instant::now() > until {
                return Err(io::Error::other("the network namespace did not come up"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        ip_in(pid, &["link", "set", "lo", "up"])?;
        ip_in(pid, &["link", "add", "br0", "type", "bridge"])?;
        ip_in(pid, &["addr", "add", &format!("{gateway}/{prefix}"), "dev", "br0"])?;
        ip_in(pid, &["addr", "add", &format!("{METADATA_ADDRESS}/32"), "dev", "br0"])?;
        ip_in(pid, &["link", "set", "br0", "up"])?;
        net.start_relay()?;
        net.start_dhcp(base)?;
        Ok(net)
    }

    fn pid(&self) -> u32 {
        self.holder.id()
    }

    /// The relay's listener, made in the network's namespace on the metadata address; its connections are
    /// passed on from this machine's namespace.
    fn start_relay(&self) -> io::Result<()> {
        let ns = fs::File::open(format!("/proc/{}/ns/net", self.pid()))?;
        let relay = self.relay.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new().name("hpc-metadata-relay".into()).spawn(move || {
            let bound = (|| {
                let home = fs::File::open("/proc/thread-self/ns/net")?;
                // SAFETY: setns on this thread only, with descriptors this thread holds.
                if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                let listener = TcpListener::bind((METADATA_ADDRESS, 80));
                // SAFETY: as above; back to this machine's namespace, where the emulator listens.
                if unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                listener
            })();
            let listener = match bound {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let _ = listener.set_nonblocking(true);
            while !relay.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, peer)) => {
                        let target = match peer {
                            SocketAddr::V4(p) => relay.routes.lock().unwrap().get(p.ip()).copied(),
                            SocketAddr::V6(_) => None,
                        };
                        if let Some(target) = target {
                            std::thread::spawn(move || pass(conn, target));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
        rx.recv_timeout(Duration::from_secs(10)).map_err(|_| io::Error::other("the metadata relay did not start"))?
    }

    /// dnsmasq in the network's namespace, answering each host's address by its MAC (hosts are added to its
    /// hosts file as they boot); no DNS.
    fn start_dhcp(&mut self, base: Ipv4Addr) -> io::Result<()> {
        let d = self.dir.path();
        fs::write(d.join("dhcp-hosts"), "")?;
        fs::write(d.join("dns-hosts"), "")?;
        let mask = Ipv4Addr::from(u32::MAX << (32 - self.prefix));
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(self.pid().to_string())
            .arg("-n")
            .arg(dnsmasq()?)
            .arg("--keep-in-foreground")
            .arg("--conf-file=/dev/null")
            // The subnet's resolver, as every cloud gives one (at the gateway here): it knows no names beyond
            // the hosts file, and answers at once.
            .arg("--no-resolv")
            .arg("--no-hosts")
            .arg(format!("--addn-hosts={}", d.join("dns-hosts").display()))
            .arg("--interface=br0")
            .arg("--bind-interfaces")
            .arg("--dhcp-authoritative")
            .arg(format!("--dhcp-range={base},static,{mask}"))
            .arg(format!("--dhcp-hostsfile={}", d.join("dhcp-hosts").display()))
            .arg(format!("--dhcp-option=option:router,{}", self.gateway))
            .arg(format!("--dhcp-option=option:dns-server,{}", self.gateway))
            .arg(format!("--dhcp-leasefile={}", d.join("leases").display()))
            .arg(format!("--pid-file={}", d.join("dnsmasq.pid").display()))
            .arg(format!("--log-facility={}", d.join("dnsmasq.log").display()))
            .arg("--user=root")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.dhcp = Some(dies_with_parent(&mut cmd).spawn()?);
        Ok(())
    }

    /// Boots `spec` on this network; returns once its systemd has started (not once it has finished booting:
    /// see [`Host::wait_booted`]).
    pub fn boot(&self, spec: &HostSpec) -> io::Result<Host> {
        // Numbered across the process: several networks boot hosts of the same names side by side.
        let n = NEXT_HOST.fetch_add(1, Ordering::Relaxed);
        let dir = tempfile::Builder::new().prefix(&format!("hpc-host-{}-", spec.name)).tempdir()?;
        let d = dir.path();
        for sub in ["upper", "work", "root"] {
            fs::create_dir_all(d.join(sub))?;
        }
        let mut settings = image_settings(spec);
        settings.push(("/etc/resolv.conf".to_owned(), format!("nameserver {}\n", self.gateway).into_bytes()));
        for (path, text) in settings {
            let at = d.join("upper").join(path.trim_start_matches('/'));
            fs::create_dir_all(at.parent().unwrap_or(d))?;
            fs::write(&at, text)?;
            if path.starts_with("/usr/local/bin/") {
                fs::set_permissions(&at, fs::Permissions::from_mode(0o755))?;
            }
        }
        fs::write(d.join("boot.env"), boot_env(spec))?;
        let script = d.join("boot.sh");
        fs::write(&script, BOOT_SCRIPT)?;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))?;
        let cgroup = format!("hpc-host-{}-{n}-{}", std::process::id(), spec.name);
        let log = fs::File::create(d.join("boot.log"))?;
        let mut cmd = Command::new("bash");
        cmd.arg(&script).arg("enter").arg(d).arg(&spec.image).arg(&cgroup).stdin(Stdio::piped()).stdout(log.try_clone()?).stderr(log);
        let mut launcher = dies_with_parent(&mut cmd).spawn()?;
        let stdin = launcher.stdin.take();
        let mut host = Host {
            name: spec.name.clone(),
            address: spec.address,
            instance_id: spec.instance_id.clone(),
            pid: 0,
            cgroups: cgroups_named(&cgroup),
            launcher,
            dir,
            relay: self.relay.clone(),
        };
        host.pid = host.find_pid1()?;
        self.plug(&host, spec, n)?;
        let mut stdin: ChildStdin = stdin.ok_or_else(|| io::Error::other("no stdin"))?;
        writeln!(stdin, "go")?;
        Ok(host)
    }

    /// The host's eth0 (a veth whose other end is on the bridge), its address and gateway, its metadata
    /// route and DHCP entry.
    fn plug(&self, host: &Host, spec: &HostSpec, n: u32) -> io::Result<()> {
        let mac = spec.mac.clone().unwrap_or_else(|| {
            let a = u32::from(spec.address).to_be_bytes();
            format!("02:48:50:{:02x}:{:02x}:{:02x}", a[1], a[2], a[3])
        });
        let port = format!("v{n}");
        sh(Command::new("ip")
            .args(["link", "add", &port, "netns", &self.pid().to_string(), "type", "veth", "peer", "name", "eth0"])
            .args(["address", &mac, "netns", &host.pid.to_string()]))?;
        ip_in(self.pid(), &["link", "set", &port, "master", "br0", "up"])?;
        ip_in(host.pid, &["link", "set", "lo", "up"])?;
        ip_in(host.pid, &["addr", "add", &format!("{}/{}", spec.address, self.prefix), "dev", "eth0"])?;
        ip_in(host.pid, &["link", "set", "eth0", "up"])?;
        ip_in(host.pid, &["route", "add", "default", "via", &self.gateway.to_string()])?;
        self.relay.routes.lock().unwrap().insert(spec.address, SocketAddr::from((Ipv4Addr::LOCALHOST, spec.metadata_port)));
        let hosts = self.dir.path().join("dhcp-hosts");
        let mut f = fs::OpenOptions::new().append(true).open(&hosts)?;
        writeln!(f, "{mac},{}", spec.address)?;
        let mut dns = fs::OpenOptions::new().append(true).open(self.dir.path().join("dns-hosts"))?;
        writeln!(dns, "{} {}", spec.address, spec.name)?;
        if let Some(d) = &self.dhcp {
            // SIGHUP: dnsmasq reads its hosts file again.
            // SAFETY: a signal to a child of ours.
            unsafe { libc::kill(d.id() as i32, libc::SIGHUP) };
        }
        Ok(())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.relay.stop.store(true, Ordering::Relaxed);
        if let Some(d) = &mut self.dhcp {
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// Passes one connection to the emulator's listener and back.
fn pass(conn: TcpStream, target: SocketAddr) {
    let Ok(upstream) = TcpStream::connect_timeout(&target, Duration::from_secs(5)) else { return };
    let _ = conn.set_nonblocking(false);
    let (Ok(mut a_read), Ok(mut b_write)) = (conn.try_clone(), upstream.try_clone()) else { return };
    let back = std::thread::spawn(move || {
        let mut b_read = upstream;
        let mut a_write = conn;
        let _ = io::copy(&mut b_read, &mut a_write);
        let _ = a_write.shutdown(std::net::Shutdown::Write);
    });
    let _ = io::copy(&mut a_read, &mut b_write);
    let _ = b_write.shutdown(std::net::Shutdown::Write);
    let _ = back.join();
}

fn dnsmasq() -> io::Result<PathBuf> {
    ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"].iter().map(PathBuf::from).find(|p| p.exists()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "dnsmasq is not installed: the test command installs Debian's dnsmasq-base (apt-get install dnsmasq-base)",
        )
    })
}

/// The cgroup directories `boot.sh enter` makes for a host named `name`, below this process's own cgroups.
fn cgroups_named(name: &str) -> Vec<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir("/sys/fs/cgroup") else { return out };
    for e in entries.flatten() {
        let h = e.file_name().to_string_lossy().into_owned();
        if !e.path().join("cgroup.procs").exists() {
            continue;
        }
        let line = own.lines().find(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrl) = (f.next().unwrap_or_default(), f.next().unwrap_or_default());
            match h.as_str() {
                "unified" => id == "0",
                "systemd" => ctrl == "name=systemd",
                _ => ctrl.split(',').any(|c| c == h),
            }
        });
        if let Some(path) = line.and_then(|l| l.splitn(3, ':').nth(2)) {
            out.push(e.path().join(path.trim_start_matches('/')).join(name));
        }
    }
    out
}

/// The settings a host's image gets for its cloud, as files of its own layer: the cloud's cloud-init
/// datasource, and the stand-ins hosts/STAND-INS.md lists.
fn image_settings(spec: &HostSpec) -> Vec<(String, Vec<u8>)> {
    // Oracle alone: cloud-init identifies OCI from DMI (chassis asset tag `OracleCloud.com`), which it does not
    // read in a container, and from 23.x trusts a datasource without it only when the list names it alone.
    let datasource = match spec.platform {
        Platform::Aws => "Ec2, None",
        Platform::Oci => "Oracle",
        Platform::Gcp | Platform::Azure => "NoCloud, None",
    };
    let mut files = vec![(
        "/etc/cloud/cloud.cfg.d/90-hpc-emulated.cfg".to_owned(),
        format!(
            "# The emulated cloud's datasource (terraform-provider-hpc's emulators, hosts/STAND-INS.md).\n\
             datasource_list: [{datasource}]\n\
             # The harness gives the host its address (hosts/STAND-INS.md: network configuration).\n\
             network: {{config: disabled}}\n"
        )
        .into_bytes(),
    )];
    files.push(("/etc/hostname".to_owned(), format!("{}\n", spec.name).into_bytes()));
    if spec.platform == Platform::Gcp {
        files.push((
            "/etc/hosts".to_owned(),
            format!(
                "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{METADATA_ADDRESS}\tmetadata.google.internal metadata\n"
            )
            .into_bytes(),
        ));
    }
    if let Some(g) = spec.gpus.filter(|g| !g.amd) {
        files.push(("/usr/local/bin/nvidia-smi".to_owned(), NVIDIA_SMI.as_bytes().to_vec()));
        files.push((GPU_COUNT_FILE.to_owned(), format!("{}\n", g.count).into_bytes()));
    }
    if matches!(spec.platform, Platform::Gcp | Platform::Azure) {
        let seed = "/var/lib/cloud/seed/nocloud";
        files.push((
            format!("{seed}/meta-data"),
            format!("instance-id: {}\nlocal-hostname: {}\n", spec.instance_id, spec.name).into_bytes(),
        ));
        files.push((format!("{seed}/user-data"), spec.user_data.clone().unwrap_or_default()));
    }
    files
}

/// `boot.env`: what boot.sh reads.
fn boot_env(spec: &HostSpec) -> String {
    let mut env = String::new();
    if spec.platform == Platform::Aws {
        // An EC2 instance's UUID starts with "ec2" (cloud-init's Ec2 datasource checks for it).
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, spec.instance_id.as_bytes());
        let h: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect();
        env.push_str(&format!("HPC_HOST_UUID='ec2{}-{}-{}-{}-{}'\n", &h[3..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]));
    }
    let mut devices = Vec::new();
    if let Some(g) = spec.gpus {
        for i in 0..g.count {
            if g.amd {
                // AMD's render nodes are numbered 128 upwards, 8 apart per GPU on an 8-GPU MI300X node.
                let minor = 128 + 8 * i;
                devices.push(format!("/dev/dri/renderD{minor}:226:{minor}"));
            } else {
                devices.push(format!("/dev/nvidia{i}:195:{i}"));
            }
        }
        if !g.amd {
            devices.push("/dev/nvidiactl:195:255".into());
        }
    }
    env.push_str(&format!("HPC_HOST_DEVICES='{}'\n", devices.join(" ")));
    let rdma: Vec<String> = match spec.gpus {
        // The efa driver names its devices rdmap<bus>s<slot>; Mellanox's mlx5_<n>.
        Some(g) if spec.platform == Platform::Aws => (0..g.rdma).map(|i| format!("rdmap{}s0", 16 + i)).collect(),
        Some(g) => (0..g.rdma).map(|i| format!("mlx5_{i}")).collect(),
        None => Vec::new(),
    };
    env.push_str(&format!("HPC_HOST_RDMA='{}'\n", rdma.join(" ")));
    env
}

impl Host {
    /// The host's PID 1, as this machine numbers it: the child of the `unshare` that boot.sh execs.
    fn find_pid1(&mut self) -> io::Result<u32> {
        let launcher = self.launcher.id();
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let comm = fs::read_to_string(format!("/proc/{launcher}/comm")).unwrap_or_default();
            if comm.trim() == "unshare" {
                let children = fs::read_to_string(format!("/proc/{launcher}/task/{launcher}/children")).unwrap_or_default();
                if let Some(pid) = children.split_whitespace().next().and_then(|p| p.parse().ok()) {
                    return Ok(pid);
                }
            }
            if let Ok(Some(status)) = self.launcher.try_wait() {
                return Err(io::Error::other(format!("host {} did not boot ({status}):\n{}", self.name, self.boot_log())));
            }
            if Instant::now() > until {
                return Err(io::Error::other(format!("host {} did not start in 30 s:\n{}", self.name, self.boot_log())));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What boot.sh printed.
    pub fn boot_log(&self) -> String {
        fs::read_to_string(self.dir.path().join("boot.log")).unwrap_or_default()
    }

    /// The host's PID 1, as this machine numbers it.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A command run in the host (all its namespaces, its root), as root, with a plain environment.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("-t")
            .arg(self.pid.to_string())
            .args(["-a", "-r", "-w", "--", "/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
            .arg("LANG=C.UTF-8")
            .arg(program);
        c
    }

    /// Runs `program args` in the host: its output (stdout and stderr). Bounded: a command still running
    /// after [`COMMAND_LIMIT`] is killed (coreutils' `timeout` in the host, then the `nsenter` here) and
    /// reported as timed out, so that a test waiting on a host never waits forever.
    pub fn run(&self, program: &str, args: &[&str]) -> io::Result<Output> {
        let limit = COMMAND_LIMIT.as_secs().to_string();
        let mut cmd = self.command("timeout");
        cmd.args(["-k", "5", &limit, program]).args(args);
        output_within(&mut cmd, COMMAND_LIMIT + Duration::from_secs(15))
    }

    /// Runs a shell command line in the host as root; Ok(stdout) when it exits 0, else Err with both streams.
    pub fn sh(&self, line: &str) -> Result<String, String> {
        let out = self.run("/bin/sh", &["-c", line]).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() { Ok(text) } else { Err(format!("{line}: {}: {text}{}", out.status, String::from_utf8_lossy(&out.stderr))) }
    }

    /// Runs a shell command line in the host as `user` (a login shell's environment, as `runuser -l` gives).
    pub fn sh_as(&self, user: &str, line: &str) -> Result<String, String> {
        self.sh(&format!("runuser -u {user} -- /bin/sh -c {}", quote(line)))
    }

    /// A file of the host, read through its root.
    pub fn read(&self, path: &str) -> io::Result<String> {
        let mut s = String::new();
        fs::File::open(format!("/proc/{}/root/{}", self.pid, path.trim_start_matches('/')))?.read_to_string(&mut s)?;
        Ok(s)
    }

    /// Waits until systemd has finished booting (running or degraded) and cloud-init has finished its final
    /// stage; the state systemd gives.
    pub fn wait_booted(&self, within: Duration) -> Result<String, String> {
        let until = Instant::now() + within;
        loop {
            let state = self.sh("systemctl is-system-running 2>/dev/null || true").unwrap_or_default().trim().to_owned();
            let ci = self.sh("cloud-init status 2>/dev/null || true").unwrap_or_default();
            if matches!(state.as_str(), "running" | "degraded") && (ci.contains("done") || ci.contains("error")) {
                return Ok(state);
            }
            if Instant::now() > until {
                return Err(format!(
                    "host {} did not finish booting in {within:?}: systemd {state:?}, {}\n{}",
                    self.name,
                    ci.trim(),
                    self.diagnosis()
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// What a person would look at when a host misbehaves: failed units, cloud-init's status and the end of
    /// its output log, the end of the journal.
    pub fn diagnosis(&self) -> String {
        let cmd = "systemctl --failed --no-pager 2>&1; cloud-init status --long 2>&1; echo '--- cloud-init.log (datasource)'; \
                   grep -E 'DataSource|WARNING|Error|Traceback' /var/log/cloud-init.log 2>&1 | tail -n 30; \
                   echo '--- cloud-init-output.log'; tail -n 40 /var/log/cloud-init-output.log 2>&1; echo '--- journal'; \
                   journalctl -b --no-pager -n 60 2>&1";
        match self.run("/bin/sh", &["-c", cmd]) {
            Ok(o) => format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
            Err(e) => format!("(could not enter host {}: {e})\n{}", self.name, self.boot_log()),
        }
    }

    /// Halts the host as a container manager does (SIGRTMIN+3 to systemd), killing what is left after
    /// `grace`, and takes its cgroups away.
    pub fn stop(mut self, grace: Duration) {
        self.halt(grace);
    }

    fn halt(&mut self, grace: Duration) {
        if self.pid != 0 {
            // SAFETY: signals to processes of ours.
            unsafe { libc::kill(self.pid as i32, libc::SIGRTMIN() + 3) };
            let until = Instant::now() + grace;
            while Instant::now() < until && Path::new(&format!("/proc/{}", self.pid)).exists() {
                if let Ok(Some(_)) = self.launcher.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = self.launcher.kill();
        let _ = self.launcher.wait();
        self.relay.routes.lock().unwrap().remove(&self.address);
        // The kernel takes a moment to empty a cgroup of processes that were killed.
        let until = Instant::now() + Duration::from_secs(10);
        for cg in std::mem::take(&mut self.cgroups) {
            while cg.exists() && remove_cgroup(&cg).is_err() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.pid = 0;
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.halt(Duration::from_secs(5));
    }
}

/// The number of the next host this process boots (its cgroups are named with it).
static NEXT_HOST: AtomicU32 = AtomicU32::new(0);

/// How long one command run in a host may take ([`Host::run`], [`Host::sh`]).
pub const COMMAND_LIMIT: Duration = Duration::from_secs(300);

/// Runs `cmd` (stdin closed) to its end or until `within` has passed, when it is killed: its output, or an
/// error of kind `TimedOut` that carries what it had printed.
pub fn output_within(cmd: &mut Command, within: Duration) -> io::Result<Output> {
    let out = tempfile::tempfile()?;
    let err = tempfile::tempfile()?;
    let mut child = cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(err.try_clone()?).spawn()?;
    let until = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |mut f: fs::File| -> io::Result<Vec<u8>> {
        use std::io::Seek;
        let mut v = Vec::new();
        f.seek(io::SeekFrom::Start(0))?;
        f.read_to_end(&mut v)?;
        Ok(v)
    };
    let (stdout, stderr) = (read(out)?, read(err)?);
    match status {
        Some(status) => Ok(Output { status, stdout, stderr }),
        None => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "{cmd:?} was still running after {within:?} and was killed; it had printed:\n{}{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            ),
        )),
    }
}

/// Removes a cgroup and the ones below it (systemd's slices and scopes), deepest first.
fn remove_cgroup(dir: &Path) -> io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for e in fs::read_dir(dir)?.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_cgroup(&e.path())?;
        }
    }
    fs::remove_dir(dir)
}

/// `s` quoted for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The images the test command makes (`scripts/lib.sh`, `ensure_node_images`): Debian 12 (Slurm 22.05,
/// cloud-init 22.4) and Debian 13 (Slurm 24.11, cloud-init 25.1), from `HPC_IMAGE_DEBIAN_12` and
/// `HPC_IMAGE_DEBIAN_13`.
pub fn image(debian: u32) -> PathBuf {
    let var = format!("HPC_IMAGE_DEBIAN_{debian}");
    let path = std::env::var_os(&var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: ./scripts/test.sh makes the Debian {debian} image with mmdebstrap (scripts/lib.sh, ensure_node_images)")
    });
    assert!(path.join("lib/systemd/systemd").exists(), "{}: not an image (no lib/systemd/systemd)", path.display());
    path
}

/// Reads a line-oriented log until `pattern` appears in it or `within` passes.
pub fn wait_for_line(path: &Path, pattern: &str, within: Duration) -> Option<String> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Ok(f) = fs::File::open(path) {
            for line in BufReader::new(f).lines().map_while(Result::ok) {
                if line.contains(pattern) {
                    return Some(line);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// An emulator, as booting its instances needs it: its admin API (`/_admin/snapshot` to find an instance
/// by name, `/_admin/metadata` for its metadata listener).
#[derive(Clone, Debug)]
pub struct Emulator {
    pub platform: Platform,
    pub endpoint: String,
    /// The Azure emulator's certificate (it serves HTTPS).
    pub azure_ca: Option<PathBuf>,
}

impl Emulator {
    /// A call of the emulator's admin API (panics unless it answers 200).
    pub fn admin_call(&self, method: &str, route: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        self.admin(method, route, body)
    }

    /// The live VMs of the Azure scale set named `set`: `(id, name as <set>_<instance id>)`.
    pub fn instances_of(&self, set: &str) -> Vec<(String, String)> {
        let snapshot = self.admin("GET", "snapshot", None);
        let marker = format!("/virtualmachinescalesets/{}/virtualmachines/", set.to_ascii_lowercase());
        snapshot["arm"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(id, _)| {
                let at = id.to_ascii_lowercase().find(&marker)?;
                let vm = &id[at + marker.len()..];
                (!vm.contains('/')).then(|| (id.clone(), format!("{set}_{vm}")))
            })
            .collect()
    }

    fn admin(&self, method: &str, route: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        match (&self.platform, &self.azure_ca) {
            (Platform::Azure, Some(ca)) => crate::harness::azure_admin(&self.endpoint, ca, method, route, body),
            _ => crate::harness::admin(&self.endpoint, method, route, body),
        }
    }

    /// The id the admin API knows the live instance named `name` by: its Name tag (AWS), instance name
    /// (Google), VM name or scale-set VM name `<set>_<instance id>` (Azure), or display name (OCI).
    pub fn instance_id(&self, name: &str) -> Option<String> {
        instance_in(self.platform, &self.admin("GET", "snapshot", None), name)
    }

    /// What to boot for the instance named `instance`, as the host `host` (its name in the cluster), from
    /// `image`, with stand-in `gpus`: its address, MAC and metadata listener from the emulator, and for the
    /// NoCloud stand-in (Google, Azure) the user data the instance has.
    pub fn host_spec(&self, host: &str, instance: &str, image: &Path, gpus: Option<Gpus>) -> Result<HostSpec, String> {
        let id = self.instance_id(instance).ok_or_else(|| format!("no live instance {instance} on the {:?} emulator", self.platform))?;
        let md = self.admin("POST", "metadata", Some(serde_json::json!({"instance": id})));
        let port = md["port"].as_u64().ok_or_else(|| format!("no metadata listener for {instance} ({id}): {md}"))? as u16;
        let address =
            md["private_ip"].as_str().and_then(|a| a.parse().ok()).ok_or_else(|| format!("no private address for {instance}: {md}"))?;
        let user_data = match self.platform {
            Platform::Azure => match md["custom_data"].as_str() {
                Some(b) => {
                    use base64::Engine;
                    Some(base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| format!("{instance}'s customData: {e}"))?)
                }
                None => None,
            },
            Platform::Gcp => Some(gce_user_data(port)?),
            _ => None,
        };
        Ok(HostSpec {
            name: host.to_owned(),
            platform: self.platform,
            image: image.to_owned(),
            address,
            mac: md["mac"].as_str().map(str::to_owned),
            metadata_port: port,
            user_data,
            instance_id: id,
            gpus,
        })
    }
}

/// The `user-data` attribute of a Google instance, read from its metadata listener as cloud-init's GCE
/// datasource reads it (empty when it has none).
fn gce_user_data(port: u16) -> Result<Vec<u8>, String> {
    let mut conn = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).map_err(|e| format!("the metadata listener: {e}"))?;
    write!(
        conn,
        "GET /computeMetadata/v1/instance/attributes/user-data HTTP/1.1\r\nHost: metadata.google.internal\r\nMetadata-Flavor: Google\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("not an HTTP answer")? + 4;
    let head = String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase();
    if head.starts_with("http/1.1 404") {
        return Ok(Vec::new());
    }
    if !head.starts_with("http/1.1 200") {
        return Err(format!("the user-data attribute: {head}"));
    }
    let mut body = &raw[at..];
    if !head.contains("transfer-encoding: chunked") {
        return Ok(body.to_vec());
    }
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&body[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 || body.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = &body[(eol + 4 + size).min(body.len())..];
    }
    Ok(out)
}

/// The live instance named `name` in an emulator's snapshot.
fn instance_in(platform: Platform, snapshot: &serde_json::Value, name: &str) -> Option<String> {
    let all = |key: &str| snapshot[key].as_object().cloned().unwrap_or_default();
    match platform {
        Platform::Aws => all("resources")
            .into_iter()
            .find(|(_, v)| v["kind"] == "instance" && v["tags"]["Name"] == name && v["state"]["name"] != "terminated")
            .map(|(id, _)| id),
        Platform::Gcp => all("compute").into_iter().find(|(p, v)| p.contains("/instances/") && v["name"] == name).map(|(p, _)| p),
        Platform::Azure => {
            let lower = name.to_ascii_lowercase();
            let vm = format!("/virtualmachines/{lower}");
            let in_set = lower.rsplit_once('_').map(|(set, i)| format!("/virtualmachinescalesets/{set}/virtualmachines/{i}"));
            all("arm").into_iter().map(|(id, _)| id).find(|id| {
                let l = id.to_ascii_lowercase();
                l.ends_with(&vm) || in_set.as_ref().is_some_and(|s| l.ends_with(s))
            })
        }
        Platform::Oci => all("resources")
            .into_iter()
            .find(|(_, v)| v["displayName"] == name && v["shape"].is_string() && v["lifecycleState"] != "TERMINATED")
            .map(|(id, _)| id),
    }
}
