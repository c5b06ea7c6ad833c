output "node_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = hpc_gpu_cluster.train.node_environment
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node."
  value       = hpc_parallel_filesystem.scratch.mount_command
}

output "node_names" {
  description = "Node names, in node index order."
  value       = hpc_gpu_cluster.train.node_names
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = hpc_gpu_cluster.train.nodes[*].private_ip
}
