terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

provider "hpc" {
  default_tags = { team = "ml-platform" }
}

data "hpc_gpu_catalog" "aws_h100" {
  cloud = "aws"
  gpu   = "h100"
}

data "hpc_gpu_catalog" "oci_shape" {
  cloud         = "oci"
  instance_type = "BM.GPU.H100.8"
}

data "hpc_gpu_catalog" "gcp" {
  cloud = "gcp"
}

output "aws_h100" {
  value = data.hpc_gpu_catalog.aws_h100.instance_types[0]
}

output "oci_rdma_interfaces" {
  value = data.hpc_gpu_catalog.oci_shape.instance_types[0].rdma_interfaces
}

output "gcp_gpu_models" {
  value = data.hpc_gpu_catalog.gcp.gpu_models
}
