//! Diagnostics and attribute paths: how every user-facing problem is reported. Errors from anywhere in
//! the provider end up here before they cross the protocol edge; nothing is reported as a gRPC error.

use std::fmt;

/// One step into a value: an object attribute, a map key or a list index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    Attribute(String),
    Key(String),
    Index(i64),
}

/// Where in a configuration a diagnostic points; the CLI uses it to show the offending source line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttributePath {
    pub steps: Vec<PathStep>,
}

impl AttributePath {
    pub fn root() -> Self {
        Self::default()
    }

    /// A path starting at a top-level attribute or block; extend it with the `and_*` builders.
    pub fn attr(name: &str) -> Self {
        Self::root().and_attr(name)
    }

    pub fn and_attr(mut self, name: &str) -> Self {
        self.steps.push(PathStep::Attribute(name.to_owned()));
        self
    }

    pub fn and_key(mut self, key: &str) -> Self {
        self.steps.push(PathStep::Key(key.to_owned()));
        self
    }

    pub fn and_index(mut self, index: usize) -> Self {
        self.steps.push(PathStep::Index(index as i64));
        self
    }

    pub fn is_root(&self) -> bool {
        self.steps.is_empty()
    }
}

impl fmt::Display for AttributePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.steps.is_empty() {
            return f.write_str("(root)");
        }
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                PathStep::Attribute(name) if i == 0 => write!(f, "{name}")?,
                PathStep::Attribute(name) => write!(f, ".{name}")?,
                PathStep::Key(key) => write!(f, "[{key:?}]")?,
                PathStep::Index(idx) => write!(f, "[{idx}]")?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// A problem for the user: a short fixed summary, and a detail that says what, why and how to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub summary: String,
    pub detail: String,
    pub path: Option<AttributePath>,
    /// The typed error the diagnostic was made from, for code that decides on it (never on the text).
    pub cause: Option<Cause>,
}

impl Diagnostic {
    /// The cause, when it is a `T`.
    pub fn cause<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.cause.as_ref()?.0.downcast_ref::<T>()
    }
}

/// A diagnostic's typed cause. Two causes are equal when they say the same; the CLI never sees them.
#[derive(Clone)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cause({:?})", self.0.to_string())
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Cause {}

/// An ordered collection of diagnostics; most provider functions take `&mut Diagnostics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, diag: Diagnostic) {
        self.0.push(diag);
    }

    pub fn error(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.add(Severity::Error, summary, detail, None);
    }

    pub fn warning(&mut self, summary: impl Into<String>, detail: impl Into<String>) {
        self.add(Severity::Warning, summary, detail, None);
    }

    pub fn error_at(&mut self, path: AttributePath, summary: impl Into<String>, detail: impl Into<String>) {
        self.add(Severity::Error, summary, detail, Some(path));
    }

    pub fn warning_at(&mut self, path: AttributePath, summary: impl Into<String>, detail: impl Into<String>) {
        self.add(Severity::Warning, summary, detail, Some(path));
    }

    fn add(&mut self, severity: Severity, summary: impl Into<String>, detail: impl Into<String>, path: Option<AttributePath>) {
        self.0.push(Diagnostic { severity, summary: summary.into(), detail: detail.into(), path, cause: None });
    }

    /// Keeps `cause` as the typed cause of the diagnostic added last.
    pub fn caused_by(&mut self, cause: impl std::error::Error + Send + Sync + 'static) {
        if let Some(last) = self.0.last_mut() {
            last.cause = Some(Cause(std::sync::Arc::new(cause)));
        }
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
}

/// Joins valid values for a diagnostic detail: `"aws", "azure", "gcp" or "oci"`.
pub fn one_of<S: AsRef<str>>(values: &[S]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{}\"", v.as_ref())).collect();
    match quoted.len() {
        0 => String::from("(none)"),
        1 => quoted[0].clone(),
        n => format!("{} or {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_display_reads_like_hcl() {
        let path = AttributePath::attr("aws").and_index(0).and_attr("default_tags").and_key("team");
        assert_eq!(path.to_string(), r#"aws[0].default_tags["team"]"#);
        assert_eq!(AttributePath::root().to_string(), "(root)");
    }

    #[test]
    fn one_of_lists_values_naturally() {
        assert_eq!(one_of(&["aws", "azure", "gcp", "oci"]), r#""aws", "azure", "gcp" or "oci""#);
        assert_eq!(one_of(&["x"]), r#""x""#);
    }

    #[test]
    fn warnings_are_not_errors() {
        let mut d = Diagnostics::new();
        d.warning("w", "d");
        assert!(!d.has_errors());
        d.error_at(AttributePath::attr("gpu"), "e", "d");
        assert!(d.has_errors());
    }
}
