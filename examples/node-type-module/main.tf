# The gpu-node-type module picking H100 node types with an RDMA fabric in every cloud.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

module "aws" {
  source = "../../modules/gpu-node-type"
  cloud  = "aws"
  gpu    = "H100"
}

module "gcp_any_fabric" {
  source       = "../../modules/gpu-node-type"
  cloud        = "gcp"
  gpu          = "H100"
  require_rdma = false
}
