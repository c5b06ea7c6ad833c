//! Provider-defined functions (`provider::hpc::<name>(...)`): pure computations the CLI calls while it
//! evaluates a configuration, with no cloud access and no provider configuration. The protocol layer
//! decodes the arguments by the declared parameter types and encodes the result by the return type.

use super::value::{Type, Value};

/// One parameter as the CLI sees it. Null and unknown arguments are never passed to [`Function::call`]:
/// the CLI refuses a null for these parameters itself and answers unknown for an unknown argument.
#[derive(Clone, Debug)]
pub struct Parameter {
    pub name: &'static str,
    pub ty: Type,
    pub description: &'static str,
}

impl Parameter {
    pub fn new(name: &'static str, ty: Type, description: &'static str) -> Self {
        Self { name, ty, description }
    }
}

#[derive(Clone, Debug)]
pub struct Signature {
    pub parameters: Vec<Parameter>,
    pub returns: Type,
    /// One line, shown by editors and `providers schema -json`.
    pub summary: &'static str,
    /// Markdown.
    pub description: &'static str,
}

/// Why a call failed; `argument` is the 0-based index of the argument at fault, if one is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionError {
    pub text: String,
    pub argument: Option<usize>,
}

impl FunctionError {
    /// The argument at `index` is not acceptable; `text` says why and what is.
    pub fn argument(index: usize, text: impl Into<String>) -> Self {
        Self { text: text.into(), argument: Some(index) }
    }
}

pub trait Function: Send + Sync {
    /// The name after `provider::hpc::`.
    fn name(&self) -> &'static str;
    fn signature(&self) -> Signature;
    /// `args` has one value per parameter, each of its declared type, known and not null.
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError>;
}
