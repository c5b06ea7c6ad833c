//! Day 2 on every cloud, with the real CLIs: a 4-node cluster with one node made unhealthy by the cloud's
//! own health signal plans exactly that node's replacement with its reason, and the apply replaces it
//! alone under its name; a failing self-check verdict published through the cloud's own API shows with
//! `repair = "report"` and changes nothing; an image change plans a rolling update in two batches of two,
//! and the apply remakes the first batch while the second keeps running (read from the cloud between the
//! batches), waits for the batch's self-check, and is interrupted (Ctrl-C) there; the next plan carries on
//! with the second batch only, and its apply finishes. Then import and destroy to an empty inventory.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use serde_json::{Value, json};

use crate::cli::{Cli, Workdir, fold};

/// A live node as the cloud's own API lists it: name, id, revision tag or label.
pub type LiveNode = (String, String, Option<String>);

/// The emulator's admin API: method, route, body.
type AdminFn = Box<dyn Fn(&str, &str, Option<Value>) -> Value>;
/// A self-check verdict published for (name, id, verdict).
type PublishFn = Box<dyn Fn(&str, &str, &str)>;

struct Day2 {
    w: Workdir,
    admin: AdminFn,
    /// Makes a node (by id) unhealthy the way the cloud would; returns words the plan's reason contains.
    impair: Box<dyn Fn(&str) -> String>,
    /// Publishes a self-check verdict through the cloud's own API: (name, id, verdict).
    publish: PublishFn,
    live: Box<dyn Fn() -> Vec<LiveNode>>,
    /// What tells one incarnation of a node from the next, from its id: the id itself, and on Azure (where
    /// a node is remade in place and keeps its VM id) the id with the number of times it was remade.
    stamp: Box<dyn Fn(&str) -> String>,
    import_id: &'static str,
    /// Another image the emulator accepts, for the rolling update.
    second_image: &'static str,
    _keep: Box<dyn std::any::Any>,
}

fn setup(cli: &Cli, cloud: &str) -> Day2 {
    let case = format!("day2_{cloud}");
    let base = |w: Workdir| w.env("HPC_DAY2_POLL_MS", "300");
    match cloud {
        "aws" => {
            let emulator = start_aws();
            let ep = emulator.endpoint.clone();
            let (a, i, p, l) = (ep.clone(), ep.clone(), ep.clone(), ep.clone());
            Day2 {
                w: base(Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep)),
                admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
                impair: Box::new(move |id| crate::aws::day2_impair(&i, id)),
                publish: Box::new(move |name, id, v| crate::aws::day2_publish_selfcheck(&p, name, id, v)),
                live: Box::new(move || crate::aws::day2_live_nodes(&l, "d2")),
                stamp: Box::new(str::to_owned),
                import_id: "aws/us-east-1/d2",
                second_image: "ami-0a1b2c3d4e5f67890",
                _keep: Box::new(emulator),
            }
        }
        "gcp" => {
            let ep = start_gcp();
            let (a, i, p, l, s) = (ep.clone(), ep.clone(), ep.clone(), ep.clone(), ep.clone());
            Day2 {
                w: base(Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep)),
                admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
                impair: Box::new(move |id| crate::gcp::day2_impair(&i, id)),
                publish: Box::new(move |name, id, v| crate::gcp::day2_publish_selfcheck(&p, name, id, v)),
                live: Box::new(move || crate::gcp::day2_live_nodes(&l, "d2")),
                // The `nodes` output's id is the instance's path, which a node remade under its name keeps:
                // its stamp is the numeric id Compute Engine assigned, which it does not.
                stamp: Box::new(move |id| match id.rsplit_once('/') {
                    Some((_, name)) => crate::gcp::day2_live_nodes(&s, "d2")
                        .into_iter()
                        .find(|(n, _, _)| n == name)
                        .map_or_else(|| format!("{id} (gone)"), |(_, numeric, _)| numeric),
                    None => id.to_owned(),
                }),
                import_id: "gcp/us-central1-a/d2",
                second_image: "projects/debian-cloud/global/images/family/debian-12",
                _keep: Box::new(()),
            }
        }
        "azure" => {
            let (ep, pem) = start_azure();
            let (a, pa) = (ep.clone(), pem.clone());
            let (i, p, l) = ((ep.clone(), pem.clone()), (ep.clone(), pem.clone()), (ep.clone(), pem.clone()));
            let r = (ep.clone(), pem.clone());
            Day2 {
                w: base(Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string())),
                admin: Box::new(move |m, r, b| azure_admin(&a, &pa, m, r, b)),
                impair: Box::new(move |id| crate::azure::day2_impair(&i.0, &i.1, id)),
                publish: Box::new(move |name, id, v| crate::azure::day2_publish_selfcheck(&p.0, &p.1, name, id, v)),
                live: Box::new(move || crate::azure::day2_live_nodes(&l.0, &l.1, "d2")),
                stamp: Box::new(move |id| format!("{id}#{}", crate::azure::day2_remade(&r.0, &r.1, id))),
                import_id: "azure/d2fab-rg/d2",
                second_image: "Canonical:ubuntu-24_04-lts:server:latest",
                _keep: Box::new(()),
            }
        }
        "oci" => {
            let (ep, key) = start_oci();
            let a = ep.clone();
            let (i, p, l) = (ep.clone(), ep.clone(), ep.clone());
            let w = base(
                Workdir::new(cli, &case)
                    .env("TF_VAR_endpoint", &ep)
                    .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
                    .env("TF_VAR_fingerprint", &key.fingerprint),
            );
            Day2 {
                w,
                admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
                impair: Box::new(move |id| crate::oci::day2_impair(&i, id)),
                publish: Box::new(move |name, id, v| crate::oci::day2_publish_selfcheck(&p, name, id, v)),
                live: Box::new(move || crate::oci::day2_live_nodes(&l, "d2")),
                stamp: Box::new(str::to_owned),
                import_id: "oci/us-ashburn-1/ocid1.compartment.oc1..acceptance/d2",
                second_image: "ocid1.image.oc1..day2second",
                _keep: Box::new(key),
            }
        }
        other => panic!("no cloud {other}"),
    }
}

fn apply(w: &Workdir) {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
}

fn plan(w: &Workdir, code: i32) -> String {
    let run = w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code);
    fold(&run.output())
}

fn outputs(w: &Workdir) -> Value {
    serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap()
}

/// The nodes output as (name, id).
fn node_ids(w: &Workdir) -> Vec<(String, String)> {
    outputs(w)["nodes"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap().to_owned(), n["id"].as_str().unwrap().to_owned()))
        .collect()
}

/// The nodes output as (name, stamp): what changes when a node is remade.
fn node_stamps(d: &Day2) -> Vec<(String, String)> {
    node_ids(&d.w).into_iter().map(|(n, id)| (n, (d.stamp)(&id))).collect()
}

/// The live nodes' stamps by name.
fn live_stamp(d: &Day2, live: &[LiveNode], name: &str) -> String {
    (d.stamp)(live_id(live, name))
}

fn id_of<'a>(nodes: &'a [(String, String)], name: &str) -> &'a str {
    &nodes.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} not in {nodes:?}")).1
}

/// Polls the cloud until `done` holds for its live nodes.
fn until(d: &Day2, what: &str, apply: &mut Child, done: impl Fn(&[LiveNode]) -> bool) -> Vec<LiveNode> {
    let started = Instant::now();
    loop {
        let live = (d.live)();
        if done(&live) {
            return live;
        }
        if let Some(status) = apply.try_wait().unwrap() {
            panic!("apply ended ({status}) before {what}; live nodes: {live:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(300), "timed out waiting for {what}; live nodes: {live:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn revision_of<'a>(live: &'a [LiveNode], name: &str) -> Option<&'a str> {
    live.iter().find(|(n, _, _)| n == name).and_then(|(_, _, r)| r.as_deref())
}

fn live_id<'a>(live: &'a [LiveNode], name: &str) -> &'a str {
    &live.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| panic!("{name} not live: {live:?}")).1
}

fn spawn_apply(w: &Workdir) -> Child {
    w.command(&["apply", "-no-color", "-input=false", "-auto-approve"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (out.status.code(), format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

pub fn node_lifecycle(cli: &Cli, cloud: &str) {
    let d = setup(cli, cloud);
    let w = &d.w;
    apply(w);
    plan(w, 0);
    let first = node_ids(w);
    assert_eq!(first.len(), 4, "{first:?}");
    let first_stamps = node_stamps(&d);
    let old_revision = outputs(w)["revision"]["value"].as_str().unwrap().to_owned();

    // 1. The cloud holds d2-2 unhealthy: the plan names it with the reason, the apply replaces it alone.
    let words = (d.impair)(id_of(&first, "d2-2"));
    let planned = plan(w, 2);
    assert!(planned.contains("1 unhealthy node to repair") && planned.contains(&format!("d2-2: {words}")), "{planned}");
    assert!(planned.contains("0 to add, 1 to change, 0 to destroy"), "{planned}");
    apply(w);
    let repaired = node_ids(w);
    let repaired_stamps = node_stamps(&d);
    for (name, stamp) in &first_stamps {
        let now = id_of(&repaired_stamps, name);
        assert_eq!(now == stamp, name != "d2-2", "{name}: {stamp} -> {now}");
    }
    plan(w, 0);

    // 2. d2-1's self-check fails and says so through the cloud: with repair = "report" the plan shows it
    //    and changes nothing; a passing verdict clears it.
    (d.publish)("d2-1", id_of(&repaired, "d2-1"), "fail-gpus-7-of-8");
    w.write("terraform.tfvars", "repair = \"report\"\n");
    let reported = plan(w, 2);
    assert!(reported.contains("d2-1: self-check: 7 of 8 GPUs") && reported.contains("repair = \"report\""), "{reported}");
    assert!(reported.contains("1 unhealthy node not repaired by this apply"), "{reported}");
    apply(w);
    assert_eq!(node_stamps(&d), repaired_stamps, "report changed nodes");
    plan(w, 0);
    (d.publish)("d2-1", id_of(&repaired, "d2-1"), "ok");
    let healthy = plan(w, 0);
    assert!(!healthy.contains("unhealthy node"), "{healthy}");

    // 3. A new image rolls in two batches of two.
    w.write("terraform.tfvars", &format!("image = \"{}\"\n", d.second_image));
    let rolling = plan(w, 2);
    assert!(rolling.contains("Rolling update of 4 nodes in 2 batches"), "{rolling}");
    assert!(rolling.contains("batch 1: d2-0, d2-1") && rolling.contains("batch 2: d2-2, d2-3"), "{rolling}");
    assert!(rolling.contains("0 to add, 1 to change, 0 to destroy"), "{rolling}");
    let before = (d.live)();
    let before_stamps: Vec<String> = ["d2-2", "d2-3"].iter().map(|n| live_stamp(&d, &before, n)).collect();
    let mut child = spawn_apply(w);
    // The first batch is remade with the new revision while the second keeps running as it was.
    let between = until(&d, "the first batch to run the new revision", &mut child, |live| {
        ["d2-0", "d2-1"].iter().all(|n| revision_of(live, n).is_some_and(|r| r != old_revision))
    });
    assert_eq!(between.len(), 4, "{between:?}");
    for (k, n) in ["d2-2", "d2-3"].iter().enumerate() {
        assert_eq!(live_stamp(&d, &between, n), before_stamps[k], "{n} was touched before its batch");
        assert_eq!(revision_of(&between, n), Some(old_revision.as_str()), "{between:?}");
    }
    let between_stamps: Vec<String> = ["d2-0", "d2-1"].iter().map(|n| live_stamp(&d, &between, n)).collect();
    // The apply waits for the batch's self-check: interrupt it there, as Ctrl-C does.
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "the apply did not wait for the self-check");
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let (code, text) = finish(child);
    assert_ne!(code, Some(0), "{text}");

    // The next plan carries on with the second batch only.
    let resumed = plan(w, 2);
    assert!(resumed.contains("Rolling update of 2 nodes in 1 batch") && resumed.contains("batch 1: d2-2, d2-3"), "{resumed}");
    let mut child = spawn_apply(w);
    for n in ["d2-0", "d2-1"] {
        (d.publish)(n, live_id(&between, n), "ok");
    }
    let after = until(&d, "the second batch to run the new revision", &mut child, |live| {
        ["d2-2", "d2-3"].iter().all(|n| revision_of(live, n).is_some_and(|r| r != old_revision))
    });
    for (k, n) in ["d2-0", "d2-1"].iter().enumerate() {
        assert_eq!(live_stamp(&d, &after, n), between_stamps[k], "{n} was remade twice");
    }
    for n in ["d2-2", "d2-3"] {
        (d.publish)(n, live_id(&after, n), "ok");
    }
    let (code, text) = finish(child);
    assert_eq!(code, Some(0), "{text}");
    plan(w, 0);
    let out = outputs(w);
    let revision = out["revision"]["value"].as_str().unwrap();
    assert_ne!(revision, old_revision);
    for n in ["d2-0", "d2-1", "d2-2", "d2-3"] {
        assert_eq!(out["node_revisions"]["value"][n], json!(revision), "{out}");
    }

    // Import gives back the state a refresh makes; destroy leaves nothing.
    w.run(&["apply", "-refresh-only", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let refreshed = crate::cli::state_values(w);
    w.run(&["state", "rm", "hpc_gpu_cluster.c"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_gpu_cluster.c", d.import_id]).expect_code(0);
    w.run(&["apply", "-refresh-only", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    // The update strategy lives in the configuration only (the cloud has no record of it): the import
    // leaves it out, and the first plan adds it, touching no node.
    // (OCI keeps it in the instance configuration's tags, so its import gives it back.)
    let mut imported = crate::cli::state_values(w);
    if imported["hpc_gpu_cluster.c"]["update_strategy"].is_null() {
        imported.get_mut("hpc_gpu_cluster.c").unwrap()["update_strategy"] = refreshed["hpc_gpu_cluster.c"]["update_strategy"].clone();
        assert_eq!(imported, refreshed);
        let adopt = plan(w, 2);
        assert!(adopt.contains("+ update_strategy {") && !adopt.contains("Rolling update") && !adopt.contains("unhealthy node"), "{adopt}");
        let stamps = node_stamps(&d);
        apply(w);
        assert_eq!(node_stamps(&d), stamps);
    } else {
        assert_eq!(imported, refreshed);
    }
    plan(w, 0);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = (d.admin)("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// The kill of the provider process the CLI started.
fn kill_provider(cli_pid: u32) {
    let out = std::process::Command::new("pgrep").args(["-P", &cli_pid.to_string(), "-f", "terraform-provider-hpc"]).output().unwrap();
    let pid = String::from_utf8_lossy(&out.stdout).split_whitespace().next().map(str::to_owned).expect("no provider process to kill");
    std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap();
}

/// The day-2 fault cases: a repair while 30% of calls are throttled replaces exactly the unhealthy node;
/// a rolling update whose provider is killed (SIGKILL, so no state is saved) after its first batch
/// carries on from what the cloud says (each node's revision) and remakes only the second batch. Both end
/// with an empty re-plan and an empty inventory after destroy.
pub fn node_faults(cli: &Cli, cloud: &str) {
    let d = setup(cli, cloud);
    let w = &d.w;
    apply(w);
    let first = node_ids(w);
    let first_stamps = node_stamps(&d);
    let old_revision = outputs(w)["revision"]["value"].as_str().unwrap().to_owned();

    let words = (d.impair)(id_of(&first, "d2-1"));
    assert!(plan(w, 2).contains(&format!("d2-1: {words}")));
    (d.admin)("POST", "faults", Some(json!({"service": "*", "operation": "*", "kind": "throttle", "probability": 0.3, "seed": 7})));
    apply(w);
    let fired: u64 =
        (d.admin)("GET", "faults", None)["faults"].as_array().into_iter().flatten().map(|f| f["fired"].as_u64().unwrap_or(0)).sum();
    (d.admin)("DELETE", "faults", None);
    assert!(fired > 0, "no call was throttled");
    let repaired = node_stamps(&d);
    for (name, stamp) in &first_stamps {
        assert_eq!(id_of(&repaired, name) == stamp, name != "d2-1", "{name} under throttling");
    }
    plan(w, 0);

    w.write("terraform.tfvars", &format!("image = \"{}\"\n", d.second_image));
    let mut child = spawn_apply(w);
    let between = until(&d, "the first batch to run the new revision", &mut child, |live| {
        ["d2-0", "d2-1"].iter().all(|n| revision_of(live, n).is_some_and(|r| r != old_revision))
    });
    let between_stamps: Vec<String> = ["d2-0", "d2-1"].iter().map(|n| live_stamp(&d, &between, n)).collect();
    kill_provider(child.id());
    let (code, _) = finish(child);
    assert_ne!(code, Some(0));
    let resumed = plan(w, 2);
    assert!(resumed.contains("batch 1: d2-2, d2-3") && !resumed.contains("batch 2"), "{resumed}");
    let mut child = spawn_apply(w);
    for n in ["d2-0", "d2-1"] {
        (d.publish)(n, live_id(&between, n), "ok");
    }
    let after = until(&d, "the second batch to run the new revision", &mut child, |live| {
        ["d2-2", "d2-3"].iter().all(|n| revision_of(live, n).is_some_and(|r| r != old_revision))
    });
    assert_eq!(after.len(), 4, "{after:?}");
    for n in ["d2-2", "d2-3"] {
        (d.publish)(n, live_id(&after, n), "ok");
    }
    let (code, text) = finish(child);
    assert_eq!(code, Some(0), "{text}");
    for (k, n) in ["d2-0", "d2-1"].iter().enumerate() {
        assert_eq!(live_stamp(&d, &after, n), between_stamps[k], "{n} was remade twice");
    }
    plan(w, 0);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = (d.admin)("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}
