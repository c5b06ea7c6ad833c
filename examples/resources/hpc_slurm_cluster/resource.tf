resource "hpc_gpu_fabric" "train" {
  name   = "train"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
  slurm  = true # sets aside the controllers' subnet and holds the cluster's key
}

# The GPU nodes join the fabric's Slurm cluster by themselves (slurmd configless, at their first boot).
resource "hpc_gpu_cluster" "h100" {
  name       = "h100"
  fabric     = hpc_gpu_fabric.train
  node_count = 16
  slurm      = hpc_gpu_fabric.train.slurm_join
}

# A controller and a login node; the partition holds the cluster's 16 nodes, and the topology is the
# fabric's placement group (one leaf switch). slurm.conf, gres.conf and topology.conf are in the plan.
resource "hpc_slurm_cluster" "ml" {
  name          = "ml"
  fabric        = hpc_gpu_fabric.train
  slurm_version = "21.08" # what the stock Ubuntu 22.04 GPU images install

  partition {
    name    = "h100"
    cluster = hpc_gpu_cluster.h100
    default = true
  }
}

output "login" {
  description = "How to log in to the login node."
  value       = hpc_slurm_cluster.ml.login_command
}

output "nccl_test" {
  description = "An sbatch-ready NCCL all-reduce over the h100 partition."
  value       = hpc_slurm_cluster.ml.nccl_tests["h100"]
}
