//! The provider binary: handshake and serve, nothing else.

use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    hpc_provider::protocol::plugin_main(Arc::new(hpc_provider::provider::HpcProvider))
}
