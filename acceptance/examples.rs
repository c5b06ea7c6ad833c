//! The examples and module examples as users run them: every one applied against the emulators with the
//! real CLI, re-planned (nothing to do), destroyed, and the emulators' inventories checked empty. The
//! examples carry no endpoints: like any cloud tool they take them from the environment (AWS_ENDPOINT_URL,
//! OCI_CONFIG_FILE) or from `*_endpoint` variables left null for the real clouds.

use std::path::PathBuf;

use hpc_emulators::harness::{AwsEmulator, OciKey, admin, azure_admin, start_aws, start_azure, start_gcp, start_oci};
use serde_json::Value;

use crate::cli::{Cli, Run, Workdir};

/// All four emulators, fresh, and the environment that points an example at them.
pub struct Emulators {
    pub aws: AwsEmulator,
    pub gcp: String,
    pub azure: (String, PathBuf),
    pub oci: (String, OciKey),
    oci_config: tempfile::NamedTempFile,
}

impl Emulators {
    pub fn start() -> Emulators {
        let oci = start_oci();
        let oci_config = tempfile::NamedTempFile::new().unwrap();
        // What `oci setup config` writes: the provider reads the DEFAULT profile like the OCI CLI does.
        let profile = format!(
            "[DEFAULT]\nuser={}\nfingerprint={}\ntenancy={}\nregion=us-ashburn-1\nkey_file={}\n",
            oci.1.user,
            oci.1.fingerprint,
            oci.1.tenancy,
            oci.1.private_key_path.display()
        );
        std::fs::write(oci_config.path(), profile).unwrap();
        Emulators { aws: start_aws(), gcp: start_gcp(), azure: start_azure(), oci, oci_config }
    }

    /// `w` with the environment of a user pointed at the emulators.
    pub fn env(&self, w: Workdir) -> Workdir {
        w.env("AWS_ENDPOINT_URL", &self.aws.endpoint)
            .env("AWS_ACCESS_KEY_ID", "acceptance")
            .env("AWS_SECRET_ACCESS_KEY", "acceptance")
            .env("TF_VAR_gcp_endpoint", &self.gcp)
            .env("TF_VAR_azure_endpoint", &self.azure.0)
            .env("HPC_AZURE_CA_FILE", &self.azure.1.display().to_string())
            .env("TF_VAR_oci_endpoint", &self.oci.0)
            .env("OCI_CONFIG_FILE", &self.oci_config.path().display().to_string())
    }

    /// Each emulator's inventory, by cloud.
    pub fn inventories(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("aws", admin(&self.aws.endpoint, "GET", "inventory", None)),
            ("gcp", admin(&self.gcp, "GET", "inventory", None)),
            ("azure", azure_admin(&self.azure.0, &self.azure.1, "GET", "inventory", None)),
            ("oci", admin(&self.oci.0, "GET", "inventory", None)),
        ]
    }

    pub fn assert_empty(&self, what: &str) {
        for (cloud, inv) in self.inventories() {
            assert_eq!(inv["empty"], true, "{what}: {cloud} still holds {inv}");
        }
    }

    /// Whether any emulator holds something.
    pub fn anything_created(&self) -> bool {
        self.inventories().iter().any(|(_, inv)| inv["empty"] != true)
    }
}

pub fn apply(w: &Workdir) -> Run {
    w.run(&["apply", "-no-color", "-input=false", "-auto-approve"])
}

pub fn plan(w: &Workdir, code: i32) -> Run {
    w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code)
}

pub fn outputs(w: &Workdir) -> Value {
    serde_json::from_str(&w.run(&["output", "-json"]).expect_code(0).stdout).unwrap()
}

/// Installs what a configuration needs: local modules always; other providers (hashicorp/local) from the
/// filesystem mirror through `init` when it names any.
pub fn install(w: &Workdir) {
    let uses_others = std::fs::read_dir(w.path())
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .any(|text| text.contains("hashicorp/local"));
    if uses_others {
        w.run(&["init", "-no-color", "-input=false"]).expect_code(0);
    } else {
        w.run(&["get", "-no-color"]).expect_code(0);
    }
}

/// apply, an empty re-plan, destroy, empty inventories. Returns the outputs seen after apply and whether
/// the apply built anything in an emulator.
pub fn lifecycle(cli: &Cli, path: &str) -> (Value, bool) {
    let clouds = Emulators::start();
    let w = clouds.env(Workdir::for_path(cli, path));
    install(&w);
    apply(&w).expect_code(0);
    let created = clouds.anything_created();
    plan(&w, 0);
    let out = outputs(&w);
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    clouds.assert_empty(path);
    (out, created)
}

/// The configurations under `examples/` that build something and need nothing made beforehand, but for
/// `examples/slurm/<cloud>`, which `slurm.rs` applies, grows and runs on a real Slurm. The documentation snippets (`examples/resources`, `examples/data-sources`) name placeholder ids such as
/// `vpc-0123456789abcdef0`; they are validated and planned, not applied. The composition and import
/// examples need an estate first and have tests of their own.
pub fn runnable_examples() -> Vec<String> {
    crate::cli::example_dirs()
        .into_iter()
        .filter(|e| !is_snippet(e) && !needs_an_estate(e) && !e.starts_with("slurm/"))
        .map(|e| format!("examples/{e}"))
        .collect()
}

/// Documentation snippets: the provider block and the per-resource, data-source and function pages (these
/// are validated and planned, not applied).
pub fn is_snippet(example: &str) -> bool {
    example == "provider" || example.starts_with("resources") || example.starts_with("data-sources") || example.starts_with("functions")
}

/// Examples that need something made before them: they have tests of their own (the Kubernetes examples
/// need a Kubernetes cluster: `kubernetes.rs`). The
/// hpc_nccl_check snippet needs a cluster and an nccl-tests log (and postconditions, which Terraform 1.0
/// lacks).
pub fn needs_an_estate(example: &str) -> bool {
    example.starts_with("composition")
        || example.starts_with("kubernetes")
        || example == "import-existing"
        || example == "data-sources/hpc_nccl_check"
}

/// `modules/<m>/examples/<e>` for every module and each of its examples.
pub fn module_examples() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("modules");
    let mut out = Vec::new();
    for module in std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()) {
        let Ok(examples) = std::fs::read_dir(module.join("examples")) else { continue };
        for example in examples.map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
            out.push(format!(
                "modules/{}/examples/{}",
                module.file_name().unwrap().to_string_lossy(),
                example.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

/// examples/composition (OpenTofu only: terraform_data, moved): a VPC and subnet made outside any
/// configuration, published by the network team's configuration in its local state, read through
/// terraform_remote_state, joined by id; the nodes handed to hashicorp/local files and terraform_data; a
/// rename through a `moved` block; the estate untouched by destroy.
pub fn composition_with_an_existing_estate(cli: &Cli) {
    let clouds = Emulators::start();
    let ec2 = crate::aws::ec2(&clouds.aws.endpoint);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (vpc, subnet) = rt.block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.20.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block("10.20.1.0/24")
            .availability_zone("us-east-1a")
            .send()
            .await
            .unwrap()
            .subnet
            .unwrap()
            .subnet_id
            .unwrap();
        (vpc, subnet)
    });

    let network =
        clouds.env(Workdir::for_path(cli, "examples/composition/network")).env("TF_VAR_vpc_id", &vpc).env("TF_VAR_subnet_id", &subnet);
    apply(&network).expect_code(0);
    let state = network.path().join("terraform.tfstate");

    let w =
        clouds.env(Workdir::for_path(cli, "examples/composition/cluster")).env("TF_VAR_network_state_path", &state.display().to_string());
    crate::cli::use_mirror(&w, true);
    install(&w);
    let first = plan(&w, 2).stdout;
    assert!(first.contains(&format!("vpc_id        = \"{vpc}\"")) || first.contains(&vpc), "the fabric joins the existing VPC:\n{first}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    let inv = admin(&clouds.aws.endpoint, "GET", "inventory", None);
    assert_eq!(inv["resources"]["ec2"]["vpcs"], serde_json::json!([vpc]), "no VPC of our own: {inv}");

    // What the other providers received.
    let out = outputs(&w);
    let ips: Vec<String> = out["node_private_ips"]["value"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    assert_eq!(ips.len(), 2, "{out}");
    let hostfile = std::fs::read_to_string(w.path().join("out/hostfile")).unwrap();
    assert_eq!(hostfile, format!("{} slots=8\n{} slots=8\n", ips[0], ips[1]));
    let topology = std::fs::read_to_string(w.path().join("out/topology.conf")).unwrap();
    assert_eq!(topology, "SwitchName=train-pg Nodes=train-0,train-1\nSwitchName=root Switches=train-pg\n");

    // A state that still calls the cluster by its old name: the moved block renames it, nothing is rebuilt.
    w.run(&["state", "mv", "hpc_gpu_cluster.train", "hpc_gpu_cluster.nodes"]).expect_code(0);
    let moved = w.run(&["plan", "-no-color", "-input=false"]).expect_code(0).stdout;
    assert!(moved.contains("hpc_gpu_cluster.nodes has moved to hpc_gpu_cluster.train"), "{moved}");
    assert!(moved.contains("0 to add, 0 to change, 0 to destroy") || moved.contains("No changes"), "{moved}");
    apply(&w).expect_code(0);
    plan(&w, 0);

    // Destroy takes what we made and leaves the estate alone.
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    network.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin(&clouds.aws.endpoint, "GET", "inventory", None);
    assert_eq!(inv["resources"]["ec2"]["vpcs"], serde_json::json!([vpc]), "{inv}");
    assert!(!w.path().join("out/hostfile").exists(), "local_file removed its file");
    rt.block_on(async {
        ec2.delete_subnet().subnet_id(&subnet).send().await.unwrap();
        ec2.delete_vpc().vpc_id(&vpc).send().await.unwrap();
    });
    clouds.assert_empty("composition");
}

/// examples/import-existing (OpenTofu only: import blocks with variables): a fabric and cluster built by
/// another configuration whose state was then dropped are adopted by import blocks, with no change.
pub fn import_blocks_adopt_an_existing_cluster(cli: &Cli) {
    let clouds = Emulators::start();
    // Someone else's configuration built it; its state is gone.
    let other = clouds.env(Workdir::for_path(cli, "examples/import-existing"));
    let main = other.path().join("main.tf");
    let text = std::fs::read_to_string(&main).unwrap();
    let without_imports: String = text
        .split("\nimport {")
        .enumerate()
        .map(|(i, part)| if i == 0 { part.to_owned() } else { part.split_once("\n}\n").map_or(String::new(), |(_, rest)| rest.to_owned()) })
        .collect();
    assert!(
        !without_imports.contains("import {") && without_imports.contains("resource \"hpc_gpu_cluster\" \"legacy\""),
        "{without_imports}"
    );
    std::fs::write(&main, without_imports).unwrap();
    apply(&other).expect_code(0);
    let made = outputs(&other);
    drop(other);

    let w = clouds.env(Workdir::for_path(cli, "examples/import-existing"));
    let planned = plan(&w, 2).stdout;
    assert!(planned.contains("2 to import, 0 to add, 0 to change, 0 to destroy"), "{planned}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    assert_eq!(outputs(&w)["node_private_ips"], made["node_private_ips"], "the same nodes, adopted");
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    clouds.assert_empty("import-existing");
}
