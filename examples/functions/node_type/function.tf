# Which node type a GPU model means on a cloud, how many RDMA interfaces it has and the NCCL settings
# its jobs need: for a scheduler's node definition or a job template, with no cloud access.
variable "gpu" {
  description = "GPU model."
  type        = string
  default     = "H100"

  validation {
    condition     = can(provider::hpc::node_type("aws", var.gpu))
    error_message = "The catalog has no AWS node type with that GPU model."
  }
}

locals {
  node = provider::hpc::node_type("aws", var.gpu)
}

output "instance_type" {
  description = "The node type."
  value       = local.node.name # "p5.48xlarge"
}

output "efa_interfaces" {
  description = "Its EFA interfaces."
  value       = local.node.rdma_interfaces # 32
}

output "nccl_env" {
  description = "The NCCL environment its jobs need."
  value       = local.node.nccl_env # { FI_PROVIDER = "efa", ... }
}
