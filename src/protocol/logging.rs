//! Logs for go-plugin: JSON lines on stderr with `@level`, `@message` and `@timestamp`, which the CLI
//! shows at their level under `TF_LOG` / `TF_LOG_PROVIDER`. Stdout is reserved for the handshake line.

use std::io::Write;
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

struct HclogLayer;

struct JsonFields(serde_json::Map<String, serde_json::Value>);

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(key(field), serde_json::Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(key(field), serde_json::Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(key(field), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(key(field), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(key(field), value.into());
    }
}

fn key(field: &Field) -> String {
    if field.name() == "message" { "@message".into() } else { field.name().into() }
}

impl<S: Subscriber> Layer<S> for HclogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = JsonFields(serde_json::Map::new());
        event.record(&mut fields);
        let level = match *event.metadata().level() {
            Level::TRACE => "trace",
            Level::DEBUG => "debug",
            Level::INFO => "info",
            Level::WARN => "warn",
            Level::ERROR => "error",
        };
        fields.0.insert("@level".into(), level.into());
        fields.0.insert("@module".into(), "hpc".into());
        fields.0.insert("@timestamp".into(), crate::clock::rfc3339_micros(SystemTime::now()).into());
        let line = serde_json::Value::Object(fields.0).to_string();
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// Installs the stderr logger at the level of `TF_LOG_PROVIDER` or `TF_LOG` (default info), and a panic
/// hook that logs panics (the RPC guard still turns them into diagnostics).
pub fn init() {
    let level = std::env::var("TF_LOG_PROVIDER")
        .or_else(|_| std::env::var("TF_LOG"))
        .ok()
        .and_then(|l| match l.to_ascii_lowercase().as_str() {
            "trace" | "json" => Some(tracing::level_filters::LevelFilter::TRACE),
            "debug" => Some(tracing::level_filters::LevelFilter::DEBUG),
            "info" => Some(tracing::level_filters::LevelFilter::INFO),
            "warn" => Some(tracing::level_filters::LevelFilter::WARN),
            "error" => Some(tracing::level_filters::LevelFilter::ERROR),
            _ => None,
        })
        .unwrap_or(tracing::level_filters::LevelFilter::INFO);
    // Our own crate logs at the chosen level; libraries (h2, rustls) only from warn, else TRACE floods.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::level_filters::LevelFilter::WARN.min(level))
        .with_target("hpc_provider", level)
        .with_target("terraform_provider_hpc", level);
    let _ = tracing_subscriber::registry().with(HclogLayer.with_filter(filter)).try_init();
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(%location, panic = %message, "panic");
    }));
}
