//! The provider's value model: Terraform types and values (known, null or unknown), independent of any
//! wire encoding. Everything above the protocol layer speaks only these types.

use std::collections::BTreeMap;
use std::fmt;

/// A Terraform type, as the CLI describes it in schemas (`"string"`, `["list","string"]`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    Bool,
    Number,
    String,
    /// `dynamic`: the value carries its own type on the wire.
    Dynamic,
    List(Box<Type>),
    Set(Box<Type>),
    Map(Box<Type>),
    Object(BTreeMap<String, Type>),
    Tuple(Vec<Type>),
}

impl Type {
    pub fn list(elem: Type) -> Type {
        Type::List(Box::new(elem))
    }

    pub fn set(elem: Type) -> Type {
        Type::Set(Box::new(elem))
    }

    pub fn map(elem: Type) -> Type {
        Type::Map(Box::new(elem))
    }

    pub fn object<K: Into<String>>(attrs: impl IntoIterator<Item = (K, Type)>) -> Type {
        Type::Object(attrs.into_iter().map(|(k, t)| (k.into(), t)).collect())
    }

    /// The JSON form used in schema attributes and in dynamic values.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{Value as J, json};
        match self {
            Type::Bool => J::from("bool"),
            Type::Number => J::from("number"),
            Type::String => J::from("string"),
            Type::Dynamic => J::from("dynamic"),
            Type::List(e) => json!(["list", e.to_json()]),
            Type::Set(e) => json!(["set", e.to_json()]),
            Type::Map(e) => json!(["map", e.to_json()]),
            Type::Object(attrs) => {
                let fields: serde_json::Map<String, J> = attrs.iter().map(|(k, t)| (k.clone(), t.to_json())).collect();
                json!(["object", fields])
            }
            Type::Tuple(elems) => json!(["tuple", elems.iter().map(Type::to_json).collect::<Vec<_>>()]),
        }
    }

    /// Parses the JSON form. Nesting is bounded so hostile input cannot exhaust the stack.
    pub fn from_json(json: &serde_json::Value) -> Result<Type, String> {
        Self::from_json_depth(json, 0)
    }

    fn from_json_depth(json: &serde_json::Value, depth: usize) -> Result<Type, String> {
        use serde_json::Value as J;
        if depth > 64 {
            return Err("type nesting is deeper than 64 levels".into());
        }
        match json {
            J::String(s) => match s.as_str() {
                "bool" => Ok(Type::Bool),
                "number" => Ok(Type::Number),
                "string" => Ok(Type::String),
                "dynamic" => Ok(Type::Dynamic),
                other => Err(format!("unknown primitive type {other:?}")),
            },
            J::Array(parts) if parts.len() == 2 => {
                let kind = parts[0].as_str().ok_or("type kind must be a string")?;
                let arg = &parts[1];
                match kind {
                    "list" => Ok(Type::list(Self::from_json_depth(arg, depth + 1)?)),
                    "set" => Ok(Type::set(Self::from_json_depth(arg, depth + 1)?)),
                    "map" => Ok(Type::map(Self::from_json_depth(arg, depth + 1)?)),
                    "object" => {
                        let fields = arg.as_object().ok_or("object type needs a map of attributes")?;
                        let mut attrs = BTreeMap::new();
                        for (k, v) in fields {
                            attrs.insert(k.clone(), Self::from_json_depth(v, depth + 1)?);
                        }
                        Ok(Type::Object(attrs))
                    }
                    "tuple" => {
                        let elems = arg.as_array().ok_or("tuple type needs a list of types")?;
                        let elems = elems.iter().map(|e| Self::from_json_depth(e, depth + 1)).collect::<Result<_, _>>()?;
                        Ok(Type::Tuple(elems))
                    }
                    other => Err(format!("unknown type kind {other:?}")),
                }
            }
            // Objects with optional attributes carry a third element; the optional markers do not
            // change the wire encoding, so they are accepted and ignored.
            J::Array(parts) if parts.len() == 3 && parts[0] == "object" => Self::from_json_depth(&J::Array(parts[..2].to_vec()), depth),
            _ => Err(format!("not a type: {json}")),
        }
    }

    /// The type a value has, as far as it can be told from the value itself (used for `dynamic`).
    pub fn infer(value: &Value) -> Type {
        match value {
            Value::Null | Value::Unknown => Type::Dynamic,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(items) => Type::Tuple(items.iter().map(Type::infer).collect()),
            Value::Map(entries) => Type::Object(entries.iter().map(|(k, v)| (k.clone(), Type::infer(v))).collect()),
        }
    }
}

/// A Terraform number. Integers stay exact; everything else is a float.
#[derive(Clone, Copy, Debug)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    /// The value as an integer, if it is one exactly.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Number::Int(i) => Some(i),
            Number::Float(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => Some(f as i64),
            Number::Float(_) => None,
        }
    }
}

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Number::Int(a), Number::Int(b)) => a == b,
            _ => self.as_f64() == other.as_f64(),
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A Terraform value. Lists, sets and tuples are all `List`; maps and objects are both `Map`: the
/// schema's [`Type`] says which, so the model stays small and the codec is the one place that cares.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Unknown,
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

static NULL: Value = Value::Null;

impl Value {
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    pub fn int(i: i64) -> Value {
        Value::Number(Number::Int(i))
    }

    pub fn float(f: f64) -> Value {
        Value::Number(Number::Float(f))
    }

    pub fn object<K: Into<String>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    pub fn list(items: impl IntoIterator<Item = Value>) -> Value {
        Value::List(items.into_iter().collect())
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Value::Unknown)
    }

    /// Known and not null.
    pub fn is_present(&self) -> bool {
        !self.is_null() && !self.is_unknown()
    }

    /// No unknown anywhere inside.
    pub fn is_wholly_known(&self) -> bool {
        match self {
            Value::Unknown => false,
            Value::List(items) => items.iter().all(Value::is_wholly_known),
            Value::Map(entries) => entries.values().all(Value::is_wholly_known),
            _ => true,
        }
    }

    /// An attribute of an object (or an entry of a map); null when absent or when `self` is not a map.
    pub fn get(&self, key: &str) -> &Value {
        match self {
            Value::Map(entries) => entries.get(key).unwrap_or(&NULL),
            _ => &NULL,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<Number> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::int(i)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_json_round_trips_nested_types() {
        let ty = Type::object([
            ("name", Type::String),
            ("tags", Type::map(Type::String)),
            ("nodes", Type::list(Type::object([("ip", Type::String), ("card", Type::Number)]))),
            ("zones", Type::set(Type::String)),
            ("pair", Type::Tuple(vec![Type::Bool, Type::Dynamic])),
        ]);
        let json = ty.to_json();
        assert_eq!(Type::from_json(&json).unwrap(), ty);
        assert_eq!(Type::list(Type::String).to_json().to_string(), r#"["list","string"]"#);
    }

    #[test]
    fn type_from_json_rejects_garbage_and_deep_nesting() {
        assert!(Type::from_json(&serde_json::json!("strnig")).is_err());
        assert!(Type::from_json(&serde_json::json!(["list"])).is_err());
        let mut deep = serde_json::json!("string");
        for _ in 0..100 {
            deep = serde_json::json!(["list", deep]);
        }
        assert!(Type::from_json(&deep).unwrap_err().contains("deeper"));
    }

    #[test]
    fn integers_and_equal_floats_compare_equal() {
        assert_eq!(Number::Int(5), Number::Float(5.0));
        assert_ne!(Number::Int(5), Number::Float(5.5));
        assert_eq!(Number::Float(3.0).as_i64(), Some(3));
        assert_eq!(Number::Float(3.5).as_i64(), None);
    }

    #[test]
    fn get_on_missing_attribute_is_null() {
        let v = Value::object([("a", Value::from("x"))]);
        assert_eq!(v.get("a").as_str(), Some("x"));
        assert!(v.get("b").is_null());
        assert!(Value::from("s").get("a").is_null());
        assert!(!Value::list([Value::Unknown]).is_wholly_known());
    }
}
