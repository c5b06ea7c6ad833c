//! The provider framework: values, codecs, schemas, diagnostics and the traits resources implement.
//! Nothing here knows about gRPC (that is `protocol`) or about clouds (that is everything else).

pub mod codec;
pub mod diagnostics;
pub mod docs;
pub mod function;
pub mod resource;
pub mod schema;
pub mod value;

pub use diagnostics::{AttributePath, Cause, Diagnostic, Diagnostics, PathStep, Severity, one_of};
pub use function::{Function, FunctionError, Parameter, Signature};
pub use resource::{
    ApplyRequest, ApplyResponse, Context, DataSource, IdentityAttribute, IdentitySchema, PlanRequest, PlanResponse, ProviderDefinition,
    ReadOutcome, Resource,
};
pub use schema::{Attribute, Block, Change, NestedBlock, Nesting, Replace, Schema};
pub use value::{Number, Type, Value};
