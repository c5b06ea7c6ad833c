//! The provider binary: handshake and serve, nothing else (but turning on the journal of creates in
//! flight, which lives in the working directory the CLI runs the provider in).

use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    hpc_provider::ownership::journal::enable();
    hpc_provider::protocol::plugin_main(Arc::new(hpc_provider::provider::HpcProvider))
}
