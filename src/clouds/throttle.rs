//! Client-side token buckets, one per cloud API family, so a large apply spreads its calls under the cloud's
//! published request rates instead of bursting into throttling (and our retries on top of it). Each call
//! takes a token first; an empty bucket makes the call wait for the refill. Rates (burst / refill per second)
//! follow `limits-and-reliability.md`: Azure Resource Manager reads 250/25, writes 200/10, deletes 200/10;
//! Google Compute per-project quotas of about 1500 calls a minute (we keep 100/20); OCI publishes nothing
//! (10-20 requests a second is what users report; we keep 20/10). AWS calls go through the SDK's standard
//! retry mode (backoff with jitter, and a retry quota that stops retry storms); its adaptive mode was tried
//! and dropped: under steady random throttling it slowed a 4-node apply from 23 s to 275 s. AWS is also the
//! cloud where we batch most (RunInstances per batch, filtered Describe calls), so its call rate stays low.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub struct TokenBucket {
    burst: f64,
    per_second: f64,
    state: Mutex<Option<(f64, Instant)>>,
}

impl TokenBucket {
    pub const fn new(burst: u32, per_second: u32) -> TokenBucket {
        TokenBucket { burst: burst as f64, per_second: per_second as f64, state: Mutex::new(None) }
    }

    /// How long the next call must wait, taking its token now (the bucket may go into debt, so concurrent
    /// callers queue in order instead of all waking at once).
    fn reserve(&self) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = state.unwrap_or((self.burst, now));
        let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * self.per_second).min(self.burst);
        let left = refilled - 1.0;
        *state = Some((left, now));
        if left >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-left / self.per_second) }
    }

    /// Waits for a token; returns early (without one) when `cancelled` resolves first.
    pub async fn take(&self, cancelled: impl std::future::Future<Output = ()>) {
        let wait = self.reserve();
        if wait > Duration::ZERO {
            tokio::select! {
                _ = cancelled => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// `delay` scaled by a random factor in [0.5, 1.0): spreads the retries of calls that failed together.
pub fn jitter(delay: Duration) -> Duration {
    let mut b = [0u8; 2];
    let _ = aws_lc_rs::rand::fill(&mut b);
    delay.mul_f64(0.5 + f64::from(u16::from_le_bytes(b) % 1000) / 2000.0)
}

pub static AZURE_READS: TokenBucket = TokenBucket::new(250, 25);
pub static AZURE_WRITES: TokenBucket = TokenBucket::new(200, 10);
pub static AZURE_DELETES: TokenBucket = TokenBucket::new(200, 10);
pub static GCP: TokenBucket = TokenBucket::new(100, 20);
pub static OCI: TokenBucket = TokenBucket::new(20, 10);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_calls_follow_the_refill_rate() {
        let bucket = TokenBucket::new(5, 10);
        let started = Instant::now();
        for _ in 0..5 {
            bucket.take(std::future::pending()).await;
        }
        assert_eq!(started.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..20 {
            bucket.take(std::future::pending()).await;
        }
        // 20 more calls at 10 per second: two seconds, not less.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(1990) && took < Duration::from_millis(2100), "{took:?}");
        // Idle time refills the bucket up to its burst, no further.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let again = Instant::now();
        for _ in 0..6 {
            bucket.take(std::future::pending()).await;
        }
        assert_eq!(again.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_ends_the_wait() {
        let bucket = TokenBucket::new(1, 1);
        bucket.take(std::future::pending()).await;
        let started = Instant::now();
        bucket.take(std::future::ready(())).await;
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
