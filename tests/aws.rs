//! The AWS resources through the provider's own Resource implementations against the AWS emulator: the
//! options the acceptance case does not cover (capacity blocks, spot, SSH keys, user data, scale-down,
//! tags), what they become in EC2, and that an import gives back exactly the created state.

use std::sync::Arc;

use aws_sdk_ec2::types::MarketType;
use base64::Engine;
use hpc_emulators::harness::{AwsEmulator, admin, start_aws};
use hpc_provider::config::ProviderConfig;
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{ApplyRequest, Context, Diagnostics, PlanRequest, ReadOutcome, Resource, Value};
use hpc_provider::resources::gpu_cluster::GpuCluster;
use hpc_provider::resources::gpu_fabric::GpuFabric;
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Env {
    emulator: AwsEmulator,
    ctx: Context,
}

fn env() -> Env {
    let emulator = start_aws();
    let provider = json!({"default_tags": {"cost-center": "42"},
        "aws": {"region": "us-east-1", "endpoint": emulator.endpoint, "access_key": "t", "secret_key": "t"}});
    let config = decode_json(provider.to_string().as_bytes(), &hpc_provider::config::schema().value_type()).unwrap();
    let ctx = Context::new(CancellationToken::new(), Some(Arc::new(ProviderConfig::from_value(&config, "test"))));
    Env { emulator, ctx }
}

fn value(resource: &dyn Resource, json: serde_json::Value) -> Value {
    decode_json(json.to_string().as_bytes(), &resource.schema().value_type()).unwrap()
}

/// Plans and applies as the CLI would; returns the new state and the diagnostics' summaries.
async fn apply(ctx: &Context, resource: &dyn Resource, prior: &Value, config: &Value) -> (Value, Vec<String>) {
    let mut diags = Diagnostics::new();
    let planned = resource.plan(ctx, PlanRequest { prior, proposed: config, config, prior_private: &[] }, &mut diags).planned;
    let out = resource.apply(ctx, ApplyRequest { prior, planned: &planned, config, private: &[] }, &mut diags).await;
    (out.new_state, diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect())
}

async fn import_and_read(ctx: &Context, resource: &dyn Resource, id: &str) -> Value {
    let mut diags = Diagnostics::new();
    let imported = resource.import(ctx, id, &mut diags).await.unwrap_or_else(|| panic!("{:?}", diags.iter().collect::<Vec<_>>()));
    match resource.read(ctx, &imported, &[], &mut diags).await {
        ReadOutcome::Found { state, .. } => state,
        ReadOutcome::Gone => panic!("{id} gone after import"),
    }
}

fn ec2(endpoint: &str) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("t", "t", None, None, "static"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

const FABRIC_REF: fn() -> serde_json::Value = || {
    json!({"id": "aws/us-east-1/cb", "name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
           "instance_type": "p5en.48xlarge", "placement": "none"})
};

#[tokio::test]
async fn capacity_block_with_ssh_key_and_user_data_lands_in_the_launch_template_and_imports_back() {
    let Env { emulator, ctx } = env();
    let ep = emulator.endpoint.as_str();
    let client = ec2(ep);
    let reservation = client
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
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge", "placement": "none"}),
    );
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGv1ZcBc1wOuYkqHsKPbRnSLQzBhEo5f6QWq1Yb5Kx5O ml@example";
    let config = value(
        &GpuCluster,
        json!({"name": "cbc", "fabric": FABRIC_REF(), "node_count": 2, "capacity_type": "capacity-block", "reservation_id": reservation,
               "image": "ami-12c6146b", "ssh_public_key": key, "user_data": "#!/bin/sh\necho ready\n", "workload": "finetuning",
               "tags": {"team": "ml"}}),
    );
    let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| !d.starts_with("Creating")), "{diags:?}");
    assert_eq!(cluster.get("id").as_str(), Some("aws/us-east-1/cbc"));

    // What EC2 got: the capacity block through the market and reservation options, 16 EFA cards (p5en).
    let lt = client.describe_launch_template_versions().launch_template_name("cbc-lt").versions("$Latest").send().await.unwrap();
    let data = lt.launch_template_versions()[0].launch_template_data().unwrap();
    assert_eq!(data.instance_market_options().and_then(|m| m.market_type()), Some(&MarketType::CapacityBlock));
    let target = data.capacity_reservation_specification().and_then(|c| c.capacity_reservation_target()).unwrap();
    assert_eq!(target.capacity_reservation_id(), Some(reservation.as_str()));
    assert_eq!(data.key_name(), Some("cbc-key"));
    let user_data = base64::engine::general_purpose::STANDARD.decode(data.user_data().unwrap()).unwrap();
    assert_eq!(user_data, b"#!/bin/sh\necho ready\n");
    assert_eq!(data.network_interfaces().len(), 16);
    // EC2 refuses AssociatePublicIpAddress, even false, once a launch has more than one interface.
    assert!(data.network_interfaces().iter().all(|n| n.associate_public_ip_address().is_none()), "{:?}", data.network_interfaces());
    assert!(data.placement().and_then(|p| p.group_name()).is_none_or(str::is_empty), "placement = none: no group");

    // Every node carries the user's tags, the provider's defaults and ours.
    let inv = admin(ep, "GET", "inventory", None);
    let nodes = inv["resources"]["ec2"]["instances"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    for n in nodes {
        for (k, v) in [("team", "ml"), ("cost-center", "42"), ("hpc:cluster", "cbc"), ("hpc:fabric", "cb")] {
            assert_eq!(n["tags"][k], v, "{n}");
        }
    }

    // Import gives back exactly what the create wrote.
    let imported = import_and_read(&ctx, &GpuCluster, "aws/us-east-1/cbc").await;
    assert_eq!(imported, cluster);
    let imported_fabric = import_and_read(&ctx, &GpuFabric, "aws/us-east-1/cb").await;
    assert_eq!(imported_fabric, fabric);

    // Scale down removes the highest-numbered node; a tag change reaches the nodes that stay.
    let mut smaller = config.as_map().unwrap().clone();
    smaller.insert("node_count".into(), Value::int(1));
    smaller.insert("tags".into(), Value::Map([("team".to_owned(), Value::from("research"))].into()));
    let (cluster, diags) = apply(&ctx, &GpuCluster, &cluster, &Value::Map(smaller)).await;
    assert!(diags.iter().all(|d| !d.starts_with("Updating")), "{diags:?}");
    assert_eq!(cluster.get("node_names"), &Value::list([Value::from("cbc-0")]));
    let inv = admin(ep, "GET", "inventory", None);
    let nodes = inv["resources"]["ec2"]["instances"].as_array().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["tags"]["hpc:node"], "cbc-0");
    assert_eq!(nodes[0]["tags"]["team"], "research");

    // Destroy: nothing left, the key pair included.
    let mut diags = Diagnostics::new();
    for (r, state) in [(&GpuCluster as &dyn Resource, &cluster), (&GpuFabric, &fabric)] {
        let out = r.apply(&ctx, ApplyRequest { prior: state, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut diags).await;
        assert!(out.new_state.is_null());
    }
    assert!(!diags.has_errors());
    let inv = admin(ep, "GET", "inventory", None);
    assert_eq!(inv["resources"]["ec2"]["key_pairs"], json!([]));
    assert_eq!(inv["resources"]["ec2"]["instances"], json!([]));
}

#[tokio::test]
async fn a_missing_fabric_and_bad_ids_are_diagnostics_not_failures() {
    let Env { emulator: _emulator, ctx } = env();
    // A cluster whose fabric was never built: the apply says what to do and creates nothing.
    let config = value(&GpuCluster, json!({"name": "orphan", "fabric": FABRIC_REF(), "node_count": 1, "image": "ami-12c6146b"}));
    let (state, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().any(|d| d.contains("fabric cb has no security group") && d.contains("apply the fabric first")), "{diags:?}");
    assert_eq!(state.get("node_count"), &Value::int(0), "nothing launched: {state:?}");

    let mut diags = Diagnostics::new();
    assert!(GpuCluster.import(&ctx, "us-east-1/train", &mut diags).await.is_none());
    assert!(GpuFabric.import(&ctx, "aws/us-east-1/nope", &mut diags).await.is_none());
    let text: Vec<String> = diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect();
    assert!(text[0].contains("Invalid import id") && text[0].contains("aws/us-east-1/train-nodes"), "{text:?}");
    assert!(text[1].contains("Cannot import the fabric") && text[1].contains("no fabric named \"nope\""), "{text:?}");
}

#[tokio::test]
async fn a_cluster_or_fabric_deleted_outside_reads_as_gone_so_the_plan_creates_it() {
    let Env { emulator, ctx } = env();
    let ep = emulator.endpoint.as_str();
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge", "placement": "none"}),
    );
    let (fabric, _) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    let config = value(&GpuCluster, json!({"name": "gone", "fabric": FABRIC_REF(), "node_count": 2, "image": "ami-12c6146b"}));
    let (cluster, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
    assert!(diags.iter().all(|d| d.starts_with("No proximity placement")), "{diags:?}");

    // Someone deletes the whole cluster by hand: every node and the launch template.
    for node in admin(ep, "GET", "inventory", None)["resources"]["ec2"]["instances"].as_array().unwrap() {
        admin(ep, "POST", "out-of-band", Some(json!({"action": "terminate_instance", "id": node["id"]})));
    }
    ec2(ep).delete_launch_template().launch_template_name("gone-lt").send().await.unwrap();
    let mut diags = Diagnostics::new();
    assert!(matches!(GpuCluster.read(&ctx, &cluster, &[], &mut diags).await, ReadOutcome::Gone));

    // And the fabric: its security group, then its network.
    let client = ec2(ep);
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
    assert!(matches!(GpuFabric.read(&ctx, &fabric, &[], &mut diags).await, ReadOutcome::Gone));
    assert!(!diags.has_errors());
    assert_eq!(admin(ep, "GET", "inventory", None)["empty"], true);
}

#[tokio::test]
async fn nodes_that_die_at_launch_fail_the_apply_with_ec2s_reason_and_stay_tracked() {
    let Env { emulator, ctx } = env();
    let ep = emulator.endpoint.as_str();
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge", "placement": "none"}),
    );
    apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "RunInstances", "kind": "terminate_at_launch", "times": 1})));
    let config = value(&GpuCluster, json!({"name": "dies", "fabric": FABRIC_REF(), "node_count": 1, "image": "ami-12c6146b"}));
    let (state, diags) = apply(&ctx, &GpuCluster, &Value::Null, &config).await;
    let failure = diags.iter().find(|d| d.starts_with("Creating the cluster failed")).unwrap_or_else(|| panic!("{diags:?}"));
    assert!(failure.contains("node dies-0") && failure.contains("went to terminated instead of running"), "{failure}");
    assert!(failure.contains("Server.InsufficientInstanceCapacity: Insufficient capacity."), "{failure}");
    // The state keeps the cluster (its launch template exists) with the nodes that really exist: none.
    assert_eq!(state.get("id").as_str(), Some("aws/us-east-1/dies"));
    assert_eq!(state.get("node_count"), &Value::int(0));
    // Applying again (the CLI replaces the tainted cluster; converging in place works too) finishes the job.
    let (state, diags) = apply(&ctx, &GpuCluster, &state, &config).await;
    assert!(diags.iter().all(|d| !d.contains("failed")), "{diags:?}");
    assert_eq!(state.get("node_names"), &Value::list([Value::from("dies-0")]));
}

#[tokio::test]
async fn throttling_is_retried_and_a_persistent_error_is_a_diagnostic() {
    let Env { emulator, ctx } = env();
    let ep = emulator.endpoint.as_str();
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge", "placement": "none"}),
    );
    let (fabric, _) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    // EC2 throttles twice (RequestLimitExceeded, HTTP 503): the SDK's standard retries absorb it.
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "DescribeSecurityGroups", "kind": "throttle", "times": 2})));
    let mut diags = Diagnostics::new();
    assert!(matches!(GpuFabric.read(&ctx, &fabric, &[], &mut diags).await, ReadOutcome::Found { .. }));
    assert!(!diags.has_errors());
    let fired = admin(ep, "GET", "faults", None);
    assert_eq!(fired["faults"][0]["fired"], 2, "{fired}");
    // An error that does not go away reaches the user in EC2's words, and the state is kept as it was.
    admin(ep, "DELETE", "faults", None);
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "DescribeSecurityGroups", "kind": "server_error"})));
    let outcome = GpuFabric.read(&ctx, &fabric, &[], &mut diags).await;
    assert!(matches!(outcome, ReadOutcome::Found { state, .. } if state == fabric));
    let text: Vec<String> = diags.iter().map(|d| format!("{}: {}", d.summary, d.detail)).collect();
    assert!(text.iter().any(|t| t.starts_with("Reading the fabric failed") && t.contains("InternalError")), "{text:?}");
}

#[tokio::test]
async fn a_new_data_repository_replaces_the_old_association_once_fsx_has_deleted_it() {
    use hpc_provider::resources::parallel_filesystem::ParallelFilesystem;
    let Env { emulator, ctx } = env();
    let ep = emulator.endpoint.as_str();
    let fabric_config = value(
        &GpuFabric,
        json!({"name": "cb", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5en.48xlarge", "placement": "none"}),
    );
    let (fabric, diags) = apply(&ctx, &GpuFabric, &Value::Null, &fabric_config).await;
    assert!(diags.is_empty(), "{diags:?}");
    let fs_config = |repo: &str| {
        value(
            &ParallelFilesystem,
            json!({"name": "data", "fabric": FABRIC_REF(), "capacity_gib": 1200, "throughput_per_tib": 250, "data_repository": repo}),
        )
    };
    let (fs, diags) = apply(&ctx, &ParallelFilesystem, &Value::Null, &fs_config("s3://datasets/v1")).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    let fs_id = fs.get("id").as_str().unwrap().rsplit('/').next().unwrap().to_owned();

    // FSx deletes an association asynchronously, and "/" holds one at a time: the new one is made once the
    // old one is gone.
    let (fs, diags) = apply(&ctx, &ParallelFilesystem, &fs, &fs_config("s3://datasets/v2")).await;
    assert!(!diags.iter().any(|d| d.contains("failed")), "{diags:?}");
    assert_eq!(fs.get("data_repository").as_str(), Some("s3://datasets/v2"));
    let snapshot = admin(ep, "GET", "snapshot", None);
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
    // A refresh reads the new association, not the one being deleted.
    let mut diags = Diagnostics::new();
    match ParallelFilesystem.read(&ctx, &fs, &[], &mut diags).await {
        ReadOutcome::Found { state, .. } => assert_eq!(state.get("data_repository").as_str(), Some("s3://datasets/v2")),
        ReadOutcome::Gone => panic!("gone"),
    }

    let mut diags = Diagnostics::new();
    for (r, state) in [(&ParallelFilesystem as &dyn Resource, &fs), (&GpuFabric, &fabric)] {
        r.apply(&ctx, ApplyRequest { prior: state, planned: &Value::Null, config: &Value::Null, private: &[] }, &mut diags).await;
    }
    assert!(!diags.has_errors(), "{:?}", diags.iter().collect::<Vec<_>>());
    assert_eq!(admin(ep, "GET", "inventory", None)["empty"], true);
}
