# An inference service on Azure without any hpc_gpu_fabric: 3 x Standard_NV36ads_A10_v5 (one A10 each, GRID
# driver image) on Ethernet, in a VNet the cluster makes for itself, with no proximity placement group.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }

provider "hpc" {
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000001"
    endpoint        = var.endpoint
  }
}

resource "hpc_gpu_cluster" "c" {
  name       = "serve"
  cloud      = "azure"
  region     = "eastus"
  gpu        = "A10"
  node_count = 3
  workload   = "inference"
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
  image      = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/ml/images/ubuntu-a10-grid"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "node_environment" { value = hpc_gpu_cluster.c.node_environment }
output "network" { value = hpc_gpu_cluster.c.network }
