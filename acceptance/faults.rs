//! The fault suite: on every cloud, the real CLI applies a fabric, a 4-node cluster and a Lustre filesystem
//! while the emulator injects faults (30% of calls throttled; no capacity for the nodes; bursts of 5xx;
//! slow answers), and each scenario must converge: the apply succeeds (or, without capacity, fails with a
//! diagnostic naming the node type and zone, keeps everything that exists in state, and the next apply
//! finishes), the re-plan is empty, and destroy leaves the emulator empty (no orphans). Interruptions: the
//! provider killed (SIGKILL) while it waits for nodes, and Ctrl-C during a long wait, each with a foreign
//! cluster of the same names made beside it meanwhile (another owner's marker); afterwards a re-apply
//! finishes with exactly the planned nodes of its own (nothing duplicated), the foreign cluster is never
//! touched, and destroy leaves nothing of ours. Prints a table per cloud.

use std::time::{Duration, Instant};

use hpc_emulators::harness::{AwsEmulator, OciKey, admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use serde_json::{Value, json};

use crate::cli::{Cli, Run, Workdir};

/// An emulator's admin API: method, route, body -> answer.
type AdminFn = Box<dyn Fn(&str, &str, Option<Value>) -> Value>;

/// One cloud's emulator and how to reach it.
pub struct Target {
    pub cloud: &'static str,
    case: &'static str,
    env: Vec<(String, String)>,
    admin: AdminFn,
    /// The fault rule that takes node capacity away.
    no_capacity: Value,
    /// The node type and location the capacity diagnostic must name.
    sku: &'static str,
    place: &'static str,
    /// The list call a cluster's wait polls (slowed down for the interruption tests).
    pub wait_call: (&'static str, &'static str),
    _aws: Option<AwsEmulator>,
    _oci: Option<OciKey>,
}

/// The emulator of `cloud` with its case (`<cloud>_cluster`: a fabric, 4 nodes and Lustre).
pub fn target(cloud: &str) -> Target {
    match cloud {
        "aws" => aws(),
        "gcp" => gcp(),
        "azure" => azure(),
        _ => oci(),
    }
}

/// The ids of the nodes the emulator holds.
pub fn node_ids(t: &Target) -> Vec<String> {
    t.leftovers().into_iter().filter(|id| is_node(t.cloud, id)).collect()
}

impl Target {
    pub fn workdir(&self, cli: &Cli) -> Workdir {
        self.env.iter().fold(Workdir::new(cli, self.case), |w, (k, v)| w.env(k, v))
    }

    pub fn admin(&self, method: &str, route: &str, body: Option<Value>) -> Value {
        (self.admin)(method, route, body)
    }

    /// The value of an environment variable this target sets for its workdirs (`TF_VAR_key_path`).
    pub fn env_value(&self, key: &str) -> Option<String> {
        self.env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Everything the emulator holds, as one flat list of ids.
    pub fn leftovers(&self) -> Vec<String> {
        let inv = self.admin("GET", "inventory", None);
        let mut out = Vec::new();
        for kinds in inv["resources"].as_object().into_iter().flat_map(|s| s.values()) {
            for ids in kinds.as_object().into_iter().flat_map(|k| k.values()) {
                // Ids, or objects with an id (moto lists instances with their type and state).
                out.extend(
                    ids.as_array()
                        .into_iter()
                        .flatten()
                        .map(|v| v.as_str().or(v["id"].as_str()).map_or_else(|| v.to_string(), str::to_owned)),
                );
            }
        }
        out
    }

    /// Every resource with the body a client reads (tags included), by id.
    pub fn snapshot(&self) -> Value {
        self.admin("GET", "snapshot", None)
    }

    fn fired(&self) -> u64 {
        self.admin("GET", "faults", None)["faults"].as_array().into_iter().flatten().map(|f| f["fired"].as_u64().unwrap_or(0)).sum()
    }
}

fn aws() -> Target {
    let emulator = start_aws();
    let ep = emulator.endpoint.clone();
    Target {
        cloud: "aws",
        case: "aws_cluster",
        env: vec![("TF_VAR_endpoint".into(), ep.clone())],
        admin: Box::new(move |m, r, b| admin(&ep, m, r, b)),
        // Every launch refused (the SDK retries a 500 itself) until the fault is lifted.
        no_capacity: json!({"service": "ec2", "operation": "RunInstances", "kind": "capacity"}),
        sku: "p5.48xlarge",
        place: "us-east-1a",
        wait_call: ("ec2", "DescribeInstances"),
        _aws: Some(emulator),
        _oci: None,
    }
}

fn gcp() -> Target {
    let ep = start_gcp();
    Target {
        cloud: "gcp",
        case: "gcp_cluster",
        env: vec![("TF_VAR_endpoint".into(), ep.clone())],
        admin: Box::new(move |m, r, b| admin(&ep, m, r, b)),
        no_capacity: json!({"service": "compute", "operation": "instances.bulkInsert", "kind": "capacity", "times": 1}),
        sku: "a3-megagpu-8g",
        place: "us-central1-a",
        wait_call: ("compute", "instances.list"),
        _aws: None,
        _oci: None,
    }
}

fn azure() -> Target {
    let (ep, pem) = start_azure();
    Target {
        cloud: "azure",
        case: "azure_cluster",
        env: vec![("TF_VAR_endpoint".into(), ep.clone()), ("HPC_AZURE_CA_FILE".into(), pem.display().to_string())],
        admin: Box::new(move |m, r, b| azure_admin(&ep, &pem, m, r, b)),
        no_capacity: json!({"service": "arm", "operation": "virtualMachineScaleSets.put", "kind": "capacity", "times": 1}),
        sku: "Standard_ND96isr_H100_v5",
        place: "eastus",
        wait_call: ("arm", "operations.get"),
        _aws: None,
        _oci: None,
    }
}

fn oci() -> Target {
    let (ep, key) = start_oci();
    let admin_ep = ep.clone();
    Target {
        cloud: "oci",
        case: "oci_cluster",
        env: vec![
            ("TF_VAR_endpoint".into(), ep),
            ("TF_VAR_key_path".into(), key.private_key_path.display().to_string()),
            ("TF_VAR_fingerprint".into(), key.fingerprint.clone()),
        ],
        admin: Box::new(move |m, r, b| admin(&admin_ep, m, r, b)),
        no_capacity: json!({"service": "core", "operation": "LaunchInstance", "kind": "capacity", "nth": 3, "times": 1}),
        sku: "BM.GPU.H100.8",
        place: "Uocm:US-ASHBURN-AD-1",
        wait_call: ("core", "ListInstances"),
        _aws: None,
        _oci: Some(key),
    }
}

fn apply(w: &Workdir) -> Run {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"])
}

fn destroy(w: &Workdir) -> Run {
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"])
}

fn plan_code(w: &Workdir) -> Option<i32> {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).code
}

/// What one scenario came to.
struct Outcome {
    scenario: &'static str,
    fired: u64,
    converged: bool,
    orphans: usize,
    panics: usize,
    seconds: f64,
    note: String,
}

fn panics_in(text: &str) -> usize {
    ["panicked", "Provider bug", "plugin exited", "rpc error"].iter().map(|p| text.matches(p).count()).sum()
}

/// Applies under `fault`, then checks the re-plan is empty and destroy leaves nothing.
fn under_fault(t: &Target, cli: &Cli, scenario: &'static str, fault: Value) -> Outcome {
    let started = Instant::now();
    t.admin("POST", "reset", None);
    let w = t.workdir(cli);
    t.admin("POST", "faults", Some(fault));
    let first = apply(&w);
    let fired = t.fired();
    t.admin("DELETE", "faults", None);
    let mut all = first.output();
    let replan = plan_code(&w);
    let converged = first.code == Some(0) && replan == Some(0);
    let gone = destroy(&w);
    all.push_str(&gone.output());
    Outcome {
        scenario,
        fired,
        converged,
        orphans: t.leftovers().len(),
        panics: panics_in(&all),
        seconds: started.elapsed().as_secs_f64(),
        note: if converged { String::new() } else { format!("apply {:?}, re-plan {replan:?}: {}", first.code, first.output()) },
    }
}

/// Whether a call (`service:operation`, as the emulators count them) makes or changes something: a create or
/// an action, whose answer, lost, a retry must not turn into a second one.
fn is_write(cloud: &str, key: &str) -> bool {
    let (service, op) = key.split_once(':').unwrap_or(("", key));
    let verb = op.rsplit('.').next().unwrap_or(op);
    match cloud {
        "gcp" if service == "servicenetworking" => !matches!(verb, "get" | "list"),
        "gcp" => matches!(verb, "insert" | "bulkInsert" | "create" | "patch" | "setLabels" | "setMetadata" | "start" | "reset" | "resume"),
        "azure" => matches!(verb, "put" | "post" | "patch"),
        _ => ["Create", "Run", "Launch", "Authorize", "Modify", "Attach", "Associate", "Update", "Change", "Add"]
            .iter()
            .any(|p| op.starts_with(p)),
    }
}

/// The answer of every create and action of the case lost once (the call carried out, the caller told 503 or
/// 500): the calls are those a plain apply makes (read from the emulator's counters), one `answer_lost` rule
/// each. The apply must converge with exactly what the plain apply made (nothing made twice), every rule
/// must have fired, the re-plan is empty and destroy leaves nothing.
fn answers_lost(t: &Target, cli: &Cli) -> Outcome {
    let started = Instant::now();
    t.admin("POST", "reset", None);
    let plain = t.workdir(cli);
    let baseline = apply(&plain);
    let made = t.leftovers().len();
    let counters = t.admin("GET", "counters", None);
    let writes: Vec<String> =
        counters["counters"].as_object().into_iter().flat_map(|m| m.keys()).filter(|k| is_write(t.cloud, k)).cloned().collect();
    destroy(&plain);
    t.admin("POST", "reset", None);
    for key in &writes {
        let (service, operation) = key.split_once(':').unwrap_or(("*", key));
        t.admin("POST", "faults", Some(json!({"service": service, "operation": operation, "kind": "answer_lost", "times": 1})));
    }
    let w = t.workdir(cli);
    let first = apply(&w);
    let rules = t.admin("GET", "faults", None);
    let unfired: Vec<String> = rules["faults"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["fired"].as_u64() == Some(0))
        .map(|r| format!("{}:{}", r["service"].as_str().unwrap_or_default(), r["operation"].as_str().unwrap_or_default()))
        .collect();
    let fired = rules["faults"].as_array().into_iter().flatten().map(|f| f["fired"].as_u64().unwrap_or(0)).sum();
    t.admin("DELETE", "faults", None);
    let after = t.leftovers();
    let replan = plan_code(&w);
    let mut problems = Vec::new();
    if baseline.code != Some(0) {
        problems.push(format!("the plain apply failed: {}", baseline.output()));
    }
    if first.code != Some(0) || replan != Some(0) {
        problems.push(format!("apply {:?}, re-plan {replan:?}: {}", first.code, first.output()));
    }
    if after.len() != made {
        problems.push(format!("{} resources after the apply, where the plain apply made {made}: {after:?}", after.len()));
    }
    if !unfired.is_empty() {
        problems.push(format!("calls the apply never made (their rule did not fire): {unfired:?}"));
    }
    let gone = destroy(&w);
    Outcome {
        scenario: "every create's answer lost once",
        fired,
        converged: problems.is_empty(),
        orphans: t.leftovers().len(),
        panics: panics_in(&format!("{}{}", first.output(), gone.output())),
        seconds: started.elapsed().as_secs_f64(),
        note: if problems.is_empty() { format!("{} calls: {}", writes.len(), writes.join(" ")) } else { problems.join("; ") },
    }
}

/// No capacity for the nodes: the diagnostic names node type and zone, state keeps what exists, and the
/// next apply (capacity back) finishes.
fn without_capacity(t: &Target, cli: &Cli) -> Outcome {
    let started = Instant::now();
    t.admin("POST", "reset", None);
    let w = t.workdir(cli);
    t.admin("POST", "faults", Some(t.no_capacity.clone()));
    let failed = apply(&w);
    let fired = t.fired();
    t.admin("DELETE", "faults", None);
    let text = failed.output().split_whitespace().collect::<Vec<_>>().join(" ");
    let mut problems = Vec::new();
    if failed.code != Some(1) {
        problems.push(format!("the apply without capacity exited {:?}", failed.code));
    }
    if !(text.contains(t.sku) && text.contains(t.place)) {
        problems.push(format!("the diagnostic does not name {} and {}: {text}", t.sku, t.place));
    }
    let listed = w.run(&["state", "list"]).stdout;
    if !(listed.contains("hpc_gpu_fabric.f") && listed.contains("hpc_gpu_cluster.c")) {
        problems.push(format!("state lost a piece that exists: {listed}"));
    }
    let again = apply(&w);
    let replan = plan_code(&w);
    if again.code != Some(0) || replan != Some(0) {
        problems.push(format!("after capacity returned: apply {:?}, re-plan {replan:?}: {}", again.code, again.output()));
    }
    let gone = destroy(&w);
    Outcome {
        scenario: "no capacity, then capacity",
        fired,
        converged: problems.is_empty(),
        orphans: t.leftovers().len(),
        panics: panics_in(&format!("{}{}{}", failed.output(), again.output(), gone.output())),
        seconds: started.elapsed().as_secs_f64(),
        note: problems.join("; "),
    }
}

/// The provider process serving `workdir`'s CLI: the child of `cli_pid` running our binary.
fn provider_pid(cli_pid: u32) -> Option<u32> {
    let out = std::process::Command::new("pgrep").args(["-P", &cli_pid.to_string(), "-f", "terraform-provider-hpc"]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).split_whitespace().next()?.parse().ok()
}

/// Interrupts an apply while the cluster waits for its nodes (the wait's list call slowed to 1.5 s): either
/// the provider is killed outright, or the CLI gets Ctrl-C and asks the provider to stop. Then a re-apply
/// must adopt what exists (no second copy of anything) and destroy must leave nothing.
fn interrupted(t: &Target, cli: &Cli, kill: bool) -> Outcome {
    let started = Instant::now();
    t.admin("POST", "reset", None);
    let w = t.workdir(cli);
    let (service, operation) = t.wait_call;
    t.admin("POST", "faults", Some(json!({"service": service, "operation": operation, "kind": "latency", "latency_ms": 1500})));
    let mut child = w
        .command(&["apply", "-no-color", "-input=false", "-auto-approve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until nodes exist in the emulator (the apply is then inside the cluster's wait).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut problems = Vec::new();
    while t.leftovers().iter().filter(|id| is_node(t.cloud, id)).count() == 0 {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            problems.push("the apply never reached its nodes".to_owned());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    // Another owner's cluster with our names appears beside the one being built.
    let foreign = make_foreign(t);
    if foreign.is_empty() {
        problems.push("no foreign cluster could be made".to_owned());
    }
    let foreign_before = foreign_view(t, &foreign);
    let signalled = Instant::now();
    if kill {
        match provider_pid(child.id()) {
            Some(pid) => {
                let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            None => problems.push("no provider process found to kill".into()),
        }
    } else {
        let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    }
    let out = child.wait_with_output().unwrap();
    let stopped_after = signalled.elapsed();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        problems.push("the interrupted apply reported success".into());
    }
    // StopProvider cancels the provider's waits at once; on AWS the apply then reads back what exists (one
    // Describe call, slowed here to 1.5 s by the fault) so the state it returns is exact; the CLI then exits.
    if !kill && stopped_after > Duration::from_secs(3) {
        problems.push(format!("Ctrl-C took {stopped_after:?} to stop the apply"));
    }
    let fired = t.fired();
    t.admin("DELETE", "faults", None);
    // Our nodes: the foreign ones (and a foreign scale set's VMs) do not count.
    let ours =
        |t: &Target| t.leftovers().iter().filter(|id| is_node(t.cloud, id) && !foreign.iter().any(|f| id.starts_with(f.as_str()))).count();
    let before = ours(t);
    let again = apply(&w);
    let replan = plan_code(&w);
    let nodes = ours(t);
    if again.code != Some(0) || replan != Some(0) {
        problems.push(format!("the re-apply: apply {:?}, re-plan {replan:?}: {}", again.code, again.output()));
    }
    if nodes != 4 {
        problems.push(format!("{nodes} nodes of ours after the re-apply ({before} existed after the interruption); want exactly 4"));
    }
    if let Some(d) = foreign_change(t, &foreign, &foreign_before) {
        problems.push(format!("the re-apply changed the foreign cluster: {d}"));
    }
    // The cluster (and a filesystem, if it came) destroyed beside the foreign cluster: only ours go.
    let targeted = w.run(&[
        "destroy",
        "-no-color",
        "-input=false",
        "-auto-approve",
        "-target=hpc_parallel_filesystem.fs",
        "-target=hpc_gpu_cluster.c",
    ]);
    if targeted.code != Some(0) {
        problems.push(format!("destroying the cluster: {}", targeted.output()));
    }
    // Azure's foreign scale set is the cluster's next one (`acc-1`), which a one-set cluster never looks at.
    if t.cloud != "azure" && !targeted.output().contains("Pieces of another owner left alone") {
        problems.push(format!("destroy did not say it left the foreign cluster alone: {}", targeted.output()));
    }
    if let Some(d) = foreign_change(t, &foreign, &foreign_before) {
        problems.push(format!("destroy changed the foreign cluster: {d}"));
    }
    // Its owner removes the foreign cluster (its nodes sit in our fabric's network, which cannot go while
    // they are there); then destroy finishes with the fabric.
    remove_foreign(t, &foreign);
    let gone = destroy(&w);
    if gone.code != Some(0) {
        problems.push(format!("destroy: {}", gone.output()));
    }
    let panics =
        if kill { 0 } else { panics_in(&text) } + panics_in(&again.output()) + panics_in(&targeted.output()) + panics_in(&gone.output());
    Outcome {
        scenario: if kill { "provider killed mid-apply" } else { "Ctrl-C mid-apply" },
        fired,
        converged: problems.is_empty(),
        orphans: t.leftovers().len(),
        panics,
        seconds: started.elapsed().as_secs_f64(),
        note: if problems.is_empty() {
            format!(
                "stopped {:.1}s after the signal; {before} nodes of ours then; {} foreign pieces untouched",
                stopped_after.as_secs_f64(),
                foreign.len()
            )
        } else {
            problems.join("; ")
        },
    }
}

/// The marker of the foreign cluster the interruption scenarios make beside ours.
pub const FOREIGN: &str = "20250101t000000z-f0f0f0f0f0f0f0f0";

/// Makes, out of band, another owner's cluster with our cluster's names in the same place: copies of our
/// first node (AWS and OCI: the same node names and cluster tags, which the clouds allow twice; Google
/// Cloud: the cluster's label under a higher index, as names are unique per zone; Azure: the next scale
/// set of the cluster) carrying the foreign marker. Returns their ids.
fn make_foreign(t: &Target) -> Vec<String> {
    let ours: Vec<String> = t.leftovers().into_iter().filter(|id| is_node(t.cloud, id)).collect();
    let mut made = Vec::new();
    let copy = |change: Value| t.admin("POST", "out-of-band", Some(change))["id"].as_str().map(str::to_owned);
    match t.cloud {
        "aws" => {
            for id in ours.iter().take(2) {
                made.extend(copy(json!({"action": "copy_instance", "id": id, "tags": {"hpc:owner": FOREIGN}})));
            }
        }
        "gcp" => {
            if let Some(first) = ours.iter().find(|id| id.ends_with("/acc-0")).or(ours.first()) {
                for n in [7, 8] {
                    made.extend(copy(json!({"action": "copy", "id": first, "name": format!("acc-{n}"), "labels": {"hpc_owner": FOREIGN}})));
                }
            }
        }
        "azure" => {
            if let Some(vm) = ours.first() {
                let set = vm.split("/virtualMachines/").next().unwrap_or_default().to_owned();
                let to = format!("{}-1", set.trim_end_matches("-0"));
                made.extend(copy(json!({"action": "copy", "id": set, "to": to, "tags": {"hpc:owner": FOREIGN}})));
            }
        }
        _ => {
            for id in ours.iter().take(2) {
                made.extend(copy(json!({"action": "copy", "id": id, "freeform_tags": {"hpc:owner": FOREIGN}})));
            }
        }
    }
    made
}

/// The foreign pieces as a client reads them: what must come out of every step unchanged.
fn foreign_view(t: &Target, ids: &[String]) -> Vec<String> {
    let snapshot = t.snapshot();
    let mut out = Vec::new();
    fn walk(v: &Value, ids: &[String], out: &mut Vec<String>) {
        if let Some(map) = v.as_object() {
            for (k, v) in map {
                if ids.iter().any(|id| id.eq_ignore_ascii_case(k) || k.to_lowercase().starts_with(&format!("{}/", id.to_lowercase()))) {
                    out.push(format!("{k} {v}"));
                } else {
                    walk(v, ids, out);
                }
            }
        }
    }
    walk(&snapshot, ids, &mut out);
    out.sort();
    out
}

/// The first foreign piece that is not as it was, if any.
fn foreign_change(t: &Target, ids: &[String], before: &[String]) -> Option<String> {
    let now = foreign_view(t, ids);
    if now == before {
        return None;
    }
    let changed = before.iter().find(|b| !now.contains(b)).or(now.iter().find(|n| !before.contains(n)));
    Some(changed.map_or_else(|| format!("{} pieces now, {} before", now.len(), before.len()), |c| c.chars().take(400).collect()))
}

/// Removes the foreign pieces (their owner tidying up), so that the emulator's leftovers are ours alone.
fn remove_foreign(t: &Target, ids: &[String]) {
    for id in ids {
        let action = if t.cloud == "aws" { "terminate_instance" } else { "delete" };
        t.admin("POST", "out-of-band", Some(json!({"action": action, "id": id})));
    }
}

/// Whether an inventory id is a node (instance, VM, scale-set VM).
fn is_node(cloud: &str, id: &str) -> bool {
    match cloud {
        "aws" => id.starts_with("i-"),
        "gcp" => id.contains("/zones/") && id.contains("/instances/"),
        "azure" => id.contains("/virtualMachines/"),
        _ => id.starts_with("ocid1.instance."),
    }
}

pub fn suite(cli: &Cli) {
    let mut rows = Vec::new();
    // HPC_FAULT_CLOUDS=gcp,oci runs those clouds only (for development; the test run sets nothing).
    let only = std::env::var("HPC_FAULT_CLOUDS").ok();
    for make in [aws as fn() -> Target, gcp, azure, oci] {
        let t = make();
        if only.as_ref().is_some_and(|o| !o.split(',').any(|c| c == t.cloud)) {
            continue;
        }
        // HPC_FAULT_SCENARIOS=lost,throttled runs the scenarios whose names contain one of those words.
        let want = |name: &str| std::env::var("HPC_FAULT_SCENARIOS").map_or(true, |w| w.split(',').any(|p| name.contains(p)));
        let throttle = json!({"service": "*", "operation": "*", "kind": "throttle", "probability": 0.3, "seed": 11});
        let bursts = json!({"service": "*", "operation": "*", "kind": "server_error", "every": 4, "times": 10});
        let slow = json!({"service": "*", "operation": "*", "kind": "latency", "latency_ms": 200, "probability": 0.5, "seed": 5});
        if want("30% of calls throttled") {
            rows.push((t.cloud, under_fault(&t, cli, "30% of calls throttled", throttle)));
        }
        if want("no capacity, then capacity") {
            rows.push((t.cloud, without_capacity(&t, cli)));
        }
        if want("every create's answer lost once") {
            rows.push((t.cloud, answers_lost(&t, cli)));
        }
        if want("5xx bursts") {
            rows.push((t.cloud, under_fault(&t, cli, "5xx bursts (every 4th call, 10 times)", bursts)));
        }
        if want("slow API") {
            rows.push((t.cloud, under_fault(&t, cli, "slow API (200 ms on half the calls)", slow)));
        }
        if want("provider killed mid-apply") {
            rows.push((t.cloud, interrupted(&t, cli, true)));
        }
        if want("Ctrl-C mid-apply") {
            rows.push((t.cloud, interrupted(&t, cli, false)));
        }
    }
    println!("\nfault suite ({}): every scenario applies a fabric, 4 nodes and Lustre, re-plans and destroys", cli.name);
    println!("{:<6} {:<40} {:>6} {:>10} {:>8} {:>7} {:>7}  note", "cloud", "scenario", "faults", "converged", "orphans", "panics", "secs");
    for (cloud, o) in &rows {
        println!(
            "{cloud:<6} {:<40} {:>6} {:>10} {:>8} {:>7} {:>7.1}  {}",
            o.scenario,
            o.fired,
            if o.converged { "yes" } else { "NO" },
            o.orphans,
            o.panics,
            o.seconds,
            o.note.chars().take(160).collect::<String>()
        );
    }
    let bad: Vec<String> = rows
        .iter()
        .filter(|(_, o)| !o.converged || o.orphans > 0 || o.panics > 0)
        .map(|(c, o)| format!("{c} / {}: converged {}, orphans {}, panics {}: {}", o.scenario, o.converged, o.orphans, o.panics, o.note))
        .collect();
    assert!(bad.is_empty(), "fault suite failures:\n{}", bad.join("\n"));
}
