//! Acceptance tests: the real OpenTofu and Terraform CLIs drive the freshly built provider through
//! dev_overrides. Every case runs against both CLIs. Run through `./scripts/test.sh` (it installs the CLIs
//! and sets HPC_TOFU / HPC_TERRAFORM).

mod cli;

use cli::{Cli, Workdir, example_dirs};

macro_rules! for_both_clis {
    ($($case:ident),* $(,)?) => {
        mod tofu {
            $(#[test] fn $case() { super::$case(&super::Cli::tofu()); })*
        }
        mod terraform {
            $(#[test] fn $case() { super::$case(&super::Cli::terraform()); })*
        }
    };
}

for_both_clis!(
    catalog_data_source_plans_applies_and_replans_empty,
    bad_input_reports_each_error_at_its_attribute,
    bad_provider_config_points_into_the_provider_block,
    handshake_and_mutual_tls_with_the_real_cli,
    every_example_validates_and_plans,
);

fn catalog_data_source_plans_applies_and_replans_empty(cli: &Cli) {
    let w = Workdir::new(cli, "catalog");
    let plan = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0);
    assert!(plan.stdout.contains("aws_h100"), "plan shows the outputs:\n{}", plan.stdout);
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);

    let out = w.run(&["output", "-json"]).expect_code(0);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let p5 = &json["aws_h100"]["value"];
    assert_eq!(p5["name"], "p5.48xlarge");
    assert_eq!(p5["gpu_model"], "H100");
    assert_eq!(p5["gpu_count"], 8);
    assert_eq!(p5["gpu_memory_gb"], 80);
    assert_eq!(p5["rdma_fabric"], "efa");
    assert_eq!(p5["rdma_interfaces"], 32);
    assert_eq!(p5["network_bandwidth_gbps"], 3200);
    assert!(p5["sources"]["rdma_interfaces"].as_str().unwrap().contains("AWS"), "{p5}");
    assert_eq!(json["oci_rdma_interfaces"]["value"], 16);
    assert_eq!(json["gcp_gpu_models"]["value"], serde_json::json!(["B200", "H100", "H200"]));

    // The data source reads the same on every run: the re-plan is empty.
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(0);
}

fn bad_input_reports_each_error_at_its_attribute(cli: &Cli) {
    let w = Workdir::new(cli, "bad_input");
    let run = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1);
    let text = run.output();
    // The CLI wraps long details; compare those with white space folded.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cases = [
        ("Unsupported GPU model", "bad_gpu", "gpu   = \"H900\"", r#""B200", "B300", "H100", "H200" or "L40S""#),
        ("Unsupported cloud", "bad_cloud", "cloud = \"ibm\"", r#""aws", "azure", "gcp" or "oci""#),
        ("Unsupported instance type", "bad_shape", "instance_type = \"Standard_ND96asr_v4\"", "Standard_ND96isr_H100_v5"),
    ];
    for (summary, name, source_line, valid_values) in cases {
        assert!(text.contains(&format!("Error: {summary}")), "{summary} missing:\n{text}");
        // The attribute path lets the CLI point at the exact line of the offending attribute.
        let at = format!("on main.tf line {}, in data \"hpc_gpu_catalog\" \"{name}\":", w.line_of(source_line));
        assert!(text.contains(&at), "{at:?} missing:\n{text}");
        assert!(text.contains(source_line), "source line {source_line:?} not shown:\n{text}");
        assert!(flat.contains(valid_values), "valid values {valid_values} not listed:\n{text}");
    }
    assert!(!text.contains("panic") && !text.contains("rpc error"), "{text}");
}

fn bad_provider_config_points_into_the_provider_block(cli: &Cli) {
    let w = Workdir::new(cli, "bad_provider_config");
    let run = w.run(&["plan", "-no-color", "-input=false"]).expect_code(1);
    let text = run.output();
    assert!(text.contains("Error: Invalid endpoint"), "{text}");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("\"localhost:4566\" does not start with http:// or https://"), "{text}");
    let at = format!("on main.tf line {}, in provider \"hpc\":", w.line_of("endpoint = \"localhost:4566\""));
    assert!(text.contains(&at), "{at:?} missing:\n{text}");
}

fn handshake_and_mutual_tls_with_the_real_cli(cli: &Cli) {
    let w = Workdir::new(cli, "catalog");
    let log = w.path().join("cli.log");
    let out = w.command(&["plan", "-no-color", "-input=false"]).env("TF_LOG", "debug").env("TF_LOG_PATH", &log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = std::fs::read_to_string(log).unwrap();
    // go-plugin negotiated protocol 6 with our binary...
    assert!(log.contains("using plugin: version=6"), "no protocol 6 negotiation in the CLI log");
    // ...and the CLI connected with its AutoMTLS certificate, which our verifier matched byte for byte
    // (a connection without it would have been refused and the plan would have failed).
    assert!(log.contains("mTLS: client certificate matches PLUGIN_CLIENT_CERT"), "the provider did not log a verified client certificate");
    // Our logs reach the CLI as structured entries at their level.
    assert!(log.contains("serving plugin protocol 6 over mutual TLS"));
    // The CLI ended each provider process through GRPCController/Shutdown, not by killing it.
    assert!(!log.contains("plugin failed to exit gracefully"), "a provider process had to be killed");
}

fn every_example_validates_and_plans(cli: &Cli) {
    let examples = example_dirs();
    assert!(examples.len() >= 4, "examples found: {examples:?}");
    for example in examples {
        let w = Workdir::for_example(cli, &example);
        // Documentation snippets (examples/data-sources/...) leave out the terraform block, as registry
        // examples do; give them the one every configuration of this provider needs.
        let configs: String = std::fs::read_dir(w.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tf"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        if !configs.contains("required_providers") {
            let versions = "terraform {\n  required_providers {\n    hpc = {\n      source = \"hpc-platform/hpc\"\n    }\n  }\n}\n";
            std::fs::write(w.path().join("versions.tf"), versions).unwrap();
        }
        // Local modules are installed with `get`; `init` would look the provider up in a registry,
        // which dev_overrides make unnecessary (and which is unreachable here).
        w.run(&["get", "-no-color"]).expect_code(0);
        let validate = w.run(&["validate", "-no-color"]).expect_code(0);
        assert!(validate.stdout.contains("The configuration is valid"), "{example}: {}", validate.output());
        // 0 = nothing to do, 2 = changes (outputs) to apply; 1 would be an error.
        let plan = w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
        assert!(matches!(plan.code, Some(0 | 2)), "{example}: plan failed\n{}", plan.output());
    }
}
