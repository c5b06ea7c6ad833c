//! The emulated clouds' hypervisor (`hpc_emulators::hosts`): hosts boot from an image with systemd as PID 1
//! and Debian's cloud-init, run their user data, reach each other and, each for itself, the metadata
//! address; a stopped host leaves nothing behind. Needs the images the test command makes
//! (`HPC_IMAGE_DEBIAN_12`) and root, as CI has.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::time::Duration;

use hpc_emulators::hosts::{self, Gpus, HostSpec, Network, Platform};

/// A stand-in metadata listener for the harness's own test: answers every request with `body` and records
/// the request lines it got.
fn answering(body: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            log.lock().unwrap().push(first.trim().to_owned());
            let mut conn = conn;
            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    (port, seen)
}

fn spec(name: &str, address: Ipv4Addr, port: u16, user_data: &str) -> HostSpec {
    HostSpec {
        name: name.into(),
        platform: Platform::Gcp,
        image: hosts::image(12),
        address,
        mac: None,
        metadata_port: port,
        user_data: Some(user_data.as_bytes().to_vec()),
        instance_id: format!("{name}-id"),
        gpus: Some(Gpus { count: 2, amd: false, rdma: 4 }),
    }
}

const USER_DATA: &str = "#!/bin/bash\n\
    set -eu\n\
    curl -sf -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/name > /var/lib/hpc-test-md\n\
    echo \"ran as $(id -un) in $(hostname) with PID 1 $(cat /proc/1/comm)\" > /var/lib/hpc-test-ran\n";

#[test]
fn hosts_boot_with_systemd_run_their_user_data_and_each_reaches_its_own_metadata() {
    let net = Network::new("10.9.0.0/16").expect("network");
    let (port_a, seen_a) = answering("node-a-from-metadata");
    let (port_b, _) = answering("node-b-from-metadata");
    let a = net.boot(&spec("node-a", Ipv4Addr::new(10, 9, 0, 10), port_a, USER_DATA)).expect("boot a");
    let b = net.boot(&spec("node-b", Ipv4Addr::new(10, 9, 0, 11), port_b, USER_DATA)).expect("boot b");
    for h in [&a, &b] {
        let state = h.wait_booted(Duration::from_secs(240)).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(state.as_str(), "running" | "degraded"), "{state}");
    }
    // cloud-init ran the user data as root in the host, with systemd as PID 1.
    let ran = a.read("/var/lib/hpc-test-ran").unwrap_or_else(|e| panic!("{e}\n{}", a.diagnosis()));
    assert_eq!(ran.trim(), "ran as root in node-a with PID 1 systemd");
    // Each host's metadata requests reach the listener of its own instance, and only that one.
    assert_eq!(a.read("/var/lib/hpc-test-md").unwrap(), "node-a-from-metadata");
    assert_eq!(b.read("/var/lib/hpc-test-md").unwrap(), "node-b-from-metadata");
    assert!(seen_a.lock().unwrap().iter().all(|l| l.starts_with("GET /computeMetadata/v1/instance/name")), "{seen_a:?}");
    // The hosts reach each other on the subnet (b's sshd, which the image runs).
    a.sh("bash -c 'exec 3<>/dev/tcp/10.9.0.11/22 && head -c 4 <&3'").map(|s| assert_eq!(s, "SSH-")).unwrap_or_else(|e| panic!("{e}"));
    // The stand-in GPUs are character devices; the host's hierarchies are its own (systemd's init.scope at
    // their root).
    assert!(a.sh("test -c /dev/nvidia0 && test -c /dev/nvidia1 && test ! -e /dev/nvidia2").is_ok());
    assert_eq!(a.sh("nvidia-smi -L | wc -l").unwrap().trim(), "2");
    assert_eq!(a.sh("ls /sys/class/infiniband | wc -l").unwrap().trim(), "4", "the stand-in RDMA devices beside the real classes");
    assert!(a.sh("test -d /sys/class/net/eth0").is_ok(), "this host's own network devices under /sys/class/net");
    assert!(a.sh("grep -q '^[0-9]*:memory:/init.scope$' /proc/1/cgroup").is_ok(), "{:?}", a.sh("cat /proc/1/cgroup"));
    assert_eq!(a.sh("hostname").unwrap().trim(), "node-a");
}

#[test]
fn a_stopped_host_leaves_no_process_and_no_cgroup() {
    let net = Network::new("10.8.0.0/24").expect("network");
    let (port, _) = answering("x");
    let host = net.boot(&spec("gone", Ipv4Addr::new(10, 8, 0, 5), port, "#!/bin/sh\ntrue\n")).expect("boot");
    let pid = host.pid();
    host.wait_booted(Duration::from_secs(240)).unwrap_or_else(|e| panic!("{e}"));
    host.stop(Duration::from_secs(20));
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the host's PID 1 still runs");
    // No cgroup named for the host stays below ours.
    let left: Vec<String> = walk_cgroups().into_iter().filter(|d| d.contains("hpc-host-") && d.contains("-gone")).collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Every cgroup directory of this machine's hierarchies.
fn walk_cgroups() -> Vec<String> {
    let mut out = Vec::new();
    for h in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let mut stack = vec![h.path()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    out.push(e.path().display().to_string());
                    if out.len() < 100_000 {
                        stack.push(e.path());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_stand_ins_are_the_ones_stand_ins_md_lists() {
    let md = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("hosts/STAND-INS.md")).unwrap();
    let listed: BTreeSet<String> = md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| what ") && !l.starts_with("|---"))
        .filter_map(|l| l.split('|').nth(1).map(|c| c.trim().trim_matches('`').to_owned()))
        .collect();
    let code: BTreeSet<String> = hosts::STAND_INS.iter().map(|s| s.what.to_owned()).collect();
    assert_eq!(listed, code, "hosts/STAND-INS.md and hosts::STAND_INS list different stand-ins");
}

#[test]
fn a_debian_13_host_boots_with_systemd_257_on_this_machines_cgroup_hierarchies() {
    let net = Network::new("10.7.0.0/24").expect("network");
    let (port, _) = answering("trixie-from-metadata");
    let mut s = spec("trixie", Ipv4Addr::new(10, 7, 0, 9), port, USER_DATA);
    s.image = hosts::image(13);
    let host = net.boot(&s).expect("boot");
    host.wait_booted(Duration::from_secs(240)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(host.read("/var/lib/hpc-test-md").unwrap(), "trixie-from-metadata");
    assert!(host.sh("systemctl --version | head -n 1").unwrap().starts_with("systemd 257"));
}

/// Two clusters booted side by side in one process (the acceptance suite runs several at once) each have
/// their own hosts' cgroups, even where their hosts have the same names: a shared one would let one host's
/// systemd stop the other's services.
#[test]
fn hosts_of_the_same_name_on_two_networks_have_cgroups_of_their_own() {
    let (port, _) = answering("x");
    let one = Network::new("10.6.0.0/24").expect("network");
    let two = Network::new("10.6.1.0/24").expect("network");
    let a = one.boot(&spec("twin", Ipv4Addr::new(10, 6, 0, 5), port, "#!/bin/sh\ntrue\n")).expect("boot");
    let b = two.boot(&spec("twin", Ipv4Addr::new(10, 6, 1, 5), port, "#!/bin/sh\ntrue\n")).expect("boot");
    let cgroup_of = |pid: u32| {
        let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        // As this machine sees them (read from outside the hosts' cgroup namespaces): the memory hierarchy's.
        own.lines().find(|l| l.split(':').nth(1) == Some("memory")).unwrap_or_default().to_owned()
    };
    let (ca, cb) = (cgroup_of(a.pid()), cgroup_of(b.pid()));
    assert!(ca.contains("twin") && cb.contains("twin"), "{ca} / {cb}");
    assert_ne!(ca, cb, "two hosts share a cgroup");
    a.stop(Duration::from_secs(20));
    assert!(Path::new(&format!("/proc/{}", b.pid())).exists(), "stopping one host stopped the other");
}
