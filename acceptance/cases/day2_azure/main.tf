# Day 2 on the Azure emulator: a 4-node Standard_NV36ads_A10_v5 cluster (one Uniform scale set) in a fabric
# with a proximity placement group, whose unhealthy nodes are repaired in place under their own names and
# whose image changes roll onto the nodes in batches (acceptance/day2.rs drives it).
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "image" {
  type    = string
  default = "microsoft-dsvm:ubuntu-hpc:2204:latest"
}
variable "repair" {
  type    = string
  default = "replace"
}
variable "batch_size" {
  type    = string
  default = "2"
}
variable "wait_for_selfcheck" {
  type    = bool
  default = true
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000001"
    endpoint        = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "d2fab"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_NV36ads_A10_v5"
  placement     = "cluster"
}

# The nodes run the boot-time self-check, whose verdict wait_for_selfcheck waits for (the test publishes
# the verdicts itself).
data "hpc_gpu_selfcheck" "node" {
  cloud         = "azure"
  instance_type = "Standard_NV36ads_A10_v5"
}

resource "hpc_gpu_cluster" "c" {
  name           = "d2"
  fabric         = hpc_gpu_fabric.f
  node_count     = 4
  image          = var.image
  user_data      = data.hpc_gpu_selfcheck.node.combined_user_data
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
  repair         = var.repair
  update_strategy {
    batch_size         = var.batch_size
    wait_for_selfcheck = var.wait_for_selfcheck
  }
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "node_revisions" { value = hpc_gpu_cluster.c.node_revisions }
output "revision" { value = hpc_gpu_cluster.c.revision }
