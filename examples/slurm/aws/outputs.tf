output "login" {
  description = "How to log in to the Slurm cluster's login node."
  value       = hpc_slurm_cluster.ml.login_command
}

output "slurm_conf" {
  description = "The Slurm cluster's slurm.conf, as its controller runs it."
  value       = hpc_slurm_cluster.ml.slurm_conf
}

output "topology_conf" {
  description = "The Slurm cluster's topology.conf: one leaf switch per placement group."
  value       = hpc_slurm_cluster.ml.topology_conf
}

# sbatch the value on the login node: NCCL all-reduce over the partition's nodes.
output "nccl_test_h100" {
  description = "An sbatch-ready NCCL all-reduce over every node of the h100 partition."
  value       = hpc_slurm_cluster.ml.nccl_tests["h100"]
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes of both partitions, h100 then dev."
  value       = concat(hpc_gpu_cluster.h100.nodes[*].private_ip, hpc_gpu_cluster.dev.nodes[*].private_ip)
}

# What the test runs on a real Slurm, and what a user can diff.
output "gres_conf" {
  description = "The Slurm cluster's gres.conf (the GPUs of each node)."
  value       = hpc_slurm_cluster.ml.gres_conf
}

output "healthcheck_program" {
  description = "The node health check program Slurm runs on each node."
  value       = hpc_slurm_cluster.ml.healthcheck_program
}

output "placement_groups" {
  description = "The groups of nodes the cloud places together, of both partitions."
  value       = concat(hpc_gpu_cluster.h100.placement_groups, hpc_gpu_cluster.dev.placement_groups)
}
