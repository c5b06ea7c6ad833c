output "instance_type" {
  description = "The node type the pool runs."
  value       = hpc_gpu_node_pool.this.instance_type
}

output "device_plugin" {
  description = "The cloud's RDMA device plugin or operator for these nodes (Helm values, or the Network Operator's NicClusterPolicy)."
  value       = hpc_gpu_node_pool.this.device_plugin
}

output "device_resources" {
  description = "The extended resources each pod of a job across the pool requests."
  value       = hpc_gpu_node_pool.this.device_resources
}

output "node_labels" {
  description = "The labels every node carries: labels and the pool's."
  value       = hpc_gpu_node_pool.this.node_labels
}

output "kueue_topology" {
  description = "Kueue's Topology over the labels that say where a node sits."
  value       = hpc_gpu_node_pool.this.kueue_topology
}

output "nccl_test_kubernetes" {
  description = "An NCCL all-reduce indexed Job across the pool."
  value       = hpc_gpu_node_pool.this.nccl_test_kubernetes
}
