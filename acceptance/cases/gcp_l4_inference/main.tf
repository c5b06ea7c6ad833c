# L4 inference on Google Cloud without any hpc_gpu_fabric: 2 x g2-standard-4 in a network the cluster makes
# for itself (or in an existing one, with vpc_id and subnet_id), no compact placement policy, no GPU NIC VPCs.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "vpc_id" {
  type    = string
  default = null
}
variable "subnet_id" {
  type    = string
  default = null
}

provider "hpc" {
  gcp {
    project  = "ml-prod"
    endpoint = var.endpoint
  }
}

resource "hpc_gpu_cluster" "serve" {
  name       = "serve"
  cloud      = "gcp"
  region     = "us-central1"
  zone       = "us-central1-a"
  gpu        = "L4"
  vpc_id     = var.vpc_id
  subnet_id  = var.subnet_id
  node_count = 2
  workload   = "inference"
}

output "nodes" { value = hpc_gpu_cluster.serve.nodes }
output "network" { value = hpc_gpu_cluster.serve.network }
output "node_environment" { value = hpc_gpu_cluster.serve.node_environment }
