# Slurm on Google Cloud: two a3-megagpu-8g (8x H100, GPUDirect-TCPXO) nodes in the fabric's compact placement
# policy, a controller and a login node on the fabric's host network; the tree topology is the compact policy
# (one leaf switch). The stock Ubuntu 22.04 images install Slurm 21.08, which the configuration is written for.
# Set gcp_endpoint to run it against the Google Cloud emulator.

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

resource "hpc_gpu_cluster" "h100" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = var.nodes
  slurm      = hpc_gpu_fabric.train.slurm_join
}

resource "hpc_slurm_cluster" "ml" {
  name          = "ml"
  fabric        = hpc_gpu_fabric.train
  slurm_version = var.slurm_version
  # Job accounting (sacct, sreport): slurmdbd and MariaDB on the controller.
  accounting = true

  partition {
    name    = "h100"
    cluster = hpc_gpu_cluster.h100
    default = true
  }
}
