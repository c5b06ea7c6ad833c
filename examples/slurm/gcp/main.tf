# Slurm on Google Cloud: two a3-megagpu-8g (8x H100, GPUDirect-TCPXO) nodes in the fabric's compact placement
# policy, a controller and a login node on the fabric's host network; the tree topology is the compact policy
# (one leaf switch). The stock Ubuntu 22.04 images install Slurm 21.08, which the configuration is written for.
# Set gcp_endpoint to run it against the Google Cloud emulator.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "gcp_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

provider "hpc" {
  gcp {
    project  = "ml-platform-prod"
    region   = "us-central1"
    zone     = "us-central1-a"
    endpoint = var.gcp_endpoint
  }
}

resource "hpc_gpu_fabric" "train" {
  name          = "train"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = "a3-megagpu-8g"
  slurm         = true
}

variable "nodes" {
  description = "GPU nodes: a change re-renders the Slurm configuration, which the controller takes in place"
  type        = number
  default     = 2
}

resource "hpc_gpu_cluster" "h100" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = var.nodes
  slurm      = hpc_gpu_fabric.train.slurm_join
}

resource "hpc_slurm_cluster" "ml" {
  name          = "ml"
  fabric        = hpc_gpu_fabric.train
  slurm_version = "21.08"

  partition {
    name    = "h100"
    cluster = hpc_gpu_cluster.h100
    default = true
  }
}

output "login" {
  value = hpc_slurm_cluster.ml.login_command
}

output "slurm_conf" {
  value = hpc_slurm_cluster.ml.slurm_conf
}

output "gres_conf" {
  value = hpc_slurm_cluster.ml.gres_conf
}

output "topology_conf" {
  value = hpc_slurm_cluster.ml.topology_conf
}

output "healthcheck_program" {
  value = hpc_slurm_cluster.ml.healthcheck_program
}

# sbatch the value on the login node: NCCL all-reduce over the partition's nodes.
output "nccl_test" {
  value = hpc_slurm_cluster.ml.nccl_tests["h100"]
}

output "placement_groups" {
  value = hpc_gpu_cluster.h100.placement_groups
}

output "node_private_ips" {
  value = hpc_gpu_cluster.h100.nodes[*].private_ip
}
