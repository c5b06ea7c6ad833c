//! The provider's data sources and resources, one file each, and its functions.

pub mod capacity;
pub mod common;
pub mod day2;
pub mod functions;
pub mod gpu_catalog;
pub mod gpu_cluster;
pub mod gpu_fabric;
pub mod gpu_selfcheck;
pub mod lifecycle;
pub mod nccl_check;
pub mod node_pool;
pub mod parallel_filesystem;
pub mod slurm_cluster;
