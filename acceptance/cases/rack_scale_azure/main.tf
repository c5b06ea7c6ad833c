# A GB200 NVL72 training cluster of whole NVLink domains (18 VMs per rack) and its fabric, on the Azure emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "node_count" {
  type    = number
  default = 36
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000001"
    endpoint        = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name   = "nvlfab"
  cloud  = "azure"
  region = "eastus"
  gpu    = "GB200"
}

resource "hpc_gpu_cluster" "c" {
  name           = "nvl"
  fabric         = hpc_gpu_fabric.f
  node_count     = var.node_count
  image          = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/hpc/images/ubuntu-hpc-arm64"
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "nvlink_domains" { value = hpc_gpu_cluster.c.nvlink_domains }
output "slurm_topology_conf" { value = hpc_gpu_cluster.c.slurm_topology_conf }
output "slurm_conf" { value = hpc_gpu_cluster.c.slurm_conf }
output "kubernetes_node_labels" { value = hpc_gpu_cluster.c.kubernetes_node_labels }
output "node_environment" { value = hpc_gpu_cluster.c.node_environment }
output "instance_type" { value = hpc_gpu_cluster.c.instance_type }
output "cluster_id" { value = hpc_gpu_cluster.c.id }
