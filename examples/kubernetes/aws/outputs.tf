output "device_plugin" {
  description = "Helm values for the EFA device plugin."
  value       = hpc_gpu_node_pool.gpu.device_plugin
}

output "device_resources" {
  description = "The extended resources (RDMA devices) each pod of a job across the pool requests."
  value       = hpc_gpu_node_pool.gpu.device_resources
}

output "node_labels" {
  description = "Labels the pool's nodes carry, for node selectors."
  value       = hpc_gpu_node_pool.gpu.node_labels
}

output "kueue_topology" {
  description = "Kueue's Topology manifest for the pool's nodes (topology-aware scheduling)."
  value       = hpc_gpu_node_pool.gpu.kueue_topology
}

output "nccl_test_kubernetes" {
  description = "The NCCL all-reduce test as a Kubernetes indexed Job manifest, with the pool's device resources."
  value       = hpc_gpu_node_pool.gpu.nccl_test_kubernetes
}
