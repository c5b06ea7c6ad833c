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
use crate::resources::parallel_filesystem::ParallelFilesystem;

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
        vec![Arc::new(GpuFabric), Arc::new(GpuCluster), Arc::new(ParallelFilesystem)]
    }

    fn functions(&self) -> Vec<Arc<dyn Function>> {
        functions::all()
    }
}
