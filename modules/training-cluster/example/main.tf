# Two A3 Mega (8x H100) nodes with Managed Lustre and Slurm on Google Cloud, through the cloud-agnostic module. On
# another cloud only the cloud, the location and the Lustre size change (see ../README.md for AWS).

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

module "cluster" {
  source = "../"

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

output "slurm_login_command" {
  value = module.cluster.slurm_login_command
}

output "node_private_ips" {
  value = module.cluster.node_private_ips
}

output "hostfile" {
  value = module.cluster.hostfile
}

output "nccl_environment" {
  value = module.cluster.nccl_environment
}

output "mount_command" {
  value = module.cluster.mount_command
}

output "expected_busbw_gbs" {
  value = module.cluster.expected_busbw_gbs
}
