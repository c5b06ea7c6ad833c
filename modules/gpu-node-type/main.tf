# Picks the node type for a GPU model in a cloud from the provider's catalog, preferring the instance type
# with the most inter-node bandwidth, and fails the plan with a clear message when none fits.

terraform {
  required_version = ">= 1.0"
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "cloud" {
  description = "Cloud to pick from: aws, azure, gcp or oci."
  type        = string
}

variable "gpu" {
  description = "GPU model, e.g. H100."
  type        = string
}

variable "require_rdma" {
  description = "Only accept instance types with an RDMA fabric (EFA, InfiniBand or RoCE), as multi-node training needs."
  type        = bool
  default     = true
}

data "hpc_gpu_catalog" "this" {
  cloud = var.cloud
  gpu   = var.gpu
}

locals {
  rdma_fabrics = ["efa", "infiniband", "roce"]
  candidates = [
    for it in data.hpc_gpu_catalog.this.instance_types : it
    if !var.require_rdma || contains(local.rdma_fabrics, it.rdma_fabric)
  ]
  # Highest known bandwidth first; unknown bandwidth sorts last.
  ranked = reverse(sort([for it in local.candidates : format("%06d/%s", coalesce(it.network_bandwidth_gbps, 0), it.name)]))
  chosen = length(local.ranked) == 0 ? null : one([for it in local.candidates : it if it.name == split("/", local.ranked[0])[1]])
}

output "instance_type" {
  description = "The chosen instance type (shape, machine type, VM size)."
  value       = local.chosen == null ? null : local.chosen.name
}

output "gpus_per_node" {
  description = "GPUs per node of the chosen instance type."
  value       = local.chosen == null ? null : local.chosen.gpu_count
}

output "rdma_fabric" {
  description = "Inter-node fabric of the chosen instance type: efa, infiniband, roce, gpudirect-tcpx, gpudirect-tcpxo or none."
  value       = local.chosen == null ? null : local.chosen.rdma_fabric
}

output "rdma_interfaces" {
  description = "RDMA (or GPU NIC) interfaces per node."
  value       = local.chosen == null ? null : local.chosen.rdma_interfaces
}

output "network_bandwidth_gbps" {
  description = "Inter-node bandwidth per node in Gbps, where known."
  value       = local.chosen == null ? null : local.chosen.network_bandwidth_gbps
}

output "candidates" {
  description = "Every instance type that qualified, by name."
  value       = [for it in local.candidates : it.name]
}
