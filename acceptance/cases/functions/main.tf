# The provider's functions where users need them: a local, a variable's validation, a module's input and
# an output, with no provider block and no cloud.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "cloud" {
  type    = string
  default = "gcp"
}

variable "gpu" {
  type    = string
  default = "H100"

  validation {
    condition     = can(provider::hpc::node_type("aws", var.gpu))
    error_message = "No AWS node type has that GPU model."
  }
}

variable "dataset_gib" {
  type    = number
  default = 30000
}

locals {
  clouds   = ["aws", "azure", "gcp", "oci"]
  capacity = provider::hpc::lustre_capacity(var.cloud, 500, var.dataset_gib)
  nodes    = { for c in local.clouds : c => provider::hpc::node_type(c, var.gpu) }
  lustre   = { for c in local.clouds : c => provider::hpc::lustre_capacity(c, 500, var.dataset_gib) }
  verdict  = provider::hpc::nccl_verdict(file("${path.module}/allreduce.log"), 365)
}

module "sizing" {
  source       = "./sizing"
  cloud        = var.cloud
  capacity_gib = local.capacity
}

output "capacity" { value = local.capacity }
output "lustre" { value = local.lustre }
output "node_names" { value = { for c, n in local.nodes : c => n.name } }
output "rdma_interfaces" { value = { for c, n in local.nodes : c => n.rdma_interfaces } }
output "aws_nccl_env" { value = local.nodes["aws"].nccl_env }
output "verdict" { value = local.verdict }
output "module_capacity" { value = module.sizing.capacity_gib }
