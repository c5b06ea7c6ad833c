//! Values that must never reach a log, a diagnostic or a panic message: credentials (the provider block's
//! sensitive attributes, bearer tokens, signing keys), the user's user data and the Slurm cluster's munge
//! key. [`Secret`] holds one; its `Debug` and `Display` print `[redacted]`, so a struct holding it can
//! derive `Debug` and a `tracing` field or a `format!` of it shows nothing of the value. The value is read
//! only through [`Secret::expose`], which makes every place that uses it visible in the source. This module
//! owns no policy about what is secret; the places that hold a credential or user data wrap it here.

use std::fmt;

/// What a redacted value prints as.
pub const REDACTED: &str = "[redacted]";

/// A value kept out of every `Debug` and `Display` rendering.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub const fn new(value: T) -> Secret<T> {
        Secret(value)
    }

    /// The value itself, for the one place that sends it where it belongs (a request's signature, an
    /// instance's user data). Never pass it to a log macro or into an error message.
    pub fn expose(&self) -> &T {
        &self.0
    }

    /// The value itself, giving up the wrapper.
    pub fn into_exposed(self) -> T {
        self.0
    }
}

impl Secret<String> {
    /// The text itself (see [`Secret::expose`]).
    pub fn expose_str(&self) -> &str {
        &self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Secret<T> {
        Secret(value)
    }
}

impl From<&str> for Secret<String> {
    fn from(value: &str) -> Secret<String> {
        Secret(value.to_owned())
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// `Option<&str>` of an optional secret text, as `Option<String>::as_deref` gives for a plain one.
pub trait ExposeOption {
    fn exposed(&self) -> Option<&str>;
}

impl ExposeOption for Option<Secret<String>> {
    fn exposed(&self) -> Option<&str> {
        self.as_ref().map(Secret::expose_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "hunter2-s3cr3t";

    #[test]
    fn debug_and_display_print_redacted_and_nothing_of_the_value() {
        let s = Secret::new(VALUE.to_owned());
        assert_eq!(format!("{s:?}"), REDACTED);
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(format!("{s:#?}"), REDACTED, "the alternate form too");
        assert_eq!(format!("{:?}", Secret::new(vec![1u8, 2, 3])), REDACTED, "any type inside");
    }

    #[test]
    fn a_struct_deriving_debug_shows_its_other_fields_but_not_the_secret() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Credentials {
            client_id: String,
            client_secret: Secret<String>,
            user_data: Option<Secret<String>>,
        }
        let c = Credentials { client_id: "app-1".into(), client_secret: VALUE.to_owned().into(), user_data: Some(VALUE.to_owned().into()) };
        let shown = format!("{c:?} {c:#?}");
        assert!(shown.contains("app-1"), "{shown}");
        assert!(!shown.contains(VALUE), "{shown}");
        assert!(shown.contains("client_secret: [redacted]") && shown.contains("Some([redacted])"), "{shown}");
    }

    #[test]
    fn expose_gives_the_value_back_unchanged() {
        let s: Secret<String> = VALUE.to_owned().into();
        assert_eq!(s.expose(), VALUE);
        assert_eq!(s.expose_str(), VALUE);
        assert_eq!(Some(s.clone()).exposed(), Some(VALUE));
        assert_eq!(None::<Secret<String>>.exposed(), None);
        assert_eq!(s.clone().into_exposed(), VALUE);
        assert_eq!(s, Secret::new(VALUE.to_owned()), "equality compares the values");
    }

    #[test]
    fn a_tracing_field_of_a_secret_is_redacted() {
        use std::sync::{Arc, Mutex};
        use tracing::field::{Field, Visit};
        struct Fields(Arc<Mutex<String>>);
        impl Visit for Fields {
            fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
                self.0.lock().unwrap().push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        struct Capture(Arc<Mutex<String>>);
        impl tracing::Subscriber for Capture {
            fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
                tracing::span::Id::from_u64(1)
            }
            fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
            fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
            fn event(&self, event: &tracing::Event<'_>) {
                event.record(&mut Fields(self.0.clone()));
            }
            fn enter(&self, _: &tracing::span::Id) {}
            fn exit(&self, _: &tracing::span::Id) {}
        }
        let seen = Arc::new(Mutex::new(String::new()));
        let s = Secret::new(VALUE.to_owned());
        tracing::subscriber::with_default(Capture(seen.clone()), || {
            tracing::info!(secret = ?s, shown = %s, "logged {s} and {s:?}");
        });
        let seen = seen.lock().unwrap().clone();
        assert!(seen.contains("secret=[redacted]") && seen.contains("logged [redacted] and [redacted]"), "{seen}");
        assert!(!seen.contains(VALUE), "{seen}");
    }
}
