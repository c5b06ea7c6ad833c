//! The one request-retry policy every cloud client follows: how many attempts a call gets, how long it
//! waits between them (doubling from `first` to `max`, with jitter so calls that failed together do not
//! come back together, or the cloud's own `Retry-After` when it gave one, up to a minute), what is worth
//! another attempt (throttling, server trouble, a connection that failed: nothing else), and StopProvider,
//! which ends the wait and abandons the call in flight. Google, Azure and OCI requests go through [`send`];
//! the AWS SDK retries inside itself and is configured from [`POLICY`] (`aws/api.rs`). Long waits for
//! something to become ready are polls, not retries: `shared::Poll`. Every attempt is a debug line and
//! every retry an info line ([`log_attempt`], [`log_retry`]; the AWS SDK's calls write the same through
//! `aws/calls.rs`), so `TF_LOG_PROVIDER=debug` shows each call a run made.

use std::future::Future;
use std::time::Duration;

use crate::clouds::CloudError;
use crate::clouds::throttle::{TokenBucket, jitter};
use crate::framework::Context;

/// How requests are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Attempts per call, the first included.
    pub attempts: u32,
    /// The wait after the first failed attempt, before jitter.
    pub first: Duration,
    /// The longest wait of our own between attempts.
    pub max: Duration,
    /// The longest `Retry-After` honoured; a cloud asking for more gets this.
    pub longest_retry_after: Duration,
}

/// The policy of every cloud. Under heavy throttling (the fault suite throttles 30% of calls) eight attempts
/// leave 0.3^8 = 0.007% of calls failing, where six left 0.07% (about one apply in ten of a few hundred
/// calls); the waits add up to about 45 s at most, so a persistent error still reports within a minute.
pub const POLICY: Policy =
    Policy { attempts: 8, first: Duration::from_millis(250), max: Duration::from_secs(16), longest_retry_after: Duration::from_secs(60) };

impl Policy {
    /// Our own wait after attempt `attempt` (1-based) failed, before jitter: `first` doubled per attempt, up
    /// to `max`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(16);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }

    /// The wait before the attempt after `attempt`: the cloud's `Retry-After` as given (at most
    /// `longest_retry_after`), otherwise [`Policy::backoff`] with jitter.
    pub fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(after) => after.min(self.longest_retry_after),
            None => jitter(self.backoff(attempt)),
        }
    }
}

/// What one attempt of a request gave.
pub enum Answer<T> {
    /// An answer to hand back as it is (a success or a failure not worth repeating).
    Done(T),
    /// An answer worth asking again for (429, 5xx), with the cloud's `Retry-After` if it gave one; handed
    /// back as it is when the attempts are spent, so the caller words the failure.
    Again(T, Option<Duration>),
}

/// One request, as its log lines name it: the cloud, the API operation (`compute.instances.insert`, `PUT
/// virtualMachineScaleSets`, `LaunchInstance`), the HTTP method and path (no query: it says nothing a
/// person follows and can be long), and `what` the caller is doing, which errors carry. The operation is
/// worked out by `name` only when a line is written, so a request whose lines are off costs nothing.
#[derive(Clone, Default)]
pub struct Call<'a> {
    pub cloud: &'static str,
    pub operation: std::borrow::Cow<'a, str>,
    /// The operation, worked out when a line needs it (takes the place of `operation`).
    pub name: Option<&'a (dyn Fn() -> String + Sync)>,
    pub method: &'a str,
    pub path: &'a str,
    pub what: &'a str,
}

impl Call<'_> {
    fn operation(&self) -> std::borrow::Cow<'_, str> {
        match self.name {
            Some(name) => name().into(),
            None => self.operation.as_ref().into(),
        }
    }
}

impl<'a> From<&'a str> for Call<'a> {
    /// A call known only by what it does (the operation is then that phrase).
    fn from(what: &'a str) -> Call<'a> {
        Call { operation: what.into(), what, ..Call::default() }
    }
}

/// What an attempt's answer says about the exchange, for its log line: the HTTP status and the cloud's
/// request id (`x-ms-request-id`, `opc-request-id`), when the answer carries them.
pub trait Heard {
    fn status(&self) -> Option<u16> {
        None
    }
    fn request_id(&self) -> Option<&str> {
        None
    }
}

/// A bare status (the tests' answers).
impl Heard for u16 {
    fn status(&self) -> Option<u16> {
        Some(*self)
    }
}

/// An answer from a client crate that hands back only the decoded value: a success, with no status to show.
pub struct Decoded<T>(pub T);

impl<T> Heard for Decoded<T> {}

/// Why an attempt is repeated, as the retry line says it.
fn reason(status: Option<u16>, error: Option<&CloudError>) -> &'static str {
    match (status, error.map(|e| &e.kind)) {
        (Some(429), _) | (_, Some(crate::clouds::ErrorKind::Throttled { .. })) => "throttled",
        (None, Some(_)) => "transport",
        _ => "server error",
    }
}

/// The debug line of one attempt: `gcp compute.instances.insert: HTTP 200 in 12 ms (attempt 1)`, with its
/// status and request id when the answer carries them, or the error when there was none to hand back.
pub fn log_attempt(call: &Call<'_>, n: u32, started: tokio::time::Instant, heard: Result<(Option<u16>, Option<&str>), &CloudError>) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    let name = call.operation();
    let (cloud, operation, method, path) = (call.cloud, name.as_ref(), call.method, call.path);
    let (method, path) = ((!method.is_empty()).then_some(method), (!path.is_empty()).then_some(path));
    match heard {
        Ok((status, request_id)) => {
            // A client crate hands back only the decoded answer of a success: its status is not known, but
            // that it succeeded is.
            let shown = status.map_or_else(|| "ok".to_owned(), |s| format!("HTTP {s}"));
            let outcome = match status {
                None | Some(100..=399) => "ok",
                Some(429 | 500..=599) => "retryable",
                Some(_) => "refused",
            };
            tracing::debug!(
                cloud,
                operation,
                method,
                path,
                status,
                outcome,
                duration_ms,
                attempt = n,
                request_id,
                "{cloud} {operation}: {shown} in {duration_ms} ms (attempt {n})"
            );
        }
        Err(e) => {
            let (error, code, status) = (format!("{:?}", e.kind), e.code.as_deref(), e.status);
            tracing::debug!(
                cloud,
                operation,
                method,
                path,
                status,
                outcome = "failed",
                duration_ms,
                attempt = n,
                error,
                code,
                "{cloud} {operation}: failed in {duration_ms} ms (attempt {n}): {}",
                e.message
            );
        }
    }
}

/// The info line of a retry: why attempt `n` is repeated (throttled, server error, transport), the wait, and
/// the cloud's `Retry-After` when that is what the wait honours.
pub fn log_retry(call: &Call<'_>, n: u32, wait: Duration, retry_after: Option<Duration>, status: Option<u16>, error: Option<&CloudError>) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let name = call.operation();
    let (cloud, operation) = (call.cloud, name.as_ref());
    let status = status.or(error.and_then(|e| e.status));
    let reason = reason(status, error);
    let wait_ms = wait.as_millis() as u64;
    let retry_after_s = retry_after.map(|d| d.as_secs());
    let honoured = retry_after.map(|d| format!(", as its Retry-After of {} s asked", d.as_secs())).unwrap_or_default();
    let shown = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
    tracing::info!(
        cloud,
        operation,
        reason,
        status,
        attempt = n,
        attempts = POLICY.attempts,
        wait_ms,
        retry_after_s,
        "{cloud} {operation}: {reason}{shown} on attempt {n} of {}; retrying in {:.1} s{honoured}",
        POLICY.attempts,
        wait.as_secs_f64()
    );
}

/// Runs one request under [`POLICY`]: each attempt takes a token from the cloud's `bucket` first; an
/// [`Answer::Again`] or a retryable error (throttled, transient: a refused connection, a timeout) is tried
/// again after [`Policy::wait`], any other error is returned at once. StopProvider abandons the attempt in
/// flight or the wait and returns an interrupted error naming `call.what`. Each attempt is a debug line
/// (operation, status, duration, attempt, request id) and each retry an info line (why, the wait, the
/// `Retry-After` honoured), both formatted only when their level is on.
pub async fn send<'a, T, F, Fut>(ctx: &Context, bucket: &TokenBucket, call: impl Into<Call<'a>>, mut attempt: F) -> Result<T, CloudError>
where
    T: Heard,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Answer<T>, CloudError>>,
{
    let call = call.into();
    let what = call.what;
    let interrupted = || CloudError::interrupted(format!("{what}: interrupted (the CLI asked the provider to stop)"));
    let mut n = 1;
    loop {
        bucket.take(ctx.cancelled()).await;
        let started = tokio::time::Instant::now();
        let answer = tokio::select! {
            _ = ctx.cancelled() => return Err(interrupted()),
            a = attempt() => a,
        };
        match &answer {
            Ok(Answer::Done(v) | Answer::Again(v, _)) => log_attempt(&call, n, started, Ok((v.status(), v.request_id()))),
            Err(e) => log_attempt(&call, n, started, Err(e)),
        }
        let last = n >= POLICY.attempts;
        let (retry_after, status, error) = match answer {
            Ok(Answer::Done(v)) => return Ok(v),
            Ok(Answer::Again(v, _)) if last => return Ok(v),
            Ok(Answer::Again(v, after)) => (after, v.status(), None),
            Err(e) if e.retryable() && !last => (e.retry_after(), e.status, Some(e)),
            Err(e) => return Err(e),
        };
        let wait = POLICY.wait(n, retry_after);
        log_retry(&call, n, wait, retry_after, status, error.as_ref());
        tokio::select! {
            _ = ctx.cancelled() => return Err(interrupted()),
            _ = tokio::time::sleep(wait) => {}
        }
        n += 1;
    }
}

/// How many times a read-modify-write guarded by a fingerprint or etag is attempted before the conflict is
/// the error.
pub const CONFLICT_TRIES: u32 = 4;

/// A read-modify-write guarded by the cloud's fingerprint or etag: `write` sends the change made from
/// `current` (carrying its fingerprint); when the cloud refuses it as a conflict (the fingerprint is stale:
/// someone wrote in between, a node publishing its verdict, another state), `read` fetches the thing again
/// and the change is made anew from it, up to [`CONFLICT_TRIES`] times. What others wrote is never
/// overwritten; each request inside goes through [`send`] as usual.
pub async fn guarded<S, T, W, WF, R, RF>(mut current: S, mut write: W, mut read: R) -> Result<T, CloudError>
where
    W: FnMut(S) -> WF,
    WF: Future<Output = Result<T, CloudError>>,
    R: FnMut() -> RF,
    RF: Future<Output = Result<S, CloudError>>,
{
    let mut tries = 1;
    loop {
        match write(current).await {
            Err(e) if e.kind == crate::clouds::ErrorKind::Conflict && tries < CONFLICT_TRIES => {
                tries += 1;
                current = read().await?;
            }
            done => return done,
        }
    }
}

/// A create the cloud offers no idempotency token for, made at most once: `send` makes the call (with no
/// retries of its own); after an error that may hide a call the cloud carried out (a 5xx, a throttle, a
/// dropped connection or a timeout), `lookup` looks for what the call would have made before it is sent
/// again, so a lost answer is adopted instead of a second one being made. Other errors are returned at
/// once; the waits follow [`POLICY`], and each retry writes the line the SDK's retries write.
pub async fn made_once<T, S, SF, L, LF>(cloud: &str, operation: &str, what: &str, mut send: S, mut lookup: L) -> Result<T, CloudError>
where
    S: FnMut() -> SF,
    SF: Future<Output = Result<T, CloudError>>,
    L: FnMut() -> LF,
    LF: Future<Output = Result<Option<T>, CloudError>>,
{
    let policy = POLICY;
    let mut n = 1;
    loop {
        let e = match send().await {
            Ok(made) => return Ok(made),
            Err(e) => e,
        };
        if !e.retryable() || n >= policy.attempts {
            return Err(e);
        }
        let wait = policy.wait(n, e.retry_after());
        tokio::time::sleep(wait).await;
        if let Some(found) = lookup().await? {
            tracing::info!(
                cloud,
                operation,
                attempt = n,
                "{cloud} {operation}: {what}: attempt {n} was carried out (its answer was lost: {e}); what it made is adopted, not made again"
            );
            return Ok(found);
        }
        // The retry line the AWS SDK's retries write (`aws/calls.rs`), for this retry of our own.
        let reason = if matches!(e.kind, crate::clouds::ErrorKind::Throttled { .. }) { "throttled" } else { "server error" };
        let why = e.code.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        tracing::info!(
            cloud,
            operation,
            reason,
            code = e.code.as_deref(),
            attempt = n,
            attempts = policy.attempts,
            wait_ms = wait.as_millis() as u64,
            "{cloud} {operation}: {reason}{why} on attempt {n} of {}; retried after {:.1} s (nothing it made was found)",
            policy.attempts,
            wait.as_secs_f64()
        );
        n += 1;
    }
}

/// A transport failure (no answer at all) as an error: a refused connection and a timeout are transient and
/// retried; anything else (a malformed URL, a TLS failure) is not. An endpoint whose TLS certificate is not
/// trusted fails the same way at every attempt (reqwest counts it a connect error): it is said in one
/// sentence with how to trust it (`trust`, see [`untrusted_certificate`]), and not retried.
pub fn transport(what: &str, e: &reqwest::Error, trust: &str) -> CloudError {
    if let Some(why) = untrusted_certificate(e) {
        return CloudError::new(crate::clouds::ErrorKind::Other, None, format!("{what}: {why}: {trust}"));
    }
    let kind = if e.is_connect() || e.is_timeout() { crate::clouds::ErrorKind::Transient } else { crate::clouds::ErrorKind::Other };
    CloudError::new(kind, None, format!("{what}: {e}"))
}

/// How to trust a TLS endpoint the system's store does not, for clients that take no CA of their own.
pub const TRUST_SYSTEM_STORE: &str =
    "add the certificate of the CA that signed it to this machine's trust store (the system's certificates, or SSL_CERT_FILE)";

/// "the endpoint's TLS certificate is not trusted (<rustls's reason>)" when `e` failed because the server's
/// certificate did not verify (an unknown issuer, a self-signed certificate, a name or date it is not valid
/// for): rustls's error is found among `e`'s sources, inside the I/O errors the TLS stream and the connector
/// wrap it in (whose own `source` skips what they wrap, so each is opened with `get_ref`).
pub fn untrusted_certificate(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(rustls::Error::InvalidCertificate(why)) = err.downcast_ref::<rustls::Error>() {
            return Some(format!("the endpoint's TLS certificate is not trusted ({why:?})"));
        }
        at = match err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(wrapped) => Some(wrapped as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// For tests: the log lines (tracing's plain format, every level, fields included) written while the
/// returned guard lives, on this thread.
#[cfg(test)]
pub(crate) fn capture_logs() -> (std::sync::Arc<std::sync::Mutex<Vec<u8>>>, tracing::subscriber::DefaultGuard) {
    use std::sync::{Arc, Mutex};
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink(out.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .without_time()
        .with_writer(move || sink.clone())
        .finish();
    (out, tracing::subscriber::set_default(subscriber))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::clouds::ErrorKind;

    static FREE: TokenBucket = TokenBucket::new(1000, 1000);

    #[test]
    fn backoff_doubles_from_a_quarter_second_to_sixteen_seconds() {
        let waits: Vec<u128> = (1..=9).map(|n| POLICY.backoff(n).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 8000, 16000, 16000, 16000]);
        assert_eq!(POLICY.backoff(u32::MAX), POLICY.max, "no overflow on absurd attempt numbers");
    }

    #[test]
    fn a_retry_after_is_honoured_up_to_a_minute_and_jitter_only_shortens_our_own_waits() {
        assert_eq!(POLICY.wait(1, Some(Duration::from_secs(7))), Duration::from_secs(7));
        assert_eq!(POLICY.wait(1, Some(Duration::from_secs(3600))), Duration::from_secs(60));
        for n in 1..=8 {
            let w = POLICY.wait(n, None);
            assert!(w <= POLICY.backoff(n) && w >= POLICY.backoff(n) / 2, "attempt {n}: {w:?}");
        }
    }

    /// Whatever the cloud's Retry-After (any number of seconds) and whatever the attempt, the wait is at
    /// most a minute, and a status is a kind without a panic.
    #[test]
    fn any_retry_after_and_status_give_a_bounded_wait() {
        use proptest::prelude::*;
        crate::fuzz::check("wait", (any::<u32>(), proptest::option::of(any::<u64>()), any::<u16>()), |(attempt, after, status)| {
            let wait = POLICY.wait(attempt, after.map(Duration::from_secs));
            let e = CloudError::from_status(status, after.map(Duration::from_secs), None, "m");
            if wait > POLICY.longest_retry_after.max(POLICY.max) || (e.retryable() != (status == 429 || (500..600).contains(&status))) {
                return Err(format!("attempt {attempt}, Retry-After {after:?}, HTTP {status}: {wait:?}, {e:?}"));
            }
            Ok(())
        });
    }

    async fn run(answers: Vec<Result<Answer<u16>, CloudError>>) -> (Result<u16, CloudError>, u32) {
        let calls = Arc::new(AtomicU32::new(0));
        let answers = Arc::new(std::sync::Mutex::new(answers.into_iter()));
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let c = calls.clone();
        let out = send(&ctx, &FREE, "reading x", || {
            c.fetch_add(1, Ordering::SeqCst);
            let next = answers.lock().unwrap().next().expect("no more attempts were expected");
            async move { next }
        })
        .await;
        (out, calls.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_and_server_trouble_are_tried_again_until_an_answer() {
        let busy = || Ok(Answer::Again(503, None));
        let throttled = || Err(CloudError::new(ErrorKind::Throttled { retry_after: Some(Duration::from_secs(2)) }, None, "slow down"));
        let (out, calls) = run(vec![busy(), throttled(), busy(), Ok(Answer::Done(200))]).await;
        assert_eq!(out.unwrap(), 200);
        assert_eq!(calls, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn each_attempt_is_a_debug_line_and_each_retry_an_info_line_with_its_reason_and_wait() {
        struct Arm(u16, &'static str);
        impl Heard for Arm {
            fn status(&self) -> Option<u16> {
                Some(self.0)
            }
            fn request_id(&self) -> Option<&str> {
                Some(self.1)
            }
        }
        let (logged, _guard) = capture_logs();
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let answers = std::sync::Mutex::new(
            vec![
                Ok(Answer::Again(Arm(429, "rid-1"), Some(Duration::from_secs(3)))),
                Err(CloudError::new(ErrorKind::Transient, None, "connection refused")),
                Ok(Answer::Done(Arm(201, "rid-3"))),
            ]
            .into_iter(),
        );
        let name = || "PUT virtualMachineScaleSets".to_owned();
        let call = Call { cloud: "azure", name: Some(&name), method: "PUT", path: "/x", what: "creating x", ..Call::default() };
        let out = send(&ctx, &FREE, call, || {
            let next = answers.lock().unwrap().next().unwrap();
            async move { next }
        })
        .await;
        assert_eq!(out.map(|a| a.0).ok(), Some(201));
        let text = String::from_utf8(logged.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let debug: Vec<&&str> = lines.iter().filter(|l| l.contains("DEBUG")).collect();
        let info: Vec<&&str> = lines.iter().filter(|l| l.contains("INFO")).collect();
        assert_eq!((debug.len(), info.len()), (3, 2), "{text}");
        assert!(debug[0].contains("azure PUT virtualMachineScaleSets: HTTP 429") && debug[0].contains("request_id=\"rid-1\""), "{text}");
        assert!(debug[0].contains("status=429") && debug[0].contains("attempt=1") && debug[0].contains("duration_ms="), "{text}");
        assert!(debug[1].contains("failed") && debug[1].contains("attempt=2"), "{text}");
        assert!(debug[2].contains("HTTP 201") && debug[2].contains("attempt=3") && debug[2].contains("rid-3"), "{text}");
        assert!(
            info[0].contains("reason=\"throttled\"") && info[0].contains("retry_after_s=3") && info[0].contains("wait_ms=3000"),
            "{text}"
        );
        assert!(info[1].contains("reason=\"transport\"") && info[1].contains("attempt=2"), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_answer_is_handed_back_when_the_attempts_are_spent() {
        let (out, calls) = run((0..POLICY.attempts).map(|_| Ok(Answer::Again(429, None))).collect()).await;
        assert_eq!(out.unwrap(), 429, "the caller words the failure from the cloud's own answer");
        assert_eq!(calls, POLICY.attempts);
        let transient = || Err(CloudError::new(ErrorKind::Transient, None, "connection refused"));
        let (out, calls) = run((0..POLICY.attempts).map(|_| transient()).collect()).await;
        assert_eq!(out.unwrap_err().kind, ErrorKind::Transient);
        assert_eq!(calls, POLICY.attempts);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_not_worth_repeating_is_returned_after_one_attempt() {
        let (out, calls) = run(vec![Err(CloudError::new(ErrorKind::Forbidden, None, "no"))]).await;
        assert_eq!(out.unwrap_err().kind, ErrorKind::Forbidden);
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_waits_between_attempts_follow_the_policy() {
        let started = tokio::time::Instant::now();
        let (out, _) = run(vec![Ok(Answer::Again(503, Some(Duration::from_secs(30)))), Ok(Answer::Done(200))]).await;
        assert_eq!(out.unwrap(), 200);
        assert_eq!(started.elapsed(), Duration::from_secs(30), "the cloud's Retry-After, exactly");
    }

    #[tokio::test(start_paused = true)]
    async fn stop_provider_ends_the_wait_between_attempts() {
        let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
        let cancel = ctx.cancel.clone();
        let started = tokio::time::Instant::now();
        let out: Result<u16, CloudError> = send(&ctx, &FREE, "reading x", || {
            cancel.cancel();
            async { Ok(Answer::Again(503, Some(Duration::from_secs(60)))) }
        })
        .await;
        let e = out.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Interrupted);
        assert!(e.message.starts_with("reading x: interrupted"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_stale_fingerprint_is_read_again_and_the_change_made_from_what_is_there_now() {
        let writes = std::sync::Mutex::new(Vec::new());
        let reads = AtomicU32::new(0);
        // The cloud's fingerprint moves on twice (someone else writes); the third write carries the new one.
        let out =
            guarded(
                1u32,
                |fingerprint| {
                    writes.lock().unwrap().push(fingerprint);
                    async move {
                        if fingerprint < 3 { Err(CloudError::new(ErrorKind::Conflict, None, "conditionNotMet")) } else { Ok(fingerprint) }
                    }
                },
                || {
                    let n = reads.fetch_add(1, Ordering::SeqCst) + 2;
                    async move { Ok(n) }
                },
            )
            .await;
        assert_eq!(out.unwrap(), 3);
        assert_eq!(*writes.lock().unwrap(), [1, 2, 3]);
        let always =
            guarded(0u32, |_| async { Err::<(), _>(CloudError::new(ErrorKind::Conflict, None, "conditionNotMet")) }, || async { Ok(0) })
                .await;
        assert_eq!(always.unwrap_err().kind, ErrorKind::Conflict, "a conflict that persists is the error, after {CONFLICT_TRIES} tries");
    }
}
