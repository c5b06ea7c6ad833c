//! Secrets stay where the user put them: with the provider's own logs at trace level, an apply on the OCI
//! emulator with user data holding a token writes neither the token nor the API private key to the log,
//! and the private key never reaches the state (the user data does: the user put it in a resource).

use hpc_emulators::harness::{admin, start_oci};

use crate::cli::{Cli, Workdir};

const TOKEN: &str = "s3cr3t-token-7f3a9c";

pub fn secrets_stay_out_of_logs_and_state(cli: &Cli) {
    let (ep, key) = start_oci();
    let log = tempfile::NamedTempFile::new().unwrap();
    let w = Workdir::new(cli, "oci_cluster")
        .env("TF_VAR_endpoint", &ep)
        .env("TF_VAR_key_path", &key.private_key_path.display().to_string())
        .env("TF_VAR_fingerprint", &key.fingerprint)
        .env("TF_VAR_user_data", &format!("#!/bin/sh\nexport HF_TOKEN={TOKEN}\n"))
        .env("TF_VAR_node_count", "1");
    // The case plus user data from a sensitive variable.
    let case = std::fs::read_to_string(w.path().join("main.tf")).unwrap();
    let with_user_data = case
        .replace("  ssh_public_key = \"ssh-ed25519", "  user_data      = var.user_data\n  ssh_public_key = \"ssh-ed25519")
        + "\nvariable \"user_data\" {\n  type      = string\n  sensitive = true\n}\n";
    assert_ne!(case, with_user_data);
    w.write("main.tf", &with_user_data);
    let mut cmd = w.command(&["apply", "-no-color", "-input=false", "-auto-approve"]);
    cmd.env("TF_LOG_PROVIDER", "trace").env("TF_LOG_PATH", log.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(logged.contains("hpc"), "the provider's log is empty; the check would prove nothing");
    let pem_body: String = key.private_key_pem.lines().nth(1).unwrap().to_owned();
    for (what, secret) in [("the user data's token", TOKEN), ("the private key", pem_body.as_str()), ("a PEM header", "PRIVATE KEY")] {
        assert!(!logged.contains(secret), "{what} is in the provider's log");
    }
    let state = std::fs::read_to_string(w.path().join("terraform.tfstate")).unwrap();
    assert!(!state.contains(&pem_body) && !state.contains("PRIVATE KEY"), "the private key reached the state");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    assert_eq!(admin(&ep, "GET", "inventory", None)["empty"], true);
}
