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
