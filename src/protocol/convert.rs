//! Translation between the framework's types and the generated protocol messages.

use crate::framework::codec::{self, CodecError};
use crate::framework::{
    AttributePath, Block, Diagnostic, Diagnostics, IdentitySchema, Nesting, PathStep, Schema, Severity, Signature, Type, Value,
};

use super::tfplugin6 as pb;

pub fn schema(s: &Schema) -> pb::Schema {
    pb::Schema { version: s.version, block: Some(block(&s.block, s.version)) }
}

fn block(b: &Block, version: i64) -> pb::schema::Block {
    pb::schema::Block {
        version,
        description: b.description.clone(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecated: false,
        attributes: b
            .attributes
            .iter()
            .map(|a| pb::schema::Attribute {
                name: a.name.clone(),
                r#type: a.ty.to_json().to_string().into_bytes(),
                nested_type: None,
                description: a.description.clone(),
                required: a.required,
                optional: a.optional,
                computed: a.computed,
                sensitive: a.sensitive,
                description_kind: pb::StringKind::Markdown as i32,
                deprecated: false,
                write_only: a.write_only,
            })
            .collect(),
        block_types: b
            .blocks
            .iter()
            .map(|nb| {
                use pb::schema::nested_block::NestingMode as M;
                let nesting = match nb.nesting {
                    Nesting::Single => M::Single,
                    Nesting::List => M::List,
                    Nesting::Set => M::Set,
                    Nesting::Map => M::Map,
                    Nesting::Group => M::Group,
                };
                pb::schema::NestedBlock {
                    type_name: nb.type_name.clone(),
                    block: Some(block(&nb.block, 0)),
                    nesting: nesting as i32,
                    min_items: nb.min_items,
                    max_items: nb.max_items,
                }
            })
            .collect(),
    }
}

pub fn identity_schema(i: &IdentitySchema) -> pb::ResourceIdentitySchema {
    pb::ResourceIdentitySchema {
        version: i.version,
        identity_attributes: i
            .attributes
            .iter()
            .map(|a| pb::resource_identity_schema::IdentityAttribute {
                name: a.name.to_owned(),
                r#type: a.ty.to_json().to_string().into_bytes(),
                required_for_import: a.required_for_import,
                optional_for_import: !a.required_for_import,
                description: a.description.to_owned(),
            })
            .collect(),
    }
}

/// A function's declaration. Null and unknown arguments are refused: the CLI then rejects a null itself
/// and answers unknown for an unknown argument, so a call always has known values.
pub fn function(sig: &Signature) -> pb::Function {
    pb::Function {
        parameters: sig
            .parameters
            .iter()
            .map(|p| pb::function::Parameter {
                name: p.name.to_owned(),
                r#type: p.ty.to_json().to_string().into_bytes(),
                allow_null_value: false,
                allow_unknown_values: false,
                description: p.description.to_owned(),
                description_kind: pb::StringKind::Markdown as i32,
            })
            .collect(),
        variadic_parameter: None,
        r#return: Some(pb::function::Return { r#type: sig.returns.to_json().to_string().into_bytes() }),
        summary: sig.summary.to_owned(),
        description: sig.description.to_owned(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecation_message: String::new(),
    }
}

pub fn path(p: &AttributePath) -> pb::AttributePath {
    use pb::attribute_path::step::Selector;
    pb::AttributePath {
        steps: p
            .steps
            .iter()
            .map(|s| pb::attribute_path::Step {
                selector: Some(match s {
                    PathStep::Attribute(n) => Selector::AttributeName(n.clone()),
                    PathStep::Key(k) => Selector::ElementKeyString(k.clone()),
                    PathStep::Index(i) => Selector::ElementKeyInt(*i),
                }),
            })
            .collect(),
    }
}

pub fn diagnostic(d: &Diagnostic) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: match d.severity {
            Severity::Error => pb::diagnostic::Severity::Error,
            Severity::Warning => pb::diagnostic::Severity::Warning,
        } as i32,
        summary: d.summary.clone(),
        detail: d.detail.clone(),
        attribute: d.path.as_ref().filter(|p| !p.is_root()).map(path),
    }
}

pub fn diagnostics(d: &Diagnostics) -> Vec<pb::Diagnostic> {
    d.iter().map(diagnostic).collect()
}

/// Decodes a `DynamicValue`; an absent value is null. Errors become a diagnostic naming the path,
/// because a value the provider cannot read is a bug on one side or the other, never a user mistake.
pub fn decode(dv: Option<&pb::DynamicValue>, ty: &Type, what: &str, diags: &mut Diagnostics) -> Option<Value> {
    let Some(dv) = dv else { return Some(Value::Null) };
    let result = if !dv.msgpack.is_empty() {
        codec::decode_msgpack(&dv.msgpack, ty)
    } else if !dv.json.is_empty() {
        codec::decode_json(&dv.json, ty)
    } else {
        Ok(Value::Null)
    };
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            diags.push(codec_diagnostic(what, &e));
            None
        }
    }
}

fn codec_diagnostic(what: &str, e: &CodecError) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        summary: "Invalid value from the CLI".into(),
        detail: format!(
            "The provider could not decode the {what} it was sent: {e}. This usually means the CLI and the provider \
             disagree on the schema; run the command again, and report it if it persists."
        ),
        path: (!e.path.is_root()).then(|| e.path.clone()),
        cause: None,
    }
}

/// Encodes a value as msgpack; a value that does not fit its schema is reported as a provider bug.
pub fn encode(v: &Value, ty: &Type, what: &str, diags: &mut Diagnostics) -> Option<pb::DynamicValue> {
    match codec::encode_msgpack(v, ty) {
        Ok(bytes) => Some(pb::DynamicValue { msgpack: bytes, json: Vec::new() }),
        Err(e) => {
            diags.error(
                "Provider bug: invalid result",
                format!("The provider produced a {what} that does not match its own schema: {e}. Please report this."),
            );
            None
        }
    }
}
