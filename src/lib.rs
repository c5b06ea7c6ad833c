//! terraform-provider-hpc: one description of a GPU training cluster, planned into the exact vendor pieces
//! for AWS, Azure, Google Cloud or OCI. See ARCHITECTURE.md for the map of this crate.

pub mod catalog;
pub mod clock;
pub mod clouds;
pub mod config;
pub mod framework;
pub mod model;
pub mod nodes;
pub mod ownership;
pub mod planner;
pub mod protocol;
pub mod provider;
pub mod redact;
pub mod resources;

#[cfg(test)]
pub mod fuzz;
