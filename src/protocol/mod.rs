//! The plugin protocol edge: the only module that sees tonic and prost. It owns the handshake, mutual
//! TLS, the gRPC services, and translation between protocol messages and the framework's types.

pub mod convert;
pub mod logging;
pub mod server;
pub mod transport;

#[allow(clippy::all, missing_docs)]
pub mod tfplugin6 {
    tonic::include_proto!("tfplugin6");
}

#[allow(clippy::all, missing_docs)]
pub mod go_plugin {
    tonic::include_proto!("plugin");
}

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::framework::ProviderDefinition;

/// The whole life of the plugin process: check the environment, serve, print the handshake line, and
/// exit when the CLI asks. Returns exit code 1 with a readable message when run by hand.
pub fn plugin_main(definition: Arc<dyn ProviderDefinition>) -> ExitCode {
    let env = match transport::plugin_env(|k| std::env::var(k).ok()) {
        Ok(env) => env,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(1);
        }
    };
    logging::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let service = server::ProviderService::new(definition);
        let running = match transport::start(service, &env).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("terraform-provider-hpc could not start: {e}");
                return ExitCode::from(1);
            }
        };
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let line = transport::handshake_line(running.addr, &running.cert_der);
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return ExitCode::from(1);
            }
        }
        tracing::info!(address = %running.addr, "serving plugin protocol 6 over mutual TLS");
        // Ctrl-C reaches the whole process group; the CLI handles it and sends StopProvider, so the
        // provider must not die mid-apply (that would lose track of what it was creating).
        tokio::spawn(async {
            while tokio::signal::ctrl_c().await.is_ok() {
                tracing::info!("interrupt received; waiting for the CLI's StopProvider");
            }
        });
        let shutdown = running.shutdown.clone();
        tokio::select! {
            result = running.task => {
                if let Ok(Err(e)) = result {
                    tracing::error!(error = %e, "server stopped");
                    return ExitCode::from(1);
                }
            }
            // Graceful shutdown waits for streams the CLI may keep open; the CLI kills the process
            // after 2 s, so finish well before that.
            () = async { shutdown.cancelled().await; tokio::time::sleep(Duration::from_millis(500)).await } => {}
        }
        ExitCode::SUCCESS
    })
}
