# Slurm: write this to topology.conf, and module.nvl72.slurm_conf's lines into slurm.conf.
output "slurm_topology_conf" {
  description = "Slurm topology.conf for topology/block, one block per NVLink domain."
  value       = module.nvl72.slurm_topology_conf
}

output "slurm_conf" {
  description = "The slurm.conf lines the block topology needs."
  value       = module.nvl72.slurm_conf
}

# Kubernetes: kubelet --node-labels per node (hpc-platform/nvlink-domain = nvl-nvl0 or nvl-nvl1).
output "kubernetes_node_labels" {
  description = "Labels per node for Kubernetes: the cluster and the node's NVLink domain."
  value       = module.nvl72.kubernetes_node_labels
}

output "nvlink_domains" {
  description = "The NVLink domains (name, nodes, GPUs) the nodes fall into."
  value       = module.nvl72.nvlink_domains
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = module.nvl72.node_private_ips
}
