//! The log lines of AWS calls, which the SDK makes and retries inside itself (so `clouds::retry::send` never
//! sees them): an interceptor on every client writes one debug line per attempt (operation, HTTP status,
//! duration, attempt, `x-amzn-requestid`) and one info line per retry (why the attempt before failed and how
//! long the SDK waited), in the same fields as the other clouds' lines. It reads the exchange and changes
//! nothing of it; formatting happens only when the line's level is on.

use std::time::Instant;

use aws_sdk_ec2::config::interceptors::{BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef};
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::retries::RequestAttempts;
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use crate::clouds::ErrorKind;

/// The interceptor every AWS client carries.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogCalls;

/// When the attempt under way was sent, and its method and path (the request is gone once it is answered).
#[derive(Clone, Debug)]
struct Sent(Instant, String, String);

impl Storable for Sent {
    type Storer = StoreReplace<Self>;
}

/// How the last attempt failed, when it is worth another: for the retry line the next attempt writes.
#[derive(Clone, Debug)]
struct Failed {
    reason: &'static str,
    status: Option<u16>,
    code: Option<String>,
    at: Instant,
}

impl Storable for Failed {
    type Storer = StoreReplace<Self>;
}

fn operation(cfg: &ConfigBag) -> (&str, &str) {
    cfg.load::<Metadata>().map_or(("", ""), |m| (m.service(), m.name()))
}

fn attempt(cfg: &ConfigBag) -> u32 {
    cfg.load::<RequestAttempts>().map_or(1, |a| a.attempts())
}

/// The error code of a failed answer: the header AWS's JSON protocols send, else the body's `__type`
/// (JSON) or first `<Code>` (EC2's XML). Read only for failures, and only while a line will be written.
fn error_code(headers: &aws_smithy_runtime_api::http::Headers, body: Option<&[u8]>) -> Option<String> {
    if let Some(t) = headers.get("x-amzn-errortype") {
        return Some(t.split(':').next().unwrap_or(t).to_owned());
    }
    let text = std::str::from_utf8(body?).ok()?;
    let between = |open: &str, close: &str| {
        let start = text.find(open)? + open.len();
        let len = text[start..].find(close)?;
        Some(text[start..start + len].to_owned())
    };
    between("<Code>", "</Code>")
        .or_else(|| between("\"__type\":\"", "\""))
        .or_else(|| between("\"__type\": \"", "\""))
        .map(|c| c.rsplit('#').next().unwrap_or(&c).to_owned())
}

/// Why a failed attempt is worth another, as the SDK's standard retry classifiers see it: throttling (429 or
/// a throttling code), server trouble (5xx or a transient code), or no answer at all. None for failures
/// the SDK does not retry.
fn retry_reason(status: Option<u16>, code: Option<&str>) -> Option<&'static str> {
    let kind = code.map(super::api::kind_of);
    match (status, kind) {
        (_, Some(ErrorKind::Throttled { .. })) | (Some(429), _) => Some("throttled"),
        (Some(500..=599), _) | (_, Some(ErrorKind::Transient)) => Some("server error"),
        (None, _) => Some("transport"),
        _ => None,
    }
}

impl Intercept for LogCalls {
    fn name(&self) -> &'static str {
        "hpc-log-calls"
    }

    fn read_before_attempt(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(failed) = cfg.load::<Failed>().cloned()
            && tracing::enabled!(tracing::Level::INFO)
        {
            let (service, operation) = operation(cfg);
            let n = attempt(cfg);
            let attempts = crate::clouds::retry::POLICY.attempts;
            let waited_ms = failed.at.elapsed().as_millis() as u64;
            let (reason, status, code) = (failed.reason, failed.status, failed.code.as_deref());
            let why = code.or(status.map(|_| "")).map(|c| if c.is_empty() { String::new() } else { format!(" ({c})") }).unwrap_or_default();
            tracing::info!(
                cloud = "aws",
                service,
                operation,
                reason,
                status,
                code,
                attempt = n - 1,
                attempts,
                wait_ms = waited_ms,
                "aws {operation}: {reason}{why} on attempt {} of {attempts}; retried after {:.1} s",
                n - 1,
                waited_ms as f64 / 1000.0
            );
        }
        let request = context.request();
        let path = request.uri().split("://").nth(1).map_or("/", |rest| rest.find('/').map_or("/", |i| &rest[i..]));
        let path = path.split('?').next().unwrap_or(path).to_owned();
        cfg.interceptor_state().store_put(Sent(Instant::now(), request.method().to_owned(), path));
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let response = context.response();
        let status = response.map(|r| r.status().as_u16());
        let failed = status.is_none_or(|s| s >= 400);
        if !failed && !tracing::enabled!(tracing::Level::DEBUG) {
            cfg.interceptor_state().unset::<Failed>();
            return Ok(());
        }
        let code = if failed { response.and_then(|r| error_code(r.headers(), r.body().bytes())) } else { None };
        if tracing::enabled!(tracing::Level::DEBUG) {
            let (service, operation) = operation(cfg);
            let n = attempt(cfg);
            let sent = cfg.load::<Sent>();
            let duration_ms = sent.map_or(0, |s| s.0.elapsed().as_millis() as u64);
            let (method, path) = (sent.map(|s| s.1.as_str()), sent.map(|s| s.2.as_str()));
            let request_id = response.and_then(|r| r.headers().get("x-amzn-requestid").or_else(|| r.headers().get("x-amz-request-id")));
            let shown = match (status, code.as_deref()) {
                (Some(s), Some(c)) => format!("HTTP {s} {c}"),
                (Some(s), None) => format!("HTTP {s}"),
                (None, _) => "no answer".to_owned(),
            };
            tracing::debug!(
                cloud = "aws",
                service,
                operation,
                method,
                path,
                status,
                code,
                duration_ms,
                attempt = n,
                request_id,
                "aws {operation}: {shown} in {duration_ms} ms (attempt {n})"
            );
        }
        match retry_reason(status, code.as_deref()).filter(|_| failed) {
            Some(reason) => {
                cfg.interceptor_state().store_put(Failed { reason, status, code, at: Instant::now() });
            }
            None => {
                cfg.interceptor_state().unset::<Failed>();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_read_from_each_protocols_answer() {
        let none = aws_smithy_runtime_api::http::Headers::new();
        let ec2 = b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>slow</Message></Error></Errors></Response>";
        assert_eq!(error_code(&none, Some(ec2)).as_deref(), Some("RequestLimitExceeded"));
        let fsx = br#"{"__type":"com.amazonaws.fsx#ThrottlingException","message":"Rate exceeded"}"#;
        assert_eq!(error_code(&none, Some(fsx)).as_deref(), Some("ThrottlingException"));
        let mut typed = aws_smithy_runtime_api::http::Headers::new();
        typed.insert("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/");
        assert_eq!(error_code(&typed, None).as_deref(), Some("ThrottlingException"));
        assert_eq!(error_code(&none, Some(b"not an error")), None);
    }

    #[test]
    fn retry_reasons_follow_the_sdks_classes() {
        assert_eq!(retry_reason(Some(503), Some("RequestLimitExceeded")), Some("throttled"));
        assert_eq!(retry_reason(Some(400), Some("ThrottlingException")), Some("throttled"));
        assert_eq!(retry_reason(Some(500), Some("InternalError")), Some("server error"));
        assert_eq!(retry_reason(None, None), Some("transport"));
        assert_eq!(retry_reason(Some(400), Some("InvalidParameterValue")), None);
        assert_eq!(retry_reason(Some(404), None), None);
    }
}
