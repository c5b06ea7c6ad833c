output "node_names" {
  description = "Node names, in node index order."
  value       = hpc_gpu_cluster.train.node_names
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = hpc_gpu_cluster.train.nodes[*].private_ip
}
