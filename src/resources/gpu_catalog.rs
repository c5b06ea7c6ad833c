//! `data "hpc_gpu_catalog"`: which instance types of a cloud carry a GPU model, with the figures the
//! planner uses and the source of each. Works without any cloud credentials or network.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::catalog::{self, Cloud, Sku};
use crate::framework::{Attribute, AttributePath, Block, Context, DataSource, Diagnostics, Schema, Type, Value};
use crate::planner::spec;

pub struct GpuCatalog;

pub fn instance_type_object() -> Type {
    Type::object([
        ("name", Type::String),
        ("gpu_model", Type::String),
        ("gpu_count", Type::Number),
        ("gpu_memory_gb", Type::Number),
        ("rdma_fabric", Type::String),
        ("rdma_interfaces", Type::Number),
        ("network_bandwidth_gbps", Type::Number),
        ("local_nvme_gb", Type::Number),
        ("nvlink_domain_nodes", Type::Number),
        ("nvlink_domain_gpus", Type::Number),
        ("sources", Type::map(Type::String)),
    ])
}

/// The figures of a SKU that carry a source, in attribute order.
const SOURCED_FIELDS: [&str; 6] =
    ["gpu_count", "gpu_memory_gb", "rdma_fabric", "rdma_interfaces", "network_bandwidth_gbps", "local_nvme_gb"];

pub fn sku_value(sku: &Sku) -> Value {
    let num = |n: Option<u32>| n.map_or(Value::Null, |n| Value::int(i64::from(n)));
    let sources: BTreeMap<String, Value> = SOURCED_FIELDS
        .iter()
        .filter_map(|f| sku.source_of(f).map(|s| (f.to_string(), Value::from(format!("{} ({})", s.text, s.confidence.label())))))
        .collect::<BTreeMap<String, Value>>()
        .into_iter()
        .chain(sku.nvlink_domain.map(|d| ("nvlink_domain".to_owned(), Value::from(format!("{} ({})", d.source, d.confidence.label())))))
        .collect();
    Value::object([
        ("name", Value::from(sku.name)),
        ("gpu_model", Value::from(sku.gpu_model)),
        ("gpu_count", Value::int(i64::from(sku.gpu_count))),
        ("gpu_memory_gb", num(sku.gpu_memory_gb)),
        ("rdma_fabric", Value::from(sku.fabric.as_str())),
        ("rdma_interfaces", num(sku.rdma_interfaces)),
        ("network_bandwidth_gbps", num(sku.network_bandwidth_gbps)),
        ("local_nvme_gb", num(sku.local_nvme_gb)),
        // Rack-scale node types: nodes and GPUs on one NVLink domain; otherwise the node itself (1 node).
        ("nvlink_domain_nodes", Value::int(i64::from(sku.nvlink_domain.map_or(1, |d| d.nodes)))),
        ("nvlink_domain_gpus", Value::int(i64::from(sku.nvlink_domain_gpus()))),
        ("sources", Value::Map(sources)),
    ])
}

/// The validated query; `None` when a value is still unknown or a diagnostic was added.
struct Query {
    cloud: Cloud,
    gpu: Option<&'static str>,
    instance_type: Option<&'static Sku>,
}

fn query(config: &Value, diags: &mut Diagnostics) -> Option<Query> {
    let cloud = spec::check_cloud(config.get("cloud").as_str()?, AttributePath::attr("cloud"), diags)?;
    let (gpu, it) = (config.get("gpu"), config.get("instance_type"));
    if gpu.is_unknown() || it.is_unknown() {
        return None;
    }
    let model = match gpu.as_str() {
        Some(wanted) => Some(spec::check_gpu(cloud, wanted, diags)?),
        None => None,
    };
    let instance_type = match it.as_str() {
        Some(name) => Some(spec::check_instance_type(cloud, name, model, diags)?),
        None => None,
    };
    Some(Query { cloud, gpu: model, instance_type })
}

#[async_trait]
impl DataSource for GpuCatalog {
    fn type_name(&self) -> &'static str {
        "hpc_gpu_catalog"
    }

    fn schema(&self) -> Schema {
        Schema::new(
            0,
            Block::new(
                "GPU instance types a cloud offers, with GPU count and memory, RDMA fabric and bandwidth, and the source of each figure.",
            )
            .attribute(Attribute::required("cloud", Type::String, "Cloud to look in: `aws`, `azure`, `gcp` or `oci`."))
            .attribute(Attribute::optional("gpu", Type::String, "GPU model to filter by, e.g. `H100` (any case)."))
            .attribute(Attribute::optional(
                "instance_type",
                Type::String,
                "A single instance type (shape, machine type, VM size) to look up.",
            ))
            .attribute(Attribute::computed("gpu_models", Type::list(Type::String), "GPU models the catalog has for this cloud."))
            .attribute(Attribute::computed(
                "instance_types",
                Type::list(instance_type_object()),
                "Matching instance types. Figures not known are null; `sources` names the source and confidence of each figure.",
            )),
        )
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        query(config, diags);
    }

    async fn read(&self, _ctx: &Context, config: &Value, diags: &mut Diagnostics) -> Value {
        let Some(q) = query(config, diags) else { return Value::Null };
        let matching = catalog::skus(q.cloud)
            .filter(|s| q.gpu.is_none_or(|g| s.gpu_model == g))
            .filter(|s| q.instance_type.is_none_or(|it| it.name == s.name))
            .map(sku_value);
        let mut state = config.as_map().cloned().unwrap_or_default();
        state.insert("gpu_models".into(), Value::list(catalog::gpu_models(q.cloud).into_iter().map(Value::from)));
        state.insert("instance_types".into(), Value::list(matching));
        Value::Map(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    fn config(cloud: &str, gpu: Option<&str>, instance_type: Option<&str>) -> Value {
        Value::object([("cloud", Value::from(cloud)), ("gpu", Value::from(gpu)), ("instance_type", Value::from(instance_type))])
    }

    async fn read(c: &Value) -> (Value, Diagnostics) {
        let mut d = Diagnostics::new();
        let v = GpuCatalog.read(&Context::new(CancellationToken::new(), None), c, &mut d).await;
        (v, d)
    }

    #[tokio::test]
    async fn h100_on_aws_is_p5_with_its_figures_and_sources() {
        let (v, d) = read(&config("aws", Some("h100"), None)).await;
        assert!(d.is_empty(), "{d:?}");
        let types = v.get("instance_types").as_list().unwrap();
        assert_eq!(types.len(), 1);
        let p5 = &types[0];
        assert_eq!(p5.get("name").as_str(), Some("p5.48xlarge"));
        assert_eq!(p5.get("gpu_count"), &Value::int(8));
        assert_eq!(p5.get("gpu_memory_gb"), &Value::int(80));
        assert_eq!(p5.get("rdma_interfaces"), &Value::int(32));
        assert_eq!(p5.get("network_bandwidth_gbps"), &Value::int(3200));
        assert!(p5.get("sources").get("rdma_interfaces").as_str().unwrap().contains("(confirmed)"));
        // The encoded state must fit the schema exactly.
        crate::framework::codec::encode_msgpack(&v, &GpuCatalog.schema().value_type()).unwrap();
    }

    #[tokio::test]
    async fn unknown_gpu_lists_the_models_of_that_cloud_and_where_it_exists() {
        let (_, d) = read(&config("gcp", Some("MI300X"), None)).await;
        let e = &d.0[0];
        assert_eq!(e.summary, "Unsupported GPU model");
        assert_eq!(e.path.as_ref().unwrap().to_string(), "gpu");
        assert!(e.detail.contains(r#""B200", "GB200", "H100", "H200" or "L4""#), "{}", e.detail);
        assert!(e.detail.contains(r#"MI300X is offered on "azure" or "oci""#), "{}", e.detail);
    }

    #[tokio::test]
    async fn unknown_cloud_lists_valid_clouds() {
        let (_, d) = read(&config("ibm", None, None)).await;
        assert_eq!(d.0[0].path.as_ref().unwrap().to_string(), "cloud");
        assert!(d.0[0].detail.contains(r#""aws", "azure", "gcp" or "oci""#));
    }

    #[tokio::test]
    async fn instance_type_must_exist_and_agree_with_gpu() {
        let (_, d) = read(&config("azure", None, Some("Standard_ND96asr_v4"))).await;
        assert_eq!(d.0[0].summary, "Unsupported instance type");
        assert!(d.0[0].detail.contains("Standard_ND96isr_H100_v5"));
        let (_, d) = read(&config("oci", Some("H200"), Some("BM.GPU.H100.8"))).await;
        assert_eq!(d.0[0].summary, "Instance type does not match GPU");
        let (v, d) = read(&config("oci", None, Some("BM.GPU.H100.8"))).await;
        assert!(d.is_empty());
        assert_eq!(v.get("instance_types").as_list().unwrap()[0].get("rdma_interfaces"), &Value::int(16));
    }

    #[test]
    fn unknown_values_pass_validation() {
        let mut d = Diagnostics::new();
        GpuCatalog.validate(&Value::object([("cloud", Value::Unknown)]), &mut d);
        GpuCatalog.validate(&Value::object([("cloud", Value::from("aws")), ("gpu", Value::Unknown)]), &mut d);
        assert!(d.is_empty());
    }
}
