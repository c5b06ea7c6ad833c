output "fabric_id" {
  description = "Id of the fabric."
  value       = hpc_gpu_fabric.train.id
}

output "cluster_id" {
  description = "Id of the cluster."
  value       = hpc_gpu_cluster.train.id
}

output "node_names" {
  description = "Node names, in node index order."
  value       = hpc_gpu_cluster.train.node_names
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, as the configuration-management stand-in (terraform_data) received them."
  value       = terraform_data.node_ips.output
}

output "placement_groups" {
  description = "Names of the placement pieces the nodes share."
  value       = local.placement_groups
}

output "hostfile" {
  description = "Path of the MPI hostfile written for the nodes (hashicorp/local)."
  value       = local_file.hostfile.filename
}

output "topology" {
  description = "The Slurm topology.conf written for the nodes (one switch per placement group)."
  value       = local_file.topology.content
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node."
  value       = hpc_parallel_filesystem.scratch.mount_command
}
