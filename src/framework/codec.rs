//! Wire encodings of [`Value`]: msgpack (what the CLI sends and what we answer) and JSON (stored state
//! handed to `UpgradeResourceState`). Decoding is typed by the schema and bounded in depth, so malformed
//! or hostile bytes become a [`CodecError`], never a panic.

use std::collections::BTreeMap;

use rmpv::Value as Mp;

use super::diagnostics::AttributePath;
use super::value::{Number, Type, Value};

/// Deepest nesting accepted from the wire; our schemas nest a handful of levels.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CodecError {
    pub path: AttributePath,
    pub message: String,
}

fn err<T>(path: &AttributePath, message: impl Into<String>) -> Result<T, CodecError> {
    Err(CodecError { path: path.clone(), message: message.into() })
}

// ---------------------------------------------------------------------------------------------- msgpack

/// Decodes a msgpack `DynamicValue` against the expected type.
pub fn decode_msgpack(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    let mut rd = bytes;
    let raw = rmpv::decode::read_value_with_max_depth(&mut rd, MAX_DEPTH + 2)
        .map_err(|e| CodecError { path: AttributePath::root(), message: format!("malformed msgpack: {e}") })?;
    if !rd.is_empty() {
        return err(&AttributePath::root(), format!("{} trailing bytes after the msgpack value", rd.len()));
    }
    from_msgpack(&raw, ty, &AttributePath::root(), 0)
}

fn from_msgpack(raw: &Mp, ty: &Type, path: &AttributePath, depth: usize) -> Result<Value, CodecError> {
    if depth > MAX_DEPTH {
        return err(path, "value nests too deeply");
    }
    match raw {
        Mp::Nil => return Ok(Value::Null),
        // Unknown is extension type 0; newer CLIs send type 12 with refinements. Any extension is unknown.
        Mp::Ext(_, _) => return Ok(Value::Unknown),
        _ => {}
    }
    match ty {
        Type::Bool => match raw {
            Mp::Boolean(b) => Ok(Value::Bool(*b)),
            other => err(path, format!("expected bool, got {}", mp_kind(other))),
        },
        Type::Number => match raw {
            Mp::Integer(i) => match (i.as_i64(), i.as_u64()) {
                (Some(v), _) => Ok(Value::Number(Number::Int(v))),
                (None, Some(v)) => Ok(Value::Number(Number::Float(v as f64))),
                _ => err(path, "integer out of range"),
            },
            Mp::F32(f) => finite(f64::from(*f), path),
            Mp::F64(f) => finite(*f, path),
            // Numbers too precise for a float travel as strings.
            Mp::String(s) => match s.as_str().and_then(|s| s.parse::<f64>().ok()) {
                Some(f) => finite(f, path),
                None => err(path, "expected number, got a string that is not one"),
            },
            other => err(path, format!("expected number, got {}", mp_kind(other))),
        },
        Type::String => match raw {
            Mp::String(s) => match s.as_str() {
                Some(s) => Ok(Value::String(s.to_owned())),
                None => err(path, "string is not valid UTF-8"),
            },
            other => err(path, format!("expected string, got {}", mp_kind(other))),
        },
        Type::List(elem) | Type::Set(elem) => match raw {
            Mp::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| from_msgpack(item, elem, &path.clone().and_index(i), depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::List),
            other => err(path, format!("expected list, got {}", mp_kind(other))),
        },
        Type::Tuple(elems) => match raw {
            Mp::Array(items) if items.len() == elems.len() => items
                .iter()
                .zip(elems)
                .enumerate()
                .map(|(i, (item, ty))| from_msgpack(item, ty, &path.clone().and_index(i), depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::List),
            Mp::Array(items) => err(path, format!("expected a tuple of {}, got {} elements", elems.len(), items.len())),
            other => err(path, format!("expected tuple, got {}", mp_kind(other))),
        },
        Type::Map(elem) => match raw {
            Mp::Map(entries) => {
                let mut out = BTreeMap::new();
                for (k, v) in entries {
                    let key = mp_key(k, path)?;
                    let value = from_msgpack(v, elem, &path.clone().and_key(&key), depth + 1)?;
                    out.insert(key, value);
                }
                Ok(Value::Map(out))
            }
            other => err(path, format!("expected map, got {}", mp_kind(other))),
        },
        Type::Object(attrs) => match raw {
            Mp::Map(entries) => {
                let mut out: BTreeMap<String, Value> = attrs.keys().map(|k| (k.clone(), Value::Null)).collect();
                for (k, v) in entries {
                    let key = mp_key(k, path)?;
                    let Some(attr_ty) = attrs.get(&key) else {
                        return err(path, format!("unsupported attribute {key:?}"));
                    };
                    let value = from_msgpack(v, attr_ty, &path.clone().and_attr(&key), depth + 1)?;
                    out.insert(key, value);
                }
                Ok(Value::Map(out))
            }
            other => err(path, format!("expected object, got {}", mp_kind(other))),
        },
        // A dynamic value is the pair [type as JSON, value].
        Type::Dynamic => match raw {
            Mp::Array(pair) if pair.len() == 2 => {
                let type_json = match &pair[0] {
                    Mp::Binary(b) => b.as_slice(),
                    Mp::String(s) => s.as_bytes(),
                    other => return err(path, format!("dynamic value type must be bytes, got {}", mp_kind(other))),
                };
                let json: serde_json::Value =
                    serde_json::from_slice(type_json).or_else(|e| err(path, format!("dynamic value type is not JSON: {e}")))?;
                let inner = Type::from_json(&json).or_else(|e| err(path, e))?;
                if inner == Type::Dynamic {
                    return err(path, "dynamic value declares type dynamic");
                }
                from_msgpack(&pair[1], &inner, path, depth + 1)
            }
            other => err(path, format!("expected a dynamic value pair, got {}", mp_kind(other))),
        },
    }
}

fn finite(f: f64, path: &AttributePath) -> Result<Value, CodecError> {
    if f.is_finite() { Ok(Value::Number(Number::Float(f))) } else { err(path, "number is not finite") }
}

fn mp_key(k: &Mp, path: &AttributePath) -> Result<String, CodecError> {
    match k {
        Mp::String(s) => {
            s.as_str().map(str::to_owned).ok_or_else(|| CodecError { path: path.clone(), message: "map key is not valid UTF-8".into() })
        }
        other => err(path, format!("map key must be a string, got {}", mp_kind(other))),
    }
}

fn mp_kind(v: &Mp) -> &'static str {
    match v {
        Mp::Nil => "null",
        Mp::Boolean(_) => "bool",
        Mp::Integer(_) | Mp::F32(_) | Mp::F64(_) => "number",
        Mp::String(_) => "string",
        Mp::Binary(_) => "binary",
        Mp::Array(_) => "array",
        Mp::Map(_) => "map",
        Mp::Ext(_, _) => "extension",
    }
}

/// Encodes a value of the given type as msgpack. A mismatch between value and type is a provider bug
/// and is reported as an error rather than written.
pub fn encode_msgpack(value: &Value, ty: &Type) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(64);
    write_msgpack(&mut out, value, ty, &AttributePath::root())?;
    Ok(out)
}

fn write_msgpack(out: &mut Vec<u8>, value: &Value, ty: &Type, path: &AttributePath) -> Result<(), CodecError> {
    use rmp::encode as e;
    // Writing into a Vec cannot fail; the results are ignored for that reason only.
    match (value, ty) {
        (Value::Null, _) => {
            e::write_nil(out).ok();
        }
        (Value::Unknown, _) => {
            e::write_ext_meta(out, 1, 0).ok();
            out.push(0);
        }
        (v, Type::Dynamic) => {
            let inner = Type::infer(v);
            e::write_array_len(out, 2).ok();
            e::write_bin(out, inner.to_json().to_string().as_bytes()).ok();
            write_msgpack(out, v, &inner, path)?;
        }
        (Value::Bool(b), Type::Bool) => {
            e::write_bool(out, *b).ok();
        }
        (Value::Number(n), Type::Number) => match n.as_i64() {
            Some(i) => {
                e::write_sint(out, i).ok();
            }
            None => {
                e::write_f64(out, n.as_f64()).ok();
            }
        },
        (Value::String(s), Type::String) => {
            e::write_str(out, s).ok();
        }
        (Value::List(items), Type::List(elem) | Type::Set(elem)) => {
            e::write_array_len(out, items.len() as u32).ok();
            for (i, item) in items.iter().enumerate() {
                write_msgpack(out, item, elem, &path.clone().and_index(i))?;
            }
        }
        (Value::List(items), Type::Tuple(elems)) if items.len() == elems.len() => {
            e::write_array_len(out, items.len() as u32).ok();
            for (i, (item, ty)) in items.iter().zip(elems).enumerate() {
                write_msgpack(out, item, ty, &path.clone().and_index(i))?;
            }
        }
        (Value::Map(entries), Type::Map(elem)) => {
            e::write_map_len(out, entries.len() as u32).ok();
            for (k, v) in entries {
                e::write_str(out, k).ok();
                write_msgpack(out, v, elem, &path.clone().and_key(k))?;
            }
        }
        (Value::Map(entries), Type::Object(attrs)) => {
            if let Some(extra) = entries.keys().find(|k| !attrs.contains_key(*k)) {
                return err(path, format!("attribute {extra:?} is not in the schema"));
            }
            e::write_map_len(out, attrs.len() as u32).ok();
            for (name, attr_ty) in attrs {
                e::write_str(out, name).ok();
                let v = entries.get(name).unwrap_or(&Value::Null);
                write_msgpack(out, v, attr_ty, &path.clone().and_attr(name))?;
            }
        }
        (v, ty) => return err(path, format!("value {v:?} does not fit type {}", ty.to_json())),
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------- JSON

/// Decodes JSON (stored state) against the expected type. Attributes the type does not know are dropped:
/// state written by an older schema may carry attributes that no longer exist.
pub fn decode_json(bytes: &[u8], ty: &Type) -> Result<Value, CodecError> {
    let json: serde_json::Value = serde_json::from_slice(bytes).or_else(|e| err(&AttributePath::root(), format!("malformed JSON: {e}")))?;
    from_json(&json, ty, &AttributePath::root(), 0)
}

fn from_json(json: &serde_json::Value, ty: &Type, path: &AttributePath, depth: usize) -> Result<Value, CodecError> {
    use serde_json::Value as J;
    if depth > MAX_DEPTH {
        return err(path, "value nests too deeply");
    }
    if json.is_null() {
        return Ok(Value::Null);
    }
    match (ty, json) {
        (Type::Bool, J::Bool(b)) => Ok(Value::Bool(*b)),
        (Type::Number, J::Number(n)) => match n.as_i64() {
            Some(i) => Ok(Value::int(i)),
            None => finite(n.as_f64().unwrap_or(f64::NAN), path),
        },
        (Type::Number, J::String(s)) => match s.parse::<f64>() {
            Ok(f) => finite(f, path),
            Err(_) => err(path, "expected number"),
        },
        (Type::String, J::String(s)) => Ok(Value::String(s.clone())),
        (Type::List(elem) | Type::Set(elem), J::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| from_json(item, elem, &path.clone().and_index(i), depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::List),
        (Type::Tuple(elems), J::Array(items)) if items.len() == elems.len() => items
            .iter()
            .zip(elems)
            .enumerate()
            .map(|(i, (item, ty))| from_json(item, ty, &path.clone().and_index(i), depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::List),
        (Type::Map(elem), J::Object(entries)) => entries
            .iter()
            .map(|(k, v)| Ok((k.clone(), from_json(v, elem, &path.clone().and_key(k), depth + 1)?)))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Value::Map),
        (Type::Object(attrs), J::Object(entries)) => attrs
            .iter()
            .map(|(name, attr_ty)| {
                let v = entries.get(name).unwrap_or(&J::Null);
                Ok((name.clone(), from_json(v, attr_ty, &path.clone().and_attr(name), depth + 1)?))
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Value::Map),
        (Type::Dynamic, J::Object(pair)) if pair.contains_key("type") && pair.contains_key("value") => {
            let inner = Type::from_json(&pair["type"]).or_else(|e| err(path, e))?;
            from_json(&pair["value"], &inner, path, depth + 1)
        }
        (ty, other) => err(path, format!("expected {}, got {}", ty.to_json(), json_kind(other))),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value as J;
    match v {
        J::Null => "null",
        J::Bool(_) => "bool",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

/// Encodes a wholly known value as JSON (the state format). Unknown values cannot be written.
pub fn encode_json(value: &Value, ty: &Type) -> Result<Vec<u8>, CodecError> {
    let json = to_json(value, ty, &AttributePath::root())?;
    Ok(json.to_string().into_bytes())
}

fn to_json(value: &Value, ty: &Type, path: &AttributePath) -> Result<serde_json::Value, CodecError> {
    use serde_json::Value as J;
    Ok(match (value, ty) {
        (Value::Null, _) => J::Null,
        (Value::Unknown, _) => return err(path, "unknown values cannot be written as JSON"),
        (v, Type::Dynamic) => {
            let inner = Type::infer(v);
            serde_json::json!({"type": inner.to_json(), "value": to_json(v, &inner, path)?})
        }
        (Value::Bool(b), Type::Bool) => J::Bool(*b),
        (Value::Number(n), Type::Number) => match n.as_i64() {
            Some(i) => J::from(i),
            None => J::from(n.as_f64()),
        },
        (Value::String(s), Type::String) => J::String(s.clone()),
        (Value::List(items), Type::List(elem) | Type::Set(elem)) => {
            J::Array(items.iter().enumerate().map(|(i, item)| to_json(item, elem, &path.clone().and_index(i))).collect::<Result<_, _>>()?)
        }
        (Value::List(items), Type::Tuple(elems)) if items.len() == elems.len() => J::Array(
            items
                .iter()
                .zip(elems)
                .enumerate()
                .map(|(i, (item, ty))| to_json(item, ty, &path.clone().and_index(i)))
                .collect::<Result<_, _>>()?,
        ),
        (Value::Map(entries), Type::Map(elem)) => J::Object(
            entries.iter().map(|(k, v)| Ok((k.clone(), to_json(v, elem, &path.clone().and_key(k))?))).collect::<Result<_, CodecError>>()?,
        ),
        (Value::Map(entries), Type::Object(attrs)) => {
            if let Some(extra) = entries.keys().find(|k| !attrs.contains_key(*k)) {
                return err(path, format!("attribute {extra:?} is not in the schema"));
            }
            J::Object(
                attrs
                    .iter()
                    .map(|(name, attr_ty)| {
                        let v = entries.get(name).unwrap_or(&Value::Null);
                        Ok((name.clone(), to_json(v, attr_ty, &path.clone().and_attr(name))?))
                    })
                    .collect::<Result<_, CodecError>>()?,
            )
        }
        (v, ty) => return err(path, format!("value {v:?} does not fit type {}", ty.to_json())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_type() -> Type {
        Type::object([
            ("name", Type::String),
            ("count", Type::Number),
            ("ratio", Type::Number),
            ("enabled", Type::Bool),
            ("tags", Type::map(Type::String)),
            ("zones", Type::set(Type::String)),
            ("nodes", Type::list(Type::object([("ip", Type::String), ("card", Type::Number)]))),
            ("extra", Type::Dynamic),
        ])
    }

    fn sample_value() -> Value {
        Value::object([
            ("name", Value::from("train")),
            ("count", Value::int(4)),
            ("ratio", Value::float(0.25)),
            ("enabled", Value::Bool(true)),
            ("tags", Value::object([("team", Value::from("ml"))])),
            ("zones", Value::list([Value::from("us-east-1a")])),
            ("nodes", Value::list([Value::object([("ip", Value::Unknown), ("card", Value::int(31))])])),
            ("extra", Value::from("free-form")),
        ])
    }

    #[test]
    fn msgpack_round_trips_nested_values_with_unknowns() {
        let bytes = encode_msgpack(&sample_value(), &sample_type()).unwrap();
        assert_eq!(decode_msgpack(&bytes, &sample_type()).unwrap(), sample_value());
    }

    #[test]
    fn unknown_is_extension_zero_and_any_extension_decodes_as_unknown() {
        assert_eq!(encode_msgpack(&Value::Unknown, &Type::String).unwrap(), vec![0xd4, 0x00, 0x00]);
        // Extension 12 (refined unknown, as newer CLIs send it) with a payload.
        let refined = [0xc7, 0x03, 0x0c, 0x81, 0x01, 0xc2];
        assert_eq!(decode_msgpack(&refined, &Type::String).unwrap(), Value::Unknown);
    }

    #[test]
    fn null_object_encodes_as_nil_and_missing_attributes_decode_as_null() {
        assert_eq!(encode_msgpack(&Value::Null, &sample_type()).unwrap(), vec![0xc0]);
        let partial = encode_msgpack(&Value::object([("name", Value::from("x"))]), &Type::object([("name", Type::String)])).unwrap();
        let decoded = decode_msgpack(&partial, &sample_type()).unwrap();
        assert!(decoded.get("count").is_null());
        assert_eq!(decoded.get("name").as_str(), Some("x"));
    }

    #[test]
    fn msgpack_errors_name_the_attribute_path() {
        let ty = Type::object([("nodes", Type::list(Type::object([("card", Type::Number)])))]);
        let bad = Value::object([("nodes", Value::list([Value::object([("card", Value::from("zero"))])]))]);
        let bytes = encode_msgpack(&bad, &Type::object([("nodes", Type::list(Type::object([("card", Type::String)])))])).unwrap();
        let e = decode_msgpack(&bytes, &ty).unwrap_err();
        assert_eq!(e.path.to_string(), "nodes[0].card");
        assert!(e.message.contains("expected number"), "{e}");
    }

    #[test]
    fn msgpack_rejects_truncated_trailing_and_undeclared_attributes() {
        let bytes = encode_msgpack(&sample_value(), &sample_type()).unwrap();
        assert!(decode_msgpack(&bytes[..bytes.len() - 3], &sample_type()).is_err());
        let mut long = bytes.clone();
        long.push(0xc0);
        assert!(decode_msgpack(&long, &sample_type()).unwrap_err().message.contains("trailing"));
        let e = decode_msgpack(&bytes, &Type::object([("name", Type::String)])).unwrap_err();
        assert!(e.message.contains("unsupported attribute"), "{e}");
    }

    #[test]
    fn msgpack_rejects_deep_nesting_without_overflowing() {
        let mut bytes = vec![0x91; 100_000]; // 100k nested one-element arrays
        bytes.push(0xc0);
        let mut ty = Type::String;
        for _ in 0..10 {
            ty = Type::list(ty);
        }
        assert!(decode_msgpack(&bytes, &ty).is_err());
    }

    #[test]
    fn large_numbers_sent_as_strings_are_accepted() {
        let mut bytes = Vec::new();
        rmp::encode::write_str(&mut bytes, "1e30").unwrap();
        assert_eq!(decode_msgpack(&bytes, &Type::Number).unwrap(), Value::float(1e30));
    }

    #[test]
    fn encoding_refuses_values_that_do_not_fit_the_type() {
        let e = encode_msgpack(&Value::object([("typo", Value::from("x"))]), &Type::object([("name", Type::String)])).unwrap_err();
        assert!(e.message.contains("typo"));
        assert!(encode_msgpack(&Value::from("x"), &Type::Number).is_err());
    }

    #[test]
    fn json_round_trips_known_values_and_drops_removed_attributes() {
        let mut v = sample_value();
        if let Value::Map(m) = &mut v {
            m.insert("nodes".into(), Value::list([Value::object([("ip", Value::from("10.0.0.4")), ("card", Value::int(0))])]));
        }
        let bytes = encode_json(&v, &sample_type()).unwrap();
        assert_eq!(decode_json(&bytes, &sample_type()).unwrap(), v);
        let old_state = br#"{"name":"x","removed_attribute":"y"}"#;
        let decoded = decode_json(old_state, &Type::object([("name", Type::String)])).unwrap();
        assert_eq!(decoded, Value::object([("name", Value::from("x"))]));
        assert!(encode_json(&Value::Unknown, &Type::String).is_err());
    }
}
