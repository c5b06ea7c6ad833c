//! Fabric validation with an NCCL all-reduce before a long run: parse what nccl-tests printed, judge the
//! measured bus bandwidth against the node type's expected figure, and write the job that measures it
//! (a Slurm batch script or a Kubernetes Job). PURE: text and numbers in, values and text out.
//!
//! The judgement follows the issue's rule of thumb: 20% or more short of the expected all-reduce bus
//! bandwidth is a placement or driver problem (some nodes outside the placement group, a degraded GPU or
//! NIC, an untuned driver or plugin), 50% or more short is a fabric problem (NCCL not on the RDMA fabric
//! at all, or the fabric down). Any element nccl-tests found wrong is a failure of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::catalog::Cloud;

/// One timing of a result row: the out-of-place or the in-place run of one message size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub time_us: f64,
    /// GB/s (10^9 bytes per second), as nccl-tests reports `algbw`.
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    /// Elements found wrong; `None` when the run did not check (`N/A`, printed for `-c 0`).
    pub wrong: Option<u64>,
}

/// One result row: a message size and its timings.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclRow {
    pub bytes: u64,
    pub out_of_place: Timing,
    /// Absent when a row carries only one timing.
    pub in_place: Option<Timing>,
}

impl NcclRow {
    /// The better bus bandwidth of the row's timings.
    pub fn busbw_gbs(&self) -> f64 {
        self.in_place.map_or(self.out_of_place.busbw_gbs, |ip| ip.busbw_gbs.max(self.out_of_place.busbw_gbs))
    }

    fn wrong(&self) -> u64 {
        let ip = self.in_place.and_then(|t| t.wrong).unwrap_or(0);
        self.out_of_place.wrong.unwrap_or(0).saturating_add(ip)
    }
}

/// What an nccl-tests run printed, reduced to what the fabric check needs.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclRun {
    /// The test binary, from `# Collective test starting: all_reduce_perf` (nccl-tests 2.14 and later).
    pub test: Option<String>,
    /// The largest message size of the run, in bytes.
    pub largest_bytes: u64,
    /// Bus bandwidth at the largest message size: the better of out-of-place and in-place (and of the
    /// rows of that size, when the text holds several runs).
    pub busbw_gbs: f64,
    /// The footer's `# Avg bus bandwidth`, when the run finished.
    pub avg_busbw_gbs: Option<f64>,
    /// The footer's `# Out of bounds values`, when the run finished.
    pub out_of_bounds: Option<u64>,
    /// Every result row, in the order printed.
    pub rows: Vec<NcclRow>,
    /// `#  Rank` lines: one per GPU taking part.
    pub ranks: usize,
    /// The sum of the `#wrong` columns (`N/A` counts as 0).
    pub wrong: u64,
    /// The GPU named on the first rank line, e.g. `NVIDIA H100 80GB HBM3`.
    pub gpu: Option<String>,
}

impl NcclRun {
    /// Elements reported wrong: the `#wrong` columns, or the footer's out-of-bounds count if larger.
    pub fn wrong_elements(&self) -> u64 {
        self.wrong.max(self.out_of_bounds.unwrap_or(0))
    }
}

/// Where the timings sit in a result row, from the column header (`size count type redop root time
/// algbw busbw #wrong time algbw busbw #wrong`, with extra columns in some versions).
#[derive(Clone, Debug)]
struct Layout {
    /// Index of the `time` column of each timing; algbw, busbw and #wrong follow it.
    timings: Vec<usize>,
    /// Whether the fourth column of a timing counts wrong elements (`#wrong`) rather than an error
    /// magnitude (`error`, in old versions).
    counts_wrong: bool,
}

impl Layout {
    fn standard() -> Layout {
        Layout { timings: vec![5, 9], counts_wrong: true }
    }

    /// The layout a column header describes, if it is one.
    fn from_header(columns: &[&str]) -> Option<Layout> {
        if columns.first() != Some(&"size") || !columns.contains(&"busbw") {
            return None;
        }
        let timings: Vec<usize> = columns
            .iter()
            .enumerate()
            .filter(|(i, c)| **c == "busbw" && *i >= 2 && columns[i - 1] == "algbw")
            .map(|(i, _)| i - 2)
            .collect();
        let counts_wrong = !columns.contains(&"error");
        (!timings.is_empty()).then_some(Layout { timings, counts_wrong })
    }
}

const EXPECTED_FORMAT: &str = "the output of an nccl-tests binary such as all_reduce_perf: `#` header lines, the column header \
                               `#  size  count  type  redop  root  time  algbw  busbw  #wrong ...`, then one row of numbers per \
                               message size";

/// Parses the output of nccl-tests (all_reduce_perf and the other `*_perf` binaries). Lines that are not
/// nccl-tests' (NCCL INFO logs, launcher messages) are skipped; a result row that does not parse is an
/// error naming its line.
pub fn parse_nccl_tests(text: &str) -> Result<NcclRun, String> {
    let mut layout = Layout::standard();
    let mut header_seen = false;
    let mut run = NcclRun {
        test: None,
        largest_bytes: 0,
        busbw_gbs: 0.0,
        avg_busbw_gbs: None,
        out_of_bounds: None,
        rows: Vec::new(),
        ranks: 0,
        wrong: 0,
        gpu: None,
    };
    let mut failure: Option<String> = None;
    let mut first_line: Option<&str> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = without_launcher_label(raw.trim());
        if line.is_empty() {
            continue;
        }
        first_line.get_or_insert(line);
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            let words: Vec<&str> = comment.split_whitespace().collect();
            if words.first() == Some(&"Rank") && words.get(1).is_some_and(|w| w.parse::<u32>().is_ok()) {
                run.ranks += 1;
                if run.gpu.is_none() {
                    run.gpu = comment.split_once(']').map(|(_, name)| name.trim().to_owned()).filter(|n| !n.is_empty());
                }
            } else if let Some(l) = Layout::from_header(&words) {
                layout = l;
                header_seen = true;
            } else if let Some(value) = footer_value(comment, "Avg bus bandwidth") {
                run.avg_busbw_gbs = value.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
            } else if let Some(value) = footer_value(comment, "Out of bounds values") {
                run.out_of_bounds = value.parse::<u64>().ok();
            } else if let Some(test) = comment.strip_prefix("Collective test starting:") {
                run.test = Some(test.trim().to_owned());
            } else if words.first() == Some(&"nThread") || words.first() == Some(&"nccl-tests") {
                header_seen = true;
            } else if comment.starts_with("error:") && failure.is_none() {
                failure = Some(line.to_owned());
            }
            continue;
        }
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens[0].parse::<u64>().is_err() {
            if failure.is_none() && (line.contains("NCCL WARN") || line.contains("NCCL failure") || line.contains("CUDA failure")) {
                failure = Some(line.to_owned());
            }
            continue;
        }
        let row = parse_row(&tokens, &layout).map_err(|e| format!("line {}: {e}: {:?}", n + 1, clip(line, 160)))?;
        run.wrong = run.wrong.saturating_add(row.wrong());
        run.rows.push(row);
    }
    let Some(largest) = run.rows.iter().map(|r| r.bytes).max() else {
        let because = failure.map(|f| format!(" The first failure it printed: {:?}.", clip(&f, 200))).unwrap_or_default();
        return Err(match first_line {
            None => format!("the text is empty; expected {EXPECTED_FORMAT}."),
            Some(_) if header_seen => format!(
                "nccl-tests started (its header is there) but printed no result rows: the run failed or was cut off \
                 before the first message size.{because}"
            ),
            Some(first) => {
                format!("no nccl-tests result rows found; expected {EXPECTED_FORMAT}. The text starts with {:?}.{because}", clip(first, 80))
            }
        });
    };
    run.largest_bytes = largest;
    run.busbw_gbs = run.rows.iter().filter(|r| r.bytes == largest).map(NcclRow::busbw_gbs).fold(0.0, f64::max);
    Ok(run)
}

/// A line without the label a launcher may put before it: `srun --label` writes `12: `, Open MPI's
/// `mpirun --tag-output` writes `[1,12]<stdout>:`.
fn without_launcher_label(line: &str) -> &str {
    if let Some((label, rest)) = line.split_once(':') {
        let srun = !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit());
        let mpirun = label.starts_with('[') && (label.ends_with("]<stdout>") || label.ends_with("]<stderr>"));
        if srun || mpirun {
            return rest.trim();
        }
    }
    line
}

/// `value` of a footer line `name : value ...`.
fn footer_value<'a>(comment: &'a str, name: &str) -> Option<&'a str> {
    let (key, value) = comment.split_once(':')?;
    (key.trim() == name).then(|| value.split_whitespace().next().unwrap_or(""))
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_owned(),
    }
}

fn parse_row(tokens: &[&str], layout: &Layout) -> Result<NcclRow, String> {
    let bytes = tokens[0].parse::<u64>().map_err(|_| format!("size {:?} is not a number of bytes", tokens[0]))?;
    let needed = layout.timings.iter().max().map_or(0, |t| t + 4);
    if tokens.len() < needed {
        return Err(format!(
            "a result row has {needed} columns (size, count, type, redop, root, then time, algbw, busbw and #wrong for \
             out-of-place and in-place), this one has {}",
            tokens.len()
        ));
    }
    let mut timings = layout.timings.iter().map(|&at| {
        let number = |i: usize, what: &str| {
            tokens[at + i]
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{what} {:?} is not a non-negative number", tokens[at + i]))
        };
        let wrong = match tokens[at + 3] {
            "N/A" => None,
            _ if !layout.counts_wrong => None,
            w => Some(number(3, "#wrong").map_err(|_| format!("#wrong {w:?} is neither a count nor N/A"))?.round() as u64),
        };
        Ok::<_, String>(Timing { time_us: number(0, "time")?, algbw_gbs: number(1, "algbw")?, busbw_gbs: number(2, "busbw")?, wrong })
    });
    let out_of_place = timings.next().unwrap_or_else(|| Err("no timing columns".into()))?;
    let in_place = timings.next().transpose()?;
    Ok(NcclRow { bytes, out_of_place, in_place })
}

/// How far the fabric is from what the node type reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// At least 80% of the expected bus bandwidth.
    Healthy,
    /// 50% to 80% of it (20% or more short): placement, a degraded node, driver or plugin versions.
    PlacementOrDriver,
    /// Below 50% of it (50% or more short): NCCL is not on the RDMA fabric, or the fabric is down.
    Fabric,
}

impl Verdict {
    pub const NAMES: [&'static str; 3] = ["healthy", "placement-or-driver", "fabric"];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::PlacementOrDriver => "placement-or-driver",
            Verdict::Fabric => "fabric",
        }
    }

    /// The verdict for a measured / expected ratio: >= 0.8 healthy, >= 0.5 placement or driver, below
    /// that the fabric.
    pub fn classify(ratio: f64) -> Verdict {
        if ratio >= 0.8 {
            Verdict::Healthy
        } else if ratio >= 0.5 {
            Verdict::PlacementOrDriver
        } else {
            Verdict::Fabric
        }
    }
}

/// The judgement of one measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Assessment {
    pub verdict: Verdict,
    /// Measured / expected, rounded to three decimals (the verdict is decided on this value).
    pub ratio: f64,
    /// How far below the expected figure, in percent with one decimal; 0 at or above it.
    pub shortfall_percent: f64,
    /// Healthy bandwidth and no wrong elements.
    pub healthy: bool,
    pub message: String,
}

/// Judges a measured all-reduce bus bandwidth (GB/s) against the expected one, with `wrong` elements
/// reported by nccl-tests; `cloud` tailors what the message says to check. Callers pass a positive
/// `expected`; anything else counts as nothing measured.
pub fn assess(measured_gbs: f64, expected_gbs: f64, wrong: u64, cloud: Option<Cloud>) -> Assessment {
    let raw = if expected_gbs > 0.0 && expected_gbs.is_finite() && measured_gbs.is_finite() { measured_gbs / expected_gbs } else { 0.0 };
    // Thousandths, so the ratio, the shortfall and the verdict agree exactly.
    let milli = (raw.max(0.0) * 1000.0).round().min(1e12) as i64;
    let ratio = milli as f64 / 1000.0;
    let shortfall_percent = (1000 - milli).max(0) as f64 / 10.0;
    let verdict = Verdict::classify(ratio);
    let (measured, expected) = (gbs(measured_gbs), gbs(expected_gbs));
    let share = milli as f64 / 10.0;
    let mut message = String::new();
    if wrong > 0 {
        let _ = write!(
            message,
            "Data corruption: nccl-tests found {wrong} wrong element{}. Whatever the bandwidth, do not train on this cluster: \
             run all_reduce_perf on each node alone to find the node that corrupts data, and look for Xid errors in its \
             kernel log (dmesg). ",
            if wrong == 1 { "" } else { "s" }
        );
    }
    match verdict {
        Verdict::Healthy => {
            let _ = write!(
                message,
                "Bandwidth healthy: the all-reduce bus bandwidth, {measured} GB/s, is {share}% of the {expected} GB/s expected."
            );
        }
        Verdict::PlacementOrDriver => {
            let _ = write!(
                message,
                "Placement or driver problem: the all-reduce bus bandwidth, {measured} GB/s, is {shortfall_percent}% short of \
                 the {expected} GB/s expected ({share}% of it). A shortfall of 20% to 50% usually means some nodes are outside \
                 the placement group, a GPU or NIC is degraded, or the driver, NCCL or its network plugin is not the tuned \
                 version; the fabric itself carries traffic. {}",
                advice(Verdict::PlacementOrDriver, cloud)
            );
        }
        Verdict::Fabric => {
            let _ = write!(
                message,
                "Fabric problem: the all-reduce bus bandwidth, {measured} GB/s, is {shortfall_percent}% short of the \
                 {expected} GB/s expected ({share}% of it). A shortfall of 50% or more usually means NCCL is not using the \
                 RDMA fabric at all (it fell back to TCP sockets: with NCCL_DEBUG=INFO it logs \"Using network Socket\"), or \
                 the fabric's interfaces or links are down. {}",
                advice(Verdict::Fabric, cloud)
            );
        }
    }
    Assessment { verdict, ratio, shortfall_percent, healthy: verdict == Verdict::Healthy && wrong == 0, message }
}

/// What to check, per verdict and cloud (each cloud's own checks come from its expander).
fn advice(verdict: Verdict, cloud: Option<Cloud>) -> &'static str {
    match (verdict, cloud.map(crate::clouds::expander)) {
        (Verdict::Healthy, _) => "",
        (Verdict::PlacementOrDriver, Some(cloud)) => cloud.placement_advice(),
        (Verdict::PlacementOrDriver, None) => {
            "Check: every node in one placement group (or topology domain); every RDMA interface up; the cloud's NCCL \
             network plugin loaded (NCCL_DEBUG=INFO); the same GPU driver, NCCL and plugin versions on every node. Set \
             `cloud` for checks specific to the cloud."
        }
        (Verdict::Fabric, Some(cloud)) => cloud.fabric_advice(),
        (Verdict::Fabric, None) => {
            "Check: NCCL_DEBUG=INFO shows the RDMA network (IB, EFA's Libfabric, GPUDirect), not Socket; the RDMA \
             interfaces attached and up on every node; every node in one placement group on the RDMA fabric. Set \
             `cloud` for checks specific to the cloud."
        }
    }
}

/// GB/s for a message: whole numbers without decimals, others with up to two.
fn gbs(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// An nccl-tests all-reduce over a set of nodes: what [`slurm_script`] and [`kubernetes_job`] write.
#[derive(Clone, Debug)]
pub struct NcclJob<'a> {
    /// Slurm job name; for Kubernetes the Job, Service and pod host name prefix (a DNS label).
    pub name: &'a str,
    /// The nodes to run on, by name (Slurm node names); one process per GPU each.
    pub nodes: &'a [String],
    /// The cluster the nodes belong to: the Kubernetes Job selects nodes labelled [`NODE_LABEL`]`=<cluster>`.
    pub cluster: &'a str,
    pub gpus_per_node: u32,
    /// The cloud's NCCL environment (e.g. `hpc_gpu_cluster.node_environment`).
    pub env: &'a BTreeMap<String, String>,
    /// The node type's expected all-reduce bus bandwidth, GB/s, written in a comment.
    pub expected_busbw_gbs: Option<f64>,
    /// Rack-scale node types on a block topology whose Slurm has `sbatch --segment` (24.05 and later): the nodes
    /// per NVLink domain, which the job keeps its nodes within. Such a job names no nodes, it takes them from its
    /// partition: from 24.05 Slurm refuses a `--segment` job whose node list spans segments. None everywhere else
    /// (sbatch before 24.05 does not know the option).
    pub segment: Option<u32>,
    /// The Slurm partition the job is submitted to (`--partition`); the cluster's default partition when None.
    pub partition: Option<&'a str>,
    /// Taints on the nodes (a Kubernetes node pool's): the Job's pods tolerate each.
    pub tolerate: &'a [crate::model::Taint],
}

/// The node label the Kubernetes Job selects this cluster's nodes by (`<label>=<cluster name>`).
pub use crate::clouds::kubernetes::NODE_LABEL;

/// Where the scripts look for nccl-tests when `NCCL_TESTS_DIR` is not set.
pub const DEFAULT_NCCL_TESTS_DIR: &str = "/opt/nccl-tests/build";

/// A placeholder, not a published image: the Job's comment says what the image must hold.
pub const PLACEHOLDER_IMAGE: &str = "nccl-tests:latest";

/// Where a Slurm job writes its log: on its first node's own disk (the clusters have no shared storage yet), in a
/// directory every node has and keeps across a reboot.
pub const LOG_DIR: &str = "/var/tmp";

/// The all_reduce_perf arguments: 8 B to 16 GiB, doubling, one GPU per process.
const PERF_ARGS: &str = "-b 8 -e 16G -f 2 -g 1";

impl NcclJob<'_> {
    fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("no nodes to run on".into());
        }
        if !(1..=64).contains(&self.gpus_per_node) {
            return Err(format!("gpus_per_node must be 1 to 64, got {}", self.gpus_per_node));
        }
        let mut seen = BTreeSet::new();
        for node in self.nodes {
            let valid = !node.is_empty() && node.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
            if !valid {
                return Err(format!("node name {node:?} must be letters, digits, '-', '.' or '_'"));
            }
            if !seen.insert(node.as_str()) {
                return Err(format!("node {node:?} is listed twice"));
            }
        }
        for (name, value) in self.env {
            let mut chars = name.chars();
            let valid =
                chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!("environment variable name {name:?} is not a shell identifier"));
            }
            if value.contains('\0') {
                return Err(format!("environment variable {name} holds a NUL character"));
            }
        }
        Ok(())
    }

    fn ranks(&self) -> u64 {
        self.nodes.len() as u64 * u64::from(self.gpus_per_node)
    }

    /// The comment lines both job kinds start with.
    fn summary(&self) -> String {
        let (n, g) = (self.nodes.len(), self.gpus_per_node);
        let expected = match self.expected_busbw_gbs {
            Some(e) => format!("Expected bus bandwidth: {} GB/s at the largest message size (the node type's published figure).", gbs(e)),
            None => "Expected bus bandwidth: none published for this node type; compare with a run on nodes you trust.".into(),
        };
        format!(
            "# NCCL all-reduce over {n} node{} x {g} GPU{} ({} ranks, one GPU each), messages from 8 B to 16 GiB.\n# {expected}\n",
            if n == 1 { "" } else { "s" },
            if g == 1 { "" } else { "s" },
            self.ranks()
        )
    }
}

/// Single-quotes a value for bash.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A Slurm batch script running nccl-tests' all_reduce_perf on `job.nodes`, one task per GPU, with the
/// cloud's NCCL environment. nccl-tests must be built with MPI=1 and Slurm with PMIx.
pub fn slurm_script(job: &NcclJob) -> Result<String, String> {
    job.check()?;
    if job.name.is_empty() || !job.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Err(format!("job name {:?} must be letters, digits, '-', '_' or '.'", job.name));
    }
    let (name, g) = (job.name, job.gpus_per_node);
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    let _ = writeln!(s, "#SBATCH --job-name={name}");
    let _ = writeln!(s, "#SBATCH --nodes={}", job.nodes.len());
    let _ = writeln!(s, "#SBATCH --ntasks-per-node={g}");
    let _ = writeln!(s, "#SBATCH --gpus-per-node={g}");
    s.push_str("#SBATCH --exclusive\n");
    if let Some(p) = job.partition {
        let _ = writeln!(s, "#SBATCH --partition={p}");
    }
    // Segments take their nodes from the partition; a node list over several segments is refused (24.05 and later).
    let segment = job.segment.filter(|n| *n > 0 && job.partition.is_some() && (job.nodes.len() as u32).is_multiple_of(*n));
    match segment {
        Some(segment) => {
            let _ = writeln!(s, "#SBATCH --segment={segment}");
        }
        None => {
            let _ = writeln!(s, "#SBATCH --nodelist={}", job.nodes.join(","));
        }
    }
    let _ = writeln!(s, "#SBATCH --output={LOG_DIR}/{name}-%j.log");
    s.push_str("#\n");
    s.push_str(&job.summary());
    if segment.is_some() {
        let _ = writeln!(s, "# The nodes: any {} of the partition's, in whole NVLink domains (--segment).", job.nodes.len());
    }
    let _ = writeln!(
        s,
        "# The log is written on the job's first node (BatchHost in `scontrol show job <job id>`), not where you submit:\n\
         # {LOG_DIR}/{name}-<job id>.log there. Copy it off that node (e.g. ssh <node> cat ...), then check it with\n\
         # data \"hpc_nccl_check\" {{ nccl_tests_output = file(\"{name}-<job id>.log\") ... }}."
    );
    s.push_str("# NCCL_TESTS_DIR is where nccl-tests was built (make MPI=1); set it if yours is elsewhere.\n\n");
    s.push_str("set -euo pipefail\n\n");
    let _ = writeln!(s, "NCCL_TESTS_DIR=\"${{NCCL_TESTS_DIR:-{DEFAULT_NCCL_TESTS_DIR}}}\"\n");
    if !job.env.is_empty() {
        s.push_str("# The cloud's NCCL environment; srun passes it to every task.\n");
        for (k, v) in job.env {
            let _ = writeln!(s, "export {k}={}", shell_quote(v));
        }
        s.push('\n');
    }
    let _ = writeln!(s, "srun --mpi=pmix \"${{NCCL_TESTS_DIR}}/all_reduce_perf\" {PERF_ARGS}");
    Ok(s)
}

/// A JSON string, which is also a YAML double-quoted scalar: no value is read as a bool or a number.
fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn is_dns_label(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A Kubernetes `batch/v1` indexed Job running nccl-tests' all_reduce_perf across `job.nodes` (one pod
/// per node, `G` GPUs each): pod 0 launches it with mpirun over SSH to every pod, the others serve SSH
/// until pod 0 is done. `image` defaults to [`PLACEHOLDER_IMAGE`]; `device_resources` are extra limits
/// per pod, e.g. `vpc.amazonaws.com/efa = 32` on EKS.
pub fn kubernetes_job(job: &NcclJob, image: Option<&str>, device_resources: &BTreeMap<String, u32>) -> Result<String, String> {
    job.check()?;
    // Pod host names are `<name>-<index>`, and must stay DNS labels (63 characters).
    if !is_dns_label(job.name, 50) {
        return Err(format!(
            "job name {:?} must be a DNS label of at most 50 characters: lowercase letters, digits and '-', starting with a letter",
            job.name
        ));
    }
    let image = image.unwrap_or(PLACEHOLDER_IMAGE);
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("image {image:?} is not an image reference"));
    }
    for name in device_resources.keys() {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '/')) {
            return Err(format!("resource name {name:?} is not a Kubernetes resource name"));
        }
    }
    let (name, n, g) = (job.name, job.nodes.len(), job.gpus_per_node);
    let host = |index: &str| format!("{name}-{index}.{name}");
    let mut y = String::new();
    y.push_str(&job.summary());
    y.push_str("#\n");
    y.push_str("# Pod 0 launches all_reduce_perf with mpirun over SSH to every pod; the other pods serve SSH\n");
    y.push_str("# until it is done. The pods find each other by name through a headless Service:\n");
    let _ = writeln!(y, "# {} for pod i. The pods run on nodes labelled {NODE_LABEL}={}", host("<i>"), job.cluster);
    let _ = writeln!(y, "# (kubectl label node <node> {NODE_LABEL}={}, or kubelet --node-labels at boot).", job.cluster);
    y.push_str("# Create the Service before the Job:\n");
    y.push_str("#\n#   apiVersion: v1\n#   kind: Service\n#   metadata:\n");
    let _ = writeln!(y, "#     name: {name}");
    y.push_str("#   spec:\n#     clusterIP: None\n#     publishNotReadyAddresses: true\n#     selector:\n");
    let _ = writeln!(y, "#       app.kubernetes.io/name: {name}");
    y.push_str("#\n");
    let _ = writeln!(y, "# The image {PLACEHOLDER_IMAGE:?} is a placeholder, not a published image. Use one with");
    let _ = writeln!(y, "# nccl-tests built with MPI=1 (in NCCL_TESTS_DIR, default {DEFAULT_NCCL_TESTS_DIR}), Open MPI,");
    y.push_str("# an SSH server and client whose root user accepts its own key, and the cloud's NCCL network\n");
    y.push_str("# plugin. Add the cloud's RDMA devices (e.g. vpc.amazonaws.com/efa on EKS) to the limits below\n");
    y.push_str("# if they are not there.\n#\n");
    y.push_str("# Then check the result with data \"hpc_nccl_check\" { nccl_tests_output = file(\"allreduce.log\") }:\n");
    let _ = writeln!(y, "#   kubectl logs -l job-name={name},batch.kubernetes.io/job-completion-index=0 --tail=-1 \\");
    y.push_str("#     > allreduce.log\n");
    y.push_str("apiVersion: batch/v1\nkind: Job\nmetadata:\n");
    let _ = writeln!(y, "  name: {}", yaml_str(name));
    y.push_str("spec:\n");
    let _ = writeln!(y, "  completions: {n}\n  parallelism: {n}\n  completionMode: Indexed\n  backoffLimit: 0");
    // Bounds the run: the other pods would wait for ever if pod 0 were killed before releasing them.
    y.push_str("  activeDeadlineSeconds: 7200\n");
    y.push_str("  template:\n    metadata:\n      labels:\n");
    let _ = writeln!(y, "        app.kubernetes.io/name: {}", yaml_str(name));
    y.push_str("    spec:\n");
    let _ = writeln!(y, "      subdomain: {}", yaml_str(name));
    y.push_str("      restartPolicy: Never\n");
    if !job.tolerate.is_empty() {
        y.push_str("      tolerations:\n");
        for t in job.tolerate {
            let _ = writeln!(y, "        - key: {}\n          operator: Exists\n          effect: {}", yaml_str(&t.key), t.effect.as_str());
        }
    }
    // Kubernetes names nodes its own way (on EKS, GKE and AKS not as the cluster does), so the pods are
    // pinned by a label the nodes are given, not by name.
    y.push_str("      nodeSelector:\n");
    let _ = writeln!(y, "        {NODE_LABEL}: {}", yaml_str(job.cluster));
    y.push_str("      affinity:\n        podAntiAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n");
    y.push_str("            - labelSelector:\n                matchLabels:\n");
    let _ = writeln!(y, "                  app.kubernetes.io/name: {}", yaml_str(name));
    y.push_str("              topologyKey: kubernetes.io/hostname\n");
    y.push_str("      containers:\n        - name: nccl-tests\n");
    let _ = writeln!(y, "          image: {}", yaml_str(image));
    y.push_str("          command:\n            - /bin/bash\n            - -c\n            - |\n");
    for line in launcher_script(job).lines() {
        if line.is_empty() {
            y.push('\n');
        } else {
            let _ = writeln!(y, "              {line}");
        }
    }
    if !job.env.is_empty() {
        y.push_str("          env:\n");
        for (k, v) in job.env {
            let _ = writeln!(y, "            - name: {}\n              value: {}", yaml_str(k), yaml_str(v));
        }
    }
    y.push_str("          resources:\n            limits:\n");
    let _ = writeln!(y, "              nvidia.com/gpu: {g}");
    for (resource, count) in device_resources.iter().filter(|(r, _)| r.as_str() != "nvidia.com/gpu") {
        let _ = writeln!(y, "              {}: {count}", yaml_str(resource));
    }
    y.push_str("          volumeMounts:\n            - name: dshm\n              mountPath: /dev/shm\n");
    y.push_str("      volumes:\n        - name: dshm\n          emptyDir:\n            medium: Memory\n");
    Ok(y)
}

/// The container's bash script. Kubernetes expands `$(NAME)` in a command, so the script never writes `$(`.
fn launcher_script(job: &NcclJob) -> String {
    let (name, n, g) = (job.name, job.nodes.len(), job.gpus_per_node);
    let ssh = "ssh -o StrictHostKeyChecking=no -o ConnectTimeout=5";
    let mut s = String::new();
    s.push_str("set -euo pipefail\n");
    let _ = writeln!(s, "NCCL_TESTS_DIR=\"${{NCCL_TESTS_DIR:-{DEFAULT_NCCL_TESTS_DIR}}}\"");
    s.push_str("mkdir -p /run/sshd\n/usr/sbin/sshd\n");
    s.push_str("if [ \"${JOB_COMPLETION_INDEX}\" != \"0\" ]; then\n");
    s.push_str("  # Serve SSH to the launcher (pod 0) until it is done.\n");
    s.push_str("  until [ -e /tmp/nccl-tests-done ]; do sleep 5; done\n  exit 0\nfi\n\n");
    s.push_str("# Pod 0: release the other pods however this ends.\nrelease() {\n");
    let _ = writeln!(s, "  for ((i = 1; i < {n}; i++)); do");
    let _ = writeln!(s, "    {ssh} \"{name}-${{i}}.{name}\" touch /tmp/nccl-tests-done || true");
    s.push_str("  done\n}\ntrap release EXIT\n\n");
    s.push_str("# Wait for every pod's SSH server, then launch one rank per GPU.\nhosts=\"\"\n");
    let _ = writeln!(s, "for ((i = 0; i < {n}; i++)); do");
    let _ = writeln!(s, "  host=\"{name}-${{i}}.{name}\"");
    let _ = writeln!(s, "  until {ssh} \"${{host}}\" true; do sleep 5; done");
    let _ = writeln!(s, "  hosts=\"${{hosts:+${{hosts}},}}${{host}}:{g}\"");
    s.push_str("done\n");
    let _ = writeln!(s, "mpirun --allow-run-as-root -np {} -H \"${{hosts}}\" --bind-to none \\", job.ranks());
    s.push_str("  -mca plm_rsh_args \"-o StrictHostKeyChecking=no\" \\\n  -x PATH -x LD_LIBRARY_PATH");
    for k in job.env.keys() {
        let _ = write!(s, " -x {k}");
    }
    let _ = writeln!(s, " \\\n  \"${{NCCL_TESTS_DIR}}/all_reduce_perf\" {PERF_ARGS}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEALTHY: &str = include_str!("../../tests/fixtures/nccl/healthy.txt");
    const THIRTY_UNDER: &str = include_str!("../../tests/fixtures/nccl/thirty_under.txt");
    const SIXTY_UNDER: &str = include_str!("../../tests/fixtures/nccl/sixty_under.txt");
    /// OCI BM.GPU.H100.8's multi-node figure in the catalog, which the samples are written against.
    const EXPECTED: f64 = 365.0;

    #[test]
    fn the_healthy_sample_parses_to_its_largest_size_and_footer() {
        let run = parse_nccl_tests(HEALTHY).unwrap();
        assert_eq!(run.rows.len(), 32);
        assert_eq!(run.rows[0].bytes, 8);
        assert_eq!(run.largest_bytes, 17_179_869_184);
        // The last row: out-of-place 359.19, in-place 363.14; the better one counts.
        assert_eq!(run.busbw_gbs, 363.14);
        assert_eq!(run.rows[31].out_of_place.busbw_gbs, 359.19);
        assert_eq!(run.avg_busbw_gbs, Some(128.76));
        assert_eq!(run.out_of_bounds, Some(0));
        assert_eq!((run.ranks, run.wrong), (128, 0));
        assert_eq!(run.gpu.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(run.test, None);
    }

    #[test]
    fn the_samples_classify_as_their_names_say() {
        let cases =
            [(HEALTHY, Verdict::Healthy, 0.995), (THIRTY_UNDER, Verdict::PlacementOrDriver, 0.709), (SIXTY_UNDER, Verdict::Fabric, 0.399)];
        for (text, verdict, ratio) in cases {
            let run = parse_nccl_tests(text).unwrap();
            let a = assess(run.busbw_gbs, EXPECTED, run.wrong_elements(), Some(Cloud::Oci));
            assert_eq!((a.verdict, a.ratio), (verdict, ratio), "{}", a.message);
            assert_eq!(a.healthy, verdict == Verdict::Healthy);
        }
    }

    /// Every row of every sample holds nccl-tests' arithmetic: algbw = size / time (GB/s, 10^9 bytes) and
    /// busbw = algbw * 2 (n - 1) / n for n ranks; the footer is the mean of every printed busbw.
    #[test]
    fn the_samples_are_consistent_nccl_tests_output() {
        for text in [HEALTHY, THIRTY_UNDER, SIXTY_UNDER] {
            let run = parse_nccl_tests(text).unwrap();
            let n = run.ranks as f64;
            let factor = 2.0 * (n - 1.0) / n;
            let mut sum = 0.0;
            for (i, row) in run.rows.iter().enumerate() {
                assert_eq!(row.bytes, 8 << i, "sizes double from 8 B");
                for t in [row.out_of_place, row.in_place.unwrap()] {
                    // Printed values are rounded: the time to 3-4 significant digits, bandwidths to 0.01.
                    let algbw = row.bytes as f64 / 1e3 / t.time_us;
                    assert!((t.algbw_gbs - algbw).abs() <= 0.005 + algbw * 1e-3, "row {i}: algbw {} vs {algbw}", t.algbw_gbs);
                    assert!((t.busbw_gbs - algbw * factor).abs() <= 0.01 + algbw * 2e-3, "row {i}: busbw {}", t.busbw_gbs);
                    assert_eq!(t.wrong, Some(0));
                    sum += t.busbw_gbs;
                }
            }
            let avg = sum / (2.0 * run.rows.len() as f64);
            assert!((run.avg_busbw_gbs.unwrap() - avg).abs() < 0.01, "{avg}");
            assert!(run.rows.len() >= 20);
        }
    }

    /// nccl-tests 2.14 and later: version and test lines, PCI addresses in the rank lines, `N/A` for
    /// in-place with `-c 0`, per-iteration columns and a timestamp, CRLF line ends, blank lines, NCCL logs.
    #[test]
    fn newer_layouts_crlf_and_noise_are_tolerated() {
        let text = "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703\r\n\
            # Collective test starting: all_reduce_perf\r\n\
            # nThread 1 nGpus 1 minBytes 1073741824 maxBytes 2147483648 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 0 graph: 0 unalign: 0\r\n\
            #\r\n\
            \r\n\
            # Using devices\r\n\
            #  Rank  0 Group  0 Pid   1234 on     node-a device  0 [0000:18:00] NVIDIA H200\r\n\
            #  Rank  1 Group  0 Pid   1235 on     node-b device  0 [0000:18:00] NVIDIA H200\r\n\
            node-a:1234:1234 [0] NCCL INFO Using network IB\r\n\
            #\r\n\
            #                                                              out-of-place (+ per-iteration)              in-place (+ per-iteration)\r\n\
            #       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%           timestamp\r\n\
            #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)   %Y-%m-%d %H:%M:%S\r\n\
              1073741824     268435456     float     sum      -1   4400.1  244.03  244.03       0   4390.0   4410.2   4410.0     0.12   4398.7  244.10  244.10     N/A   4390.0   4410.2   4410.0     0.12 2025-06-01 10:00:00\r\n\
              2147483648     536870912     float     sum      -1   8745.0  245.57  245.57       0   8740.0   8750.1   8750.0     0.05   8741.2  245.67  245.67     N/A   8740.0   8750.1   8750.0     0.05 2025-06-01 10:00:01\r\n\
            # Out of bounds values : 0 OK\r\n\
            # Avg bus bandwidth    : 244.843 \r\n\
            #\r\n\
            # Collective test concluded: all_reduce_perf\r\n";
        let run = parse_nccl_tests(text).unwrap();
        assert_eq!(run.rows.len(), 2);
        assert_eq!(run.busbw_gbs, 245.67);
        assert_eq!(run.rows[1].in_place.unwrap().wrong, None);
        assert_eq!(run.rows[1].out_of_place.wrong, Some(0));
        assert_eq!((run.ranks, run.gpu.as_deref(), run.test.as_deref()), (2, Some("NVIDIA H200"), Some("all_reduce_perf")));
        assert_eq!(run.avg_busbw_gbs, Some(244.843));
        // `srun --label` and `mpirun --tag-output` put a label before every line.
        for label in ["0: ", "[1,0]<stdout>:"] {
            let labelled: String = HEALTHY.lines().map(|l| format!("{label}{l}\n")).collect();
            let run = parse_nccl_tests(&labelled).unwrap();
            assert_eq!((run.rows.len(), run.ranks, run.busbw_gbs), (32, 128, 363.14), "{label}");
        }
    }

    #[test]
    fn wrong_elements_are_summed_and_make_the_run_unhealthy() {
        let text = HEALTHY.replacen("359.19      0", "359.19      3", 1).replacen("363.14      0", "363.14      2", 1);
        let run = parse_nccl_tests(&text).unwrap();
        assert_eq!(run.wrong, 5);
        let a = assess(run.busbw_gbs, EXPECTED, run.wrong_elements(), None);
        assert_eq!(a.verdict, Verdict::Healthy, "the bandwidth is fine");
        assert!(!a.healthy);
        assert!(a.message.starts_with("Data corruption: nccl-tests found 5 wrong elements."), "{}", a.message);
        // The footer counts too, when the rows said N/A.
        let footer = HEALTHY.replace("Out of bounds values : 0 OK", "Out of bounds values : 7 FAILED");
        assert_eq!(parse_nccl_tests(&footer).unwrap().wrong_elements(), 7);
    }

    #[test]
    fn text_that_is_not_nccl_tests_output_is_refused_with_what_was_expected() {
        let e = parse_nccl_tests("").unwrap_err();
        assert!(e.starts_with("the text is empty; expected the output of an nccl-tests binary"), "{e}");
        let e = parse_nccl_tests("Hello, world\nnot a benchmark\n").unwrap_err();
        assert!(
            e.contains("no nccl-tests result rows found") && e.contains("#  size  count  type") && e.contains("\"Hello, world\""),
            "{e}"
        );
        // A header and then a failure: nothing measured.
        let failed = "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20\n\
                      node-3:77:77 [0] NCCL WARN NET/IB : Got completion with error 12\n\
                      node-3: Test NCCL failure common.cu:1005 'unhandled system error'\n";
        let e = parse_nccl_tests(failed).unwrap_err();
        assert!(e.contains("printed no result rows") && e.contains("NCCL WARN NET/IB"), "{e}");
        // A broken row names its line.
        let cut: String = HEALTHY
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("17179869184 ") {
                    " 17179869184    4294967296     float\n".to_owned()
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let e = parse_nccl_tests(&cut).unwrap_err();
        assert!(e.starts_with("line 167: a result row has 13 columns"), "{e}");
        assert!(e.ends_with("this one has 3: \"17179869184    4294967296     float\""), "{e}");
        let nan = HEALTHY.replace("363.14", "inf");
        assert!(parse_nccl_tests(&nan).unwrap_err().contains("busbw \"inf\" is not a non-negative number"));
    }

    #[test]
    fn classification_thresholds() {
        assert_eq!(Verdict::classify(1.2), Verdict::Healthy);
        assert_eq!(Verdict::classify(0.8), Verdict::Healthy);
        assert_eq!(Verdict::classify(0.799), Verdict::PlacementOrDriver);
        assert_eq!(Verdict::classify(0.5), Verdict::PlacementOrDriver);
        assert_eq!(Verdict::classify(0.499), Verdict::Fabric);
        assert_eq!(Verdict::classify(0.0), Verdict::Fabric);
        // 292 of 365 is exactly 80%: healthy, 20.0% short.
        let a = assess(292.0, 365.0, 0, None);
        assert_eq!((a.verdict, a.ratio, a.shortfall_percent), (Verdict::Healthy, 0.8, 20.0));
        let a = assess(291.0, 365.0, 0, None);
        assert_eq!((a.verdict, a.shortfall_percent), (Verdict::PlacementOrDriver, 20.3));
        // Above the expected figure: no shortfall.
        let a = assess(400.0, 365.0, 0, None);
        assert_eq!((a.ratio, a.shortfall_percent, a.healthy), (1.096, 0.0, true));
        assert_eq!(a.message, "Bandwidth healthy: the all-reduce bus bandwidth, 400 GB/s, is 109.6% of the 365 GB/s expected.");
        // Nonsense never panics and never yields a non-finite number.
        for (m, e) in [(f64::NAN, 365.0), (1e308, 1e-308), (10.0, 0.0), (-5.0, 365.0)] {
            let a = assess(m, e, 0, None);
            assert!(a.ratio.is_finite() && a.shortfall_percent.is_finite());
        }
    }

    #[test]
    fn messages_name_the_shortfall_the_cause_and_what_to_check_per_cloud() {
        let a = assess(258.75, 365.0, 0, Some(Cloud::Aws));
        assert!(a.message.starts_with("Placement or driver problem: the all-reduce bus bandwidth, 258.75 GB/s, is 29.1% short of the 365 GB/s expected (70.9% of it)."), "{}", a.message);
        for words in ["cluster placement group", "FI_PROVIDER=efa", "EFA interface"] {
            assert!(a.message.contains(words), "{words}: {}", a.message);
        }
        let a = assess(145.71, 365.0, 0, Some(Cloud::Gcp));
        assert!(a.message.starts_with("Fabric problem: the all-reduce bus bandwidth, 145.71 GB/s, is 60.1% short"), "{}", a.message);
        assert!(a.message.contains("Using network Socket") && a.message.contains("GPUDirect") && a.message.contains("compact placement"));
        let azure = assess(300.0, 460.0, 0, Some(Cloud::Azure)).message;
        assert!(azure.contains("single placement group") && azure.contains("NCCL_IB_PCI_RELAXED_ORDERING=1"), "{azure}");
        let oci = assess(100.0, 365.0, 0, Some(Cloud::Oci)).message;
        assert!(oci.contains("cluster network") && oci.contains("RDMA plugins"), "{oci}");
        assert!(assess(100.0, 365.0, 0, None).message.contains("Set `cloud`"));
    }

    fn job<'a>(nodes: &'a [String], env: &'a BTreeMap<String, String>) -> NcclJob<'a> {
        NcclJob {
            name: "nccl-allreduce",
            nodes,
            cluster: "train",
            gpus_per_node: 8,
            env,
            expected_busbw_gbs: Some(365.0),
            segment: None,
            partition: None,
            tolerate: &[],
        }
    }

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("train-{i}")).collect()
    }

    fn efa_env() -> BTreeMap<String, String> {
        [("FI_PROVIDER", "efa"), ("FI_EFA_USE_DEVICE_RDMA", "1"), ("NCCL_SOCKET_IFNAME", "^lo,docker"), ("QUOTED", "it's")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn the_slurm_script_runs_one_task_per_gpu_on_the_named_nodes() {
        let (nodes, env) = (nodes(16), efa_env());
        let s = slurm_script(&job(&nodes, &env)).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "#!/bin/bash");
        // Every #SBATCH line comes before the first command, or sbatch ignores it.
        let first_command = lines.iter().position(|l| !l.is_empty() && !l.starts_with('#')).unwrap();
        let sbatch: Vec<&str> = lines.iter().filter(|l| l.starts_with("#SBATCH")).copied().collect();
        assert!(lines[..first_command].iter().filter(|l| l.starts_with("#SBATCH")).count() == sbatch.len());
        assert_eq!(
            sbatch,
            [
                "#SBATCH --job-name=nccl-allreduce",
                "#SBATCH --nodes=16",
                "#SBATCH --ntasks-per-node=8",
                "#SBATCH --gpus-per-node=8",
                "#SBATCH --exclusive",
                "#SBATCH --nodelist=train-0,train-1,train-2,train-3,train-4,train-5,train-6,train-7,train-8,train-9,train-10,train-11,train-12,train-13,train-14,train-15",
                "#SBATCH --output=/var/tmp/nccl-allreduce-%j.log",
            ]
        );
        assert!(s.contains("# Expected bus bandwidth: 365 GB/s at the largest message size"));
        // The log is on the job's first node, and the script says so.
        assert!(
            s.contains("# The log is written on the job's first node") && s.contains("# /var/tmp/nccl-allreduce-<job id>.log there"),
            "{s}"
        );
        assert!(s.contains("NCCL_TESTS_DIR=\"${NCCL_TESTS_DIR:-/opt/nccl-tests/build}\"\n"));
        assert!(s.contains("export FI_PROVIDER='efa'\n") && s.contains("export NCCL_SOCKET_IFNAME='^lo,docker'\n"));
        assert!(s.contains(r"export QUOTED='it'\''s'"), "single quotes are escaped for bash");
        assert!(s.ends_with("srun --mpi=pmix \"${NCCL_TESTS_DIR}/all_reduce_perf\" -b 8 -e 16G -f 2 -g 1\n"));
        let none = NcclJob { expected_busbw_gbs: None, ..job(&nodes, &env) };
        assert!(slurm_script(&none).unwrap().contains("none published for this node type"));
    }

    /// From 24.05 Slurm refuses a `--segment` job whose node list spans segments ("Requested node configuration is
    /// not available"): a segmented job names its partition and no nodes.
    #[test]
    fn a_segmented_slurm_job_names_its_partition_and_no_nodes() {
        let (nodes, env) = (nodes(36), BTreeMap::new());
        let segmented = NcclJob { segment: Some(18), partition: Some("gb200"), gpus_per_node: 4, ..job(&nodes, &env) };
        let s = slurm_script(&segmented).unwrap();
        assert!(s.contains("#SBATCH --segment=18\n") && s.contains("#SBATCH --partition=gb200\n"), "{s}");
        assert!(!s.contains("--nodelist"), "{s}");
        // No partition to take the nodes from, or a node count the segment does not divide: the nodes by name.
        for job in [NcclJob { partition: None, ..segmented.clone() }, NcclJob { segment: Some(20), ..segmented.clone() }] {
            let s = slurm_script(&job).unwrap();
            assert!(s.contains("#SBATCH --nodelist=train-0,") && !s.contains("--segment"), "{s}");
        }
    }

    #[test]
    fn the_kubernetes_job_is_an_indexed_job_with_one_pod_per_node() {
        let (nodes, env) = (nodes(4), efa_env());
        let efa: BTreeMap<String, u32> = [("vpc.amazonaws.com/efa".to_owned(), 32)].into();
        let y = kubernetes_job(&job(&nodes, &env), None, &efa).unwrap();
        for line in [
            "apiVersion: batch/v1",
            "kind: Job",
            "  name: \"nccl-allreduce\"",
            "  completions: 4",
            "  parallelism: 4",
            "  completionMode: Indexed",
            "      subdomain: \"nccl-allreduce\"",
            "      restartPolicy: Never",
            "        hpc-platform/cluster: \"train\"",
            "          image: \"nccl-tests:latest\"",
            "            - name: \"FI_PROVIDER\"",
            "              value: \"efa\"",
            "              value: \"it's\"",
            "              nvidia.com/gpu: 8",
            "              \"vpc.amazonaws.com/efa\": 32",
            "            - |",
            "              mpirun --allow-run-as-root -np 32 -H \"${hosts}\" --bind-to none \\",
            "                \"${NCCL_TESTS_DIR}/all_reduce_perf\" -b 8 -e 16G -f 2 -g 1",
            "              trap release EXIT",
            "  activeDeadlineSeconds: 7200",
            "                host=\"nccl-allreduce-${i}.nccl-allreduce\"",
            "                hosts=\"${hosts:+${hosts},}${host}:8\"",
        ] {
            assert!(y.lines().any(|l| l == line), "{line:?} missing:\n{y}");
        }
        assert!(y.contains("-x FI_EFA_USE_DEVICE_RDMA -x FI_PROVIDER -x NCCL_SOCKET_IFNAME -x QUOTED"));
        assert!(y.contains("placeholder, not a published image") && y.contains("#   kind: Service") && y.contains("#     clusterIP: None"));
        // Kubernetes would expand `$(...)` in a command itself.
        assert!(!y.contains("$("), "{y}");
        // Structure: no tabs; every non-comment line of the document is indented by an even number of spaces,
        // and every line of the script sits inside its block scalar.
        assert!(!y.contains('\t'));
        let body: Vec<&str> = y.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(body[0], "apiVersion: batch/v1");
        for l in &body {
            let indent = l.len() - l.trim_start().len();
            assert!(l.is_empty() || indent % 2 == 0, "odd indent: {l:?}");
        }
        let script = &y[y.find("            - |\n").unwrap()..y.find("          env:\n").unwrap()];
        assert!(script.contains("trap release EXIT") && script.contains("touch /tmp/nccl-tests-done"), "{script}");
        assert!(script.lines().skip(1).all(|l| l.is_empty() || l.starts_with("              ")), "{script}");
        // Single quotes in values stay literal inside the YAML double-quoted scalar.
        let custom = kubernetes_job(&job(&nodes, &env), Some("registry.example.com/nccl-tests:2.17"), &BTreeMap::new()).unwrap();
        assert!(custom.contains("image: \"registry.example.com/nccl-tests:2.17\"") && !custom.contains("vpc.amazonaws.com/efa\":"));
    }

    #[test]
    fn jobs_refuse_what_would_not_run() {
        let env = BTreeMap::new();
        let empty: Vec<String> = Vec::new();
        assert_eq!(slurm_script(&job(&empty, &env)).unwrap_err(), "no nodes to run on");
        let twice = vec!["a".to_owned(), "a".to_owned()];
        assert!(slurm_script(&job(&twice, &env)).unwrap_err().contains("listed twice"));
        let spaced = vec!["a b".to_owned()];
        assert!(kubernetes_job(&job(&spaced, &env), None, &BTreeMap::new()).unwrap_err().contains("node name"));
        let bad_env: BTreeMap<String, String> = [("1X".to_owned(), "v".to_owned())].into();
        assert!(slurm_script(&job(&nodes(1), &bad_env)).unwrap_err().contains("not a shell identifier"));
        let upper = NcclJob { name: "NCCL", ..job(&empty, &env) };
        assert!(kubernetes_job(&NcclJob { nodes: &nodes(1), ..upper }, None, &BTreeMap::new()).unwrap_err().contains("DNS label"));
        let zero = NcclJob { gpus_per_node: 0, ..job(&empty, &env) };
        assert!(slurm_script(&NcclJob { nodes: &nodes(1), ..zero }).unwrap_err().contains("gpus_per_node"));
    }
}
