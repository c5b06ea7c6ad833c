//! The AWS resources through the provider's own Resource implementations against the AWS emulator: the
//! options the acceptance case does not cover (capacity blocks, spot, SSH keys, user data, scale-down,
//! tags), what they become in EC2, and that an import gives back exactly the created state; and the
//! cluster backend's day-2 operations (health in the refresh, removing, rebooting and rolling nodes).
//!
//! The behaviours every cloud keeps (create, grow, shrink, drift, import, ownership, capacity policies, repair,
//! rolling updates, destroy) are in `contract.rs`; this file keeps what only AWS has.
//!
//! Each test starts its own emulator (moto in a child process): faults and the inventory are an
//! emulator's, so tests never see each other's.

mod common;

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{MarketType, ResponseLaunchTemplateData};
use base64::Engine;
use common::{apply, destroy, diagnostic, import_and_read, lines, provider_context, read, read_found, try_import, value};
use hpc_emulators::harness::{AwsEmulator, admin, start_aws};
use hpc_provider::framework::{Context, ReadOutcome, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
use serde_json::json;

/// An AWS emulator and a provider configured for it (with default tags).
struct Env {
    emulator: AwsEmulator,
    ctx: Context,
}

impl Env {
    fn start() -> Self {
        let emulator = start_aws();
        let ctx = provider_context(json!({"default_tags": {"cost-center": "42"},
            "aws": {"region": "us-east-1", "endpoint": emulator.endpoint, "access_key": "t", "secret_key": "t"}}));
        Env { emulator, ctx }
    }

    fn admin(&self, method: &str, route: &str, body: Option<serde_json::Value>) -> serde_json::Value {
        admin(&self.emulator.endpoint, method, route, body)
    }

    fn ec2(&self) -> aws_sdk_ec2::Client {
        let config = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .credentials_provider(aws_credential_types::Credentials::new("t", "t", None, None, "static"))
            .endpoint_url(&self.emulator.endpoint)
            .build();
        aws_sdk_ec2::Client::from_conf(config)
    }

    /// The EC2 instances in the emulator's inventory.
    fn nodes(&self) -> Vec<serde_json::Value> {
        self.admin("GET", "inventory", None)["resources"]["ec2"]["instances"].as_array().unwrap().clone()
    }

    /// Fabric `cb`, created without a diagnostic.
    async fn fabric(&self) -> Value {
        let fabric_config = value(
            &GpuFabric,
            json!({"name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge", "placement": "none"}),
        );
        let (fabric, diags) = apply(&self.ctx, &GpuFabric, &Value::Null, &fabric_config).await;
        assert!(diags.is_empty(), "{diags:?}");
        fabric
    }
}

const FABRIC_REF: fn() -> serde_json::Value = || {
    json!({"id": "aws/us-east-1/cb", "name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
           "instance_type": "p5en.48xlarge", "placement": "none"})
};

/// Cluster `cbc`: two p5en nodes in a capacity block, with an SSH key, user data and a tag of the user's.
struct CapacityBlock {
    env: Env,
    reservation: String,
    fabric: Value,
    config: Value,
    cluster: Value,
}

async fn capacity_block_cluster() -> CapacityBlock {
    let env = Env::start();
    let reservation = env
        .ec2()
        .create_capacity_reservation()
        .instance_type("p5en.48xlarge")
        .instance_platform("Linux/UNIX".into())
        .availability_zone("us-east-1a")
        .instance_count(2)
        .send()
        .await
        .unwrap()
        .capacity_reservation
        .unwrap()
        .capacity_reservation_id
        .unwrap();
    let fabric = env.fabric().await;
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv1ZcBc1wOuYkqHsKPbRnSLQzBhEo5f6QWq1Yb5Kx5O ml@example";
    let config = value(
        &GpuCluster,
        json!({"name": "cbc", "fabric": FABRIC_REF(), "node_count": 2, "capacity_type": "capacity-block", "reservation_id": reservation,
               "image": "ami-12c6146b", "ssh_public_key": key, "user_data": "#!/bin/sh\necho ready\n", "workload": "finetuning",
               "tags": {"team": "ml"}}),
    );
    let (cluster, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| !d.starts_with("Creating")), "{diags:?}");
    assert_eq!(cluster.get("id").as_str(), Some("aws/us-east-1/cbc"));
    CapacityBlock { env, reservation, fabric, config, cluster }
}

impl CapacityBlock {
    /// What EC2 got: the latest version of the cluster's launch template.
    async fn launch_template(&self) -> ResponseLaunchTemplateData {
        let lt =
            self.env.ec2().describe_launch_template_versions().launch_template_name("cbc-lt").versions("$Latest").send().await.unwrap();
        lt.launch_template_versions()[0].launch_template_data().unwrap().clone()
    }

    /// The cluster's configuration with `node_count` and the user's tags changed.
    fn resized(&self, nodes: i64, team: &str) -> Value {
        let mut config = self.config.as_map().unwrap().clone();
        config.insert("node_count".into(), Value::int(nodes));
        config.insert("tags".into(), Value::Map([("team".to_owned(), Value::from(team))].into()));
        Value::Map(config)
    }
}

#[tokio::test]
async fn a_capacity_block_reaches_ec2_through_the_market_and_reservation_options() {
    let cb = capacity_block_cluster().await;
    let data = cb.launch_template().await;
    assert_eq!(data.instance_market_options().and_then(|m| m.market_type()), Some(&MarketType::CapacityBlock));
    let target = data.capacity_reservation_specification().and_then(|c| c.capacity_reservation_target()).unwrap();
    assert_eq!(target.capacity_reservation_id(), Some(cb.reservation.as_str()));
}

#[tokio::test]
async fn an_ssh_public_key_becomes_the_nodes_key_pair() {
    let cb = capacity_block_cluster().await;
    assert_eq!(cb.launch_template().await.key_name(), Some("cbc-key"));
}

#[tokio::test]
async fn user_data_reaches_the_launch_template_unchanged() {
    let cb = capacity_block_cluster().await;
    let data = cb.launch_template().await;
    let user_data = base64::engine::general_purpose::STANDARD.decode(data.user_data().unwrap()).unwrap();
    assert_eq!(user_data, b"#!/bin/sh\necho ready\n");
}

#[tokio::test]
async fn a_p5en_node_gets_16_efa_cards_and_no_public_ip_setting() {
    let cb = capacity_block_cluster().await;
    let data = cb.launch_template().await;
    assert_eq!(data.network_interfaces().len(), 16);
    // EC2 refuses AssociatePublicIpAddress, even false, once a launch has more than one interface.
    assert!(data.network_interfaces().iter().all(|n| n.associate_public_ip_address().is_none()), "{:?}", data.network_interfaces());
}

#[tokio::test]
async fn placement_none_puts_the_nodes_in_no_placement_group() {
    let cb = capacity_block_cluster().await;
    let data = cb.launch_template().await;
    assert!(data.placement().and_then(|p| p.group_name()).is_none_or(str::is_empty), "placement = none: no group");
}

#[tokio::test]
async fn every_node_carries_the_users_tags_the_default_tags_and_the_providers() {
    let cb = capacity_block_cluster().await;
    let nodes = cb.env.nodes();
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        for (k, v) in [("team", "ml"), ("cost-center", "42"), ("hpc:cluster", "cbc"), ("hpc:fabric", "cb")] {
            assert_eq!(n["tags"][k], v, "{n}");
        }
    }
}

#[tokio::test]
async fn an_import_gives_back_exactly_the_created_cluster_and_fabric() {
    let cb = capacity_block_cluster().await;
    let imported = import_and_read(&cb.env.ctx, &GpuCluster, "aws/us-east-1/cbc").await;
    assert_eq!(imported, cb.cluster);
    let imported_fabric = import_and_read(&cb.env.ctx, &GpuFabric, "aws/us-east-1/cb").await;
    assert_eq!(imported_fabric, cb.fabric);
}

#[tokio::test]
async fn the_node_identity_is_the_nodes_instance_profile_and_an_import_gives_it_back() {
    let env = Env::start();
    env.fabric().await;
    let profile = "arn:aws:iam::123456789012:instance-profile/hpc/selfcheck";
    let config = value(
        &GpuCluster,
        json!({"name": "idc", "fabric": FABRIC_REF(), "node_count": 1, "node_identity": profile,
               "update_strategy": {"wait_for_selfcheck": true}, "user_data": common::selfcheck_user_data()}),
    );
    let (cluster, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| !d.starts_with("Creating")), "{diags:?}");
    let lt = env.ec2().describe_launch_template_versions().launch_template_name("idc-lt").versions("$Latest").send().await.unwrap();
    let data = lt.launch_template_versions()[0].launch_template_data().unwrap();
    assert_eq!(data.iam_instance_profile().and_then(|p| p.arn()), Some(profile), "the self-check tags its node as this profile");
    let imported = import_and_read(&env.ctx, &GpuCluster, "aws/us-east-1/idc").await;
    assert_eq!(imported.get("node_identity"), &Value::from(profile));
    assert_eq!(imported.get("revision"), cluster.get("revision"), "the identity is part of the node configuration");
}

#[tokio::test]
async fn a_tag_change_reaches_the_nodes_that_stay_after_a_scale_down() {
    let cb = capacity_block_cluster().await;
    let (cluster, diags) = apply(&cb.env.ctx, &GpuCluster, &cb.cluster, &cb.resized(1, "research")).await;
    assert!(diags.iter().all(|d| !d.starts_with("Updating")), "{diags:?}");
    assert_eq!(cluster.get("node_names"), &Value::list([Value::from("cbc-0")]));
    let nodes = cb.env.nodes();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["tags"]["hpc:node"], "cbc-0");
    assert_eq!(nodes[0]["tags"]["team"], "research");
}

#[tokio::test]
async fn destroy_leaves_nothing_behind_the_key_pair_included() {
    let cb = capacity_block_cluster().await;
    destroy(&cb.env.ctx, &GpuCluster, &cb.cluster).await;
    destroy(&cb.env.ctx, &GpuFabric, &cb.fabric).await;
    let inv = cb.env.admin("GET", "inventory", None);
    assert_eq!(inv["resources"]["ec2"]["key_pairs"], json!([]));
    assert_eq!(inv["resources"]["ec2"]["instances"], json!([]));
}

#[tokio::test]
async fn a_cluster_whose_fabric_was_never_built_says_to_apply_the_fabric_first() {
    let env = Env::start();
    // The apply says what to do and creates nothing.
    let config = value(&GpuCluster, json!({"name": "orphan", "fabric": FABRIC_REF(), "node_count": 1, "image": "ami-12c6146b"}));
    let (state, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().any(|d| d.contains("fabric cb has no security group") && d.contains("apply the fabric first")), "{diags:?}");
    assert_eq!(state.get("node_count"), &Value::int(0), "nothing launched: {state:?}");
}

#[tokio::test]
async fn an_import_id_in_the_wrong_form_is_a_diagnostic_naming_the_right_one() {
    let env = Env::start();
    let (imported, text) = try_import(&env.ctx, &GpuCluster, "us-east-1/train").await;
    assert!(imported.is_none());
    assert!(text[0].contains("Invalid import id") && text[0].contains("aws/us-east-1/train-nodes"), "{text:?}");
}

#[tokio::test]
async fn importing_a_fabric_that_does_not_exist_is_a_diagnostic() {
    let env = Env::start();
    let (imported, text) = try_import(&env.ctx, &GpuFabric, "aws/us-east-1/nope").await;
    assert!(imported.is_none());
    assert!(text[0].contains("Cannot import the fabric") && text[0].contains("no fabric named \"nope\""), "{text:?}");
}

#[tokio::test]
async fn a_cluster_deleted_outside_reads_as_gone_so_the_plan_creates_it() {
    let env = Env::start();
    env.fabric().await;
    let config = value(&GpuCluster, json!({"name": "gone", "fabric": FABRIC_REF(), "node_count": 2, "image": "ami-12c6146b"}));
    let (cluster, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| d.starts_with("No proximity placement")), "{diags:?}");

    // Someone deletes the whole cluster by hand: every node and the launch template.
    for node in env.nodes() {
        env.admin("POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": node["id"]})));
    }
    env.ec2().delete_launch_template().launch_template_name("gone-lt").send().await.unwrap();
    let (outcome, diags) = read(&env.ctx, &GpuCluster, &cluster).await;
    assert!(matches!(outcome, ReadOutcome::Gone));
    assert!(!diags.has_errors(), "{:?}", lines(&diags));
    // Nothing of the cluster is left (the fabric is).
    let inv = env.admin("GET", "inventory", None);
    assert_eq!((&inv["resources"]["ec2"]["instances"], &inv["resources"]["ec2"]["launch_templates"]), (&json!([]), &json!([])), "{inv}");
}

#[tokio::test]
async fn a_fabric_deleted_outside_reads_as_gone_so_the_plan_creates_it() {
    let env = Env::start();
    let fabric = env.fabric().await;
    // Someone deletes the fabric by hand: its security group, then its network.
    let client = env.ec2();
    let groups = client
        .describe_security_groups()
        .filters(aws_sdk_ec2::types::Filter::builder().name("group-name").values("cb-efa").build())
        .send()
        .await
        .unwrap();
    let sg_id = groups.security_groups()[0].group_id().unwrap().to_owned();
    client.delete_security_group().group_id(&sg_id).send().await.unwrap();
    let subnet = fabric.get("subnet_id").as_str().unwrap();
    client.delete_subnet().subnet_id(subnet).send().await.unwrap();
    client.delete_vpc().vpc_id(fabric.get("vpc_id").as_str().unwrap()).send().await.unwrap();
    let (outcome, diags) = read(&env.ctx, &GpuFabric, &fabric).await;
    assert!(matches!(outcome, ReadOutcome::Gone));
    assert!(!diags.has_errors(), "{:?}", lines(&diags));
    assert_eq!(env.admin("GET", "inventory", None)["empty"], true);
}

/// A one-node cluster `dies` whose node EC2 terminates right after the launch: its configuration, the
/// state the apply left and its diagnostics.
async fn a_node_dies_at_launch(env: &Env) -> (Value, Value, Vec<String>) {
    env.fabric().await;
    env.admin("POST", "faults", Some(json!({"service": "ec2", "operation": "RunInstances", "kind": "terminate_at_launch", "times": 1})));
    let config = value(&GpuCluster, json!({"name": "dies", "fabric": FABRIC_REF(), "node_count": 1, "image": "ami-12c6146b"}));
    let (state, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config).await;
    (config, state, diags)
}

#[tokio::test]
async fn nodes_that_die_at_launch_fail_the_apply_with_ec2s_reason() {
    let env = Env::start();
    let (_, _, diags) = a_node_dies_at_launch(&env).await;
    // EC2's reason names its capacity code: the one capacity diagnostic, with the cloud's words in it.
    let failure = diagnostic(&diags, "Not enough p5en.48xlarge capacity in us-east-1a");
    assert!(failure.contains("(InsufficientInstanceCapacity)"), "{failure}");
    assert!(failure.contains("node dies-0") && failure.contains("went to terminated instead of running"), "{failure}");
    assert!(failure.contains("Server.InsufficientInstanceCapacity: Insufficient capacity."), "{failure}");
}

#[tokio::test]
async fn a_cluster_whose_nodes_died_at_launch_stays_in_state_with_the_nodes_that_exist() {
    let env = Env::start();
    let (_, state, _) = a_node_dies_at_launch(&env).await;
    // The state keeps the cluster (its launch template exists) with the nodes that really exist: none.
    assert_eq!(state.get("id").as_str(), Some("aws/us-east-1/dies"));
    assert_eq!(state.get("node_count"), &Value::int(0));
}

#[tokio::test]
async fn the_apply_after_nodes_died_at_launch_finishes_the_cluster() {
    let env = Env::start();
    let (config, state, _) = a_node_dies_at_launch(&env).await;
    // The CLI replaces the tainted cluster; converging in place works too.
    let (state, diags) = apply(&env.ctx, &GpuCluster, &state, &config).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(state.get("node_names"), &Value::list([Value::from("dies-0")]));
}

/// EC2's idempotency: a RunInstances `ClientToken` is a "Unique, case-sensitive identifier you provide to
/// ensure the idempotency of the request". A launch EC2 carried out whose answer was lost (a 503) is sent
/// again by the SDK under the batch's token, and answered with the first launch's reservation: each node is
/// launched once.
#[tokio::test]
async fn a_launch_whose_answer_was_lost_is_sent_again_under_its_client_token_and_made_once() {
    let env = Env::start();
    env.fabric().await;
    env.admin("POST", "faults", Some(json!({"service": "ec2", "operation": "RunInstances", "kind": "answer_lost", "times": 1})));
    env.admin("DELETE", "events", None);
    let config = value(&GpuCluster, json!({"name": "once", "fabric": FABRIC_REF(), "node_count": 2, "image": "ami-12c6146b"}));
    let (state, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(env.admin("GET", "faults", None)["faults"][0]["fired"], 1);
    assert_eq!(env.admin("GET", "counters", None)["counters"]["ec2:RunInstances"], 2, "the batch sent twice");
    let launched: Vec<serde_json::Value> = env.admin("GET", "events", None)["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["event"] == "created")
        .collect();
    assert_eq!(launched.len(), 2, "each node launched once: {launched:?}");
    assert_eq!(env.nodes().len(), 2, "{:?}", env.nodes());
    assert_eq!(state.get("node_names"), &Value::list([Value::from("once-0"), Value::from("once-1")]));
}

#[tokio::test]
async fn a_throttled_ec2_read_is_retried() {
    let env = Env::start();
    let fabric = env.fabric().await;
    // EC2 throttles twice (RequestLimitExceeded, HTTP 503): the SDK's standard retries absorb it.
    env.admin("POST", "faults", Some(json!({"service": "ec2", "operation": "DescribeSecurityGroups", "kind": "throttle", "times": 2})));
    let (outcome, diags) = read(&env.ctx, &GpuFabric, &fabric).await;
    assert!(matches!(outcome, ReadOutcome::Found { .. }));
    assert!(!diags.has_errors());
    let fired = env.admin("GET", "faults", None);
    assert_eq!(fired["faults"][0]["fired"], 2, "{fired}");
}

#[tokio::test]
async fn an_ec2_error_that_does_not_go_away_is_a_diagnostic_and_the_state_is_kept() {
    let env = Env::start();
    let fabric = env.fabric().await;
    // It reaches the user in EC2's words, and the state is kept as it was.
    env.admin("POST", "faults", Some(json!({"service": "ec2", "operation": "DescribeSecurityGroups", "kind": "server_error"})));
    let (outcome, diags) = read(&env.ctx, &GpuFabric, &fabric).await;
    assert!(matches!(outcome, ReadOutcome::Found { state, .. } if state == fabric));
    let text = lines(&diags);
    assert!(text.iter().any(|t| t.starts_with("Reading the fabric failed") && t.contains("InternalError")), "{text:?}");
}

fn data_config(repo: &str) -> Value {
    value(
        &ParallelFilesystem,
        json!({"name": "data", "fabric": FABRIC_REF(), "capacity_gib": 1200, "throughput_per_tib": 250, "data_repository": repo}),
    )
}

/// Fabric `cb` and filesystem `data`, moved from data repository v1 to v2: the fabric, the id FSx gave the
/// filesystem, and its state.
async fn data_repository_moved(env: &Env) -> (Value, String, Value) {
    let fabric = env.fabric().await;
    let (fs, diags) = apply(&env.ctx, &ParallelFilesystem, &Value::Null, &data_config("s3://datasets/v1")).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    let fs_id = fs.get("id").as_str().unwrap().rsplit('/').next().unwrap().to_owned();
    let (fs, diags) = apply(&env.ctx, &ParallelFilesystem, &fs, &data_config("s3://datasets/v2")).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    (fabric, fs_id, fs)
}

#[tokio::test]
async fn a_new_data_repository_replaces_the_old_association_once_fsx_has_deleted_it() {
    let env = Env::start();
    // FSx deletes an association asynchronously, and "/" holds one at a time: the new one is made once the
    // old one is gone.
    let (fabric, fs_id, fs) = data_repository_moved(&env).await;
    assert_eq!(fs.get("data_repository").as_str(), Some("s3://datasets/v2"));
    let snapshot = env.admin("GET", "snapshot", None);
    let associations: Vec<serde_json::Value> = snapshot["resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["kind"] == "data_repository_association")
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(associations.len(), 1, "{associations:?}");
    assert_eq!(associations[0]["FileSystemId"], fs_id.as_str());
    assert_eq!(associations[0]["FileSystemPath"], "/");
    assert_eq!(associations[0]["DataRepositoryPath"], "s3://datasets/v2");

    destroy(&env.ctx, &ParallelFilesystem, &fs).await;
    destroy(&env.ctx, &GpuFabric, &fabric).await;
    assert_eq!(env.admin("GET", "inventory", None)["empty"], true);
}

#[tokio::test]
async fn a_refresh_reads_the_new_data_repository_association_not_the_one_being_deleted() {
    let env = Env::start();
    let (_, _, fs) = data_repository_moved(&env).await;
    let state = read_found(&env.ctx, &ParallelFilesystem, &fs).await;
    assert_eq!(state.get("data_repository").as_str(), Some("s3://datasets/v2"));
}

// ---------------------------------------------------------------------- UltraServers (p6e-gb200, issue 23)

const GB_FABRIC_REF: fn() -> serde_json::Value = || {
    json!({"id": "aws/us-east-1/gbf", "name": "gbf", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
           "instance_type": "p6e-gb200.36xlarge", "placement": "none"})
};

/// Fabric `gbf` for p6e-gb200 nodes and a Capacity Block of `count` u-p6e-gb200x72 UltraServers bought for
/// it, as a user buys one: DescribeCapacityBlockOfferings by UltraServer type, then PurchaseCapacityBlock.
struct UltraServers {
    env: Env,
    fabric: Value,
    block: String,
    reservations: Vec<String>,
}

async fn ultraservers(count: i32) -> UltraServers {
    let env = Env::start();
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "gbf", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p6e-gb200.36xlarge", "placement": "none"}),
    );
    let (fabric, diags) = apply(&env.ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    let ec2 = env.ec2();
    let offers = ec2
        .describe_capacity_block_offerings()
        .ultraserver_type("u-p6e-gb200x72")
        .ultraserver_count(count)
        .capacity_duration_hours(24)
        .send()
        .await
        .unwrap();
    let offer = offers.capacity_block_offerings()[0].capacity_block_offering_id().unwrap().to_owned();
    let bought = ec2
        .purchase_capacity_block()
        .capacity_block_offering_id(offer)
        .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
        .send()
        .await
        .unwrap();
    let block = &bought.capacity_blocks()[0];
    UltraServers {
        block: block.capacity_block_id().unwrap().to_owned(),
        reservations: block.capacity_reservation_ids().to_vec(),
        env,
        fabric,
    }
}

impl UltraServers {
    fn config(&self, nodes: u32) -> Value {
        value(
            &GpuCluster,
            json!({"name": "gb", "fabric": GB_FABRIC_REF(), "node_count": nodes, "capacity_type": "capacity-block",
                   "reservation_id": self.block, "image": "ami-12c6146b"}),
        )
    }

    /// Each live node of cluster `gb` with the capacity reservation it runs in.
    async fn reservation_of_nodes(&self) -> BTreeMap<String, String> {
        let out = self
            .env
            .ec2()
            .describe_instances()
            .filters(aws_sdk_ec2::types::Filter::builder().name("tag:hpc:cluster").values("gb").build())
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
            .send()
            .await
            .unwrap();
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| {
                let node = i.tags().iter().find(|t| t.key() == Some("hpc:node")).and_then(|t| t.value()).unwrap_or_default();
                (node.to_owned(), i.capacity_reservation_id().unwrap_or_default().to_owned())
            })
            .collect()
    }

    /// Nodes `from..to` all run in reservation `k` of the block.
    async fn assert_domain(&self, from: u32, to: u32, k: usize) {
        let placed = self.reservation_of_nodes().await;
        for i in from..to {
            assert_eq!(placed.get(&format!("gb-{i}")), Some(&self.reservations[k]), "gb-{i}: {placed:?}");
        }
    }

    async fn available(&self) -> Vec<i32> {
        let out = self
            .env
            .ec2()
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(Some(self.reservations.clone()))
            .send()
            .await
            .unwrap();
        out.capacity_reservations().iter().map(|r| r.available_instance_count().unwrap()).collect()
    }
}

#[tokio::test]
async fn each_nvlink_domain_runs_in_its_own_ultraserver_of_the_capacity_block() {
    let us = ultraservers(3).await;
    let (cluster, diags) = apply(&us.env.ctx, &GpuCluster, &Value::Null, &us.config(36)).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    assert_eq!(cluster.get("node_count"), &Value::int(36));
    us.assert_domain(0, 18, 0).await;
    us.assert_domain(18, 36, 1).await;
    assert_eq!(us.available().await, [0, 0, 18]);
    // The launch template names no reservation (a cb- id is none); it records the block for an import.
    let lt = us.env.ec2().describe_launch_template_versions().launch_template_name("gb-lt").versions("$Latest").send().await.unwrap();
    let data = lt.launch_template_versions()[0].launch_template_data().unwrap();
    assert!(data.capacity_reservation_specification().and_then(|c| c.capacity_reservation_target()).is_none(), "{data:?}");
    assert_eq!(data.instance_market_options().and_then(|m| m.market_type()), Some(&MarketType::CapacityBlock));
    let imported = import_and_read(&us.env.ctx, &GpuCluster, "aws/us-east-1/gb").await;
    assert_eq!(imported.get("reservation_id").as_str(), Some(us.block.as_str()));
    assert_eq!(imported, cluster, "an import gives back the created cluster");

    // A refresh stays three calls (the nodes' health among them), and never reads the block.
    us.env.admin("DELETE", "counters", None);
    read_found(&us.env.ctx, &GpuCluster, &cluster).await;
    let counters = us.env.admin("GET", "counters", None)["counters"].clone();
    assert_eq!(
        counters,
        json!({"ec2:DescribeInstanceStatus": 3, "ec2:DescribeInstances": 1, "ec2:DescribeLaunchTemplates": 1}),
        "{counters}"
    );

    // A node lost out of band comes back into its own domain's UltraServer.
    let lost = us.env.nodes().into_iter().find(|n| n["tags"]["hpc:node"] == "gb-20").unwrap();
    us.env.admin("POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": lost["id"]})));
    assert_eq!(us.available().await, [0, 1, 18]);
    let state = read_found(&us.env.ctx, &GpuCluster, &cluster).await;
    us.env.admin("DELETE", "counters", None);
    let (cluster, diags) = apply(&us.env.ctx, &GpuCluster, &state, &us.config(36)).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    assert_eq!(us.env.admin("GET", "counters", None)["counters"]["ec2:DescribeCapacityBlocks"], 1, "one block lookup per apply");
    us.assert_domain(18, 36, 1).await;
    assert_eq!(us.available().await, [0, 0, 18]);

    // Scaling to three domains launches the third into the block's third UltraServer.
    let (cluster, diags) = apply(&us.env.ctx, &GpuCluster, &cluster, &us.config(54)).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    assert_eq!(cluster.get("node_count"), &Value::int(54));
    us.assert_domain(36, 54, 2).await;

    // Destroy terminates the nodes and leaves the block and its reservations as they were bought.
    destroy(&us.env.ctx, &GpuCluster, &cluster).await;
    destroy(&us.env.ctx, &GpuFabric, &us.fabric).await;
    let inv = us.env.admin("GET", "inventory", None);
    assert_eq!((&inv["resources"]["ec2"]["instances"], &inv["resources"]["ec2"]["launch_templates"]), (&json!([]), &json!([])), "{inv}");
    assert_eq!(inv["resources"]["ec2"]["capacity_blocks"], json!([us.block]));
    assert_eq!(us.available().await, [18, 18, 18]);
    let block = us.env.ec2().describe_capacity_blocks().capacity_block_ids(&us.block).send().await.unwrap();
    assert_eq!(block.capacity_blocks()[0].state().map(|s| s.as_str()), Some("active"));
}

#[tokio::test]
async fn a_capacity_block_with_fewer_ultraservers_than_domains_is_refused_before_anything_is_made() {
    let us = ultraservers(1).await;
    let (state, diags) = apply(&us.env.ctx, &GpuCluster, &Value::Null, &us.config(36)).await;
    let failure = diagnostic(&diags, "Creating the cluster failed");
    for part in [us.block.as_str(), "holds 1 u-p6e-gb200x72 UltraServer(s)", "needs 2 NVLink domains", "nothing was launched"] {
        assert!(failure.contains(part), "{part:?} not in {failure}");
    }
    assert!(state.is_null() || state.get("node_count") == &Value::int(0), "{state:?}");
    let inv = us.env.admin("GET", "inventory", None);
    assert_eq!((&inv["resources"]["ec2"]["instances"], &inv["resources"]["ec2"]["launch_templates"]), (&json!([]), &json!([])), "{inv}");
    assert_eq!(us.available().await, [18]);
}

// ---------------------------------------------------------------------------- day 2 (issue 24)
//
// The backend's own day-2 operations, called as the lifecycle calls them: `remove_nodes`, `reboot_nodes`
// and the converge (`apply`) that follows them, with health and self-check verdicts read by the refresh.

mod day2 {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::backend::{self, Change, Step};
    use hpc_provider::framework::{Diagnostics, Value};
    use hpc_provider::ownership::{Census, Owner};
    use hpc_provider::resources::gpu_cluster::GpuCluster;
    use hpc_provider::resources::gpu_fabric::GpuFabric;
    use serde_json::json;

    use super::common::{apply, import_and_read, read_found, value};
    use super::{Env, capacity_block_cluster};

    const IMAGE: &str = "ami-12c6146b";
    const NEW_IMAGE: &str = "ami-1e749f67";

    fn fabric_ref() -> serde_json::Value {
        json!({"id": "aws/us-east-1/d2f", "name": "d2f", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
               "instance_type": "g6.xlarge", "placement": "cluster"})
    }

    fn config(nodes: u32, image: &str) -> Value {
        value(&GpuCluster, json!({"name": "d2", "fabric": fabric_ref(), "node_count": nodes, "image": image, "tags": {"team": "ml"}}))
    }

    /// Fabric `d2f` (g6.xlarge in a cluster placement group) and cluster `d2` of `nodes` nodes on `IMAGE`.
    async fn cluster(nodes: u32) -> (Env, Value) {
        let env = Env::start();
        let fabric = value(
            &GpuFabric,
            json!({"name": "d2f", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "g6.xlarge", "placement": "cluster"}),
        );
        let (_, diags) = apply(&env.ctx, &GpuFabric, &Value::Null, &fabric).await;
        assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
        let (state, diags) = apply(&env.ctx, &GpuCluster, &Value::Null, &config(nodes, IMAGE)).await;
        assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
        (env, state)
    }

    fn spec(config: &Value) -> hpc_provider::model::ClusterSpec {
        let mut diags = Diagnostics::new();
        hpc_provider::planner::spec::parse_cluster(config, &mut diags).unwrap_or_else(|| panic!("{diags:?}"))
    }

    fn census(state: &Value) -> Census {
        Census::owned(Owner::of_state("hpc_gpu_cluster", state))
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    async fn remove(env: &Env, state: &Value, config: &Value, nodes: &[&str]) -> Result<(), String> {
        let census = census(state);
        let step = Step { ctx: &env.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(120) };
        backend::cluster(Cloud::Aws).remove_nodes(&step, &spec(config), &names(nodes)).await.map_err(String::from)
    }

    async fn reboot(env: &Env, state: &Value, config: &Value, nodes: &[&str]) -> Result<(), String> {
        let census = census(state);
        let step = Step { ctx: &env.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(120) };
        backend::cluster(Cloud::Aws).reboot_nodes(&step, &spec(config), &names(nodes)).await.map_err(String::from)
    }

    /// The tags the lifecycle gives every piece of `v`.
    fn tags(env: &Env, v: &Value, census: &Census) -> BTreeMap<String, String> {
        let name = v.get("name").as_str().unwrap_or_default().to_owned();
        let fabric = v.get("fabric").get("name").as_str().unwrap_or_default().to_owned();
        hpc_provider::resources::common::owned_tags(&env.ctx, v.get("tags"), &[("hpc:cluster", &name), ("hpc:fabric", &fabric)], census)
    }

    /// The backend's converge from `state` to `config`, as the lifecycle calls it after removing nodes;
    /// `prior_extra` are tag keys the prior pieces are said to have had (and the new ones lack).
    async fn converge(env: &Env, state: &Value, config: &Value, prior_extra: &[&str]) -> Value {
        let census = census(state);
        let step = Step { ctx: &env.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(120) };
        let spec = spec(config);
        let new_tags = tags(env, config, &census);
        let mut prior_tags = tags(env, state, &census);
        for k in prior_extra {
            prior_tags.insert((*k).to_owned(), "x".into());
        }
        let change = Change { spec: &spec, config, prior: state, planned: state, state, tags: &new_tags, prior_tags: &prior_tags };
        let out = backend::cluster(Cloud::Aws).apply(&step, &change).await;
        assert!(out.error.is_none(), "{:?}", out.error);
        out.state
    }

    /// Each live node of cluster `cluster`: name -> (instance id, image, placement group, hpc:revision tag,
    /// capacity reservation).
    async fn live(env: &Env, cluster: &str) -> BTreeMap<String, (String, String, String, Option<String>, Option<String>)> {
        let out = env
            .ec2()
            .describe_instances()
            .filters(aws_sdk_ec2::types::Filter::builder().name("tag:hpc:cluster").values(cluster).build())
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
            .send()
            .await
            .unwrap();
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| {
                let tag = |k: &str| i.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value()).map(str::to_owned);
                let found = (
                    i.instance_id().unwrap().to_owned(),
                    i.image_id().unwrap_or_default().to_owned(),
                    i.placement().and_then(|p| p.group_name()).unwrap_or_default().to_owned(),
                    tag("hpc:revision"),
                    i.capacity_reservation_id().map(str::to_owned),
                );
                (tag("hpc:node").unwrap_or_default(), found)
            })
            .collect()
    }

    fn id_of(env: &Env, node: &str) -> String {
        env.nodes().into_iter().find(|n| n["tags"]["hpc:node"] == node).unwrap()["id"].as_str().unwrap().to_owned()
    }

    fn counters(env: &Env) -> serde_json::Value {
        env.admin("GET", "counters", None)["counters"].clone()
    }

    fn revision(config: &Value) -> String {
        spec(config).revision()
    }

    #[tokio::test]
    async fn a_refresh_reads_every_nodes_health_and_selfcheck_in_three_status_listings() {
        let (env, state) = cluster(6).await;
        let ec2 = env.ec2();
        let oob = |body: serde_json::Value| env.admin("POST", "out-of-band", Some(body));
        oob(json!({"action": "impair", "id": id_of(&env, "d2-1"), "check": "system", "since": "2026-12-01T10:02:00Z"}));
        oob(json!({"action": "impair", "id": id_of(&env, "d2-4"), "event": "instance-retirement", "not_before": "2026-12-05T00:00:00Z"}));
        // An event already carried out is no reason.
        oob(json!({"action": "impair", "id": id_of(&env, "d2-5"), "event": "system-reboot", "not_before": "2026-11-20T00:00:00Z",
                   "description": "[Completed] scheduled reboot"}));
        // What the nodes' self-checks publish, each on its own instance.
        for (node, verdict) in [("d2-2", "fail-gpus-7-of-8"), ("d2-3", "ok")] {
            let tag = aws_sdk_ec2::types::Tag::builder().key("hpc:selfcheck").value(verdict).build();
            ec2.create_tags().resources(id_of(&env, node)).tags(tag).send().await.unwrap();
        }
        // Another cluster's instances in the region are listed too, and left out.
        let other = env.nodes()[0]["id"].clone();
        env.admin(
            "POST",
            "out-of-band",
            Some(json!({"action": "copy_instance", "id": other, "tags": {"hpc:cluster": "other", "hpc:node": "other-0"}})),
        );

        env.admin("DELETE", "counters", None);
        let found = read_found(&env.ctx, &GpuCluster, &state).await;
        assert_eq!(
            counters(&env),
            json!({"ec2:DescribeInstanceStatus": 3, "ec2:DescribeInstances": 1, "ec2:DescribeLaunchTemplates": 1}),
            "one listing each (three of statuses: impaired instance checks, impaired system checks, scheduled events), not one \
             call per node"
        );
        let unhealthy = found.get("unhealthy_nodes").as_map().unwrap();
        let unhealthy: BTreeMap<&str, &str> = unhealthy.iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
        assert_eq!(
            unhealthy,
            BTreeMap::from([
                ("d2-1", "system status check impaired since 2026-12-01T10:02Z"),
                ("d2-2", "self-check: 7 of 8 GPUs"),
                ("d2-4", "scheduled instance-retirement from 2026-12-05T00:00Z"),
            ])
        );
        let verdicts = found.get("selfcheck");
        assert_eq!(
            (verdicts.get("d2-2").as_str(), verdicts.get("d2-3").as_str(), verdicts.get("d2-0")),
            (Some("fail-gpus-7-of-8"), Some("ok"), &Value::Null)
        );
        // Every node says which configuration it runs.
        let rev = revision(&config(6, IMAGE));
        let revisions = found.get("node_revisions").as_map().unwrap();
        assert_eq!(revisions.len(), 6);
        assert!(revisions.values().all(|r| r.as_str() == Some(rev.as_str())), "{revisions:?}");

        // The nodes' own tags are not the user's: an import gives back the user's tags only.
        let imported = import_and_read(&env.ctx, &GpuCluster, "aws/us-east-1/d2").await;
        assert_eq!(imported.get("tags"), found.get("tags"));
        assert_eq!(imported.get("image").as_str(), Some(IMAGE));
    }

    /// `count` instances of nobody's cluster in `zone`, launched at once.
    async fn others(env: &Env, zone: &str, count: i32) -> Vec<String> {
        let out = env
            .ec2()
            .run_instances()
            .image_id(IMAGE)
            .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
            .placement(aws_sdk_ec2::types::Placement::builder().availability_zone(zone).build())
            .min_count(count)
            .max_count(count)
            .send()
            .await
            .unwrap();
        out.instances().iter().map(|i| i.instance_id().unwrap().to_owned()).collect()
    }

    #[tokio::test]
    async fn the_health_read_makes_the_same_calls_whatever_the_account_holds() {
        let (env, state) = cluster(2).await;
        env.admin("DELETE", "counters", None);
        let alone = read_found(&env.ctx, &GpuCluster, &state).await;
        let calls = counters(&env);
        // The account fills up: more instances in the cluster's zone than one status page holds, and some in
        // another zone, a few of each impaired or scheduled for an event.
        let here = others(&env, "us-east-1a", 1001).await;
        let there = others(&env, "us-east-1b", 20).await;
        let oob = |body: serde_json::Value| env.admin("POST", "out-of-band", Some(body));
        for id in here.iter().take(3).chain(there.iter().take(3)) {
            oob(json!({"action": "impair", "id": id, "check": "system"}));
            oob(json!({"action": "impair", "id": id, "event": "system-maintenance"}));
        }
        env.admin("DELETE", "counters", None);
        let crowded = read_found(&env.ctx, &GpuCluster, &state).await;
        assert_eq!(counters(&env), calls, "the same calls with 1021 other instances in the region as with none");
        assert_eq!(calls["ec2:DescribeInstanceStatus"], 3, "{calls}");
        for attr in ["unhealthy_nodes", "scheduled_maintenance"] {
            assert_eq!(crowded.get(attr), alone.get(attr), "{attr}: other instances' health is not the cluster's");
            assert_eq!(crowded.get(attr), &Value::Map(BTreeMap::new()), "{attr}");
        }
    }

    #[tokio::test]
    async fn a_node_scheduled_for_retirement_is_unhealthy_and_replaced_alone() {
        let (env, state) = cluster(3).await;
        let before = live(&env, "d2").await;
        env.admin(
            "POST",
            "out-of-band",
            Some(json!({"action": "impair", "id": id_of(&env, "d2-1"), "event": "instance-retirement", "not_before": "2026-12-05T00:00:00Z"})),
        );
        let refreshed = read_found(&env.ctx, &GpuCluster, &state).await;
        assert_eq!(refreshed.get("unhealthy_nodes").get("d2-1").as_str(), Some("scheduled instance-retirement from 2026-12-05T00:00Z"));
        assert_eq!(refreshed.get("scheduled_maintenance"), &Value::Map(BTreeMap::new()));
        let (repaired, diags) = apply(&env.ctx, &GpuCluster, &refreshed, &config(3, IMAGE)).await;
        assert!(
            diags.iter().any(|d| d.starts_with("1 unhealthy node to repair") && d.contains("d2-1: scheduled instance-retirement")),
            "{diags:?}"
        );
        let after = live(&env, "d2").await;
        assert_eq!(after.keys().collect::<Vec<_>>(), ["d2-0", "d2-1", "d2-2"]);
        assert_ne!(after["d2-1"].0, before["d2-1"].0, "d2-1 is a new instance");
        for n in ["d2-0", "d2-2"] {
            assert_eq!(after[n].0, before[n].0, "{n} untouched");
        }
        let refreshed = read_found(&env.ctx, &GpuCluster, &repaired).await;
        assert_eq!(refreshed.get("unhealthy_nodes"), &Value::Map(BTreeMap::new()));
    }

    #[tokio::test]
    async fn scheduled_reboots_and_system_maintenance_are_reported_with_their_window_and_no_node_is_replaced() {
        let (env, state) = cluster(3).await;
        let before = live(&env, "d2").await;
        let oob = |body: serde_json::Value| env.admin("POST", "out-of-band", Some(body));
        oob(json!({"action": "impair", "id": id_of(&env, "d2-0"), "event": "system-reboot", "not_before": "2026-12-05T00:00:00Z"}));
        oob(json!({"action": "impair", "id": id_of(&env, "d2-2"), "event": "system-maintenance", "not_before": "2026-12-06T10:00:00Z"}));
        let refreshed = read_found(&env.ctx, &GpuCluster, &state).await;
        assert_eq!(refreshed.get("unhealthy_nodes"), &Value::Map(BTreeMap::new()), "maintenance is no reason to repair");
        let window = |node: &str| refreshed.get("scheduled_maintenance").get(node).as_str().map(str::to_owned);
        assert_eq!(
            (window("d2-0").as_deref(), window("d2-1"), window("d2-2").as_deref()),
            (
                Some("scheduled system-reboot from 2026-12-05T00:00Z to 2026-12-05T02:00Z"),
                None,
                Some("scheduled system-maintenance from 2026-12-06T10:00Z to 2026-12-06T12:00Z")
            )
        );
        // Under every repair policy the plan says so, and the apply leaves every node as it was.
        for repair in ["replace", "reboot"] {
            let mut configured = config(3, IMAGE).as_map().unwrap().clone();
            configured.insert("repair".into(), Value::from(repair));
            env.admin("DELETE", "counters", None);
            let (applied, diags) = apply(&env.ctx, &GpuCluster, &refreshed, &Value::Map(configured)).await;
            assert!(
                diags.iter().any(|d| d.starts_with("2 nodes with maintenance scheduled by the cloud")
                    && d.contains("d2-0: scheduled system-reboot from 2026-12-05T00:00Z to 2026-12-05T02:00Z")),
                "{repair}: {diags:?}"
            );
            assert!(!diags.iter().any(|d| d.contains("to repair")), "{repair}: {diags:?}");
            let c = counters(&env);
            for call in ["ec2:TerminateInstances", "ec2:RunInstances", "ec2:RebootInstances"] {
                assert_eq!(c.get(call), None, "{repair}: {c}");
            }
            assert_eq!(applied.get("scheduled_maintenance"), refreshed.get("scheduled_maintenance"), "{repair}");
        }
        let after = live(&env, "d2").await;
        assert_eq!(
            after.iter().map(|(n, v)| (n.clone(), v.0.clone())).collect::<Vec<_>>(),
            before.iter().map(|(n, v)| (n.clone(), v.0.clone())).collect::<Vec<_>>(),
            "the same instances"
        );
    }

    #[tokio::test]
    async fn remove_nodes_terminates_only_the_named_nodes_and_the_converge_makes_them_again_in_the_placement_group() {
        let (env, state) = cluster(4).await;
        let before = live(&env, "d2").await;
        env.admin("DELETE", "counters", None);
        // A name with no node is skipped.
        remove(&env, &state, &config(4, IMAGE), &["d2-1", "d2-3", "d2-9"]).await.unwrap();
        assert_eq!(counters(&env)["ec2:TerminateInstances"], 1, "one call for all of them");
        let after = live(&env, "d2").await;
        assert_eq!(after.keys().collect::<Vec<_>>(), ["d2-0", "d2-2"]);
        assert_eq!((&after["d2-0"].0, &after["d2-2"].0), (&before["d2-0"].0, &before["d2-2"].0), "the others untouched");

        let refreshed = read_found(&env.ctx, &GpuCluster, &state).await;
        converge(&env, &refreshed, &config(4, IMAGE), &[]).await;
        let again = live(&env, "d2").await;
        assert_eq!(again.keys().collect::<Vec<_>>(), ["d2-0", "d2-1", "d2-2", "d2-3"]);
        for node in ["d2-1", "d2-3"] {
            let (id, image, group, rev, _) = &again[node];
            assert_ne!(id, &before[node].0, "{node} is a new instance");
            assert_eq!((image.as_str(), group.as_str()), (IMAGE, "d2f-pg"), "{node}");
            assert_eq!(rev.as_deref(), Some(revision(&config(4, IMAGE)).as_str()));
        }
        assert_eq!(again["d2-0"].0, before["d2-0"].0);
    }

    #[tokio::test]
    async fn a_rolling_converge_launches_the_new_configuration_with_its_revision_and_leaves_the_others() {
        let (env, state) = cluster(4).await;
        let before = live(&env, "d2").await;
        let old = revision(&config(4, IMAGE));
        let new_config = config(4, NEW_IMAGE);
        let new = revision(&new_config);
        assert_ne!(old, new);

        // Batch 1 of 2: d2-0 and d2-1 removed, then made again from a new launch template version.
        remove(&env, &state, &new_config, &["d2-0", "d2-1"]).await.unwrap();
        let refreshed = read_found(&env.ctx, &GpuCluster, &state).await;
        env.admin("DELETE", "counters", None);
        let converged = converge(&env, &refreshed, &new_config, &[]).await;
        assert_eq!(counters(&env)["ec2:CreateLaunchTemplateVersion"], 1);
        let versions =
            env.ec2().describe_launch_template_versions().launch_template_name("d2-lt").versions("$Latest").send().await.unwrap();
        let latest = &versions.launch_template_versions()[0];
        assert_eq!(latest.version_description(), Some(format!("hpc:revision={new}").as_str()));
        assert_eq!(latest.launch_template_data().and_then(|d| d.image_id()), Some(NEW_IMAGE));
        let after = live(&env, "d2").await;
        for node in ["d2-0", "d2-1"] {
            assert_eq!(
                (after[node].1.as_str(), after[node].2.as_str(), after[node].3.as_deref()),
                (NEW_IMAGE, "d2f-pg", Some(new.as_str())),
                "{node}"
            );
        }
        // The other batch still serves, untouched, with its own revision.
        for node in ["d2-2", "d2-3"] {
            assert_eq!(after[node].0, before[node].0, "{node}");
            assert_eq!((after[node].1.as_str(), after[node].3.as_deref()), (IMAGE, Some(old.as_str())), "{node}");
        }
        let refreshed = read_found(&env.ctx, &GpuCluster, &converged).await;
        let revisions = refreshed.get("node_revisions");
        assert_eq!((revisions.get("d2-0").as_str(), revisions.get("d2-3").as_str()), (Some(new.as_str()), Some(old.as_str())));

        // Batch 2: the template already records the new revision, so no new version.
        remove(&env, &refreshed, &new_config, &["d2-2", "d2-3"]).await.unwrap();
        let refreshed = read_found(&env.ctx, &GpuCluster, &refreshed).await;
        env.admin("DELETE", "counters", None);
        converge(&env, &refreshed, &new_config, &[]).await;
        assert_eq!(counters(&env).get("ec2:CreateLaunchTemplateVersion"), None);
        let done = live(&env, "d2").await;
        assert!(done.values().all(|n| n.1 == NEW_IMAGE && n.3.as_deref() == Some(new.as_str())), "{done:?}");
    }

    #[tokio::test]
    async fn reboot_nodes_reboots_the_named_nodes_in_place_and_clears_an_impaired_instance_check() {
        let (env, state) = cluster(3).await;
        let before = live(&env, "d2").await;
        env.admin("POST", "out-of-band", Some(json!({"action": "impair", "id": id_of(&env, "d2-2"), "check": "instance"})));
        let found = read_found(&env.ctx, &GpuCluster, &state).await;
        assert!(found.get("unhealthy_nodes").get("d2-2").as_str().is_some_and(|r| r.starts_with("instance status check impaired since ")));
        env.admin("DELETE", "counters", None);
        reboot(&env, &state, &config(3, IMAGE), &["d2-2", "d2-0"]).await.unwrap();
        assert_eq!(counters(&env)["ec2:RebootInstances"], 1, "one call for all of them");
        assert_eq!(
            live(&env, "d2").await.iter().map(|(n, v)| (n.clone(), v.0.clone())).collect::<Vec<_>>(),
            before.iter().map(|(n, v)| (n.clone(), v.0.clone())).collect::<Vec<_>>(),
            "the same instances"
        );
        let found = read_found(&env.ctx, &GpuCluster, &state).await;
        assert_eq!(found.get("unhealthy_nodes"), &Value::Map(Default::default()));
    }

    #[tokio::test]
    async fn a_retag_keeps_the_nodes_own_selfcheck_and_revision_tags() {
        let (env, state) = cluster(2).await;
        let tag = aws_sdk_ec2::types::Tag::builder().key("hpc:selfcheck").value("ok").build();
        env.ec2().create_tags().resources(id_of(&env, "d2-0")).tags(tag).send().await.unwrap();
        // The user's tags change; even were the nodes' own keys among the stale ones, they stay.
        let mut retagged = config(2, IMAGE).as_map().unwrap().clone();
        retagged.insert("tags".into(), Value::Map([("team".to_owned(), Value::from("research"))].into()));
        converge(&env, &state, &Value::Map(retagged), &["hpc:selfcheck", "hpc:revision"]).await;
        let node = env.nodes().into_iter().find(|n| n["tags"]["hpc:node"] == "d2-0").unwrap();
        assert_eq!(node["tags"]["team"], "research");
        assert_eq!(node["tags"]["hpc:selfcheck"], "ok");
        assert_eq!(node["tags"]["hpc:revision"], revision(&config(2, IMAGE)).as_str());
    }

    #[tokio::test]
    async fn a_node_remade_in_a_capacity_reservation_goes_back_into_it_with_the_new_key() {
        let cb = capacity_block_cluster().await;
        let available = || async {
            let out = cb.env.ec2().describe_capacity_reservations().capacity_reservation_ids(&cb.reservation).send().await.unwrap();
            out.capacity_reservations()[0].available_instance_count().unwrap()
        };
        assert_eq!(available().await, 0);
        // A new image and SSH key: the nodes remade take both, in the same reservation.
        let mut rolled = cb.config.as_map().unwrap().clone();
        rolled.insert("image".into(), Value::from(NEW_IMAGE));
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBhMqLCm5n1e9pXvJ5hQyQm4xXo8r0aU2Y0v3wF3bT7c new@example";
        rolled.insert("ssh_public_key".into(), Value::from(key));
        let rolled = Value::Map(rolled);
        remove(&cb.env, &cb.cluster, &rolled, &["cbc-1"]).await.unwrap();
        assert_eq!(available().await, 1, "the slot is given back");
        let refreshed = read_found(&cb.env.ctx, &GpuCluster, &cb.cluster).await;
        converge(&cb.env, &refreshed, &rolled, &[]).await;
        assert_eq!(available().await, 0);
        let nodes = live(&cb.env, "cbc").await;
        assert_eq!(nodes["cbc-1"].4.as_deref(), Some(cb.reservation.as_str()));
        assert_eq!(nodes["cbc-1"].1, NEW_IMAGE);
        assert_eq!(nodes["cbc-1"].3.as_deref(), Some(revision(&rolled).as_str()));
        let pair = cb.env.ec2().describe_key_pairs().key_names("cbc-key").include_public_key(true).send().await.unwrap();
        assert_eq!(pair.key_pairs()[0].public_key().map(str::trim), Some(key));
    }

    #[tokio::test]
    async fn a_node_remade_on_an_ultraserver_goes_back_into_its_domains_reservation_of_the_capacity_block() {
        let us = super::ultraservers(1).await;
        let (cluster, diags) = apply(&us.env.ctx, &GpuCluster, &Value::Null, &us.config(18)).await;
        assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
        let mut rolled = us.config(18).as_map().unwrap().clone();
        rolled.insert("image".into(), Value::from(NEW_IMAGE));
        let rolled = Value::Map(rolled);
        remove(&us.env, &cluster, &rolled, &["gb-5"]).await.unwrap();
        assert_eq!(us.available().await, [1]);
        let refreshed = read_found(&us.env.ctx, &GpuCluster, &cluster).await;
        converge(&us.env, &refreshed, &rolled, &[]).await;
        assert_eq!(us.available().await, [0]);
        us.assert_domain(0, 18, 0).await;
        let nodes = live(&us.env, "gb").await;
        assert_eq!((nodes["gb-5"].1.as_str(), nodes["gb-5"].3.as_deref()), (NEW_IMAGE, Some(revision(&rolled).as_str())));
        // The new template version still names no reservation: each launch names its UltraServer's.
        let lt = us.env.ec2().describe_launch_template_versions().launch_template_name("gb-lt").versions("$Latest").send().await.unwrap();
        let data = lt.launch_template_versions()[0].launch_template_data().unwrap();
        assert!(data.capacity_reservation_specification().and_then(|c| c.capacity_reservation_target()).is_none(), "{data:?}");
        assert_eq!(data.image_id(), Some(NEW_IMAGE));
    }
}

// ------------------------------------------------------------------------------------- quota and capacity
//
// The backend's quota (Service Quotas GetServiceQuota + one DescribeInstances) read against the emulator's
// admin-set limit, and converge under the emulator's capacity limit with RunInstances MinCount/MaxCount.

mod capacity {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use hpc_provider::catalog::Cloud;
    use hpc_provider::clouds::backend::{self, Change, Step};
    use hpc_provider::framework::{Diagnostics, Value};
    use hpc_provider::ownership::{Census, Owner};
    use hpc_provider::resources::gpu_cluster::GpuCluster;
    use hpc_provider::resources::gpu_fabric::GpuFabric;
    use serde_json::json;

    use super::Env;
    use super::common::{apply, value};

    fn fabric_ref() -> serde_json::Value {
        json!({"id": "aws/us-east-1/capf", "name": "capf", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
               "instance_type": "g6.xlarge", "placement": "cluster"})
    }

    fn config(nodes: u32, policy: &str, min: Option<u32>) -> Value {
        value(
            &GpuCluster,
            json!({"name": "cap", "fabric": fabric_ref(), "node_count": nodes, "image": "ami-12c6146b", "capacity_policy": policy,
                   "min_nodes": min}),
        )
    }

    async fn with_fabric() -> Env {
        let env = Env::start();
        let fabric = value(
            &GpuFabric,
            json!({"name": "capf", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "g6.xlarge", "placement": "cluster"}),
        );
        let (_, diags) = apply(&env.ctx, &GpuFabric, &Value::Null, &fabric).await;
        assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
        env
    }

    fn spec(config: &Value) -> hpc_provider::model::ClusterSpec {
        let mut diags = Diagnostics::new();
        hpc_provider::planner::spec::parse_cluster(config, &mut diags).unwrap_or_else(|| panic!("{diags:?}"))
    }

    /// The backend's create of `config`, as the lifecycle calls it (the policy's release is the lifecycle's).
    async fn create(env: &Env, config: &Value) -> (Value, Option<hpc_provider::clouds::CloudError>) {
        let mut state = config.as_map().cloned().unwrap_or_default();
        state.insert("id".into(), Value::from("aws/us-east-1/cap"));
        let state = Value::Map(state);
        let census = Census::owned(Owner::of_state("hpc_gpu_cluster", &state));
        let step = Step { ctx: &env.ctx, census: &census, default_tags: &BTreeMap::new(), timeout: Duration::from_secs(120) };
        let spec = spec(config);
        let tags = hpc_provider::resources::common::owned_tags(
            &env.ctx,
            config.get("tags"),
            &[("hpc:cluster", "cap"), ("hpc:fabric", "capf")],
            &census,
        );
        let none = BTreeMap::new();
        let change = Change { spec: &spec, config, prior: &Value::Null, planned: &state, state: &state, tags: &tags, prior_tags: &none };
        let out = backend::cluster(Cloud::Aws).apply(&step, &change).await;
        (out.state, out.error)
    }

    fn live(env: &Env) -> Vec<String> {
        let mut names: Vec<String> = env
            .nodes()
            .iter()
            .filter(|n| n["state"] != "terminated" && n["tags"]["hpc:cluster"] == "cap")
            .map(|n| n["tags"]["hpc:node"].as_str().unwrap_or_default().to_owned())
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn the_quota_reads_the_limit_set_and_the_vcpus_the_launched_nodes_use() {
        let env = with_fabric().await;
        let family = backend::cluster(Cloud::Aws).quota(&spec(&config(3, "keep-partial", None))).expect("g6.xlarge has a quota");
        assert_eq!((family.id.as_str(), family.scope.as_str(), family.per_node, family.unit), ("L-DB2E81BA", "us-east-1", 4, "vCPUs"));
        assert_eq!(family.name, "Running On-Demand G and VT instances");
        env.admin("POST", "quota", Some(json!({"id": "L-DB2E81BA", "scope": "us-east-1", "limit": 64})));
        let before = backend::cluster(Cloud::Aws).read_quota(&env.ctx, &family).await.unwrap();
        assert_eq!((before.limit, before.used), (64, 0));
        let (_, error) = create(&env, &config(3, "keep-partial", None)).await;
        assert_eq!(error, None);
        env.admin("DELETE", "counters", None);
        let after = backend::cluster(Cloud::Aws).read_quota(&env.ctx, &family).await.unwrap();
        assert_eq!((after.limit, after.used, after.free()), (64, 12, 52));
        let counters = env.admin("GET", "counters", None)["counters"].clone();
        assert_eq!(counters, json!({"ec2:DescribeInstances": 1, "servicequotas:GetServiceQuota": 1}), "two calls per family");
        // The spot quota counts none of them; without an applied value the AWS default is the limit.
        let spot = hpc_provider::clouds::quota::QuotaFamily {
            id: "L-3819A6DF".into(),
            name: "All G and VT Spot Instance Requests".into(),
            ..family.clone()
        };
        env.admin("POST", "quota", Some(json!({"id": "L-3819A6DF", "scope": "us-east-1", "limit": null})));
        let reading = backend::cluster(Cloud::Aws).read_quota(&env.ctx, &spot).await.unwrap();
        assert_eq!((reading.limit, reading.used), (100000, 0));
        // Another region's limit is its own.
        let elsewhere = hpc_provider::clouds::quota::QuotaFamily { scope: "us-west-2".into(), ..family };
        assert_eq!(backend::cluster(Cloud::Aws).read_quota(&env.ctx, &elsewhere).await.unwrap().limit, 100000);
    }

    #[tokio::test]
    async fn all_or_nothing_under_a_capacity_limit_launches_nothing_with_ec2s_code() {
        let env = with_fabric().await;
        env.admin("POST", "capacity", Some(json!({"zone": "us-east-1a", "instance_type": "g6.xlarge", "available": 3})));
        let (_, error) = create(&env, &config(4, "all-or-nothing", None)).await;
        let error = error.expect("no capacity for 4");
        assert!(
            error.message.contains("InsufficientInstanceCapacity") && error.message.contains("launching 4 x g6.xlarge in us-east-1a"),
            "{error}"
        );
        assert!(error.message.contains("(0 of 4 nodes exist)"), "{error}");
        assert_eq!(error.capacity_code(), Some("InsufficientInstanceCapacity"), "{error}");
        assert!(live(&env).is_empty(), "{:?}", live(&env));
    }

    #[tokio::test]
    async fn at_least_under_a_capacity_limit_keeps_what_came_and_names_the_code() {
        let env = with_fabric().await;
        env.admin("POST", "capacity", Some(json!({"zone": "us-east-1a", "instance_type": "g6.xlarge", "available": 3})));
        let (state, error) = create(&env, &config(4, "at-least", Some(2))).await;
        let error = error.expect("a shortfall is an error");
        assert!(
            error.message.contains("EC2 launched 3 of 4: InsufficientInstanceCapacity") && error.message.contains("(at least 2)"),
            "{error}"
        );
        assert!(error.message.contains("(3 of 4 nodes exist)"), "{error}");
        assert_eq!(error.capacity_code(), Some("InsufficientInstanceCapacity"), "{error}");
        assert_eq!(live(&env), ["cap-0", "cap-1", "cap-2"]);
        assert_eq!(state.get("node_count"), &Value::int(3), "the state keeps the nodes that exist");
        // Below the minimum EC2 launches none.
        env.admin("POST", "capacity", Some(json!({"zone": "us-east-1a", "instance_type": "g6.xlarge", "available": 4})));
        let other = value(
            &GpuCluster,
            json!({"name": "cap", "fabric": fabric_ref(), "node_count": 8, "image": "ami-12c6146b", "capacity_policy": "at-least", "min_nodes": 6}),
        );
        let (_, error) = create(&env, &other).await;
        let error = error.unwrap();
        assert!(error.message.contains("launching 5 x g6.xlarge in us-east-1a (at least 3): InsufficientInstanceCapacity"), "{error}");
        assert_eq!(live(&env).len(), 3);
        // Capacity back: the next apply adds the rest.
        env.admin("POST", "capacity", Some(json!({"zone": "us-east-1a", "instance_type": "g6.xlarge", "available": null})));
        let (_, error) = create(&env, &config(4, "at-least", Some(2))).await;
        assert_eq!(error, None);
        assert_eq!(live(&env), ["cap-0", "cap-1", "cap-2", "cap-3"]);
    }
}

/// A provider whose aws block has no keys, on a machine with no AWS credentials anywhere (no environment
/// variables, no shared files, instance metadata off), against the emulator: the apply says "no AWS
/// credentials" in one sentence and what to set, at once, and nothing reaches EC2. The SDK's credential chain
/// reads the process's environment, so the check runs in a child process of this test binary that is given
/// none of this machine's AWS settings.
#[test]
fn without_credentials_an_apply_says_so_in_one_sentence_at_once() {
    const CHILD: &str = "HPC_TEST_WITHOUT_AWS_CREDENTIALS";
    if std::env::var_os(CHILD).is_some() {
        return tokio::runtime::Runtime::new().unwrap().block_on(without_credentials());
    }
    let home = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", "without_credentials_an_apply_says_so_in_one_sentence_at_once", "--nocapture", "--test-threads=1"]);
    for (name, _) in std::env::vars_os().filter(|(k, _)| k.to_string_lossy().starts_with("AWS_")) {
        child.env_remove(name);
    }
    child
        .env(CHILD, "1")
        .env("HOME", home.path())
        .env("AWS_CONFIG_FILE", home.path().join("config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", home.path().join("credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
    let out = child.output().unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

async fn without_credentials() {
    let emulator = start_aws();
    let ctx = provider_context(json!({"aws": {"region": "us-east-1", "endpoint": emulator.endpoint}}));
    let config = value(
        &GpuFabric,
        json!({"name": "nokeys", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge",
               "placement": "none"}),
    );
    admin(&emulator.endpoint, "DELETE", "counters", None);
    let started = std::time::Instant::now();
    let (state, diags) = apply(&ctx, &GpuFabric, &Value::Null, &config).await;
    let took = started.elapsed();
    assert!(state.get("vpc_id").is_null(), "nothing was made: {state:?}");
    let said = diags.iter().find(|d| d.contains("no AWS credentials")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(
        said.contains(
            "no AWS credentials: set access_key and secret_key in the provider's aws block, or a profile, or the standard AWS \
             environment variables"
        ),
        "{said}"
    );
    assert!(!said.to_lowercase().contains("dispatch") && said.lines().count() == 1, "one sentence, not the SDK's sources: {said}");
    assert!(took < std::time::Duration::from_secs(2), "not retried: {took:?}");
    let counters = admin(&emulator.endpoint, "GET", "counters", None);
    assert_eq!(counters["counters"], json!({}), "nothing reached EC2");
}
