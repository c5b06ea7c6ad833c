//! Hostile input at every RPC: random bytes, truncated encodings, values of the wrong type, and well-typed
//! values with arbitrary content (unknowns where none are allowed, empty and huge strings, odd numbers) sent
//! to the provider's gRPC service for every resource and data source. The answer is always a response with
//! diagnostics, never a gRPC error and never a panic (a caught panic shows as a "Provider bug" diagnostic,
//! which fails the test). Apply, read and import get only undecodable input here, so no case reaches a
//! cloud. Cases: `HPC_FUZZ_CASES` (default 1000 per property; the documented long run is 100000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hpc_provider::framework::codec::encode_msgpack;
use hpc_provider::framework::{ProviderDefinition, Type, Value};
use hpc_provider::protocol::server::ProviderService;
use hpc_provider::protocol::tfplugin6 as pb;
use hpc_provider::protocol::tfplugin6::provider_server::Provider;
use hpc_provider::provider::HpcProvider;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn cases() -> u32 {
    std::env::var("HPC_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

fn leaf(ty: &Type) -> BoxedStrategy<Value> {
    let absent = prop_oneof![Just(Value::Null), Just(Value::Unknown)];
    match ty {
        Type::Bool => prop_oneof![absent, any::<bool>().prop_map(Value::Bool)].boxed(),
        Type::Number => prop_oneof![
            absent,
            any::<i64>().prop_map(Value::int),
            prop_oneof![Just(0.5f64), Just(-1e300), Just(1e300), Just(f64::MIN_POSITIVE), -1e6f64..1e6].prop_map(Value::float),
        ]
        .boxed(),
        _ => prop_oneof![
            absent,
            "\\PC{0,24}".prop_map(Value::from),
            prop_oneof![
                Just("aws"),
                Just("oci"),
                Just("gcp"),
                Just("azure"),
                Just("us-east-1a"),
                Just("p5.48xlarge"),
                Just("BM.GPU.H100.8"),
                Just("H100"),
                Just("cluster-network"),
                Just("10.0.0.0/16"),
                Just("ocid1.compartment.oc1..x"),
                // Node pools: ids of each cloud's Kubernetes cluster (whole, cut short), an EKS node role, a version, a taint effect.
                Just("projects/p/locations/us-central1/clusters/ml"),
                Just("projects/p/locations//clusters/"),
                Just("ocid1.cluster.oc1.iad."),
                Just("arn:aws:iam::123456789012:role/eks-gpu-nodes"),
                Just("1.33"),
                Just("NoSchedule"),
                // nccl-tests output for hpc_nccl_check: a whole run, and a lone result row.
                Just(include_str!("fixtures/nccl/healthy.txt")),
                Just("  1073741824   268435456  float  sum  -1  5929.8  181.07  359.32  N/A  5979.5  179.57  356.34  0"),
            ]
            .prop_map(Value::from),
            Just(Value::from("x".repeat(70_000))),
        ]
        .boxed(),
    }
}

/// Values shaped like `ty`, with arbitrary content.
fn shaped(ty: &Type, depth: usize) -> BoxedStrategy<Value> {
    let nested = |elem: &Type| if depth > 4 { Just(Value::Null).boxed() } else { shaped(elem, depth + 1) };
    match ty {
        Type::List(elem) | Type::Set(elem) => {
            let e = nested(elem);
            prop_oneof![Just(Value::Null), Just(Value::Unknown), proptest::collection::vec(e, 0..6).prop_map(Value::list)].boxed()
        }
        Type::Map(elem) => {
            let e = nested(elem);
            prop_oneof![Just(Value::Unknown), proptest::collection::btree_map("\\PC{0,8}", e, 0..4).prop_map(Value::Map)].boxed()
        }
        Type::Object(attrs) => {
            let fields: Vec<BoxedStrategy<(String, Value)>> =
                attrs.iter().map(|(name, t)| (Just(name.clone()), nested(t)).boxed()).collect();
            prop_oneof![1 => Just(Value::Null), 1 => Just(Value::Unknown), 8 => fields.prop_map(|f| Value::Map(f.into_iter().collect()))]
                .boxed()
        }
        Type::Tuple(items) => {
            let items: Vec<BoxedStrategy<Value>> = items.iter().map(nested).collect();
            items.prop_map(Value::list).boxed()
        }
        other => leaf(other),
    }
}

fn dynamic(bytes: Vec<u8>) -> Option<pb::DynamicValue> {
    Some(pb::DynamicValue { msgpack: bytes, json: Vec::new() })
}

/// An input for one RPC field: random bytes, a truncated encoding, or a whole encoding (of this type or of
/// a value shaped for a different type).
fn wire(ty: &Type) -> BoxedStrategy<Vec<u8>> {
    let ty2 = ty.clone();
    let encoded = shaped(ty, 0).prop_filter_map("encodable", move |v| encode_msgpack(&v, &ty2).ok());
    prop_oneof![
        2 => proptest::collection::vec(any::<u8>(), 0..256),
        3 => (encoded.clone(), any::<prop::sample::Index>()).prop_map(|(b, cut)| b[..cut.index(b.len() + 1)].to_vec()),
        5 => encoded,
        1 => shaped(&Type::object([("name", Type::Number), ("tags", Type::list(Type::Bool))]), 0)
            .prop_filter_map("encodable", |v| encode_msgpack(&v, &Type::object([("name", Type::Number), ("tags", Type::list(Type::Bool))])).ok()),
    ]
    .boxed()
}

fn no_bug(what: &str, diags: &[pb::Diagnostic]) -> Result<(), TestCaseError> {
    match diags.iter().find(|d| d.summary.starts_with("Provider bug")) {
        Some(d) => Err(TestCaseError::fail(format!("{what}: {}: {}", d.summary, d.detail))),
        None => Ok(()),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn validate_and_plan_answer_any_input_with_diagnostics() {
    let service = ProviderService::new(Arc::new(HpcProvider));
    let rt = runtime();
    for resource in HpcProvider.resources() {
        let name = resource.type_name().to_owned();
        let ty = resource.schema().value_type();
        let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
        let strategy = (wire(&ty), wire(&ty), wire(&ty));
        let planned = std::cell::Cell::new(0u32);
        runner
            .run(&strategy, |(prior, proposed, config)| {
                rt.block_on(async {
                    let r = service
                        .validate_resource_config(tonic::Request::new(pb::validate_resource_config::Request {
                            type_name: name.clone(),
                            config: dynamic(config.clone()),
                            ..Default::default()
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ValidateResourceConfig {name}: gRPC error {s}")))?;
                    no_bug("ValidateResourceConfig", &r.get_ref().diagnostics)?;
                    let r = service
                        .plan_resource_change(tonic::Request::new(pb::plan_resource_change::Request {
                            type_name: name.clone(),
                            prior_state: dynamic(prior),
                            proposed_new_state: dynamic(proposed),
                            config: dynamic(config),
                            ..Default::default()
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("PlanResourceChange {name}: gRPC error {s}")))?;
                    // Planned, or refused by the planner's own rules (not by the decoder): the input reached the planner.
                    let diags = &r.get_ref().diagnostics;
                    let refused_by_the_planner = !diags.is_empty() && diags.iter().all(|d| d.summary != "Invalid value from the CLI");
                    if r.get_ref().planned_state.is_some() || refused_by_the_planner {
                        planned.set(planned.get() + 1);
                    }
                    no_bug("PlanResourceChange", &r.get_ref().diagnostics)
                })
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // The inputs reach the planner, not only the decoder.
        assert!(planned.get() > cases() / 20, "{name}: only {} of {} plans reached the planner", planned.get(), cases());
    }
}

#[test]
fn apply_read_import_and_upgrade_refuse_undecodable_input_with_diagnostics() {
    let service = ProviderService::new(Arc::new(HpcProvider));
    let rt = runtime();
    for resource in HpcProvider.resources() {
        let name = resource.type_name().to_owned();
        let mut runner = TestRunner::new(Config { cases: cases() / 4, failure_persistence: None, ..Config::default() });
        // Bytes that cannot decode as an object: random bytes starting with a non-map marker, or cut maps.
        let junk = proptest::collection::vec(any::<u8>(), 1..128).prop_map(|mut b| {
            if matches!(b[0], 0x80..=0x8f | 0xde | 0xdf | 0xc0) {
                b[0] = 0xc1;
            }
            b
        });
        runner
            .run(&(junk.clone(), junk, "\\PC{0,64}"), |(a, b, id)| {
                rt.block_on(async {
                    let r = service
                        .apply_resource_change(tonic::Request::new(pb::apply_resource_change::Request {
                            type_name: name.clone(),
                            prior_state: dynamic(a.clone()),
                            planned_state: dynamic(b.clone()),
                            config: dynamic(b.clone()),
                            ..Default::default()
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ApplyResourceChange: gRPC error {s}")))?;
                    prop_assert!(!r.get_ref().diagnostics.is_empty(), "undecodable apply input passed silently");
                    no_bug("ApplyResourceChange", &r.get_ref().diagnostics)?;
                    let r = service
                        .read_resource(tonic::Request::new(pb::read_resource::Request {
                            type_name: name.clone(),
                            current_state: dynamic(a),
                            ..Default::default()
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ReadResource: gRPC error {s}")))?;
                    no_bug("ReadResource", &r.get_ref().diagnostics)?;
                    let r = service
                        .upgrade_resource_state(tonic::Request::new(pb::upgrade_resource_state::Request {
                            type_name: name.clone(),
                            version: 0,
                            raw_state: Some(pb::RawState { json: b, flatmap: Default::default() }),
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("UpgradeResourceState: gRPC error {s}")))?;
                    no_bug("UpgradeResourceState", &r.get_ref().diagnostics)?;
                    // An id that is not ours is refused before any cloud is called.
                    let id = format!("nope/{id}");
                    let r = service
                        .import_resource_state(tonic::Request::new(pb::import_resource_state::Request {
                            type_name: name.clone(),
                            id,
                            ..Default::default()
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ImportResourceState: gRPC error {s}")))?;
                    prop_assert!(!r.get_ref().diagnostics.is_empty());
                    no_bug("ImportResourceState", &r.get_ref().diagnostics)
                })
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn provider_config_and_data_sources_answer_any_input_with_diagnostics() {
    let service = ProviderService::new(Arc::new(HpcProvider));
    let rt = runtime();
    let provider_ty = HpcProvider.schema().value_type();
    let data_sources = HpcProvider.data_sources();
    assert!(data_sources.len() >= 2, "the catalog and the NCCL check");
    for ds in data_sources {
        let name = ds.type_name().to_owned();
        let ds_ty = ds.schema().value_type();
        let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
        runner
            .run(&(wire(&provider_ty), wire(&ds_ty)), |(config, query)| {
                rt.block_on(async {
                    let r = service
                        .validate_provider_config(tonic::Request::new(pb::validate_provider_config::Request { config: dynamic(config) }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ValidateProviderConfig: gRPC error {s}")))?;
                    no_bug("ValidateProviderConfig", &r.get_ref().diagnostics)?;
                    let r = service
                        .validate_data_resource_config(tonic::Request::new(pb::validate_data_resource_config::Request {
                            type_name: name.clone(),
                            config: dynamic(query.clone()),
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ValidateDataResourceConfig {name}: gRPC error {s}")))?;
                    no_bug("ValidateDataResourceConfig", &r.get_ref().diagnostics)?;
                    let r = service
                        .read_data_source(tonic::Request::new(pb::read_data_source::Request {
                            type_name: name.clone(),
                            config: dynamic(query),
                            ..Default::default()
                        }))
                        .await
                        .map_err(|s| TestCaseError::fail(format!("ReadDataSource {name}: gRPC error {s}")))?;
                    no_bug("ReadDataSource", &r.get_ref().diagnostics)
                })
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// A msgpack array claiming four billion elements, and nesting ten thousand deep: refused at once, with
/// a diagnostic, without allocating for what the header claims.
#[test]
fn huge_and_deep_encodings_are_refused_without_allocating() {
    let service = ProviderService::new(Arc::new(HpcProvider));
    let rt = runtime();
    let huge = vec![0x81, 0xa4, b'n', b'a', b'm', b'e', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01];
    let deep = std::iter::repeat_n(0x91u8, 10_000).chain([0xc0]).collect::<Vec<u8>>();
    for bytes in [huge, deep] {
        let started = Instant::now();
        let r = rt
            .block_on(service.plan_resource_change(tonic::Request::new(pb::plan_resource_change::Request {
                type_name: "hpc_gpu_cluster".into(),
                config: dynamic(bytes.clone()),
                proposed_new_state: dynamic(bytes),
                ..Default::default()
            })))
            .unwrap();
        assert!(r.get_ref().diagnostics.iter().any(|d| d.summary == "Invalid value from the CLI"), "{:?}", r.get_ref().diagnostics);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}

/// A GPU node pool's plan (issue 37: planned and tested, not yet one of the provider's resources, so not
/// reachable over gRPC) answers any configuration with diagnostics, never a panic: each cloud's pool of 4
/// H100-class nodes with one attribute replaced by an arbitrary value of its type (a string from the list
/// above, ids of every cloud's form, numbers out of range, unknowns).
#[test]
fn node_pool_plans_answer_any_input_without_panicking() {
    use hpc_provider::framework::codec::decode_json;
    use hpc_provider::framework::{Context, Diagnostics, PlanRequest};
    use hpc_provider::resources::node_pool;
    let schema = node_pool::schema();
    let ty = schema.value_type();
    let fabric = |cloud: &str, region: &str, zone: &str, it: &str| serde_json::json!({"name": "train", "cloud": cloud, "region": region, "zone": zone, "instance_type": it, "placement": "cluster", "id": "f"});
    let pools = [
        serde_json::json!({"name": "gpu", "fabric": fabric("aws", "us-east-1", "us-east-1a", "p5.48xlarge"), "kubernetes_cluster": "ml",
            "node_role": "arn:aws:iam::123456789012:role/n", "node_count": 4, "taint": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}),
        serde_json::json!({"name": "gpu", "fabric": fabric("gcp", "us-central1", "us-central1-b", "a3-ultragpu-8g"),
            "kubernetes_cluster": "projects/p/locations/us-central1/clusters/ml", "node_count": 4, "autoscaling": {"min_count": 0, "max_count": 8}}),
        serde_json::json!({"name": "gpu", "fabric": fabric("azure", "eastus", "1", "Standard_ND96isr_H100_v5"), "node_count": 4,
            "kubernetes_cluster": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/ml"}),
        serde_json::json!({"name": "gpu", "fabric": fabric("oci", "us-ashburn-1", "AD-1", "BM.GPU.H100.8"), "node_count": 4,
            "kubernetes_cluster": "ocid1.cluster.oc1.iad.x", "image": "ocid1.image.oc1.iad.x", "labels": {"example.com/team": "llm"}}),
    ];
    let bases: Vec<Value> = pools.iter().map(|p| decode_json(p.to_string().as_bytes(), &ty).unwrap()).collect();
    let Type::Object(attrs) = &ty else { panic!("a resource's type is an object") };
    let attrs: Vec<(String, Type)> = attrs.iter().map(|(n, t)| (n.clone(), t.clone())).collect();
    let ctx = Context::new(tokio_util::sync::CancellationToken::new(), None);
    let changed = (0..bases.len(), 0..attrs.len()).prop_flat_map(|(base, attr)| (Just(base), Just(attr), shaped(&attrs[attr].1, 0)));
    let planned = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() });
    runner
        .run(&changed, |(base, attr, value)| {
            let Value::Map(mut config) = bases[base].clone() else { unreachable!("decoded as an object") };
            config.insert(attrs[attr].0.clone(), value);
            let config = Value::Map(config);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut diags = Diagnostics::new();
                let req = PlanRequest { prior: &Value::Null, proposed: &config, config: &config, prior_private: &[] };
                (node_pool::plan(&ctx, req, &mut diags).planned, diags.has_errors())
            }));
            match outcome {
                Ok((state, errors)) => {
                    if !errors && !state.is_null() {
                        planned.set(planned.get() + 1);
                    }
                    Ok(())
                }
                Err(_) => Err(TestCaseError::fail(format!("planning panicked with {} = {:?}", attrs[attr].0, config.get(&attrs[attr].0)))),
            }
        })
        .unwrap_or_else(|e| panic!("hpc_gpu_node_pool: {e}"));
    // Many cases still plan: the replaced attribute was optional, or its value valid.
    assert!(planned.get() > cases() / 10, "only {} of {} cases planned", planned.get(), cases());
}
