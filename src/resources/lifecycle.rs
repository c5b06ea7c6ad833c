//! The one lifecycle every managed resource goes through: Create, Update, Delete, Read and Import as
//! separate steps over a per-cloud [`Backend`], owning the rules that are the same for every resource and
//! cloud: which step a request is, timeouts and their defaults, tags after `default_tags` with the owner's
//! marker, the diagnostics and their wording, a failed create returning what exists, and imported state
//! built from the configuration an import reconstructs. Ownership (the journal, the census, adopting on
//! import) wraps every step through `common::{apply_with, read_with, import_with}`.
//!
//! A resource supplies a [`Kind`]: its schema, its parser, the planner's derivation, its own tag keys and
//! its backend selector; nothing else.

use std::collections::BTreeMap;
use std::time::Duration;

use super::common;
use crate::catalog::Cloud;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Step};
use crate::clouds::shared::timeout;
use crate::framework::{ApplyRequest, ApplyResponse, Context, Diagnostics, ReadOutcome, Schema, Value};
use crate::ownership::Census;

/// How long each step may take when the resource's `timeouts` block does not say.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub create: Duration,
    pub update: Duration,
    pub delete: Duration,
}

/// What a resource kind gives the lifecycle.
pub struct Kind<S: 'static> {
    pub kind: common::Kind,
    pub schema: fn() -> Schema,
    /// The spec of a configuration, with diagnostics for what is wrong.
    pub parse: fn(&Value, &mut Diagnostics) -> Option<S>,
    /// The spec of a state (or a reconstructed configuration), quietly: what a backend may ask for.
    pub parse_state: fn(&Value) -> Option<S>,
    /// The planner's computed attributes of a wholly known configuration.
    pub derive: fn(&Context, &Value, &mut Diagnostics) -> Option<BTreeMap<String, Value>>,
    /// The provider's own tag keys for a planned or prior state (`hpc:fabric`, ...).
    pub ours: fn(&Value) -> Vec<(&'static str, String)>,
    pub backend: fn(Cloud) -> &'static dyn Backend<S>,
    pub timeouts: Timeouts,
    /// What a failed create or update says of what exists.
    pub kept: &'static str,
    /// What a failed delete says of what is left.
    pub left: &'static str,
}

impl<S: Send + Sync + 'static> Kind<S> {
    /// Create, update or destroy, under the ownership rule.
    pub async fn apply(&self, ctx: &Context, req: &ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        common::apply_with(self.kind, req, diags, async |cloud, census, d| self.apply_in(ctx, req, cloud, census, d).await).await
    }

    /// Refresh, admitting only the state's owner's pieces.
    pub async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome {
        common::read_with(self.kind, state, private, diags, async |cloud, census, d| {
            self.read_in(ctx, state, private, cloud, census, d).await
        })
        .await
    }

    /// Import by `<cloud>/<location>/<name>`, taking over the marker the pieces carry.
    pub async fn import(&self, ctx: &Context, id: &str, example: &str, diags: &mut Diagnostics) -> Option<Value> {
        common::import_with(self.kind, example, id, diags, async |cloud, census, d| self.import_in(ctx, id, cloud, census, d).await).await
    }

    /// One apply as `census`'s owner: a delete when nothing is planned, else a create or an update.
    pub async fn apply_in(&self, ctx: &Context, req: &ApplyRequest<'_>, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Value {
        if req.planned.is_null() {
            self.delete(ctx, req.prior, cloud, census, diags).await
        } else {
            self.change(ctx, req, cloud, census, diags).await
        }
    }

    fn step<'a>(&self, ctx: &'a Context, census: &'a Census, default_tags: &'a BTreeMap<String, String>, timeout: Duration) -> Step<'a> {
        Step { ctx, census, default_tags, timeout }
    }

    /// The tags every piece of `v` (a planned or prior state) gets.
    fn tags(&self, ctx: &Context, v: &Value, census: &Census) -> BTreeMap<String, String> {
        let ours = (self.ours)(v);
        let ours: Vec<(&str, &str)> = ours.iter().map(|(k, v)| (*k, v.as_str())).collect();
        common::owned_tags(ctx, v.get("tags"), &ours, census)
    }

    fn report(&self, backend: &dyn Backend<S>, diags: &mut Diagnostics, summary: String, detail: String) {
        match backend.summary(&detail) {
            Some(better) => diags.error(better, detail),
            None => diags.error(summary, detail),
        }
    }

    /// `Fabric train in us-east-1`.
    fn what(&self, backend: &dyn Backend<S>, v: &Value) -> String {
        format!("{} {} {}", self.kind.noun, v.get("name").as_str().unwrap_or_default(), backend.place(v))
    }

    async fn configured(&self, ctx: &Context, backend: &dyn Backend<S>, cloud: Cloud, diags: &mut Diagnostics) -> bool {
        match backend.configured(ctx).await {
            Ok(()) => true,
            Err(e) => {
                diags.error(format!("{} is not configured", cloud.display_name()), e);
                false
            }
        }
    }

    async fn change(&self, ctx: &Context, req: &ApplyRequest<'_>, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Value {
        let backend = (self.backend)(cloud);
        if !self.configured(ctx, backend, cloud, diags).await {
            return req.prior.clone();
        }
        let Some(spec) = (self.parse)(req.config, diags) else { return req.prior.clone() };
        let creating = req.prior.is_null();
        let mut learned = BTreeMap::new();
        if let Some(id) = backend.id(&spec) {
            census.set_import_id(&id);
            learned.insert("id".to_owned(), Value::from(id));
        }
        let state = common::fill(req.planned, &learned);
        let tags = self.tags(ctx, req.planned, census);
        let prior_tags = if creating { BTreeMap::new() } else { self.tags(ctx, req.prior, census) };
        let default_tags = common::defaults(ctx).default_tags;
        let (op, default) = if creating { ("create", self.timeouts.create) } else { ("update", self.timeouts.update) };
        let step = self.step(ctx, census, &default_tags, timeout(req.config, op, default));
        let change = Change {
            spec: &spec,
            config: req.config,
            prior: req.prior,
            planned: req.planned,
            state: &state,
            tags: &tags,
            prior_tags: &prior_tags,
        };
        let out = backend.apply(&step, &change).await;
        if let Some(e) = out.error {
            let summary = format!("{} the {} failed", if creating { "Creating" } else { "Updating" }, self.kind.noun.to_lowercase());
            self.report(backend, diags, summary, sentences(&self.what(backend, req.planned), &e, self.kept));
        }
        out.state
    }

    async fn delete(&self, ctx: &Context, prior: &Value, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Value {
        let backend = (self.backend)(cloud);
        if !self.configured(ctx, backend, cloud, diags).await {
            return prior.clone();
        }
        let default_tags = common::defaults(ctx).default_tags;
        let step = self.step(ctx, census, &default_tags, timeout(prior, "delete", self.timeouts.delete));
        let out = backend.delete(&step, prior, &self.parse_state).await;
        if let Some(e) = out.error {
            let summary = format!("Deleting the {} failed", self.kind.noun.to_lowercase());
            self.report(backend, diags, summary, sentences(&self.what(backend, prior), &e, self.left));
        }
        out.state
    }

    /// Refreshes as `census`'s owner.
    pub async fn read_in(
        &self,
        ctx: &Context,
        state: &Value,
        private: &[u8],
        cloud: Cloud,
        census: &Census,
        diags: &mut Diagnostics,
    ) -> ReadOutcome {
        let unchanged = || ReadOutcome::Found { state: state.clone(), private: private.to_vec() };
        let backend = (self.backend)(cloud);
        if !self.configured(ctx, backend, cloud, diags).await {
            return unchanged();
        }
        let default_tags = common::defaults(ctx).default_tags;
        let step = self.step(ctx, census, &default_tags, self.timeouts.delete);
        match backend.read(&step, state, &self.parse_state).await {
            Ok(None) => ReadOutcome::Gone,
            Ok(Some(state)) => ReadOutcome::Found { state, private: private.to_vec() },
            Err(e) => {
                let summary = format!("Reading the {} failed", self.kind.noun.to_lowercase());
                self.report(backend, diags, summary, sentences(&self.what(backend, state), &e, ""));
                unchanged()
            }
        }
    }

    /// Imports, noting in `census` the markers the pieces carry.
    pub async fn import_in(&self, ctx: &Context, id: &str, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Option<Value> {
        let backend = (self.backend)(cloud);
        if !self.configured(ctx, backend, cloud, diags).await {
            return None;
        }
        let default_tags = common::defaults(ctx).default_tags;
        let step = self.step(ctx, census, &default_tags, self.timeouts.delete);
        match backend.import(&step, id, &self.parse_state).await {
            Ok(Imported { config, assigned }) => {
                let derived = (self.derive)(ctx, &config, diags)?;
                Some(common::imported_state(&(self.schema)(), &config, &derived, &assigned))
            }
            Err(ImportError::BadId(text)) => {
                diags.error("Invalid import id", text);
                None
            }
            Err(ImportError::Failed(e)) => {
                let summary = format!("Cannot import the {}", self.kind.noun.to_lowercase());
                self.report(backend, diags, summary, format!("{id}: {e}."));
                None
            }
        }
    }
}

/// `Fabric train in us-east-1: <error>. <then>`.
fn sentences(what: &str, error: &str, then: &str) -> String {
    if then.is_empty() { format!("{what}: {error}.") } else { format!("{what}: {error}. {then}") }
}
