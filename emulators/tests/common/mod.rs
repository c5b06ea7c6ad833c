//! Starting the AWS emulator (moto + our extension) for a test binary, and a tiny client for its admin API.
#![allow(dead_code)]

use std::sync::OnceLock;

pub use hpc_emulators::harness::{AwsEmulator as Emulator, admin, start_aws};

/// One emulator per test binary, started on a free 127.0.0.1 port. Tests share it and keep apart by
/// region; the moto venv comes from `./scripts/test.sh` (HPC_MOTO_PYTHON).
pub fn aws() -> &'static str {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    &EMULATOR.get_or_init(start_aws).endpoint
}

pub fn ec2(endpoint: &str, region: &str) -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new(region.to_owned()))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        // Faults must reach the test as they are; retry behaviour is the provider's business.
        .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

pub fn fsx(endpoint: &str, region: &str) -> aws_sdk_fsx::Client {
    let config = aws_sdk_fsx::Config::builder()
        .behavior_version(aws_sdk_fsx::config::BehaviorVersion::latest())
        .region(aws_sdk_fsx::config::Region::new(region.to_owned()))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        .retry_config(aws_sdk_fsx::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_fsx::Client::from_conf(config)
}

/// The error code of an SDK error (`InvalidPlacementGroup.Duplicate`, `RequestLimitExceeded`, ...).
pub fn code<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String {
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    err.code().unwrap_or("(no code)").to_owned()
}

pub fn message<E: aws_sdk_ec2::error::ProvideErrorMetadata, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String {
    use aws_sdk_ec2::error::ProvideErrorMetadata;
    err.message().unwrap_or("").to_owned()
}
