//! The AWS API clients (aws-sdk-ec2, aws-sdk-fsx, aws-sdk-eks, aws-sdk-servicequotas) as the resources use them: one client pair per region
//! and configuration, the standard credential chain for real use, static credentials and the endpoint
//! override for emulators; errors turned into the cloud's own words (the waiter is `shared::wait_for`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use aws_sdk_ec2::error::ProvideErrorMetadata;

use crate::catalog::Cloud;
use crate::clouds::{CloudError, ErrorKind};
use crate::config::{CloudSettings, ProviderConfig};
use crate::framework::Context;

/// The clients for one region.
#[derive(Clone)]
pub struct Aws {
    pub ec2: aws_sdk_ec2::Client,
    pub fsx: aws_sdk_fsx::Client,
    /// EKS, for node groups of GPU node pools (the Kubernetes cluster itself is only read).
    pub eks: aws_sdk_eks::Client,
    /// Service Quotas, for the plan's quota check (the same endpoint override as EC2).
    pub quotas: aws_sdk_servicequotas::Client,
    pub region: String,
}

/// Clients for `region` under the provider's `aws` block, built once per process and region (the
/// credential chain may probe the network, so it runs once, not per call).
pub async fn connect(ctx: &Context, region: &str) -> Aws {
    static CLIENTS: Mutex<BTreeMap<String, Aws>> = Mutex::new(BTreeMap::new());
    let settings = ctx.configured::<ProviderConfig>().and_then(|c| c.clouds.get(&Cloud::Aws)).cloned().unwrap_or_default();
    let key = format!("{region}|{}", settings.client_key());
    if let Some(found) = CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return found.clone();
    }
    let aws = build(&settings, region).await;
    CLIENTS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, aws.clone());
    aws
}

/// A batch's RunInstances `ClientToken` ("Unique, case-sensitive identifier you provide to ensure the
/// idempotency of the request"; at most 64 ASCII characters): `hpc-` and 32 random hex digits, one per batch
/// and so one for every attempt at it, so that a launch EC2 carried out whose answer was lost is answered,
/// when sent again, with its first reservation instead of being made twice.
pub fn client_token() -> String {
    let mut b = [0u8; 16];
    let _ = aws_lc_rs::rand::fill(&mut b);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    ["hpc", &hex].join("-")
}

/// The SDK's own retries (standard mode: throttling and transient errors, exponential backoff with full
/// jitter, a retry quota against storms) on the one policy every cloud follows (`clouds::retry::POLICY`):
/// the same attempts, first wait and longest wait.
pub fn sdk_retries() -> aws_config::retry::RetryConfig {
    let p = crate::clouds::retry::POLICY;
    aws_config::retry::RetryConfig::standard().with_max_attempts(p.attempts).with_initial_backoff(p.first).with_max_backoff(p.max)
}

/// The SDK's retries turned off for one call: [`create_untokened`] decides itself whether to send it again.
pub fn no_retries() -> aws_sdk_ec2::config::Builder {
    aws_sdk_ec2::config::Builder::default().retry_config(aws_config::retry::RetryConfig::disabled())
}

/// Filters that find what a create tagged with `tags` made: its `Name` and its owner's marker (`hpc:owner`).
pub fn made_filters(tags: &BTreeMap<String, String>) -> Vec<aws_sdk_ec2::types::Filter> {
    ["Name", crate::ownership::KEY].iter().filter_map(|k| tags.get(*k).map(|v| tag_filter(k, v))).collect()
}

/// A create EC2 offers no idempotency token for (CreateVpc, CreateSubnet, CreateSecurityGroup,
/// CreatePlacementGroup), made at most once: `send` makes the call without the SDK's retries (see
/// [`no_retries`]); after an error that may hide a call EC2 carried out (a 5xx, a throttle, a dropped
/// connection or a timeout), `lookup` looks for what the owner's marker and name find before the call is
/// sent again, so a lost answer is adopted instead of a second one being made. Other errors are returned
/// at once; the waits follow the one retry policy (`clouds::retry::POLICY`).
pub async fn create_untokened<T, S, SF, L, LF>(operation: &str, what: &str, send: S, lookup: L) -> Result<T, CloudError>
where
    S: FnMut() -> SF,
    SF: std::future::Future<Output = Result<T, CloudError>>,
    L: FnMut() -> LF,
    LF: std::future::Future<Output = Result<Option<T>, CloudError>>,
{
    crate::clouds::retry::made_once("aws", operation, what, send, lookup).await
}

/// Clients of region `us-east-1` against `base` (a local server), with static keys.
#[cfg(test)]
pub async fn local(base: &str) -> Aws {
    let settings = CloudSettings {
        endpoint: Some(base.to_owned()),
        settings: Default::default(),
        secrets: [("access_key", "AKIDEXAMPLE"), ("secret_key", "secret")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), crate::redact::Secret::new(v.to_owned())))
            .collect(),
    };
    build(&settings, "us-east-1").await
}

async fn build(settings: &CloudSettings, region: &str) -> Aws {
    let s = |k: &str| settings.settings.get(k).cloned();
    let secret = |k: &str| settings.secret(k).map(|v| v.expose().clone());
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_owned()))
        .retry_config(sdk_retries());
    if let Some(profile) = s("profile") {
        loader = loader.profile_name(profile);
    }
    if let (Some(access), Some(key)) = (secret("access_key"), secret("secret_key")) {
        loader = loader.credentials_provider(aws_credential_types::Credentials::new(access, key, secret("token"), None, "hpc-provider"));
    }
    if let Some(endpoint) = &settings.endpoint {
        loader = loader.endpoint_url(endpoint.trim_end_matches('/'));
    }
    let shared = loader.load().await;
    // Every client logs its calls and retries (`calls.rs`).
    let log = super::calls::LogCalls;
    Aws {
        ec2: aws_sdk_ec2::Client::from_conf(aws_sdk_ec2::config::Builder::from(&shared).interceptor(log).build()),
        fsx: aws_sdk_fsx::Client::from_conf(aws_sdk_fsx::config::Builder::from(&shared).interceptor(log).build()),
        eks: aws_sdk_eks::Client::from_conf(aws_sdk_eks::config::Builder::from(&shared).interceptor(log).build()),
        quotas: aws_sdk_servicequotas::Client::from_conf(aws_sdk_servicequotas::config::Builder::from(&shared).interceptor(log).build()),
        region: region.to_owned(),
    }
}

/// A failed call as a [`CloudError`]: the kind from the service's error code (the SDK has retried
/// throttling and transient errors already), the code, and [`why`] as its message.
pub fn error<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    use aws_sdk_ec2::error::SdkError;
    let message = why(err);
    if credentials_failure(err).is_some() {
        return CloudError::new(ErrorKind::Unauthenticated, None, message);
    }
    match err {
        SdkError::ServiceError(_) => match code(err) {
            Some(c) => CloudError::new(kind_of(c), Some(c.to_owned()), message),
            None => CloudError::other(message),
        },
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => CloudError::new(ErrorKind::Transient, None, message),
        _ => CloudError::other(message),
    }
}

/// What to do about credentials that could not be had, as one sentence, when that is why a call failed:
/// the SDK fails such a call before sending it (a dispatch failure, with the credential provider's error
/// at the bottom of its sources), and another attempt would find none either.
fn credentials_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    use aws_credential_types::provider::error::CredentialsError;
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = at {
        if let Some(failed) = e.downcast_ref::<CredentialsError>() {
            let set = "set access_key and secret_key in the provider's aws block, or a profile, or the standard AWS environment \
                       variables (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)";
            return Some(match failed {
                CredentialsError::CredentialsNotLoaded(_) | CredentialsError::ProviderTimedOut(_) => {
                    format!("no AWS credentials: {set}; the AWS SDK's credential chain found none")
                }
                // A source of the chain failed (a profile that does not resolve, an instance metadata service
                // that refuses): the chain stops there.
                other => format!(
                    "no AWS credentials: {set}; the AWS SDK's credential chain stopped at: {}",
                    innermost(other).trim_end_matches('.')
                ),
            });
        }
        at = e.source();
    }
    None
}

/// The last of an error's sources: the cause itself, without the layers that only say where it was seen.
fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut e = err;
    while let Some(next) = e.source() {
        e = next;
    }
    e.to_string()
}

/// The kind of an EC2, FSx or Service Quotas error code (EC2 API reference, "Error codes").
pub fn kind_of(code: &str) -> ErrorKind {
    match code {
        "InsufficientInstanceCapacity" | "InsufficientCapacityOnHost" | "InsufficientHostCapacity" | "ReservationCapacityExceeded" => {
            ErrorKind::NoCapacity
        }
        "Throttling" | "ThrottlingException" | "RequestLimitExceeded" | "TooManyRequestsException" => {
            ErrorKind::Throttled { retry_after: None }
        }
        "InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable" | "InternalServerError" | "ServerException" => {
            ErrorKind::Transient
        }
        "AuthFailure" | "UnrecognizedClientException" | "InvalidClientTokenId" => ErrorKind::Unauthenticated,
        "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException" => ErrorKind::Forbidden,
        "DependencyViolation"
        | "IncorrectState"
        | "IncorrectInstanceState"
        | "IncorrectFileSystemLifeCycleState"
        | "BadRequest.Conflict"
        | "ResourceInUseException" => ErrorKind::Conflict,
        c if c.ends_with(".Duplicate") || c.ends_with("AlreadyExists") || c.ends_with(".InUse") => ErrorKind::Conflict,
        c if c.ends_with("NotFound") || c.ends_with("NotFoundException") || c == "NoSuchResourceException" => ErrorKind::NotFound,
        c if c.ends_with("LimitExceeded") || c.ends_with("LimitExceededException") || c == "VcpuLimitExceeded" => ErrorKind::Quota,
        c if c.starts_with("InvalidParameter") || c.starts_with("MissingParameter") || c == "ValidationException" => {
            ErrorKind::InvalidRequest { field: None }
        }
        c if c.starts_with("Invalid") => ErrorKind::InvalidRequest { field: None },
        _ => ErrorKind::Other,
    }
}

/// A failed call in the cloud's own words: `Code: message`, or what kept the request from AWS (credentials
/// that could not be had said in one sentence).
pub fn why<E, R>(err: &aws_sdk_ec2::error::SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    use aws_sdk_ec2::error::SdkError;
    if let Some(missing) = credentials_failure(err) {
        return missing;
    }
    // An answer the SDK could not read is shown whole by its context (the raw response with its body,
    // which may be a whole list): what the message quotes is bounded.
    let why = match err {
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
    };
    crate::clouds::shared::quoted(&why).into_owned()
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
    crate::clouds::shared::resource_id(crate::catalog::Cloud::Aws, &[region], name)
}

/// Splits `aws/<region>/<name>`.
pub fn parse_id(id: &str) -> Option<(&str, &str)> {
    crate::clouds::shared::parse_id(crate::catalog::Cloud::Aws, id).map(|[region, name]| (region, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_error_codes_map_to_their_kinds() {
        // The codes EC2, FSx and Service Quotas answer with (the SDK hands over the code of the error body).
        for (code, kind) in [
            ("InsufficientInstanceCapacity", ErrorKind::NoCapacity),
            ("ReservationCapacityExceeded", ErrorKind::NoCapacity),
            ("InvalidLaunchTemplateName.NotFoundException", ErrorKind::NotFound),
            ("InvalidGroup.NotFound", ErrorKind::NotFound),
            ("FileSystemNotFound", ErrorKind::NotFound),
            ("RequestLimitExceeded", ErrorKind::Throttled { retry_after: None }),
            ("VcpuLimitExceeded", ErrorKind::Quota),
            ("ServiceLimitExceeded", ErrorKind::Quota),
            ("DependencyViolation", ErrorKind::Conflict),
            ("InvalidGroup.Duplicate", ErrorKind::Conflict),
            ("UnauthorizedOperation", ErrorKind::Forbidden),
            ("AuthFailure", ErrorKind::Unauthenticated),
            ("InvalidParameterValue", ErrorKind::InvalidRequest { field: None }),
            ("InternalError", ErrorKind::Transient),
            // EKS's.
            ("ResourceNotFoundException", ErrorKind::NotFound),
            ("ResourceInUseException", ErrorKind::Conflict),
            ("ResourceLimitExceededException", ErrorKind::Quota),
            ("InvalidParameterException", ErrorKind::InvalidRequest { field: None }),
            ("ServerException", ErrorKind::Transient),
            ("SomethingNew", ErrorKind::Other),
        ] {
            assert_eq!(kind_of(code), kind, "{code}");
        }
    }

    /// Credentials the chain could not find fail the call before it is sent: one sentence saying so and what
    /// to set, as the refused credentials they amount to, and at once (neither the SDK nor the caller tries
    /// again), not the SDK's dispatch failure with its sources.
    #[tokio::test]
    async fn missing_credentials_are_one_sentence_and_not_retried() {
        use aws_credential_types::provider::{ProvideCredentials, error::CredentialsError, future};
        #[derive(Debug)]
        struct NoneFound;
        impl ProvideCredentials for NoneFound {
            fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
            where
                Self: 'a,
            {
                future::ProvideCredentials::ready(Err(CredentialsError::not_loaded("no providers in chain provided credentials")))
            }
        }
        let config = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .retry_config(sdk_retries())
            .credentials_provider(NoneFound)
            // Nothing listens there: the call must fail before it is sent.
            .endpoint_url("http://127.0.0.1:9")
            .build();
        let started = std::time::Instant::now();
        let failed = aws_sdk_ec2::Client::from_conf(config).describe_instances().send().await.expect_err("no credentials");
        let e = error(&failed).context("listing the cluster's nodes");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(e.kind, ErrorKind::Unauthenticated, "{e:?}");
        assert!(!e.retryable());
        assert_eq!(
            e.message,
            "listing the cluster's nodes: no AWS credentials: set access_key and secret_key in the provider's aws block, or a profile, \
             or the standard AWS environment variables (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE); the AWS SDK's \
             credential chain found none"
        );
    }

    #[test]
    fn ids_round_trip_and_reject_other_shapes() {
        assert_eq!(parse_id(&resource_id("us-east-1", "train")), Some(("us-east-1", "train")));
        for bad in ["train", "aws/us-east-1", "aws//x", "gcp/us-east-1/x", "aws/us-east-1/a/b"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }
}
