# Slurm over two GPU clusters on AWS: 8 and 2 p5.48xlarge (H100) nodes in one fabric (one placement group),
# a controller and a login node, a partition per cluster (training, and short development jobs). `tofu plan` shows slurm.conf, gres.conf and the
# tree topology (one leaf switch per placement group) before anything is made; the nodes join by themselves.
# Set AWS_ENDPOINT_URL to run it against the AWS emulator.
#
# How it composes without a cycle: the fabric holds what joining its Slurm takes (the controllers'
# addresses and the key); the clusters join with it, and the Slurm cluster refers to the clusters.

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
  default_tags = { team = "ml-platform" }
  aws {
    region = "us-east-1"
  }
}

resource "hpc_gpu_fabric" "train" {
  name          = "train"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "p5.48xlarge"
  slurm         = true
}

resource "hpc_gpu_cluster" "h100" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = var.train_nodes
  slurm      = hpc_gpu_fabric.train.slurm_join
}

resource "hpc_gpu_cluster" "dev" {
  name       = "dev"
  fabric     = hpc_gpu_fabric.train
  node_count = 2
  slurm      = hpc_gpu_fabric.train.slurm_join
}

resource "hpc_slurm_cluster" "ml" {
  name          = "ml"
  fabric        = hpc_gpu_fabric.train
  slurm_version = var.slurm_version
  login_nodes   = 1
  # Job accounting (sacct, sreport): slurmdbd and MariaDB on the controller.
  accounting = true

  partition {
    name    = "h100"
    cluster = hpc_gpu_cluster.h100
    default = true
  }

  partition {
    name     = "dev"
    cluster  = hpc_gpu_cluster.dev
    max_time = "04:00:00"
  }
}
