//! The OCI resources through the provider's own Resource implementations against the OCI emulator (every
//! request signed with the test API key): 429 without Retry-After retried with backoff, "Out of host
//! capacity" reported with the shape and availability domain while the nodes launched are kept and the
//! next apply finishes, a cluster network built, renamed, resized and destroyed, credentials from an OCI
//! config file profile, a wrong key reported as an authentication failure, a cluster network's failed work
//! request reported as missing capacity, Lustre grown in place and linked to Object Storage.
//!
//! Each test starts its own emulator (faults, counters and the inventory are an emulator's), except that
//! the OCI config file's profile names one API key, so the test reading through it uses [`PROFILED`].

mod common;

use std::sync::LazyLock;

use common::{apply, destroy, diagnostic, import, node_names, provider_context, read, read_found, value};
use hpc_emulators::harness::{OciKey, admin, start_oci};
use hpc_provider::framework::{Context, ReadOutcome, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
use serde_json::{Value as Json, json};

const COMPARTMENT: &str = "ocid1.compartment.oc1..lib";
const AD: &str = "Uocm:US-ASHBURN-AD-2";

/// An OCI emulator and a provider configured with its API key.
struct Oci {
    ep: String,
    key: OciKey,
    ctx: Context,
}

impl Oci {
    fn start() -> Self {
        let (ep, key) = start_oci();
        let ctx = provider_context(json!({"oci": key_block(&ep, &key)}));
        Oci { ep, key, ctx }
    }

    fn admin(&self, method: &str, route: &str, body: Option<Json>) -> Json {
        admin(&self.ep, method, route, body)
    }

    fn inventory(&self, service: &str, kind: &str) -> Option<usize> {
        self.admin("GET", "inventory", None)["resources"][service][kind].as_array().map(Vec::len)
    }

    fn assert_empty(&self) {
        let inv = self.admin("GET", "inventory", None);
        assert_eq!(inv["empty"], true, "{inv}");
    }

    /// Every resource of a kind in the emulator's snapshot.
    fn snapshot_of(&self, kind: &str) -> Vec<Json> {
        let snap = self.admin("GET", "snapshot", None);
        snap["resources"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(id, _)| id.starts_with(&format!("ocid1.{kind}.")))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// The emulator whose API key the `ML` profile of the OCI config file names; `OCI_CONFIG_FILE` is set to
/// that file once, here.
static PROFILED: LazyLock<Oci> = LazyLock::new(|| {
    let oci = Oci::start();
    let dir = std::env::temp_dir().join(format!("hpc-oci-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config");
    std::fs::write(
        &file,
        format!(
            "[DEFAULT]\nuser=ocid1.user.oc1..nobody\n\n[ML]\ntenancy={}\nuser={}\nfingerprint={}\nkey_file={}\nregion=us-ashburn-1\n",
            oci.key.tenancy,
            oci.key.user,
            oci.key.fingerprint,
            oci.key.private_key_path.display()
        ),
    )
    .unwrap();
    // SAFETY: set once, before any profile-based client is built; nothing else in this binary writes the
    // environment or reads this variable.
    unsafe { std::env::set_var("OCI_CONFIG_FILE", &file) };
    oci
});

fn key_block(ep: &str, key: &OciKey) -> Json {
    json!({"tenancy_ocid": key.tenancy, "user_ocid": key.user, "fingerprint": key.fingerprint, "private_key": key.private_key_pem,
           "region": "us-ashburn-1", "endpoint": ep})
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

/// A fabric, created without a diagnostic.
async fn fabric(ctx: &Context, name: &str, placement: &str) -> Value {
    let (fabric, diags) = apply(ctx, &GpuFabric, &Value::Null, &fabric_config(name, placement)).await;
    assert!(diags.is_empty(), "{diags:?}");
    fabric
}

fn cluster_config(name: &str, fabric: &str, placement: &str, nodes: u32) -> Value {
    value(&GpuCluster, json!({"name": name, "fabric": fabric_ref(fabric, placement), "node_count": nodes}))
}

/// A cluster, created without a diagnostic.
async fn cluster(ctx: &Context, config: &Value) -> Value {
    let (cluster, diags) = apply(ctx, &GpuCluster, &Value::Null, config).await;
    assert!(diags.is_empty(), "{diags:?}");
    cluster
}

fn assert_out_of_host_capacity(failure: &str) {
    assert!(failure.contains("Out of host capacity") && failure.contains("BM.GPU.H100.8") && failure.contains(AD), "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_vcn_create_is_retried_with_backoff_and_made_once() {
    let oci = Oci::start();
    // Two 429s (no Retry-After, as OCI sends none) on the VCN create: retried with backoff, created once.
    oci.admin("POST", "faults", Some(json!({"service": "core", "operation": "CreateVcn", "kind": "throttle", "times": 2})));
    fabric(&oci.ctx, "lib", "cluster").await;
    let faults = oci.admin("GET", "faults", None);
    assert_eq!(faults["faults"][0]["fired"], json!(2), "{faults}");
    assert_eq!(oci.inventory("core", "vcn"), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vcn_read_as_not_found_right_after_its_create_is_waited_out() {
    let oci = Oci::start();
    // The new VCN reads as not found twice (eventual consistency right after a create): waited out.
    oci.admin("POST", "faults", Some(json!({"service": "core", "operation": "GetVcn", "kind": "not_found", "times": 2})));
    fabric(&oci.ctx, "lib", "cluster").await;
    let faults = oci.admin("GET", "faults", None);
    assert_eq!(faults["faults"][0]["fired"], json!(2), "{faults}");
}

/// A fabric and a 3-node cluster whose second launch finds no host capacity: the fabric, the cluster's
/// configuration, the state the apply left and its diagnostics.
async fn launch_out_of_host_capacity(oci: &Oci) -> (Value, Value, Value, Vec<String>) {
    let fabric = fabric(&oci.ctx, "lib", "cluster").await;
    oci.admin("POST", "faults", Some(json!({"service": "core", "operation": "LaunchInstance", "kind": "capacity", "nth": 2, "times": 1})));
    let config = cluster_config("lib", "lib", "cluster", 3);
    let (partial, diags) = apply(&oci.ctx, &GpuCluster, &Value::Null, &config).await;
    (fabric, config, partial, diags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_host_capacity_is_reported_with_the_shape_and_availability_domain() {
    let oci = Oci::start();
    let (_, _, _, diags) = launch_out_of_host_capacity(&oci).await;
    let failure = diagnostic(&diags, "Creating the cluster failed");
    assert_out_of_host_capacity(failure);
    assert!(failure.contains("2 of 3 nodes exist"), "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_launched_before_out_of_host_capacity_are_kept_in_state() {
    let oci = Oci::start();
    let (_, _, partial, _) = launch_out_of_host_capacity(&oci).await;
    assert_eq!(node_names(&partial).len(), 2, "the state keeps the nodes that were launched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apply_after_out_of_host_capacity_launches_only_the_missing_node() {
    let oci = Oci::start();
    let (fabric, config, partial, _) = launch_out_of_host_capacity(&oci).await;
    let (cluster, diags) = apply(&oci.ctx, &GpuCluster, &partial, &config).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&cluster), ["lib-0", "lib-1", "lib-2"]);
    assert_eq!(oci.inventory("core", "instance"), Some(3));
    destroy(&oci.ctx, &GpuCluster, &cluster).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_networks_instances_get_the_clusters_node_names() {
    let oci = Oci::start();
    // A cluster network: OCI names the pool's instances; the provider renames them.
    fabric(&oci.ctx, "cn", "cluster-network").await;
    let pool = cluster(&oci.ctx, &cluster_config("pool", "cn", "cluster-network", 2)).await;
    let read = read_found(&oci.ctx, &GpuCluster, &pool).await;
    assert_eq!(node_names(&read), ["pool-0", "pool-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_network_grows_in_place() {
    let oci = Oci::start();
    fabric(&oci.ctx, "cn", "cluster-network").await;
    let pool = cluster(&oci.ctx, &cluster_config("pool", "cn", "cluster-network", 2)).await;
    let read = read_found(&oci.ctx, &GpuCluster, &pool).await;
    let (pool, diags) = apply(&oci.ctx, &GpuCluster, &read, &cluster_config("pool", "cn", "cluster-network", 4)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let read = read_found(&oci.ctx, &GpuCluster, &pool).await;
    assert_eq!(node_names(&read), ["pool-0", "pool-1", "pool-2", "pool-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_network_shrinks_in_place() {
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "cn", "cluster-network").await;
    let pool = cluster(&oci.ctx, &cluster_config("pool", "cn", "cluster-network", 4)).await;
    let read = read_found(&oci.ctx, &GpuCluster, &pool).await;
    let (pool, diags) = apply(&oci.ctx, &GpuCluster, &read, &cluster_config("pool", "cn", "cluster-network", 3)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let read = read_found(&oci.ctx, &GpuCluster, &pool).await;
    assert_eq!(node_names(&read).len(), 3);
    assert_eq!(read.get("node_count"), &Value::int(3));
    destroy(&oci.ctx, &GpuCluster, &read).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_from_an_oci_config_file_profile_work() {
    let oci = &*PROFILED;
    let fabric = fabric(&oci.ctx, "lib", "cluster").await;
    // Credentials from a config file profile work the same as the key in the provider block.
    let from_file = provider_context(json!({"oci": {"config_file_profile": "ML", "endpoint": oci.ep}}));
    let (outcome, d) = read(&from_file, &GpuFabric, &fabric).await;
    assert!(matches!(outcome, ReadOutcome::Found { .. }));
    assert!(d.is_empty(), "{:?}", d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>());
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_profile_that_does_not_exist_is_reported() {
    // The config file exists (PROFILED wrote it); it has no profile NOPE.
    LazyLock::force(&PROFILED);
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "lib", "cluster").await;
    let missing = provider_context(json!({"oci": {"config_file_profile": "NOPE", "endpoint": oci.ep}}));
    let (_, d) = read(&missing, &GpuFabric, &fabric).await;
    assert!(
        d.iter().any(|d| d.summary == "OCI is not configured" && d.detail.contains("NOPE")),
        "{:?}",
        d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_api_key_is_an_authentication_failure() {
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "lib", "cluster").await;
    let (_, stranger) = start_oci();
    let wrong = provider_context(json!({"oci": {"tenancy_ocid": oci.key.tenancy, "user_ocid": oci.key.user,
        "fingerprint": oci.key.fingerprint, "private_key": stranger.private_key_pem, "endpoint": oci.ep}}));
    let (_, d) = read(&wrong, &GpuFabric, &fabric).await;
    let auth = d.iter().find(|d| d.summary == "OCI authentication failed").unwrap_or_else(|| panic!("no auth diagnostic"));
    assert!(auth.detail.contains("401 NotAuthenticated") && auth.detail.contains("fingerprint"), "{}", auth.detail);
}

/// A cluster network OCI cannot place (its work request fails): the fabric, the cluster's configuration,
/// the state the apply left and its diagnostics.
async fn cluster_network_out_of_host_capacity(oci: &Oci) -> (Value, Value, Value, Vec<String>) {
    let fabric = fabric(&oci.ctx, "cn", "cluster-network").await;
    oci.admin("POST", "faults", Some(json!({"service": "core", "operation": "CreateClusterNetwork", "kind": "capacity", "times": 1})));
    let config = cluster_config("short", "cn", "cluster-network", 2);
    let (failed, diags) = apply(&oci.ctx, &GpuCluster, &Value::Null, &config).await;
    (fabric, config, failed, diags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_network_oci_cannot_place_is_reported_with_the_shape_and_availability_domain() {
    let oci = Oci::start();
    let (_, _, failed, diags) = cluster_network_out_of_host_capacity(&oci).await;
    // The diagnostic names shape and AD, and nothing is left running.
    assert_out_of_host_capacity(diagnostic(&diags, "Creating the cluster failed"));
    assert_eq!(failed.get("node_count"), &Value::int(0), "no node of the failed cluster network is claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apply_after_a_cluster_network_found_no_capacity_builds_it() {
    let oci = Oci::start();
    let (fabric, config, failed, _) = cluster_network_out_of_host_capacity(&oci).await;
    let (cluster, diags) = apply(&oci.ctx, &GpuCluster, &failed, &config).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&cluster), ["short-0", "short-1"]);
    destroy(&oci.ctx, &GpuCluster, &cluster).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

fn scratch(gb: u64) -> Value {
    value(
        &ParallelFilesystem,
        json!({"name": "scratch", "fabric": fabric_ref("lib", "cluster"), "capacity_gib": gb, "throughput_per_tib": 500}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lustre_filesystem_gives_its_mount_command() {
    let oci = Oci::start();
    fabric(&oci.ctx, "lib", "cluster").await;
    let (fs, diags) = apply(&oci.ctx, &ParallelFilesystem, &Value::Null, &scratch(31_200)).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert!(fs.get("mount_command").as_str().is_some_and(|m| m.contains("@tcp:/")), "{:?}", fs.get("mount_command"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lustre_grows_in_place_and_a_refresh_reads_the_new_size() {
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "lib", "cluster").await;
    // 31,200 -> 41,600 GB, the next step.
    let (fs, diags) = apply(&oci.ctx, &ParallelFilesystem, &Value::Null, &scratch(31_200)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let (fs, diags) = apply(&oci.ctx, &ParallelFilesystem, &fs, &scratch(41_600)).await;
    assert!(diags.is_empty(), "{diags:?}");
    let fs_read = read_found(&oci.ctx, &ParallelFilesystem, &fs).await;
    assert_eq!((fs_read.get("capacity_gib"), fs_read.get("throughput_mbps")), (&Value::int(41_600), &Value::int(20_800)));
    assert_eq!(oci.inventory("lustre", "lustrefilesystem"), Some(1));
    destroy(&oci.ctx, &ParallelFilesystem, &fs).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

fn datasets() -> Value {
    value(
        &ParallelFilesystem,
        json!({"name": "datasets", "fabric": fabric_ref("data", "none"), "capacity_gib": 31_200, "throughput_per_tib": 250,
               "data_repository": "oci://imagenet@tenancyns/train/shards", "timeouts": {"create": "60s"}}),
    )
}

/// A fabric and a Lustre filesystem linked to an Object Storage bucket, created without a diagnostic.
async fn linked_filesystem(oci: &Oci) -> (Value, Value) {
    // The security group is used only once it is AVAILABLE (the emulator refuses rules before).
    let fabric = fabric(&oci.ctx, "data", "none").await;
    let (fs, diags) = apply(&oci.ctx, &ParallelFilesystem, &Value::Null, &datasets()).await;
    assert!(diags.is_empty(), "{diags:?}");
    (fabric, fs)
}

async fn destroy_linked_filesystem(oci: &Oci, fabric: &Value, fs: &Value) {
    destroy(&oci.ctx, &ParallelFilesystem, fs).await;
    destroy(&oci.ctx, &GpuFabric, fabric).await;
    oci.assert_empty();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_repository_is_linked_in_ocis_namespace_bucket_prefix_form() {
    let oci = Oci::start();
    linked_filesystem(&oci).await;
    // OCI's form: namespace:/bucket/prefix.
    let links = oci.snapshot_of("objectstoragelink");
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0]["objectStoragePrefix"], "tenancyns:/imagenet/train/shards");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_repository_is_imported_by_one_sync_job_polled_to_success() {
    let oci = Oci::start();
    linked_filesystem(&oci).await;
    let links = oci.snapshot_of("objectstoragelink");
    assert!(links[0]["lastJobId"].as_str().is_some(), "the import ran: {}", links[0]);
    let counters = oci.admin("GET", "counters", None)["counters"].clone();
    assert_eq!(counters["lustre:StartImportFromObject"], 1, "{counters}");
    assert!(counters["lustre:GetSyncJob"].as_u64().is_some_and(|n| n >= 1), "{counters}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_filesystem_gives_its_data_repository_in_the_providers_form() {
    let oci = Oci::start();
    let (fabric, fs) = linked_filesystem(&oci).await;
    let (imported, diags) = import(&oci.ctx, &ParallelFilesystem, &format!("oci/us-ashburn-1/{COMPARTMENT}/datasets")).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(imported.get("data_repository").as_str(), Some("oci://imagenet@tenancyns/train/shards"));
    destroy_linked_filesystem(&oci, &fabric, &fs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_import_that_fails_is_reported() {
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "data", "none").await;
    // The emulator fails the sync job on a capacity fault.
    oci.admin("POST", "faults", Some(json!({"service": "lustre", "operation": "StartImportFromObject", "kind": "capacity", "times": 1})));
    let (_, diags) = apply(&oci.ctx, &ParallelFilesystem, &Value::Null, &datasets()).await;
    let failure = diags.iter().find(|d| d.contains("FAILED")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("import") && failure.contains("tenancyns:/imagenet/train/shards"), "{failure}");
    let (leftover, _) = import(&oci.ctx, &ParallelFilesystem, &format!("oci/us-ashburn-1/{COMPARTMENT}/datasets")).await;
    destroy_linked_filesystem(&oci, &fabric, &leftover).await;
}

fn cased(nodes: u32) -> Value {
    value(
        &GpuCluster,
        json!({"name": "cased", "fabric": fabric_ref("cased", "cluster-network"), "node_count": nodes,
               "timeouts": {"create": "30s", "update": "30s"}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_network_nodes_running_in_the_services_casing_count_as_running() {
    let oci = Oci::start();
    fabric(&oci.ctx, "cased", "cluster-network").await;
    // ListClusterNetworkInstances says "Running", not "RUNNING": the apply still sees its nodes run.
    let cluster = cluster(&oci.ctx, &cased(3)).await;
    assert_eq!(node_names(&cluster), ["cased-0", "cased-1", "cased-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_cluster_network_instances_are_not_counted_as_nodes() {
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "cased", "cluster-network").await;
    let cluster = cluster(&oci.ctx, &cased(3)).await;
    // Terminated pool instances ("Terminated") are not counted as nodes.
    let (cluster, diags) = apply(&oci.ctx, &GpuCluster, &cluster, &cased(1)).await;
    assert!(diags.is_empty(), "{diags:?}");
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let read = read_found(&oci.ctx, &GpuCluster, &cluster).await;
    assert_eq!(node_names(&read), ["cased-0"]);
    destroy(&oci.ctx, &GpuCluster, &read).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_keep_a_user_tag_called_name() {
    // `Name` is only AWS's console tag; on OCI it is the user's like any other and survives an import.
    let oci = Oci::start();
    let tags = json!({"Name": "x", "team": "ml"});
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "named", "cloud": "oci", "region": "us-ashburn-1", "zone": AD, "compartment_id": COMPARTMENT,
               "instance_type": "BM.GPU.H100.8", "placement": "none", "tags": tags}),
    );
    let (fabric, diags) = apply(&oci.ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let cluster_config =
        value(&GpuCluster, json!({"name": "named-nodes", "fabric": fabric_ref("named", "none"), "node_count": 1, "tags": tags}));
    let cluster = cluster(&oci.ctx, &cluster_config).await;
    for (resource, name) in [(&GpuFabric as &dyn Resource, "named"), (&GpuCluster, "named-nodes")] {
        let (imported, diags) = import(&oci.ctx, resource, &format!("oci/us-ashburn-1/{COMPARTMENT}/{name}")).await;
        assert!(diags.is_empty(), "{}: {diags:?}", resource.type_name());
        assert_eq!(imported.get("tags"), &value(&GpuFabric, json!({"tags": tags})).get("tags").clone(), "{}", resource.type_name());
    }
    destroy(&oci.ctx, &GpuCluster, &cluster).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}
