//! `examples/kubernetes/<cloud>` with the real CLIs: a GPU node pool joined to a Kubernetes cluster another
//! team made (here with the vendor's own SDK, beside the configuration). The pool plans with the node
//! type's RDMA interfaces and the fabric's placement, applies, re-plans empty, shows a size changed outside
//! and puts it back, grows in place, is imported back equal, and is destroyed, leaving the other team's
//! cluster and network as they were.

use aws_sdk_eks::types::{NodegroupScalingConfig, Taint, TaintEffect, UpdateLabelsPayload, UpdateTaintsPayload, VpcConfigRequest};
use hpc_emulators::harness::admin;
use serde_json::Value;

use crate::cli::{Cli, Workdir, fold};
use crate::examples::{Emulators, apply, install, outputs};

fn eks(endpoint: &str) -> aws_sdk_eks::Client {
    let config = aws_sdk_eks::Config::builder()
        .behavior_version(aws_sdk_eks::config::BehaviorVersion::latest())
        .region(aws_sdk_eks::config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("other-team", "other-team", None, None, "static"))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_eks::Client::from_conf(config)
}

fn plan(w: &Workdir, code: i32) -> String {
    fold(&w.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]).expect_code(code).stdout)
}

/// The other team's estate: a VPC, a subnet and an EKS cluster in them.
struct Estate {
    vpc: String,
    subnet: String,
    cluster: String,
}

fn make_estate(rt: &tokio::runtime::Runtime, endpoint: &str) -> Estate {
    let ec2 = crate::aws::ec2(endpoint);
    let eks = eks(endpoint);
    rt.block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.30.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block("10.30.0.0/20")
            .availability_zone("us-east-1a")
            .send()
            .await
            .unwrap()
            .subnet
            .unwrap()
            .subnet_id
            .unwrap();
        eks.create_cluster()
            .name("ml-prod")
            .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
            .version("1.33")
            .resources_vpc_config(VpcConfigRequest::builder().subnet_ids(&subnet).build())
            .send()
            .await
            .unwrap();
        Estate { vpc, subnet, cluster: "ml-prod".into() }
    })
}

/// The node group as EKS describes it.
fn node_group(rt: &tokio::runtime::Runtime, endpoint: &str) -> aws_sdk_eks::types::Nodegroup {
    rt.block_on(async {
        eks(endpoint).describe_nodegroup().cluster_name("ml-prod").nodegroup_name("gpu").send().await.unwrap().nodegroup.unwrap()
    })
}

pub fn aws_node_pool_lifecycle(cli: &Cli) {
    let clouds = Emulators::start();
    let endpoint = clouds.aws.endpoint.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let estate = make_estate(&rt, &endpoint);
    let w = clouds
        .env(Workdir::for_path(cli, "examples/kubernetes/aws"))
        .env("TF_VAR_vpc_id", &estate.vpc)
        .env("TF_VAR_subnet_id", &estate.subnet)
        .env("TF_VAR_eks_cluster", &estate.cluster);
    install(&w);
    let planned = plan(&w, 2);
    for piece in
        ["aws_eks_node_group", "gpu-pool-lt", "\"efa_interfaces\" = \"32\"", "aws_placement_group.train-pg", "vpc.amazonaws.com/efa"]
    {
        assert!(planned.contains(piece), "{piece} in the plan:\n{planned}");
    }
    let others = admin(&endpoint, "GET", "snapshot", None);
    apply(&w).expect_code(0);
    plan(&w, 0);

    // What EKS and EC2 hold: the node group over our launch template, its size, labels and taint; the
    // template with one EFA interface per card in the fabric's and the cluster's security groups, no
    // subnet on any (EKS refuses one), and the fabric's placement group.
    let group = node_group(&rt, &endpoint);
    let scaling = group.scaling_config().unwrap();
    assert_eq!((scaling.min_size(), scaling.max_size(), scaling.desired_size()), (Some(4), Some(4), Some(4)));
    let labels = group.labels().unwrap();
    assert_eq!(labels.get("example.com/team").map(String::as_str), Some("llm"));
    assert_eq!(labels.get("hpc-platform/cluster").map(String::as_str), Some("gpu"));
    assert_eq!(group.taints().len(), 1);
    assert_eq!(group.taints()[0].effect().map(|e| e.as_str()), Some("NO_SCHEDULE"));
    assert_eq!(group.subnets(), std::slice::from_ref(&estate.subnet));
    assert_eq!(group.capacity_type().map(|c| c.as_str()), Some("ON_DEMAND"));
    let template = group.launch_template().unwrap();
    assert_eq!(template.name(), Some("gpu-pool-lt"));
    let cluster_sg = rt.block_on(async {
        eks(&endpoint)
            .describe_cluster()
            .name("ml-prod")
            .send()
            .await
            .unwrap()
            .cluster
            .unwrap()
            .resources_vpc_config
            .unwrap()
            .cluster_security_group_id
            .unwrap()
    });
    let data = rt.block_on(async {
        crate::aws::ec2(&endpoint)
            .describe_launch_template_versions()
            .launch_template_id(template.id().unwrap())
            .versions(template.version().unwrap())
            .send()
            .await
            .unwrap()
            .launch_template_versions()[0]
            .launch_template_data()
            .cloned()
            .unwrap()
    });
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 32, "one EFA interface per network card");
    assert!(nics.iter().all(|n| n.subnet_id().is_none() && n.groups().contains(&cluster_sg) && n.groups().len() == 2), "{nics:?}");
    assert_eq!(data.placement().and_then(|p| p.group_name()), Some("train-pg"));
    // The vendor's own client reads the same, and another team's node group comes and goes beside ours.
    let owner = crate::cli::state_values(&w)["hpc_gpu_node_pool.gpu"]["owner"].as_str().unwrap_or_default().to_owned();
    let boto3 = crate::vendor_clients::vendor(
        "HPC_MOTO_PYTHON",
        "aws_eks.py",
        &[
            ("endpoint", &endpoint),
            ("region", "us-east-1"),
            ("cluster", "ml-prod"),
            ("pool", "gpu"),
            ("owner", &owner),
            ("subnet", &estate.subnet),
            ("efa", "32"),
        ],
    );
    assert_eq!(boto3.summary["pool"]["placement_group"], "train-pg", "{}", boto3.summary);
    assert_eq!(boto3.summary["own"]["deleted"], true, "{}", boto3.summary);
    boto3.found_nothing_wrong();
    plan(&w, 0);
    let out = outputs(&w);
    assert_eq!(out["device_resources"]["value"]["vpc.amazonaws.com/efa"], 32, "{out}");
    assert!(out["kueue_topology"]["value"].as_str().unwrap().contains("kind: Topology"), "{out}");

    // A size, a label and a taint changed outside show in the plan, and the apply puts them back.
    rt.block_on(async {
        eks(&endpoint)
            .update_nodegroup_config()
            .cluster_name("ml-prod")
            .nodegroup_name("gpu")
            .scaling_config(NodegroupScalingConfig::builder().min_size(2).max_size(2).desired_size(2).build())
            .labels(UpdateLabelsPayload::builder().add_or_update_labels("example.com/team", "other").build())
            .taints(
                UpdateTaintsPayload::builder()
                    .add_or_update_taints(Taint::builder().key("nvidia.com/gpu").value("present").effect(TaintEffect::NoExecute).build())
                    .remove_taints(Taint::builder().key("nvidia.com/gpu").effect(TaintEffect::NoSchedule).build())
                    .build(),
            )
            .send()
            .await
            .unwrap();
    });
    let drift = plan(&w, 2);
    assert!(drift.contains("~ node_count") && drift.contains("2 -> 4"), "{drift}");
    assert!(drift.contains(r#""NoExecute" -> "NoSchedule""#) && drift.contains(r#""other" -> "llm""#), "{drift}");
    assert!(drift.contains("0 to add, 1 to change, 0 to destroy"), "{drift}");
    apply(&w).expect_code(0);
    let repaired = node_group(&rt, &endpoint);
    assert_eq!(repaired.scaling_config().unwrap().desired_size(), Some(4));
    assert_eq!(repaired.labels().and_then(|l| l.get("example.com/team")).map(String::as_str), Some("llm"));
    let taints: Vec<_> = repaired.taints().iter().map(|t| (t.key(), t.effect().map(|e| e.as_str()))).collect();
    assert_eq!(taints, [(Some("nvidia.com/gpu"), Some("NO_SCHEDULE"))]);
    plan(&w, 0);

    // Growing is a change in place: the same node group and template version, six nodes.
    w.write("grow.auto.tfvars", "node_count = 6\n");
    let grown = &w;
    let planned = plan(grown, 2);
    assert!(planned.contains("0 to add, 1 to change, 0 to destroy") && planned.contains("4 -> 6"), "{planned}");
    apply(grown).expect_code(0);
    let group = node_group(&rt, &endpoint);
    assert_eq!(group.scaling_config().unwrap().desired_size(), Some(6));
    assert_eq!(group.launch_template().unwrap().version(), template.version(), "no rolling update for a size");
    plan(grown, 0);

    // A change to what the nodes are made from is a rolling update: a new template version that EKS rolls
    // out by update_strategy, in place, with nothing destroyed.
    w.write("roll.auto.tfvars", "user_data = \"#!/bin/bash\\necho tuned > /etc/motd\\n\"\n");
    let planned = plan(grown, 2);
    assert!(planned.contains("0 to add, 1 to change, 0 to destroy") && planned.contains("user_data"), "{planned}");
    let said = grown.run(&["plan", "-no-color", "-input=false"]).expect_code(0).output();
    assert!(
        said.contains("Warning: The pool's nodes are replaced") && fold(&said).contains("user_data change what the nodes are made from"),
        "{said}"
    );
    apply(grown).expect_code(0);
    let rolled = node_group(&rt, &endpoint);
    assert_ne!(rolled.launch_template().unwrap().version(), template.version(), "the node group takes the new template version");
    assert_eq!(rolled.scaling_config().unwrap().desired_size(), Some(6));
    plan(grown, 0);

    // Imported back from the cloud, it equals what the apply made: the next plan is empty.
    let before = crate::cli::state_values(grown);
    grown.run(&["state", "rm", "hpc_gpu_node_pool.gpu"]).expect_code(0);
    grown.run(&["import", "-no-color", "-input=false", "hpc_gpu_node_pool.gpu", "aws/us-east-1/ml-prod/gpu"]).expect_code(0);
    plan(grown, 0);
    let after = crate::cli::state_values(grown);
    for key in ["node_count", "labels", "taint", "node_labels", "expansion", "id", "kubernetes_cluster"] {
        let find = |m: &std::collections::BTreeMap<String, Value>| m.get(&format!("hpc_gpu_node_pool.gpu.{key}")).cloned();
        assert_eq!(find(&after), find(&before), "{key} after import");
    }

    // Destroy takes the node group and its template, and leaves the other team's cluster, VPC and subnet.
    grown.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let inv = admin(&endpoint, "GET", "inventory", None);
    assert_eq!(inv["resources"]["eks"]["nodegroups"], serde_json::json!([]), "{inv}");
    assert_eq!(inv["resources"]["eks"]["clusters"], serde_json::json!(["ml-prod"]), "{inv}");
    assert_eq!(inv["resources"]["ec2"]["launch_templates"], serde_json::json!([]), "{inv}");
    let left = admin(&endpoint, "GET", "snapshot", None);
    for id in [format!("eks/{}", estate.cluster), estate.vpc.clone(), estate.subnet.clone()] {
        assert_eq!(left["resources"][&id], others["resources"][&id], "{id} untouched");
    }
    rt.block_on(async {
        eks(&endpoint).delete_cluster().name("ml-prod").send().await.unwrap();
        let ec2 = crate::aws::ec2(&endpoint);
        ec2.delete_subnet().subnet_id(&estate.subnet).send().await.unwrap();
        ec2.delete_vpc().vpc_id(&estate.vpc).send().await.unwrap();
    });
    clouds.assert_empty("kubernetes/aws");
}

/// The Azure SDKs' script on the ARM emulator in one `mode` (azure_aks.py), with more `args`.
fn azure_sdk(clouds: &Emulators, mode: &str, args: &[(&str, &str)]) -> crate::vendor_clients::Vendor {
    let ca = clouds.azure.1.display().to_string();
    let mut all = vec![("endpoint", clouds.azure.0.as_str()), ("ca", ca.as_str()), ("subscription", SUBSCRIPTION), ("mode", mode)];
    all.extend_from_slice(args);
    crate::vendor_clients::vendor("HPC_CONFORMANCE_PYTHON", "azure_aks.py", &all)
}

const SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

pub fn azure_node_pool_lifecycle(cli: &Cli) {
    let clouds = Emulators::start();
    let arm = |method: &str, route: &str| hpc_emulators::harness::azure_admin(&clouds.azure.0, &clouds.azure.1, method, route, None);
    // The other team's estate, made with the Azure SDKs: a resource group, a virtual network and an AKS cluster.
    let estate = azure_sdk(&clouds, "estate", &[]);
    estate.found_nothing_wrong();
    let text = |k: &str| estate.summary[k].as_str().unwrap().to_owned();
    let (cluster, vnet, subnet) = (text("cluster"), text("vnet"), text("subnet"));
    let w = clouds
        .env(Workdir::for_path(cli, "examples/kubernetes/azure"))
        .env("TF_VAR_aks_cluster_id", &cluster)
        .env("TF_VAR_vnet_id", &vnet)
        .env("TF_VAR_subnet_id", &subnet);
    install(&w);
    let planned = plan(&w, 2);
    for piece in ["azurerm_kubernetes_cluster_node_pool", "Standard_ND96isr_H100_v5", "azurerm_proximity_placement_group.gpu-ppg", "rdma/"]
    {
        assert!(planned.contains(piece), "{piece} in the plan:\n{planned}");
    }
    let system = format!("{cluster}/agentPools/system").to_lowercase();
    let before = arm("GET", "snapshot");
    apply(&w).expect_code(0);
    plan(&w, 0);

    // The Azure SDK reads the agent pool back: size, VM size, subnet, proximity placement group, GPU driver,
    // the owner's marker; and makes, scales and deletes a pool of its own beside it.
    let owner =
        crate::cli::state_values_in(&w, "module.gpu")["module.gpu.hpc_gpu_node_pool.this"]["owner"].as_str().unwrap_or_default().to_owned();
    let ppg = format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/gpu-rg/providers/Microsoft.Compute/proximityPlacementGroups/gpu-ppg");
    let check = |count: &str| {
        let v = azure_sdk(&clouds, "check", &[("pool", "gpu"), ("owner", &owner), ("subnet", &subnet), ("ppg", &ppg), ("count", count)]);
        v.found_nothing_wrong();
        v.summary
    };
    let read = check("4");
    assert_eq!(read["pool"]["taints"], serde_json::json!(["nvidia.com/gpu=present:NoSchedule"]), "{read}");
    assert_eq!(read["pool"]["labels"]["example.com/team"], "llm", "{read}");
    assert_eq!(read["own"]["deleted"], true, "{read}");

    // A count, a taint and a label changed outside show in the plan, and the apply puts them back.
    let taints = r#"["nvidia.com/gpu=present:NoExecute"]"#;
    let labels = r#"{"example.com/team": "other", "hpc-platform/cluster": "gpu"}"#;
    azure_sdk(&clouds, "scale", &[("pool", "gpu"), ("count", "2"), ("taints", taints), ("labels", labels)]).found_nothing_wrong();
    let repaired = repairs_grows_and_imports(&w, &check, "azure/ml-rg/ml-prod/gpu");
    assert_eq!(repaired["pool"]["taints"], serde_json::json!(["nvidia.com/gpu=present:NoSchedule"]), "{repaired}");
    assert_eq!(repaired["pool"]["labels"]["example.com/team"], "llm", "{repaired}");

    // Destroy takes the agent pool and the fabric's pieces; the cluster and its system pool are as they were.
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let after = arm("GET", "snapshot");
    let key = cluster.to_lowercase();
    assert_eq!(after["arm"][&key], before["arm"][&key], "the AKS cluster is untouched");
    assert_eq!(after["arm"][&system], before["arm"][&system], "its system pool is untouched");
    assert!(after["arm"].get(format!("{key}/agentpools/gpu")).is_none(), "{after}");
    azure_sdk(&clouds, "remove", &[]).found_nothing_wrong();
    clouds.assert_empty("kubernetes/azure");
}

/// The part every module-made pool's case shares, after a size (to 2), a label and the GPU taint's effect
/// were changed outside: the plan shows them, the apply puts them back (the vendor's read, `check`, after it
/// is returned); growing to 6 is an update in place; an import by `import_id` gives back an equal state.
fn repairs_grows_and_imports(w: &Workdir, check: &dyn Fn(&str) -> Value, import_id: &str) -> Value {
    let drift = plan(w, 2);
    assert!(drift.contains("~ node_count") && drift.contains("2 -> 4") && drift.contains("0 to add, 1 to change, 0 to destroy"), "{drift}");
    assert!(drift.contains(r#""NoExecute" -> "NoSchedule""#) && drift.contains(r#""other" -> "llm""#), "{drift}");
    apply(w).expect_code(0);
    plan(w, 0);
    let repaired = check("4");

    // Growing is the same pool, larger.
    w.write("grow.auto.tfvars", "node_count = 6\n");
    let planned = plan(w, 2);
    assert!(planned.contains("0 to add, 1 to change, 0 to destroy") && planned.contains("4 -> 6"), "{planned}");
    apply(w).expect_code(0);
    plan(w, 0);
    check("6");

    // Imported back, it equals what the apply made.
    let pool =
        |w: &Workdir| crate::cli::state_values_in(w, "module.gpu").get("module.gpu.hpc_gpu_node_pool.this").cloned().unwrap_or_default();
    let made = pool(w);
    w.run(&["state", "rm", "module.gpu.hpc_gpu_node_pool.this"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "module.gpu.hpc_gpu_node_pool.this", import_id]).expect_code(0);
    plan(w, 0);
    let imported = pool(w);
    for key in ["node_count", "labels", "taint", "node_labels", "expansion", "id", "kubernetes_cluster", "fabric"] {
        assert_eq!(imported[key], made[key], "{key} after import");
    }
    repaired
}

/// Google's client script on the Google Cloud emulator in one `mode` (gcp_gke.py), with more `args`.
fn gcp_client(clouds: &Emulators, mode: &str, args: &[(&str, &str)]) -> crate::vendor_clients::Vendor {
    let mut all = vec![("endpoint", clouds.gcp.as_str()), ("project", GCP_PROJECT), ("mode", mode)];
    all.extend_from_slice(args);
    crate::vendor_clients::vendor("HPC_CONFORMANCE_PYTHON", "gcp_gke.py", &all)
}

const GCP_PROJECT: &str = "ml-platform-prod";

pub fn gcp_node_pool_lifecycle(cli: &Cli) {
    let clouds = Emulators::start();
    // The other team's estate, made with Google's client: a VPC, a subnetwork and a GKE cluster with
    // multi-networking.
    let estate = gcp_client(&clouds, "estate", &[]);
    estate.found_nothing_wrong();
    let text = |k: &str| estate.summary[k].as_str().unwrap().to_owned();
    let (cluster, vpc, subnet) = (text("cluster"), text("vpc"), text("subnet"));
    let w = clouds
        .env(Workdir::for_path(cli, "examples/kubernetes/gcp"))
        .env("TF_VAR_gke_cluster_id", &cluster)
        .env("TF_VAR_vpc_id", &vpc)
        .env("TF_VAR_subnet_id", &subnet);
    install(&w);
    let planned = plan(&w, 2);
    for piece in [
        "google_container_node_pool",
        "a3-megagpu-8g",
        "COMPACT, policy_name = google_compute_resource_policy.gpu-placement",
        "additional_node_network_configs",
        "kind: GKENetworkParamSet",
    ] {
        assert!(planned.contains(piece), "{piece} in the plan:\n{planned}");
    }
    // The plan reads the cluster: a kubelet newer than its control plane (1.33) is refused, as is a cluster
    // that is not there.
    let refused = |var: &str| fold(&w.run(&["plan", "-no-color", "-input=false", "-var", var]).expect_code(1).output());
    let skew = refused("kubernetes_version=1.34");
    assert!(skew.contains("Version outside the cluster's skew") && skew.contains("newer than the cluster's control plane 1.33"), "{skew}");
    let missing = refused("gke_cluster_id=projects/ml-platform-prod/locations/us-central1/clusters/nope");
    assert!(missing.contains("No such GKE cluster"), "{missing}");
    let before = admin(&clouds.gcp, "GET", "snapshot", None);
    apply(&w).expect_code(0);
    plan(&w, 0);

    // Google's client reads the pool back: machine type and GPUs, zone, compact placement, the eight GPU
    // NIC networks, the size through its instance group, the owner's label; and makes, resizes and deletes
    // a pool of its own beside it.
    let owner =
        crate::cli::state_values_in(&w, "module.gpu")["module.gpu.hpc_gpu_node_pool.this"]["owner"].as_str().unwrap_or_default().to_owned();
    let check = |count: &str| {
        let v = gcp_client(&clouds, "check", &[("pool", "gpu"), ("owner", &owner), ("fabric", "gpu"), ("count", count), ("networks", "8")]);
        v.found_nothing_wrong();
        v.summary
    };
    let read = check("4");
    assert_eq!(
        read["pool"]["taints"],
        serde_json::json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]),
        "{read}"
    );
    assert_eq!(read["pool"]["labels"]["example.com/team"], "llm", "{read}");
    assert_eq!(read["own"]["deleted"], true, "{read}");
    let out = outputs(&w);
    assert!(out["device_plugin"]["value"].as_str().unwrap().contains("nccl-tcpxo-installer"), "{out}");

    // A size, a label and the taint's effect changed outside show in the plan, and the apply puts them back.
    gcp_client(&clouds, "scale", &[("pool", "gpu"), ("count", "2"), ("taint-effect", "NO_EXECUTE"), ("label-team", "other")])
        .found_nothing_wrong();
    let repaired = repairs_grows_and_imports(&w, &check, "gcp/us-central1/ml-prod/gpu");
    assert_eq!(repaired["pool"]["taints"][0]["effect"], "NO_SCHEDULE", "{repaired}");
    assert_eq!(repaired["pool"]["labels"]["example.com/team"], "llm", "{repaired}");

    // Destroy takes the node pool and the fabric's pieces; the cluster and its default pool are as they were.
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let after = admin(&clouds.gcp, "GET", "snapshot", None);
    let path = |p: &str| format!("{cluster}/nodePools/{p}");
    assert!(after["container"].get(path("gpu")).is_none(), "{}", after["container"]);
    assert_eq!(after["container"][path("default-pool")], before["container"][path("default-pool")], "the default pool is untouched");
    for net in [
        format!("projects/{GCP_PROJECT}/global/networks/ml-vpc"),
        format!("projects/{GCP_PROJECT}/regions/us-central1/subnetworks/ml-nodes"),
    ] {
        assert_eq!(after["compute"][&net], before["compute"][&net], "{net} untouched");
    }
    gcp_client(&clouds, "remove", &[]).found_nothing_wrong();
    clouds.assert_empty("kubernetes/gcp");
}

/// Oracle's SDK script on the OCI emulator in one `mode` (oci_oke.py), with more `args`.
fn oci_sdk(clouds: &Emulators, mode: &str, args: &[(&str, &str)]) -> crate::vendor_clients::Vendor {
    let key = &clouds.oci.1;
    let key_path = key.private_key_path.display().to_string();
    let mut all = vec![
        ("endpoint", clouds.oci.0.as_str()),
        ("tenancy", key.tenancy.as_str()),
        ("user", key.user.as_str()),
        ("fingerprint", key.fingerprint.as_str()),
        ("key-file", key_path.as_str()),
        ("region", "us-ashburn-1"),
        ("compartment", OCI_COMPARTMENT),
        ("mode", mode),
    ];
    all.extend_from_slice(args);
    crate::vendor_clients::vendor("HPC_CONFORMANCE_PYTHON", "oci_oke.py", &all)
}

const OCI_COMPARTMENT: &str = "ocid1.compartment.oc1..acceptance";

pub fn oci_node_pool_lifecycle(cli: &Cli) {
    let clouds = Emulators::start();
    // The other team's estate, made with Oracle's SDK: a VCN with two subnets and an OKE cluster with a
    // private API endpoint.
    let estate = oci_sdk(&clouds, "estate", &[]);
    estate.found_nothing_wrong();
    let text = |k: &str| estate.summary[k].as_str().unwrap().to_owned();
    let (cluster, vcn, subnet) = (text("cluster"), text("vcn"), text("subnet"));
    let w = clouds
        .env(Workdir::for_path(cli, "examples/kubernetes/oci"))
        .env("TF_VAR_oke_cluster_id", &cluster)
        .env("TF_VAR_compartment_id", OCI_COMPARTMENT)
        .env("TF_VAR_vcn_id", &vcn)
        .env("TF_VAR_subnet_id", &subnet)
        .env("TF_VAR_worker_image", "ocid1.image.oc1.iad.emulator-ol8-gpu");
    install(&w);
    let planned = plan(&w, 2);
    for piece in ["oci_containerengine_cluster", "oci_core_instance_configuration", "oke-install.sh", "BM.GPU.H100.8", "rdma/"] {
        assert!(planned.contains(piece), "{piece} in the plan:\n{planned}");
    }
    let missing =
        fold(&w.run(&["plan", "-no-color", "-input=false", "-var", "oke_cluster_id=ocid1.cluster.oc1.iad.nope"]).expect_code(1).output());
    assert!(missing.contains("No such OKE cluster"), "{missing}");
    let before = admin(&clouds.oci.0, "GET", "snapshot", None);
    apply(&w).expect_code(0);
    plan(&w, 0);

    // Oracle's SDK reads the workers back: four H100 instances of the pool's owner whose instance
    // configuration joins them to the cluster with its private endpoint and CA.
    let owner =
        crate::cli::state_values_in(&w, "module.gpu")["module.gpu.hpc_gpu_node_pool.this"]["owner"].as_str().unwrap_or_default().to_owned();
    let check = |count: &str| {
        let v = oci_sdk(&clouds, "check", &[("pool", "gpu"), ("owner", &owner), ("count", count), ("cluster", &cluster)]);
        v.found_nothing_wrong();
        v.summary
    };
    let read = check("4");
    assert_eq!(read["pool"]["labels"], true, "{read}");

    // A worker terminated outside shows in the plan, and the apply launches it again.
    oci_sdk(&clouds, "terminate", &[("pool", "gpu")]).found_nothing_wrong();
    let drift = plan(&w, 2);
    assert!(drift.contains("~ node_count") && drift.contains("3 -> 4") && drift.contains("0 to add, 1 to change, 0 to destroy"), "{drift}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    check("4");

    // Growing launches two more into the compute cluster, in place.
    w.write("grow.auto.tfvars", "node_count = 6\n");
    let planned = plan(&w, 2);
    assert!(planned.contains("0 to add, 1 to change, 0 to destroy") && planned.contains("4 -> 6"), "{planned}");
    apply(&w).expect_code(0);
    plan(&w, 0);
    check("6");

    // Imported back, it equals what the apply made.
    let pool =
        |w: &Workdir| crate::cli::state_values_in(w, "module.gpu").get("module.gpu.hpc_gpu_node_pool.this").cloned().unwrap_or_default();
    let made = pool(&w);
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(id, format!("oci/us-ashburn-1/{OCI_COMPARTMENT}/gpu"));
    w.run(&["state", "rm", "module.gpu.hpc_gpu_node_pool.this"]).expect_code(0);
    w.run(&["import", "-no-color", "-input=false", "module.gpu.hpc_gpu_node_pool.this", &id]).expect_code(0);
    let imported = pool(&w);
    for key in ["node_count", "labels", "taint", "node_labels", "expansion", "id", "kubernetes_cluster", "fabric", "image"] {
        assert_eq!(imported[key], made[key], "{key} after import");
    }
    plan(&w, 0);

    // Destroy takes the workers and the fabric's pieces; the cluster and its VCN are as they were.
    w.run(&["destroy", "-no-color", "-input=false", "-auto-approve"]).expect_code(0);
    let after = admin(&clouds.oci.0, "GET", "snapshot", None);
    for id in [&cluster, &vcn, &subnet] {
        assert!(before["resources"][id.as_str()].is_object(), "{id} in the snapshot before");
        assert_eq!(after["resources"][id.as_str()], before["resources"][id.as_str()], "{id} untouched");
    }
    oci_sdk(&clouds, "remove", &[]).found_nothing_wrong();
    clouds.assert_empty("kubernetes/oci");
}
