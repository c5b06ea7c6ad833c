//! The admin API shared by the emulators of our own: fault rules, per-operation request counters, and the
//! JSON routes under `/_admin/`. Each emulator supplies reset, inventory and out-of-band changes.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Throttle,
    Capacity,
    ServerError,
    Latency,
    /// Eventual consistency: the resource is reported missing although it exists (as right after a create).
    NotFound,
    /// The call is carried out but its answer never arrives (a timeout or a dropped connection after the
    /// service acted): answered as the service's 5xx (Compute's and Lustre's 503, ARM's and OCI's 500, EC2's
    /// 503). Carried out on every cloud: Compute Engine, Managed Lustre, GKE, ARM, OCI and moto.
    AnswerLost,
    /// The call is accepted, and the long-running operation it starts ends with an error, nothing done
    /// (Compute Engine's emulator; the others answer the service's 5xx).
    OperationError,
}

/// A fault rule, as posted to `/_admin/faults`.
#[derive(Clone, Debug, Deserialize)]
pub struct FaultRule {
    #[serde(default = "any")]
    pub service: String,
    #[serde(default = "any")]
    pub operation: String,
    pub kind: FaultKind,
    pub nth: Option<u64>,
    pub every: Option<u64>,
    pub probability: Option<f64>,
    pub times: Option<u64>,
    #[serde(default)]
    pub latency_ms: u64,
    pub seed: Option<u64>,
    /// A cloud's request bucket: the rule fires (throttles) only when `burst` calls have been made faster
    /// than `per_second` refills, as the clouds' own token buckets do.
    pub bucket: Option<Bucket>,
    #[serde(skip)]
    seen: u64,
    #[serde(skip)]
    fired: u64,
}

fn any() -> String {
    "*".into()
}

/// A token bucket: `burst` calls at once, refilled at `per_second`.
#[derive(Clone, Debug, Deserialize)]
pub struct Bucket {
    pub burst: f64,
    pub per_second: f64,
    #[serde(skip)]
    state: Option<(f64, std::time::Instant)>,
}

impl Bucket {
    /// Takes a token if there is one; false when the call must be throttled.
    fn take(&mut self) -> bool {
        let now = std::time::Instant::now();
        let (tokens, last) = self.state.unwrap_or((self.burst, now));
        let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.per_second).min(self.burst);
        let ok = tokens >= 1.0;
        self.state = Some((if ok { tokens - 1.0 } else { tokens }, now));
        ok
    }
}

/// A small deterministic generator (xorshift64*), so a seeded 30% throttle repeats exactly.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Default)]
pub struct Admin {
    faults: Mutex<Vec<FaultRule>>,
    rng: Mutex<Option<Rng>>,
    counters: Mutex<BTreeMap<String, u64>>,
    /// What the cloud did to nodes on the calls it answered (not on the admin API's out-of-band actions), in
    /// order: `GET /_admin/events`.
    events: Mutex<Vec<Value>>,
    /// Off while a test drives a client this release does not answer for (the previous release, with the
    /// api-versions it was built with): `POST /_admin/conformance {"judge": false}`.
    unjudged: std::sync::atomic::AtomicBool,
}

impl Admin {
    /// Whether the vendors' definitions judge this emulator's calls (when `HPC_CONFORMANCE=strict`).
    pub fn judging(&self) -> bool {
        !self.unjudged.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Counts the call and returns the fault to inject, if a rule fires.
    pub fn on_request(&self, service: &str, operation: &str) -> Option<FaultRule> {
        *self.counters.lock().unwrap().entry(format!("{service}:{operation}")).or_default() += 1;
        let mut rules = self.faults.lock().unwrap();
        let mut rng = self.rng.lock().unwrap();
        for rule in rules.iter_mut() {
            if !(rule.service == "*" || rule.service == service) || !(rule.operation == "*" || rule.operation == operation) {
                continue;
            }
            rule.seen += 1;
            if rule.times.is_some_and(|t| rule.fired >= t) {
                continue;
            }
            if let Some(bucket) = &mut rule.bucket {
                if bucket.take() {
                    continue;
                }
                rule.fired += 1;
                return Some(rule.clone());
            }
            let fire = match (rule.nth, rule.every, rule.probability) {
                (Some(n), _, _) => rule.seen == n,
                (None, Some(e), _) => e > 0 && rule.seen % e == 0,
                (None, None, Some(p)) => rng.get_or_insert(Rng(0x9E37_79B9_7F4A_7C15)).next_f64() < p,
                (None, None, None) => true,
            };
            if fire {
                rule.fired += 1;
                return Some(rule.clone());
            }
        }
        None
    }

    /// Records a node's lifecycle event (`created`, `deleted`, `reimaged`, `restarted`, `redeployed`,
    /// `started`, `stopped`), by the node's name as its cloud names it (display name, VM name or `Name`
    /// tag) and its id.
    pub fn event(&self, node: &str, id: &str, event: &str) {
        self.events.lock().unwrap().push(json!({"node": node, "id": id, "event": event}));
    }

    /// Records that a group of nodes changed size (a scale set's capacity, an instance pool's size).
    pub fn resized(&self, group: &str, from: u64, to: u64) {
        if from != to {
            self.events.lock().unwrap().push(json!({"group": group, "event": "resized", "from": from, "to": to}));
        }
    }

    pub fn reset(&self) {
        self.faults.lock().unwrap().clear();
        self.counters.lock().unwrap().clear();
        self.events.lock().unwrap().clear();
        *self.rng.lock().unwrap() = None;
    }

    fn describe_faults(&self) -> Value {
        let rules = self.faults.lock().unwrap();
        json!({"faults": rules.iter().map(|r| json!({
            "service": r.service, "operation": r.operation, "kind": format!("{:?}", r.kind).to_lowercase(),
            "nth": r.nth, "every": r.every, "probability": r.probability, "times": r.times, "latency_ms": r.latency_ms,
            "seen": r.seen, "fired": r.fired,
        })).collect::<Vec<_>>()})
    }

    /// Handles `/_admin/<route>`; `emulator` supplies what differs per cloud. Returns status and body.
    pub fn handle(&self, method: &str, route: &str, body: &[u8], emulator: &dyn Emulated) -> (u16, Value) {
        let parsed: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or(json!({})) };
        match (method, route) {
            ("POST", "reset") => {
                self.reset();
                emulator.reset();
                (200, json!({"reset": true}))
            }
            ("GET", "inventory") => (200, emulator.inventory()),
            ("POST", "conformance") => {
                let judge = parsed.get("judge").and_then(Value::as_bool).unwrap_or(true);
                self.unjudged.store(!judge, std::sync::atomic::Ordering::SeqCst);
                (200, json!({"judge": judge}))
            }
            ("GET", "conformance") => (200, json!({"judge": self.judging()})),
            ("GET", "snapshot") => (200, emulator.snapshot()),
            ("GET", "counters") => (200, json!({"counters": *self.counters.lock().unwrap()})),
            ("DELETE", "counters") => {
                self.counters.lock().unwrap().clear();
                (200, json!({"counters": {}}))
            }
            ("GET", "events") => (200, json!({"events": *self.events.lock().unwrap()})),
            ("DELETE", "events") => {
                self.events.lock().unwrap().clear();
                (200, json!({"events": []}))
            }
            ("POST", "faults") => match serde_json::from_value::<FaultRule>(parsed) {
                Ok(rule) => {
                    if let Some(seed) = rule.seed {
                        *self.rng.lock().unwrap() = Some(Rng(seed.max(1)));
                    }
                    self.faults.lock().unwrap().push(rule);
                    (200, self.describe_faults())
                }
                Err(e) => (400, json!({"error": format!("bad fault rule: {e}")})),
            },
            ("GET", "faults") => (200, self.describe_faults()),
            ("DELETE", "faults") => {
                self.faults.lock().unwrap().clear();
                (200, json!({"faults": []}))
            }
            ("POST", "out-of-band") => match emulator.out_of_band(&parsed) {
                Ok(v) => (200, v),
                Err(e) => (404, json!({"error": e})),
            },
            _ => emulator
                .extra_admin(method, route, &parsed)
                .unwrap_or_else(|| (404, json!({"error": format!("unknown admin route {method} /_admin/{route}")}))),
        }
    }
}

/// Serves a router over plain HTTP on `bind` in the background; returns the bound address.
pub async fn serve_http(app: axum::Router, bind: &str) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

/// What each emulator of our own provides to the admin API.
pub trait Emulated: Send + Sync {
    fn reset(&self);
    /// `{"cloud", "empty", "resources": {...}}`.
    fn inventory(&self) -> Value;
    /// Every resource held, with the whole body a client reading it would get (tags and labels included),
    /// keyed by id: what "another owner's pieces are byte-for-byte unchanged" compares.
    fn snapshot(&self) -> Value {
        self.inventory()
    }
    fn out_of_band(&self, change: &Value) -> Result<Value, String>;
    /// Admin routes only this emulator has (OCI: `keys`); `None` for an unknown route.
    fn extra_admin(&self, _method: &str, _route: &str, _body: &Value) -> Option<(u16, Value)> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_fire_by_position_and_by_seeded_chance() {
        let admin = Admin::default();
        struct Nothing;
        impl Emulated for Nothing {
            fn reset(&self) {}
            fn inventory(&self) -> Value {
                json!({})
            }
            fn out_of_band(&self, _: &Value) -> Result<Value, String> {
                Err("no".into())
            }
        }
        admin.handle("POST", "faults", br#"{"service":"compute","operation":"instances.insert","kind":"capacity","nth":2}"#, &Nothing);
        assert!(admin.on_request("compute", "instances.insert").is_none());
        assert_eq!(admin.on_request("compute", "instances.insert").map(|r| r.kind), Some(FaultKind::Capacity));
        assert!(admin.on_request("compute", "instances.insert").is_none());
        admin.reset();
        admin.handle("POST", "faults", br#"{"kind":"throttle","probability":0.3,"seed":7}"#, &Nothing);
        let fired = (0..1000).filter(|_| admin.on_request("compute", "instances.list").is_some()).count();
        assert!((250..350).contains(&fired), "{fired}");
        assert_eq!(admin.handle("GET", "counters", b"", &Nothing).1["counters"]["compute:instances.list"], 1000);
        // A bucket of 5 refilled at 1000 per second: a burst of 5 passes, the 6th at once is throttled,
        // and after a few milliseconds there are tokens again.
        admin.reset();
        admin.handle("POST", "faults", br#"{"kind":"throttle","bucket":{"burst":5,"per_second":1000}}"#, &Nothing);
        let throttled: Vec<bool> = (0..6).map(|_| admin.on_request("core", "LaunchInstance").is_some()).collect();
        assert_eq!(throttled, [false, false, false, false, false, true]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(admin.on_request("core", "LaunchInstance").is_none());
    }
}
