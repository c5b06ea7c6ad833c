//! Cloud API emulators for terraform-provider-hpc's tests and demo. Never linked into the provider.
//!
//! `admin` is the admin API every emulator shares (reset, inventory, out-of-band changes, faults,
//! counters; see ADMIN-API.md). `gcp` emulates the Compute Engine REST subset the provider uses, with
//! `gcp_lustre` Google Managed Lustre, `gke` Google Kubernetes Engine's node pools and `gcp_secrets` Secret
//! Manager on the same port;
//! `oci` the OCI Core subset, with File Storage with Lustre, Limits and Container Engine for Kubernetes
//! (its submodule, `oke.rs`) on the same port, request signatures verified; `azure` Azure Resource Manager
//! over HTTPS, with Key Vault (`azure_keyvault.rs`: the vault resource, and its secrets on a listener per vault). AWS is moto with our extension (`aws/`), started as a child process by `hpc-emulator`.
//! `metadata` serves each instance its cloud's instance metadata service on a listener of its own (the
//! per-cloud parts in `gcp_metadata.rs`, `azure_imds.rs`, `oci_imds.rs`, and AWS's in `aws/imds.py`).
//! `hosts` boots the instances they launch as Linux hosts (systemd, cloud-init) against their metadata
//! services.

pub mod admin;
pub mod azure;
pub mod clock;
pub mod conformance;
pub mod gcp;
pub mod gcp_lustre;
pub mod gcp_secrets;
pub mod gke;
pub mod harness;
pub mod hosts;
pub mod metadata;
pub mod oci;
