# Slurm on Azure: two Standard_ND96isr_H100_v5 (8x H100, InfiniBand) nodes in a scale set under the fabric's
# proximity placement group, a controller and a login node (Linux VMs) on the fabric's virtual network; the
# tree topology is the scale set (one leaf switch). Azure needs an SSH key for Linux VMs.
# Set azure_endpoint to run it against the Azure emulator.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "azure_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

provider "hpc" {
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000000"
    endpoint        = var.azure_endpoint
  }
}

variable "ssh_public_key" {
  type    = string
  default = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc example" # e.g. file("~/.ssh/id_ed25519.pub")
}

resource "hpc_gpu_fabric" "train" {
  name          = "train"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_ND96isr_H100_v5"
  slurm         = true
}

variable "nodes" {
  description = "GPU nodes: a change re-renders the Slurm configuration, which the controller takes in place"
  type        = number
  default     = 2
}

resource "hpc_gpu_cluster" "h100" {
  name           = "train"
  fabric         = hpc_gpu_fabric.train
  node_count     = var.nodes
  ssh_public_key = var.ssh_public_key
  slurm          = hpc_gpu_fabric.train.slurm_join
}

resource "hpc_slurm_cluster" "ml" {
  name           = "ml"
  fabric         = hpc_gpu_fabric.train
  slurm_version  = "21.08"
  ssh_public_key = var.ssh_public_key

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
