# Capacity before money on the AWS emulator: a 4-node g6.xlarge cluster whose quota (Service Quotas
# L-DB2E81BA) and zone capacity the test sets through the emulator's admin API (acceptance/capacity.rs).
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
  aws {
    region     = "us-east-1"
    endpoint   = var.endpoint
    access_key = "test"
    secret_key = "test"
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "capfab"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "g6.xlarge"
  placement     = "cluster"
}

resource "hpc_gpu_cluster" "c" {
  name            = "cap"
  fabric          = hpc_gpu_fabric.f
  node_count      = var.node_count
  image           = "ami-12c6146b"
  capacity_policy = var.capacity_policy
  min_nodes       = var.min_nodes
  workload        = var.workload
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
