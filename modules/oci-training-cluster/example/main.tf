# Four BM.GPU.H100.8 nodes in a cluster network, with File Storage with Lustre linked to an Object Storage
# bucket. Credentials come from ~/.oci/config (or the file OCI_CONFIG_FILE names).

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "oci_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

provider "hpc" {
  oci {
    region   = "us-ashburn-1"
    endpoint = var.oci_endpoint
  }
}

module "cluster" {
  source = "../"

  name                = "train"
  region              = "us-ashburn-1"
  availability_domain = "Uocm:US-ASHBURN-AD-1"
  compartment_id      = "ocid1.compartment.oc1..exampleuniqueid"
  placement           = "cluster-network"
  node_count          = 4

  storage_capacity_gb        = 31200
  storage_throughput_per_tib = 250
  object_storage_path        = "oci://datasets@mytenancy/tokenized"
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
