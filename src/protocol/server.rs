//! The `tfplugin6.Provider` service: one function per RPC, each decoding its request with the schema,
//! calling the framework traits, and encoding the answer. Every RPC runs under a panic guard, so a bug
//! reaches the user as a diagnostic and the process keeps serving; user mistakes are diagnostics too,
//! never gRPC errors. Optional RPCs this provider does not implement answer `UNIMPLEMENTED`.

use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use futures::{FutureExt, Stream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::framework::{
    ApplyRequest, Context, DataSource, Diagnostic, Diagnostics, Function, PlanRequest, ProviderDefinition, ReadOutcome, Resource, Schema,
    Severity, Type, Value, one_of,
};

use super::convert;
use super::tfplugin6 as pb;
use super::tfplugin6::provider_server::Provider;

struct Registered<T: ?Sized> {
    imp: Arc<T>,
    schema: Schema,
    ty: Type,
}

/// A resource's identity schema, as declared and as its value type.
struct Identity {
    schema: pb::ResourceIdentitySchema,
    ty: Type,
}

/// The provider as the protocol sees it. Cheap to clone; clones share configuration and cancellation.
#[derive(Clone)]
pub struct ProviderService {
    inner: Arc<Inner>,
}

struct Inner {
    definition: Arc<dyn ProviderDefinition>,
    provider_ty: Type,
    schema_response: pb::get_provider_schema::Response,
    data_sources: BTreeMap<String, Registered<dyn DataSource>>,
    resources: BTreeMap<String, Registered<dyn Resource>>,
    functions: BTreeMap<String, Arc<dyn Function>>,
    identities: BTreeMap<String, Identity>,
    configured: RwLock<Option<Arc<dyn Any + Send + Sync>>>,
    cancel: CancellationToken,
}

impl ProviderService {
    pub fn new(definition: Arc<dyn ProviderDefinition>) -> Self {
        let provider_schema = definition.schema();
        let data_sources: BTreeMap<_, _> = definition
            .data_sources()
            .into_iter()
            .map(|imp| {
                let schema = imp.schema();
                let ty = schema.value_type();
                (imp.type_name().to_owned(), Registered { imp, schema, ty })
            })
            .collect();
        let resources: BTreeMap<_, _> = definition
            .resources()
            .into_iter()
            .map(|imp| {
                let schema = imp.schema();
                let ty = schema.value_type();
                (imp.type_name().to_owned(), Registered { imp, schema, ty })
            })
            .collect();
        let identities: BTreeMap<_, _> = resources
            .iter()
            .filter_map(|(k, r)| {
                r.imp.identity_schema().map(|i| (k.clone(), Identity { schema: convert::identity_schema(&i), ty: i.value_type() }))
            })
            .collect();
        let functions: BTreeMap<_, _> = definition.functions().into_iter().map(|f| (f.name().to_owned(), f)).collect();
        // The schema never changes for the life of the process: build the answer once.
        let schema_response = pb::get_provider_schema::Response {
            functions: functions.iter().map(|(k, f)| (k.clone(), convert::function(&f.signature()))).collect(),
            provider: Some(convert::schema(&provider_schema)),
            resource_schemas: resources.iter().map(|(k, r)| (k.clone(), convert::schema(&r.schema))).collect(),
            data_source_schemas: data_sources.iter().map(|(k, d)| (k.clone(), convert::schema(&d.schema))).collect(),
            server_capabilities: Some(pb::ServerCapabilities { get_provider_schema_optional: true, ..Default::default() }),
            ..Default::default()
        };
        Self {
            inner: Arc::new(Inner {
                provider_ty: provider_schema.value_type(),
                definition,
                schema_response,
                data_sources,
                resources,
                functions,
                identities,
                configured: RwLock::new(None),
                cancel: CancellationToken::new(),
            }),
        }
    }

    /// The token `StopProvider` fires; exposed for tests and for the transport's shutdown path.
    pub fn cancellation(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }
}

/// Responses that can carry a diagnostic in place of a result, for the panic guard.
trait FromDiagnostic {
    fn from_diagnostic(d: pb::Diagnostic) -> Self;
}

macro_rules! from_diagnostic {
    ($($t:ty),* $(,)?) => {$(
        impl FromDiagnostic for $t {
            fn from_diagnostic(d: pb::Diagnostic) -> Self {
                let mut resp = Self::default();
                resp.diagnostics.push(d);
                resp
            }
        }
    )*};
}

from_diagnostic!(
    pb::get_provider_schema::Response,
    pb::get_metadata::Response,
    pb::validate_provider_config::Response,
    pb::validate_resource_config::Response,
    pb::validate_data_resource_config::Response,
    pb::configure_provider::Response,
    pb::upgrade_resource_state::Response,
    pb::read_resource::Response,
    pb::plan_resource_change::Response,
    pb::apply_resource_change::Response,
    pb::import_resource_state::Response,
    pb::read_data_source::Response,
    pb::get_functions::Response,
    pb::get_resource_identity_schemas::Response,
    pb::upgrade_resource_identity::Response,
);

/// Runs one RPC body; a panic becomes a provider-bug diagnostic in an otherwise empty response.
async fn guarded<R: FromDiagnostic>(rpc: &'static str, body: impl Future<Output = R>) -> Result<Response<R>, Status> {
    match AssertUnwindSafe(body).catch_unwind().await {
        Ok(resp) => Ok(Response::new(resp)),
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            tracing::error!(rpc, panic = %message, "provider panicked; reported as a diagnostic");
            let d = Diagnostic {
                severity: Severity::Error,
                summary: "Provider bug: internal error".into(),
                detail: format!(
                    "terraform-provider-hpc hit an internal error while handling {rpc}: {message}. Nothing was changed \
                     by this call after the error. Please report this with the output of TF_LOG=debug."
                ),
                path: None,
                cause: None,
            };
            Ok(Response::new(R::from_diagnostic(convert::diagnostic(&d))))
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".into())
}

/// A CLI that does not declare write-only support would keep a write-only argument in its state and plan
/// files: refuse the argument there, naming the stored alternative when there is one.
fn refuse_write_only(schema: &Schema, config: &Value, diags: &mut Diagnostics) {
    for attr in schema.block.write_only() {
        let v = config.get(&attr.name);
        if v.is_null() {
            continue;
        }
        let stored = attr.name.strip_suffix("_wo").filter(|s| schema.block.find_attribute(s).is_some());
        let instead = stored.map(|s| format!(", or set {s} instead (kept in state, marked sensitive)")).unwrap_or_default();
        diags.error_at(
            crate::framework::AttributePath::attr(&attr.name),
            "Write-only argument not supported by this CLI",
            format!(
                "{} is write-only: the provider uses it while applying and never stores it. This CLI does not support write-only \
                 arguments and would keep the value in its state and plan files. Use OpenTofu 1.11 or Terraform 1.11 or later{instead}.",
                attr.name
            ),
        );
    }
}

/// Both CLIs end the text with their own period ("Invalid value for \"cloud\" parameter: <text>."), so it
/// goes without one.
fn function_error(text: String, argument: Option<usize>) -> pb::call_function::Response {
    let text = text.trim_end().trim_end_matches('.').to_owned();
    pb::call_function::Response { result: None, error: Some(pb::FunctionError { text, function_argument: argument.map(|i| i as i64) }) }
}

impl Inner {
    /// The identity of the object `state` describes, encoded, when the resource has one and it is known.
    fn identity_of(&self, type_name: &str, r: &Registered<dyn Resource>, state: &Value) -> Option<pb::ResourceIdentityData> {
        let identity = self.identities.get(type_name)?;
        if state.is_null() {
            return None;
        }
        let value = r.imp.identity(state)?;
        let encoded = crate::framework::codec::encode_msgpack(&value, &identity.ty).ok()?;
        Some(pb::ResourceIdentityData { identity_data: Some(pb::DynamicValue { msgpack: encoded, json: Vec::new() }) })
    }

    fn context(&self) -> Context {
        let configured = self.configured.read().map(|c| c.clone()).unwrap_or_else(|poisoned| poisoned.into_inner().clone());
        Context::new(self.cancel.clone(), configured)
    }

    fn data_source(&self, name: &str, diags: &mut Diagnostics) -> Option<&Registered<dyn DataSource>> {
        let found = self.data_sources.get(name);
        if found.is_none() {
            let valid: Vec<&str> = self.data_sources.keys().map(String::as_str).collect();
            diags.error("Unknown data source type", format!("This provider has no data source {name:?}. It offers {}.", one_of(&valid)));
        }
        found
    }

    fn resource(&self, name: &str, diags: &mut Diagnostics) -> Option<&Registered<dyn Resource>> {
        let found = self.resources.get(name);
        if found.is_none() {
            let valid: Vec<&str> = self.resources.keys().map(String::as_str).collect();
            diags.error("Unknown resource type", format!("This provider has no resource {name:?}. It offers {}.", one_of(&valid)));
        }
        found
    }

    fn validate_provider_config(&self, req: pb::validate_provider_config::Request) -> pb::validate_provider_config::Response {
        let mut diags = Diagnostics::new();
        if let Some(config) = convert::decode(req.config.as_ref(), &self.provider_ty, "provider configuration", &mut diags) {
            self.definition.validate_config(&config, &mut diags);
        }
        pb::validate_provider_config::Response { diagnostics: convert::diagnostics(&diags) }
    }

    fn configure_provider(&self, req: pb::configure_provider::Request) -> pb::configure_provider::Response {
        let mut diags = Diagnostics::new();
        if let Some(config) = convert::decode(req.config.as_ref(), &self.provider_ty, "provider configuration", &mut diags) {
            self.definition.validate_config(&config, &mut diags);
            if !diags.has_errors()
                && let Some(configured) = self.definition.configure(&config, &req.terraform_version, &mut diags)
            {
                match self.configured.write() {
                    Ok(mut slot) => *slot = Some(configured),
                    Err(poisoned) => *poisoned.into_inner() = Some(configured),
                }
            }
        }
        pb::configure_provider::Response { diagnostics: convert::diagnostics(&diags) }
    }

    fn validate_data_resource_config(
        &self,
        req: pb::validate_data_resource_config::Request,
    ) -> pb::validate_data_resource_config::Response {
        let mut diags = Diagnostics::new();
        if let Some(ds) = self.data_source(&req.type_name, &mut diags)
            && let Some(config) = convert::decode(req.config.as_ref(), &ds.ty, "data source configuration", &mut diags)
        {
            ds.imp.validate(&config, &mut diags);
        }
        pb::validate_data_resource_config::Response { diagnostics: convert::diagnostics(&diags) }
    }

    async fn read_data_source(&self, req: pb::read_data_source::Request) -> pb::read_data_source::Response {
        let mut diags = Diagnostics::new();
        let mut state = None;
        if let Some(ds) = self.data_source(&req.type_name, &mut diags)
            && let Some(config) = convert::decode(req.config.as_ref(), &ds.ty, "data source configuration", &mut diags)
        {
            ds.imp.validate(&config, &mut diags);
            if !diags.has_errors() {
                let value = ds.imp.read(&self.context(), &config, &mut diags).await;
                if !diags.has_errors() {
                    state = convert::encode(&value, &ds.ty, "data source state", &mut diags);
                }
            }
        }
        pb::read_data_source::Response { state, diagnostics: convert::diagnostics(&diags), deferred: None }
    }

    fn validate_resource_config(&self, req: pb::validate_resource_config::Request) -> pb::validate_resource_config::Response {
        let mut diags = Diagnostics::new();
        if let Some(r) = self.resource(&req.type_name, &mut diags)
            && let Some(config) = convert::decode(req.config.as_ref(), &r.ty, "resource configuration", &mut diags)
        {
            let write_only_allowed = req.client_capabilities.as_ref().is_some_and(|c| c.write_only_attributes_allowed);
            if !write_only_allowed {
                refuse_write_only(&r.schema, &config, &mut diags);
            }
            r.imp.validate(&config, &mut diags);
        }
        pb::validate_resource_config::Response { diagnostics: convert::diagnostics(&diags) }
    }

    fn upgrade_resource_state(&self, req: pb::upgrade_resource_state::Request) -> pb::upgrade_resource_state::Response {
        let mut diags = Diagnostics::new();
        let mut upgraded_state = None;
        if let Some(r) = self.resource(&req.type_name, &mut diags) {
            let raw = req.raw_state.unwrap_or_default();
            if raw.json.is_empty() && !raw.flatmap.is_empty() {
                diags.error(
                    "Unsupported state format",
                    "This state was written in the legacy flatmap format, which this provider never produced. Remove the \
                     resource from state and import it again.",
                );
            } else {
                let dv = pb::DynamicValue { msgpack: Vec::new(), json: raw.json };
                if let Some(state) = convert::decode(Some(&dv), &r.ty, "stored state", &mut diags) {
                    let state = r.imp.upgrade(req.version, state, &mut diags);
                    if !diags.has_errors() {
                        let state = r.schema.block.without_write_only(state);
                        upgraded_state = convert::encode(&state, &r.ty, "upgraded state", &mut diags);
                    }
                }
            }
        }
        pb::upgrade_resource_state::Response { upgraded_state, diagnostics: convert::diagnostics(&diags) }
    }

    async fn read_resource(&self, req: pb::read_resource::Request) -> pb::read_resource::Response {
        let mut diags = Diagnostics::new();
        let mut resp = pb::read_resource::Response::default();
        if let Some(r) = self.resource(&req.type_name, &mut diags)
            && let Some(state) = convert::decode(req.current_state.as_ref(), &r.ty, "current state", &mut diags)
        {
            match r.imp.read(&self.context(), &state, &req.private, &mut diags).await {
                ReadOutcome::Found { state: new_state, private } => {
                    let new_state = r.schema.block.without_write_only(new_state);
                    resp.new_identity = self.identity_of(&req.type_name, r, &new_state);
                    resp.new_state = convert::encode(&new_state, &r.ty, "refreshed state", &mut diags);
                    resp.private = private;
                }
                // Gone: a null new_state makes the CLI plan a create (an object of nulls would plan a replace).
                ReadOutcome::Gone => resp.new_state = convert::encode(&Value::Null, &r.ty, "refreshed state", &mut diags),
            }
            // On error the CLI keeps the prior state; never hand back a half-read object.
            if diags.has_errors() {
                resp.new_state = req.current_state;
                resp.private = req.private;
                resp.new_identity = req.current_identity;
            }
        }
        resp.diagnostics = convert::diagnostics(&diags);
        resp
    }

    async fn plan_resource_change(&self, req: pb::plan_resource_change::Request) -> pb::plan_resource_change::Response {
        let mut diags = Diagnostics::new();
        let mut resp = pb::plan_resource_change::Response::default();
        if let Some(r) = self.resource(&req.type_name, &mut diags) {
            let prior = convert::decode(req.prior_state.as_ref(), &r.ty, "prior state", &mut diags);
            let proposed = convert::decode(req.proposed_new_state.as_ref(), &r.ty, "proposed new state", &mut diags);
            let config = convert::decode(req.config.as_ref(), &r.ty, "resource configuration", &mut diags);
            if let (Some(prior), Some(proposed), Some(config)) = (prior, proposed, config) {
                let request = PlanRequest { prior: &prior, proposed: &proposed, config: &config, prior_private: &req.prior_private };
                let plan = r.imp.plan_checked(&self.context(), request, &mut diags).await;
                if !diags.has_errors() {
                    let planned = r.schema.block.without_write_only(plan.planned);
                    resp.planned_identity = self.identity_of(&req.type_name, r, &planned);
                    resp.planned_state = convert::encode(&planned, &r.ty, "planned state", &mut diags);
                    resp.requires_replace = plan.requires_replace.iter().map(convert::path).collect();
                    resp.planned_private = plan.private;
                }
            }
        }
        resp.diagnostics = convert::diagnostics(&diags);
        resp
    }

    async fn apply_resource_change(&self, req: pb::apply_resource_change::Request) -> pb::apply_resource_change::Response {
        let mut diags = Diagnostics::new();
        let mut resp = pb::apply_resource_change::Response::default();
        if let Some(r) = self.resource(&req.type_name, &mut diags) {
            let prior = convert::decode(req.prior_state.as_ref(), &r.ty, "prior state", &mut diags);
            let planned = convert::decode(req.planned_state.as_ref(), &r.ty, "planned state", &mut diags);
            let config = convert::decode(req.config.as_ref(), &r.ty, "resource configuration", &mut diags);
            if let (Some(prior), Some(planned), Some(config)) = (prior, planned, config) {
                let applied = r
                    .imp
                    .apply(
                        &self.context(),
                        ApplyRequest { prior: &prior, planned: &planned, config: &config, private: &req.planned_private },
                        &mut diags,
                    )
                    .await;
                // Encoded even on error: after a partial create this is what lets the CLI track what exists.
                let new_state = r.schema.block.without_write_only(applied.new_state);
                resp.new_identity = self.identity_of(&req.type_name, r, &new_state);
                resp.new_state = convert::encode(&new_state, &r.ty, "new state", &mut diags);
                resp.private = applied.private;
            } else {
                resp.new_state = req.prior_state;
            }
        }
        resp.diagnostics = convert::diagnostics(&diags);
        resp
    }

    /// Identities have had one version so far: a stored one is read back as it is.
    fn upgrade_resource_identity(&self, req: pb::upgrade_resource_identity::Request) -> pb::upgrade_resource_identity::Response {
        let mut diags = Diagnostics::new();
        let mut upgraded_identity = None;
        match self.identities.get(&req.type_name) {
            None => diags.error("Unknown resource identity", format!("{} has no identity.", req.type_name)),
            Some(identity) => {
                let raw = req.raw_identity.unwrap_or_default();
                let dv = pb::DynamicValue { msgpack: Vec::new(), json: raw.json };
                if let Some(value) = convert::decode(Some(&dv), &identity.ty, "stored identity", &mut diags)
                    && let Some(data) = convert::encode(&value, &identity.ty, "upgraded identity", &mut diags)
                {
                    upgraded_identity = Some(pb::ResourceIdentityData { identity_data: Some(data) });
                }
            }
        }
        pb::upgrade_resource_identity::Response { upgraded_identity, diagnostics: convert::diagnostics(&diags) }
    }

    fn call_function(&self, req: pb::call_function::Request) -> pb::call_function::Response {
        let Some(function) = self.functions.get(&req.name) else {
            let valid: Vec<&str> = self.functions.keys().map(String::as_str).collect();
            return function_error(format!("terraform-provider-hpc has no function {:?}; it offers {}.", req.name, one_of(&valid)), None);
        };
        let signature = function.signature();
        if req.arguments.len() != signature.parameters.len() {
            return function_error(
                format!("{} takes {} arguments, not {}.", req.name, signature.parameters.len(), req.arguments.len()),
                None,
            );
        }
        let mut args = Vec::with_capacity(req.arguments.len());
        for (i, (dv, param)) in req.arguments.iter().zip(&signature.parameters).enumerate() {
            let mut diags = Diagnostics::new();
            match convert::decode(Some(dv), &param.ty, &format!("argument {:?}", param.name), &mut diags) {
                Some(v) if !diags.has_errors() => args.push(v),
                _ => {
                    let why = diags.iter().map(|d| d.detail.clone()).collect::<Vec<_>>().join(" ");
                    return function_error(why, Some(i));
                }
            }
        }
        match function.call(&args) {
            Ok(value) => {
                let mut diags = Diagnostics::new();
                match convert::encode(&value, &signature.returns, &format!("result of {}", req.name), &mut diags) {
                    Some(result) => pb::call_function::Response { result: Some(result), error: None },
                    None => function_error(diags.iter().map(|d| d.detail.clone()).collect::<Vec<_>>().join(" "), None),
                }
            }
            Err(e) => function_error(e.text, e.argument),
        }
    }

    async fn import_resource_state(&self, req: pb::import_resource_state::Request) -> pb::import_resource_state::Response {
        let mut diags = Diagnostics::new();
        let mut resp = pb::import_resource_state::Response::default();
        if let Some(r) = self.resource(&req.type_name, &mut diags)
            && let Some(id) = self.import_id(&req, r, &mut diags)
            && let Some(state) = r.imp.import(&self.context(), &id, &mut diags).await
            && !diags.has_errors()
        {
            let state = r.schema.block.without_write_only(state);
            let identity = self.identity_of(&req.type_name, r, &state);
            if let Some(state) = convert::encode(&state, &r.ty, "imported state", &mut diags) {
                resp.imported_resources.push(pb::import_resource_state::ImportedResource {
                    type_name: req.type_name.clone(),
                    state: Some(state),
                    private: crate::framework::resource::IMPORTED_PRIVATE.to_vec(),
                    identity,
                });
            }
        }
        resp.diagnostics = convert::diagnostics(&diags);
        resp
    }

    /// The id to import by: the one given, or the one an `import` block's `identity` stands for.
    fn import_id(&self, req: &pb::import_resource_state::Request, r: &Registered<dyn Resource>, diags: &mut Diagnostics) -> Option<String> {
        let given = req.identity.as_ref().and_then(|i| i.identity_data.as_ref());
        let (Some(data), true) = (given, req.id.is_empty()) else { return Some(req.id.clone()) };
        let Some(identity) = self.identities.get(&req.type_name) else {
            diags.error(
                "Import by identity not supported",
                format!("{} cannot be imported by identity; import it by its id.", req.type_name),
            );
            return None;
        };
        let value = convert::decode(Some(data), &identity.ty, "import identity", diags)?;
        match r.imp.import_id(&value) {
            Ok(id) => Some(id),
            Err(e) => {
                diags.error("Invalid import identity", format!("{e}."));
                None
            }
        }
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn unimplemented<T>(rpc: &str) -> Result<Response<T>, Status> {
    Err(Status::unimplemented(format!("terraform-provider-hpc does not implement {rpc}")))
}

#[tonic::async_trait]
impl Provider for ProviderService {
    async fn get_metadata(&self, _: Request<pb::get_metadata::Request>) -> Result<Response<pb::get_metadata::Response>, Status> {
        let inner = &self.inner;
        guarded("GetMetadata", async {
            pb::get_metadata::Response {
                server_capabilities: inner.schema_response.server_capabilities,
                data_sources: inner.data_sources.keys().map(|k| pb::get_metadata::DataSourceMetadata { type_name: k.clone() }).collect(),
                resources: inner.resources.keys().map(|k| pb::get_metadata::ResourceMetadata { type_name: k.clone() }).collect(),
                functions: inner.functions.keys().map(|k| pb::get_metadata::FunctionMetadata { name: k.clone() }).collect(),
                ..Default::default()
            }
        })
        .await
    }

    async fn get_provider_schema(
        &self,
        _: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        guarded("GetProviderSchema", async { self.inner.schema_response.clone() }).await
    }

    async fn validate_provider_config(
        &self,
        req: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        guarded("ValidateProviderConfig", async { self.inner.validate_provider_config(req.into_inner()) }).await
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        guarded("ValidateResourceConfig", async { self.inner.validate_resource_config(req.into_inner()) }).await
    }

    async fn validate_data_resource_config(
        &self,
        req: Request<pb::validate_data_resource_config::Request>,
    ) -> Result<Response<pb::validate_data_resource_config::Response>, Status> {
        guarded("ValidateDataResourceConfig", async { self.inner.validate_data_resource_config(req.into_inner()) }).await
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        guarded("UpgradeResourceState", async { self.inner.upgrade_resource_state(req.into_inner()) }).await
    }

    async fn get_resource_identity_schemas(
        &self,
        _: Request<pb::get_resource_identity_schemas::Request>,
    ) -> Result<Response<pb::get_resource_identity_schemas::Response>, Status> {
        let inner = &self.inner;
        guarded("GetResourceIdentitySchemas", async {
            pb::get_resource_identity_schemas::Response {
                identity_schemas: inner.identities.iter().map(|(k, i)| (k.clone(), i.schema.clone())).collect(),
                diagnostics: Vec::new(),
            }
        })
        .await
    }

    async fn upgrade_resource_identity(
        &self,
        req: Request<pb::upgrade_resource_identity::Request>,
    ) -> Result<Response<pb::upgrade_resource_identity::Response>, Status> {
        guarded("UpgradeResourceIdentity", async { self.inner.upgrade_resource_identity(req.into_inner()) }).await
    }

    async fn configure_provider(
        &self,
        req: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        guarded("ConfigureProvider", async { self.inner.configure_provider(req.into_inner()) }).await
    }

    async fn read_resource(&self, req: Request<pb::read_resource::Request>) -> Result<Response<pb::read_resource::Response>, Status> {
        guarded("ReadResource", self.inner.read_resource(req.into_inner())).await
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        guarded("PlanResourceChange", async { self.inner.plan_resource_change(req.into_inner()).await }).await
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        guarded("ApplyResourceChange", self.inner.apply_resource_change(req.into_inner())).await
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        guarded("ImportResourceState", self.inner.import_resource_state(req.into_inner())).await
    }

    async fn move_resource_state(
        &self,
        _: Request<pb::move_resource_state::Request>,
    ) -> Result<Response<pb::move_resource_state::Response>, Status> {
        unimplemented("MoveResourceState")
    }

    async fn read_data_source(
        &self,
        req: Request<pb::read_data_source::Request>,
    ) -> Result<Response<pb::read_data_source::Response>, Status> {
        guarded("ReadDataSource", self.inner.read_data_source(req.into_inner())).await
    }

    async fn generate_resource_config(
        &self,
        _: Request<pb::generate_resource_config::Request>,
    ) -> Result<Response<pb::generate_resource_config::Response>, Status> {
        unimplemented("GenerateResourceConfig")
    }

    async fn validate_ephemeral_resource_config(
        &self,
        _: Request<pb::validate_ephemeral_resource_config::Request>,
    ) -> Result<Response<pb::validate_ephemeral_resource_config::Response>, Status> {
        unimplemented("ValidateEphemeralResourceConfig")
    }

    async fn open_ephemeral_resource(
        &self,
        _: Request<pb::open_ephemeral_resource::Request>,
    ) -> Result<Response<pb::open_ephemeral_resource::Response>, Status> {
        unimplemented("OpenEphemeralResource")
    }

    async fn renew_ephemeral_resource(
        &self,
        _: Request<pb::renew_ephemeral_resource::Request>,
    ) -> Result<Response<pb::renew_ephemeral_resource::Response>, Status> {
        unimplemented("RenewEphemeralResource")
    }

    async fn close_ephemeral_resource(
        &self,
        _: Request<pb::close_ephemeral_resource::Request>,
    ) -> Result<Response<pb::close_ephemeral_resource::Response>, Status> {
        unimplemented("CloseEphemeralResource")
    }

    type ListResourceStream = BoxStream<pb::list_resource::Event>;

    async fn list_resource(&self, _: Request<pb::list_resource::Request>) -> Result<Response<Self::ListResourceStream>, Status> {
        unimplemented("ListResource")
    }

    async fn validate_list_resource_config(
        &self,
        _: Request<pb::validate_list_resource_config::Request>,
    ) -> Result<Response<pb::validate_list_resource_config::Response>, Status> {
        unimplemented("ValidateListResourceConfig")
    }

    async fn get_functions(&self, _: Request<pb::get_functions::Request>) -> Result<Response<pb::get_functions::Response>, Status> {
        let functions = self.inner.schema_response.functions.clone();
        guarded("GetFunctions", async { pb::get_functions::Response { functions, diagnostics: Vec::new() } }).await
    }

    async fn call_function(&self, req: Request<pb::call_function::Request>) -> Result<Response<pb::call_function::Response>, Status> {
        let req = req.into_inner();
        let name = req.name.clone();
        // A panic becomes a function error: the response has no diagnostics to carry it.
        let resp = match AssertUnwindSafe(async { self.inner.call_function(req) }).catch_unwind().await {
            Ok(resp) => resp,
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                tracing::error!(function = %name, panic = %message, "provider panicked in a function; reported as its error");
                function_error(format!("terraform-provider-hpc hit an internal error in {name}: {message}. Please report this."), None)
            }
        };
        Ok(Response::new(resp))
    }

    async fn validate_state_store_config(
        &self,
        _: Request<pb::validate_state_store::Request>,
    ) -> Result<Response<pb::validate_state_store::Response>, Status> {
        unimplemented("ValidateStateStoreConfig")
    }

    async fn configure_state_store(
        &self,
        _: Request<pb::configure_state_store::Request>,
    ) -> Result<Response<pb::configure_state_store::Response>, Status> {
        unimplemented("ConfigureStateStore")
    }

    type ReadStateBytesStream = BoxStream<pb::read_state_bytes::Response>;

    async fn read_state_bytes(&self, _: Request<pb::read_state_bytes::Request>) -> Result<Response<Self::ReadStateBytesStream>, Status> {
        unimplemented("ReadStateBytes")
    }

    async fn write_state_bytes(
        &self,
        _: Request<Streaming<pb::write_state_bytes::RequestChunk>>,
    ) -> Result<Response<pb::write_state_bytes::Response>, Status> {
        unimplemented("WriteStateBytes")
    }

    async fn get_states(&self, _: Request<pb::get_states::Request>) -> Result<Response<pb::get_states::Response>, Status> {
        unimplemented("GetStates")
    }

    async fn delete_state(&self, _: Request<pb::delete_state::Request>) -> Result<Response<pb::delete_state::Response>, Status> {
        unimplemented("DeleteState")
    }

    async fn plan_action(&self, _: Request<pb::plan_action::Request>) -> Result<Response<pb::plan_action::Response>, Status> {
        unimplemented("PlanAction")
    }

    type InvokeActionStream = BoxStream<pb::invoke_action::Event>;

    async fn invoke_action(&self, _: Request<pb::invoke_action::Request>) -> Result<Response<Self::InvokeActionStream>, Status> {
        unimplemented("InvokeAction")
    }

    async fn validate_action_config(
        &self,
        _: Request<pb::validate_action_config::Request>,
    ) -> Result<Response<pb::validate_action_config::Response>, Status> {
        unimplemented("ValidateActionConfig")
    }

    async fn stop_provider(&self, _: Request<pb::stop_provider::Request>) -> Result<Response<pb::stop_provider::Response>, Status> {
        tracing::info!("StopProvider: cancelling in-flight work");
        self.inner.cancel.cancel();
        Ok(Response::new(pb::stop_provider::Response { error: String::new() }))
    }
}
