# GPU workers for an OKE cluster another team made, with the official oci provider and in another state.
# Managed OKE node pools cannot join a cluster network or a compute cluster, so RDMA workers are self-managed
# nodes: through modules/kubernetes-gpu-pool this configuration makes a fabric in the cluster's VCN (its
# security group and compute cluster) and four BM.GPU.H100.8 nodes in it, which boot an OKE worker image and
# join the cluster with oke-install.sh (its private API endpoint and CA are read from the cluster, never
# changed). The cluster's compartment needs the policy that lets the nodes join:
#   Allow dynamic-group <these instances> to {CLUSTER_JOIN} in compartment <the cluster's>
#
# After apply, install what the outputs say in the cluster: the NVIDIA Network Operator with the
# NicClusterPolicy (device_plugin), and Kueue's Topology (kueue_topology); then run nccl_test_kubernetes.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

# Credentials come from ~/.oci/config (or the file OCI_CONFIG_FILE names).
provider "hpc" {
  oci {
    region   = "us-ashburn-1"
    endpoint = var.oci_endpoint
  }
}

module "gpu" {
  source = "../../../modules/kubernetes-gpu-pool"

  name               = "gpu"
  cloud              = "oci"
  region             = "us-ashburn-1"
  zone               = "Uocm:US-ASHBURN-AD-1"
  instance_type      = "BM.GPU.H100.8"
  compartment_id     = var.compartment_id
  kubernetes_cluster = var.oke_cluster_id
  vpc_id             = var.vcn_id
  subnet_id          = var.subnet_id
  image              = var.worker_image
  node_count         = var.node_count

  labels = {
    "example.com/team" = "llm"
  }
}
