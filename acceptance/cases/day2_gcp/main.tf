# Day 2 on the Google Cloud emulator: a fabric with compact placement and a 4-node on-demand cluster of
# small L4 nodes (g2-standard-4), whose unhealthy nodes are repaired and whose node configuration changes
# roll onto the nodes in batches.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "image" {
  type    = string
  default = "projects/ml-prod/global/images/d2-node-v1"
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
  gcp {
    project  = "ml-prod"
    endpoint = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "d2fab"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = "g2-standard-4"
  placement     = "cluster"
}

# The nodes run the boot-time self-check, whose verdict wait_for_selfcheck waits for (the test publishes
# the verdicts itself).
data "hpc_gpu_selfcheck" "node" {
  cloud         = "gcp"
  instance_type = "g2-standard-4"
}

resource "hpc_gpu_cluster" "c" {
  name          = "d2"
  fabric        = hpc_gpu_fabric.f
  node_count    = 4
  capacity_type = "on-demand"
  image         = var.image
  user_data     = data.hpc_gpu_selfcheck.node.combined_user_data
  repair        = var.repair
  node_identity = "hpc-selfcheck@ml-prod.iam.gserviceaccount.com" # the self-check publishes its verdict as this identity
  tags          = { team = "ml" }

  update_strategy {
    batch_size         = var.batch_size
    wait_for_selfcheck = var.wait_for_selfcheck
  }
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "node_revisions" { value = hpc_gpu_cluster.c.node_revisions }
output "revision" { value = hpc_gpu_cluster.c.revision }
