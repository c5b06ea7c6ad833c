//! The one lifecycle every managed resource goes through: Create, Update, Delete, Read and Import as
//! separate steps over a per-cloud [`Backend`], owning the rules that are the same for every resource and
//! cloud: which step a request is, timeouts and their defaults, tags after `default_tags` with the owner's
//! marker, the diagnostics and their wording, a failed create returning what exists, and imported state
//! built from the configuration an import reconstructs. Ownership (the journal, the census, adopting on
//! import) wraps every step through `common::{apply_with, read_with, import_with}`.
//!
//! A resource supplies a [`Kind`]: its schema, its parser, the planner's derivation, its own tag keys, its
//! backend selector, and the [`Parts`] it adds at named points of the steps (the cluster: its own network,
//! its day-2 work and its capacity settlement; the fabric and the filesystem add none).
//!
//! Each step parses its spec once, keeping the parser's diagnostics, and hands the typed spec down to the
//! parts and the backend; nothing below calls back up into the planner.
//!
//! An apply, in order: parse -> configured? -> `Parts::before` (what the resource makes for itself first)
//! -> converge (`Backend::apply` on a create; `Parts::update` on an update, the backend's converge by
//! default) -> `Parts::settle` (what the converge's failure leaves) -> `Parts::after`. A delete: the
//! backend's delete -> `Parts::after_delete`. A refresh: the backend's read -> `Parts::read`. An import: the
//! backend's import (and `Backend::imported`) -> derivation -> `Parts::imported`. A plan's reads of the
//! cloud (quota) are `Parts::plan_reads`, the one step of a plan that is not pure.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use super::common;
use crate::catalog::Cloud;
use crate::clouds::CloudError;
use crate::clouds::backend::{Backend, Change, ImportError, Imported, Step};
use crate::clouds::shared::timeout;
use crate::framework::{ApplyRequest, ApplyResponse, Context, Diagnostics, PlanRequest, ReadOutcome, Schema, Value};
use crate::ownership::Census;

/// How long each step may take when the resource's `timeouts` block does not say.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub create: Duration,
    pub update: Duration,
    pub delete: Duration,
}

/// Where an apply runs: the request, the cloud and the owner's census.
pub struct At<'a> {
    pub ctx: &'a Context,
    pub req: &'a ApplyRequest<'a>,
    pub cloud: Cloud,
    pub census: &'a Census,
}

impl At<'_> {
    pub fn creating(&self) -> bool {
        self.req.prior.is_null()
    }
}

/// What a resource adds to the steps every resource goes through, each at a named point; every part has a
/// default that adds nothing.
#[async_trait]
pub trait Parts<S: Send + Sync + 'static>: Send + Sync {
    /// Plan: the reads a plan makes of the cloud (quota), after the pure derivation planned `planned`
    /// without errors. The only step of a plan that asks the cloud.
    async fn plan_reads(&self, _ctx: &Context, _spec: &S, _req: &PlanRequest<'_>, _planned: &Value, _diags: &mut Diagnostics) {}

    /// Apply, before a create's or an update's converge: what the resource makes for itself first.
    /// `Ok(carried)` goes on (`carried` reaches [`Parts::after`]); `Err(state)` ends the apply with `state`.
    async fn before(&self, _kind: &Kind<S>, _at: &At<'_>, _spec: &S, _diags: &mut Diagnostics) -> Result<Value, Value> {
        Ok(Value::Null)
    }

    /// Apply, an update's converge: the backend's by default.
    async fn update(&self, kind: &Kind<S>, at: &At<'_>, spec: &S, diags: &mut Diagnostics) -> Value {
        kind.converge(at.ctx, at.req, spec, at.cloud, at.census, diags).await
    }

    /// Apply, after a create's or an update's converge: what is kept when it failed. `converged` holds the
    /// converge's diagnostics; what this returns goes to `diags`.
    async fn settle(
        &self,
        _kind: &Kind<S>,
        _at: &At<'_>,
        _spec: &S,
        state: Value,
        converged: Diagnostics,
        diags: &mut Diagnostics,
    ) -> Value {
        diags.extend(converged);
        state
    }

    /// Apply, last: `carried` is what [`Parts::before`] handed on.
    async fn after(&self, _at: &At<'_>, state: Value, _carried: Value) -> Value {
        state
    }

    /// Delete, after the backend's: what the resource made for itself goes last. `left` is what the
    /// backend's delete left (null when nothing).
    async fn after_delete(&self, _kind: &Kind<S>, _at: &At<'_>, left: Value, _diags: &mut Diagnostics) -> Value {
        left
    }

    /// Refresh, after the backend's read of `state`: what the resource owns besides, read with it.
    async fn read(
        &self,
        _ctx: &Context,
        _state: &Value,
        found: ReadOutcome,
        _cloud: Cloud,
        _census: &Census,
        _diags: &mut Diagnostics,
    ) -> ReadOutcome {
        found
    }

    /// Import, after the imported state is derived: what the resource owns besides, imported with it.
    async fn imported(&self, _ctx: &Context, state: Value, _cloud: Cloud, _census: &Census, _diags: &mut Diagnostics) -> Option<Value> {
        Some(state)
    }
}

/// The parts of a resource that adds none.
pub struct NoParts;

impl<S: Send + Sync + 'static> Parts<S> for NoParts {}

/// The planner's computed attributes of a configuration, given what runs already.
pub type Derive = fn(&Context, &Value, &Value, &mut Diagnostics) -> Option<BTreeMap<String, Value>>;

/// What a resource kind gives the lifecycle.
pub struct Kind<S: 'static> {
    pub kind: common::Kind,
    pub schema: fn() -> Schema,
    /// The spec of a configuration, with diagnostics for what is wrong.
    pub parse: fn(&Value, &mut Diagnostics) -> Option<S>,
    /// The spec of a state (or a reconstructed configuration), quietly: what a backend may ask for.
    pub parse_state: fn(&Value) -> Option<S>,
    /// The spec with what runs already, read from a prior state (or what an import observed): the
    /// cluster's node groups, around which a change is laid out. The spec as it is for the others.
    pub with_prior: fn(S, &Value) -> S,
    /// The planner's computed attributes of a wholly known configuration, given what runs already (a prior
    /// state, an import's observation, or null).
    pub derive: Derive,
    /// The provider's own tag keys for a planned or prior state (`hpc:fabric`, ...).
    pub ours: fn(&Value) -> Vec<(&'static str, String)>,
    pub backend: fn(Cloud) -> &'static dyn Backend<S>,
    pub timeouts: Timeouts,
    /// What a failed create or update says of what exists.
    pub kept: &'static str,
    /// What a failed delete says of what is left.
    pub left: &'static str,
    /// What the resource adds to the steps.
    pub parts: &'static dyn Parts<S>,
}

impl<S: Send + Sync + 'static> Kind<S> {
    /// Create, update or destroy, under the ownership rule; the configuration is parsed once, here.
    pub async fn apply(&self, ctx: &Context, req: &ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse {
        let spec = self.parse_apply(req, diags);
        common::apply_with(self.kind, req, diags, async |cloud, census, d| self.apply_in(ctx, req, spec.as_ref(), cloud, census, d).await)
            .await
    }

    /// A plan's reads of the cloud ([`Parts::plan_reads`]) for a parsed spec.
    pub async fn plan_reads(&self, ctx: &Context, spec: &S, req: &PlanRequest<'_>, planned: &Value, diags: &mut Diagnostics) {
        self.parts.plan_reads(ctx, spec, req, planned, diags).await;
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

    /// One apply as `census`'s owner, with the resource's parts: a delete when nothing is planned, else a
    /// create or an update of `spec` (the configuration's; `None` when it does not parse).
    pub async fn apply_in(
        &self,
        ctx: &Context,
        req: &ApplyRequest<'_>,
        spec: Option<&S>,
        cloud: Cloud,
        census: &Census,
        diags: &mut Diagnostics,
    ) -> Value {
        let at = At { ctx, req, cloud, census };
        if req.planned.is_null() {
            let left = self.remove(ctx, req.prior, cloud, census, diags).await;
            return self.parts.after_delete(self, &at, left, diags).await;
        }
        let Some(spec) = spec else {
            // Reported where it was parsed; the configured check comes first, as for every step.
            let backend = (self.backend)(cloud);
            self.configured(ctx, backend, cloud, diags).await;
            return req.prior.clone();
        };
        let carried = match self.parts.before(self, &at, spec, diags).await {
            Ok(carried) => carried,
            Err(state) => return state,
        };
        let mut converged = Diagnostics::new();
        let state = if at.creating() {
            self.converge(ctx, req, spec, cloud, census, &mut converged).await
        } else {
            self.parts.update(self, &at, spec, &mut converged).await
        };
        let state = self.parts.settle(self, &at, spec, state, converged, diags).await;
        self.parts.after(&at, state, carried).await
    }

    /// [`Kind::apply_in`] of a configuration not parsed yet (a resource applying another kind's spec, as
    /// a cluster does its own network's).
    pub async fn apply_config(
        &self,
        ctx: &Context,
        req: &ApplyRequest<'_>,
        cloud: Cloud,
        census: &Census,
        diags: &mut Diagnostics,
    ) -> Value {
        let spec = self.parse_apply(req, diags);
        self.apply_in(ctx, req, spec.as_ref(), cloud, census, diags).await
    }

    /// The spec an apply converges to: the configuration's, with what the prior state says runs.
    fn parse_apply(&self, req: &ApplyRequest<'_>, diags: &mut Diagnostics) -> Option<S> {
        if req.planned.is_null() { None } else { (self.parse)(req.config, diags).map(|s| (self.with_prior)(s, req.prior)) }
    }

    /// The spec of a state, with what it says runs.
    fn state_spec(&self, state: &Value) -> Option<S> {
        (self.parse_state)(state).map(|s| (self.with_prior)(s, state))
    }

    /// How long a create or an update of `req` may take.
    pub fn apply_timeout(&self, req: &ApplyRequest<'_>) -> Duration {
        if req.prior.is_null() {
            timeout(req.config, "create", self.timeouts.create)
        } else {
            timeout(req.config, "update", self.timeouts.update)
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

    /// The diagnostic of a failed step: the backend's summary for the error's kind where it has one, the
    /// error kept as the diagnostic's cause.
    fn report(&self, backend: &dyn Backend<S>, diags: &mut Diagnostics, summary: String, detail: String, error: &CloudError) {
        match backend.summary(error) {
            Some(better) => diags.error(better, detail),
            None => diags.error(summary, detail),
        }
        diags.caused_by(error.clone());
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

    /// The backend's create or update of `spec`, without the resource's parts (which call it).
    pub async fn converge(
        &self,
        ctx: &Context,
        req: &ApplyRequest<'_>,
        spec: &S,
        cloud: Cloud,
        census: &Census,
        diags: &mut Diagnostics,
    ) -> Value {
        let backend = (self.backend)(cloud);
        if !self.configured(ctx, backend, cloud, diags).await {
            return req.prior.clone();
        }
        let creating = req.prior.is_null();
        let mut learned = BTreeMap::new();
        if let Some(id) = backend.id(spec) {
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
            spec,
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
            self.report(backend, diags, summary, sentences(&self.what(backend, req.planned), &e.message, self.kept), &e);
        }
        out.state
    }

    /// The backend's delete of `prior`, without the resource's parts.
    async fn remove(&self, ctx: &Context, prior: &Value, cloud: Cloud, census: &Census, diags: &mut Diagnostics) -> Value {
        let backend = (self.backend)(cloud);
        if !self.configured(ctx, backend, cloud, diags).await {
            return prior.clone();
        }
        let default_tags = common::defaults(ctx).default_tags;
        let step = self.step(ctx, census, &default_tags, timeout(prior, "delete", self.timeouts.delete));
        let spec = self.state_spec(prior);
        let out = backend.delete(&step, prior, spec.as_ref()).await;
        if let Some(e) = out.error {
            let summary = format!("Deleting the {} failed", self.kind.noun.to_lowercase());
            self.report(backend, diags, summary, sentences(&self.what(backend, prior), &e.message, self.left), &e);
        }
        out.state
    }

    /// Refreshes as `census`'s owner, with the resource's parts.
    pub async fn read_in(
        &self,
        ctx: &Context,
        state: &Value,
        private: &[u8],
        cloud: Cloud,
        census: &Census,
        diags: &mut Diagnostics,
    ) -> ReadOutcome {
        let found = self.observe(ctx, state, private, cloud, census, diags).await;
        self.parts.read(ctx, state, found, cloud, census, diags).await
    }

    /// The backend's refresh of `state`, without the resource's parts (which call it).
    pub async fn observe(
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
        let spec = self.state_spec(state);
        match backend.read(&step, state, spec.as_ref()).await {
            Ok(None) => ReadOutcome::Gone,
            Ok(Some(state)) => ReadOutcome::Found { state, private: private.to_vec() },
            Err(e) => {
                let summary = format!("Reading the {} failed", self.kind.noun.to_lowercase());
                self.report(backend, diags, summary, sentences(&self.what(backend, state), &e.message, ""), &e);
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
        let found = match backend.import(&step, id).await {
            Ok(mut found) => match (self.parse_state)(&found.config).map(|s| (self.with_prior)(s, &found.observed)) {
                Some(spec) => backend.imported(&step, &spec, &mut found).await.map(|()| found),
                None => Ok(found),
            },
            Err(e) => Err(e),
        };
        match found {
            Ok(Imported { config, assigned, observed }) => {
                let derived = (self.derive)(ctx, &config, &observed, diags)?;
                let state = common::imported_state(&(self.schema)(), &config, &derived, &assigned);
                self.parts.imported(ctx, state, cloud, census, diags).await
            }
            Err(ImportError::BadId(text)) => {
                diags.error("Invalid import id", text);
                None
            }
            Err(ImportError::Failed(e)) => {
                let summary = format!("Cannot import the {}", self.kind.noun.to_lowercase());
                self.report(backend, diags, summary, format!("{id}: {e}."), &e);
                None
            }
        }
    }
}

/// `Fabric train in us-east-1: <error>. <then>`.
fn sentences(what: &str, error: &str, then: &str) -> String {
    if then.is_empty() { format!("{what}: {error}.") } else { format!("{what}: {error}. {then}") }
}
