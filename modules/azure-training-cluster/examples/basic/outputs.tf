output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = module.cluster.node_private_ips
}

output "hostfile" {
  description = "MPI hostfile: one line per node with its private IP and GPU slots."
  value       = module.cluster.hostfile
}

output "nccl_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = module.cluster.nccl_environment
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node."
  value       = module.cluster.mount_command
}
