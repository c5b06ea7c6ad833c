# Eight A3 Ultra (H200) nodes from Flex-start capacity, packed within distance 2, with Managed Lustre
# linked to a Cloud Storage dataset. The project is the provider's.

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
    zone     = "us-central1-b"
    endpoint = var.gcp_endpoint
  }
}

module "cluster" {
  source = "../"

  name          = "train"
  zone          = "us-central1-b"
  instance_type = "a3-ultragpu-8g"
  node_count    = 8
  max_distance  = 2
  capacity_type = "flex-start"

  storage_capacity_gib       = 36000
  storage_throughput_per_tib = 500
  gcs_import_path            = "gs://ml-datasets/tokenized"

  labels = { project = "llm" }
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
