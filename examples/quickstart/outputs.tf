output "node_names" {
  description = "Node names, in node index order."
  value       = module.cluster.node_names
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = module.cluster.node_private_ips
}

output "hostfile" {
  description = "MPI hostfile, e.g. `tofu output -raw hostfile > hostfile && mpirun --hostfile hostfile ...`."
  value       = module.cluster.hostfile
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node."
  value       = module.cluster.mount_command
}

output "nccl_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = module.cluster.nccl_environment
}

output "estimated_hourly_cost_usd" {
  description = "Nodes plus Lustre per hour at list prices (an estimate; see cost_basis)."
  value       = module.cluster.estimated_hourly_cost_usd
}

output "cost_basis" {
  description = "How the cluster's and the filesystem's cost estimates were made, or why not."
  value       = module.cluster.cost_basis
}
