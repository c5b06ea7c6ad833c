//! A throwaway PostgreSQL server on 127.0.0.1 for the CLIs' `pg` state backend: the machine's own
//! PostgreSQL (Debian's packages; `HPC_PG_BIN` names another bin directory), a fresh data directory, a free
//! port, trust authentication for the one role `hpc`. One server per test process, started by the first
//! test that asks; it stops when the test process ends (a small shell holds it and ends it when its stdin
//! closes), and its data directory goes with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub struct Postgres {
    pub port: u16,
    bin: PathBuf,
    /// Holds the server: when this process ends, its stdin closes and the server is stopped.
    _keeper: Mutex<Child>,
}

impl Postgres {
    /// The `conn_str` of a new database `name` for the `pg` backend. Each test takes a database of its
    /// own: the backend's locks are advisory locks, which are per database (Terraform 1.0's lock for
    /// creating a workspace is one fixed key in it), so tests sharing one would lock each other out.
    pub fn database(&self, name: &str) -> String {
        let out = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "hpc", name])
            .output()
            .unwrap_or_else(|e| panic!("running createdb: {e}"));
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() || text.contains("already exists"), "createdb {name}: {text}");
        format!("postgres://hpc@127.0.0.1:{}/{name}?sslmode=disable", self.port)
    }
}

/// The test process's server, started on first use.
pub fn server() -> &'static Postgres {
    static SERVER: OnceLock<Postgres> = OnceLock::new();
    SERVER.get_or_init(|| start().unwrap_or_else(|e| panic!("starting PostgreSQL for the pg state backend: {e}")))
}

/// The directory holding `initdb`, `postgres` and `pg_isready`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("HPC_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("no /usr/lib/postgresql ({e}): install the machine's postgresql package (./scripts/test.sh does)"))?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| "no PostgreSQL server under /usr/lib/postgresql/*/bin".to_owned())
}

/// Whether this process runs as root.
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// PostgreSQL refuses to run as root: as root, it runs as the package's `postgres` user.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=postgres", "--regid=postgres", "--clear-groups", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(55432)
}

fn start() -> Result<Postgres, String> {
    let bin = bin_dir()?;
    let root = tempfile::Builder::new().prefix("hpc-pg-").tempdir().map_err(|e| e.to_string())?.keep();
    let data = root.join("data");
    std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
    if is_root() {
        let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&root).status().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("chown postgres {}", root.display()));
        }
    }
    let init = as_server_user(&bin.join("initdb"))
        .args(["-D"])
        .arg(&data)
        .args(["-U", "hpc", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        .output()
        .map_err(|e| format!("running initdb: {e}"))?;
    if !init.status.success() {
        return Err(format!("initdb failed: {}{}", String::from_utf8_lossy(&init.stdout), String::from_utf8_lossy(&init.stderr)));
    }
    let port = free_port();
    let server = as_server_user(&bin.join("postgres"));
    let mut argv: Vec<String> = vec![server.get_program().to_string_lossy().into_owned()];
    argv.extend(server.get_args().map(|a| a.to_string_lossy().into_owned()));
    argv.extend(
        [
            "-D",
            &data.to_string_lossy(),
            "-k",
            &root.to_string_lossy(),
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ]
        .map(str::to_owned),
    );
    // The keeper: starts the server, waits for its own stdin to close (this process ending), then stops
    // the server and removes the data.
    let script = r#"log="$1"; root="$2"; shift 2; "$@" >"$log" 2>&1 & pid=$!; cat >/dev/null; kill -INT "$pid" 2>/dev/null; wait "$pid"; rm -rf "$root""#;
    let log = root.join("server.log");
    let keeper = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("keeper")
        .arg(&log)
        .arg(&root)
        .args(&argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting postgres: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "hpc", "-q"])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            break;
        }
        if Instant::now() > deadline {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("PostgreSQL did not come up on 127.0.0.1:{port} within 60 s: {text}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // The pipe to the keeper stays open for the life of this process: never written, closed at exit.
    Ok(Postgres { port, bin, _keeper: Mutex::new(keeper) })
}
