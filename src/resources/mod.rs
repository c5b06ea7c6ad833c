//! The provider's data sources and resources, one file each.

pub mod gpu_catalog;
