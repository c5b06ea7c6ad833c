# Day 2 on the AWS emulator: a 4-node g6.xlarge cluster in a cluster placement group, whose unhealthy nodes
# are repaired and whose image changes roll onto the nodes in batches (acceptance/day2.rs drives it).
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "image" {
  type    = string
  default = "ami-12c6146b"
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
  aws {
    region     = "us-east-1"
    endpoint   = var.endpoint
    access_key = "test"
    secret_key = "test"
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "d2fab"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "g6.xlarge"
  placement     = "cluster"
}

# The nodes run the boot-time self-check, whose verdict wait_for_selfcheck waits for (the test publishes
# the verdicts itself).
data "hpc_gpu_selfcheck" "node" {
  cloud         = "aws"
  instance_type = "g6.xlarge"
}

resource "hpc_gpu_cluster" "c" {
  name          = "d2"
  fabric        = hpc_gpu_fabric.f
  node_count    = 4
  image         = var.image
  user_data     = data.hpc_gpu_selfcheck.node.combined_user_data
  repair        = var.repair
  node_identity = "hpc-selfcheck" # the self-check publishes its verdict as this identity
  update_strategy {
    batch_size         = var.batch_size
    wait_for_selfcheck = var.wait_for_selfcheck
  }
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "node_revisions" { value = hpc_gpu_cluster.c.node_revisions }
output "revision" { value = hpc_gpu_cluster.c.revision }
