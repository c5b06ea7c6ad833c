# An L4 inference service on AWS without any hpc_gpu_fabric: 4 x g6.xlarge on Ethernet, in a network the
# cluster makes for itself. No EFA, no placement group.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

provider "hpc" {
  aws {
    region = "us-east-1"
  }
}

resource "hpc_gpu_cluster" "serve" {
  name       = "serve"
  cloud      = "aws"
  region     = "us-east-1"
  zone       = "us-east-1a"
  gpu        = "L4"
  node_count = 4
  workload   = "inference"
  image      = "ami-12c6146b"
}

output "instance_type" { value = hpc_gpu_cluster.serve.instance_type }
output "nodes" { value = hpc_gpu_cluster.serve.nodes }
output "network" { value = hpc_gpu_cluster.serve.network }
