//! GB200 NVL72 training clusters of whole NVLink domains on every cloud, with the real CLIs: two domains
//! (36 nodes) planned and applied with each cloud's own per-domain pieces, an empty re-plan, the Slurm
//! block topology and Kubernetes labels naming the domains, refresh calls that do not grow with the
//! cluster, a scale to three domains, a node lost outside the tool shown and put back in its own domain,
//! import of the cluster, and destroy to an inventory empty of everything the configuration made (the
//! capacity bought outside it, an AWS Capacity Block or OCI's GPU memory fabrics, is never touched).

use std::any::Any;

use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use serde_json::{Value, json};

use crate::cli::{Cli, Workdir, fold};

/// A call of the emulator's admin API: method, route, body.
type AdminApi = Box<dyn Fn(&str, &str, Option<Value>) -> Value>;

/// One cloud's emulator with its rack-scale case, and how the test reaches the emulator.
struct Rack {
    w: Workdir,
    admin: AdminApi,
    /// The out-of-band action that removes a node (`id` = the node's id from `nodes`).
    lose: &'static str,
    /// The cluster's import id.
    import_id: &'static str,
    /// What the emulator holds that was bought or found, not made by the configuration (an AWS Capacity
    /// Block and its UltraServers' reservations): `(service, kind, ids)`, which destroy leaves as they were.
    bought: Vec<(&'static str, &'static str, Value)>,
    _emulator: Box<dyn Any>,
}

/// Buys a Capacity Block of three `u-p6e-gb200x72` UltraServers from the emulator, as a user does before
/// planning: DescribeCapacityBlockOfferings by UltraServer type, then PurchaseCapacityBlock.
fn buy_ultraservers(endpoint: &str) -> String {
    let client = crate::aws::ec2(endpoint);
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let offerings = client
            .describe_capacity_block_offerings()
            .ultraserver_type("u-p6e-gb200x72")
            .ultraserver_count(3)
            .capacity_duration_hours(24)
            .send()
            .await
            .expect("UltraServer offerings");
        let offering = offerings.capacity_block_offerings()[0].capacity_block_offering_id().unwrap().to_owned();
        let bought = client
            .purchase_capacity_block()
            .capacity_block_offering_id(offering)
            .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
            .send()
            .await
            .expect("PurchaseCapacityBlock");
        bought.capacity_blocks()[0].capacity_block_id().unwrap().to_owned()
    })
}

fn rack(cli: &Cli, cloud: &str) -> Rack {
    let case = format!("rack_scale_{cloud}");
    match cloud {
        "aws" => {
            let emulator = start_aws();
            let ep = emulator.endpoint.clone();
            let block = buy_ultraservers(&ep);
            let a = ep.clone();
            let inv = admin(&ep, "GET", "inventory", None);
            let bought = vec![
                ("ec2", "capacity_blocks", json!([block])),
                ("ec2", "capacity_reservations", inv["resources"]["ec2"]["capacity_reservations"].clone()),
            ];
            Rack {
                w: Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep).env("TF_VAR_capacity_block", &block),
                admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
                lose: "terminate_instance",
                import_id: "aws/us-east-1/nvl",
                bought,
                _emulator: Box::new(emulator),
            }
        }
        "gcp" => {
            let ep = start_gcp();
            let a = ep.clone();
            Rack {
                w: Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep),
                admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
                lose: "delete",
                import_id: "gcp/us-central1-a/nvl",
                bought: Vec::new(),
                _emulator: Box::new(()),
            }
        }
        "azure" => {
            let (ep, pem) = start_azure();
            let (a, pa) = (ep.clone(), pem.clone());
            Rack {
                w: Workdir::new(cli, &case).env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string()),
                admin: Box::new(move |m, r, b| azure_admin(&a, &pa, m, r, b)),
                lose: "delete",
                import_id: "azure/nvlfab-rg/nvl",
                bought: Vec::new(),
                _emulator: Box::new(()),
            }
        }
        "oci" => {
            let (ep, key) = start_oci();
            let a = ep.clone();
            seed_gpu_memory_fabrics(&ep);
            Rack {
                w: Workdir::new(cli, &case)
                    .env("TF_VAR_endpoint", &ep)
                    .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
                    .env("TF_VAR_fingerprint", &key.fingerprint),
                admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
                lose: "terminate_instance",
                import_id: "oci/us-ashburn-1/ocid1.compartment.oc1..acceptance/nvl",
                bought: Vec::new(),
                _emulator: Box::new(key),
            }
        }
        other => panic!("no cloud {other}"),
    }
}

/// OCI's racks come with their GPU memory fabrics: three in the availability domain, as the provider
/// finds them (it never creates or deletes one).
fn seed_gpu_memory_fabrics(endpoint: &str) {
    for i in 0..3 {
        admin(
            endpoint,
            "POST",
            "gpu-memory-fabrics",
            Some(json!({
                "compartmentId": "ocid1.compartment.oc1..acceptance",
                "availabilityDomain": "Uocm:US-ASHBURN-AD-1",
                "displayName": format!("rack-{i}"),
            })),
        );
    }
}

fn apply(w: &Workdir) {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
}

fn plan(w: &Workdir, code: i32) -> String {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code).stdout
}

fn outputs(w: &Workdir) -> Value {
    serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap()
}

/// The domains, the Slurm topology and the node labels for `domains` domains of 18 nodes.
fn assert_domains(out: &Value, domains: u32) {
    let listed = out["nvlink_domains"]["value"].as_array().unwrap();
    assert_eq!(listed.len() as u32, domains, "{out}");
    let topology = out["slurm_topology_conf"]["value"].as_str().unwrap();
    for d in 0..domains {
        assert_eq!(listed[d as usize]["name"], json!(format!("nvl-nvl{d}")));
        assert_eq!(listed[d as usize]["gpus"], json!(72));
        let line = format!("BlockName=nvl-nvl{d} Nodes=nvl-[{}-{}]", d * 18, d * 18 + 17);
        assert!(topology.lines().any(|l| l == line), "{line:?} not in {topology}");
    }
    assert!(topology.lines().any(|l| l == "BlockSizes=18"), "{topology}");
    assert!(out["slurm_conf"]["value"].as_str().unwrap().contains("TopologyPlugin=topology/block"), "{out}");
    let labels = &out["kubernetes_node_labels"]["value"];
    assert_eq!(labels.as_object().unwrap().len() as u32, domains * 18);
    assert_eq!(labels["nvl-19"]["hpc-platform/nvlink-domain"], json!("nvl-nvl1"), "{labels}");
    assert_eq!(out["node_environment"]["value"]["NCCL_MNNVL_ENABLE"], json!("1"), "{out}");
    let nodes = out["nodes"]["value"].as_array().unwrap();
    assert_eq!(nodes.len() as u32, domains * 18, "{out}");
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["name"], json!(format!("nvl-{i}")), "{out}");
    }
}

pub fn nvl72_cluster_lifecycle(cli: &Cli, cloud: &str) {
    let r = rack(cli, cloud);
    let w = &r.w;
    // Plan: the cloud's per-domain pieces, two of them.
    let planned = fold(&plan(w, 2));
    assert!(planned.contains("nvl-nvl0") && planned.contains("nvl-nvl1") && !planned.contains("nvl-nvl2"), "{planned}");
    apply(w);
    plan(w, 0);
    let out = outputs(w);
    assert_domains(&out, 2);
    assert!(out["instance_type"]["value"].as_str().unwrap().contains("GB200") || cloud == "aws" || cloud == "gcp", "{out}");

    // Refresh at 36 nodes and at 54 costs the same calls.
    (r.admin)("DELETE", "counters", None);
    plan(w, 0);
    let at_two = (r.admin)("GET", "counters", None);

    // Scale by one whole domain.
    w.write("terraform.tfvars", "node_count = 54\n");
    let scale = fold(&plan(w, 2));
    assert!(scale.contains("node_count = 36 -> 54") && scale.contains("nvl-nvl2") && scale.contains("0 to destroy"), "{scale}");
    apply(w);
    plan(w, 0);
    let out = outputs(w);
    assert_domains(&out, 3);
    (r.admin)("DELETE", "counters", None);
    plan(w, 0);
    assert_eq!((r.admin)("GET", "counters", None), at_two, "refresh calls grew with the domains");

    // A node of the second domain lost outside the tool: the plan shows it, the apply puts it back.
    let lost = out["nodes"]["value"][20]["id"].as_str().unwrap().to_owned();
    (r.admin)("POST", "out-of-band", Some(json!({"action": r.lose, "id": lost})));
    let drift = plan(w, 2);
    assert!(drift.contains("nvl-20"), "{drift}");
    apply(w);
    plan(w, 0);
    assert_domains(&outputs(w), 3);

    // Import: the same state as the one apply made.
    let created = crate::cli::state_values(w);
    w.run(&["state", "rm", "hpc_gpu_cluster.c"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_gpu_cluster.c", r.import_id]).expect_code(0);
    assert_eq!(crate::cli::state_values(w), created);
    plan(w, 0);

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_only_bought_capacity_left(&r);
}

/// After destroy: nothing the configuration made is left, and what was bought is there as it was.
fn assert_only_bought_capacity_left(r: &Rack) {
    let inv = (r.admin)("GET", "inventory", None);
    if r.bought.is_empty() {
        assert_eq!(inv["empty"], true, "{inv}");
        return;
    }
    for (service, kinds) in inv["resources"].as_object().unwrap() {
        for (kind, ids) in kinds.as_object().unwrap() {
            match r.bought.iter().find(|(s, k, _)| s == service && k == kind) {
                Some((_, _, before)) => assert_eq!(ids, before, "{service}.{kind} changed: {inv}"),
                None => assert_eq!(ids, &json!([]), "{service}.{kind} left behind: {inv}"),
            }
        }
    }
}

/// The refusals at plan time, each at its attribute with the valid values, before anything is made.
pub fn nvl72_mistakes_are_refused_at_plan_time(cli: &Cli) {
    let r = rack(cli, "azure");
    let w = &r.w;
    w.write("terraform.tfvars", "node_count = 20\n");
    let run = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1);
    let text = fold(&run.output());
    assert!(text.contains("Not a whole number of NVLink domains"), "{text}");
    assert!(text.contains("18 (1 domain), 36 (2 domains) or 54 (3 domains)"), "{text}");
    assert!(text.contains("node_count"), "{text}");
    let inv = (r.admin)("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}
