//! Ownership with real team setups: state in a real PostgreSQL server (the CLIs' `pg` backend), one
//! configuration in two workspaces whose names collide, separate configurations with the same names, two
//! applies of one workspace at once, and state written by the previous release. On every cloud, with both
//! CLIs: a second owner's apply is refused at `name` and changes nothing of the first (the emulator's
//! snapshot of it is byte-for-byte the same), its destroy deletes nothing of the first, and the first's
//! re-plan stays empty.

use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::{Cli, Run, Workdir, fold, state_values};
use crate::faults::{Target, target};

fn apply(w: &Workdir, extra: &[&str]) -> Run {
    let mut args = vec!["apply", "-no-color", "-input=false", "-auto-approve"];
    args.extend(extra);
    w.run(&args)
}

fn destroy(w: &Workdir) -> Run {
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"])
}

fn plan(w: &Workdir, extra: &[&str]) -> Run {
    let mut args = vec!["plan", "-no-color", "-input=false", "-detailed-exitcode"];
    args.extend(extra);
    w.run(&args)
}

/// A working directory for `t`'s case whose state lives in the test run's PostgreSQL server, in this
/// test's database under its own schema, initialised (`init` installs our build from a filesystem
/// mirror, as dev_overrides want).
fn team_workdir(cli: &Cli, t: &Target, schema: &str) -> Workdir {
    let w = t.workdir(cli);
    w.write("backend.tf", "terraform {\n  backend \"pg\" {}\n}\n");
    crate::cli::use_mirror(&w, false);
    let database = format!("hpc_{}_{}", t.cloud, cli.name);
    let conn = format!("-backend-config=conn_str={}", crate::postgres::server().database(&database));
    let schema = format!("-backend-config=schema_name={schema}");
    w.run(&["init", "-no-color", "-input=false", &conn, &schema]).expect_code(0);
    w
}

/// A schema name unique to this test: cloud, CLI and what the state is for.
fn schema(t: &Target, cli: &Cli, what: &str) -> String {
    format!("hpc_{}_{}_{what}", t.cloud, cli.name)
}

/// The refusal every second owner gets: an error at the resource's `name`, saying what exists and whose,
/// and both ways out.
fn assert_refused(w: &Workdir, run: &Run, name_line: &str) {
    let text = run.output();
    assert_eq!(run.code, Some(1), "{}: the second owner's apply must fail:\n{text}", run.what);
    let line = w.line_of(name_line);
    let block = text.split("Error: ").find(|b| b.starts_with("Name already in use") && b.contains(&format!("on main.tf line {line}")));
    assert!(block.is_some(), "no \"Name already in use\" at main.tf line {line} ({name_line}):\n{text}");
    let flat = fold(&text);
    for words in ["belong to another owner", "Nothing was created or changed", "choose another name", "import", "created "] {
        assert!(flat.contains(words), "the refusal does not say {words:?}:\n{text}");
    }
}

/// The resources a state holds.
fn listed(w: &Workdir) -> String {
    w.run(&["state", "list"]).stdout
}

/// Our nodes in the emulator: instances, VMs and OCI instances of the cluster.
fn node_count(t: &Target) -> usize {
    crate::faults::node_ids(t).len()
}

/// The case's main.tf with the fabric renamed and the filesystem no longer waiting for the cluster (so
/// that both are tried), for a configuration whose cluster and filesystem names collide but whose fabric
/// is its own. On Azure it builds in the first team's resource group, where the names collide.
fn colliding_cluster_and_filesystem(t: &Target, w: &Workdir) {
    let main = std::fs::read_to_string(w.path().join("main.tf")).unwrap();
    let mut edited = main.replace("\"accfab\"", "\"accfab2\"").replace("  cluster            = hpc_gpu_cluster.c\n", "");
    if t.cloud == "azure" {
        edited = edited.replacen("  name          = \"accfab2\"\n", "  name          = \"accfab2\"\n  resource_group = \"accfab-rg\"\n", 1);
    }
    assert_ne!(edited, main, "{}: the case changed shape", t.cloud);
    w.write("main.tf", &edited);
}

/// A snapshot as leaves (`/resources/<id>` -> its body, nested objects without an id flattened), so that a
/// difference names the piece.
fn leaves(v: &Value) -> std::collections::BTreeMap<String, String> {
    fn walk(v: &Value, prefix: String, out: &mut std::collections::BTreeMap<String, String>) {
        match v.as_object() {
            Some(m) if !m.is_empty() && !m.contains_key("kind") && !m.contains_key("id") && !m.contains_key("name") => {
                for (k, v) in m {
                    walk(v, format!("{prefix}/{k}"), out);
                }
            }
            _ => {
                out.insert(prefix, v.to_string());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(v, String::new(), &mut out);
    out
}

/// The emulator's snapshot once it stopped changing by itself (pieces settling from CREATING to ACTIVE).
fn settled(t: &Target) -> Value {
    // The emulators settle pieces within a second (OCI 0.3 s, Google 0.5 s, FSx 1 s).
    let mut last = t.snapshot();
    for _ in 0..15 {
        std::thread::sleep(Duration::from_millis(1200));
        let now = t.snapshot();
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// Asserts that every piece of `before` is exactly as it was (and, with `exactly`, that nothing was
/// added), naming the pieces that differ.
fn same(t: &Target, before: &Value, exactly: bool, what: &str) {
    let (was, is) = (leaves(before), leaves(&settled(t)));
    let mut differ: Vec<String> =
        was.iter().filter(|(k, v)| is.get(*k) != Some(*v)).map(|(k, v)| format!("{k}: {v} -> {:?}", is.get(k))).collect();
    if exactly {
        differ.extend(is.keys().filter(|k| !was.contains_key(*k)).map(|k| format!("{k}: added")));
    }
    assert!(differ.is_empty(), "{}: {what} changed the first team's pieces:\n{}", t.cloud, differ.join("\n"));
}

/// Two teams (or two workspaces) in one account, state in PostgreSQL.
pub fn teams_in_one_account(cli: &Cli, cloud: &str) {
    let t = target(cloud);
    // Team A: the configuration in workspace dev.
    let a = team_workdir(cli, &t, &schema(&t, cli, "a"));
    a.run(&["workspace", "new", "dev"]).expect_code(0);
    apply(&a, &[]).expect_code(0);
    let before = settled(&t);
    let nodes = node_count(&t);
    assert_eq!(nodes, 4, "{cloud}: team A's 4 nodes");

    // The same configuration in workspace staging: refused at the fabric's name, nothing changed.
    a.run(&["workspace", "new", "staging"]).expect_code(0);
    let refused = apply(&a, &[]);
    assert_refused(&a, &refused, "= \"accfab\"");
    assert!(fold(&refused.output()).contains("created 20"), "the refusal names when the pieces were made:\n{}", refused.output());
    same(&t, &before, true, "the staging apply");
    assert!(listed(&a).trim().is_empty(), "{cloud}: staging's state holds {}", listed(&a));
    destroy(&a).expect_code(0);
    same(&t, &before, true, "the staging destroy");

    // A separate configuration with the same names, in a state of its own: the same.
    let b = team_workdir(cli, &t, &schema(&t, cli, "b"));
    let refused = apply(&b, &[]);
    assert_refused(&b, &refused, "= \"accfab\"");
    same(&t, &before, true, "the second configuration's apply");
    destroy(&b).expect_code(0);
    same(&t, &before, true, "the second configuration's destroy");

    // A configuration whose fabric is its own but whose cluster and filesystem names collide: its fabric
    // is made, the cluster and the filesystem are refused, and destroy removes its fabric only.
    let c = team_workdir(cli, &t, &schema(&t, cli, "c"));
    colliding_cluster_and_filesystem(&t, &c);
    let refused = apply(&c, &[]);
    assert_refused(&c, &refused, "= \"acc\"");
    assert_refused(&c, &refused, "= \"accfs\"");
    same(&t, &before, false, "a colliding cluster and filesystem");
    let held = listed(&c);
    assert!(held.contains("hpc_gpu_fabric.f") && !held.contains("hpc_gpu_cluster") && !held.contains("hpc_parallel_filesystem"), "{held}");
    destroy(&c).expect_code(0);
    same(&t, &before, true, "the colliding configuration's destroy");

    // Team A's plan is still empty.
    a.run(&["workspace", "select", "dev"]).expect_code(0);
    plan(&a, &[]).expect_code(0);

    // Two applies of dev at once (a slowed node wait keeps the first one going): one holds the state lock,
    // the other is refused by it, and only one apply reaches the provider.
    let (service, operation) = t.wait_call;
    t.admin("POST", "faults", Some(json!({"service": service, "operation": operation, "kind": "latency", "latency_ms": 700})));
    t.admin("DELETE", "counters", None);
    let args = ["apply", "-no-color", "-input=false", "-auto-approve", "-lock-timeout=0s", "-var", "node_count=5"];
    let first = a.command(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let second = a.command(&args).output().unwrap();
    let first = first.wait_with_output().unwrap();
    t.admin("DELETE", "faults", None);
    let text = |o: &std::process::Output| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let outcomes = [(first.status.success(), text(&first)), (second.status.success(), text(&second))];
    assert_eq!(outcomes.iter().filter(|(ok, _)| *ok).count(), 1, "{cloud}: exactly one apply succeeds: {outcomes:?}");
    let loser = outcomes.iter().find(|(ok, _)| !ok).map(|(_, t)| t.clone()).unwrap_or_default();
    assert!(loser.contains("Error acquiring the state lock"), "{cloud}: the other apply was not stopped by the lock:\n{loser}");
    assert_eq!(node_count(&t), 5, "{cloud}: one scale-up from 4 to 5");
    let counters = t.admin("GET", "counters", None)["counters"].clone();
    let launches = match cloud {
        "aws" => counters["ec2:RunInstances"].as_u64(),
        "gcp" => counters["compute:instances.bulkInsert"].as_u64(),
        "azure" => counters["arm:virtualMachineScaleSets.put"].as_u64(),
        _ => counters["core:LaunchInstance"].as_u64(),
    };
    assert_eq!(launches, Some(1), "{cloud}: the provider saw one apply: {counters}");
    plan(&a, &["-var", "node_count=5"]).expect_code(0);

    // Team A's destroy removes what it made, and nothing else was left behind by anyone.
    destroy(&a).expect_code(0);
    assert_eq!(t.leftovers(), Vec::<String>::new(), "{cloud}: the emulator still holds something");
}

/// State written by the previous release (before owner markers), brought forward by this one: the first
/// plan is empty, the refresh records the legacy owner and changes nothing in the cloud, another state's
/// create of the same names is refused by the unmarked pieces, a scale-up marks only the new node, and
/// destroy removes everything.
pub fn state_from_the_previous_release(cli: &Cli, cloud: &str) {
    let Some(previous) = std::env::var_os("HPC_PREVIOUS_PROVIDER_DIR") else {
        panic!(
            "HPC_PREVIOUS_PROVIDER_DIR is not set: run the acceptance tests through ./scripts/test.sh, which builds the previous release"
        )
    };
    let t = target(cloud);
    let w = t.workdir(cli);
    let overrides = |dir: &std::path::Path| {
        let config = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"hpc-platform/hpc\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            dir.display()
        );
        std::fs::write(w.dir.path().join("cli.tfrc"), config).unwrap();
    };
    overrides(std::path::Path::new(&previous));
    // The previous release predates the conformance work (older Azure api-versions, say): the vendors'
    // definitions judge this release's calls, not its.
    t.admin("POST", "conformance", Some(serde_json::json!({"judge": false})));
    // On OCI the previous release has two bugs this release fixes. It sends `data_repository` as it is
    // (`oci://bucket@namespace/prefix`) as the link's objectStoragePrefix, which OCI refuses (it takes
    // `namespace:/bucket/prefix`): none of its users has a linked filesystem there, so its state is written
    // without one. And it adds security rules without waiting for the group to be AVAILABLE, which OCI (and
    // the emulator) refuses with 409 IncorrectState, and a second apply replaces the tainted fabric, makes a
    // new group and meets the same refusal. What is under test is the state it writes, so its rule calls are
    // held back until the group is AVAILABLE.
    if cloud == "oci" {
        let main = w.path().join("main.tf");
        let config = std::fs::read_to_string(&main).unwrap();
        let unlinked: String =
            config.lines().filter(|l| !l.trim_start().starts_with("data_repository")).map(|l| format!("{l}\n")).collect();
        assert_ne!(unlinked, config, "the OCI case has a data_repository");
        std::fs::write(&main, unlinked).unwrap();
        let hold = json!({"service": "core", "operation": "AddNetworkSecurityGroupSecurityRules", "kind": "latency", "latency_ms": 600});
        t.admin("POST", "faults", Some(hold));
    }
    // It passed a Cloud Storage path to Managed Lustre as written, and Lustre wants a path inside a bucket to
    // end with '/' (GcsPath.uri): its users wrote the slash, which this release adds itself.
    if cloud == "gcp" {
        let main = w.path().join("main.tf");
        let config = std::fs::read_to_string(&main).unwrap();
        let slashed = config.replace("\"gs://acc-training-data/tokenized\"", "\"gs://acc-training-data/tokenized/\"");
        assert_ne!(slashed, config, "the GCP case imports from gs://acc-training-data/tokenized");
        std::fs::write(&main, slashed).unwrap();
    }
    apply(&w, &[]).expect_code(0);
    if cloud == "oci" {
        t.admin("DELETE", "faults", None);
    }
    t.admin("POST", "conformance", Some(serde_json::json!({"judge": true})));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(w.path().join("terraform.tfstate")).unwrap()).unwrap();
    let versions: Vec<i64> = written["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["instances"].as_array().cloned().unwrap_or_default())
        .map(|i| i["schema_version"].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(versions, vec![0, 0, 0], "{cloud}: the previous release writes schema version 0");
    let before = settled(&t);

    // This release: an empty plan, then a refresh that records the owner and changes nothing.
    overrides(&crate::cli::provider_dir());
    let planned = plan(&w, &[]);
    assert_eq!(planned.code, Some(0), "{cloud}: the first plan after the upgrade is not empty:\n{}", planned.output());
    assert!(!planned.output().contains("changed outside"), "{cloud}: {}", planned.output());
    apply(&w, &["-refresh-only"]).expect_code(0);
    same(&t, &before, true, "the upgrade");
    let values = state_values(&w);
    for (address, v) in &values {
        let owner = v["owner"].as_str().unwrap_or_default();
        assert!(owner.starts_with("legacy-"), "{cloud}: {address} records owner {owner:?}");
    }
    plan(&w, &[]).expect_code(0);

    // Another state with the same names: refused by the unmarked pieces (their owner is not known).
    let other = t.workdir(cli);
    let refused = apply(&other, &[]);
    assert_refused(&other, &refused, "= \"accfab\"");
    assert!(fold(&refused.output()).contains("no owner marker"), "{}", refused.output());
    same(&t, &before, true, "the refused create");

    // A scale-up under this release keeps the unmarked nodes as its own and adds one with the marker.
    apply(&w, &["-var", "node_count=5"]).expect_code(0);
    assert_eq!(node_count(&t), 5, "{cloud}");
    let owner = state_values(&w)["hpc_gpu_cluster.c"]["owner"].as_str().unwrap_or_default().to_owned();
    let marked = t.snapshot().to_string().matches(&owner).count();
    assert!(marked >= 1, "{cloud}: the new node does not carry {owner}");
    plan(&w, &["-var", "node_count=5"]).expect_code(0);
    destroy(&w).expect_code(0);
    assert_eq!(t.leftovers(), Vec::<String>::new(), "{cloud}: the emulator still holds something after destroy");
}
