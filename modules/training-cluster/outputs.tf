output "fabric_id" {
  description = "Id of the fabric."
  value       = hpc_gpu_fabric.this.id
}

output "cluster_id" {
  description = "Id of the cluster."
  value       = hpc_gpu_cluster.this.id
}

output "filesystem_id" {
  description = "Id of the filesystem; null without one."
  value       = one(hpc_parallel_filesystem.this[*].id)
}

output "instance_type" {
  description = "Node type of the cluster."
  value       = hpc_gpu_cluster.this.instance_type
}

output "gpus_total" {
  description = "GPUs in the cluster."
  value       = hpc_gpu_cluster.this.gpus_total
}

output "node_names" {
  description = "Node names, in node index order."
  value       = hpc_gpu_cluster.this.node_names
}

output "node_ids" {
  description = "Cloud ids of the nodes, in node index order."
  value       = hpc_gpu_cluster.this.nodes[*].id
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = hpc_gpu_cluster.this.nodes[*].private_ip
}

output "nodes" {
  description = "The nodes (name, id, private_ip), in node index order."
  value       = hpc_gpu_cluster.this.nodes
}

output "hostfile" {
  description = "MPI hostfile: one line per node with its private IP and GPU slots."
  value       = "${join("\n", formatlist("%s slots=%d", hpc_gpu_cluster.this.nodes[*].private_ip, local.gpus_per_node))}\n"
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node; null without a filesystem."
  value       = one(hpc_parallel_filesystem.this[*].mount_command)
}

output "unhealthy_nodes" {
  description = "Nodes the last refresh found unhealthy, with the reason (the plan shows the ones the next apply repairs)."
  value       = hpc_gpu_cluster.this.unhealthy_nodes
}

output "scheduled_maintenance" {
  description = "Maintenance the cloud has scheduled on a node, with its window: not repaired; drain the node before it."
  value       = hpc_gpu_cluster.this.scheduled_maintenance
}

output "node_revisions" {
  description = "The node configuration revision each node runs (after an interrupted rolling update, which nodes are updated)."
  value       = hpc_gpu_cluster.this.node_revisions
}

output "nccl_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = hpc_gpu_cluster.this.node_environment
}

output "estimated_hourly_cost_usd" {
  description = "Estimated USD per hour of the cluster plus the filesystem (list or provider prices); null when either is not estimated (see cost_basis)."
  value = (
    hpc_gpu_cluster.this.estimated_hourly_cost_usd == null ? null :
    length(hpc_parallel_filesystem.this) == 0 ? hpc_gpu_cluster.this.estimated_hourly_cost_usd :
    hpc_parallel_filesystem.this[0].estimated_hourly_cost_usd == null ? null :
    hpc_gpu_cluster.this.estimated_hourly_cost_usd + hpc_parallel_filesystem.this[0].estimated_hourly_cost_usd
  )
}

output "cost_basis" {
  description = "How the cluster's and the filesystem's estimates were made, or why not."
  value       = compact([hpc_gpu_cluster.this.cost_basis, one(hpc_parallel_filesystem.this[*].cost_basis)])
}

output "nccl_test_slurm" {
  description = "Slurm batch script running the nccl-tests all-reduce on these nodes; check its log with data.hpc_nccl_check before a long run."
  value       = hpc_gpu_cluster.this.nccl_test_slurm
}

output "nccl_test_kubernetes" {
  description = "The same all-reduce as a Kubernetes indexed Job manifest."
  value       = hpc_gpu_cluster.this.nccl_test_kubernetes
}

output "expected_busbw_gbs" {
  description = "Published all-reduce bus bandwidth (GB/s) to expect from nccl-tests on this node type, where one exists."
  value       = hpc_gpu_cluster.this.expected_busbw_gbs
}

output "placement_groups" {
  description = "Names of the placement pieces the nodes share (placement group, proximity placement group, compact placement policy, compute cluster or cluster network)."
  value       = [for p in concat(local.expansions.fabric, local.expansions.cluster) : p.name if contains(local.placement_kinds, p.kind)]
}

output "expansion_summary" {
  description = "The cloud resources each part expands into, as kind.name with a count where above one."
  value = {
    for part, pieces in local.expansions :
    part => [for p in pieces : p.count > 1 ? "${p.kind}.${p.name} x${p.count}" : "${p.kind}.${p.name}"]
  }
}

output "nvlink_domains" {
  description = "Rack-scale node types: the NVLink domains (name, nodes, gpus); empty otherwise."
  value       = hpc_gpu_cluster.this.nvlink_domains
}

output "slurm_topology_conf" {
  description = "Rack-scale node types: Slurm topology.conf for topology/block, one block per NVLink domain; null otherwise."
  value       = hpc_gpu_cluster.this.slurm_topology_conf
}

output "slurm_conf" {
  description = "Rack-scale node types: the slurm.conf lines the block topology needs; null otherwise."
  value       = hpc_gpu_cluster.this.slurm_conf
}

output "kubernetes_node_labels" {
  description = "Labels per node for Kubernetes: the cluster, and on rack-scale node types the node's NVLink domain."
  value       = hpc_gpu_cluster.this.kubernetes_node_labels
}

output "slurm_login_command" {
  description = "How to log in to the Slurm cluster's login node (null without slurm_version)."
  value       = one(hpc_slurm_cluster.this[*].login_command)
}

output "slurm_cluster_conf" {
  description = "The Slurm cluster's slurm.conf, as its controller runs it (null without slurm_version)."
  value       = one(hpc_slurm_cluster.this[*].slurm_conf)
}

output "nccl_test_sbatch" {
  description = "An sbatch-ready NCCL all-reduce over every node of the partition (null without slurm_version)."
  value       = one(hpc_slurm_cluster.this[*].nccl_tests[var.name])
}
