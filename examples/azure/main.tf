# A 4-node Standard_ND96isr_H100_v5 (8x H100, InfiniBand) cluster on Azure with Azure Managed Lustre.
# Over 100 nodes the plan splits the cluster into several InfiniBand scale sets.

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
}

resource "hpc_gpu_cluster" "train" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = 4
  # Azure needs a key or a password for Linux VMs, and the provider keeps password login off.
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc example" # e.g. file("~/.ssh/id_ed25519.pub")
}

resource "hpc_parallel_filesystem" "scratch" {
  name               = "scratch"
  fabric             = hpc_gpu_fabric.train
  cluster            = hpc_gpu_cluster.train
  capacity_gib       = 16384 # 16 TiB: AMLFS-Durable-Premium-125 grows in 16 TiB steps
  throughput_per_tib = 125
}
