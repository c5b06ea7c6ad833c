//! terraform-provider-hpc as a [`ProviderDefinition`]: its configuration block and what it serves.

use std::any::Any;
use std::sync::Arc;

use crate::config::{self, ProviderConfig};
use crate::framework::{DataSource, Diagnostics, Function, ProviderDefinition, Resource, Schema, Value};
use crate::resources::functions;
use crate::resources::gpu_catalog::GpuCatalog;
use crate::resources::gpu_cluster::GpuCluster;
use crate::resources::gpu_fabric::GpuFabric;
use crate::resources::gpu_selfcheck::GpuSelfcheck;
use crate::resources::nccl_check::NcclCheck;
use crate::resources::node_pool::NodePool;
use crate::resources::parallel_filesystem::ParallelFilesystem;
use crate::resources::slurm_cluster::SlurmCluster;

#[derive(Default)]
pub struct HpcProvider;

impl ProviderDefinition for HpcProvider {
    fn schema(&self) -> Schema {
        config::schema()
    }

    fn validate_config(&self, config: &Value, diags: &mut Diagnostics) {
        config::validate(config, diags);
    }

    fn configure(&self, config: &Value, terraform_version: &str, _diags: &mut Diagnostics) -> Option<Arc<dyn Any + Send + Sync>> {
        let configured = ProviderConfig::from_value(config, terraform_version);
        tracing::info!(
            clouds = ?configured.clouds.keys().map(|c| c.as_str()).collect::<Vec<_>>(),
            cli = terraform_version,
            "provider configured"
        );
        Some(Arc::new(configured))
    }

    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        vec![Arc::new(GpuCatalog), Arc::new(NcclCheck), Arc::new(GpuSelfcheck)]
    }

    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        vec![Arc::new(GpuFabric), Arc::new(GpuCluster), Arc::new(ParallelFilesystem), Arc::new(SlurmCluster), Arc::new(NodePool)]
    }

    fn functions(&self) -> Vec<Arc<dyn Function>> {
        functions::all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{day2, gpu_cluster};

    #[test]
    fn every_served_schema_declares_only_plan_modifiers_that_apply() {
        let p = HpcProvider;
        for r in p.resources() {
            let errors = r.schema().block.plan_modifier_errors();
            assert!(errors.is_empty(), "{}: {errors:#?}", r.type_name());
            assert!(r.schema().block.has_plan_modifiers(), "{}: no attribute requires replacement or is assigned", r.type_name());
        }
        // Nothing plans a data source or the provider's configuration, so a modifier there is a mistake.
        for ds in p.data_sources() {
            assert!(!ds.schema().block.has_plan_modifiers(), "{} is never planned", ds.type_name());
        }
        assert!(!p.schema().block.has_plan_modifiers(), "the provider's configuration is never planned");
    }

    #[test]
    fn the_cluster_attributes_still_named_in_lists_exist() {
        let schema = gpu_cluster::schema();
        let own_network: Vec<&str> = crate::planner::spec::OWN_NETWORK.to_vec();
        assert_eq!(schema.block.unknown_attributes(&own_network), Vec::<&str>::new());
        assert_eq!(schema.block.unknown_attributes(&day2::ATTRS), Vec::<&str>::new());
    }
}
