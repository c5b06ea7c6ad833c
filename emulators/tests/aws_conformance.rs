//! The AWS half of the judge (emulators/aws/conformance.py): botocore's own EC2 and FSx models refuse a
//! deliberately wrong request inside the moto server with the error EC2 or FSx sends. Each request carries
//! the probe header, so it is judged whenever `HPC_CONFORMANCE_DEFS` is set (strict or not) and its refusal
//! is logged as a probe, not as a violation of the run.

#[allow(unused_imports)]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use hpc_emulators::conformance::PROBE_HEADER;

fn definitions_given() {
    assert!(
        std::env::var_os("HPC_CONFORMANCE_DEFS").is_some(),
        "HPC_CONFORMANCE_DEFS is not set: run through ./scripts/test.sh, which reads the vendors' definitions out of their packages"
    );
}

/// One raw probe request: (status, body).
fn probe(endpoint: &str, service: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let addr = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "POST / HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n{PROBE_HEADER}: 1\r\ncontent-length: {}\r\n\
         authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

fn ec2(endpoint: &str, form: &str) -> (u16, String) {
    probe(endpoint, "ec2", &[("content-type", "application/x-www-form-urlencoded; charset=utf-8")], form)
}

fn fsx(endpoint: &str, operation: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let target = format!("AWSSimbaAPIService_v20180301.{operation}");
    let (status, body) =
        probe(endpoint, "fsx", &[("content-type", "application/x-amz-json-1.1"), ("x-amz-target", &target)], &body.to_string());
    (status, serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)))
}

/// EC2's error code and message out of its XML error answer.
fn ec2_error(body: &str) -> (String, String) {
    let between = |open: &str, close: &str| body.split_once(open).and_then(|(_, r)| r.split_once(close)).map(|(v, _)| v.to_owned());
    (between("<Code>", "</Code>").unwrap_or_default(), between("<Message>", "</Message>").unwrap_or_default())
}

#[test]
fn botocore_models_refuse_unknown_parameters_bad_enums_and_wrong_types_as_ec2_and_fsx_do() {
    definitions_given();
    let emulator = common::start_aws();
    let ep = emulator.endpoint.as_str();

    // A parameter CreatePlacementGroup does not have (the shape is named PlacementStrategy; the parameter is
    // Strategy): EC2's UnknownParameter, HTTP 400.
    let (status, body) = ec2(ep, "Action=CreatePlacementGroup&Version=2016-11-15&GroupName=pg&PlacementStrategy=cluster");
    assert_eq!(status, 400, "{body}");
    let (code, message) = ec2_error(&body);
    assert_eq!(code, "UnknownParameter", "{body}");
    assert_eq!(message, "The parameter PlacementStrategy is not recognized");

    // A value outside the PlacementStrategy enum: InvalidParameterValue.
    let (status, body) = ec2(ep, "Action=CreatePlacementGroup&Version=2016-11-15&GroupName=pg&Strategy=tightly");
    assert_eq!(status, 400, "{body}");
    let (code, message) = ec2_error(&body);
    assert_eq!(code, "InvalidParameterValue", "{body}");
    assert!(message.contains("tightly") && message.contains("cluster"), "{message}");

    // A nested key walked through the shape tree: TagSpecification.N.Tag.N is right, .Tags. is not.
    let (status, body) = ec2(
        ep,
        "Action=CreatePlacementGroup&Version=2016-11-15&GroupName=pg&Strategy=cluster&TagSpecification.1.ResourceType=placement-group&TagSpecification.1.Tags.1.Key=k",
    );
    assert_eq!((status, ec2_error(&body).0.as_str()), (400, "UnknownParameter"), "{body}");
    assert!(ec2_error(&body).1.contains("TagSpecification.1.Tags"), "{body}");

    // A required member left out, an action EC2 does not have, another API version.
    let (status, body) = ec2(ep, "Action=RunInstances&Version=2016-11-15&ImageId=ami-12c6146b&MinCount=1");
    assert_eq!((status, ec2_error(&body).0.as_str()), (400, "MissingParameter"), "{body}");
    assert!(ec2_error(&body).1.contains("MaxCount"), "{body}");
    let (status, body) = ec2(ep, "Action=LaunchRockets&Version=2016-11-15");
    assert_eq!((status, ec2_error(&body).0.as_str()), (400, "InvalidAction"), "{body}");
    let (status, body) = ec2(ep, "Action=DescribeVpcs&Version=2014-01-01");
    assert_eq!((status, ec2_error(&body).0.as_str()), (400, "NoSuchVersion"), "{body}");

    // Day 2's health listing: IncludeAllInstances is a boolean, and the filter list is `Filter.N`.
    let (status, body) = ec2(ep, "Action=DescribeInstanceStatus&Version=2016-11-15&IncludeAllInstances=yes&MaxResults=1000");
    assert_eq!((status, ec2_error(&body).0.as_str()), (400, "InvalidParameterValue"), "{body}");
    let (status, body) = ec2(ep, "Action=DescribeInstanceStatus&Version=2016-11-15&Filters.1.Name=event.code");
    assert_eq!((status, ec2_error(&body).0.as_str()), (400, "UnknownParameter"), "{body}");
    let (status, body) = ec2(ep, "Action=DescribeInstanceStatus&Version=2016-11-15&IncludeAllInstances=true&MaxResults=1000");
    assert_eq!(status, 200, "{body}");

    // The right request passes the judge and moto makes the group.
    let (status, body) = ec2(
        ep,
        "Action=CreatePlacementGroup&Version=2016-11-15&GroupName=pg&Strategy=cluster&TagSpecification.1.ResourceType=placement-group&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v",
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("<groupName>pg</groupName>"), "{body}");

    // FSx (JSON 1.1): a string where StorageCapacity is an integer is a SerializationException.
    let create = |capacity: serde_json::Value, kind: &str| {
        serde_json::json!({"FileSystemType": kind, "StorageCapacity": capacity, "SubnetIds": ["subnet-0123456789abcdef0"],
                           "LustreConfiguration": {"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250}})
    };
    let (status, body) = fsx(ep, "CreateFileSystem", create(serde_json::json!("1200"), "LUSTRE"));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["__type"], "SerializationException", "{body}");
    assert!(body["Message"].as_str().unwrap().contains("can not be converted to an Integer"), "{body}");
    // An enum value FSx does not have, and a member it does not have: ValidationException.
    let (status, body) = fsx(ep, "CreateFileSystem", create(serde_json::json!(1200), "LUSTER"));
    assert_eq!((status, body["__type"].as_str()), (400, Some("ValidationException")), "{body}");
    assert!(body["Message"].as_str().unwrap().contains("enum value set"), "{body}");
    let mut unknown = create(serde_json::json!(1200), "LUSTRE");
    unknown["MountName"] = serde_json::json!("fsx");
    let (status, body) = fsx(ep, "CreateFileSystem", unknown);
    assert_eq!((status, body["__type"].as_str()), (400, Some("ValidationException")), "{body}");
    assert!(body["Message"].as_str().unwrap().contains("MountName"), "{body}");
    let (status, body) = fsx(ep, "LaunchFileSystem", serde_json::json!({}));
    assert_eq!((status, body["__type"].as_str()), (400, Some("UnknownOperationException")), "{body}");

    // Every refusal was logged as a probe, with the operation and the model's version.
    if let Some(dir) = std::env::var_os("HPC_CONFORMANCE_LOG") {
        let lines: Vec<serde_json::Value> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            .flat_map(|e| std::fs::read_to_string(e.path()).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>())
            .filter_map(|l| serde_json::from_str(&l).ok())
            .filter(|l: &serde_json::Value| l["cloud"] == "aws" && l["program"] == "aws_conformance")
            .collect();
        let refused = |op: &str, version: &str| {
            lines.iter().any(|l| l["operation"] == op && l["version"] == version && l["verdict"] == "probe_refused")
        };
        assert!(refused("ec2.CreatePlacementGroup", "2016-11-15"), "{lines:?}");
        assert!(refused("fsx.CreateFileSystem", "2018-03-01"), "{lines:?}");
        assert!(!lines.iter().any(|l| l["verdict"] == "refused" || l["verdict"] == "bad_response"), "{lines:?}");
    }
}
