output "device_plugin" {
  description = "The GPU NICs' GKENetworkParamSet and Network objects, and how to install Google's NCCL plugin."
  value       = module.gpu.device_plugin
}

output "device_resources" {
  description = "The extended resources (RDMA devices) each pod of a job across the pool requests."
  value       = module.gpu.device_resources
}

output "node_labels" {
  description = "Labels the pool's nodes carry, for node selectors."
  value       = module.gpu.node_labels
}

output "kueue_topology" {
  description = "Kueue's Topology manifest for the pool's nodes (topology-aware scheduling)."
  value       = module.gpu.kueue_topology
}

output "nccl_test_kubernetes" {
  description = "The NCCL all-reduce test as a Kubernetes indexed Job manifest, with the pool's device resources."
  value       = module.gpu.nccl_test_kubernetes
}
