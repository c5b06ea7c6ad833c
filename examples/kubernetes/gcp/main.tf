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
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "gcp_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

variable "gke_cluster_id" {
  description = "Id of the existing GKE cluster (google_container_cluster.<x>.id in the team's configuration)."
  type        = string
  default     = "projects/ml-platform-prod/locations/us-central1/clusters/ml-prod"
}

variable "vpc_id" {
  description = "The VPC the cluster's nodes use (their first NIC)."
  type        = string
  default     = "projects/ml-platform-prod/global/networks/ml-vpc"
}

variable "subnet_id" {
  description = "The cluster's node subnetwork in that VPC."
  type        = string
  default     = "projects/ml-platform-prod/regions/us-central1/subnetworks/ml-nodes"
}

variable "kubernetes_version" {
  description = "The kubelet's minor version: the cluster's, or up to three minor versions older."
  type        = string
  default     = "1.33"
}

variable "node_count" {
  description = "GPU nodes in the pool."
  type        = number
  default     = 4
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

output "device_plugin" {
  description = "The GPU NICs' GKENetworkParamSet and Network objects, and how to install Google's NCCL plugin."
  value       = module.gpu.device_plugin
}

output "device_resources" {
  value = module.gpu.device_resources
}

output "node_labels" {
  value = module.gpu.node_labels
}

output "kueue_topology" {
  value = module.gpu.kueue_topology
}

output "nccl_test_kubernetes" {
  value = module.gpu.nccl_test_kubernetes
}
