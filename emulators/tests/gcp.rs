//! The Google Cloud Compute emulator through the real google-cloud-compute-v1 clients (anonymous
//! credentials, endpoint override, operation pollers): networks, resource policies, instances created with
//! bulkInsert and found again with one filtered list, not-found, faults, out-of-band changes, counters.

use std::time::Duration;

use google_cloud_compute_v1::client::{Instances, Networks, ResourcePolicies};
use google_cloud_compute_v1::model;
use google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder;
use google_cloud_lro::Poller;
use hpc_emulators::gcp;
use serde_json::json;

const P: &str = "ml-prod";
const ZONE: &str = "us-central1-a";
const REGION: &str = "us-central1";

fn backoff() -> google_cloud_gax::exponential_backoff::ExponentialBackoff {
    ExponentialBackoffBuilder::new()
        .with_initial_delay(Duration::from_millis(50))
        .with_maximum_delay(Duration::from_millis(200))
        .build()
        .unwrap()
}

macro_rules! client {
    ($ty:ty, $ep:expr) => {
        <$ty>::builder()
            .with_endpoint($ep)
            .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
            .with_polling_backoff_policy(backoff())
            .build()
            .await
            .unwrap()
    };
}

fn admin(emulator: &gcp::Gcp, method: &str, route: &str, body: serde_json::Value) -> serde_json::Value {
    let (status, out) = emulator.admin.handle(method, route, body.to_string().as_bytes(), emulator);
    assert_eq!(status, 200, "{out}");
    out
}

fn a3_mega(pattern: &str, count: i64) -> model::BulkInsertInstanceResource {
    let properties: model::InstanceProperties = serde_json::from_value(json!({
        "machineType": "a3-megagpu-8g",
        "labels": {"hpc_cluster": "train", "hpc_fabric": "train"},
        "scheduling": {"onHostMaintenance": "TERMINATE"},
        "resourcePolicies": [format!("projects/{P}/regions/{REGION}/resourcePolicies/train-placement")],
        "networkInterfaces": (0..9).map(|i| json!({"network": format!("projects/{P}/global/networks/train-gpu-{i}"), "nicType": "GVNIC"})).collect::<Vec<_>>(),
    }))
    .unwrap();
    serde_json::from_value(json!({"count": count, "namePattern": pattern, "instanceProperties": serde_json::to_value(properties).unwrap()}))
        .unwrap()
}

#[tokio::test]
async fn networks_policies_and_bulk_created_instances_round_trip() {
    let emu = gcp::serve("127.0.0.1:0").await.unwrap();
    let networks = client!(Networks, &emu.endpoint);
    let net: model::Network = serde_json::from_value(json!({"name": "train-gpu-0", "mtu": 8244, "autoCreateSubnetworks": false})).unwrap();
    networks.insert().set_project(P).set_body(net.clone()).poller().until_done().await.unwrap();
    let got = networks.get().set_project(P).set_network("train-gpu-0").send().await.unwrap();
    assert_eq!(got.mtu, Some(8244));
    let dup = networks.insert().set_project(P).set_body(net).send().await.unwrap_err();
    assert_eq!(dup.http_status_code(), Some(409));

    let policies = client!(ResourcePolicies, &emu.endpoint);
    let policy: model::ResourcePolicy =
        serde_json::from_value(json!({"name": "train-placement", "groupPlacementPolicy": {"collocation": "COLLOCATED"}})).unwrap();
    policies.insert().set_project(P).set_region(REGION).set_body(policy).poller().until_done().await.unwrap();

    let instances = client!(Instances, &emu.endpoint);
    let op = instances.bulk_insert().set_project(P).set_zone(ZONE).set_body(a3_mega("train-#", 4)).poller().until_done().await.unwrap();
    assert_eq!(op.status, Some(model::operation::Status::Done));

    // Refresh finds every node with one filtered list call.
    let listed = instances.list().set_project(P).set_zone(ZONE).set_filter(r#"labels.hpc_cluster = "train""#).send().await.unwrap();
    let names: Vec<String> = listed.items.iter().filter_map(|i| i.name.clone()).collect();
    assert_eq!(names, ["train-1", "train-2", "train-3", "train-4"]);
    let node = &listed.items[0];
    assert_eq!(node.network_interfaces.len(), 9);
    assert!(node.machine_type.as_deref().unwrap().ends_with("/zones/us-central1-a/machineTypes/a3-megagpu-8g"));
    assert!(node.resource_policies[0].contains("train-placement"));

    // PROVISIONING -> STAGING -> RUNNING.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let one = instances.get().set_project(P).set_zone(ZONE).set_instance("train-2").send().await.unwrap();
    assert_eq!(one.status, Some(model::instance::Status::Running));

    instances.delete().set_project(P).set_zone(ZONE).set_instance("train-2").poller().until_done().await.unwrap();
    let missing = instances.get().set_project(P).set_zone(ZONE).set_instance("train-2").send().await.unwrap_err();
    assert_eq!(missing.http_status_code(), Some(404));
    let counters = admin(&emu.emulator, "GET", "counters", json!({}));
    assert_eq!(counters["counters"]["compute:instances.list"], 1);
    assert!(counters["counters"]["compute:operations.get"].as_u64().unwrap() >= 1, "pollers polled: {counters}");
}

#[tokio::test]
async fn capacity_throttling_and_out_of_band_changes() {
    let emu = gcp::serve("127.0.0.1:0").await.unwrap();
    let instances = client!(Instances, &emu.endpoint);

    // No capacity: the operation finishes DONE carrying Compute Engine's error (the crate's discovery-LRO
    // poller returns such an operation as Ok: callers must look at `error`), and nothing is created.
    admin(
        &emu.emulator,
        "POST",
        "faults",
        json!({"service": "compute", "operation": "instances.bulkInsert", "kind": "capacity", "times": 1}),
    );
    let op = instances.bulk_insert().set_project(P).set_zone(ZONE).set_body(a3_mega("cap-#", 2)).poller().until_done().await.unwrap();
    let errors = op.error.expect("a failed operation").errors;
    assert_eq!(errors[0].code.as_deref(), Some("ZONE_RESOURCE_POOL_EXHAUSTED"));
    assert!(errors[0].message.as_deref().unwrap().contains("us-central1-a"));
    assert_eq!(admin(&emu.emulator, "GET", "inventory", json!({}))["empty"], true);

    // Throttling: 403 rateLimitExceeded, then normal service.
    admin(&emu.emulator, "POST", "faults", json!({"service": "compute", "operation": "instances.list", "kind": "throttle", "times": 1}));
    let throttled = instances.list().set_project(P).set_zone(ZONE).send().await.unwrap_err();
    assert_eq!(throttled.http_status_code(), Some(403));
    assert!(format!("{throttled:?}").contains("rateLimitExceeded"), "{throttled:?}");
    instances.list().set_project(P).set_zone(ZONE).send().await.unwrap();

    // 5xx and latency.
    admin(&emu.emulator, "POST", "faults", json!({"service": "compute", "operation": "instances.get", "kind": "server_error", "times": 1}));
    // The client retries 503 on its own by default; without retries the fault itself shows.
    let no_retry = Instances::builder()
        .with_endpoint(&emu.endpoint)
        .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
        .with_retry_policy(google_cloud_gax::retry_policy::NeverRetry)
        .build()
        .await
        .unwrap();
    let unavailable = no_retry.get().set_project(P).set_zone(ZONE).set_instance("nope").send().await.unwrap_err();
    assert_eq!(unavailable.http_status_code(), Some(503));
    admin(
        &emu.emulator,
        "POST",
        "faults",
        json!({"service": "compute", "operation": "networks.list", "kind": "latency", "latency_ms": 300, "times": 1}),
    );
    let started = std::time::Instant::now();
    client!(Networks, &emu.endpoint).list().set_project(P).send().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Out-of-band delete: gone from the API, and the inventory is empty again.
    instances.bulk_insert().set_project(P).set_zone(ZONE).set_body(a3_mega("oob-#", 1)).poller().until_done().await.unwrap();
    admin(&emu.emulator, "POST", "out-of-band", json!({"action": "delete", "id": format!("projects/{P}/zones/{ZONE}/instances/oob-1")}));
    let gone = instances.get().set_project(P).set_zone(ZONE).set_instance("oob-1").send().await.unwrap_err();
    assert_eq!(gone.http_status_code(), Some(404));
    assert_eq!(admin(&emu.emulator, "GET", "inventory", json!({}))["empty"], true);
}

#[tokio::test]
async fn managed_lustre_create_grow_delete_through_long_running_operations() {
    use google_cloud_lustre_v1::client::Lustre;
    use google_cloud_lustre_v1::model::{Instance, instance::State};
    let emu = gcp::serve("127.0.0.1:0").await.unwrap();
    let lustre = client!(Lustre, &emu.endpoint);
    let parent = format!("projects/{P}/locations/{ZONE}");
    let spec = Instance::new()
        .set_filesystem("scratch")
        .set_capacity_gib(36_000)
        .set_per_unit_storage_throughput(500)
        .set_network(format!("projects/{P}/global/networks/train-vpc"));
    let created = lustre
        .create_instance()
        .set_parent(&parent)
        .set_instance_id("scratch")
        .set_instance(spec.clone())
        .poller()
        .until_done()
        .await
        .unwrap();
    assert_eq!(created.state, State::Active);
    assert_eq!(created.capacity_gib, 36_000);
    assert!(created.mount_point.ends_with("@tcp:/scratch"), "{}", created.mount_point);

    // The service's own size rule: 500 MB/s/TiB starts at 18,000 GiB in steps of 18,000.
    let odd = lustre
        .create_instance()
        .set_parent(&parent)
        .set_instance_id("odd")
        .set_instance(spec.clone().set_capacity_gib(20_000))
        .send()
        .await
        .unwrap_err();
    assert_eq!(odd.http_status_code(), Some(400));

    let name = format!("{parent}/instances/scratch");
    let grown = lustre
        .update_instance()
        .set_instance(created.clone().set_capacity_gib(54_000))
        .set_update_mask(google_cloud_wkt::FieldMask::default().set_paths(["capacity_gib"]))
        .poller()
        .until_done()
        .await
        .unwrap();
    assert_eq!(grown.capacity_gib, 54_000);
    let listed = lustre.list_instances().set_parent(&parent).send().await.unwrap();
    assert_eq!(listed.instances.len(), 1);

    lustre.delete_instance().set_name(&name).poller().until_done().await.unwrap();
    let gone = lustre.get_instance().set_name(&name).send().await.unwrap_err();
    assert_eq!(gone.http_status_code(), Some(404));
    assert_eq!(admin(&emu.emulator, "GET", "inventory", json!({}))["empty"], true);

    admin(&emu.emulator, "POST", "faults", json!({"service": "lustre", "operation": "instances.list", "kind": "throttle", "times": 1}));
    let throttled = lustre.list_instances().set_parent(&parent).send().await.unwrap_err();
    assert_eq!(throttled.http_status_code(), Some(429));
}
