//! Planner goldens: configuration in, planned state (the vendor expansion) and diagnostics out, for every
//! cloud x resource x main node-type family, every validation rule (one failing case each), the checklist
//! warnings, and in-place versus replacing updates. Each plan is also checked against the CLI's plan
//! validity rules. `HPC_UPDATE_GOLDENS=1 cargo test --test planner` rewrites `tests/goldens/`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use hpc_provider::catalog::Cloud;
use hpc_provider::config::{CloudSettings, ProviderConfig};
use hpc_provider::framework::codec::decode_json;
use hpc_provider::framework::{Context, Diagnostics, PlanRequest, PlanResponse, Resource, Schema, Severity, Value};
use hpc_provider::resources::{
    gpu_cluster::GpuCluster, gpu_fabric::GpuFabric, node_pool, parallel_filesystem::ParallelFilesystem, slurm_cluster::SlurmCluster,
};
use serde_json::{Value as J, json};
use tokio_util::sync::CancellationToken;

/// What a golden plans with: one of the provider's resources, or the GPU node pool, which plans but has no
/// backends yet (and so is not one of the provider's resources).
enum Planned {
    Resource(Box<dyn Resource>),
    NodePool,
}

impl Planned {
    fn schema(&self) -> Schema {
        match self {
            Planned::Resource(r) => r.schema(),
            Planned::NodePool => node_pool::schema(),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Planned::Resource(r) => r.type_name(),
            Planned::NodePool => node_pool::KIND.type_name,
        }
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Planned::Resource(r) = self {
            r.validate(config, diags);
        }
    }

    fn plan(&self, ctx: &Context, req: PlanRequest<'_>, diags: &mut Diagnostics) -> PlanResponse {
        match self {
            Planned::Resource(r) => r.plan(ctx, req, diags),
            Planned::NodePool => node_pool::plan(ctx, req, diags),
        }
    }
}

fn resource(kind: &str) -> Planned {
    Planned::Resource(match kind {
        "fabric" => Box::new(GpuFabric),
        "cluster" => Box::new(GpuCluster),
        "slurm" => Box::new(SlurmCluster),
        "pool" => return Planned::NodePool,
        _ => Box::new(ParallelFilesystem),
    })
}

fn context(gcp_project: bool) -> Context {
    let mut clouds = BTreeMap::new();
    if gcp_project {
        clouds.insert(
            Cloud::Gcp,
            CloudSettings { endpoint: None, settings: [("project".to_string(), "ml-prod".to_string())].into(), ..Default::default() },
        );
    }
    let config = ProviderConfig {
        terraform_version: "1.12.6".into(),
        default_tags: [("team".to_string(), "ml".to_string())].into(),
        prices: Default::default(),
        clouds,
        ..Default::default()
    };
    Context::new(CancellationToken::new(), Some(Arc::new(config)))
}

/// Config JSON to a value of the schema; references to other resources have unknown ids, as at plan time.
fn config_value(schema: &Schema, json: &J) -> Value {
    let mut v = decode_json(json.to_string().as_bytes(), &schema.value_type()).unwrap();
    if let Value::Map(m) = &mut v {
        for reference in ["fabric", "cluster"] {
            if let Some(Value::Map(obj)) = m.get_mut(reference) {
                obj.insert("id".into(), Value::Unknown);
            }
        }
    }
    v
}

/// What the CLI proposes: the configuration, with computed attributes the config leaves null taken from
/// the prior state (unknown on create).
fn proposed(schema: &Schema, prior: &Value, config: &Value) -> Value {
    let mut out = config.as_map().cloned().unwrap_or_default();
    for a in schema.block.attributes.iter().filter(|a| a.computed) {
        if config.get(&a.name).is_null() {
            out.insert(a.name.clone(), if prior.is_null() { Value::Unknown } else { prior.get(&a.name).clone() });
        }
    }
    Value::Map(out)
}

fn fabric_ref(cloud: &str, region: &str, zone: Option<&str>, instance_type: &str, placement: &str) -> J {
    json!({"name": "train", "cloud": cloud, "region": region, "zone": zone, "instance_type": instance_type, "placement": placement})
}

fn aws_p5() -> J {
    fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p5.48xlarge", "cluster")
}
fn azure_h100() -> J {
    fabric_ref("azure", "eastus", None, "Standard_ND96isr_H100_v5", "cluster")
}
fn gcp_mega() -> J {
    fabric_ref("gcp", "us-central1", Some("us-central1-a"), "a3-megagpu-8g", "cluster")
}
fn oci_h100() -> J {
    fabric_ref("oci", "us-ashburn-1", Some("AD-1"), "BM.GPU.H100.8", "cluster")
}

/// User data carrying the self-check's opening lines as `data "hpc_gpu_selfcheck"` writes them.
fn selfcheck_user_data(publish: bool) -> J {
    let marker = hpc_provider::clouds::user_data::SELFCHECK_MARKER;
    json!(format!("#!/bin/bash\n{marker} (data \"hpc_gpu_selfcheck\").\nPUBLISH={}\n", u8::from(publish)))
}

struct Case {
    name: &'static str,
    kind: &'static str,
    config: J,
    prior: Option<J>,
    gcp_project: bool,
    /// Lines (or parts of lines) the golden must contain: what the case is about.
    expect: Vec<&'static str>,
}

/// `n` bytes of text that gzip does not shrink much (a fixed pseudo-random sequence of letters and digits), as
/// real user data full of keys and certificates.
fn incompressible(n: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            CHARS[(x % 64) as usize] as char
        })
        .collect()
}

fn case(name: &'static str, kind: &'static str, config: J, expect: &[&'static str]) -> Case {
    Case { name, kind, config, prior: None, gcp_project: true, expect: expect.to_vec() }
}

fn update(name: &'static str, kind: &'static str, prior: J, config: J, expect: &[&'static str]) -> Case {
    Case { name, kind, config, prior: Some(prior), gcp_project: true, expect: expect.to_vec() }
}

fn cases() -> Vec<Case> {
    let fab = |extra: J| {
        let mut base = json!({"name": "train", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "gpu": "H100"});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    };
    let cl = |fabric: J, extra: J| {
        // Azure refuses Linux VMs without a key or password: every Azure cluster here carries a key.
        let key = if fabric["cloud"] == "azure" { json!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x") } else { J::Null };
        let mut base = json!({"name": "train", "fabric": fabric, "node_count": 4, "ssh_public_key": key});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    };
    let fs = |fabric: J, extra: J| {
        let mut base = json!({"name": "scratch", "fabric": fabric, "capacity_gib": 4800, "throughput_per_tib": 500});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    };
    // A Slurm cluster on `fabric` (with its network and join), with a partition per (name, cluster object).
    let slurm = |fabric: J, version: &str, partitions: Vec<(&str, J)>, extra: J| {
        let mut f = fabric;
        f["cidr_block"] = json!("10.0.0.0/16");
        f["slurm_join"] = json!({"controller_addresses": ["10.0.255.244", "10.0.255.245"], "key": "a2V5"});
        let key = if f["cloud"] == "azure" { json!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x") } else { J::Null };
        let parts: Vec<J> =
            partitions.into_iter().map(|(n, c)| json!({"name": n, "cluster": c, "default": null, "max_time": null})).collect();
        let mut base = json!({"name": "ml", "fabric": f, "slurm_version": version, "partition": parts, "ssh_public_key": key});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    };
    // A GPU cluster as a partition's `cluster` reference: its nodes in one placement group (or NVLink domains).
    let members = |name: &str, n: u32| -> Vec<String> { (0..n).map(|i| format!("{name}-{i}")).collect() };
    let gpus = |fabric: J, name: &str, n: u32, group: Option<&str>| {
        let groups = group.map_or(json!([]), |g| json!([{"name": g, "nodes": members(name, n)}]));
        json!({"name": name, "fabric": fabric, "instance_type": fabric["instance_type"], "node_names": members(name, n),
               "placement_groups": groups, "nvlink_domains": []})
    };
    let racks = |fabric: J, name: &str, n: u32| {
        let domains: Vec<J> = (0..n.div_ceil(18))
            .map(|d| json!({"name": format!("{name}-nvl{d}"), "nodes": members(name, n)[(d * 18) as usize..((d + 1) * 18).min(n) as usize], "gpus": 72}))
            .collect();
        json!({"name": name, "fabric": fabric, "instance_type": fabric["instance_type"], "node_names": members(name, n),
               "placement_groups": [], "nvlink_domains": domains})
    };
    let aws_gb200 = fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "cluster");
    let mut all = vec![
        // ------------------------------------------------------------------ Slurm per cloud
        case(
            "slurm_aws_h100_one_placement_group",
            "slurm",
            slurm(aws_p5(), "22.05", vec![("h100", gpus(aws_p5(), "h100", 16, Some("train-pg")))], json!({})),
            &[
                "SwitchName=train-pg Nodes=h100-[0-15]",
                "NodeName=h100-[0-15] CPUs=192 Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 RealMemory=1992295 Gres=gpu:h100:8",
                r#""kind": "aws_instance""#,
                r#""private_ip": "10.0.255.244""#,
            ],
        ),
        case(
            "slurm_azure_h100_two_scale_sets",
            "slurm",
            slurm(
                azure_h100(),
                "21.08",
                vec![(
                    "nd",
                    json!({"name": "nd", "fabric": azure_h100(), "instance_type": "Standard_ND96isr_H100_v5", "node_names": members("nd", 150),
                           "placement_groups": [{"name": "nd-0", "nodes": members("nd", 75)}, {"name": "nd-1", "nodes": members("nd", 150)[75..].to_vec()}],
                           "nvlink_domains": []}),
                )],
                json!({}),
            ),
            &[
                "SwitchName=nd-0 Nodes=nd-[0-74]",
                "SwitchName=nd-1 Nodes=nd-[75-149]",
                "warning [partition[0].cluster] Partition on several RDMA fabrics",
                "warning [slurm_version] Jobs not confined to what they asked for",
                "TreeWidth=150",
                r#""kind": "azurerm_network_interface""#,
            ],
        ),
        case(
            "slurm_gcp_a3_mega_compact_policy",
            "slurm",
            slurm(gcp_mega(), "22.05", vec![("a3", gpus(gcp_mega(), "a3", 8, Some("train-placement")))], json!({"login_nodes": 2})),
            &["SwitchName=train-placement Nodes=a3-[0-7]", r#""kind": "google_compute_firewall""#, r#""name": "ml-login1""#],
        ),
        case(
            "slurm_oci_h100_compute_cluster",
            "slurm",
            slurm(oci_h100(), "22.05", vec![("bm", gpus(oci_h100(), "bm", 4, Some("train-cc")))], json!({})),
            &["SwitchName=train-cc Nodes=bm-[0-3]", r#""kind": "oci_core_subnet""#, r#""cidr_block": "10.0.255.240/28""#],
        ),
        case(
            "slurm_aws_gb200_two_domains_block",
            "slurm",
            slurm(aws_gb200.clone(), "23.11", vec![("gb200", racks(aws_gb200.clone(), "gb", 36))], json!({})),
            &["TopologyPlugin=topology/block", "BlockName=gb-nvl0 Nodes=gb-[0-17]", "BlockName=gb-nvl1 Nodes=gb-[18-35]"],
        ),
        case(
            "slurm_aws_gb200_two_domains_tree_on_22_05",
            "slurm",
            slurm(aws_gb200.clone(), "22.05", vec![("gb200", racks(aws_gb200.clone(), "gb", 36))], json!({})),
            &["warning [topology] Tree topology for rack-scale nodes", "SwitchName=gb-nvl0 Nodes=gb-[0-17]"],
        ),
        case(
            "invalid_slurm_block_on_22_05",
            "slurm",
            slurm(aws_gb200.clone(), "22.05", vec![("gb200", racks(aws_gb200.clone(), "gb", 18))], json!({"topology": "block"})),
            &["error [topology] No block topology in this Slurm version"],
        ),
        case(
            "invalid_slurm_version",
            "slurm",
            slurm(aws_p5(), "20.11", vec![("h100", gpus(aws_p5(), "h100", 2, Some("train-pg")))], json!({})),
            &["error [slurm_version] Unsupported Slurm version"],
        ),
        case(
            "invalid_slurm_aws_configuration_over_the_tag_limit",
            "slurm",
            slurm(
                aws_p5(),
                "22.05",
                vec![("h100", gpus(aws_p5(), "h100", 2, Some("train-pg")))],
                json!({"tags": (0..40).map(|i| (format!("team-{i:02}"), json!("ml"))).collect::<serde_json::Map<_, _>>()}),
            ),
            &["error [tags] The Slurm configuration does not fit the instances' tags", "over EC2's 50 per instance"],
        ),
        case(
            "invalid_slurm_partition_on_another_fabric",
            "slurm",
            slurm(
                aws_p5(),
                "22.05",
                vec![(
                    "h100",
                    gpus(
                        fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p5.48xlarge", "cluster")
                            .as_object()
                            .map(|o| {
                                let mut o = o.clone();
                                o.insert("name".into(), json!("other"));
                                J::Object(o)
                            })
                            .unwrap(),
                        "h100",
                        2,
                        None,
                    ),
                )],
                json!({}),
            ),
            &["error [partition[0].cluster] Partition on another fabric"],
        ),
        case(
            "invalid_slurm_backup_without_shared_state",
            "slurm",
            slurm(aws_p5(), "22.05", vec![("h100", gpus(aws_p5(), "h100", 2, Some("train-pg")))], json!({"backup_controller": true})),
            &["error [backup_controller] Backup controller without shared state"],
        ),
        case(
            "invalid_slurm_max_time",
            "slurm",
            slurm(
                aws_p5(),
                "22.05",
                vec![("h100", gpus(aws_p5(), "h100", 2, Some("train-pg")))],
                json!({"partition": [{"name": "h100", "cluster": gpus(aws_p5(), "h100", 2, Some("train-pg")), "default": null, "max_time": "forever"}]}),
            ),
            &["error [partition[0].max_time] Invalid max_time", "is not a time limit Slurm reads"],
        ),
        case(
            "slurm_aws_gb200_two_domains_segments_on_24_11",
            "slurm",
            slurm(aws_gb200.clone(), "24.11", vec![("gb200", racks(aws_gb200, "gb", 36))], json!({})),
            &["TopologyPlugin=topology/block", "BlockSizes=18", "#SBATCH --segment=18"],
        ),
        // ------------------------------------------------------------------ expansions per cloud and family
        case(
            "aws_fabric_p5_new_network",
            "fabric",
            fab(json!({})),
            &[
                r#""kind": "aws_placement_group""#,
                r#""strategy": "cluster""#,
                r#""instance_type": "p5.48xlarge""#,
                r#""ip_protocol": "-1""#,
            ],
        ),
        case(
            "aws_fabric_p5en_existing_network",
            "fabric",
            fab(json!({"instance_type": "p5en.48xlarge", "gpu": null, "vpc_id": "vpc-0abc", "subnet_id": "subnet-0def"})),
            &[r#""vpc_id": "vpc-0abc""#, r#""subnet_id": "subnet-0def""#],
        ),
        case("aws_fabric_no_placement", "fabric", fab(json!({"placement": "none"})), &[r#""placement": "none""#]),
        case(
            "aws_cluster_p5_32_efa",
            "cluster",
            cl(aws_p5(), json!({})),
            &[
                r#""name": "train-lt cards 1-31""#,
                r#""count": 31"#,
                r#""interface_type": "efa-only""#,
                r#""gpus_total": 32"#,
                r#""FI_PROVIDER": "efa""#,
            ],
        ),
        case(
            "aws_cluster_p5en_16_efa_spot",
            "cluster",
            cl(fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p5en.48xlarge", "cluster"), json!({"capacity_type": "spot"})),
            &[r#""name": "train-lt cards 1-15""#, r#""instance_market_options.market_type": "spot""#],
        ),
        case(
            "aws_cluster_p6_b300_card0_ena",
            "cluster",
            cl(fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6-b300.48xlarge", "cluster"), json!({})),
            &[r#""interface_type": "interface""#, r#""name": "train-lt cards 1-16""#],
        ),
        case(
            "aws_cluster_capacity_block",
            "cluster",
            cl(aws_p5(), json!({"capacity_type": "capacity-block", "reservation_id": "cr-0123", "node_count": 16})),
            &[r#""capacity_reservation_specification.capacity_reservation_target": "cr-0123""#, "Placement group with reserved capacity"],
        ),
        case(
            "aws_cluster_fewer_efa",
            "cluster",
            cl(aws_p5(), json!({"rdma_interfaces": 4})),
            &[r#""name": "train-lt cards 1-3""#, r#""efa_interfaces": "4""#],
        ),
        case(
            "aws_filesystem_fsx_dra_metadata",
            "filesystem",
            fs(aws_p5(), json!({"data_repository": "s3://bucket/data", "metadata_iops": 12000})),
            &[
                r#""deployment_type": "PERSISTENT_2""#,
                r#""kind": "aws_fsx_data_repository_association""#,
                "USER_PROVISIONED, iops 12000",
                r#""throughput_mbps": 2343"#,
            ],
        ),
        case(
            "azure_fabric_nd_h100",
            "fabric",
            json!({"name": "train", "cloud": "azure", "region": "eastus", "instance_type": "Standard_ND96isr_H100_v5"}),
            &[r#""kind": "azurerm_proximity_placement_group""#, r#""kind": "azurerm_resource_group""#],
        ),
        case(
            "azure_fabric_existing_rg",
            "fabric",
            json!({"name": "train", "cloud": "azure", "region": "eastus", "gpu": "H200", "resource_group": "ml-rg", "zone": "1"}),
            &[r#""resource_group_name": "ml-rg""#, r#""instance_type": "Standard_ND96isr_H200_v5""#],
        ),
        case(
            "azure_cluster_4_nodes",
            "cluster",
            cl(azure_h100(), json!({})),
            &[
                r#""single_placement_group": "true""#,
                r#""platform_fault_domain_count": "1""#,
                r#""overprovision": "false""#,
                "ndv5-topo.xml",
                r#""expected_busbw_gbs": 460"#,
            ],
        ),
        case(
            "azure_cluster_150_nodes_two_scale_sets",
            "cluster",
            cl(azure_h100(), json!({"node_count": 150})),
            &[r#""name": "train-0""#, r#""name": "train-1""#, r#""instances": "75""#],
        ),
        case(
            "azure_filesystem_amlfs",
            "filesystem",
            fs(
                azure_h100(),
                json!({"capacity_gib": 16384, "throughput_per_tib": 125, "data_repository": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/data-rg/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/data"}),
            ),
            &[
                r#""sku_name": "AMLFS-Durable-Premium-125""#,
                r#""storage_capacity_in_tb": "16""#,
                "Sunday 02:00 UTC",
                "Storage Blob Data Contributor",
            ],
        ),
        case(
            "gcp_fabric_a3_high_4_vpcs",
            "fabric",
            json!({"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "a3-highgpu-8g"}),
            &[r#""count": 4"#, r#""mtu": "8244""#],
        ),
        case(
            "gcp_fabric_a3_mega_8_vpcs",
            "fabric",
            json!({"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "H100"}),
            &[r#""count": 8"#, r#""names": "train-gpu-0 .. train-gpu-7""#, r#""group_placement_policy.collocation": "COLLOCATED""#],
        ),
        case(
            "gcp_fabric_a3_ultra_roce",
            "fabric",
            json!({"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-b", "instance_type": "a3-ultragpu-8g", "max_distance": 2}),
            &[
                "https://www.googleapis.com/compute/v1/projects/ml-prod/global/networkProfiles/us-central1-b-vpc-roce",
                r#""names": "train-rdma-0 .. train-rdma-7""#,
                r#""group_placement_policy.max_distance": "2""#,
            ],
        ),
        case(
            "gcp_fabric_a4_existing_network",
            "fabric",
            json!({"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-b", "gpu": "B200", "vpc_id": "projects/ml-prod/global/networks/default", "subnet_id": "default"}),
            &[r#""instance_type": "a4-highgpu-8g""#, r#""kind": "google_compute_network""#],
        ),
        case(
            "gcp_cluster_a3_mega",
            "cluster",
            cl(gcp_mega(), json!({})),
            &[
                r#""scheduling.on_host_maintenance": "TERMINATE""#,
                r#""networks": "train-gpu-0 .. train-gpu-7""#,
                "NCCL_FASTRAK_IFNAME",
                "instances.bulkInsert",
            ],
        ),
        case(
            "gcp_cluster_a3_ultra_reservation",
            "cluster",
            cl(
                fabric_ref("gcp", "us-central1", Some("us-central1-b"), "a3-ultragpu-8g", "cluster"),
                json!({"capacity_type": "reservation", "reservation_id": "h200-res"}),
            ),
            &[r#""nic_type": "MRDMA""#, "SPECIFIC_RESERVATION h200-res", r#""NCCL_NET": "gIB""#],
        ),
        case(
            "gcp_cluster_a4_flex_start",
            "cluster",
            cl(fabric_ref("gcp", "us-central1", Some("us-central1-b"), "a4-highgpu-8g", "cluster"), json!({"capacity_type": "flex-start"})),
            &[r#""scheduling.provisioning_model": "FLEX_START""#],
        ),
        case(
            "gcp_filesystem_managed_lustre",
            "filesystem",
            fs(gcp_mega(), json!({"capacity_gib": 36000, "data_repository": "gs://bucket/data"})),
            &[r#""kind": "google_lustre_instance""#, r#""filesystem": "scratch""#, r#""kind": "google_service_networking_connection""#],
        ),
        case(
            "oci_fabric_compute_cluster",
            "fabric",
            json!({"name": "train", "cloud": "oci", "region": "us-ashburn-1", "zone": "AD-1", "gpu": "H100", "compartment_id": "ocid1.compartment.oc1..x"}),
            &[r#""kind": "oci_core_compute_cluster""#, r#""kind": "oci_core_vcn""#],
        ),
        case(
            "oci_fabric_cluster_network",
            "fabric",
            json!({"name": "train", "cloud": "oci", "region": "us-ashburn-1", "zone": "AD-1", "gpu": "H200", "compartment_id": "ocid1.compartment.oc1..x", "placement": "cluster-network"}),
            &[r#""placement": "cluster-network""#],
        ),
        case(
            "oci_cluster_compute_cluster",
            "cluster",
            cl(oci_h100(), json!({})),
            &[
                "Compute HPC RDMA Authentication: ENABLED",
                r#""compute_cluster_id": "oci_core_compute_cluster.train-cc""#,
                r#""NCCL_IB_GID_INDEX": "3""#,
            ],
        ),
        case(
            "oci_cluster_cluster_network",
            "cluster",
            cl(fabric_ref("oci", "us-ashburn-1", Some("AD-1"), "BM.GPU.H200.8", "cluster-network"), json!({})),
            &[r#""kind": "oci_core_cluster_network""#, r#""instance_pools.size": "4""#],
        ),
        case(
            "oci_filesystem_lustre",
            "filesystem",
            fs(oci_h100(), json!({"capacity_gib": 31200, "throughput_per_tib": 250, "data_repository": "oci://bucket@ns/data"})),
            &[r#""performance_tier": "MBPS_PER_TB_250""#, r#""capacity_in_gbs": "31200""#],
        ),
        // ------------------------------------------------------------------------ validation: one each
        case(
            "invalid_fabric_cloud",
            "fabric",
            fab(json!({"cloud": "ibm"})),
            &["error [cloud] Unsupported cloud", r#""aws", "azure", "gcp" or "oci""#],
        ),
        case("invalid_fabric_gpu", "fabric", fab(json!({"gpu": "H900"})), &["error [gpu] Unsupported GPU model"]),
        case(
            "invalid_fabric_gpu_not_on_cloud",
            "fabric",
            json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "MI300X"}),
            &["error [gpu] Unsupported GPU model", r#"MI300X is offered on "azure" or "oci""#],
        ),
        case(
            "invalid_fabric_instance_type",
            "fabric",
            fab(json!({"gpu": null, "instance_type": "p4d.24xlarge"})),
            &["error [instance_type] Unsupported instance type"],
        ),
        case(
            "invalid_fabric_gpu_instance_mismatch",
            "fabric",
            fab(json!({"instance_type": "p5e.48xlarge"})),
            &["error [instance_type] Instance type does not match GPU"],
        ),
        case("invalid_fabric_no_node_type", "fabric", fab(json!({"gpu": null})), &["error [gpu] Missing node type"]),
        case("invalid_fabric_missing_zone", "fabric", fab(json!({"zone": null})), &["error [zone] Missing zone"]),
        case(
            "invalid_fabric_zone_outside_region",
            "fabric",
            json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "europe-west4-a", "gpu": "H100"}),
            &["error [zone] Zone outside region"],
        ),
        // "us-central1a" is no Google Cloud zone; the message names the zones the region has.
        case(
            "invalid_fabric_zone_without_hyphen_gcp",
            "fabric",
            json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "us-central1a", "gpu": "H100"}),
            &["error [zone] Zone outside region", r#"named "us-central1-a", "us-central1-b""#],
        ),
        case(
            "invalid_fabric_zone_outside_region_aws",
            "fabric",
            json!({"name": "t", "cloud": "aws", "region": "us-east-1", "zone": "us-west-2a", "gpu": "H100"}),
            &["error [zone] Zone outside region", r#"named "us-east-1a", "us-east-1b""#],
        ),
        case(
            "invalid_fabric_half_existing_network",
            "fabric",
            fab(json!({"vpc_id": "vpc-1"})),
            &["error [subnet_id] Incomplete existing network"],
        ),
        case(
            "invalid_fabric_cidr_with_existing_network",
            "fabric",
            fab(json!({"vpc_id": "vpc-1", "subnet_id": "subnet-1", "cidr_block": "10.0.0.0/16"})),
            &["error [cidr_block] Conflicting attributes"],
        ),
        case("invalid_fabric_cidr", "fabric", fab(json!({"cidr_block": "10.0.0.0/8"})), &["error [cidr_block] Invalid CIDR block"]),
        case(
            "invalid_fabric_cluster_network_on_aws",
            "fabric",
            fab(json!({"placement": "cluster-network"})),
            &["error [placement] Placement not offered"],
        ),
        case("invalid_fabric_placement", "fabric", fab(json!({"placement": "spread"})), &["error [placement] Unsupported placement"]),
        case(
            "invalid_fabric_max_distance_on_aws",
            "fabric",
            fab(json!({"max_distance": 2})),
            &["error [max_distance] Attribute not valid here"],
        ),
        case(
            "invalid_fabric_max_distance_range",
            "fabric",
            json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "H100", "max_distance": 4}),
            &["error [max_distance] Value out of range"],
        ),
        case(
            "invalid_fabric_max_distance_1_on_a3_ultra",
            "fabric",
            json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "H200", "max_distance": 1}),
            &["error [max_distance] Placement distance not allowed"],
        ),
        case(
            "invalid_fabric_resource_group_on_aws",
            "fabric",
            fab(json!({"resource_group": "rg"})),
            &["error [resource_group] Attribute not valid here"],
        ),
        case(
            "invalid_fabric_oci_without_compartment",
            "fabric",
            json!({"name": "t", "cloud": "oci", "region": "us-ashburn-1", "zone": "AD-1", "gpu": "H100"}),
            &["error [compartment_id] Missing compartment"],
        ),
        case("invalid_fabric_name", "fabric", fab(json!({"name": "Train_1"})), &["error [name] Invalid name"]),
        case(
            "invalid_fabric_reserved_tag",
            "fabric",
            fab(json!({"tags": {"hpc:cluster": "x"}})),
            &[r#"error [tags["hpc:cluster"]] Reserved tag key"#],
        ),
        case(
            "invalid_fabric_gcp_label",
            "fabric",
            json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "H100", "tags": {"Team": "ML"}}),
            &[r#"error [tags["Team"]] Invalid Google Cloud label"#],
        ),
        Case {
            gcp_project: false,
            ..case(
                "invalid_fabric_gcp_without_project",
                "fabric",
                json!({"name": "t", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "H100"}),
                &["error [cloud] Missing Google Cloud project"],
            )
        },
        case("invalid_cluster_node_count", "cluster", cl(aws_p5(), json!({"node_count": 0})), &["error [node_count] Value out of range"]),
        case(
            "invalid_cluster_capacity_type",
            "cluster",
            cl(aws_p5(), json!({"capacity_type": "preemptible"})),
            &["error [capacity_type] Unsupported capacity type"],
        ),
        case(
            "invalid_cluster_flex_start_on_aws",
            "cluster",
            cl(aws_p5(), json!({"capacity_type": "flex-start"})),
            &["error [capacity_type] Capacity type not offered"],
        ),
        case(
            "invalid_cluster_capacity_block_without_reservation",
            "cluster",
            cl(aws_p5(), json!({"capacity_type": "capacity-block"})),
            &["error [reservation_id] Missing reservation"],
        ),
        case(
            "invalid_cluster_reservation_id_on_demand",
            "cluster",
            cl(aws_p5(), json!({"reservation_id": "cr-1"})),
            &["error [reservation_id] Reservation without reserved capacity type"],
        ),
        case(
            "invalid_cluster_capacity_block_too_big",
            "cluster",
            cl(aws_p5(), json!({"capacity_type": "capacity-block", "reservation_id": "cr-1", "node_count": 65})),
            &["error [node_count] Too many nodes for a capacity block"],
        ),
        case(
            "invalid_cluster_azure_reservation_infiniband",
            "cluster",
            cl(azure_h100(), json!({"capacity_type": "reservation", "reservation_id": "crg"})),
            &["error [capacity_type] Reservation conflicts with InfiniBand"],
        ),
        case(
            "invalid_cluster_gcp_compact_too_big",
            "cluster",
            cl(gcp_mega(), json!({"node_count": 1501})),
            &["error [node_count] Too many nodes for compact placement"],
        ),
        // Compute Engine lists 500 instances a page, and a list follows at most 101 pages.
        case(
            "invalid_cluster_gcp_too_many_nodes_to_refresh",
            "cluster",
            cl(fabric_ref("gcp", "us-central1", Some("us-central1-a"), "a3-megagpu-8g", "none"), json!({"node_count": 50_501})),
            &["error [node_count] Too many nodes to refresh", "at most 50500 nodes", "instances.list, 500 a page for at most 101 pages"],
        ),
        case(
            "invalid_cluster_efa_count",
            "cluster",
            cl(aws_p5(), json!({"rdma_interfaces": 33})),
            &["error [rdma_interfaces] Unsupported RDMA interface count", "1 to 32"],
        ),
        case(
            "invalid_cluster_rdma_count_not_efa",
            "cluster",
            cl(azure_h100(), json!({"rdma_interfaces": 4})),
            &["error [rdma_interfaces] Unsupported RDMA interface count"],
        ),
        case(
            "invalid_cluster_user_data_size",
            "cluster",
            cl(aws_p5(), json!({"user_data": incompressible(24_000)})),
            &["error [user_data] User data too large"],
        ),
        // The join the provider adds counts: 15,000 bytes alone fit in EC2's 16 KB, not with the Slurm join.
        case(
            "invalid_cluster_user_data_with_slurm_join",
            "cluster",
            cl(
                aws_p5(),
                json!({"user_data": incompressible(15_000),
                                "slurm": {"controller_addresses": ["10.0.255.244"], "key": "k".repeat(88)}}),
            ),
            &["error [user_data] User data too large with the Slurm join", "yours is 15000 bytes"],
        ),
        // EC2 takes user data over 16 KB gzip-compressed: 40,000 bytes that compress well plan cleanly.
        case(
            "aws_cluster_large_user_data_compressed",
            "cluster",
            cl(aws_p5(), json!({"user_data": "#!/bin/sh\n".to_owned() + &"echo ok\n".repeat(5_000)})),
            &[],
        ),
        case(
            "invalid_cluster_ssh_public_key_path",
            "cluster",
            cl(aws_p5(), json!({"ssh_public_key": "~/.ssh/id_ed25519.pub"})),
            &["error [ssh_public_key] Invalid SSH public key", r#"file("~/.ssh/id_ed25519.pub")"#],
        ),
        case(
            "invalid_cluster_ssh_public_key_not_a_key",
            "cluster",
            cl(aws_p5(), json!({"ssh_public_key": "my laptop key"})),
            &["error [ssh_public_key] Invalid SSH public key", "not an OpenSSH public key"],
        ),
        case(
            "invalid_cluster_azure_tag_name",
            "cluster",
            cl(azure_h100(), json!({"tags": {"team<ml>": "x"}})),
            &["error [tags[\"team<ml>\"]] Invalid Azure tag name", "Azure refuses tag names"],
        ),
        case(
            "invalid_cluster_user_data_size_oci",
            "cluster",
            cl(oci_h100(), json!({"user_data": "x".repeat(24_000)})),
            &["error [user_data] User data too large", "32,000 bytes", "this is 24000 bytes"],
        ),
        case(
            "invalid_cluster_too_many_tags",
            "cluster",
            cl(azure_h100(), json!({"tags": (0..45).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()})),
            &["error [tags] Too many tags", "allows 50 tags", "at most 41 together"],
        ),
        case(
            "invalid_cluster_workload",
            "cluster",
            cl(aws_p5(), json!({"workload": "training"})),
            &["error [workload] Unsupported workload"],
        ),
        case(
            "invalid_cluster_capacity_policy",
            "cluster",
            cl(aws_p5(), json!({"capacity_policy": "best-effort"})),
            &["error [capacity_policy] Unsupported capacity policy", r#""all-or-nothing", "at-least" or "keep-partial""#],
        ),
        case(
            "invalid_cluster_min_nodes_without_at_least",
            "cluster",
            cl(aws_p5(), json!({"min_nodes": 2})),
            &["error [min_nodes] min_nodes without at-least", "(the default for pretraining clusters)"],
        ),
        case(
            "invalid_cluster_min_nodes_above_node_count",
            "cluster",
            cl(aws_p5(), json!({"capacity_policy": "at-least", "min_nodes": 5})),
            &["error [min_nodes] min_nodes above node_count", "from 1 to 4"],
        ),
        case(
            "aws_cluster_capacity_policy_at_least",
            "cluster",
            cl(aws_p5(), json!({"capacity_policy": "at-least", "min_nodes": 3})),
            &[r#""capacity_policy": "at-least""#, r#""min_nodes": 3"#],
        ),
        case(
            "invalid_cluster_timeout",
            "cluster",
            cl(aws_p5(), json!({"timeouts": {"create": "2 hours"}})),
            &["error [timeouts.create] Invalid duration"],
        ),
        case(
            "invalid_cluster_timeout_longer_than_a_day",
            "cluster",
            cl(aws_p5(), json!({"timeouts": {"create": "90h"}})),
            &["error [timeouts.create] Timeout too long", "at most \"24h\""],
        ),
        case(
            "invalid_cluster_timeout_too_large_to_count",
            "cluster",
            cl(aws_p5(), json!({"timeouts": {"update": "99999999999999999999999h"}})),
            &["error [timeouts.update] Invalid duration"],
        ),
        case(
            "invalid_cluster_waits_for_selfchecks_no_identity_can_publish_aws",
            "cluster",
            cl(aws_p5(), json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": selfcheck_user_data(true)})),
            &["error [node_identity] Missing node identity", "IAM instance profile", "ec2:SourceInstanceARN"],
        ),
        case(
            "invalid_cluster_waits_for_selfchecks_no_identity_can_publish_gcp",
            "cluster",
            cl(gcp_mega(), json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": selfcheck_user_data(true)})),
            &["error [node_identity] Missing node identity", "compute.instances.setLabels"],
        ),
        case(
            "invalid_cluster_waits_for_selfchecks_no_identity_can_publish_oci",
            "cluster",
            cl(oci_h100(), json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": selfcheck_user_data(true)})),
            &["error [node_identity] Missing node identity", "dynamic group"],
        ),
        // Waiting for a verdict no node publishes would wait out the update's timeout.
        case(
            "invalid_cluster_waits_for_selfcheck_without_user_data",
            "cluster",
            cl(aws_p5(), json!({"update_strategy": {"wait_for_selfcheck": true}, "node_identity": "hpc-selfcheck"})),
            &[
                "error [update_strategy.wait_for_selfcheck] No self-check to wait for",
                "the nodes have no user data",
                "user_data = data.hpc_gpu_selfcheck.<name>.combined_user_data",
            ],
        ),
        case(
            "invalid_cluster_waits_for_selfcheck_user_data_without_it",
            "cluster",
            cl(
                gcp_mega(),
                json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": "#!/bin/bash\necho hi\n",
                       "node_identity": "hpc-selfcheck@ml-prod.iam.gserviceaccount.com"}),
            ),
            &["error [update_strategy.wait_for_selfcheck] No self-check to wait for", "user_data carries no self-check"],
        ),
        case(
            "invalid_cluster_waits_for_selfcheck_write_only_user_data_without_it",
            "cluster",
            cl(
                oci_h100(),
                json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data_wo": "#cloud-config\npackages: [htop]\n",
                       "user_data_wo_version": 1, "node_identity": "ocid1.dynamicgroup.oc1..aaaa"}),
            ),
            &[
                "error [update_strategy.wait_for_selfcheck] No self-check to wait for",
                "user_data_wo carries no self-check",
                "user_data_wo = data.hpc_gpu_selfcheck.<name>.combined_user_data",
            ],
        ),
        case(
            "invalid_cluster_waits_for_selfcheck_that_does_not_publish",
            "cluster",
            cl(azure_h100(), json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": selfcheck_user_data(false)})),
            &["error [update_strategy.wait_for_selfcheck] Self-check does not publish its verdict", "publish_verdict = true"],
        ),
        // User data fetched at boot may hold the self-check: only a warning.
        case(
            "aws_cluster_waits_for_selfcheck_in_included_user_data",
            "cluster",
            cl(
                aws_p5(),
                json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": "#include\nhttps://boot.example.com/node\n",
                       "node_identity": "hpc-selfcheck"}),
            ),
            &["warning [update_strategy.wait_for_selfcheck] Self-check not seen in user data"],
        ),
        case(
            "aws_cluster_waits_for_selfcheck",
            "cluster",
            cl(
                aws_p5(),
                json!({"update_strategy": {"wait_for_selfcheck": true}, "user_data": selfcheck_user_data(true), "node_identity": "hpc-selfcheck"}),
            ),
            &[r#""wait_for_selfcheck": true"#],
        ),
        case(
            "invalid_cluster_node_identity_not_an_instance_profile",
            "cluster",
            cl(aws_p5(), json!({"node_identity": "arn:aws:iam::123:role/selfcheck"})),
            &["error [node_identity] Invalid node identity", "instance-profile"],
        ),
        case(
            "invalid_cluster_node_identity_on_azure",
            "cluster",
            cl(azure_h100(), json!({"node_identity": "selfcheck", "ssh_public_key": "ssh-ed25519 AAAA x"})),
            &["error [node_identity] Attribute not valid here", "Application Health"],
        ),
        case(
            "invalid_filesystem_timeout_longer_than_a_day",
            "filesystem",
            fs(aws_p5(), json!({"timeouts": {"create": "25h"}})),
            &["error [timeouts.create] Timeout too long"],
        ),
        case(
            "invalid_filesystem_tier",
            "filesystem",
            fs(aws_p5(), json!({"throughput_per_tib": 200})),
            &["error [throughput_per_tib] Unsupported throughput tier", r#""125", "250", "500" or "1000""#],
        ),
        case(
            "invalid_filesystem_fsx_capacity",
            "filesystem",
            fs(aws_p5(), json!({"capacity_gib": 3000})),
            &["error [capacity_gib] Unsupported Lustre capacity", r#""2400" or "4800""#],
        ),
        case(
            "invalid_filesystem_amlfs_capacity",
            "filesystem",
            fs(azure_h100(), json!({"capacity_gib": 10240, "throughput_per_tib": 125})),
            &["error [capacity_gib] Unsupported Lustre capacity", "16 TiB"],
        ),
        case(
            "invalid_filesystem_gcp_capacity",
            "filesystem",
            fs(gcp_mega(), json!({"capacity_gib": 12000})),
            &["error [capacity_gib] Unsupported Lustre capacity"],
        ),
        case(
            "invalid_filesystem_oci_capacity",
            "filesystem",
            fs(oci_h100(), json!({"capacity_gib": 20000})),
            &["error [capacity_gib] Unsupported Lustre capacity"],
        ),
        case(
            "invalid_filesystem_metadata_iops",
            "filesystem",
            fs(aws_p5(), json!({"metadata_iops": 2000})),
            &["error [metadata_iops] Unsupported metadata IOPS"],
        ),
        case(
            "invalid_filesystem_metadata_iops_off_aws",
            "filesystem",
            fs(oci_h100(), json!({"capacity_gib": 31200, "metadata_iops": 3000})),
            &["error [metadata_iops] Attribute not valid here"],
        ),
        case(
            "invalid_filesystem_data_repository",
            "filesystem",
            fs(aws_p5(), json!({"data_repository": "gs://bucket"})),
            &["error [data_repository] Unsupported data repository"],
        ),
        case(
            "invalid_filesystem_name",
            "filesystem",
            fs(gcp_mega(), json!({"capacity_gib": 36000, "filesystem_name": "scratch-01"})),
            &["error [filesystem_name] Invalid filesystem name"],
        ),
        case(
            "invalid_filesystem_name_on_fsx",
            "filesystem",
            fs(aws_p5(), json!({"filesystem_name": "scratch"})),
            &["error [filesystem_name] Filesystem name assigned by FSx"],
        ),
        case(
            "invalid_filesystem_maintenance_window",
            "filesystem",
            fs(azure_h100(), json!({"capacity_gib": 4096, "throughput_per_tib": 500, "maintenance_window": "Funday 25:00"})),
            &["error [maintenance_window] Invalid maintenance window"],
        ),
        case(
            "invalid_filesystem_maintenance_window_off_azure",
            "filesystem",
            fs(aws_p5(), json!({"maintenance_window": "Sunday 02:00"})),
            &["error [maintenance_window] Attribute not valid here"],
        ),
        // ----------------------------------------------------------------------------- checklist warnings
        case(
            "warn_no_placement",
            "cluster",
            cl(fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p5.48xlarge", "none"), json!({})),
            &["warning [fabric] No proximity placement"],
        ),
        // Media (transcoding) needs NVENC: refused on H100, which has none; the error names the node types that do.
        case(
            "invalid_media_on_p5",
            "cluster",
            cl(aws_p5(), json!({"workload": "media", "node_count": 2})),
            &["error [workload] No hardware video encoder", "g6.xlarge (1x L4, 2 NVENC each)", "g6e.48xlarge (8x L40S, 3 NVENC each)"],
        ),
        case(
            "media_on_l4_ethernet_only",
            "cluster",
            cl(fabric_ref("aws", "us-east-1", Some("us-east-1a"), "g6.xlarge", "none"), json!({"workload": "media", "node_count": 8})),
            &["\"interface_type\": \"interface\"", "\"NCCL_SOCKET_IFNAME\": \"^lo,docker\""],
        ),
        case(
            "gcp_inference_g2_l4",
            "cluster",
            cl(
                fabric_ref("gcp", "us-central1", Some("us-central1-a"), "g2-standard-4", "none"),
                json!({"workload": "inference", "node_count": 4}),
            ),
            &["\"NCCL_SOCKET_IFNAME\": \"eth0\""],
        ),
        case(
            "invalid_azure_nv_a10_without_image",
            "cluster",
            cl(fabric_ref("azure", "eastus", None, "Standard_NV36ads_A10_v5", "none"), json!({"workload": "inference"})),
            &["error [image] Missing image", "GRID driver"],
        ),
        case(
            "azure_inference_on_nv_a10",
            "cluster",
            cl(
                fabric_ref("azure", "eastus", None, "Standard_NV36ads_A10_v5", "none"),
                json!({"workload": "inference", "image": "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/a10-grid"}),
            ),
            &["\"NCCL_SOCKET_IFNAME\": \"eth0\""],
        ),
        case(
            "oci_media_on_a10_vm",
            "cluster",
            cl(
                fabric_ref("oci", "us-ashburn-1", Some("Uocm:US-ASHBURN-AD-1"), "VM.GPU.A10.1", "none"),
                json!({"workload": "media", "node_count": 2}),
            ),
            &["(agent defaults: no RDMA NICs)"],
        ),
        // Without a fabric: the cluster's own network leads the expansion; no placement, no RDMA pieces.
        case(
            "aws_inference_without_a_fabric",
            "cluster",
            json!({"name": "serve", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "gpu": "L4", "node_count": 4, "workload": "inference"}),
            &[r#""kind": "aws_vpc""#, r#""kind": "aws_launch_template""#, r#""id": "aws/us-east-1/serve""#, r#""placement": "none""#],
        ),
        case(
            "gcp_inference_without_a_fabric_joins_a_subnet",
            "cluster",
            json!({"name": "serve", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "instance_type": "g2-standard-4",
                   "vpc_id": "projects/p/global/networks/apps", "subnet_id": "projects/p/regions/us-central1/subnetworks/apps",
                   "node_count": 2, "workload": "inference"}),
            &[r#""kind": "google_compute_instance""#, r#""id": "gcp/us-central1-a/serve""#],
        ),
        case(
            "invalid_gcp_ethernet_fabric_on_an_existing_network",
            "fabric",
            json!({"name": "serve", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "L4", "placement": "none",
                   "vpc_id": "projects/p/global/networks/apps", "subnet_id": "projects/p/regions/us-central1/subnetworks/apps"}),
            &["error [vpc_id] Nothing for this fabric to build", "Leave the fabric out"],
        ),
        case(
            "invalid_cluster_without_fabric_or_cloud",
            "cluster",
            json!({"name": "serve", "node_count": 2, "workload": "inference"}),
            &["error [fabric] Missing fabric", r#"cloud ("aws", "azure", "gcp" or "oci")"#],
        ),
        case(
            "invalid_cluster_with_fabric_and_cloud",
            "cluster",
            cl(aws_p5(), json!({"gpu": "H100"})),
            &["error [gpu] Conflicting with fabric", "Remove gpu, or remove fabric"],
        ),
        case(
            "invalid_training_without_a_fabric",
            "cluster",
            json!({"name": "train", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "gpu": "H100", "node_count": 16}),
            &["error [fabric] Missing fabric", "16 nodes for pretraining train together", "placement = \"cluster\""],
        ),
        case(
            "single_node_finetuning_without_a_fabric",
            "cluster",
            json!({"name": "tune", "cloud": "azure", "region": "eastus", "gpu": "H100", "node_count": 1, "workload": "finetuning",
                   "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x"}),
            &[r#""kind": "azurerm_resource_group""#, r#""id": "azure/tune-rg/tune""#],
        ),
        // Azure: "Authentication using either SSH or by user name and password must be enabled in Linux profile."
        case(
            "invalid_azure_cluster_without_ssh_key",
            "cluster",
            json!({"name": "train", "fabric": azure_h100(), "node_count": 4}),
            &["error [ssh_public_key] Missing SSH key", "neither an SSH key nor a password"],
        ),
        case(
            "invalid_fabric_oci_vm_in_compute_cluster",
            "fabric",
            json!({"name": "train", "cloud": "oci", "region": "us-ashburn-1", "zone": "Uocm:US-ASHBURN-AD-1", "instance_type": "VM.GPU.A10.1", "compartment_id": "ocid1.compartment.oc1..x"}),
            &["error [placement] Placement not offered", "bare-metal RDMA shapes only"],
        ),
        // Reserved capacity on AWS is co-located and must not go into a placement group: no warning for "none".
        case(
            "no_placement_warning_for_a_capacity_block",
            "cluster",
            cl(
                fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p5.48xlarge", "none"),
                json!({"capacity_type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}),
            ),
            &[],
        ),
        case(
            "warn_training_without_rdma",
            "cluster",
            cl(fabric_ref("gcp", "us-central1", Some("us-central1-a"), "a3-highgpu-8g", "cluster"), json!({})),
            &["warning [fabric] Training without an RDMA fabric", "a3-ultragpu-8g"],
        ),
        case(
            "warn_inference_on_training_sku",
            "cluster",
            cl(aws_p5(), json!({"workload": "inference", "node_count": 1})),
            &["warning [workload] Inference on a training node type", "g6e.48xlarge"],
        ),
        case(
            "warn_filesystem_throughput",
            "filesystem",
            fs(aws_p5(), json!({"throughput_per_tib": 125, "cluster": {"name": "train", "gpus_total": 256, "workload": "pretraining"}})),
            &["warning [throughput_per_tib] Filesystem throughput too low for the cluster", "12800 MB/s"],
        ),
        // --------------------------------------------------------------------------------------- updates
        update(
            "update_cluster_node_count_in_place",
            "cluster",
            cl(aws_p5(), json!({})),
            cl(aws_p5(), json!({"node_count": 6})),
            &["## requires_replace\n(none)", r#""count": 6"#, r#""train-5""#],
        ),
        update(
            "update_cluster_capacity_type_replaces",
            "cluster",
            cl(aws_p5(), json!({})),
            cl(aws_p5(), json!({"capacity_type": "spot"})),
            &["## requires_replace\ncapacity_type"],
        ),
        update(
            "update_fabric_tags_in_place",
            "fabric",
            fab(json!({})),
            fab(json!({"tags": {"owner": "alice"}})),
            &["## requires_replace\n(none)", "owner=alice"],
        ),
        update("update_fabric_zone_replaces", "fabric", fab(json!({})), fab(json!({"zone": "us-east-1b"})), &["## requires_replace\nzone"]),
        update(
            "update_filesystem_grow_aws_in_place",
            "filesystem",
            fs(aws_p5(), json!({})),
            fs(aws_p5(), json!({"capacity_gib": 9600})),
            &["## requires_replace\n(none)", r#""storage_capacity": "9600""#],
        ),
        update(
            "update_filesystem_shrink_replaces",
            "filesystem",
            fs(aws_p5(), json!({"capacity_gib": 9600})),
            fs(aws_p5(), json!({})),
            &["## requires_replace\ncapacity_gib"],
        ),
        update(
            "update_filesystem_grow_azure_replaces",
            "filesystem",
            fs(azure_h100(), json!({"capacity_gib": 4096})),
            fs(azure_h100(), json!({"capacity_gib": 8192})),
            &["## requires_replace\ncapacity_gib"],
        ),
        update(
            "update_filesystem_tier_aws_in_place",
            "filesystem",
            fs(aws_p5(), json!({"throughput_per_tib": 250})),
            fs(aws_p5(), json!({})),
            &["## requires_replace\n(none)"],
        ),
        update(
            "update_filesystem_tier_gcp_replaces",
            "filesystem",
            fs(gcp_mega(), json!({"capacity_gib": 36000, "throughput_per_tib": 250})),
            fs(gcp_mega(), json!({"capacity_gib": 36000})),
            &["## requires_replace\nthroughput_per_tib"],
        ),
        // ------------------------------------------------- rack-scale NVLink domains (GB200/GB300 NVL72)
        case(
            "aws_cluster_gb200_ultraservers",
            "cluster",
            cl(
                fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "none"),
                json!({"node_count": 36, "capacity_type": "capacity-block", "reservation_id": "cb-0123", "image": "ami-0arm64"}),
            ),
            &[
                r#""kind": "aws_ec2_capacity_block""#,
                r#""ultraserver_type": "u-p6e-gb200x72""#,
                r#""name": "train-nvl1""#,
                r#""names": "train-18 .. train-35""#,
                r#""interface_type": "efa-only""#,
                "BlockName=train-nvl1 Nodes=train-[18-35]",
                "TopologyPlugin=topology/block",
                r#""NCCL_MNNVL_ENABLE": "1""#,
                r#""hpc-platform/nvlink-domain": "train-nvl1""#,
                // The cluster's job does not know the Slurm version: its nodes by name, no --segment (24.05's).
                "#SBATCH --nodelist=train-0,train-1,",
            ],
        ),
        case(
            "aws_cluster_gb200_without_capacity_block",
            "cluster",
            cl(
                fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "none"),
                json!({"node_count": 18, "image": "ami-0arm64"}),
            ),
            &["error [capacity_type] UltraServer without a Capacity Block", "u-p6e-gb200x72", "capacity-block"],
        ),
        case(
            "aws_cluster_gb200_reservation_not_a_block",
            "cluster",
            cl(
                fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "none"),
                json!({"node_count": 18, "capacity_type": "capacity-block", "reservation_id": "cr-0123", "image": "ami-0arm64"}),
            ),
            &["error [reservation_id] Capacity Block id expected"],
        ),
        case(
            "aws_cluster_gb200_partial_domain",
            "cluster",
            cl(
                fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "none"),
                json!({"node_count": 20, "capacity_type": "capacity-block", "reservation_id": "cb-0123", "image": "ami-0arm64"}),
            ),
            &["error [node_count] Not a whole number of NVLink domains", "18 (1 domain), 36 (2 domains) or 54 (3 domains)"],
        ),
        case(
            "aws_cluster_gb200_without_arm64_image",
            "cluster",
            cl(
                fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "none"),
                json!({"node_count": 18, "capacity_type": "capacity-block", "reservation_id": "cb-0123"}),
            ),
            &["error [image] Missing Arm64 image"],
        ),
        case(
            "gcp_cluster_a4x_two_domains",
            "cluster",
            cl(
                fabric_ref("gcp", "us-central1", Some("us-central1-a"), "a4x-highgpu-4g", "cluster"),
                json!({"node_count": 36, "capacity_type": "reservation", "reservation_id": "a4x-block", "image": "projects/p/global/images/arm64-gpu"}),
            ),
            &["BlockName=train-nvl0 Nodes=train-[0-17]", r#""NCCL_MNNVL_ENABLE": "1""#],
        ),
        case(
            "gcp_fabric_a4x",
            "fabric",
            json!({"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "GB200"}),
            &[r#""instance_type": "a4x-highgpu-4g""#, "train-rdma-3"],
        ),
        case(
            "gcp_fabric_a4x_max_distance",
            "fabric",
            json!({"name": "train", "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a", "gpu": "GB200", "max_distance": 2}),
            &["error [max_distance] Attribute not valid here", "gpuTopology 1x72"],
        ),
        case(
            "gcp_cluster_a4x_without_reservation",
            "cluster",
            cl(
                fabric_ref("gcp", "us-central1", Some("us-central1-a"), "a4x-highgpu-4g", "cluster"),
                json!({"node_count": 18, "image": "projects/p/global/images/arm64-gpu"}),
            ),
            &["error [capacity_type] A4X without a reservation", "capacity_type = \"reservation\""],
        ),
        case(
            "azure_cluster_gb300_two_racks",
            "cluster",
            cl(
                fabric_ref("azure", "eastus", None, "Standard_ND128isr_GB300_v6", "cluster"),
                json!({"node_count": 36, "image": "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/arm64-hpc"}),
            ),
            &[r#""nvlink_domains": "2 NVL72 rack(s) of 18 VMs"#, "BlockSizes=18", r#""gpus_total": 144"#],
        ),
        case(
            "oci_cluster_gb200_two_domains",
            "cluster",
            cl(
                fabric_ref("oci", "us-ashburn-1", Some("AD-1"), "BM.GPU.GB200.4", "cluster"),
                json!({"node_count": 36, "image": "ocid1.image.oc1..arm64gpu"}),
            ),
            &[
                "BlockName=train-nvl1 Nodes=train-[18-35]",
                r#""NCCL_MNNVL_ENABLE": "1""#,
                r#""launched_by": "oci_core_compute_gpu_memory_cluster.train-nvl1""#,
                r#""gpu_memory_fabric_id": "oci_core_compute_gpu_memory_fabric.train-nvl0""#,
            ],
        ),
        case(
            "invalid_fabric_oci_gb200_cluster_network",
            "fabric",
            json!({"name": "train", "cloud": "oci", "region": "us-ashburn-1", "zone": "Uocm:US-ASHBURN-AD-1", "instance_type": "BM.GPU.GB200.4",
                   "placement": "cluster-network", "compartment_id": "ocid1.compartment.oc1..x"}),
            &["error [placement] Placement not offered", "GPU memory clusters are built over a compute cluster", "placement = \"cluster\""],
        ),
    ];
    all.extend(node_pool_cases());
    all
}

const EKS: &str = "ml-prod";
const GKE: &str = "projects/ml-prod/locations/us-central1/clusters/ml";
const AKS: &str =
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/providers/Microsoft.ContainerService/managedClusters/ml";
const OKE: &str = "ocid1.cluster.oc1.iad.aaaaaaaaexample";
const NODE_ROLE: &str = "arn:aws:iam::123456789012:role/eks-gpu-nodes";
const OKE_IMAGE: &str = "ocid1.image.oc1.iad.aaaaaaaaokegpu";

/// A pool of 4 H100-class nodes on each cloud, with `extra` settings.
fn pool(fabric: J, cluster: &str, extra: J) -> J {
    let mut c = json!({"name": "gpu", "fabric": fabric, "kubernetes_cluster": cluster, "node_count": 4});
    c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    c
}

fn gcp_ultra() -> J {
    fabric_ref("gcp", "us-central1", Some("us-central1-b"), "a3-ultragpu-8g", "cluster")
}

/// `hpc_gpu_node_pool` (issue 37): a pool of 4 H100-class nodes on each cloud, and each refusal once.
fn node_pool_cases() -> Vec<Case> {
    let aws = |extra: J| {
        let mut c = pool(aws_p5(), EKS, json!({"node_role": NODE_ROLE}));
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        c
    };
    vec![
        case(
            "pool_aws_p5_4_nodes",
            "pool",
            aws(
                json!({"labels": {"example.com/team": "llm"}, "taint": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                       "autoscaling": {"min_count": 0, "max_count": 8}, "kubernetes_version": "1.33"}),
            ),
            &[
                r#""kind": "aws_eks_node_group""#,
                r#""efa_interfaces": "32""#,
                r#""placement.group_name": "aws_placement_group.train-pg""#,
                r#""capacity_type": "ON_DEMAND""#,
                r#""taints": "nvidia.com/gpu=present:NO_SCHEDULE""#,
                r#""vpc.amazonaws.com/efa": 32"#,
                "topology.k8s.aws/network-node-layer-1",
            ],
        ),
        case(
            "pool_aws_p5_capacity_block",
            "pool",
            aws(json!({"capacity_type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"})),
            &[r#""capacity_type": "CAPACITY_BLOCK""#, r#""instance_market_options.market_type": "capacity-block""#],
        ),
        case(
            "pool_gcp_a3_ultra_4_nodes",
            "pool",
            pool(gcp_ultra(), GKE, json!({"capacity_type": "spot"})),
            &[
                r#""kind": "google_container_node_pool""#,
                "COMPACT, policy_name = google_compute_resource_policy.train-placement",
                "train-rdma/train-rdma-7",
                "deviceMode: RDMA",
                r#""node_config.spot": "true""#,
                "cloud.google.com/gce-topology-subblock",
            ],
        ),
        case(
            "pool_gcp_a3_mega_4_nodes",
            "pool",
            pool(gcp_mega(), GKE, json!({})),
            &["train-gpu-7/train-gpu-7", "deviceMode: NetDevice", "nccl-tcpxo-installer.yaml"],
        ),
        case(
            "pool_azure_nd_h100_4_nodes",
            "pool",
            pool(azure_h100(), AKS, json!({"autoscaling": {"min_count": 2, "max_count": 100}})),
            &[
                r#""kind": "azurerm_kubernetes_cluster_node_pool""#,
                r#""proximity_placement_group_id": "azurerm_proximity_placement_group.train-ppg""#,
                r#""gpu_driver": "None (the NVIDIA GPU Operator installs it)""#,
                "kind: NicClusterPolicy",
                r#""rdma/rdma_shared_device": 1"#,
            ],
        ),
        case(
            "pool_oci_h100_4_nodes",
            "pool",
            pool(oci_h100(), OKE, json!({"image": OKE_IMAGE, "taint": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]})),
            &[
                r#""kind": "oci_containerengine_cluster""#,
                "oke-install.sh --apiserver-endpoint",
                "--register-with-taints=nvidia.com/gpu:NoSchedule",
                "oci.oraclecloud.com/rdma.local_block_id",
            ],
        ),
        case(
            "invalid_pool_without_fabric",
            "pool",
            json!({"name": "gpu", "kubernetes_cluster": EKS, "node_count": 4}),
            &["error [fabric] Missing fabric"],
        ),
        case("invalid_pool_aws_without_node_role", "pool", pool(aws_p5(), EKS, json!({})), &["error [node_role] Missing node role"]),
        case(
            "invalid_pool_aws_cluster_arn",
            "pool",
            aws(json!({"kubernetes_cluster": "arn:aws:eks:us-east-1:123456789012:cluster/ml"})),
            &["error [kubernetes_cluster] Invalid EKS cluster name"],
        ),
        case(
            "invalid_pool_gcp_cluster_elsewhere",
            "pool",
            pool(gcp_ultra(), "projects/ml-prod/locations/europe-west4/clusters/ml", json!({})),
            &["error [kubernetes_cluster] Cluster and fabric in different places"],
        ),
        case(
            "invalid_pool_gcp_image",
            "pool",
            pool(gcp_mega(), GKE, json!({"image": "ubuntu-2204"})),
            &["error [image] Unsupported GKE image type"],
        ),
        case(
            "invalid_pool_azure_name",
            "pool",
            pool(azure_h100(), AKS, json!({"name": "gpu-pool"})),
            &["error [name] Invalid AKS agent pool name"],
        ),
        case(
            "invalid_pool_azure_beyond_one_infiniband_fabric",
            "pool",
            pool(azure_h100(), AKS, json!({"autoscaling": {"min_count": 4, "max_count": 120}})),
            &["error [autoscaling] Pool larger than one InfiniBand fabric"],
        ),
        case(
            "invalid_pool_oci_autoscaling",
            "pool",
            pool(oci_h100(), OKE, json!({"image": OKE_IMAGE, "autoscaling": {"min_count": 1, "max_count": 8}})),
            &["error [autoscaling] Autoscaling self-managed OKE nodes"],
        ),
        case("invalid_pool_oci_without_image", "pool", pool(oci_h100(), OKE, json!({})), &["error [image] Missing OKE worker image"]),
        case(
            "invalid_pool_reserved_label",
            "pool",
            aws(json!({"labels": {"kubernetes.io/role": "gpu"}})),
            &["error [labels[\"kubernetes.io/role\"]] Reserved label key"],
        ),
        case(
            "invalid_pool_taint_effect",
            "pool",
            aws(json!({"taint": [{"key": "gpu", "effect": "NoScheduel"}]})),
            &["error [taint[0].effect] Unsupported taint effect"],
        ),
        case(
            "invalid_pool_count_outside_bounds",
            "pool",
            aws(json!({"autoscaling": {"min_count": 5, "max_count": 8}})),
            &["error [autoscaling] Node count outside the autoscaling bounds"],
        ),
        case(
            "invalid_pool_aws_version_with_custom_ami",
            "pool",
            aws(json!({"image": "ami-0123456789abcdef0", "kubernetes_version": "1.33"})),
            &["error [kubernetes_version] Version with a custom AMI"],
        ),
        case(
            "invalid_pool_kubernetes_version",
            "pool",
            aws(json!({"kubernetes_version": "v1.33"})),
            &["error [kubernetes_version] Invalid Kubernetes version"],
        ),
        case(
            "invalid_pool_rack_scale",
            "pool",
            aws(json!({"fabric": fabric_ref("aws", "us-east-1", Some("us-east-1a"), "p6e-gb200.36xlarge", "cluster"), "node_count": 18,
                       "capacity_type": "capacity-block", "reservation_id": "cb-0123456789abcdef0", "image": "ami-0123456789abcdef0"})),
            &["error [fabric] Rack-scale node type in a node pool"],
        ),
        Case {
            prior: Some(pool(azure_h100(), AKS, json!({}))),
            ..case(
                "pool_azure_grows_in_place",
                "pool",
                pool(azure_h100(), AKS, json!({"node_count": 6})),
                &["## requires_replace\n(none)", r#""node_count": "6""#],
            )
        },
    ]
}

fn to_json(v: &Value) -> J {
    match v {
        Value::Null => J::Null,
        Value::Unknown => J::String("(known after apply)".into()),
        Value::Bool(b) => J::Bool(*b),
        Value::Number(n) => n.as_i64().map_or_else(|| J::from(n.as_f64()), J::from),
        Value::String(s) => J::String(s.clone()),
        Value::List(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// The CLI's plan validity rules (OpenTofu objchange.AssertPlanValid), for top-level attributes: a
/// non-null config value comes back exactly; a null one may only be set if the attribute is computed;
/// on create only cloud-assigned attributes (and the owner marker, minted at apply) may be unknown.
fn check_validity(name: &str, schema: &Schema, config: &Value, planned: &Value, creating: bool) {
    let assigned = ["id", "owner", "vpc_id", "subnet_id", "mount_target", "mount_command", "nodes", "login_addresses", "login_command"];
    for a in &schema.block.attributes {
        let (c, p) = (config.get(&a.name), planned.get(&a.name));
        if !c.is_null() {
            assert_eq!(c, p, "{name}: planned {} differs from its configuration", a.name);
        } else if !a.computed {
            assert!(p.is_null(), "{name}: non-computed {} planned without configuration", a.name);
        }
        if creating && a.computed && c.is_null() {
            // FSx for Lustre chooses the mount name itself.
            let fsx_mount_name = a.name == "filesystem_name" && config.get("fabric").get("cloud").as_str() == Some("aws");
            // A cluster without a fabric learns its network's ids at apply; on a fabric it has none.
            let own_network = a.name == "network" && config.get("fabric").is_null();
            let cloud_assigned = assigned.contains(&a.name.as_str()) || fsx_mount_name || own_network;
            assert_eq!(p.is_wholly_known(), !cloud_assigned, "{name}: knownness of {} at plan time", a.name);
        }
    }
}

fn render(case: &Case) -> String {
    let r = resource(case.kind);
    let schema = r.schema();
    let ctx = context(case.gcp_project);
    let config = config_value(&schema, &case.config);
    let prior = case.prior.as_ref().map(|p| {
        // A prior state as a previous plan + apply left it: the planned values, with ids filled in.
        let cfg = config_value(&schema, p);
        let mut d = Diagnostics::new();
        let planned = r
            .plan(
                &ctx,
                PlanRequest { prior: &Value::Null, proposed: &proposed(&schema, &Value::Null, &cfg), config: &cfg, prior_private: &[] },
                &mut d,
            )
            .planned;
        let Value::Map(mut m) = planned else { panic!("{}: prior did not plan", case.name) };
        for (k, v) in m.iter_mut() {
            if v.is_unknown() {
                *v = Value::from(format!("{k}-0001"));
            }
        }
        Value::Map(m)
    });
    let prior = prior.unwrap_or(Value::Null);
    let mut diags = Diagnostics::new();
    r.validate(&config, &mut diags);
    let validate_diags = diags.clone();
    let mut diags = Diagnostics::new();
    let resp = r.plan(
        &ctx,
        PlanRequest { prior: &prior, proposed: &proposed(&schema, &prior, &config), config: &config, prior_private: &[] },
        &mut diags,
    );
    // Plan repeats every validation error (it sees the same, fully known, configuration); it may add the
    // checks that need the provider configuration, which validation does not have.
    for e in validate_diags.iter().filter(|d| d.severity == Severity::Error) {
        assert!(diags.0.contains(e), "{}: validation error {:?} missing at plan", case.name, e.summary);
    }

    let mut out = format!("# {} ({})\n## diagnostics\n", case.name, r.type_name());
    if diags.is_empty() {
        out.push_str("(none)\n");
    }
    for d in diags.iter() {
        let sev = if d.severity == Severity::Error { "error" } else { "warning" };
        let path = d.path.as_ref().map(|p| p.to_string()).unwrap_or_default();
        out.push_str(&format!("{sev} [{path}] {}: {}\n", d.summary, d.detail));
    }
    if !diags.has_errors() {
        check_validity(case.name, &schema, &config, &resp.planned, prior.is_null());
        out.push_str("## requires_replace\n");
        let replace: Vec<String> = resp.requires_replace.iter().map(|p| p.to_string()).collect();
        out.push_str(&if replace.is_empty() { "(none)".to_string() } else { replace.join("\n") });
        out.push_str("\n## planned\n");
        out.push_str(&serde_json::to_string_pretty(&to_json(&resp.planned)).unwrap());
        out.push('\n');
    }
    out
}

#[test]
fn planner_goldens() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens");
    let update = std::env::var_os("HPC_UPDATE_GOLDENS").is_some();
    let mut failures = Vec::new();
    let all = cases();
    let mut names: Vec<&str> = all.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate case names");
    for case in &all {
        let text = render(case);
        for needle in &case.expect {
            if !text.contains(needle) {
                failures.push(format!("{}: expected {needle:?} in\n{text}", case.name));
            }
        }
        if case.name.starts_with("invalid_") {
            let errors = text.lines().filter(|l| l.starts_with("error [")).count();
            if errors != 1 {
                failures.push(format!("{}: a validation case must fail with exactly one error, got {errors}\n{text}", case.name));
            }
        }
        let path = dir.join(format!("{}.txt", case.name));
        if update {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            failures.push(format!("{}: differs from {} (HPC_UPDATE_GOLDENS=1 to accept)", case.name, path.display()));
        }
    }
    if !update {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let file = entry.unwrap().file_name().to_string_lossy().trim_end_matches(".txt").to_owned();
            if !names.contains(&file.as_str()) {
                failures.push(format!("stale golden {file}.txt"));
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn planning_is_deterministic() {
    for case in cases().iter().take(27) {
        assert_eq!(render(case), render(case), "{}", case.name);
    }
}

/// A fabric and a 2-node cluster of `sku` on its cloud, as a user would write them (rack-scale node types:
/// whole NVLink domains, in the capacity each cloud sells them in).
fn catalog_configs(sku: &hpc_provider::catalog::Sku) -> [(&'static str, J); 2] {
    let (region, zone) = match sku.cloud {
        Cloud::Aws => ("us-east-1", Some("us-east-1a")),
        Cloud::Azure => ("eastus", None),
        Cloud::Gcp => ("us-central1", Some("us-central1-a")),
        Cloud::Oci => ("us-ashburn-1", Some("AD-1")),
    };
    // Ethernet node types (inference, media) go without proximity placement.
    let placement = if sku.fabric == hpc_provider::catalog::Fabric::None { "none" } else { "cluster" };
    let mut fabric = json!({"name": "f", "cloud": sku.cloud.as_str(), "region": region, "zone": zone, "instance_type": sku.name, "placement": placement});
    if sku.cloud == Cloud::Oci {
        fabric["compartment_id"] = json!("ocid1.compartment.oc1..x");
    }
    let mut cluster = json!({"name": "c", "node_count": 2, "fabric": fabric_ref(sku.cloud.as_str(), region, zone, sku.name, placement)});
    if sku.cloud == Cloud::Azure {
        // Azure needs a key (or a password) to let anyone into a Linux VM.
        cluster["ssh_public_key"] = json!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x");
    }
    if let Some(domain) = sku.nvlink_domain {
        // Rack-scale: whole NVLink domains, an Arm64 image, and the capacity each cloud sells them in.
        cluster["node_count"] = json!(domain.nodes);
        cluster["image"] = json!("arm64-gpu-image");
        match sku.cloud {
            Cloud::Aws => {
                cluster["capacity_type"] = json!("capacity-block");
                cluster["reservation_id"] = json!("cb-0123");
            }
            Cloud::Gcp => {
                cluster["capacity_type"] = json!("reservation");
                cluster["reservation_id"] = json!("a4x-block");
            }
            Cloud::Azure | Cloud::Oci => {}
        }
    }
    if sku.name.starts_with("Standard_NV") {
        // GRID-driver sizes have no default image.
        cluster["image"] = json!("/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/a10-grid");
    }
    [("fabric", fabric), ("cluster", cluster)]
}

/// The state planned for creating `cfg` as a `kind`, asserting no error.
fn planned_on_create(ctx: &Context, what: &str, kind: &str, cfg: &J) -> (Schema, Value, Value) {
    let r = resource(kind);
    let schema = r.schema();
    let config = config_value(&schema, cfg);
    let mut diags = Diagnostics::new();
    let resp = r.plan(
        ctx,
        PlanRequest { prior: &Value::Null, proposed: &proposed(&schema, &Value::Null, &config), config: &config, prior_private: &[] },
        &mut diags,
    );
    assert!(!diags.has_errors(), "{what} {kind}: {diags:?}");
    (schema, config, resp.planned)
}

/// Every node type in the catalog plans as a fabric and as a 2-node cluster on its cloud without errors,
/// and the cluster's expansion names the node type: nothing in the catalog is unreachable by the planner.
#[test]
fn every_catalog_node_type_plans() {
    let ctx = context(true);
    for sku in hpc_provider::catalog::SKUS {
        for (kind, cfg) in catalog_configs(sku) {
            let (schema, config, planned) = planned_on_create(&ctx, sku.name, kind, &cfg);
            check_validity(sku.name, &schema, &config, &planned, true);
            let text = serde_json::to_string(&to_json(&planned)).unwrap();
            assert!(text.contains(sku.name), "{} {kind}: node type not in the expansion", sku.name);
        }
    }
}

/// Kubernetes versions the rendered manifests are checked against: 1.31, and 1.37, the newest the pinned
/// schema package (tests/kubernetes/requirements.txt) holds.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.31.0", "1.37.0"];

/// Every node type's NCCL test Job (`nccl_test_kubernetes`, with the cloud's RDMA device resources and
/// environment), and each cloud's node pool's, is a valid `batch/v1` Job by Kubernetes' own published schemas, strictly (no field
/// Kubernetes does not know), as `kubernetes-validate` from PyPI reads them (`HPC_KUBERNETES_VALIDATE`, which
/// `./scripts/test.sh` installs and sets).
#[test]
fn every_node_types_nccl_test_job_is_valid_by_kubernetes_schemas() {
    let validate = std::env::var_os("HPC_KUBERNETES_VALIDATE").unwrap_or_else(|| {
        panic!(
            "HPC_KUBERNETES_VALIDATE is not set: ./scripts/test.sh installs kubernetes-validate from PyPI (scripts/lib.sh, \
             ensure_kubernetes_validate) and sets it to its command"
        )
    });
    let ctx = context(true);
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for sku in hpc_provider::catalog::SKUS {
        let [_, (kind, cfg)] = catalog_configs(sku);
        let (_, _, planned) = planned_on_create(&ctx, sku.name, kind, &cfg);
        let job =
            planned.get("nccl_test_kubernetes").as_str().unwrap_or_else(|| panic!("{}: no nccl_test_kubernetes", sku.name)).to_owned();
        assert!(job.contains("kind: Job"), "{}: {job}", sku.name);
        let path = dir.path().join(format!("{}-{}.yaml", sku.cloud.as_str(), sku.name.replace('.', "-")));
        std::fs::write(&path, job).unwrap();
        files.push(path);
    }
    // Each cloud's node pool's Job, with the pool's device resources (EFA, the RDMA shared device).
    for case in node_pool_cases().iter().filter(|c| !c.name.starts_with("invalid_") && c.prior.is_none()) {
        let (_, _, planned) = planned_on_create(&ctx, case.name, case.kind, &case.config);
        let job =
            planned.get("nccl_test_kubernetes").as_str().unwrap_or_else(|| panic!("{}: no nccl_test_kubernetes", case.name)).to_owned();
        let path = dir.path().join(format!("{}.yaml", case.name));
        std::fs::write(&path, job).unwrap();
        files.push(path);
    }
    for version in KUBERNETES_VERSIONS {
        let out = std::process::Command::new(&validate)
            .args(["--strict", "--quiet", "-k", version])
            .args(&files)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", validate.to_string_lossy()));
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "the NCCL test Jobs against Kubernetes {version}:\n{said}");
    }
}

/// Each cloud's node pool's custom resources (Kueue's `Topology` everywhere; GKE's `GKENetworkParamSet` and
/// `Network` objects) are valid by their CustomResourceDefinitions' schemas, strictly (no field the schema
/// does not declare), as Kueue's and GKE's networking API's Go modules publish them (`HPC_CRDS`, which
/// `./scripts/test.sh` fetches through the Go module proxy; tests/kubernetes/crds.txt). The NVIDIA Network
/// Operator's `NicClusterPolicy` is the one kind left unchecked: the proxy does not serve its module here.
#[test]
fn every_pools_custom_resources_are_valid_by_their_crds() {
    let need = |var: &str| std::env::var_os(var).unwrap_or_else(|| panic!("{var} is not set: ./scripts/test.sh sets it (scripts/lib.sh)"));
    let crds = need("HPC_CRDS");
    let python = std::path::Path::new(&need("HPC_KUBERNETES_VALIDATE")).with_file_name("python");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubernetes/validate_crds.py");
    let check = |files: &[PathBuf]| {
        let out = std::process::Command::new(&python)
            .arg(&script)
            .arg("--crds")
            .arg(&crds)
            .args(files)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let ctx = context(true);
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for case in node_pool_cases().iter().filter(|c| !c.name.starts_with("invalid_") && c.prior.is_none()) {
        let (_, _, planned) = planned_on_create(&ctx, case.name, case.kind, &case.config);
        for attr in ["kueue_topology", "device_plugin"] {
            let text = planned.get(attr).as_str().unwrap_or_default().to_owned();
            // Helm values (EFA's) are not a manifest.
            if text.contains("\napiVersion: ") || text.starts_with("apiVersion: ") {
                let path = dir.path().join(format!("{}-{attr}.yaml", case.name));
                std::fs::write(&path, text).unwrap();
                files.push(path);
            }
        }
    }
    let (ok, said) = check(&files);
    assert!(ok, "the pools' custom resources by their CRDs:\n{said}");
    let kinds = |word: &str| -> std::collections::BTreeSet<String> {
        said.lines().filter_map(|l| l.strip_prefix(word)).map(str::to_owned).collect()
    };
    let checked: Vec<String> = kinds("checked ").into_iter().collect();
    assert_eq!(checked, ["kueue.x-k8s.io/v1beta2 Topology", "networking.gke.io/v1 GKENetworkParamSet", "networking.gke.io/v1 Network"]);
    let unchecked: Vec<String> = kinds("unchecked ").into_iter().collect();
    assert_eq!(unchecked, ["mellanox.com/v1alpha1 NicClusterPolicy"], "{said}");
    // The check can fail: a field the CRD does not have, and a value outside its enum.
    let broken = dir.path().join("broken.yaml");
    let gke = files.iter().find(|f| f.to_string_lossy().contains("gcp") && f.to_string_lossy().contains("device_plugin")).unwrap();
    let text = std::fs::read_to_string(gke).unwrap().replacen("deviceMode: ", "devicemode: ", 1);
    std::fs::write(&broken, text.replace("nodeLabel:", "nodeLabels:")).unwrap();
    let (ok, said) = check(std::slice::from_ref(&broken));
    assert!(!ok && said.contains("'devicemode' was unexpected"), "{said}");
}

/// Diagnostics of validating and of planning (on create) `config` as a `kind`, and the planned state.
fn validate_and_plan(kind: &str, config: &J) -> (Diagnostics, Diagnostics, Value) {
    let r = resource(kind);
    let schema = r.schema();
    let config = config_value(&schema, config);
    let mut validated = Diagnostics::new();
    r.validate(&config, &mut validated);
    let mut planned = Diagnostics::new();
    let resp = r.plan(
        &context(true),
        PlanRequest { prior: &Value::Null, proposed: &proposed(&schema, &Value::Null, &config), config: &config, prior_private: &[] },
        &mut planned,
    );
    (validated, planned, resp.planned)
}

/// Azure Managed Lustre always mounts as "lustrefs": another filesystem_name is refused at filesystem_name
/// (at validation and at plan), not silently replaced; "lustrefs", or no name, plans as the AMLFS golden.
#[test]
fn azure_filesystem_name_must_be_lustrefs() {
    let fs = |name: Option<&str>| {
        let mut c = json!({"name": "scratch", "fabric": azure_h100(), "capacity_gib": 16384, "throughput_per_tib": 125,
            "data_repository": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/data-rg/providers/Microsoft.Storage/storageAccounts/acct/blobServices/default/containers/data"});
        if let Some(n) = name {
            c["filesystem_name"] = json!(n);
        }
        c
    };
    let (validated, planned, _) = validate_and_plan("filesystem", &fs(Some("abc")));
    for (when, diags) in [("validate", &validated), ("plan", &planned)] {
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| format!("[{}] {}", d.path.as_ref().map(|p| p.to_string()).unwrap_or_default(), d.summary))
            .collect();
        assert_eq!(errors, ["[filesystem_name] Filesystem name fixed by Azure Managed Lustre"], "{when}");
    }
    let golden =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/azure_filesystem_amlfs.txt")).unwrap();
    let golden_planned = golden.split_once("## planned\n").unwrap().1;
    for name in [None, Some("lustrefs")] {
        let (validated, planned, state) = validate_and_plan("filesystem", &fs(name));
        assert!(validated.is_empty() && planned.is_empty(), "{name:?}: {validated:?} {planned:?}");
        assert_eq!(state.get("filesystem_name").as_str(), Some("lustrefs"), "{name:?}");
        let text = serde_json::to_string_pretty(&to_json(&state)).unwrap() + "\n";
        assert_eq!(text, golden_planned, "{name:?}");
    }
}

/// The quota diagnostic a plan short of quota shows, per cloud: each quota the cloud's nodes draw on (from
/// the cloud's backend, as the plan-time check asks it; Azure's Regular VMs: the family's and the regional
/// `cores`) and the figures, for 4 new nodes against a quota with room for 2 (1 node's worth in use). `HPC_UPDATE_GOLDENS=1` rewrites `tests/goldens-quota/`.
#[test]
fn quota_diagnostic_goldens() {
    use hpc_provider::clouds::{backend, quota::QuotaReading};
    use hpc_provider::planner::spec::parse_cluster;
    use hpc_provider::resources::capacity::shortfall;
    let cl = |fabric: J, extra: J| {
        let key = if fabric["cloud"] == "azure" { json!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc ml@x") } else { J::Null };
        let mut base = json!({"name": "train", "fabric": fabric, "node_count": 4, "ssh_public_key": key});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    };
    let cases = [
        ("aws_p5_on_demand", cl(aws_p5(), json!({}))),
        ("aws_p5_spot", cl(aws_p5(), json!({"capacity_type": "spot"}))),
        ("aws_p5_capacity_block", cl(aws_p5(), json!({"capacity_type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}))),
        ("gcp_a3_mega_on_demand", cl(gcp_mega(), json!({}))),
        ("gcp_a3_mega_spot", cl(gcp_mega(), json!({"capacity_type": "spot"}))),
        ("azure_h100_on_demand", cl(azure_h100(), json!({}))),
        ("azure_h100_spot", cl(azure_h100(), json!({"capacity_type": "spot"}))),
        ("oci_h100_on_demand", cl(oci_h100(), json!({}))),
    ];
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens-quota");
    let update = std::env::var_os("HPC_UPDATE_GOLDENS").is_some();
    std::fs::create_dir_all(&dir).unwrap();
    let schema = GpuCluster.schema();
    let mut failures = Vec::new();
    for (name, config) in cases {
        let config = config_value(&schema, &config);
        let mut diags = Diagnostics::new();
        let spec = parse_cluster(&config, &mut diags).unwrap_or_else(|| panic!("{name}: {diags:?}"));
        let families = backend::cluster(spec.fabric.cloud).quotas(&spec);
        let mut text = format!("# {name}\n");
        if families.is_empty() {
            text += "no quota is read: the nodes draw on none the provider knows (a reservation bounds them)\n";
        }
        for f in families {
            let reading = QuotaReading { limit: 2 * f.per_node, used: f.per_node };
            let (summary, detail) = shortfall(&spec, 4, &f, reading, 0).expect("4 nodes do not fit in 2");
            text += &format!(
                "quota: {} ({}) in {}, {} {} a node\nerror [node_count] {summary}: {detail}\n",
                f.name, f.id, f.scope, f.per_node, f.unit
            );
        }
        let path = dir.join(format!("{name}.txt"));
        if update {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            failures.push(format!("{name}: differs from {} (HPC_UPDATE_GOLDENS=1 to accept):\n{text}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
