//! Generates the gRPC code for the plugin protocol with a vendored `protoc`, so no system package is needed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let include = protoc_bin_vendored::include_path()?;
    // SAFETY: build scripts are single threaded; prost-build reads PROTOC from the environment.
    unsafe {
        std::env::set_var("PROTOC", protoc);
        std::env::set_var("PROTOC_INCLUDE", &include);
    }
    println!("cargo:rerun-if-changed=proto");
    // The client side is generated too: the protocol tests drive the server through a real gRPC client.
    tonic_prost_build::configure().build_server(true).build_client(true).compile_protos(
        &[PathBuf::from("proto/tfplugin6.proto"), PathBuf::from("proto/go_plugin.proto")],
        &[PathBuf::from("proto"), include],
    )?;
    Ok(())
}
