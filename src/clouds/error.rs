//! The one error every cloud's API layer returns: what kind of failure it is (not found, throttled with
//! the wait the cloud asked for, no capacity, quota, conflict, forbidden, invalid request with its field,
//! transient), the cloud's own code, and the message users see. Each `clouds/<cloud>/api.rs` makes it from
//! the cloud's HTTP status and error body (ARM `error.code`, Google `error.status` and `errors[].reason`,
//! OCI `code`, the AWS SDK's error code); everything above decides on `kind` and `code`, never on the text.

use std::fmt;
use std::time::Duration;

/// What went wrong, as far as a caller can act on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The thing asked for does not exist.
    NotFound,
    /// The cloud asked the caller to slow down, for `retry_after` when it said how long.
    Throttled { retry_after: Option<Duration> },
    /// No capacity for the node type where it was asked for; the cloud's code is in [`CloudError::code`].
    NoCapacity,
    /// A quota or service limit would be exceeded.
    Quota,
    /// The request conflicts with the current state (in use, already exists, a concurrent change).
    Conflict,
    /// The caller is not allowed to do this.
    Forbidden,
    /// The credentials were refused.
    Unauthenticated,
    /// The request is malformed or names something invalid; `field` is the cloud's name for the culprit.
    InvalidRequest { field: Option<String> },
    /// Server trouble or the network: worth another attempt.
    Transient,
    /// The CLI asked the provider to stop.
    Interrupted,
    /// A wait ran out of time.
    TimedOut,
    /// Anything else (including the provider's own findings about what the cloud returned).
    Other,
}

/// A failed cloud call or wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudError {
    pub kind: ErrorKind,
    /// The cloud's own code: `InsufficientInstanceCapacity`, `ZONE_RESOURCE_POOL_EXHAUSTED`, `AllocationFailed`.
    pub code: Option<String>,
    /// What users read, context first: `creating placement group (train-pg): InvalidParameterValue: ...`.
    pub message: String,
    /// The HTTP status the cloud answered, when the error is an answer (not a transport failure or one of
    /// the provider's own): the log's retry lines tell server trouble from a connection that failed by it.
    pub status: Option<u16>,
}

impl CloudError {
    pub fn new(kind: ErrorKind, code: Option<String>, message: impl Into<String>) -> CloudError {
        CloudError { kind, code, message: message.into(), status: None }
    }

    /// A failure the provider found itself, with no cloud code.
    pub fn other(message: impl Into<String>) -> CloudError {
        CloudError::new(ErrorKind::Other, None, message)
    }

    pub fn interrupted(message: impl Into<String>) -> CloudError {
        CloudError::new(ErrorKind::Interrupted, None, message)
    }

    pub fn timed_out(message: impl Into<String>) -> CloudError {
        CloudError::new(ErrorKind::TimedOut, None, message)
    }

    /// The kind HTTP's status gives, before a cloud refines it by its code: 404 not found, 429 throttled,
    /// 409 and 412 conflict, 401 unauthenticated, 403 forbidden, 400 and 422 invalid, 5xx transient.
    pub fn from_status(status: u16, retry_after: Option<Duration>, code: Option<&str>, message: impl Into<String>) -> CloudError {
        let kind = match status {
            404 | 410 => ErrorKind::NotFound,
            429 => ErrorKind::Throttled { retry_after },
            409 | 412 => ErrorKind::Conflict,
            401 => ErrorKind::Unauthenticated,
            403 => ErrorKind::Forbidden,
            400 | 422 => ErrorKind::InvalidRequest { field: None },
            500..=599 => ErrorKind::Transient,
            _ => ErrorKind::Other,
        };
        CloudError { status: Some(status), ..CloudError::new(kind, code.map(str::to_owned), message) }
    }

    /// The same error with `what` said first: `creating x: <message>`.
    pub fn context(mut self, what: impl fmt::Display) -> CloudError {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// The same error with its message rewritten (kind and code kept).
    pub fn map_message(mut self, f: impl FnOnce(String) -> String) -> CloudError {
        self.message = f(self.message);
        self
    }

    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }

    /// The cloud's code for "no capacity", when that is what this is.
    pub fn capacity_code(&self) -> Option<&str> {
        match self.kind {
            ErrorKind::NoCapacity => self.code.as_deref(),
            _ => None,
        }
    }

    /// Whether another attempt may succeed: throttling and transient trouble, nothing else.
    pub fn retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::Throttled { .. } | ErrorKind::Transient)
    }

    /// How long the cloud asked to wait before the next attempt, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            ErrorKind::Throttled { retry_after } => retry_after,
            _ => None,
        }
    }
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CloudError {}

/// A failure the provider found itself (a reply it cannot use, an id of the wrong form).
impl From<String> for CloudError {
    fn from(message: String) -> CloudError {
        CloudError::other(message)
    }
}

impl From<&str> for CloudError {
    fn from(message: &str) -> CloudError {
        CloudError::other(message)
    }
}

/// The message, where only text is wanted (a diagnostic detail, a log line).
impl From<CloudError> for String {
    fn from(e: CloudError) -> String {
        e.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_gives_the_kind_and_context_keeps_it() {
        let e = CloudError::from_status(429, Some(Duration::from_secs(7)), Some("TooManyRequests"), "slow down");
        assert_eq!(e.kind, ErrorKind::Throttled { retry_after: Some(Duration::from_secs(7)) });
        assert!(e.retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        let e = e.context("creating x");
        assert_eq!(e.to_string(), "creating x: slow down");
        assert_eq!(e.code.as_deref(), Some("TooManyRequests"));
        for (status, kind) in [
            (404, ErrorKind::NotFound),
            (409, ErrorKind::Conflict),
            (403, ErrorKind::Forbidden),
            (401, ErrorKind::Unauthenticated),
            (400, ErrorKind::InvalidRequest { field: None }),
            (503, ErrorKind::Transient),
            (302, ErrorKind::Other),
        ] {
            assert_eq!(CloudError::from_status(status, None, None, "m").kind, kind, "{status}");
        }
        assert!(!CloudError::from_status(404, None, None, "m").retryable());
    }

    #[test]
    fn only_a_capacity_error_has_a_capacity_code() {
        let short = CloudError::new(ErrorKind::NoCapacity, Some("AllocationFailed".into()), "the zone is full");
        assert_eq!(short.capacity_code(), Some("AllocationFailed"));
        let quota = CloudError::new(ErrorKind::Quota, Some("AllocationFailed".into()), "AllocationFailed");
        assert_eq!(quota.capacity_code(), None);
    }
}
