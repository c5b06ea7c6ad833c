//! AWS end to end on the emulator (moto + our extension), with the real CLIs: create, empty re-plan, the
//! EFA layout and placement the nodes really got, scale in place, drift shown and repaired, imports that
//! equal the created state, cloud failures as diagnostics, and a destroy that leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet};

use hpc_emulators::harness::{AwsEmulator, admin, start_aws};
use serde_json::{Value, json};

use crate::cli::{Cli, Run, Workdir, assert_nodes, fold, state_values};

fn workdir(cli: &Cli, emulator: &AwsEmulator) -> Workdir {
    Workdir::new(cli, "aws_cluster").env("TF_VAR_endpoint", &emulator.endpoint)
}

fn apply(w: &Workdir) -> Run {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"])
}

fn plan(w: &Workdir, code: i32) -> Run {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code)
}

pub fn ec2(endpoint: &str) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

/// The user data of every launch template's latest version as EC2 returns it (base64), one per line:
/// what the nodes launched from them get.
pub fn launch_template_user_data(endpoint: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = ec2(endpoint);
        let templates = client.describe_launch_templates().send().await.unwrap();
        let mut out = String::new();
        for t in templates.launch_templates() {
            let versions = client
                .describe_launch_template_versions()
                .launch_template_id(t.launch_template_id().unwrap())
                .versions("$Latest")
                .send()
                .await
                .unwrap();
            for v in versions.launch_template_versions() {
                out.push_str(v.launch_template_data().and_then(|d| d.user_data()).unwrap_or_default());
                out.push('\n');
            }
        }
        out
    })
}

/// The cluster's live nodes as the emulator reports them: name -> (placement group, EFA cards).
fn nodes(endpoint: &str) -> BTreeMap<String, (String, BTreeSet<i32>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let out = ec2(endpoint)
            .describe_instances()
            .filters(aws_sdk_ec2::types::Filter::builder().name("tag:hpc:cluster").values("acc").build())
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
            .send()
            .await
            .unwrap();
        let mut found = BTreeMap::new();
        for i in out.reservations().iter().flat_map(|r| r.instances()) {
            let name = i.tags().iter().find(|t| t.key() == Some("hpc:node")).and_then(|t| t.value()).unwrap_or_default().to_owned();
            let group = i.placement().and_then(|p| p.group_name()).unwrap_or_default().to_owned();
            let cards: BTreeSet<i32> = i
                .network_interfaces()
                .iter()
                .filter(|n| matches!(n.interface_type(), Some("efa" | "efa-only")))
                .filter_map(|n| n.attachment().and_then(|a| a.network_card_index()))
                .collect();
            let efa = i.network_interfaces().iter().filter(|n| matches!(n.interface_type(), Some("efa" | "efa-only"))).count();
            assert_eq!(efa, cards.len(), "{name}: one EFA interface per network card");
            found.insert(name, (group, cards));
        }
        found
    })
}

fn inventory(endpoint: &str) -> Value {
    admin(endpoint, "GET", "inventory", None)
}

fn instance_id(endpoint: &str, node: &str) -> String {
    let inv = inventory(endpoint);
    inv["resources"]["ec2"]["instances"].as_array().unwrap().iter().find(|i| i["tags"]["hpc:node"] == node).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Requests the emulator served since the last reset, by operation.
fn calls_during(endpoint: &str, f: impl FnOnce()) -> BTreeMap<String, u64> {
    admin(endpoint, "DELETE", "counters", None);
    f();
    let counters = admin(endpoint, "GET", "counters", None);
    serde_json::from_value(counters["counters"].clone()).unwrap()
}

const ADDRESSES: [&str; 3] = ["hpc_gpu_fabric.f", "hpc_gpu_cluster.c", "hpc_parallel_filesystem.fs"];

pub fn cluster_lifecycle_on_the_emulator(cli: &Cli) {
    let emulator = start_aws();
    let ep = emulator.endpoint.as_str();
    let w = workdir(cli, &emulator);

    // Create, and the re-plan is empty.
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(mount.contains("mount -t lustre") && mount.contains(".fsx.us-east-1.amazonaws.com@tcp:/"), "{mount}");
    // Each node with its EC2 instance id and private address.
    for (name, id, _) in assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3"]) {
        assert_eq!(id, instance_id(ep, &name));
    }

    // What the nodes really got: 32 EFA interfaces on cards 0-31, all in the fabric's placement group.
    let found = nodes(ep);
    assert_eq!(found.keys().cloned().collect::<Vec<_>>(), ["acc-0", "acc-1", "acc-2", "acc-3"]);
    for (name, (group, cards)) in &found {
        assert_eq!(group, "accfab-pg", "{name}");
        assert_eq!(*cards, (0..32).collect::<BTreeSet<i32>>(), "{name}");
    }

    // A refresh costs the same calls at 4 nodes as at 6: one filtered list per kind.
    let at_4 = calls_during(ep, || {
        plan(&w, 0);
    });
    assert_eq!(at_4.get("ec2:DescribeInstances"), Some(&1), "{at_4:?}");

    // Scale 4 -> 6 in place.
    w.write("terraform.tfvars", "node_count = 6\n");
    let scale = plan(&w, 2).stdout;
    assert!(fold(&scale).contains("node_count = 4 -> 6") && scale.contains("0 to destroy"), "{scale}");
    apply(&w).expect_code(0);
    assert_eq!(nodes(ep).len(), 6);
    let at_6 = calls_during(ep, || {
        plan(&w, 0);
    });
    assert_eq!(at_4, at_6, "refresh calls grew with the node count");

    // Drift: a node terminated, the placement group deleted, the EFA rules revoked, all behind our back.
    let sg = inventory(ep)["resources"]["ec2"]["security_groups"][0].as_str().unwrap().to_owned();
    admin(ep, "POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": instance_id(ep, "acc-3")})));
    admin(ep, "POST", "out-of-band", Some(json!({"action": "delete_placement_group", "id": "accfab-pg"})));
    admin(ep, "POST", "out-of-band", Some(json!({"action": "revoke_security_group_rules", "id": sg})));
    let drift = plan(&w, 2).stdout;
    assert!(drift.contains("changed outside of"), "{drift}");
    assert!(fold(&drift).contains("node_count = 5 -> 6") && drift.contains("+ \"acc-3\""), "{drift}");
    assert_eq!(drift.matches("deleted outside; the next apply recreates it").count(), 6, "pg + 2 rules, noted and repaired:\n{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    assert!(nodes(ep).contains_key("acc-3"));
    // The replacement node's new instance id and address are in `nodes`.
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let repaired = assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3", "acc-4", "acc-5"]);
    assert_eq!(repaired[3].1, instance_id(ep, "acc-3"));
    assert_eq!(inventory(ep)["resources"]["ec2"]["placement_groups"], json!(["accfab-pg"]));

    // Filesystem capacity grown outside: the plan says what it would cost, and adopting the size settles it.
    let fs_id = state_values(&w)["hpc_parallel_filesystem.fs"]["id"].as_str().unwrap().rsplit('/').next().unwrap().to_owned();
    admin(ep, "POST", "out-of-band", Some(json!({"action": "set_file_system_capacity", "id": fs_id, "value": 7200})));
    let grown = fold(&plan(&w, 2).output());
    assert!(fold(&grown).contains("capacity_gib = 7200 -> 4800 # forces replacement"), "{grown}");
    assert!(grown.contains("Warning: Filesystem capacity cannot shrink") && grown.contains("set capacity_gib = 7200"), "{grown}");
    w.write("terraform.tfvars", "node_count = 6\ncapacity_gib = 7200\n");
    plan(&w, 0);
    w.run(&["apply", "-refresh-only", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);

    // Import: the imported state equals the created one.
    let created = state_values(&w);
    let ids: BTreeMap<&str, String> = ADDRESSES.iter().map(|a| (*a, created[*a]["id"].as_str().unwrap().to_owned())).collect();
    assert_eq!(ids["hpc_gpu_fabric.f"], "aws/us-east-1/accfab");
    w.run(&["state", "rm", ADDRESSES[0], ADDRESSES[1], ADDRESSES[2]]).expect_code(0);
    for a in ADDRESSES {
        w.run(&["import", "-no-color", "-input=false", a, &ids[a]]).expect_code(0);
    }
    assert_eq!(state_values(&w), created, "{} import", cli.name);
    // No resource changes after the import (Terraform 1.0 still wants to write the outputs it dropped).
    let after = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(!after.contains("# hpc_"), "{after}");
    if cli.has_import_blocks() {
        // The same through import blocks.
        w.run(&["state", "rm", ADDRESSES[0], ADDRESSES[1], ADDRESSES[2]]).expect_code(0);
        let blocks: String = ADDRESSES.iter().map(|a| format!("import {{\n  to = {a}\n  id = \"{}\"\n}}\n", ids[a])).collect();
        w.write("imports.tf", &blocks);
        let planned = plan(&w, 2).stdout;
        assert!(planned.contains("3 to import, 0 to add, 0 to change, 0 to destroy"), "{planned}");
        apply(&w).expect_code(0);
        assert_eq!(state_values(&w), created, "import blocks");
    }

    // Destroy leaves nothing behind.
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = inventory(ep);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// An acceptance case whose provider block follows the AWS SDK's environment, pointed at the emulator.
fn moto_workdir(cli: &Cli, case: &str, endpoint: &str) -> Workdir {
    Workdir::new(cli, case)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "acceptance")
        .env("AWS_SECRET_ACCESS_KEY", "acceptance")
}

/// An L4 inference service with no `hpc_gpu_fabric`: the cluster makes its own small network, with no EFA
/// and no placement group; losing every node is drift to repair, not a cluster gone (its network would be
/// orphaned); import finds it again; destroy removes the network after the nodes.
pub fn l4_inference_without_a_fabric(cli: &Cli) {
    let emulator = start_aws();
    let ep = emulator.endpoint.as_str();
    let w = moto_workdir(cli, "l4_inference", ep);
    let planned = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0);
    let flat = fold(&planned.stdout);
    assert!(flat.contains(r#""instance_type" = "g6.xlarge""#) && flat.contains(r#""interface_type" = "interface""#), "{flat}");
    for piece in [r#"kind = "aws_vpc""#, r#"kind = "aws_subnet""#, r#"kind = "aws_security_group""#, r#"kind = "aws_instance""#] {
        assert!(flat.contains(piece), "{piece} missing from the plan:\n{flat}");
    }
    assert!(
        flat.contains(r#"+ fabric = { + cloud = "aws" + id = "aws/us-east-1/serve""#) && flat.contains(r#"+ placement = "none""#),
        "{flat}"
    );
    assert!(flat.contains("Plan: 1 to add, 0 to change, 0 to destroy"), "one resource, no fabric:\n{flat}");
    // No RDMA pieces, and no checklist warning (the CLI's own dev-override warning aside).
    for absent in ["efa-only", "aws_placement_group", "FI_PROVIDER", "Warning: No proximity", "Warning: Training", "Warning: Inference"] {
        assert!(!planned.output().contains(absent), "{absent} in an Ethernet inference plan:\n{}", planned.output());
    }
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_eq!(out["instance_type"]["value"], "g6.xlarge");
    assert_nodes(&out, &["serve-0", "serve-1", "serve-2", "serve-3"]);
    let vpcs = inventory(ep)["resources"]["ec2"]["vpcs"].clone();
    assert_eq!(out["network"]["value"]["vpc_id"], vpcs[0], "the network attribute names the VPC made: {vpcs}");
    assert!(out["network"]["value"]["subnet_id"].as_str().is_some_and(|s| s.starts_with("subnet-")), "{out}");

    // Every node terminated outside: the cluster is still there (its network is), and apply brings the nodes back.
    for node in ["serve-0", "serve-1", "serve-2", "serve-3"] {
        admin(ep, "POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": instance_id(ep, node)})));
    }
    let drift = plan(&w, 2).stdout;
    assert!(fold(&drift).contains("node_count = 0 -> 4") && drift.contains("0 to add, 1 to change, 0 to destroy"), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_nodes(&out, &["serve-0", "serve-1", "serve-2", "serve-3"]);

    // Import: the cluster and the network it made come back as one resource, exactly as created.
    let created = state_values(&w);
    w.run(&["state", "rm", "hpc_gpu_cluster.serve"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_gpu_cluster.serve", "aws/us-east-1/serve"]).expect_code(0);
    assert_eq!(state_values(&w), created, "{} import", cli.name);
    let after = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(!after.contains("# hpc_"), "{after}");

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = inventory(ep);
    assert_eq!(inv["empty"], true, "the network goes with the nodes: {inv}");
}

/// A cluster without a fabric whose nodes cannot launch: the error reaches the user, the network it made
/// stays in state with the (tainted) cluster, the next apply finishes, and destroy leaves nothing.
pub fn own_network_is_kept_when_nodes_fail(cli: &Cli) {
    let emulator = start_aws();
    let ep = emulator.endpoint.as_str();
    let w = moto_workdir(cli, "l4_inference", ep);
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "RunInstances", "kind": "capacity"})));
    let failed = apply(&w).expect_code(1).output();
    let flat = fold(&failed);
    assert!(
        flat.contains("Error: Not enough ") && flat.contains(" capacity in ") && flat.contains("InsufficientInstanceCapacity"),
        "{failed}"
    );
    assert!(!failed.contains("panic") && !failed.contains("rpc error"), "{failed}");
    let kept = &state_values(&w)["hpc_gpu_cluster.serve"];
    let vpc = kept["network"]["vpc_id"].as_str().unwrap_or_else(|| panic!("the network made is in state: {kept}")).to_owned();
    assert_eq!(inventory(ep)["resources"]["ec2"]["vpcs"], json!([vpc]));
    assert!(plan(&w, 2).stdout.contains("hpc_gpu_cluster.serve is tainted, so"));

    admin(ep, "DELETE", "faults", None);
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert_nodes(&out, &["serve-0", "serve-1", "serve-2", "serve-3"]);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = inventory(ep);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// A filesystem takes the network a cluster without a fabric made as its fabric: applied, re-planned empty,
/// destroyed to an empty inventory.
pub fn lustre_on_a_clusters_own_network(cli: &Cli) {
    let emulator = start_aws();
    let ep = emulator.endpoint.as_str();
    let w = moto_workdir(cli, "own_network_lustre", ep);
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    assert!(out["mount"]["value"].as_str().is_some_and(|m| m.contains("mount -t lustre")), "{out}");
    let state = state_values(&w);
    let subnet = state["hpc_gpu_cluster.tune"]["network"]["subnet_id"].as_str().unwrap().to_owned();
    let inv = inventory(ep);
    assert_eq!(inv["resources"]["ec2"]["subnets"], json!([subnet]), "one network, the cluster's: {inv}");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_eq!(inventory(ep)["empty"], true);
}

pub fn cloud_failures_reach_the_user_and_nothing_is_lost(cli: &Cli) {
    let emulator = start_aws();
    let ep = emulator.endpoint.as_str();
    let w = workdir(cli, &emulator);
    // No p5 capacity in the zone: EC2 refuses every launch.
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "RunInstances", "kind": "capacity"})));
    let failed = apply(&w).expect_code(1).output();
    let flat = fold(&failed);
    assert!(flat.contains("Error: Not enough p5.48xlarge capacity in us-east-1a"), "{failed}");
    assert!(flat.contains("InsufficientInstanceCapacity") && flat.contains("p5.48xlarge") && flat.contains("us-east-1a"), "{failed}");
    assert!(!failed.contains("panic") && !failed.contains("rpc error"), "{failed}");
    // What was made is in state: the fabric, and the cluster (tainted) with its launch template.
    let listed = w.run(&["state", "list"]).expect_code(0).stdout;
    assert!(listed.contains("hpc_gpu_fabric.f") && listed.contains("hpc_gpu_cluster.c"), "{listed}");
    let replan = plan(&w, 2).stdout;
    assert!(replan.contains("hpc_gpu_cluster.c is tainted, so"), "{replan}");

    // Capacity arrives: the next apply finishes the job.
    admin(ep, "DELETE", "faults", None);
    apply(&w).expect_code(0);
    plan(&w, 0);
    assert_eq!(nodes(ep).len(), 4);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_eq!(inventory(ep)["empty"], true);
}

// ------------------------------------------------------------------- day 2 (acceptance/day2.rs, issue 24)

/// The time `day2_impair` says the check has been impaired since, and the same as the plan shows it.
const IMPAIRED_SINCE: (&str, &str) = ("2026-12-01T10:02:00Z", "2026-12-01T10:02Z");

/// Marks the node unhealthy the way EC2 would: its instance status check impaired (the guest stopped
/// answering; a reboot or a replacement clears it), through the emulator's admin `impair`. Returns the words
/// the plan's reason contains.
pub fn day2_impair(endpoint: &str, node_id: &str) -> String {
    let done = admin(
        endpoint,
        "POST",
        "out-of-band",
        Some(json!({"action": "impair", "id": node_id, "check": "instance", "since": IMPAIRED_SINCE.0})),
    );
    assert_eq!(done["done"], "impair", "{done}");
    format!("instance status check impaired since {}", IMPAIRED_SINCE.1)
}

/// Publishes a self-check verdict for the node through EC2's own API, as the node does: CreateTags of
/// `hpc:selfcheck = <verdict>` on its own instance (the name is not needed on AWS).
pub fn day2_publish_selfcheck(endpoint: &str, _node_name: &str, node_id: &str, verdict: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        ec2(endpoint)
            .create_tags()
            .resources(node_id)
            .tags(aws_sdk_ec2::types::Tag::builder().key("hpc:selfcheck").value(verdict).build())
            .send()
            .await
            .unwrap();
    });
}

/// The live nodes (pending, running, stopping or stopped) of cluster `cluster` as DescribeInstances lists
/// them: (name, instance id, `hpc:revision` tag), by name.
pub fn day2_live_nodes(endpoint: &str, cluster: &str) -> Vec<(String, String, Option<String>)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = ec2(endpoint);
        let mut found = Vec::new();
        let mut token = None;
        loop {
            let out = client
                .describe_instances()
                .filters(aws_sdk_ec2::types::Filter::builder().name("tag:hpc:cluster").values(cluster).build())
                .filters(
                    aws_sdk_ec2::types::Filter::builder()
                        .name("instance-state-name")
                        .set_values(Some(["pending", "running", "stopping", "stopped"].map(String::from).to_vec()))
                        .build(),
                )
                .set_next_token(token)
                .send()
                .await
                .unwrap();
            for i in out.reservations().iter().flat_map(|r| r.instances()) {
                let tag = |key: &str| i.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value()).map(str::to_owned);
                found.push((tag("hpc:node").unwrap_or_default(), i.instance_id().unwrap_or_default().to_owned(), tag("hpc:revision")));
            }
            token = out.next_token().filter(|t| !t.is_empty()).map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        found.sort();
        found
    })
}

/// The capacity case (`acceptance/cases/capacity_aws`) on a fresh emulator: g6.xlarge nodes drawing on
/// "Running On-Demand G and VT instances" (L-DB2E81BA, 4 vCPUs a node) in us-east-1, launched in us-east-1a.
pub fn capacity_setup(cli: &Cli) -> crate::capacity::Capacity {
    let emulator = start_aws();
    let ep = emulator.endpoint.clone();
    let (a, l) = (ep.clone(), ep.clone());
    crate::capacity::Capacity {
        w: Workdir::new(cli, "capacity_aws").env("TF_VAR_endpoint", &ep),
        admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
        quota_id: "L-DB2E81BA".into(),
        quota_scope: "us-east-1".into(),
        quota_name: "Running On-Demand G and VT instances".into(),
        per_node: 4,
        zone: "us-east-1a".into(),
        instance_type: "g6.xlarge".into(),
        live: Box::new(move || day2_live_nodes(&l, "cap").into_iter().map(|(name, _, _)| name).collect()),
        _keep: Box::new(emulator),
    }
}

/// Writes a Slurm configuration into an instance's tags through EC2's API (CreateTags), as whoever may tag
/// the instance could: the tags hpc-slurm-sync reads.
pub fn forge_slurm_config(endpoint: &str, instance_id: &str, config: &hpc_provider::clouds::slurm::SlurmConfig) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let tags: Vec<aws_sdk_ec2::types::Tag> = hpc_provider::clouds::slurm::aws_config_tags(config)
        .into_iter()
        .map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build())
        .collect();
    rt.block_on(async { ec2(endpoint).create_tags().resources(instance_id).set_tags(Some(tags)).send().await.unwrap() });
}
