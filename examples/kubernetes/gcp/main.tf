# A GPU node pool on a GKE cluster another team made, with the official google provider and in another
# state. This configuration only reads that cluster (its id, and the VPC and subnetwork its nodes use, come in
# as variables) and, through modules/kubernetes-gpu-pool, makes two things: a fabric (A3 Mega's eight GPU NIC
# networks and a compact placement policy in the cluster's zone) and the node pool (four a3-megagpu-8g nodes,
# 8 x H100 each, whose GPU NICs join those networks as additional node networks; the cluster must have
# multi-networking on), tainted for GPU work.
#
# After apply, install what the outputs say in the cluster: the GKENetworkParamSet and Network objects and
# Google's TCPXO NCCL installer (device_plugin), and Kueue's Topology (kueue_topology); then run
# nccl_test_kubernetes.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {
  gcp {
    project  = "ml-platform-prod"
    region   = "us-central1"
    zone     = "us-central1-a"
    endpoint = var.gcp_endpoint
  }
}

# The fabric and the pool, through the module any cloud's pool can use.
module "gpu" {
  source = "../../../modules/kubernetes-gpu-pool"

  name               = "gpu"
  cloud              = "gcp"
  region             = "us-central1"
  zone               = "us-central1-a"
  instance_type      = "a3-megagpu-8g"
  kubernetes_cluster = var.gke_cluster_id
  kubernetes_version = var.kubernetes_version
  vpc_id             = var.vpc_id
  subnet_id          = var.subnet_id
  node_count         = var.node_count

  labels = {
    "example.com/team" = "llm"
  }
}
