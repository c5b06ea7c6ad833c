# The gpu-node-type module picking H100 node types with an RDMA fabric in every cloud.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
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

output "aws_node_type" {
  value = module.aws.instance_type
}

output "gcp_node_type" {
  value = module.gcp_any_fabric.instance_type
}
