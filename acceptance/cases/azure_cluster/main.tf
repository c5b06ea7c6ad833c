# A 4-node Standard_ND96isr_H100_v5 cluster and its fabric on the Azure emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "node_count" {
  type    = number
  default = 4
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000001"
    endpoint        = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "accfab"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_ND96isr_H100_v5"
  tags          = { team = "ml" }
}

resource "hpc_gpu_cluster" "c" {
  name       = "acc"
  fabric         = hpc_gpu_fabric.f
  node_count     = var.node_count
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
}

resource "hpc_parallel_filesystem" "fs" {
  name               = "accfs"
  fabric             = hpc_gpu_fabric.f
  cluster            = hpc_gpu_cluster.c
  capacity_gib       = 8192
  throughput_per_tib = 500
  maintenance_window = "Saturday 23:00"
}

output "node_names" { value = hpc_gpu_cluster.c.node_names }
output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "mount_command" { value = hpc_parallel_filesystem.fs.mount_command }

output "ids" {
  value = {
    fabric = hpc_gpu_fabric.f.id
    vnet   = hpc_gpu_fabric.f.vpc_id
  }
}
