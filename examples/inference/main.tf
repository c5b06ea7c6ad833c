# An L4 inference service on AWS with no hpc_gpu_fabric: inference nodes need no RDMA fabric or placement
# group, so the cluster says where it runs and makes a small network of its own (VPC, subnet, security
# group; give vpc_id and subnet_id to join yours instead). Each node checks its GPU at boot and serves DCGM
# metrics; the outputs are what a load balancer or service registry consumes.

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
  default_tags = { team = "ml-serving" }
  aws {
    region = "us-east-1"
  }
}

# One L4 per g6.xlarge: the check expects 1 GPU and no EFA devices.
data "hpc_gpu_selfcheck" "check" {
  cloud                 = "aws"
  instance_type         = "g6.xlarge"
  install_dcgm_exporter = true # needs docker and the NVIDIA container toolkit in the image
}

resource "hpc_gpu_cluster" "serve" {
  name       = "serve"
  cloud      = "aws"
  region     = "us-east-1"
  zone       = "us-east-1a"
  gpu        = "L4"
  node_count = var.replicas
  workload   = "inference"
  user_data  = data.hpc_gpu_selfcheck.check.combined_user_data
}
