//! Provider-defined functions: what users compute by hand and get wrong, pure and usable anywhere an
//! expression is (`locals`, `variable` validation, module inputs), with no cloud access. Each answers from
//! the same catalog and rules the planner checks, so a value a function gives is one the plan accepts.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::{self, Cloud, Sku, limits};
use crate::framework::{Diagnostics, Function, FunctionError, Parameter, Signature, Type, Value, one_of};
use crate::planner::nccl;
use crate::planner::spec;

use super::gpu_catalog;

/// Every function the provider offers.
pub fn all() -> Vec<Arc<dyn Function>> {
    vec![Arc::new(LustreCapacity), Arc::new(NodeType), Arc::new(NcclVerdict)]
}

fn cloud_arg(index: usize, v: &Value) -> Result<Cloud, FunctionError> {
    let name = v.as_str().unwrap_or_default();
    Cloud::parse(name).ok_or_else(|| {
        FunctionError::argument(
            index,
            format!("{name:?} is not a cloud this provider supports; valid values are {}.", one_of(&Cloud::NAMES)),
        )
    })
}

/// The first error detail the planner's own check reported, as a function error at `index`.
fn planner_error(index: usize, diags: &Diagnostics) -> FunctionError {
    let text = diags.iter().next().map(|d| d.detail.clone()).unwrap_or_else(|| "The value is not valid.".into());
    FunctionError::argument(index, text)
}

/// A positive number from `v`, or an error at `index` naming what it is.
fn positive(index: usize, v: &Value, what: &str) -> Result<f64, FunctionError> {
    match v.as_number().map(|n| n.as_f64()) {
        Some(x) if x > 0.0 && x.is_finite() => Ok(x),
        Some(x) => Err(FunctionError::argument(index, format!("{what} must be a positive number, not {x}."))),
        None => Err(FunctionError::argument(index, format!("{what} must be a number."))),
    }
}

// ------------------------------------------------------------------------------------ lustre_capacity

pub struct LustreCapacity;

impl LustreCapacity {
    /// The smallest capacity (GiB) the cloud's managed Lustre takes at `tier` that is at least `gib`.
    pub fn at_least(cloud: Cloud, tier: u32, gib: u64) -> Result<u64, String> {
        let err = match limits::check_lustre_capacity(cloud, tier, gib) {
            Ok(_) => return Ok(gib),
            Err(e) => e,
        };
        // The rule's nearest valid sizes bracket the request; the smallest one at or above it is the answer.
        err.nearest.iter().copied().filter(|&n| n >= gib && limits::check_lustre_capacity(cloud, tier, n).is_ok()).min().ok_or_else(|| {
            let largest = err.nearest.iter().max().copied().unwrap_or(0);
            format!("{gib} GiB is more than this tier takes: {}. The largest is {largest} GiB.", err.rule)
        })
    }
}

impl Function for LustreCapacity {
    fn name(&self) -> &'static str {
        "lustre_capacity"
    }

    fn signature(&self) -> Signature {
        Signature {
            parameters: vec![
                Parameter::new("cloud", Type::String, "`aws`, `azure`, `gcp` or `oci`."),
                Parameter::new(
                    "throughput_per_tib",
                    Type::Number,
                    "The throughput tier in MB/s per TiB, as `hpc_parallel_filesystem.throughput_per_tib` takes it (Azure: 40, 125, 250 \
                     or 500; elsewhere 125, 250, 500 or 1000).",
                ),
                Parameter::new("at_least_gib", Type::Number, "The capacity needed, in GiB."),
            ],
            returns: Type::Number,
            summary: "The nearest managed-Lustre capacity the cloud accepts at or above a size",
            description: "Returns the smallest capacity, in GiB, that the cloud's managed Lustre (FSx for Lustre PERSISTENT_2, \
                 Azure Managed Lustre, Google Cloud Managed Lustre, OCI File Storage with Lustre) accepts at the throughput tier \
                 and that is at least `at_least_gib`: the value to give `hpc_parallel_filesystem.capacity_gib`. A size the \
                 service takes as it is comes back unchanged.",
        }
    }

    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let cloud = cloud_arg(0, &args[0])?;
        let tiers = limits::lustre_throughput_tiers(cloud);
        let tier = args[1].as_number().and_then(|n| n.as_i64()).and_then(|t| u32::try_from(t).ok()).filter(|t| tiers.contains(t));
        let Some(tier) = tier else {
            let valid: Vec<String> = tiers.iter().map(u32::to_string).collect();
            let given = args[1].as_number().map_or_else(|| "a non-number".to_owned(), |n| n.to_string());
            return Err(FunctionError::argument(
                1,
                format!("{} managed Lustre has no {given} MB/s/TiB tier; valid values are {}.", cloud.display_name(), valid.join(", ")),
            ));
        };
        let wanted = positive(2, &args[2], "at_least_gib")?;
        if wanted > 1e15 {
            return Err(FunctionError::argument(2, format!("{wanted} GiB is beyond any managed Lustre.")));
        }
        let gib = wanted.ceil() as u64;
        let capacity = Self::at_least(cloud, tier, gib).map_err(|e| FunctionError::argument(2, e))?;
        Ok(Value::int(capacity as i64))
    }
}

// ------------------------------------------------------------------------------------------ node_type

pub struct NodeType;

/// A catalog entry (as `hpc_gpu_catalog` lists it) with the NCCL environment and expected bus bandwidth.
fn node_type_result() -> Type {
    let Type::Object(mut attrs) = gpu_catalog::instance_type_object() else { unreachable!("an object type") };
    attrs.insert("nccl_env".into(), Type::map(Type::String));
    attrs.insert("expected_busbw_gbs".into(), Type::Number);
    Type::Object(attrs)
}

impl NodeType {
    pub fn value(sku: &Sku) -> Value {
        let env: BTreeMap<String, Value> = crate::planner::node_environment(sku).into_iter().map(|(k, v)| (k, Value::from(v))).collect();
        let mut value = gpu_catalog::sku_value(sku);
        if let Value::Map(m) = &mut value {
            m.insert("nccl_env".into(), Value::Map(env));
            m.insert("expected_busbw_gbs".into(), catalog::expected_busbw(sku).map_or(Value::Null, |b| Value::float(b.gbytes_per_sec)));
        }
        value
    }
}

impl Function for NodeType {
    fn name(&self) -> &'static str {
        "node_type"
    }

    fn signature(&self) -> Signature {
        Signature {
            parameters: vec![
                Parameter::new("cloud", Type::String, "`aws`, `azure`, `gcp` or `oci`."),
                Parameter::new("gpu", Type::String, "A GPU model (`H100`, `H200`, `B200`, `L4`, ...; any case)."),
            ],
            returns: node_type_result(),
            summary: "The node type for a cloud and GPU model, its RDMA interfaces and NCCL environment",
            description: "Returns the instance type (machine type, VM size, shape) `hpc_gpu_fabric` picks for the GPU model on the \
                 cloud (the one with the most inter-node bandwidth) as `hpc_gpu_catalog` lists it (`gpu_count`, `gpu_memory_gb`, \
                 `rdma_fabric`, `rdma_interfaces`: EFA interfaces, InfiniBand HCAs, RoCE NICs or GPU NICs per node, \
                 `network_bandwidth_gbps`, `local_nvme_gb`, `nvlink_domain_nodes` and `nvlink_domain_gpus` (18 and 72 on a GB200/GB300 NVL72 rack, the node itself elsewhere), and the `sources` of the figures), with \
                 `nccl_env` (the NCCL and libfabric settings jobs on such nodes need, as `hpc_gpu_cluster.node_environment` has \
                 them) and `expected_busbw_gbs` (a published all-reduce bus bandwidth, or null). Figures the catalog has no \
                 source for are null.",
        }
    }

    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let cloud = cloud_arg(0, &args[0])?;
        let mut diags = Diagnostics::new();
        let gpu = args[1].as_str().unwrap_or_default();
        let sku = spec::resolve_sku(cloud, Some(gpu), None, &mut diags).ok_or_else(|| planner_error(1, &diags))?;
        Ok(Self::value(sku))
    }
}

// ---------------------------------------------------------------------------------------- nccl_verdict

pub struct NcclVerdict;

impl Function for NcclVerdict {
    fn name(&self) -> &'static str {
        "nccl_verdict"
    }

    fn signature(&self) -> Signature {
        Signature {
            parameters: vec![
                Parameter::new(
                    "nccl_tests_output",
                    Type::String,
                    "The text an nccl-tests all_reduce_perf run printed, e.g. `file(\"allreduce.log\")`.",
                ),
                Parameter::new(
                    "expected_busbw_gbs",
                    Type::Number,
                    "The bus bandwidth the node type should reach, in GB/s (e.g. `hpc_gpu_cluster.<name>.expected_busbw_gbs`).",
                ),
            ],
            returns: Type::object([
                ("verdict", Type::String),
                ("healthy", Type::Bool),
                ("busbw_gbs", Type::Number),
                ("ratio", Type::Number),
                ("shortfall_percent", Type::Number),
                ("wrong", Type::Number),
                ("message", Type::String),
            ]),
            summary: "The verdict of an nccl-tests log against an expected bus bandwidth",
            description: "Judges an nccl-tests all-reduce run as `data \"hpc_nccl_check\"` does: `verdict` is `healthy` at 80% \
                 or more of the expected bus bandwidth, `placement-or-driver` from 50% to 80%, `fabric` below 50%; `healthy` is \
                 also false when nccl-tests found any element wrong. `busbw_gbs` is the better of out-of-place and in-place at \
                 the largest message size; `ratio` is it divided by the expected figure (three decimals); `message` says what \
                 to check.",
        }
    }

    fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
        let text = args[0].as_str().unwrap_or_default();
        let run = nccl::parse_nccl_tests(text).map_err(|e| FunctionError::argument(0, format!("Not an nccl-tests log: {e}.")))?;
        let expected = positive(1, &args[1], "expected_busbw_gbs")?;
        let wrong = run.wrong_elements();
        let a = nccl::assess(run.busbw_gbs, expected, wrong, None);
        Ok(Value::object([
            ("verdict", Value::from(a.verdict.as_str())),
            ("healthy", Value::from(a.healthy)),
            ("busbw_gbs", Value::float(run.busbw_gbs)),
            ("ratio", Value::float(a.ratio)),
            ("shortfall_percent", Value::float(a.shortfall_percent)),
            ("wrong", Value::int(i64::try_from(wrong).unwrap_or(i64::MAX))),
            ("message", Value::from(a.message)),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: &dyn Function, args: Vec<Value>) -> Result<Value, FunctionError> {
        f.call(&args)
    }

    #[test]
    fn lustre_capacity_rounds_up_to_what_each_service_takes() {
        let cases = [
            ("gcp", 500, 30_000, 36_000),
            ("gcp", 500, 36_000, 36_000),
            ("gcp", 1000, 1, 9_000),
            ("gcp", 125, 3_000_000, 3_024_000),
            ("aws", 125, 1000, 1200),
            ("aws", 250, 1201, 2400),
            ("aws", 1000, 5000, 7200),
            ("azure", 500, 5000, 8192),
            ("azure", 40, 10, 49_152),
            ("oci", 125, 40_000, 41_600),
            ("oci", 125, 130_000, 166_400),
        ];
        for (cloud, tier, at_least, want) in cases {
            let got = call(&LustreCapacity, vec![Value::from(cloud), Value::int(tier), Value::int(at_least)]);
            assert_eq!(got, Ok(Value::int(want)), "{cloud} {tier} {at_least}");
            // The answer is a size the planner accepts.
            assert!(limits::check_lustre_capacity(Cloud::parse(cloud).unwrap(), tier as u32, want as u64).is_ok());
        }
        // A fraction of a GiB rounds up first.
        assert_eq!(call(&LustreCapacity, vec![Value::from("aws"), Value::int(125), Value::float(1200.5)]), Ok(Value::int(2400)));
    }

    #[test]
    fn lustre_capacity_names_the_argument_at_fault() {
        let err = call(&LustreCapacity, vec![Value::from("gpc"), Value::int(500), Value::int(1)]).unwrap_err();
        assert_eq!(err.argument, Some(0));
        assert!(err.text.contains("\"gpc\"") && err.text.contains("\"aws\", \"azure\", \"gcp\" or \"oci\""), "{}", err.text);
        let err = call(&LustreCapacity, vec![Value::from("azure"), Value::int(1000), Value::int(1)]).unwrap_err();
        assert_eq!(err.argument, Some(1));
        assert!(err.text.contains("no 1000 MB/s/TiB tier") && err.text.contains("40, 125, 250, 500"), "{}", err.text);
        let err = call(&LustreCapacity, vec![Value::from("aws"), Value::int(125), Value::int(-5)]).unwrap_err();
        assert_eq!(err.argument, Some(2));
        let err = call(&LustreCapacity, vec![Value::from("gcp"), Value::int(1000), Value::int(20_000_000)]).unwrap_err();
        assert_eq!(err.argument, Some(2));
        assert!(err.text.contains("The largest is 10008000 GiB"), "{}", err.text);
    }

    #[test]
    fn node_type_is_the_fabrics_pick_with_its_interfaces_and_environment() {
        let p5 = call(&NodeType, vec![Value::from("aws"), Value::from("h100")]).unwrap();
        assert_eq!(p5.get("name").as_str(), Some("p5.48xlarge"));
        assert_eq!(p5.get("rdma_interfaces"), &Value::int(32));
        assert_eq!(p5.get("rdma_fabric").as_str(), Some("efa"));
        assert_eq!(p5.get("nccl_env").get("FI_PROVIDER").as_str(), Some("efa"));
        let nd = call(&NodeType, vec![Value::from("azure"), Value::from("H100")]).unwrap();
        assert_eq!(nd.get("name").as_str(), Some("Standard_ND96isr_H100_v5"));
        assert_eq!(nd.get("expected_busbw_gbs"), &Value::float(460.0));
        assert_eq!(nd.get("nccl_env").get("NCCL_TOPO_FILE").as_str(), Some("/opt/microsoft/ndv5-topo.xml"));
        let err = call(&NodeType, vec![Value::from("oci"), Value::from("H900")]).unwrap_err();
        assert_eq!(err.argument, Some(1));
        assert!(err.text.contains("GPU models on oci:"), "{}", err.text);
    }

    #[test]
    fn nccl_verdict_classifies_the_three_samples() {
        let samples = [
            (include_str!("../../tests/fixtures/nccl/healthy.txt"), "healthy", true),
            (include_str!("../../tests/fixtures/nccl/thirty_under.txt"), "placement-or-driver", false),
            (include_str!("../../tests/fixtures/nccl/sixty_under.txt"), "fabric", false),
        ];
        for (text, verdict, healthy) in samples {
            let v = call(&NcclVerdict, vec![Value::from(text), Value::int(365)]).unwrap();
            assert_eq!(v.get("verdict").as_str(), Some(verdict));
            assert_eq!(v.get("healthy"), &Value::from(healthy));
        }
        let err = call(&NcclVerdict, vec![Value::from("hello"), Value::int(365)]).unwrap_err();
        assert_eq!(err.argument, Some(0));
        let err = call(&NcclVerdict, vec![Value::from(samples[0].0), Value::int(0)]).unwrap_err();
        assert_eq!(err.argument, Some(1));
    }
}
