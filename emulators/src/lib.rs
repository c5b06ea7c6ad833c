//! Cloud API emulators for terraform-provider-hpc's tests and demo. Never linked into the provider.
//!
//! `admin` is the admin API every emulator shares (reset, inventory, out-of-band changes, faults,
//! counters; see ADMIN-API.md). `gcp` emulates the Compute Engine REST subset the provider uses. AWS is
//! moto with our extension (`aws/`), started as a child process by the `hpc-emulator` binary.

pub mod admin;
pub mod gcp;
pub mod gcp_lustre;
