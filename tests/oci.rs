//! The OCI resources through the provider's own Resource implementations against the OCI emulator (every
//! request signed with the test API key), what only OCI has (the behaviours every cloud keeps, a compute
//! cluster's "Out of host capacity" under each capacity policy among them, are in `contract.rs`): 429
//! without Retry-After retried with backoff, a cluster network built, renamed, resized and destroyed, credentials from an OCI
//! config file profile, a wrong key reported as an authentication failure, a cluster network's failed work
//! request reported as missing capacity, Lustre grown in place and linked to Object Storage, and GB200 NVL72:
//! one GPU memory cluster per NVLink domain on fabrics found (never changed), grown by a domain, a lost node
//! put back in its own domain, refreshed in O(1) list calls. Day 2: every node's health and self-check
//! verdict read from one instance list, retags that keep the node's own tags, nodes removed by name (compute
//! cluster, cluster network, GPU memory cluster) and made again from the new configuration with its
//! revision, and reboots.
//!
//! Each test starts its own emulator (faults, counters and the inventory are an emulator's), except that
//! the OCI config file's profile names one API key, so the test reading through it uses [`PROFILED`].

mod common;

use std::sync::LazyLock;

use common::{apply, destroy, diagnostic, import, node_names, provider_context, read, read_found, value};
use hpc_emulators::harness::{OciKey, admin, start_oci};
use hpc_provider::clouds::oci::api::{self, Service};
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

/// A cluster's configuration with its capacity policy (and `min_nodes` for at-least).
fn with_policy(name: &str, fabric: &str, placement: &str, nodes: u32, policy: &str, min: Option<u32>) -> Value {
    value(
        &GpuCluster,
        json!({"name": name, "fabric": fabric_ref(fabric, placement), "node_count": nodes, "capacity_policy": policy, "min_nodes": min}),
    )
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

/// Destroys `state` as the CLI would, within `limit`: the state left and the diagnostics.
async fn destroy_within(ctx: &Context, resource: &dyn Resource, state: &Value, limit: std::time::Duration) -> (Value, Vec<String>) {
    use hpc_provider::framework::{ApplyRequest, Diagnostics};
    let mut d = Diagnostics::new();
    let req = ApplyRequest { prior: state, planned: &Value::Null, config: &Value::Null, private: &[] };
    let out = tokio::time::timeout(limit, resource.apply(ctx, req, &mut d))
        .await
        .unwrap_or_else(|_| panic!("destroying the {} took longer than {limit:?}", resource.type_name()));
    (out.new_state, common::lines(&d))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fabric_destroy_blocked_by_running_instances_names_them_at_once() {
    let oci = Oci::start();
    let fabric = fabric(&oci.ctx, "lib", "cluster").await;
    let subnet = fabric.get("subnet_id").as_str().unwrap().to_owned();
    // Five instances of another owner in the fabric's subnet, launched outside this provider's resources.
    let client = api::connect(&oci.ctx, "us-ashburn-1").unwrap();
    let mut theirs = Vec::new();
    for i in 0..5 {
        let body = json!({"compartmentId": COMPARTMENT, "availabilityDomain": AD, "shape": "VM.GPU.A10.1", "displayName": format!("theirs-{i}"),
                          "sourceDetails": {"sourceType": "image", "imageId": "ocid1.image.oc1.iad.emulator-ol8-gpu"},
                          "createVnicDetails": {"subnetId": subnet}, "freeformTags": {"team": "other"}});
        let (made, _) = client.create(&oci.ctx, Service::Core, "instances", &body, "their instance").await.unwrap();
        theirs.push(made["id"].as_str().unwrap().to_owned());
    }
    let pieces = || ["vcn", "subnet", "networksecuritygroup", "computecluster"].map(|kind| (kind, oci.inventory("core", kind)));
    let before = pieces();
    assert!(before.iter().all(|(_, n)| *n == Some(1)), "{before:?}");

    // The destroy says at once what holds the subnet, and deletes nothing: not the compute cluster or the
    // security group either, which it would otherwise delete first.
    let started = std::time::Instant::now();
    let (left, diags) = destroy_within(&oci.ctx, &GpuFabric, &fabric, std::time::Duration::from_secs(20)).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(left, fabric, "the state stays as it was");
    let said = diags.join("\n");
    assert!(
        said.contains(&format!("theirs-0 ({})", theirs[0]))
            && said.contains(&format!("theirs-2 ({})", theirs[2]))
            && said.contains("and 2 more")
            && !said.contains(&theirs[3])
            && said.contains("lib-subnet"),
        "{said}"
    );
    assert_eq!(pieces(), before, "nothing deleted");

    // Once they are terminated (or terminating: the subnet's 409 meanwhile is waited out) the destroy finishes.
    for id in &theirs {
        client
            .delete(&oci.ctx, Service::Core, &format!("/instances/{id}"), "their instance", std::time::Duration::from_secs(30))
            .await
            .unwrap();
    }
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
    assert_out_of_host_capacity(diagnostic(&diags, &format!("Not enough BM.GPU.H100.8 capacity in {AD}")));
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

// ----------------------------------------------------- GB200 NVL72: GPU memory clusters on found fabrics

const GB200: &str = "BM.GPU.GB200.4";
/// The tenancy (root compartment) of the emulator's test key, where OCI keeps GPU memory fabrics.
const TENANCY: &str = "ocid1.tenancy.oc1..emulator";

fn gb200_fabric_ref(name: &str) -> Json {
    json!({"id": format!("oci/us-ashburn-1/{COMPARTMENT}/{name}"), "name": name, "cloud": "oci", "region": "us-ashburn-1", "zone": AD,
           "instance_type": GB200, "placement": "cluster"})
}

/// A GB200 cluster of `nodes` (whole NVLink domains of 18) on an Arm64 GPU image.
fn gb200_cluster(nodes: u32) -> Value {
    value(
        &GpuCluster,
        json!({"name": "nvl", "fabric": gb200_fabric_ref("rack"), "node_count": nodes, "image": "ocid1.image.oc1..arm64gpu", "timeouts": {"create": "60s", "update": "60s"}}),
    )
}

impl Oci {
    /// The racks of the availability domain, as OCI has them before anyone builds: three idle fabrics in the
    /// root compartment and one moved to the cluster's, plus an unhealthy one and one in another AD, which
    /// are never chosen. Answers the snapshot of every fabric.
    fn seed_racks(&self) -> Json {
        for (compartment, ad, name, extra) in [
            (TENANCY, AD, "rack-0", json!({})),
            (TENANCY, AD, "rack-1", json!({})),
            (COMPARTMENT, AD, "rack-2", json!({})),
            (TENANCY, AD, "rack-3", json!({})),
            (TENANCY, AD, "rack-sick", json!({"fabricHealth": "UNHEALTHY", "healthyHostCount": 12})),
            (TENANCY, "Uocm:US-ASHBURN-AD-1", "rack-ad1", json!({})),
        ] {
            let mut body = json!({"compartmentId": compartment, "availabilityDomain": ad, "displayName": name});
            body.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
            self.admin("POST", "gpu-memory-fabrics", Some(body));
        }
        self.fabrics()
    }

    /// Every GPU memory fabric as the snapshot shows it, by id.
    fn fabrics(&self) -> Json {
        let snap = self.admin("GET", "snapshot", None);
        let fabrics: serde_json::Map<String, Json> = snap["resources"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(id, _)| id.starts_with("ocid1.computegpumemoryfabric."))
            .map(|(id, v)| (id.clone(), v.clone()))
            .collect();
        Json::Object(fabrics)
    }

    fn counters(&self) -> Json {
        self.admin("GET", "counters", None)["counters"].clone()
    }

    /// The GPU memory clusters, by display name: (fabric name, live instance names in order).
    async fn memory_clusters(&self) -> std::collections::BTreeMap<String, (String, Vec<String>)> {
        let client = api::connect(&self.ctx, "us-ashburn-1").unwrap();
        let fabrics = self.fabrics();
        let q = format!("compartmentId={COMPARTMENT}");
        let mut out = std::collections::BTreeMap::new();
        for gmc in client.list(&self.ctx, Service::Core, "computeGpuMemoryClusters", &q).await.unwrap() {
            let id = gmc["id"].as_str().unwrap();
            let members = client.list(&self.ctx, Service::Core, &format!("computeGpuMemoryClusters/{id}/instances"), "").await.unwrap();
            let mut names: Vec<String> = members
                .iter()
                .filter(|m| !matches!(m["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED")))
                .map(|m| m["displayName"].as_str().unwrap().to_owned())
                .collect();
            names.sort_by_key(|n| n.rsplit('-').next().and_then(|i| i.parse::<u32>().ok()));
            let fabric = fabrics[gmc["gpuMemoryFabricId"].as_str().unwrap()]["displayName"].as_str().unwrap().to_owned();
            out.insert(gmc["displayName"].as_str().unwrap().to_owned(), (fabric, names));
        }
        out
    }
}

fn nvl_names(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("nvl-{i}")).collect()
}

/// The fabric `rack` for GB200 and a GB200 cluster of two NVLink domains on seeded racks: (fabric, cluster,
/// the fabrics as they were before).
async fn gb200_two_domains(oci: &Oci) -> (Value, Value, Json) {
    let before = oci.seed_racks();
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "rack", "cloud": "oci", "region": "us-ashburn-1", "zone": AD, "compartment_id": COMPARTMENT,
               "instance_type": GB200, "placement": "cluster"}),
    );
    let (fabric, diags) = apply(&oci.ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let cluster = cluster(&oci.ctx, &gb200_cluster(36)).await;
    (fabric, cluster, before)
}

/// The node piece and memory cluster piece of domain `name` in a state's expansion: (count, names, size).
fn domain_pieces(state: &Value, name: &str) -> (i64, String, String) {
    let pieces = state.get("expansion").as_list().unwrap();
    let find = |kind: &str| {
        pieces
            .iter()
            .find(|p| p.get("kind").as_str() == Some(kind) && p.get("name").as_str() == Some(name))
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .clone()
    };
    let nodes = find("oci_core_instance");
    let gmc = find("oci_core_compute_gpu_memory_cluster");
    let setting = |p: &Value, k: &str| p.get("settings").get(k).as_str().unwrap_or_default().to_owned();
    (nodes.get("count").as_number().and_then(|n| n.as_i64()).unwrap_or_default(), setting(&nodes, "names"), setting(&gmc, "size"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gb200_cluster_is_one_gpu_memory_cluster_per_nvlink_domain_on_fabrics_it_finds() {
    let oci = Oci::start();
    let (_, cluster, _) = gb200_two_domains(&oci).await;
    assert_eq!(node_names(&cluster), nvl_names(0..36));
    // Each domain's 18 nodes are the instances of its own memory cluster, on a fabric of its own: healthy,
    // in the cluster's availability domain, in the root compartment or the cluster's.
    let counters = oci.counters();
    let clusters = oci.memory_clusters().await;
    assert_eq!(clusters.keys().collect::<Vec<_>>(), ["nvl-nvl0", "nvl-nvl1"]);
    assert_eq!(clusters["nvl-nvl0"].1, nvl_names(0..18));
    assert_eq!(clusters["nvl-nvl1"].1, nvl_names(18..36));
    assert_ne!(clusters["nvl-nvl0"].0, clusters["nvl-nvl1"].0);
    for (fabric, _) in clusters.values() {
        assert!(["rack-0", "rack-1", "rack-2", "rack-3"].contains(&fabric.as_str()), "{fabric}");
    }
    assert_eq!((oci.inventory("core", "computegpumemorycluster"), oci.inventory("core", "instance")), (Some(2), Some(36)));
    assert_eq!(counters["core:CreateComputeGpuMemoryCluster"], 2, "{counters}");
    assert_eq!(counters["core:UpdateInstance"], 36, "each instance named once: {counters}");
    assert!(counters["core:LaunchInstance"].is_null(), "nodes are launched by their memory cluster only: {counters}");
    // Fabrics are listed once per apply, in the root compartment and in the cluster's.
    assert_eq!(counters["core:ListComputeGpuMemoryFabrics"], 2, "{counters}");
    // Tagged with the cluster's ownership marker, as every other OCI piece.
    let gmcs = oci.snapshot_of("computegpumemorycluster");
    assert!(
        gmcs.iter().all(|g| g["freeformTags"]["hpc:owner"].as_str().is_some() && g["freeformTags"]["hpc:cluster"] == "nvl"),
        "{gmcs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gb200_refresh_is_one_instance_list_and_one_memory_cluster_list_at_any_size() {
    let oci = Oci::start();
    let (_, cluster, _) = gb200_two_domains(&oci).await;
    oci.admin("DELETE", "counters", None);
    let read = read_found(&oci.ctx, &GpuCluster, &cluster).await;
    assert_eq!(node_names(&read), nvl_names(0..36));
    assert_eq!(domain_pieces(&read, "nvl-nvl1"), (18, "nvl-18 .. nvl-35".into(), "18".into()));
    let counters = oci.counters();
    assert_eq!((&counters["core:ListInstances"], &counters["core:ListComputeGpuMemoryClusters"]), (&json!(1), &json!(1)), "{counters}");
    for per_node in ["ListComputeGpuMemoryClusterInstances", "GetComputeGpuMemoryCluster", "ListComputeGpuMemoryFabrics", "GetInstance"] {
        assert!(counters[format!("core:{per_node}")].is_null(), "{per_node}: {counters}");
    }
    // Nothing changed: the refreshed state is the applied one.
    assert_eq!(read.get("expansion"), cluster.get("expansion"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gb200_cluster_grows_by_a_whole_domain_with_a_third_memory_cluster() {
    let oci = Oci::start();
    let (_, cluster, _) = gb200_two_domains(&oci).await;
    oci.admin("DELETE", "counters", None);
    let (grown, diags) = apply(&oci.ctx, &GpuCluster, &cluster, &gb200_cluster(54)).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&grown), nvl_names(0..54));
    let counters = oci.counters();
    let clusters = oci.memory_clusters().await;
    assert_eq!(clusters["nvl-nvl2"].1, nvl_names(36..54));
    let fabrics: std::collections::BTreeSet<&String> = clusters.values().map(|(f, _)| f).collect();
    assert_eq!(fabrics.len(), 3, "a fabric per domain: {clusters:?}");
    assert_eq!(counters["core:ListComputeGpuMemoryClusters"], 1, "{counters}");
    assert_eq!(counters["core:ListComputeGpuMemoryFabrics"], 2, "once in each compartment: {counters}");
    assert_eq!(counters["core:CreateComputeGpuMemoryCluster"], 1, "{counters}");
    assert!(counters["core:UpdateComputeGpuMemoryCluster"].is_null(), "the first two are left as they are: {counters}");
    assert_eq!(counters["core:ListComputeGpuMemoryClusterInstances"], 1, "only the new domain's instances are listed: {counters}");
    assert_eq!(counters["core:UpdateInstance"], 18, "{counters}");

    // And shrinks by one: the last domain's memory cluster goes with its instances, the others stay.
    oci.admin("DELETE", "counters", None);
    let (shrunk, diags) = apply(&oci.ctx, &GpuCluster, &grown, &gb200_cluster(36)).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&shrunk), nvl_names(0..36));
    let counters = oci.counters();
    assert_eq!(counters["core:DeleteComputeGpuMemoryCluster"], 1, "{counters}");
    assert!(counters["core:TerminateInstance"].is_null(), "{counters}");
    assert_eq!(oci.memory_clusters().await.keys().collect::<Vec<_>>(), ["nvl-nvl0", "nvl-nvl1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gb200_node_lost_outside_is_put_back_in_its_own_domain() {
    let oci = Oci::start();
    let (fabric, cluster, before) = gb200_two_domains(&oci).await;
    let lost = cluster.get("nodes").as_list().unwrap().iter().find(|n| n.get("name").as_str() == Some("nvl-20")).unwrap().clone();
    oci.admin("POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": lost.get("id").as_str().unwrap()})));
    // The refresh shows the domain one node short, and its memory cluster at 17.
    let read = read_found(&oci.ctx, &GpuCluster, &cluster).await;
    assert_eq!(read.get("node_count"), &Value::int(35));
    let (count, names, size) = domain_pieces(&read, "nvl-nvl1");
    assert_eq!((count, size.as_str()), (17, "17"));
    assert!(!names.contains("nvl-20,") && names.contains("nvl-21"), "{names}");
    assert_eq!(domain_pieces(&read, "nvl-nvl0").0, 18);
    // The repair brings that memory cluster back to 18 and names the new instance nvl-20.
    oci.admin("DELETE", "counters", None);
    let (repaired, diags) = apply(&oci.ctx, &GpuCluster, &read, &gb200_cluster(36)).await;
    assert!(diags.is_empty(), "{diags:?}");
    assert_eq!(node_names(&repaired), nvl_names(0..36));
    let counters = oci.counters();
    let clusters = oci.memory_clusters().await;
    assert_eq!(clusters["nvl-nvl1"].1, nvl_names(18..36), "in the same memory cluster");
    assert!(counters["core:ListComputeGpuMemoryFabrics"].is_null(), "no new fabric is needed: {counters}");
    assert_eq!(counters["core:UpdateComputeGpuMemoryCluster"], 1, "{counters}");
    assert!(counters["core:CreateComputeGpuMemoryCluster"].is_null(), "{counters}");
    assert_eq!(counters["core:UpdateInstance"], 1, "{counters}");
    assert_eq!(counters["core:ListComputeGpuMemoryClusterInstances"], 1, "{counters}");
    let new = repaired.get("nodes").as_list().unwrap().iter().find(|n| n.get("name").as_str() == Some("nvl-20")).unwrap().clone();
    assert_ne!(new.get("id"), lost.get("id"));

    // Destroy deletes the memory clusters (and so their instances) and leaves the fabrics as they were.
    destroy(&oci.ctx, &GpuCluster, &repaired).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
    assert_eq!(oci.fabrics(), before, "the fabrics are found, never changed or deleted");
    assert!(oci.counters()["core:DeleteComputeGpuMemoryCluster"].as_u64() == Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gb200_cluster_without_enough_free_fabrics_makes_nothing_and_says_what_it_found() {
    let oci = Oci::start();
    oci.admin("POST", "gpu-memory-fabrics", Some(json!({"compartmentId": TENANCY, "availabilityDomain": AD, "displayName": "only-rack"})));
    oci.admin(
        "POST",
        "gpu-memory-fabrics",
        Some(json!({"compartmentId": TENANCY, "availabilityDomain": AD, "displayName": "busy-rack", "availableHostCount": 4})),
    );
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "rack", "cloud": "oci", "region": "us-ashburn-1", "zone": AD, "compartment_id": COMPARTMENT,
               "instance_type": GB200, "placement": "cluster"}),
    );
    let (fabric, diags) = apply(&oci.ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let (failed, diags) = apply(&oci.ctx, &GpuCluster, &Value::Null, &gb200_cluster(36)).await;
    let failure = diagnostic(&diags, "Creating the cluster failed");
    assert!(failure.contains("needs 2 more GPU memory fabric(s)") && failure.contains("1 qualifies"), "{failure}");
    assert!(failure.contains("busy-rack (AVAILABLE, HEALTHY, 4 of 18 hosts available)"), "{failure}");
    assert_eq!(oci.inventory("core", "computegpumemorycluster"), Some(0));
    assert_eq!(oci.inventory("core", "instance"), Some(0));
    destroy(&oci.ctx, &GpuCluster, &failed).await;
    destroy(&oci.ctx, &GpuFabric, &fabric).await;
    oci.assert_empty();
}

// ------------------------------------------------------------------ day 2: health, repair, rolling updates

mod day2 {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::backend::{self, Change, Step};
    use hpc_provider::framework::Diagnostics;
    use hpc_provider::ownership::{Census, Owner};

    use super::*;

    const IMAGE_A: &str = "ocid1.image.oc1.iad.emulator-ol8-gpu";
    const IMAGE_B: &str = "ocid1.image.oc1.iad.emulator-ubuntu-gpu";

    fn config(placement: &str, nodes: u32, image: &str) -> Value {
        value(
            &GpuCluster,
            json!({"name": "d2", "fabric": fabric_ref("d2f", placement), "node_count": nodes, "image": image, "tags": {"team": "ml"},
                   "timeouts": {"create": "60s", "update": "60s"}}),
        )
    }

    /// Fabric `d2f` with `placement` and cluster `d2` of `nodes` BM.GPU.H100.8 nodes on `IMAGE_A`.
    async fn cluster_of(placement: &str, nodes: u32) -> (Oci, Value) {
        let oci = Oci::start();
        fabric(&oci.ctx, "d2f", placement).await;
        let state = cluster(&oci.ctx, &config(placement, nodes, IMAGE_A)).await;
        (oci, state)
    }

    fn spec(config: &Value) -> hpc_provider::model::ClusterSpec {
        let mut diags = Diagnostics::new();
        hpc_provider::planner::spec::parse_cluster(config, &mut diags).unwrap_or_else(|| panic!("{diags:?}"))
    }

    /// The census of an update of `state`, with the cluster's id (which carries its compartment) noted, as
    /// the day-2 core notes it before calling the backend.
    fn census(state: &Value) -> Census {
        let census = Census::owned(Owner::of_state("hpc_gpu_cluster", state));
        census.set_import_id(state.get("id").as_str().unwrap());
        census
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    async fn remove(oci: &Oci, state: &Value, config: &Value, nodes: &[&str]) -> Result<(), String> {
        let census = census(state);
        let step = Step { ctx: &oci.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(60) };
        backend::cluster(Cloud::Oci).remove_nodes(&step, &spec(config), &names(nodes)).await.map_err(String::from)
    }

    async fn reboot(oci: &Oci, state: &Value, config: &Value, nodes: &[&str]) -> Result<(), String> {
        let census = census(state);
        let step = Step { ctx: &oci.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(60) };
        backend::cluster(Cloud::Oci).reboot_nodes(&step, &spec(config), &names(nodes)).await.map_err(String::from)
    }

    /// The backend's converge from `state` to `config`, as the day-2 core calls it after removing nodes.
    async fn converge(oci: &Oci, state: &Value, config: &Value) -> Value {
        let census = census(state);
        let step = Step { ctx: &oci.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(60) };
        let spec = spec(config);
        let (name, fabric) = (config.get("name").as_str().unwrap(), config.get("fabric").get("name").as_str().unwrap());
        let tags = hpc_provider::resources::common::owned_tags(
            &oci.ctx,
            config.get("tags"),
            &[("hpc:cluster", name), ("hpc:fabric", fabric)],
            &census,
        );
        let change = Change { spec: &spec, config, prior: state, planned: state, state, tags: &tags, prior_tags: &tags };
        let out = backend::cluster(Cloud::Oci).apply(&step, &change).await;
        assert!(out.error.is_none(), "{:?}", out.error);
        out.state
    }

    async fn client(oci: &Oci) -> api::Oci {
        api::connect(&oci.ctx, "us-ashburn-1").unwrap()
    }

    /// The cluster's live instances by name, as ListInstances has them.
    async fn live(oci: &Oci) -> BTreeMap<String, Json> {
        let c = client(oci).await;
        let q = format!("compartmentId={COMPARTMENT}&availabilityDomain={}", api::encode(AD));
        c.list(&oci.ctx, Service::Core, "instances", &q)
            .await
            .unwrap()
            .into_iter()
            .filter(|i| {
                i["freeformTags"]["hpc:cluster"] == "d2" && !matches!(i["lifecycleState"].as_str(), Some("TERMINATING" | "TERMINATED"))
            })
            .map(|i| (i["displayName"].as_str().unwrap().to_owned(), i))
            .collect()
    }

    fn field(live: &BTreeMap<String, Json>, node: &str, pointer: &str) -> String {
        live[node].pointer(pointer).and_then(Json::as_str).unwrap_or_default().to_owned()
    }

    /// What the node's self-check does: UpdateInstance with its freeform tags and the verdict (the call
    /// replaces the whole map, so it reads them first).
    async fn publish(oci: &Oci, id: &str, verdict: &str) {
        let c = client(oci).await;
        let me = c.get(&oci.ctx, Service::Core, &format!("/instances/{id}")).await.unwrap().unwrap();
        let mut tags = me["freeformTags"].clone();
        tags["hpc:selfcheck"] = json!(verdict);
        c.update(&oci.ctx, Service::Core, &format!("/instances/{id}"), &json!({"freeformTags": tags}), "publishing").await.unwrap();
    }

    fn map(v: &Value) -> BTreeMap<String, String> {
        v.as_map().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect()).unwrap_or_default()
    }

    fn counters(oci: &Oci) -> Json {
        oci.admin("GET", "counters", None)["counters"].clone()
    }

    fn configurations(oci: &Oci) -> Vec<Json> {
        oci.snapshot_of("instanceconfiguration")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refresh_reads_every_nodes_health_and_selfcheck_in_one_instance_list() {
        let (oci, state) = cluster_of("cluster", 6).await;
        let nodes = live(&oci).await;
        let id = |n: &str| field(&nodes, n, "/id");
        oci.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": id("d2-1"), "state": "STOPPED"})));
        oci.admin(
            "POST",
            "out-of-band",
            Some(json!({"action": "impair", "id": id("d2-2"), "maintenance_reboot_due": "2026-12-05T00:00:00.000Z"})),
        );
        publish(&oci, &id("d2-0"), "ok").await;
        publish(&oci, &id("d2-3"), "fail-gpus-7-of-8").await;
        oci.admin("DELETE", "counters", None);
        let read = read_found(&oci.ctx, &GpuCluster, &state).await;
        let unhealthy = map(read.get("unhealthy_nodes"));
        assert_eq!(
            unhealthy,
            BTreeMap::from([("d2-1".to_owned(), "state STOPPED".to_owned()), ("d2-3".to_owned(), "self-check: 7 of 8 GPUs".to_owned()),])
        );
        assert_eq!(
            map(read.get("scheduled_maintenance")),
            BTreeMap::from([("d2-2".to_owned(), "maintenance reboot due 2026-12-05T00:00Z".to_owned())]),
            "a maintenance reboot is reported with its time, not repaired"
        );
        assert_eq!(
            map(read.get("selfcheck")),
            BTreeMap::from([("d2-0".to_owned(), "ok".to_owned()), ("d2-3".to_owned(), "fail-gpus-7-of-8".to_owned())])
        );
        let revision = spec(&config("cluster", 6, IMAGE_A)).revision();
        assert!(map(read.get("node_revisions")).values().all(|r| *r == revision) && map(read.get("node_revisions")).len() == 6, "{read:?}");
        // One instance list (no per-node call) for all six.
        let c = counters(&oci);
        assert_eq!(c["core:ListInstances"], 1, "{c}");
        assert!(c["core:GetInstance"].is_null(), "{c}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cluster_network_refresh_reads_health_from_one_instance_list_too() {
        let (oci, state) = cluster_of("cluster-network", 3).await;
        let nodes = live(&oci).await;
        oci.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": field(&nodes, "d2-2", "/id"), "state": "STOPPED"})));
        publish(&oci, &field(&nodes, "d2-0", "/id"), "fail-rdma-15-of-16").await;
        oci.admin("DELETE", "counters", None);
        let read = read_found(&oci.ctx, &GpuCluster, &state).await;
        assert_eq!(
            map(read.get("unhealthy_nodes")),
            BTreeMap::from([
                ("d2-0".to_owned(), "self-check: 15 of 16 RDMA devices".to_owned()),
                ("d2-2".to_owned(), "state STOPPED".to_owned())
            ])
        );
        assert_eq!(map(read.get("node_revisions")).len(), 3, "the pool's instances carry their configuration's revision");
        let c = counters(&oci);
        assert_eq!((&c["core:ListClusterNetworkInstances"], &c["core:ListInstances"]), (&json!(1), &json!(1)), "{c}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retagging_keeps_the_nodes_selfcheck_verdict_and_revision_and_import_ignores_them() {
        let (oci, state) = cluster_of("cluster", 2).await;
        let before = live(&oci).await;
        publish(&oci, &field(&before, "d2-0", "/id"), "ok").await;
        let retagged = value(
            &GpuCluster,
            json!({"name": "d2", "fabric": fabric_ref("d2f", "cluster"), "node_count": 2, "image": IMAGE_A, "tags": {"team": "infra"}}),
        );
        let (state, diags) = apply(&oci.ctx, &GpuCluster, &state, &retagged).await;
        assert!(diags.is_empty(), "{diags:?}");
        let after = live(&oci).await;
        assert_eq!(field(&after, "d2-0", "/freeformTags/team"), "infra");
        assert_eq!(field(&after, "d2-0", "/freeformTags/hpc:selfcheck"), "ok", "the verdict survives the provider's UpdateInstance");
        for n in ["d2-0", "d2-1"] {
            assert_eq!(field(&after, n, "/freeformTags/hpc:revision"), field(&before, n, "/freeformTags/hpc:revision"));
            assert_eq!(field(&after, n, "/id"), field(&before, n, "/id"));
        }
        let (imported, diags) = import(&oci.ctx, &GpuCluster, &format!("oci/us-ashburn-1/{COMPARTMENT}/d2")).await;
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(map(imported.get("tags")), BTreeMap::from([("team".to_owned(), "infra".to_owned())]));
        let read = read_found(&oci.ctx, &GpuCluster, &state).await;
        assert_eq!(map(read.get("selfcheck")), BTreeMap::from([("d2-0".to_owned(), "ok".to_owned())]));
    }

    /// OCI's idempotency: "A token that uniquely identifies a request so it can be retried in case of a
    /// timeout or server error without risk of executing that same action again." A launch carried out whose
    /// answer never came back is retried by the provider under the same `opc-retry-token`, and OCI answers with
    /// the first launch's instance: each node is launched once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_launch_whose_answer_was_lost_is_retried_under_its_retry_token_and_made_once() {
        let oci = Oci::start();
        fabric(&oci.ctx, "d2f", "cluster").await;
        oci.admin("POST", "faults", Some(json!({"service": "core", "operation": "LaunchInstance", "kind": "answer_lost", "times": 1})));
        oci.admin("DELETE", "events", None);
        let state = cluster(&oci.ctx, &config("cluster", 2, IMAGE_A)).await;
        assert_eq!(oci.admin("GET", "faults", None)["faults"][0]["fired"], json!(1));
        let counters = counters(&oci);
        assert_eq!(counters["core:LaunchInstance"], 3, "two launches, one of them sent again: {counters}");
        let created: Vec<Json> = oci.admin("GET", "events", None)["events"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["event"] == "created")
            .collect();
        assert_eq!(created.len(), 2, "each node launched once: {created:?}");
        assert_eq!(live(&oci).await.keys().collect::<Vec<_>>(), ["d2-0", "d2-1"]);
        assert_eq!(node_names(&state), ["d2-0", "d2-1"]);
    }

    /// OCI's optimistic concurrency: UpdateInstance replaces the whole `freeformTags`, so the provider's
    /// retag reads the node (with its etag), keeps the node's own keys and writes with `if-match`. The node's
    /// self-check publishing its verdict between that read and that write makes the write stale: OCI refuses
    /// it (412 `NoEtagMatch`), and the provider reads the node again and makes its change anew, so the
    /// verdict is kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_verdict_published_between_the_retags_read_and_write_is_kept() {
        let (oci, state) = cluster_of("cluster", 1).await;
        let id = field(&live(&oci).await, "d2-0", "/id");
        // The provider's write is held on the way for 1.5 s, after its read; the node publishes meanwhile.
        oci.admin(
            "POST",
            "faults",
            Some(json!({"service": "core", "operation": "UpdateInstance", "kind": "latency", "latency_ms": 1500, "times": 1})),
        );
        oci.admin("DELETE", "counters", None);
        let retagged = value(
            &GpuCluster,
            json!({"name": "d2", "fabric": fabric_ref("d2f", "cluster"), "node_count": 1, "image": IMAGE_A, "tags": {"team": "infra"}}),
        );
        let node = async {
            while counters(&oci)["core:UpdateInstance"].as_u64().unwrap_or(0) == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            publish(&oci, &id, "ok").await;
        };
        let ((_, diags), ()) = tokio::join!(apply(&oci.ctx, &GpuCluster, &state, &retagged), node);
        assert!(diags.is_empty(), "{diags:?}");
        let after = live(&oci).await;
        assert_eq!(field(&after, "d2-0", "/freeformTags/team"), "infra");
        assert_eq!(field(&after, "d2-0", "/freeformTags/hpc:selfcheck"), "ok", "the verdict written meanwhile is kept");
        let c = counters(&oci);
        // The provider's stale write refused, then made again from a second read; the node's own write.
        assert_eq!(c["core:UpdateInstance"], 3, "{c}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn removing_nodes_terminates_only_those_and_converge_makes_them_again_in_the_compute_cluster() {
        let (oci, state) = cluster_of("cluster", 4).await;
        let before = live(&oci).await;
        oci.admin("DELETE", "counters", None);
        remove(&oci, &state, &config("cluster", 4, IMAGE_A), &["d2-1", "d2-3", "d2-9"]).await.unwrap();
        assert_eq!(counters(&oci)["core:TerminateInstance"], 2, "only the named nodes that exist");
        let mid = live(&oci).await;
        assert_eq!(mid.keys().collect::<Vec<_>>(), ["d2-0", "d2-2"]);
        for n in ["d2-0", "d2-2"] {
            assert_eq!(field(&mid, n, "/id"), field(&before, n, "/id"));
        }
        let state = converge(&oci, &state, &config("cluster", 4, IMAGE_A)).await;
        let after = live(&oci).await;
        assert_eq!(after.keys().collect::<Vec<_>>(), ["d2-0", "d2-1", "d2-2", "d2-3"]);
        for n in ["d2-1", "d2-3"] {
            assert_ne!(field(&after, n, "/id"), field(&before, n, "/id"), "{n} is a new instance");
        }
        let c = client(&oci).await;
        let cc = oci.snapshot_of("computecluster")[0]["id"].as_str().unwrap().to_owned();
        let q = format!("compartmentId={COMPARTMENT}&computeClusterId={cc}&lifecycleState=RUNNING");
        assert_eq!(c.list(&oci.ctx, Service::Core, "instances", &q).await.unwrap().len(), 4, "all four in the fabric's compute cluster");
        assert_eq!(node_names(&read_found(&oci.ctx, &GpuCluster, &state).await), ["d2-0", "d2-1", "d2-2", "d2-3"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repair_asked_before_the_compartment_is_known_is_done_by_the_apply_that_follows() {
        let (oci, state) = cluster_of("cluster", 3).await;
        let before = live(&oci).await;
        let config = config("cluster", 3, IMAGE_A);
        let spec = spec(&config);
        // A census that has not seen the cluster's id (the core's repair comes before its apply).
        let census = Census::owned(Owner::of_state("hpc_gpu_cluster", &state));
        let step = Step { ctx: &oci.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(60) };
        backend::cluster(Cloud::Oci).remove_nodes(&step, &spec, &names(&["d2-1"])).await.unwrap();
        assert_eq!(live(&oci).await.len(), 3, "nothing is touched before the apply");
        let tags = hpc_provider::resources::common::owned_tags(
            &oci.ctx,
            config.get("tags"),
            &[("hpc:cluster", "d2"), ("hpc:fabric", "d2f")],
            &census,
        );
        let change = Change { spec: &spec, config: &config, prior: &state, planned: &state, state: &state, tags: &tags, prior_tags: &tags };
        let out = backend::cluster(Cloud::Oci).apply(&step, &change).await;
        assert!(out.error.is_none(), "{:?}", out.error);
        let after = live(&oci).await;
        assert_eq!(after.keys().collect::<Vec<_>>(), ["d2-0", "d2-1", "d2-2"]);
        for n in ["d2-0", "d2-1", "d2-2"] {
            assert_eq!(field(&after, n, "/id") == field(&before, n, "/id"), n != "d2-1", "{n}");
        }
        // Done once: the next apply on another census changes nothing.
        let again = converge(&oci, &state, &config).await;
        assert_eq!(live(&oci).await.get("d2-1").map(|i| i["id"].clone()), after.get("d2-1").map(|i| i["id"].clone()));
        assert_eq!(node_names(&again), ["d2-0", "d2-1", "d2-2"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rolling_converge_launches_the_new_configuration_with_its_revision() {
        let (oci, state) = cluster_of("cluster", 4).await;
        let old = spec(&config("cluster", 4, IMAGE_A)).revision();
        let new_config = config("cluster", 4, IMAGE_B);
        let new = spec(&new_config).revision();
        assert_ne!(old, new);
        let before = live(&oci).await;
        // The converge before the first batch: a configuration for the new revision; no node touched.
        let state = converge(&oci, &state, &new_config).await;
        let configs = configurations(&oci);
        assert_eq!(configs.len(), 2, "{configs:?}");
        assert!(configs.iter().any(|c| c["freeformTags"]["hpc:revision"] == new.as_str()
            && c["instanceDetails"]["launchDetails"]["sourceDetails"]["imageId"] == IMAGE_B
            && c["instanceDetails"]["launchDetails"]["freeformTags"]["hpc:revision"] == new.as_str()));
        assert_eq!(
            live(&oci).await.iter().map(|(n, i)| (n.clone(), i["id"].clone())).collect::<Vec<_>>(),
            before.iter().map(|(n, i)| (n.clone(), i["id"].clone())).collect::<Vec<_>>()
        );
        // Batch 1: d2-0 and d2-1 remade from the new configuration; d2-2 and d2-3 keep running untouched.
        remove(&oci, &state, &new_config, &["d2-0", "d2-1"]).await.unwrap();
        let state = converge(&oci, &state, &new_config).await;
        let mid = live(&oci).await;
        for n in ["d2-0", "d2-1"] {
            assert_eq!(
                (field(&mid, n, "/imageId"), field(&mid, n, "/freeformTags/hpc:revision")),
                (IMAGE_B.to_owned(), new.clone()),
                "{n}"
            );
        }
        for n in ["d2-2", "d2-3"] {
            assert_eq!(field(&mid, n, "/id"), field(&before, n, "/id"), "{n} untouched");
            assert_eq!(
                (field(&mid, n, "/imageId"), field(&mid, n, "/freeformTags/hpc:revision")),
                (IMAGE_A.to_owned(), old.clone()),
                "{n}"
            );
        }
        let read = read_found(&oci.ctx, &GpuCluster, &state).await;
        let revisions = map(read.get("node_revisions"));
        assert_eq!((revisions["d2-0"].as_str(), revisions["d2-3"].as_str()), (new.as_str(), old.as_str()));
        assert_eq!(configurations(&oci).len(), 2, "the old configuration stays while nodes run it");
        // Batch 2: the rest; the old configuration goes once no node runs it.
        remove(&oci, &state, &new_config, &["d2-2", "d2-3"]).await.unwrap();
        converge(&oci, &state, &new_config).await;
        let after = live(&oci).await;
        assert!(after.values().all(|i| i["imageId"] == IMAGE_B && i["freeformTags"]["hpc:revision"] == new.as_str()), "{after:?}");
        let configs = configurations(&oci);
        assert_eq!(configs.len(), 1, "{configs:?}");
        assert_eq!(configs[0]["freeformTags"]["hpc:revision"], new.as_str());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reboot_resets_the_named_nodes_and_waits_until_they_run_again() {
        let (oci, state) = cluster_of("cluster", 3).await;
        let before = live(&oci).await;
        oci.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": field(&before, "d2-1", "/id"), "state": "STOPPED"})));
        oci.admin(
            "POST",
            "out-of-band",
            Some(json!({"action": "impair", "id": field(&before, "d2-2", "/id"), "maintenance_reboot_due": "2026-12-05T00:00:00.000Z"})),
        );
        oci.admin("DELETE", "counters", None);
        reboot(&oci, &state, &config("cluster", 3, IMAGE_A), &["d2-1", "d2-2"]).await.unwrap();
        assert_eq!(counters(&oci)["core:InstanceAction"], 2);
        let after = live(&oci).await;
        for n in ["d2-0", "d2-1", "d2-2"] {
            assert_eq!(
                (field(&after, n, "/id"), field(&after, n, "/lifecycleState")),
                (field(&before, n, "/id"), "RUNNING".to_owned()),
                "{n}"
            );
        }
        let read = read_found(&oci.ctx, &GpuCluster, &state).await;
        assert_eq!(map(read.get("unhealthy_nodes")), BTreeMap::new(), "a stopped node started, a reset cleared the maintenance reboot");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cluster_network_node_is_detached_and_the_pool_brings_it_back_under_its_name_from_the_new_configuration() {
        let (oci, state) = cluster_of("cluster-network", 3).await;
        let before = live(&oci).await;
        let new_config = config("cluster-network", 3, IMAGE_B);
        let new = spec(&new_config).revision();
        let state = converge(&oci, &state, &new_config).await;
        let cn = &oci.snapshot_of("clusternetwork")[0];
        let pool_config = cn["instancePools"][0]["instanceConfigurationId"].as_str().unwrap().to_owned();
        let configs = configurations(&oci);
        assert_eq!(configs.iter().find(|c| c["id"] == pool_config.as_str()).unwrap()["freeformTags"]["hpc:revision"], new.as_str());
        oci.admin("DELETE", "counters", None);
        remove(&oci, &state, &new_config, &["d2-1"]).await.unwrap();
        let c = counters(&oci);
        assert_eq!((&c["core:DetachInstancePoolInstance"], &c["core:TerminateInstance"]), (&json!(1), &Json::Null), "{c}");
        assert_eq!(oci.snapshot_of("clusternetwork")[0]["instancePools"][0]["size"], 2);
        let state = converge(&oci, &state, &new_config).await;
        let after = live(&oci).await;
        assert_eq!(after.keys().collect::<Vec<_>>(), ["d2-0", "d2-1", "d2-2"]);
        assert_ne!(field(&after, "d2-1", "/id"), field(&before, "d2-1", "/id"));
        assert_eq!((field(&after, "d2-1", "/imageId"), field(&after, "d2-1", "/freeformTags/hpc:revision")), (IMAGE_B.to_owned(), new));
        assert_eq!(field(&after, "d2-0", "/imageId"), IMAGE_A, "the others keep theirs");
        assert_eq!(node_names(&read_found(&oci.ctx, &GpuCluster, &state).await), ["d2-0", "d2-1", "d2-2"]);
        assert_eq!(oci.snapshot_of("clusternetwork")[0]["instancePools"][0]["size"], 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gb200_node_removed_comes_back_in_its_own_domain_from_the_new_configuration() {
        let oci = Oci::start();
        let (_, cluster, _) = super::gb200_two_domains(&oci).await;
        let new_config = value(
            &GpuCluster,
            json!({"name": "nvl", "fabric": super::gb200_fabric_ref("rack"), "node_count": 36, "image": "ocid1.image.oc1..arm64gpu-2",
                   "timeouts": {"create": "60s", "update": "60s"}}),
        );
        let new = spec(&new_config).revision();
        let cluster = converge(&oci, &cluster, &new_config).await;
        let lost =
            cluster.get("nodes").as_list().unwrap().iter().find(|n| n.get("name").as_str() == Some("nvl-20")).unwrap().get("id").clone();
        remove(&oci, &cluster, &new_config, &["nvl-20"]).await.unwrap();
        let repaired = converge(&oci, &cluster, &new_config).await;
        let clusters = oci.memory_clusters().await;
        assert_eq!(clusters["nvl-nvl1"].1, nvl_names(18..36), "back in its own memory cluster");
        let read = read_found(&oci.ctx, &GpuCluster, &repaired).await;
        let revisions = map(read.get("node_revisions"));
        assert_eq!(revisions["nvl-20"], new);
        assert_ne!(revisions["nvl-21"], new, "the others keep theirs");
        let node =
            read.get("nodes").as_list().unwrap().iter().find(|n| n.get("name").as_str() == Some("nvl-20")).unwrap().get("id").clone();
        assert_ne!(node, lost);
    }
}

// ---------------------------------------------------- quota in the plan, capacity policy under a host limit

fn oci_spec(shape: &str, capacity: &str) -> hpc_provider::model::ClusterSpec {
    // On a fabric in the availability domain; a rack-scale shape is planned in whole NVLink domains.
    let sku = hpc_provider::catalog::find_sku(hpc_provider::catalog::Cloud::Oci, shape).unwrap();
    let nodes = sku.nvlink_domain.map_or(2, |d| d.nodes);
    let fabric = json!({"id": format!("oci/us-ashburn-1/{COMPARTMENT}/q"), "name": "q", "cloud": "oci", "region": "us-ashburn-1",
                        "zone": AD, "instance_type": shape, "placement": "cluster"});
    let mut config = json!({"name": "q", "fabric": fabric, "node_count": nodes, "capacity_type": capacity, "workload": "inference",
                            "image": "ocid1.image.oc1..gpu"});
    if capacity == "reservation" {
        config["reservation_id"] = json!("ocid1.capacityreservation.oc1..r");
    }
    let mut d = hpc_provider::framework::Diagnostics::new();
    hpc_provider::planner::spec::parse_cluster(&value(&GpuCluster, config), &mut d)
        .unwrap_or_else(|| panic!("{shape} {capacity}: {:?}", d.iter().map(|d| d.detail.clone()).collect::<Vec<_>>()))
}

#[test]
fn every_oci_gpu_shape_draws_on_its_gpu_limit_in_the_availability_domain_on_demand_and_spot_but_not_reserved() {
    let backend = hpc_provider::clouds::backend::cluster(hpc_provider::catalog::Cloud::Oci);
    let shapes: Vec<&hpc_provider::catalog::Sku> = hpc_provider::catalog::skus(hpc_provider::catalog::Cloud::Oci).collect();
    assert!(shapes.len() >= 9, "{}", shapes.len());
    for sku in shapes {
        for capacity in ["on-demand", "spot"] {
            let family = backend.quota(&oci_spec(sku.name, capacity)).unwrap_or_else(|| panic!("{} {capacity}: no quota", sku.name));
            assert_eq!((family.scope.as_str(), family.unit, family.per_node), (AD, "GPUs", u64::from(sku.gpu_count)), "{}", sku.name);
            assert_eq!(Some(family.id.as_str()), hpc_provider::clouds::oci::limits::limit_name(sku.name));
            assert!(family.request.contains(&family.id) && family.request.contains("region=us-ashburn-1"), "{}", family.request);
        }
        assert_eq!(backend.quota(&oci_spec(sku.name, "reservation")), None, "{}", sku.name);
    }
    let h100 = backend.quota(&oci_spec("BM.GPU.H100.8", "on-demand")).unwrap();
    assert_eq!((h100.id.as_str(), h100.per_node), ("gpu-h100-count", 8));
    assert_eq!(hpc_provider::clouds::oci::limits::region_of(&h100), "us-ashburn-1");
    let error = |status: u16, code: &str, message: &str| {
        hpc_provider::clouds::oci::api::error(status, &serde_json::json!({"code": code, "message": message}), "creating node x-1")
    };
    assert_eq!(error(500, "InternalError", "Out of host capacity.").capacity_code(), Some("Out of host capacity"));
    assert_eq!(error(400, "LimitExceeded", "too many").capacity_code(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gpu_limit_is_read_from_the_limits_service_with_the_usage_of_the_nodes_that_run() {
    let oci = Oci::start();
    let backend = hpc_provider::clouds::backend::cluster(hpc_provider::catalog::Cloud::Oci);
    let family = backend.quota(&oci_spec("BM.GPU.H100.8", "on-demand")).unwrap();
    oci.admin("POST", "quota", Some(json!({"id": "gpu-h100-count", "scope": AD, "limit": 40})));
    fabric(&oci.ctx, "lib", "cluster").await;
    cluster(&oci.ctx, &cluster_config("lib", "lib", "cluster", 3)).await;
    let r = backend.read_quota(&oci.ctx, &family).await.unwrap();
    assert_eq!((r.limit, r.used, r.free()), (40, 24, 16));
    assert_eq!(oci.admin("GET", "counters", None)["counters"]["limits:GetResourceAvailability"], 1);
    // A limit the service does not report on: an error that says which call failed and why.
    let other = hpc_provider::clouds::quota::QuotaFamily { id: "no-such-limit".into(), ..family };
    let e = backend.read_quota(&oci.ctx, &other).await.unwrap_err().message;
    assert!(e.contains("GetResourceAvailability") && e.contains("404") && e.contains("no-such-limit"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_beyond_the_gpu_limit_is_refused_naming_the_limit_the_need_and_what_is_free() {
    let oci = Oci::start();
    oci.admin("POST", "quota", Some(json!({"id": "gpu-h100-count", "scope": AD, "limit": 24})));
    let mut d = hpc_provider::framework::Diagnostics::new();
    let config = cluster_config("big", "lib", "cluster", 4);
    let req = || hpc_provider::framework::PlanRequest { prior: &Value::Null, proposed: &config, config: &config, prior_private: &[] };
    let planned = GpuCluster.plan(&oci.ctx, req(), &mut d).planned;
    GpuCluster.check_plan(&oci.ctx, req(), &planned, &mut d).await;
    let errors: Vec<String> = d.iter().filter(|d| d.summary.starts_with("Not enough OCI quota")).map(|d| d.detail.clone()).collect();
    assert_eq!(errors.len(), 1, "{:?}", d.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect::<Vec<_>>());
    for part in ["32 GPUs of the quota", "(gpu-h100-count)", "The quota is 24 GPUs, 0 in use, 24 free", "node_count = 3 (what fits)"] {
        assert!(errors[0].contains(part), "{part}: {}", errors[0]);
    }
    assert!(oci.inventory("core", "instance") == Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_network_under_a_host_limit_names_what_came_and_all_or_nothing_launches_nothing() {
    let oci = Oci::start();
    fabric(&oci.ctx, "cn", "cluster-network").await;
    oci.admin("POST", "capacity", Some(json!({"zone": AD, "instance_type": "BM.GPU.H100.8", "available": 2})));
    let (kept, diags) =
        apply(&oci.ctx, &GpuCluster, &Value::Null, &with_policy("part", "cn", "cluster-network", 3, "keep-partial", None)).await;
    assert_out_of_host_capacity(diagnostic(&diags, &format!("Not enough BM.GPU.H100.8 capacity in {AD}")));
    // The two the pool got carry the cluster's names.
    assert_eq!(node_names(&kept), ["part-0", "part-1"]);
    let oci = Oci::start();
    fabric(&oci.ctx, "cn", "cluster-network").await;
    oci.admin("POST", "capacity", Some(json!({"zone": AD, "instance_type": "BM.GPU.H100.8", "available": 2})));
    oci.admin("DELETE", "counters", None);
    let (none, diags) =
        apply(&oci.ctx, &GpuCluster, &Value::Null, &with_policy("aon", "cn", "cluster-network", 3, "all-or-nothing", None)).await;
    let said = diagnostic(&diags, "Not enough BM.GPU.H100.8 capacity");
    assert!(said.contains("OCI's capacity report") && said.contains("gives 2 free BM.GPU.H100.8 host(s)"), "{said}");
    assert!(said.contains("nothing was launched"), "{said}");
    assert!(node_names(&none).is_empty());
    // OCI's capacity report asked once, and the cluster network never made: nothing to release.
    let c = oci.admin("GET", "counters", None)["counters"].clone();
    assert_eq!(c["core:CreateComputeCapacityReport"], 1, "{c}");
    assert!(c.get("core:CreateClusterNetwork").is_none() && c.get("core:LaunchInstance").is_none(), "{c}");
}

/// An all-or-nothing cluster in a compute cluster that OCI's capacity report says cannot be filled is not
/// launched at all (before, its nodes were launched one by one until the hosts ran out, then released);
/// an at-least cluster whose minimum the report can fill is launched and keeps what came; a cluster
/// that adds no node asks no report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_all_or_nothing_launch_the_capacity_report_cannot_fill_launches_nothing() {
    let oci = Oci::start();
    let f = fabric(&oci.ctx, "cc", "cluster").await;
    oci.admin("POST", "capacity", Some(json!({"zone": AD, "instance_type": "BM.GPU.H100.8", "available": 2})));
    oci.admin("DELETE", "counters", None);
    oci.admin("DELETE", "events", None);
    let (none, diags) = apply(&oci.ctx, &GpuCluster, &Value::Null, &with_policy("aon", "cc", "cluster", 3, "all-or-nothing", None)).await;
    let said = diagnostic(&diags, &format!("Not enough BM.GPU.H100.8 capacity in {AD}"));
    assert_out_of_host_capacity(said);
    assert!(said.contains("this apply needs 3 of the 3 node(s) it adds") && said.contains("nothing was launched"), "{said}");
    assert!(node_names(&none).is_empty(), "{none:?}");
    let c = oci.admin("GET", "counters", None)["counters"].clone();
    assert_eq!(c["core:CreateComputeCapacityReport"], 1, "{c}");
    assert!(c.get("core:LaunchInstance").is_none(), "no node launched: {c}");
    assert_eq!(oci.admin("GET", "events", None)["events"], json!([]), "nothing created, nothing released");

    // At least 2 of 3: the report's 2 free hosts fill the minimum, so the launch goes ahead and keeps them.
    let (some, diags) = apply(&oci.ctx, &GpuCluster, &none, &with_policy("aon", "cc", "cluster", 3, "at-least", Some(2))).await;
    assert!(diags.iter().all(|d| d.starts_with("2 of 3 nodes: capacity short")), "only the shortfall's warning: {diags:?}");
    assert_eq!(oci.inventory("core", "instance"), Some(2));
    // Capacity back: the apply that adds the third asks again and launches it.
    oci.admin("POST", "capacity", Some(json!({"zone": AD, "instance_type": "BM.GPU.H100.8", "available": null})));
    oci.admin("DELETE", "counters", None);
    let config = with_policy("aon", "cc", "cluster", 3, "all-or-nothing", None);
    let (whole, diags) = apply(&oci.ctx, &GpuCluster, &some, &config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let c = oci.admin("GET", "counters", None)["counters"].clone();
    assert_eq!((c["core:CreateComputeCapacityReport"].as_u64(), c["core:LaunchInstance"].as_u64()), (None, Some(1)), "{c}");
    destroy(&oci.ctx, &GpuCluster, &whole).await;
    destroy(&oci.ctx, &GpuFabric, &f).await;
    oci.assert_empty();
}
