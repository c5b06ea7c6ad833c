//! The OCI resources through the provider's own Resource implementations against the OCI emulator (every
//! request signed with the test API key): 429 without Retry-After retried with backoff, "Out of host
//! capacity" reported with the shape and availability domain while the nodes launched are kept and the
//! next apply finishes, a cluster network built, renamed, resized and destroyed, credentials from an OCI
//! config file profile, a wrong key reported as an authentication failure, a cluster network's failed work
//! request reported as missing capacity, and Lustre grown in place.

use std::sync::Arc;

use hpc_emulators::harness::{OciKey, admin, start_oci};
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;

const COMPARTMENT: &str = "ocid1.compartment.oc1..lib";
const AD: &str = "Uocm:US-ASHBURN-AD-2";

fn value(resource: &dyn Resource, json: Json) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).unwrap()
}

fn context(oci_block: Json) -> Context {
    let config = decode_json(json!({"oci": oci_block}).to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&config, "test"))))
}

fn key_block(ep: &str, key: &OciKey) -> Json {
    json!({"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint, "private_key": key.private_key_pem,
           "region": "us-ashburn-1", "endpoint": ep})
}

async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    (out.new_state, diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect())
}

async fn destroy(ctx: &Context, resource: &dyn Resource, state: &Value) {
    let mut d = Diagnostics::new();
    let out = resource.apply(ctx, ApplyRequest { prior: state, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut d).await;
    assert!(out.new_state.is_null(), "{:?}", d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>());
}

fn fabric_config(name: &str, placement: &str) -> Value {
    value(
        &GpuFabric,
        json!({"name": name, "cloud": "oci", "region": "us-ashburn-1", "zone": AD, "compartment_id": COMPARTMENT,
               "instance_type": "BM.GPU.H100.8", "placement": placement}),
    )
}

fn fabric_ref(name: &str, placement: &str) -> Json {
    json!({"id": format!("oci/us-ashburn-1/{COMPARTMENT}/{name}"), "name": name, "cloud": "oci", "region": "us-ashburn-1", "zone": AD,
           "instance_type": "BM.GPU.H100.8", "placement": placement})
}

fn node_names(state: &Value) -> Vec<String> {
    state.get("node_names").as_list().unwrap_or_default().iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_capacity_cluster_networks_and_credentials() {
    let (ep, key) = start_oci();
    let admin = |method: &str, route: &str, body: Option<Json>| admin(&ep, method, route, body);
    let ctx = context(key_block(&ep, &key));

    // Two 429s (no Retry-After, as OCI sends none) on the VCN create: retried with backoff, created once.
    admin("POST", "faults", Some(json!({"service": "core", "operation": "CreateVcn", "kind": "throttle", "times": 2})));
    // And the new VCN reads as not found twice (eventual consistency right after a create): waited out.
    admin("POST", "faults", Some(json!({"service": "core", "operation": "GetVcn", "kind": "not_found", "times": 2})));
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config("lib", "cluster")).await;
    assert!(diags.is_empty(), "{diags:?}");
    let faults = admin("GET", "faults", None);
    assert_eq!((&faults["faults"][0]["fired"], &faults["faults"][1]["fired"]), (&json!(2), &json!(2)), "{faults}");
    assert_eq!(admin("GET", "inventory", None)["resources"]["core"]["vcn"].as_array().map(Vec::len), Some(1));

    // Out of host capacity on the second launch: reported with shape and AD; the other nodes are kept.
    admin("POST", "faults", Some(json!({"service": "core", "operation": "LaunchInstance", "kind": "capacity", "nth": 2, "times": 1})));
    let cluster_config = value(&GpuCluster, json!({"name": "lib", "fabric": fabric_ref("lib", "cluster"), "node_count": 3}));
    let (partial, diags) = apply(&ctx, &GpuCluster, &Value::Null, &cluster_config).await;
    let failure = diags.iter().find(|d| d.starts_with("Creating the cluster failed")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("Out of host capacity") && failure.contains("BM.GPU.H100.8") && failure.contains(AD), "{failure}");
    assert!(failure.contains("2 of 3 nodes exist"), "{failure}");
    assert_eq!(node_names(&partial).len(), 2, "the state keeps the nodes that were launched");
    // The next apply launches only the missing node.
    let (cluster, diags) = apply(&ctx, &GpuCluster, &partial, &cluster_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&cluster), ["lib-0", "lib-1", "lib-2"]);
    assert_eq!(admin("GET", "inventory", None)["resources"]["core"]["instance"].as_array().map(Vec::len), Some(3));

    // A cluster network: OCI names the pool's instances; the provider renames them, then resizes in place.
    let (cn_fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config("cn", "cluster-network")).await;
    assert!(diags.is_empty(), "{diags:?}");
    let cn_config = |n: u32| value(&GpuCluster, json!({"name": "pool", "fabric": fabric_ref("cn", "cluster-network"), "node_count": n}));
    let (pool, diags) = apply(&ctx, &GpuCluster, &Value::Null, &cn_config(2)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let mut d = Diagnostics::new();
    let ReadOutcome::Found { state: read, .. } = GpuCluster.read(&ctx, &pool, &[], &mut d).await else { panic!("cluster network gone") };
    assert_eq!(node_names(&read), ["pool-0", "pool-1"]);
    let (pool, diags) = apply(&ctx, &GpuCluster, &read, &cn_config(4)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let ReadOutcome::Found { state: read, .. } = GpuCluster.read(&ctx, &pool, &[], &mut d).await else { panic!("cluster network gone") };
    assert_eq!(node_names(&read), ["pool-0", "pool-1", "pool-2", "pool-3"]);
    let (pool, diags) = apply(&ctx, &GpuCluster, &read, &cn_config(3)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let ReadOutcome::Found { state: read, .. } = GpuCluster.read(&ctx, &pool, &[], &mut d).await else { panic!("cluster network gone") };
    assert_eq!(node_names(&read).len(), 3);
    assert_eq!(read.get("node_count"), &Value::int(3));

    // Credentials from a config file profile work the same; a wrong key is an authentication failure.
    let dir = std::env::temp_dir().join(format!("hpc-oci-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config");
    std::fs::write(
        &file,
        format!(
            "[DEFAULT]\nuser=ocid1.user.oc1..nobody\n\n[ML]\ntenancy={}\nuser={}\nfingerprint={}\nkey_file={}\nregion=us-ashburn-1\n",
            key.tenancy,
            key.user,
            key.fingerprint,
            key.private_key_path.display()
        ),
    )
    .unwrap();
    // SAFETY: set before the profile-based client is built, read only by this test's clients.
    unsafe { std::env::set_var("OCI_CONFIG_FILE", &file) };
    let from_file = context(json!({"config_file_profile": "ML", "endpoint": ep}));
    let mut d = Diagnostics::new();
    assert!(matches!(GpuFabric.read(&from_file, &fabric, &[], &mut d).await, ReadOutcome::Found { .. }));
    assert!(d.is_empty(), "{:?}", d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>());
    let missing = context(json!({"config_file_profile": "NOPE", "endpoint": ep}));
    let mut d = Diagnostics::new();
    GpuFabric.read(&missing, &fabric, &[], &mut d).await;
    assert!(
        d.iter().any(|d| d.summary == "OCI is not configured" && d.detail.contains("NOPE")),
        "{:?}",
        d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>()
    );
    let (_, stranger) = start_oci();
    let wrong = context(json!({"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint,
                               "private_key": stranger.private_key_pem, "endpoint": ep}));
    let mut d = Diagnostics::new();
    GpuFabric.read(&wrong, &fabric, &[], &mut d).await;
    let auth = d.iter().find(|d| d.summary == "OCI authentication failed").unwrap_or_else(|| panic!("no auth diagnostic"));
    assert!(auth.detail.contains("401 NotAuthenticated") && auth.detail.contains("fingerprint"), "{}", auth.detail);

    // A cluster network OCI cannot place: its work request fails; the diagnostic names shape and AD, nothing
    // is left running, and the next apply builds it.
    admin("POST", "faults", Some(json!({"service": "core", "operation": "CreateClusterNetwork", "kind": "capacity", "times": 1})));
    let short = value(&GpuCluster, json!({"name": "short", "fabric": fabric_ref("cn", "cluster-network"), "node_count": 2}));
    let (failed, diags) = apply(&ctx, &GpuCluster, &Value::Null, &short).await;
    let failure = diags.iter().find(|d| d.starts_with("Creating the cluster failed")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("Out of host capacity") && failure.contains("BM.GPU.H100.8") && failure.contains(AD), "{failure}");
    assert_eq!(failed.get("node_count"), &Value::int(0), "no node of the failed cluster network is claimed");
    let (short_cluster, diags) = apply(&ctx, &GpuCluster, &failed, &short).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&short_cluster), ["short-0", "short-1"]);

    // Lustre grows in place (31,200 -> 41,600 GB, the next step) and a refresh reads the new size.
    let fs_config = |gb: u64| {
        value(
            &ParallelFilesystem,
            json!({"name": "scratch", "fabric": fabric_ref("lib", "cluster"), "capacity_gib": gb, "throughput_per_tib": 500}),
        )
    };
    let (fs, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config(31_200)).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert!(fs.get("mount_command").as_str().is_some_and(|m| m.contains("@tcp:/")), "{:?}", fs.get("mount_command"));
    let (fs, diags) = apply(&ctx, &ParallelFilesystem, &fs, &fs_config(41_600)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let ReadOutcome::Found { state: fs_read, .. } = ParallelFilesystem.read(&ctx, &fs, &[], &mut d).await else {
        panic!("filesystem gone")
    };
    assert_eq!((fs_read.get("capacity_gib"), fs_read.get("throughput_mbps")), (&Value::int(41_600), &Value::int(20_800)));
    assert_eq!(admin("GET", "inventory", None)["resources"]["lustre"]["lustrefilesystem"].as_array().map(Vec::len), Some(1));

    // Teardown leaves nothing behind.
    destroy(&ctx, &ParallelFilesystem, &fs).await;
    for (r, s) in [
        (&GpuCluster as &dyn Resource, &pool),
        (&GpuCluster, &short_cluster),
        (&GpuCluster, &cluster),
        (&GpuFabric, &cn_fabric),
        (&GpuFabric, &fabric),
    ] {
        destroy(&ctx, r, s).await;
    }
    let inv = admin("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

/// Every resource of a kind in the emulator's snapshot.
fn snapshot_of(ep: &str, kind: &str) -> Vec<Json> {
    let snap = admin(ep, "GET", "snapshot", None);
    snap["resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(id, _)| id.starts_with(&format!("ocid1.{kind}.")))
        .map(|(_, v)| v.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lustre_links_name_namespace_and_bucket_and_import_their_data() {
    let (ep, key) = start_oci();
    let admin = |method: &str, route: &str, body: Option<Json>| admin(&ep, method, route, body);
    let ctx = context(key_block(&ep, &key));
    // The security group is used only once it is AVAILABLE (the emulator refuses rules before).
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config("data", "none")).await;
    assert!(diags.is_empty(), "{diags:?}");
    let fs_config = value(
        &ParallelFilesystem,
        json!({"name": "datasets", "fabric": fabric_ref("data", "none"), "capacity_gib": 31_200, "throughput_per_tib": 250,
               "data_repository": "oci://imagenet@tenancyns/train/shards", "timeouts": {"create": "60s"}}),
    );
    let (fs, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    // OCI's form: namespace:/bucket/prefix; and the data is imported (one sync job, polled to SUCCEEDED).
    let links = snapshot_of(&ep, "objectstoragelink");
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0]["objectStoragePrefix"], "tenancyns:/imagenet/train/shards");
    assert!(links[0]["lastJobId"].as_str().is_some(), "the import ran: {}", links[0]);
    let counters = admin("GET", "counters", None)["counters"].clone();
    assert_eq!(counters["lustre:StartImportFromObject"], 1, "{counters}");
    assert!(counters["lustre:GetSyncJob"].as_u64().is_some_and(|n| n >= 1), "{counters}");
    // An import reads the link back in the provider's form.
    let mut d = Diagnostics::new();
    let imported = ParallelFilesystem.import(&ctx, &format!("oci/us-ashburn-1/{COMPARTMENT}/datasets"), &mut d).await;
    assert!(d.is_empty(), "{:?}", d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>());
    assert_eq!(imported.unwrap().get("data_repository").as_str(), Some("oci://imagenet@tenancyns/train/shards"));
    destroy(&ctx, &ParallelFilesystem, &fs).await;

    // An import that fails is reported (the emulator fails the sync job on a capacity fault).
    admin("POST", "faults", Some(json!({"service": "lustre", "operation": "StartImportFromObject", "kind": "capacity", "times": 1})));
    let (_, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config).await;
    let failure = diags.iter().find(|d| d.contains("FAILED")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("import") && failure.contains("tenancyns:/imagenet/train/shards"), "{failure}");
    let mut d = Diagnostics::new();
    let leftover = ParallelFilesystem.import(&ctx, &format!("oci/us-ashburn-1/{COMPARTMENT}/datasets"), &mut d).await.unwrap();
    destroy(&ctx, &ParallelFilesystem, &leftover).await;
    destroy(&ctx, &GpuFabric, &fabric).await;
    let inv = admin("GET", "inventory", None);
    assert_eq!(inv["empty"], true, "{inv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_network_nodes_in_the_services_casing_are_running() {
    let (ep, key) = start_oci();
    let ctx = context(key_block(&ep, &key));
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config("cased", "cluster-network")).await;
    assert!(diags.is_empty(), "{diags:?}");
    // ListClusterNetworkInstances says "Running", not "RUNNING": the apply still sees its nodes run.
    let config = |n: u32| {
        value(
            &GpuCluster,
            json!({"name": "cased", "fabric": fabric_ref("cased", "cluster-network"), "node_count": n, "timeouts": {"create": "30s", "update": "30s"}}),
        )
    };
    let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config(3)).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&cluster), ["cased-0", "cased-1", "cased-2"]);
    // Terminated pool instances ("Terminated") are not counted as nodes.
    let (cluster, diags) = apply(&ctx, &GpuCluster, &cluster, &config(1)).await;
    assert!(diags.is_empty(), "{diags:?}");
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let mut d = Diagnostics::new();
    let ReadOutcome::Found { state: read, .. } = GpuCluster.read(&ctx, &cluster, &[], &mut d).await else { panic!("cluster network gone") };
    assert_eq!(node_names(&read), ["cased-0"]);
    destroy(&ctx, &GpuCluster, &read).await;
    destroy(&ctx, &GpuFabric, &fabric).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_keep_a_user_tag_called_name() {
    // `Name` is only AWS's console tag; on OCI it is the user's like any other and survives an import.
    let (ep, key) = start_oci();
    let ctx = context(key_block(&ep, &key));
    let tags = json!({"Name": "x", "team": "ml"});
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "named", "cloud": "oci", "region": "us-ashburn-1", "zone": AD, "compartment_id": COMPARTMENT,
               "instance_type": "BM.GPU.H100.8", "placement": "none", "tags": tags}),
    );
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let cluster_config =
        value(&GpuCluster, json!({"name": "named-nodes", "fabric": fabric_ref("named", "none"), "node_count": 1, "tags": tags}));
    let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &cluster_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    for (resource, name) in [(&GpuFabric as &dyn Resource, "named"), (&GpuCluster, "named-nodes")] {
        let mut d = Diagnostics::new();
        let imported = resource.import(&ctx, &format!("oci/us-ashburn-1/{COMPARTMENT}/{name}"), &mut d).await;
        assert!(d.is_empty(), "{}: {:?}", resource.type_name(), d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>());
        let imported = imported.unwrap_or_else(|| panic!("{} not imported", resource.type_name()));
        assert_eq!(imported.get("tags"), &value(&GpuFabric, json!({"tags": tags})).get("tags").clone(), "{}", resource.type_name());
    }
    destroy(&ctx, &GpuCluster, &cluster).await;
    destroy(&ctx, &GpuFabric, &fabric).await;
}
