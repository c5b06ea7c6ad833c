//! What a data source and a managed resource implement. The protocol layer owns decoding, encoding,
//! panics and cancellation; implementations see only [`Value`]s, a [`Context`] and [`Diagnostics`].

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::diagnostics::{AttributePath, Diagnostics};
use super::function::Function;
use super::schema::Schema;
use super::value::{Type, Value};

/// Per-call context: the provider's configuration (once `ConfigureProvider` ran) and the one
/// cancellation token that `StopProvider` fires. Long waits must select on [`Context::cancelled`].
#[derive(Clone)]
pub struct Context {
    pub cancel: CancellationToken,
    configured: Option<Arc<dyn Any + Send + Sync>>,
}

impl Context {
    pub fn new(cancel: CancellationToken, configured: Option<Arc<dyn Any + Send + Sync>>) -> Self {
        Self { cancel, configured }
    }

    /// The typed provider configuration, if the provider has been configured.
    pub fn configured<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.configured.as_deref().and_then(|c| c.downcast_ref::<T>())
    }

    /// Resolves when the CLI asked the provider to stop (Ctrl-C).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}

#[async_trait]
pub trait DataSource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    /// Static checks; values may be unknown here and must be tolerated.
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Returns the full state of the data source (configuration plus computed attributes).
    async fn read(&self, ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Value;
}

/// Input to planning: `prior` is null on create, `proposed` is null on destroy.
/// The private state an import hands the CLI, which it gives back to the refresh and the first plan after
/// it (and no plan after an apply): how a plan tells an import not applied yet from an applied state.
pub const IMPORTED_PRIVATE: &[u8] = b"hpc-provider:imported";

#[derive(Clone, Copy)]
pub struct PlanRequest<'a> {
    pub prior: &'a Value,
    pub proposed: &'a Value,
    pub config: &'a Value,
    pub prior_private: &'a [u8],
}

#[derive(Default)]
pub struct PlanResponse {
    pub planned: Value,
    pub requires_replace: Vec<AttributePath>,
    pub private: Vec<u8>,
}

pub struct ApplyRequest<'a> {
    pub prior: &'a Value,
    pub planned: &'a Value,
    pub config: &'a Value,
    pub private: &'a [u8],
}

#[derive(Default)]
pub struct ApplyResponse {
    /// Null after a destroy. After a failed create, whatever exists (ids included), so nothing is lost.
    pub new_state: Value,
    pub private: Vec<u8>,
}

/// What `ReadResource` found: the refreshed state, or `Gone` when the object no longer exists.
pub enum ReadOutcome {
    Found { state: Value, private: Vec<u8> },
    Gone,
}

#[async_trait]
pub trait Resource: Send + Sync {
    fn type_name(&self) -> &'static str;
    fn schema(&self) -> Schema;
    fn validate(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Pure: no IO. Must only set attributes that are null in config and computed.
    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse;
    /// After a plan without errors: the checks that ask the cloud (quota), which may add diagnostics.
    /// Called for every plan that does not destroy; the default asks nothing.
    async fn check_plan(&self, _ctx: &Context, _req: PlanRequest<'_>, _planned: &Value, _diags: &mut Diagnostics) {}
    /// What `PlanResourceChange` runs: [`Resource::plan`], then, when it planned something without errors,
    /// [`Resource::check_plan`]. A resource overrides it to parse its configuration once for both.
    async fn plan_checked(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        let plan = self.plan(ctx, req, diags);
        if !diags.has_errors() && plan.planned.is_present() {
            self.check_plan(ctx, req, &plan.planned, diags).await;
        }
        plan
    }
    async fn apply(&self, ctx: &Context, req: ApplyRequest<'_>, diags: &mut Diagnostics) -> ApplyResponse;
    async fn read(&self, ctx: &Context, state: &Value, private: &[u8], diags: &mut Diagnostics) -> ReadOutcome;
    /// Adopts an existing object by its documented import id.
    async fn import(&self, ctx: &Context, id: &str, diags: &mut Diagnostics) -> Option<Value>;
    /// Upgrades state stored under an older schema version; the default accepts the current shape.
    fn upgrade(&self, _version: i64, state: Value, _diags: &mut Diagnostics) -> Value {
        state
    }
    /// The identity schema, for resources importable by identity.
    fn identity_schema(&self) -> Option<IdentitySchema> {
        None
    }
    /// The identity of the object a state describes; `None` while it is not known (before a create).
    fn identity(&self, _state: &Value) -> Option<Value> {
        None
    }
    /// The import id an identity stands for, or why the identity names nothing.
    fn import_id(&self, _identity: &Value) -> Result<String, String> {
        Err("this resource cannot be imported by identity".into())
    }
}

/// One attribute of a resource's identity: what an `import` block's `identity = { ... }` names.
#[derive(Clone, Debug)]
pub struct IdentityAttribute {
    pub name: &'static str,
    pub ty: Type,
    pub required_for_import: bool,
    pub description: &'static str,
}

/// The identity of a resource's objects (CLIs from OpenTofu 1.12 and Terraform 1.12 on).
#[derive(Clone, Debug)]
pub struct IdentitySchema {
    pub version: i64,
    pub attributes: Vec<IdentityAttribute>,
}

impl IdentitySchema {
    pub fn value_type(&self) -> Type {
        Type::object(self.attributes.iter().map(|a| (a.name, a.ty.clone())))
    }
}

/// The provider itself: its configuration block and what it serves.
pub trait ProviderDefinition: Send + Sync {
    fn schema(&self) -> Schema;
    fn validate_config(&self, _config: &Value, _diags: &mut Diagnostics) {}
    /// Builds the configured state shared with every later call (clients, credentials, ...).
    fn configure(&self, config: &Value, terraform_version: &str, diags: &mut Diagnostics) -> Option<Arc<dyn Any + Send + Sync>>;
    fn data_sources(&self) -> Vec<Arc<dyn DataSource>>;
    fn resources(&self) -> Vec<Arc<dyn Resource>>;
    /// Provider-defined functions; none unless the provider offers some.
    fn functions(&self) -> Vec<Arc<dyn Function>> {
        Vec::new()
    }
}
