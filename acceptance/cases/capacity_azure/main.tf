# Capacity before money on the Azure emulator: a Standard_NV36ads_A10_v5 cluster whose plan reads the
# StandardNVADSA10v5Family compute usage of eastus, and whose apply under a capacity limit keeps or releases
# what came as capacity_policy says (acceptance/capacity.rs drives it).
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
variable "capacity_policy" {
  type    = string
  default = "all-or-nothing"
}
variable "min_nodes" {
  type    = number
  default = null
}
variable "workload" {
  type    = string
  default = "pretraining"
}
variable "quota_check" {
  type    = string
  default = "error"
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  quota_check  = var.quota_check
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000001"
    endpoint        = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "capfab"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_NV36ads_A10_v5"
  placement     = "cluster"
}

resource "hpc_gpu_cluster" "c" {
  name            = "cap"
  fabric          = hpc_gpu_fabric.f
  node_count      = var.node_count
  capacity_policy = var.capacity_policy
  min_nodes       = var.min_nodes
  workload        = var.workload
  image           = "microsoft-dsvm:ubuntu-hpc:2204:latest"
  ssh_public_key  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
