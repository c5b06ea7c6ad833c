# Two A3 Mega (8x H100) nodes with Managed Lustre and Slurm on Google Cloud, through the cloud-agnostic module. On
# another cloud only the cloud, the location and the Lustre size change (see ../../README.md for AWS).

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

module "cluster" {
  source = "../.."

  name       = "train"
  cloud      = "gcp"
  region     = "us-central1"
  zone       = "us-central1-a"
  gpu        = "H100" # a3-megagpu-8g
  node_count = 2

  storage_capacity_gib       = 36000
  storage_throughput_per_tib = 500

  # A Slurm cluster over the nodes: a controller and a login node on the fabric's network.
  slurm_version = "21.08" # what the stock Ubuntu 22.04 GPU images install
}
