//! Each cloud's emulator with its lifecycle case (`acceptance/cases/<cloud>_cluster`) pointed at it, for
//! cases that run the same way on every cloud.

use std::any::Any;

use hpc_emulators::harness::{admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};

use crate::cli::{Cli, Workdir};

/// One cloud's emulator, the case pointed at it, and how to read the emulator.
pub struct Target {
    pub w: Workdir,
    pub snapshot: Box<dyn Fn() -> String>,
    pub empty: Box<dyn Fn() -> bool>,
    _emulator: Box<dyn Any>,
}

pub fn target(cli: &Cli, cloud: &str) -> Target {
    match cloud {
        "aws" => {
            let emulator = start_aws();
            let ep = emulator.endpoint.clone();
            let (a, b) = (ep.clone(), ep.clone());
            Target {
                w: Workdir::new(cli, "aws_cluster").env("TF_VAR_endpoint", &ep),
                // The emulator's snapshot leaves launch templates' data out; EC2's own answer has it.
                snapshot: Box::new(move || crate::aws::launch_template_user_data(&a)),
                empty: Box::new(move || admin(&b, "GET", "inventory", None)["empty"] == true),
                _emulator: Box::new(emulator),
            }
        }
        "gcp" => {
            let ep = start_gcp();
            let (a, b) = (ep.clone(), ep.clone());
            Target {
                w: Workdir::new(cli, "gcp_cluster").env("TF_VAR_endpoint", &ep),
                snapshot: Box::new(move || admin(&a, "GET", "snapshot", None).to_string()),
                empty: Box::new(move || admin(&b, "GET", "inventory", None)["empty"] == true),
                _emulator: Box::new(()),
            }
        }
        "azure" => {
            let (ep, pem) = start_azure();
            let (a, b, pa, pb) = (ep.clone(), ep.clone(), pem.clone(), pem.clone());
            Target {
                w: Workdir::new(cli, "azure_cluster").env("TF_VAR_endpoint", &ep).env("HPC_AZURE_CA_FILE", &pem.display().to_string()),
                snapshot: Box::new(move || azure_admin(&a, &pa, "GET", "snapshot", None).to_string()),
                empty: Box::new(move || azure_admin(&b, &pb, "GET", "inventory", None)["empty"] == true),
                _emulator: Box::new(()),
            }
        }
        "oci" => {
            let (ep, key) = start_oci();
            let (a, b) = (ep.clone(), ep.clone());
            Target {
                w: Workdir::new(cli, "oci_cluster")
                    .env("TF_VAR_endpoint", &ep)
                    .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
                    .env("TF_VAR_fingerprint", &key.fingerprint),
                snapshot: Box::new(move || admin(&a, "GET", "snapshot", None).to_string()),
                empty: Box::new(move || admin(&b, "GET", "inventory", None)["empty"] == true),
                _emulator: Box::new(key),
            }
        }
        other => panic!("no cloud {other}"),
    }
}
