//! The provider's functions through the real CLIs: computed in a local, a variable's validation, a
//! module's input validation and outputs, with no provider configuration; bad arguments reported at the
//! argument with the valid values; and what a CLI without functions does with them.

use serde_json::{Value, json};

use crate::cli::{Cli, Workdir, fold};

pub fn compute_in_locals_validation_and_outputs(cli: &Cli) {
    let w = Workdir::new(cli, "functions");
    // `get` installs the local module; dev_overrides make `init` unnecessary.
    w.run(&["get", "-no-color"]).expect_code(0);
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let out: Value = serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap();
    let value = |k: &str| out[k]["value"].clone();
    assert_eq!(value("capacity"), json!(36000), "{out}");
    assert_eq!(value("module_capacity"), json!(36000), "{out}");
    assert_eq!(value("lustre"), json!({"aws": 31200, "azure": 32768, "gcp": 36000, "oci": 31200}), "{out}");
    assert_eq!(
        value("node_names"),
        json!({"aws": "p5.48xlarge", "azure": "Standard_ND96isr_H100_v5", "gcp": "a3-megagpu-8g", "oci": "BM.GPU.H100.8"}),
        "{out}"
    );
    assert_eq!(value("rdma_interfaces"), json!({"aws": 32, "azure": 8, "gcp": 8, "oci": 16}), "{out}");
    assert_eq!(value("aws_nccl_env")["FI_PROVIDER"], "efa", "{out}");
    let verdict = value("verdict");
    assert_eq!(
        (&verdict["verdict"], &verdict["healthy"], &verdict["busbw_gbs"]),
        (&json!("placement-or-driver"), &json!(false), &json!(258.75))
    );
    assert!(verdict["message"].as_str().unwrap().contains("29.1% short"), "{verdict}");
    // Pure functions give the same answer every time: the re-plan is empty.
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);

    // A bad argument is reported at that argument, with the valid values.
    let bad = fold(&w.run(&["plan", "-no-color", "-input=false", "-var=cloud=gpc"]).expect_code(1).output());
    assert!(bad.contains("Invalid value for \"cloud\" parameter: \"gpc\" is not a cloud this provider supports"), "{bad}");
    assert!(bad.contains("valid values are \"aws\", \"azure\", \"gcp\" or \"oci\"."), "{bad}");
    assert!(!bad.contains(".."), "the CLI adds its own period: {bad}");
    // A variable validated with a function.
    let gpu = fold(&w.run(&["plan", "-no-color", "-input=false", "-var=gpu=H900"]).expect_code(1).output());
    assert!(gpu.contains("No AWS node type has that GPU model."), "{gpu}");
    // Too large for any tier: the function's own error, at its argument.
    let big = fold(&w.run(&["plan", "-no-color", "-input=false", "-var=dataset_gib=30000000"]).expect_code(1).output());
    assert!(big.contains("Invalid value for \"at_least_gib\" parameter") && big.contains("The largest is 20016000 GiB"), "{big}");
    // A module input the function says the cloud refuses.
    w.write("odd.tf", "module \"odd\" {\n  source       = \"./sizing\"\n  cloud        = \"aws\"\n  capacity_gib = 1300\n}\n");
    w.run(&["get", "-no-color"]).expect_code(0);
    let odd = fold(&w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output());
    assert!(odd.contains("capacity_gib is not a size this cloud's managed Lustre takes"), "{odd}");
}

/// Terraform 1.0 predates provider-defined functions: it refuses the call syntax itself, at the line,
/// before the provider is asked anything.
pub fn refused_by_a_cli_without_them(cli: &Cli) {
    assert!(!cli.has_functions(), "{} {:?} has functions", cli.name, cli.version);
    let w = Workdir::new(cli, "functions");
    let out = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1).output();
    assert!(out.contains("provider::hpc::"), "the error shows the call: {out}");
}
