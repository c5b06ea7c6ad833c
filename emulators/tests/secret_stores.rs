//! The four clouds' secret stores on the emulators, driven by the vendors' own Python clients
//! (`emulators/tests/secret_stores/<cloud>.py`): the provider's credentials make a secret (a cluster's
//! munge key), a host whose identity is granted on it reads it with the credentials its metadata service
//! hands out, a host without a grant is refused with the cloud's own error, and the secret is deleted.
//!
//! AWS's script runs with moto's python (`HPC_MOTO_PYTHON`, boto3), the others with the conformance
//! virtualenv's (`HPC_CONFORMANCE_PYTHON`: google-api-python-client, azure-keyvault-secrets and
//! azure-mgmt-keyvault, oci). Under `HPC_CONFORMANCE=strict` every call is judged by the vendor's definition;
//! each test then reads the run's log and asserts that none of its calls was refused and no answer broke
//! the definition.

use std::path::Path;

use serde_json::Value;

/// Runs `emulators/tests/secret_stores/<script>` with the python named by `python_var` and returns its JSON
/// summary; fails when it found problems (it lists them on stderr) or printed no summary.
fn run(python_var: &str, script: &str, args: &[(&str, &str)]) -> Value {
    let python = std::env::var(python_var)
        .unwrap_or_else(|_| panic!("{python_var} is not set: run through ./scripts/test.sh, which installs the vendors' SDKs"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/secret_stores").join(script);
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(&path);
    for (flag, value) in args {
        cmd.arg(format!("--{flag}")).arg(value);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("running {python} {}: {e}", path.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("{script} printed no JSON summary ({e}), exit {:?}\n--- stderr\n{stderr}\n--- stdout\n{stdout}", out.status.code())
    });
    assert!(out.status.success(), "{script} found problems:\n{stderr}\n--- summary\n{summary:#}");
    summary
}

/// The judged calls this test program's emulators logged for `cloud` (empty when no log is kept).
fn judged(cloud: &str) -> Vec<Value> {
    let Some(dir) = std::env::var_os("HPC_CONFORMANCE_LOG") else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .flat_map(|e| std::fs::read_to_string(e.path()).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|l| l["cloud"] == cloud && l["program"] == "secret_stores")
        .collect()
}

/// Under a strict judge with a log: each of `operations` was judged at least once and passed, and no call
/// of this program on `cloud` was refused or answered against its definition.
fn assert_conformant(cloud: &str, operations: &[&str]) {
    if !hpc_emulators::conformance::strict() || std::env::var_os("HPC_CONFORMANCE_LOG").is_none() {
        return;
    }
    let lines = judged(cloud);
    let bad: Vec<&Value> = lines.iter().filter(|l| !matches!(l["verdict"].as_str(), Some("ok" | "probe_refused" | "monitor"))).collect();
    assert!(bad.is_empty(), "{cloud}: {} call(s) broke the vendor's definition: {bad:#?}", bad.len());
    for op in operations {
        assert!(lines.iter().any(|l| l["operation"] == *op && l["verdict"] == "ok"), "{cloud}: {op} was never judged: {lines:#?}");
    }
}

#[test]
fn aws_secrets_manager_answers_an_instance_role_its_policies_allow_and_refuses_the_others() {
    let emulator = hpc_emulators::harness::start_aws();
    let summary = run("HPC_MOTO_PYTHON", "aws.py", &[("endpoint", &emulator.endpoint)]);
    assert_eq!(summary["granted_read"], true, "{summary:#}");
    for refused in ["granted_other_secret", "granted_describe", "ungranted_read", "granted_read_after_deny"] {
        assert_eq!(summary[refused][0], "AccessDeniedException", "{refused}: {summary:#}");
        assert_eq!(summary[refused][1], 400, "{refused}: {summary:#}");
    }
    assert!(summary["ungranted_read"][2].as_str().unwrap().contains("assumed-role/ungranted/i-"), "{summary:#}");
    assert!(summary["ungranted_read_by_resource_policy"].is_null(), "{summary:#}");
    let inventory = hpc_emulators::harness::admin(&emulator.endpoint, "GET", "inventory", None);
    assert_eq!(inventory["resources"]["secretsmanager"]["secrets"], serde_json::json!([]), "{inventory:#}");
    assert_conformant(
        "aws",
        &[
            "secretsmanager.CreateSecret",
            "secretsmanager.GetSecretValue",
            "secretsmanager.DescribeSecret",
            "secretsmanager.ListSecrets",
            "secretsmanager.TagResource",
            "secretsmanager.PutResourcePolicy",
            "secretsmanager.GetResourcePolicy",
            "secretsmanager.DeleteSecret",
        ],
    );
}

#[test]
fn gcp_secret_manager_answers_a_service_account_its_secrets_policy_grants_and_refuses_the_others() {
    let endpoint = hpc_emulators::harness::start_gcp();
    let summary = run("HPC_CONFORMANCE_PYTHON", "gcp.py", &[("endpoint", &endpoint)]);
    assert_eq!(summary["granted_read"], true, "{summary:#}");
    for refused in ["granted_other_secret", "granted_delete", "ungranted_read", "granted_create"] {
        assert_eq!(summary[refused][0], 403, "{refused}: {summary:#}");
        assert_eq!(summary[refused][1], "PERMISSION_DENIED", "{refused}: {summary:#}");
    }
    assert!(summary["ungranted_read"][2].as_str().unwrap().contains("secretmanager.versions.access"), "{summary:#}");
    let inventory = hpc_emulators::harness::admin(&endpoint, "GET", "inventory", None);
    assert_eq!(inventory["resources"]["secretmanager"]["secrets"], serde_json::json!([]), "{inventory:#}");
    assert_conformant(
        "gcp",
        &[
            "secretmanager.projects.secrets.create",
            "secretmanager.projects.secrets.get",
            "secretmanager.projects.secrets.list",
            "secretmanager.projects.secrets.delete",
            "secretmanager.projects.secrets.addVersion",
            "secretmanager.projects.secrets.versions.access",
            "secretmanager.projects.secrets.getIamPolicy",
            "secretmanager.projects.secrets.setIamPolicy",
        ],
    );
}

#[test]
fn azure_key_vault_answers_an_identity_its_access_policy_or_role_grants_and_refuses_the_others() {
    let (endpoint, pem) = hpc_emulators::harness::start_azure();
    let summary = run("HPC_CONFORMANCE_PYTHON", "azure.py", &[("endpoint", &endpoint), ("ca", pem.to_str().unwrap())]);
    assert_eq!(summary["granted_read"], true, "{summary:#}");
    for (refused, inner) in
        [("granted_set", "AccessDenied"), ("ungranted_read", "AccessDenied"), ("granted_read_under_rbac", "ForbiddenByRbac")]
    {
        assert_eq!(summary[refused], serde_json::json!([403, "Forbidden", inner]), "{refused}: {summary:#}");
    }
    assert!(summary["ungranted_read_by_role"].is_null(), "{summary:#}");
    assert_eq!(summary["after_delete"][0], 404, "{summary:#}");
    assert_eq!(summary["set_while_deleted"][0], 409, "{summary:#}");
    let inventory = hpc_emulators::harness::azure_admin(&endpoint, &pem, "GET", "inventory", None);
    assert_eq!(inventory["resources"]["keyvault"]["secrets"], serde_json::json!([]), "{inventory:#}");
    assert!(inventory["resources"]["arm"]["vaults"].is_null(), "{inventory:#}");
    assert_conformant(
        "azure",
        &[
            "Vaults_CreateOrUpdate",
            "Vaults_Get",
            "Vaults_Delete",
            "SetSecret",
            "GetSecret",
            "DeleteSecret",
            "GetDeletedSecret",
            "PurgeDeletedSecret",
        ],
    );
}

#[test]
fn oci_vault_answers_an_instance_principal_a_policy_grants_and_refuses_the_others() {
    let (endpoint, key) = hpc_emulators::harness::start_oci();
    let summary = run(
        "HPC_CONFORMANCE_PYTHON",
        "oci.py",
        &[
            ("endpoint", &endpoint),
            ("tenancy", &key.tenancy),
            ("user", &key.user),
            ("fingerprint", &key.fingerprint),
            ("key-file", key.private_key_path.to_str().unwrap()),
        ],
    );
    assert_eq!(summary["granted_read"], true, "{summary:#}");
    for refused in ["granted_other_secret", "granted_get_secret", "ungranted_read", "ungranted_read_by_name", "key_on_main_endpoint"] {
        assert_eq!(summary[refused], serde_json::json!([404, "NotAuthorizedOrNotFound"]), "{refused}: {summary:#}");
    }
    assert_eq!(summary["ungranted_reads_other"], true, "{summary:#}");
    assert_eq!(summary["forged_token"], serde_json::json!([401, "NotAuthenticated"]), "{summary:#}");
    assert_eq!(summary["duplicate_name"][0], 409, "{summary:#}");
    assert!(summary["granted_read_after_deletion"][0].as_u64().is_some_and(|s| s >= 400), "{summary:#}");
    let inventory = hpc_emulators::harness::admin(&endpoint, "GET", "inventory", None);
    let resources = &inventory["resources"];
    for (service, kind) in
        [("vault", "secrets"), ("kms", "vaults"), ("kms", "keys"), ("identity", "dynamicGroups"), ("identity", "policies")]
    {
        assert_eq!(resources[service][kind], serde_json::json!([]), "{service}.{kind}: {inventory:#}");
    }
    // Two secrets, the key and the vault wait out their deletion window.
    assert_eq!(inventory["pending_deletion"].as_array().map(Vec::len), Some(4), "{inventory:#}");
    assert_conformant(
        "oci",
        &[
            "CreateVault",
            "GetVault",
            "ScheduleVaultDeletion",
            "CreateKey",
            "GetKey",
            "ScheduleKeyDeletion",
            "CreateSecret",
            "GetSecret",
            "ListSecrets",
            "ScheduleSecretDeletion",
            "GetSecretBundle",
            "GetSecretBundleByName",
            "CreateCompartment",
            "CreateDynamicGroup",
            "CreatePolicy",
            "DeletePolicy",
            "DeleteDynamicGroup",
            "DeleteCompartment",
        ],
    );
}
