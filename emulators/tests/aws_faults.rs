//! Fault injection and request counters of the AWS emulator, through the real SDK clients: each fault
//! arrives with the error the real service sends. A binary of its own: faults are global to an emulator.

mod common;

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::InstanceType;
use common::{admin, code, ec2, fsx, message, start_aws};
use serde_json::json;

#[tokio::test]
async fn faults_arrive_as_the_real_services_send_them_and_counters_count() {
    let emulator = start_aws();
    let ep = emulator.endpoint.as_str();
    let client = ec2(ep, "us-east-1");

    // Throttling: EC2's RequestLimitExceeded (HTTP 503), once, then normal service.
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "DescribeInstances", "kind": "throttle", "times": 1})));
    let throttled = client.describe_instances().send().await.unwrap_err();
    assert_eq!(code(&throttled), "RequestLimitExceeded");
    assert_eq!(throttled.raw_response().map(|r| r.status().as_u16()), Some(503));
    client.describe_instances().send().await.unwrap();

    // Insufficient capacity on the 2nd launch, naming the instance type and zone.
    admin(ep, "DELETE", "faults", None);
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "RunInstances", "kind": "capacity", "nth": 2})));
    let launch = || {
        client
            .run_instances()
            .image_id("ami-12c6146b")
            .instance_type(InstanceType::P548xlarge)
            .placement(aws_sdk_ec2::types::Placement::builder().availability_zone("us-east-1a").build())
            .min_count(1)
            .max_count(1)
            .send()
    };
    launch().await.unwrap();
    let ice = launch().await.unwrap_err();
    assert_eq!(code(&ice), "InsufficientInstanceCapacity");
    assert!(message(&ice).contains("p5.48xlarge") && message(&ice).contains("us-east-1a"), "{}", message(&ice));
    launch().await.unwrap();

    // 5xx and latency.
    admin(ep, "DELETE", "faults", None);
    admin(ep, "POST", "faults", Some(json!({"service": "ec2", "operation": "DescribeVpcs", "kind": "server_error", "times": 1})));
    let internal = client.describe_vpcs().send().await.unwrap_err();
    assert_eq!(code(&internal), "InternalError");
    admin(
        ep,
        "POST",
        "faults",
        Some(json!({"service": "ec2", "operation": "DescribeSubnets", "kind": "latency", "latency_ms": 300, "times": 1})),
    );
    let started = Instant::now();
    client.describe_subnets().send().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));

    // FSx throttling is a JSON ThrottlingException.
    use aws_sdk_fsx::error::ProvideErrorMetadata;
    admin(ep, "POST", "faults", Some(json!({"service": "fsx", "operation": "DescribeFileSystems", "kind": "throttle", "times": 1})));
    let fsx_throttled = fsx(ep, "us-east-1").describe_file_systems().send().await.unwrap_err();
    assert_eq!(fsx_throttled.code(), Some("ThrottlingException"));

    // A 30% throttle is deterministic for a given seed, and the counters see every call.
    admin(ep, "DELETE", "faults", None);
    admin(ep, "DELETE", "counters", None);
    admin(
        ep,
        "POST",
        "faults",
        Some(json!({"service": "ec2", "operation": "DescribeInstances", "kind": "throttle", "probability": 0.3, "seed": 7})),
    );
    let mut failures = 0;
    for _ in 0..100 {
        if client.describe_instances().send().await.is_err() {
            failures += 1;
        }
    }
    assert!((15..=45).contains(&failures), "{failures} of 100 throttled");
    let counters = admin(ep, "GET", "counters", None);
    assert_eq!(counters["counters"]["ec2:DescribeInstances"], 100);

    // Reset empties the emulator.
    admin(ep, "POST", "reset", None);
    let inventory = admin(ep, "GET", "inventory", None);
    assert_eq!(inventory["empty"], true, "{inventory}");
}
