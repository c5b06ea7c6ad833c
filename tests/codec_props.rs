//! Property tests for the value codec: arbitrary bytes never make the decoders panic, and every value that
//! fits a type survives a msgpack (and, when known, JSON) round trip unchanged.

use hpc_provider::framework::codec::{decode_json, decode_msgpack, encode_json, encode_msgpack};
use hpc_provider::framework::{Type, Value};
use proptest::prelude::*;

fn cluster_like_type() -> Type {
    Type::object([
        ("name", Type::String),
        ("node_count", Type::Number),
        ("enabled", Type::Bool),
        ("tags", Type::map(Type::String)),
        ("zones", Type::set(Type::String)),
        ("nodes", Type::list(Type::object([("ip", Type::String), ("card", Type::Number)]))),
    ])
}

fn leaf_string() -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), Just(Value::Unknown), "\\PC{0,12}".prop_map(Value::String)]
}

fn leaf_number() -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), Just(Value::Unknown), any::<i64>().prop_map(Value::int), (-1e12f64..1e12).prop_map(Value::float)]
}

fn node() -> impl Strategy<Value = Value> {
    (leaf_string(), leaf_number()).prop_map(|(ip, card)| Value::object([("ip", ip), ("card", card)]))
}

fn cluster_like_value() -> impl Strategy<Value = Value> {
    (
        leaf_string(),
        leaf_number(),
        prop_oneof![Just(Value::Null), Just(Value::Unknown), any::<bool>().prop_map(Value::Bool)],
        proptest::collection::btree_map("[a-z:]{1,8}", "\\PC{0,8}".prop_map(Value::String), 0..4).prop_map(Value::Map),
        proptest::collection::vec("[a-z0-9-]{1,12}".prop_map(Value::String), 0..4).prop_map(Value::List),
        proptest::collection::vec(node(), 0..6).prop_map(Value::List),
    )
        .prop_map(|(name, count, enabled, tags, zones, nodes)| {
            Value::object([("name", name), ("node_count", count), ("enabled", enabled), ("tags", tags), ("zones", zones), ("nodes", nodes)])
        })
}

proptest! {
    // HPC_FUZZ_CASES raises the count (the documented long run: 100000, see RELIABILITY.md).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("HPC_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_msgpack(&bytes, &cluster_like_type());
        let _ = decode_msgpack(&bytes, &Type::Dynamic);
        let _ = decode_json(&bytes, &cluster_like_type());
    }

    #[test]
    fn values_round_trip_through_msgpack(value in cluster_like_value()) {
        let ty = cluster_like_type();
        let bytes = encode_msgpack(&value, &ty).unwrap();
        prop_assert_eq!(decode_msgpack(&bytes, &ty).unwrap(), value.clone());
        if value.is_wholly_known() {
            let json = encode_json(&value, &ty).unwrap();
            prop_assert_eq!(decode_json(&json, &ty).unwrap(), value);
        }
    }

    #[test]
    fn truncating_a_valid_encoding_is_an_error_not_a_panic(value in cluster_like_value(), cut in 0usize..64) {
        let ty = cluster_like_type();
        let bytes = encode_msgpack(&value, &ty).unwrap();
        let cut = cut.min(bytes.len().saturating_sub(1));
        prop_assert!(decode_msgpack(&bytes[..cut], &ty).is_err());
    }
}
