//! Google Cloud end to end on the project's emulator with the real CLIs: an A3 Mega cluster with its 8 GPU
//! VPCs and compact placement, empty re-plan, scale in place, a node deleted outside and restored,
//! Managed Lustre behind private service access (grown in place), import, refresh cost, destroy to an
//! empty inventory; and the A3 Ultra RoCE layout.

use hpc_emulators::harness::{admin, start_gcp};
use serde_json::{Value, json};

use crate::cli::{Cli, Run, Workdir, assert_nodes, state_values};

const BASE: &str = "https://www.googleapis.com/compute/v1/projects/ml-prod";

fn apply(w: &Workdir) -> Run {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"])
}

fn plan(w: &Workdir, code: i32) -> Run {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code)
}

/// The cluster's instances as the Compute API lists them.
fn instances(endpoint: &str) -> Vec<Value> {
    let url = format!("{endpoint}/compute/v1/projects/ml-prod/zones/us-central1-a/instances");
    let (host, path) = url.trim_start_matches("http://").split_once('/').unwrap();
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer test\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body: Value = serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
    let mut items = body["items"].as_array().cloned().unwrap_or_default();
    items.sort_by_key(|i| i["name"].as_str().unwrap_or_default().to_owned());
    items
}

pub fn a3_mega_cluster_lifecycle(cli: &Cli) {
    let ep = start_gcp();
    let w = Workdir::new(cli, "gcp_cluster").env("TF_VAR_endpoint", &ep);
    apply(&w).expect_code(0);
    plan(&w, 0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let mount = out["mount_command"]["value"].as_str().unwrap();
    assert!(mount.contains("mount -t lustre 172.16.0.") && mount.ends_with("@tcp:/accfs /lustre"), "{mount}");
    // Each node with the id the google provider uses and its host NIC's address.
    for (name, id, _) in assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3"]) {
        assert_eq!(id, format!("projects/ml-prod/zones/us-central1-a/instances/{name}"));
    }
    // Managed Lustre is reached through private service access on the host network.
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["resources"]["compute"]["addresses"], json!(["projects/ml-prod/global/addresses/accfs-psa"]), "{inv}");
    // Service Networking names the network by project number ("{project} is a project number"), which the
    // provider looks up through Resource Manager.
    let number = admin_project_number(&ep);
    assert_eq!(
        inv["resources"]["servicenetworking"]["connections"],
        json!([format!("projects/{number}/global/networks/accfab-vpc")]),
        "{inv}"
    );

    // Each node: the host NIC plus one gVNIC in each of the 8 GPU VPCs, the compact placement policy.
    let nodes = instances(&ep);
    assert_eq!(nodes.iter().map(|n| n["name"].as_str().unwrap()).collect::<Vec<_>>(), ["acc-0", "acc-1", "acc-2", "acc-3"]);
    for n in &nodes {
        let nics = n["networkInterfaces"].as_array().unwrap();
        assert_eq!(nics.len(), 9, "{n}");
        assert!(nics[0]["network"].as_str().unwrap().ends_with("/global/networks/accfab-vpc"), "{n}");
        for (i, nic) in nics[1..].iter().enumerate() {
            assert!(nic["network"].as_str().unwrap().ends_with(&format!("/global/networks/accfab-gpu-{i}")), "{nic}");
            assert_eq!(nic["nicType"], "GVNIC");
        }
        assert_eq!(n["resourcePolicies"][0].as_str().unwrap().rsplit('/').next(), Some("accfab-placement"));
        assert_eq!(n["scheduling"]["onHostMaintenance"], "TERMINATE");
        assert_eq!(n["labels"]["team"], "ml");
    }
    let networks = admin(&ep, "GET", "inventory", None)["resources"]["compute"]["networks"].clone();
    assert_eq!(networks.as_array().unwrap().len(), 9, "host VPC + 8 GPU VPCs: {networks}");

    // Refresh: one list per kind, the same at 4 nodes as at 6.
    admin(&ep, "DELETE", "counters", None);
    plan(&w, 0);
    let at_4 = admin(&ep, "GET", "counters", None);
    assert_eq!(at_4["counters"]["compute:instances.list"], 1, "{at_4}");

    w.write("terraform.tfvars", "node_count = 6\ncapacity_gib = 54000\n");
    let scale = plan(&w, 2).stdout;
    assert!(crate::cli::fold(&scale).contains("node_count = 4 -> 6") && scale.contains("0 to destroy"), "{scale}");
    assert!(crate::cli::fold(&scale).contains("capacity_gib = 36000 -> 54000"), "Lustre grows in place:\n{scale}");
    apply(&w).expect_code(0);
    assert_eq!(instances(&ep).len(), 6);
    admin(&ep, "DELETE", "counters", None);
    plan(&w, 0);
    assert_eq!(admin(&ep, "GET", "counters", None), at_4, "refresh calls grew with the node count");

    // A node and a GPU VPC's firewall rule deleted outside: shown, then restored.
    admin(&ep, "POST", "out-of-band", Some(json!({"action": "delete", "id": "projects/ml-prod/zones/us-central1-a/instances/acc-3"})));
    admin(&ep, "POST", "out-of-band", Some(json!({"action": "delete", "id": format!("{BASE}/global/firewalls/accfab-gpu-5-internal")})));
    admin(&ep, "POST", "out-of-band", Some(json!({"action": "delete", "id": "projects/ml-prod/global/addresses/accfs-psa"})));
    let drift = plan(&w, 2).stdout;
    assert!(drift.contains("deleted outside; the next apply recreates it"), "the reserved range: {drift}");
    assert!(crate::cli::fold(&drift).contains("node_count = 5 -> 6") && drift.contains("+ \"acc-3\""), "{drift}");
    assert!(crate::cli::fold(&drift).contains("count = 7 -> 8"), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    assert_eq!(instances(&ep).len(), 6);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let addresses = assert_nodes(&out, &["acc-0", "acc-1", "acc-2", "acc-3", "acc-4", "acc-5"]);
    let live = instances(&ep);
    for (name, _, ip) in addresses {
        let nic0 = live.iter().find(|n| n["name"] == name.as_str()).map(|n| n["networkInterfaces"][0]["networkIP"].clone());
        assert_eq!(nic0, Some(json!(ip)), "{name}");
    }

    // Import gives back the created state.
    let created = state_values(&w);
    w.run(&["state", "rm", "hpc_gpu_fabric.f", "hpc_gpu_cluster.c", "hpc_parallel_filesystem.fs"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_gpu_fabric.f", "gcp/us-central1-a/accfab"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_gpu_cluster.c", "gcp/us-central1-a/acc"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "hpc_parallel_filesystem.fs", "gcp/us-central1-a/accfs"]).expect_code(0);
    assert_eq!(state_values(&w), created);

    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin(&ep, "GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// L4 inference on Google Cloud without a fabric: the cluster's own host VPC, gVNIC only, no placement
/// policy and no GPU NIC VPCs; import and destroy.
pub fn l4_inference_without_a_fabric(cli: &Cli) {
    let ep = start_gcp();
    let w = Workdir::new(cli, "gcp_l4_inference").env("TF_VAR_endpoint", &ep);
    let check = |out: &Value| {
        assert_eq!(out["node_environment"]["value"]["NCCL_SOCKET_IFNAME"], "eth0", "{out}");
        assert_eq!(out["network"]["value"]["vpc_id"].as_str().map(|v| v.ends_with("/global/networks/serve-vpc")), Some(true), "{out}");
        for i in instances(&ep) {
            assert_eq!(i["networkInterfaces"].as_array().map(Vec::len), Some(1), "{i}");
            assert!(i["resourcePolicies"].as_array().is_none_or(Vec::is_empty), "no placement policy: {i}");
        }
        let inv = admin(&ep, "GET", "inventory", None);
        assert!(!inv.to_string().contains("serve-gpu-") && !inv.to_string().contains("serve-placement"), "{inv}");
    };
    let empty = || admin(&ep, "GET", "inventory", None)["empty"] == true;
    crate::cli::own_network_lifecycle(&w, "hpc_gpu_cluster.serve", "gcp/us-central1-a/serve", &["serve-0", "serve-1"], check, empty);

    // The same nodes in an existing network: they join its subnet, and destroy leaves the network alone.
    let vpc = "projects/ml-prod/global/networks/apps";
    let subnet = "projects/ml-prod/regions/us-central1/subnetworks/apps";
    create(&ep, "global/networks", json!({"name": "apps", "autoCreateSubnetworks": false}));
    create(&ep, "regions/us-central1/subnetworks", json!({"name": "apps", "network": vpc, "ipCidrRange": "10.20.0.0/24"}));
    let w = Workdir::new(cli, "gcp_l4_inference").env("TF_VAR_endpoint", &ep).env("TF_VAR_vpc_id", vpc).env("TF_VAR_subnet_id", subnet);
    let check = |out: &Value| {
        assert_eq!(out["network"]["value"], json!({"vpc_id": vpc, "subnet_id": subnet}));
        for i in instances(&ep) {
            let nic = &i["networkInterfaces"][0];
            assert!(nic["subnetwork"].as_str().is_some_and(|s| s.ends_with(subnet)), "{i}");
            assert!(nic["networkIP"].as_str().is_some_and(|a| a.starts_with("10.20.0.")), "an address in the subnet's range: {i}");
        }
    };
    let only_the_estate = || {
        let inv = admin(&ep, "GET", "inventory", None);
        let compute = &inv["resources"]["compute"];
        compute["instances"] == json!([]) && compute["networks"] == json!([vpc]) && compute["subnetworks"] == json!([subnet])
    };
    crate::cli::own_network_lifecycle(
        &w,
        "hpc_gpu_cluster.serve",
        "gcp/us-central1-a/serve",
        &["serve-0", "serve-1"],
        check,
        only_the_estate,
    );
}

/// Creates a piece of an existing estate through the Compute API (`what` under the project).
fn create(endpoint: &str, what: &str, body: Value) {
    use std::io::{Read, Write};
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let body = body.to_string();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "POST /compute/v1/projects/ml-prod/{what} HTTP/1.0\r\nHost: {host}\r\nAuthorization: Bearer test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200"), "POST {what}: {out}");
}

pub fn a3_ultra_roce_layout(cli: &Cli) {
    let ep = start_gcp();
    let w = Workdir::new(cli, "gcp_cluster").env("TF_VAR_endpoint", &ep);
    w.write("terraform.tfvars", "instance_type = \"a3-ultragpu-8g\"\nnode_count = 2\n");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let inv = admin(&ep, "GET", "inventory", None);
    let subnets: Vec<String> = serde_json::from_value(inv["resources"]["compute"]["subnetworks"].clone()).unwrap();
    let rdma: Vec<&String> = subnets.iter().filter(|s| s.contains("/subnetworks/accfab-rdma-")).collect();
    assert_eq!(rdma.len(), 8, "{subnets:?}");
    for n in instances(&ep) {
        let nics = n["networkInterfaces"].as_array().unwrap();
        let types: Vec<&str> = nics.iter().map(|n| n["nicType"].as_str().unwrap()).collect();
        assert_eq!(types, ["GVNIC", "GVNIC", "MRDMA", "MRDMA", "MRDMA", "MRDMA", "MRDMA", "MRDMA", "MRDMA", "MRDMA"], "{n}");
        assert!(nics[1]["network"].as_str().unwrap().ends_with("/accfab-gvnic-1"));
        for (i, nic) in nics[2..].iter().enumerate() {
            assert!(nic["network"].as_str().unwrap().ends_with("/global/networks/accfab-rdma"), "{nic}");
            assert!(nic["subnetwork"].as_str().unwrap().ends_with(&format!("/subnetworks/accfab-rdma-{i}")), "{nic}");
        }
    }
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_eq!(admin(&ep, "GET", "inventory", None)["empty"], true);
}

/// The project number Resource Manager gives for ml-prod (`GET /v3/projects/ml-prod` answers `projects/<number>`).
fn admin_project_number(ep: &str) -> String {
    let addr = ep.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(stream, "GET /v3/projects/ml-prod HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    let project: Value = serde_json::from_str(body).unwrap();
    project["name"].as_str().unwrap().trim_start_matches("projects/").to_owned()
}

// ------------------------------------------------------------------------------------------------ day 2
// The generic day-2 flow (`day2.rs`) reaches the Google Cloud emulator through these, with the vendor's own
// client (google-cloud-compute-v1, anonymous credentials, the endpoint override) where a node or an
// operator would use the Compute API, and the admin API where only the cloud itself can act.

const DAY2_PROJECT: &str = "ml-prod";
const DAY2_ZONE: &str = "us-central1-a";

/// The Compute Engine instances client on the emulator, polling operations briskly.
async fn day2_instances(endpoint: &str) -> google_cloud_compute_v1::client::Instances {
    let polling = google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder::new()
        .with_initial_delay(std::time::Duration::from_millis(50))
        .with_maximum_delay(std::time::Duration::from_millis(250))
        .build()
        .unwrap();
    google_cloud_compute_v1::client::Instances::builder()
        .with_endpoint(endpoint.trim_end_matches('/'))
        .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
        .with_polling_backoff_policy(polling)
        .build()
        .await
        .expect("a Compute Engine client on the emulator")
}

fn day2_block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// Marks the node unhealthy the way Compute Engine would: the admin API's out-of-band `impair` stops it
/// (`status` TERMINATED, as after a host error on a GPU VM, which is not live migrated). `node_id` is the
/// node's id in the `nodes` output (`projects/<p>/zones/<z>/instances/<name>`). Returns the words the
/// plan's reason contains.
pub fn day2_impair(endpoint: &str, node_id: &str) -> String {
    admin(endpoint, "POST", "out-of-band", Some(json!({"action": "impair", "id": node_id, "status": "TERMINATED"})));
    "status TERMINATED".into()
}

/// Publishes a self-check verdict as the node's boot-time self-check does with its service account:
/// instances.get for its labels and their fingerprint, then instances.setLabels with `hpc-selfcheck` added
/// (the fingerprint makes a concurrent change fail with 412, which the node answers by reading again).
pub fn day2_publish_selfcheck(endpoint: &str, node_name: &str, _node_id: &str, verdict: &str) {
    day2_block_on(async {
        let instances = day2_instances(endpoint).await;
        for attempt in 1..=5 {
            let node = instances.get().set_project(DAY2_PROJECT).set_zone(DAY2_ZONE).set_instance(node_name).send().await.unwrap();
            let mut labels = node.labels.clone();
            labels.insert(hpc_provider::clouds::shared::SELFCHECK_LABEL.into(), verdict.into());
            let mut request = google_cloud_compute_v1::model::InstancesSetLabelsRequest::new().set_labels(labels);
            if let Some(f) = node.label_fingerprint.clone() {
                request = request.set_label_fingerprint(f);
            }
            let sent =
                instances.set_labels().set_project(DAY2_PROJECT).set_zone(DAY2_ZONE).set_instance(node_name).set_body(request).send().await;
            match sent {
                Ok(_) => return,
                Err(e) if e.http_status_code() == Some(412) && attempt < 5 => continue,
                Err(e) => panic!("publishing the self-check of {node_name}: {e:?}"),
            }
        }
    });
}

/// The live nodes of cluster `cluster` as Compute Engine lists them (one filtered instances.list):
/// (name, the instance's Compute Engine id, the `hpc-revision` label). The id is the numeric one Compute
/// Engine assigns, which a node made again under its name does not keep; the `nodes` output's id is the
/// instance's path, which it does.
pub fn day2_live_nodes(endpoint: &str, cluster: &str) -> Vec<(String, String, Option<String>)> {
    day2_block_on(async {
        let instances = day2_instances(endpoint).await;
        let filter = format!("labels.hpc_cluster = \"{cluster}\"");
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = instances
                .list()
                .set_project(DAY2_PROJECT)
                .set_zone(DAY2_ZONE)
                .set_filter(&filter)
                .set_page_token(&token)
                .send()
                .await
                .expect("instances.list");
            for i in page.items {
                let name = i.name.clone().unwrap_or_default();
                let revision = i.labels.get(hpc_provider::clouds::shared::REVISION_LABEL).cloned();
                out.push((name, i.id.map(|id| id.to_string()).unwrap_or_default(), revision));
            }
            match page.next_page_token {
                Some(next) if !next.is_empty() => token = next,
                _ => break,
            }
        }
        out.sort();
        out
    })
}

/// The capacity case on the Google Cloud emulator (`acceptance/cases/capacity_gcp`): 4 on-demand
/// g2-standard-4 nodes in us-central1-a, one L4 each, drawing on the region's `NVIDIA_L4_GPUS` quota.
pub fn capacity_setup(cli: &crate::cli::Cli) -> crate::capacity::Capacity {
    let ep = start_gcp();
    let (a, l) = (ep.clone(), ep.clone());
    crate::capacity::Capacity {
        w: Workdir::new(cli, "capacity_gcp").env("TF_VAR_endpoint", &ep),
        admin: Box::new(move |m, r, b| admin(&a, m, r, b)),
        quota_id: "NVIDIA_L4_GPUS".into(),
        quota_scope: "us-central1".into(),
        quota_name: hpc_provider::clouds::gcp::quota::display_name("NVIDIA_L4_GPUS"),
        per_node: 1,
        zone: DAY2_ZONE.into(),
        instance_type: "g2-standard-4".into(),
        live: Box::new(move || day2_live_nodes(&l, "cap").into_iter().map(|(name, _, _)| name).collect()),
        _keep: Box::new(()),
    }
}

/// Writes a Slurm configuration into an instance's metadata through Compute Engine's API (setMetadata), as
/// whoever may set the instance's metadata could. `instance` is its path (`projects/p/zones/z/instances/n`).
pub fn forge_slurm_config(endpoint: &str, instance: &str, config: &hpc_provider::clouds::slurm::SlurmConfig) {
    let parts: Vec<&str> = instance.trim_start_matches('/').split('/').collect();
    let [_, project, _, zone, _, name] = parts[..] else { panic!("not an instance path: {instance}") };
    day2_block_on(async {
        let instances = day2_instances(endpoint).await;
        let got = instances.get().set_project(project).set_zone(zone).set_instance(name).send().await.unwrap();
        // The items and the fingerprint only: `kind` is output-only, and the API refuses it.
        let current = got.metadata.clone().unwrap_or_default();
        let key = hpc_provider::clouds::slurm::channel::GCP_KEY;
        let mut items: Vec<_> = current.items.into_iter().filter(|i| i.key.as_deref() != Some(key)).collect();
        items.push(google_cloud_compute_v1::model::metadata::Items::new().set_key(key).set_value(config.payload.clone()));
        let mut metadata = google_cloud_compute_v1::model::Metadata::new().set_items(items);
        metadata.fingerprint = current.fingerprint;
        instances.set_metadata().set_project(project).set_zone(zone).set_instance(name).set_body(metadata).send().await.unwrap();
    });
}
