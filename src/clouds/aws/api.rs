//! The AWS API clients (aws-sdk-ec2, aws-sdk-fsx) as the resources use them: one client pair per region
//! and configuration, the standard credential chain for real use, static credentials and the endpoint
//! override for emulators; errors turned into the cloud's own words; a cancellable waiter.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_ec2::error::ProvideErrorMetadata;

use crate::catalog::Cloud;
use crate::config::{CloudSettings, ProviderConfig};
use crate::framework::Context;

/// The clients for one region.
#[derive(Clone)]
pub struct Aws {
    pub ec2: aws_sdk_ec2::Client,
    pub fsx: aws_sdk_fsx::Client,
    pub region: String,
}

/// How many attempts the SDK makes on throttling and transient errors before we report them.
const MAX_ATTEMPTS: u32 = 6;

/// Clients for `region` under the provider's `aws` block, built once per process and region (the
/// credential chain may probe the network, so it runs once, not per call).
pub async fn connect(ctx: &Context, region: &str) -> Aws {
    static CLIENTS: Mutex<BTreeMap<String, Aws>> = Mutex::new(BTreeMap::new());
    let settings = ctx.configured::<ProviderConfig>().and_then(|c| c.clouds.get(&Cloud::Aws)).cloned().unwrap_or_default();
    let key = format!("{region}|{:?}|{:?}", settings.endpoint, settings.settings);
    if let Some(found) = CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return found.clone();
    }
    let aws = build(&settings, region).await;
    CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, aws.clone());
    aws
}

async fn build(settings: &CloudSettings, region: &str) -> Aws {
    let s = |k: &str| settings.settings.get(k).cloned();
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_owned()))
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS));
    if let Some(profile) = s("profile") {
        loader = loader.profile_name(profile);
    }
    if let (Some(access), Some(secret)) = (s("access_key"), s("secret_key")) {
        loader = loader.credentials_provider(aws_credential_types::Credentials::new(access, secret, s("token"), None, "hpc-provider"));
    }
    if let Some(endpoint) = &settings.endpoint {
        loader = loader.endpoint_url(endpoint.trim_end_matches('/'));
    }
    let shared = loader.load().await;
    Aws { ec2: aws_sdk_ec2::Client::new(&shared), fsx: aws_sdk_fsx::Client::new(&shared), region: region.to_owned() }
}

/// A failed call in the cloud's own words: `Code: message`, or what kept the request from AWS.
pub fn why<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_ec2::error::SdkError;
    match err {
        SdkError::ServiceError(e) => {
            let inner = e.err();
            match (inner.code(), inner.message()) {
                (Some(code), Some(msg)) => format!("{code}: {msg}"),
                (Some(code), None) => code.to_owned(),
                _ => aws_sdk_ec2::error::DisplayErrorContext(err).to_string(),
            }
        }
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => format!(
            "the AWS API could not be reached ({}); check the network, the region and any endpoint override",
            aws_sdk_ec2::error::DisplayErrorContext(err)
        ),
        other => aws_sdk_ec2::error::DisplayErrorContext(other).to_string(),
    }
}

/// The error code of a service error, if it is one.
pub fn code<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> Option<&str>
where
    E: ProvideErrorMetadata,
{
    match err {
        aws_sdk_ec2::error::SdkError::ServiceError(e) => e.err().code(),
        _ => None,
    }
}

/// Polls `check` until it yields a value, with a backoff from 200 ms to 5 s, until `timeout` passes or
/// StopProvider cancels. `check` returns `Ok(None)` to keep waiting and `Err` for a terminal failure.
pub async fn wait_for<T, F, Fut>(ctx: &Context, what: &str, timeout: Duration, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut delay = Duration::from_millis(200);
    let interrupted = || format!("interrupted while waiting for {what} (the CLI asked the provider to stop)");
    loop {
        // The check's own API call is abandoned too when the CLI asks the provider to stop.
        let checked = tokio::select! {
            _ = ctx.cancelled() => return Err(interrupted()),
            c = check() => c,
        };
        if let Some(done) = checked? {
            return Ok(done);
        }
        if tokio::time::Instant::now() + delay > deadline {
            return Err(format!(
                "timed out after {} waiting for {what}; raise the timeout in the resource's timeouts block if the cloud is slow",
                human(timeout)
            ));
        }
        tokio::select! {
            _ = ctx.cancelled() => return Err(interrupted()),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

pub fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    match d.as_secs() {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A resource's timeout for `op` (`create`, `update`, `delete`) from its `timeouts` block, or `default`.
pub fn timeout(state: &crate::framework::Value, op: &str, default: Duration) -> Duration {
    state.get("timeouts").get(op).as_str().and_then(crate::planner::spec::parse_duration).map_or(default, Duration::from_secs)
}

/// EC2 tags from a map.
pub fn ec2_tags(tags: &BTreeMap<String, String>) -> Vec<aws_sdk_ec2::types::Tag> {
    tags.iter().map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build()).collect()
}

/// Tag specifications for a create call.
pub fn tag_spec(kind: aws_sdk_ec2::types::ResourceType, tags: &BTreeMap<String, String>) -> aws_sdk_ec2::types::TagSpecification {
    aws_sdk_ec2::types::TagSpecification::builder().resource_type(kind).set_tags(Some(ec2_tags(tags))).build()
}

/// A map from EC2 tags.
pub fn tag_map(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_owned(), t.value().unwrap_or_default().to_owned()))).collect()
}

/// `tag:<key> = value` filter.
pub fn tag_filter(key: &str, value: &str) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder().name(format!("tag:{key}")).values(value).build()
}

pub fn filter(name: &str, values: &[&str]) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder().name(name).set_values(Some(values.iter().map(|v| (*v).to_owned()).collect())).build()
}

/// Ids the resources use: `aws/<region>/<name>`; the region says which API to ask.
pub fn resource_id(region: &str, name: &str) -> String {
    format!("aws/{region}/{name}")
}

/// Splits `aws/<region>/<name>`.
pub fn parse_id(id: &str) -> Option<(&str, &str)> {
    let rest = id.strip_prefix("aws/")?;
    let (region, name) = rest.split_once('/')?;
    (!region.is_empty() && !name.is_empty() && !name.contains('/')).then_some((region, name))
}

/// The user's own tags: those on a piece, less the ones this provider writes and the provider's defaults.
pub fn user_tags(live: &BTreeMap<String, String>, defaults: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    live.iter()
        .filter(|(k, v)| !k.starts_with("hpc:") && !k.starts_with("aws:") && k.as_str() != "Name" && defaults.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context::new(tokio_util::sync::CancellationToken::new(), None)
    }

    #[tokio::test]
    async fn a_wait_ends_when_stop_provider_cancels_it() {
        let c = ctx();
        let token = c.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            token.cancel();
        });
        let started = std::time::Instant::now();
        let out: Result<(), String> = wait_for(&c, "nodes to run", Duration::from_secs(3600), || async { Ok(None) }).await;
        let err = out.unwrap_err();
        assert!(err.contains("interrupted while waiting for nodes to run"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2), "cancellation took {:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_wait_times_out_with_the_timeout_named() {
        let out: Result<(), String> = wait_for(&ctx(), "fs-1 to become AVAILABLE", Duration::from_millis(500), || async { Ok(None) }).await;
        let err = out.unwrap_err();
        assert!(err.contains("timed out after 500ms waiting for fs-1 to become AVAILABLE") && err.contains("timeouts block"), "{err}");
    }

    #[tokio::test]
    async fn a_wait_returns_the_first_answer_and_stops_at_a_terminal_failure() {
        let mut polls = 0;
        let out = wait_for(&ctx(), "x", Duration::from_secs(10), || {
            polls += 1;
            let n = polls;
            async move { Ok((n == 3).then_some(n)) }
        })
        .await;
        assert_eq!(out, Ok(3));
        let failed: Result<(), String> = wait_for(&ctx(), "x", Duration::from_secs(10), || async {
            Err("node went to terminated: Server.InsufficientInstanceCapacity".to_owned())
        })
        .await;
        assert_eq!(failed.unwrap_err(), "node went to terminated: Server.InsufficientInstanceCapacity");
    }

    #[test]
    fn timeouts_come_from_the_timeouts_block() {
        let state = crate::framework::Value::object([(
            "timeouts",
            crate::framework::Value::object([("create", crate::framework::Value::from("90m"))]),
        )]);
        assert_eq!(timeout(&state, "create", Duration::from_secs(60)), Duration::from_secs(5400));
        assert_eq!(timeout(&state, "delete", Duration::from_secs(60)), Duration::from_secs(60));
        assert_eq!(timeout(&crate::framework::Value::Null, "create", Duration::from_secs(7)), Duration::from_secs(7));
    }

    #[test]
    fn ids_round_trip_and_reject_other_shapes() {
        assert_eq!(parse_id(&resource_id("us-east-1", "train")), Some(("us-east-1", "train")));
        for bad in ["train", "aws/us-east-1", "aws//x", "gcp/us-east-1/x", "aws/us-east-1/a/b"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human(Duration::from_secs(3600)), "1h");
        assert_eq!(human(Duration::from_secs(90 * 60)), "90m");
        assert_eq!(human(Duration::from_secs(45)), "45s");
    }

    #[test]
    fn user_tags_leave_out_ours_and_the_defaults() {
        let live: BTreeMap<String, String> = [("hpc:fabric", "f"), ("team", "ml"), ("env", "prod"), ("Name", "f-sg")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let defaults: BTreeMap<String, String> = [("env".to_string(), "prod".to_string())].into();
        assert_eq!(user_tags(&live, &defaults), [("team".to_string(), "ml".to_string())].into());
    }
}
