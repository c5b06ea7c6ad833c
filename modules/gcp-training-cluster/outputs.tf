output "fabric_id" {
  description = "Id of the fabric."
  value       = module.cluster.fabric_id
}

output "cluster_id" {
  description = "Id of the cluster."
  value       = module.cluster.cluster_id
}

output "filesystem_id" {
  description = "Id of the filesystem; null without one."
  value       = module.cluster.filesystem_id
}

output "instance_type" {
  description = "Node type of the cluster."
  value       = module.cluster.instance_type
}

output "gpus_total" {
  description = "GPUs in the cluster."
  value       = module.cluster.gpus_total
}

output "node_names" {
  description = "Node names, in node index order."
  value       = module.cluster.node_names
}

output "node_ids" {
  description = "Cloud ids of the nodes, in node index order."
  value       = module.cluster.node_ids
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = module.cluster.node_private_ips
}

output "nodes" {
  description = "The nodes (name, id, private_ip), in node index order."
  value       = module.cluster.nodes
}

output "hostfile" {
  description = "MPI hostfile: one line per node with its private IP and GPU slots."
  value       = module.cluster.hostfile
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node; null without a filesystem."
  value       = module.cluster.mount_command
}

output "nccl_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = module.cluster.nccl_environment
}

output "estimated_hourly_cost_usd" {
  description = "Estimated USD per hour of the cluster plus the filesystem (list or provider prices); null when either is not estimated (see cost_basis)."
  value       = module.cluster.estimated_hourly_cost_usd
}

output "cost_basis" {
  description = "How the cluster's and the filesystem's estimates were made, or why not."
  value       = module.cluster.cost_basis
}

output "nccl_test_slurm" {
  description = "Slurm batch script running the nccl-tests all-reduce on these nodes; check its log with data.hpc_nccl_check before a long run."
  value       = module.cluster.nccl_test_slurm
}

output "nccl_test_kubernetes" {
  description = "The same all-reduce as a Kubernetes indexed Job manifest."
  value       = module.cluster.nccl_test_kubernetes
}

output "expected_busbw_gbs" {
  description = "Published all-reduce bus bandwidth (GB/s) to expect from nccl-tests on this node type, where one exists."
  value       = module.cluster.expected_busbw_gbs
}

output "placement_groups" {
  description = "Names of the placement pieces the nodes share (placement group, proximity placement group, compact placement policy, compute cluster or cluster network)."
  value       = module.cluster.placement_groups
}

output "expansion_summary" {
  description = "The cloud resources each part expands into, as kind.name with a count where above one."
  value       = module.cluster.expansion_summary
}
