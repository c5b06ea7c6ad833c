//! `hpc-emulator`: starts the cloud emulators on free 127.0.0.1 ports, writes their endpoints to a JSON
//! file, and keeps them running until it is stopped (SIGTERM/SIGINT to its process group, or stdin closed
//! with `--until-stdin-closes`). Never linked into the provider.
//!
//! It runs the AWS emulator (moto with `emulators/aws/hpc_moto.py`) as a child process and the Google Cloud
//! (Compute, Managed Lustre), Azure Resource Manager (HTTPS) and OCI emulators of our own in-process.
//!
//!     hpc-emulator start --python <moto venv python> [--endpoints FILE]
//!
//! `boot` boots instances an emulator launched as hosts (`hpc_emulators::hosts`: systemd, cloud-init, the
//! instance's own user data against the emulator's metadata service) on one network, prints
//! `READY <host> <pid> <address>` for each once it has booted (its PID 1 as this machine numbers it, for
//! `nsenter -t <pid> -a -r -w`), then `ALL READY`, and keeps them until its stdin closes or it is stopped:
//!
//!     hpc-emulator boot --endpoints FILE --cloud aws|gcp|azure|oci --network CIDR --image DIR
//!         [--gpus N] HOST[=INSTANCE][+gpus] ...
//!
//! HOST is the host's name (its Slurm name), INSTANCE the cloud's name of the instance (default HOST),
//! `+gpus` gives it N stand-in GPUs (hosts/STAND-INS.md).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

struct Args {
    python: PathBuf,
    endpoints: Option<PathBuf>,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    if it.next().as_deref() != Some("start") {
        return Err("usage: hpc-emulator start --python PATH [--endpoints FILE]".into());
    }
    let (mut python, mut endpoints) = (None, None);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--python" => python = Some(PathBuf::from(value)),
            "--endpoints" => endpoints = Some(PathBuf::from(value)),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Args { python: python.ok_or("--python is required (the moto virtualenv's python)")?, endpoints })
}

/// Starts one emulator process that prints `READY <endpoint>` as its first line.
fn spawn_ready(mut cmd: Command, name: &str) -> Result<(Child, String), String> {
    let mut child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().map_err(|e| format!("starting the {name} emulator: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(20)).map_err(|_| format!("the {name} emulator did not become ready in 20 s"))?;
    let endpoint = line.trim().strip_prefix("READY ").ok_or_else(|| format!("the {name} emulator said {line:?}"))?.to_owned();
    Ok((child, endpoint))
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("boot") {
        return boot::main(std::env::args().skip(2).collect());
    }
    serve()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn serve() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let server = hpc_emulators::harness::aws_server_script();
    let mut cmd = Command::new(&args.python);
    // The emulator exits when our end of its stdin closes, so it never outlives this supervisor.
    cmd.arg(server).args(["--port", "0", "--exit-with-stdin"]).stdin(Stdio::piped());
    let (mut aws, aws_endpoint) = match spawn_ready(cmd, "AWS") {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let gcp = match hpc_emulators::gcp::serve("127.0.0.1:0").await {
        Ok(g) => g,
        Err(e) => {
            eprintln!("starting the GCP emulator: {e}");
            let _ = aws.kill();
            return ExitCode::from(1);
        }
    };
    let oci = match hpc_emulators::oci::serve("127.0.0.1:0").await {
        Ok(o) => o,
        Err(e) => {
            eprintln!("starting the OCI emulator: {e}");
            let _ = aws.kill();
            return ExitCode::from(1);
        }
    };
    let azure = match hpc_emulators::azure::serve("127.0.0.1:0").await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("starting the Azure emulator: {e}");
            let _ = aws.kill();
            return ExitCode::from(1);
        }
    };
    // Clients trust the Azure emulator's self-signed certificate from this file.
    let ca =
        args.endpoints.as_ref().map(|p| p.with_file_name("azure-ca.pem")).unwrap_or_else(|| std::env::temp_dir().join("hpc-azure-ca.pem"));
    if let Err(e) = std::fs::write(&ca, &azure.certificate_pem) {
        eprintln!("writing {}: {e}", ca.display());
        let _ = aws.kill();
        return ExitCode::from(1);
    }
    let endpoints = serde_json::json!({
        "aws": aws_endpoint, "gcp": gcp.endpoint, "oci": oci.endpoint, "azure": azure.endpoint, "azure_ca_pem": ca.display().to_string(),
    });
    let text = serde_json::to_string_pretty(&endpoints).unwrap_or_default();
    if let Some(path) = &args.endpoints {
        let tmp = path.with_extension("tmp");
        if let Err(e) = std::fs::write(&tmp, format!("{text}\n")).and_then(|()| std::fs::rename(&tmp, path)) {
            eprintln!("writing {}: {e}", path.display());
            let _ = aws.kill();
            return ExitCode::from(1);
        }
    }
    println!("READY in {} ms: {}", started.elapsed().as_millis(), endpoints);
    // `wait` would close the child's stdin first, which tells the emulator to exit: keep it open.
    let _stdin = aws.stdin.take();
    // Supervise: if an emulator dies, say so and exit (the caller's tests would fail obscurely otherwise).
    let status = tokio::task::spawn_blocking(move || aws.wait()).await;
    eprintln!("the AWS emulator exited: {status:?}");
    ExitCode::from(1)
}

mod boot {
    use std::io::Read;
    use std::path::PathBuf;
    use std::process::ExitCode;
    use std::time::Duration;

    use hpc_emulators::hosts::{Emulator, Gpus, Network, Platform};

    pub fn main(args: Vec<String>) -> ExitCode {
        match run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hpc-emulator boot: {e}");
                ExitCode::from(1)
            }
        }
    }

    fn run(args: Vec<String>) -> Result<(), String> {
        let (mut endpoints, mut cloud, mut network, mut image, mut gpus, mut hosts) = (None, None, None, None, 8u32, Vec::new());
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
            match a.as_str() {
                "--endpoints" => endpoints = Some(PathBuf::from(value()?)),
                "--cloud" => cloud = Some(value()?),
                "--network" => network = Some(value()?),
                "--image" => image = Some(PathBuf::from(value()?)),
                "--gpus" => gpus = value()?.parse().map_err(|_| "--gpus takes a number")?,
                flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
                host => hosts.push(host.to_owned()),
            }
        }
        let endpoints = endpoints.ok_or("--endpoints FILE is required (hpc-emulator start writes it)")?;
        let text = std::fs::read_to_string(&endpoints).map_err(|e| format!("{}: {e}", endpoints.display()))?;
        let known: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", endpoints.display()))?;
        let cloud = cloud.ok_or("--cloud is required")?;
        let platform = match cloud.as_str() {
            "aws" => Platform::Aws,
            "gcp" => Platform::Gcp,
            "azure" => Platform::Azure,
            "oci" => Platform::Oci,
            other => return Err(format!("unknown cloud {other} (aws, gcp, azure or oci)")),
        };
        let endpoint = known[cloud.as_str()].as_str().ok_or_else(|| format!("no {cloud} endpoint in {}", endpoints.display()))?.to_owned();
        let azure_ca = known["azure_ca_pem"].as_str().map(PathBuf::from);
        let emulator = Emulator { platform, endpoint, azure_ca };
        let image = image.ok_or("--image DIR is required (scripts/lib.sh ensure_node_images makes them)")?;
        let net = Network::new(network.as_deref().ok_or("--network CIDR is required")?).map_err(|e| format!("the network: {e}"))?;
        let mut booted = Vec::new();
        for h in &hosts {
            let (h, with_gpus) = match h.strip_suffix("+gpus") {
                Some(h) => (h, true),
                None => (h.as_str(), false),
            };
            let (name, instance) = h.split_once('=').unwrap_or((h, h));
            let spec = emulator.host_spec(name, instance, &image, with_gpus.then_some(Gpus { count: gpus, amd: false, rdma: 0 }))?;
            let host = net.boot(&spec).map_err(|e| format!("booting {name}: {e}"))?;
            booted.push(host);
        }
        for h in &booted {
            h.wait_booted(Duration::from_secs(600))?;
            println!("READY {} {} {}", h.name, h.pid(), h.address);
        }
        println!("ALL READY");
        // Until stdin closes (the caller is done) or a signal ends this process (the hosts die with it).
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        for h in booted {
            h.stop(Duration::from_secs(20));
        }
        Ok(())
    }
}
