# Slurm on Azure: two Standard_ND96isr_H100_v5 (8x H100, InfiniBand) nodes in a scale set under the fabric's
# proximity placement group, a controller and a login node (Linux VMs) on the fabric's virtual network; the
# tree topology is the scale set (one leaf switch). Azure needs an SSH key for Linux VMs.
# Set azure_endpoint to run it against the Azure emulator.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000000"
    endpoint        = var.azure_endpoint
  }
}

resource "hpc_gpu_fabric" "train" {
  name          = "train"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_ND96isr_H100_v5"
  slurm         = true
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
  slurm_version  = var.slurm_version
  ssh_public_key = var.ssh_public_key
  # Job accounting (sacct, sreport): slurmdbd and MariaDB on the controller.
  accounting = true

  partition {
    name    = "h100"
    cluster = hpc_gpu_cluster.h100
    default = true
  }
}
