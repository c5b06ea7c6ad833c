# Adopting a cluster that was built before it was managed here: the fabric and the 2-node cluster
# "legacy" in us-east-1 already exist. The import blocks bring them into state on the next apply; the
# resource blocks describe them as they are, so the plan after that is empty.
# OpenTofu only (import blocks, and a variable in their id); see README.md.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

provider "hpc" {
  aws {
    region = "us-east-1"
  }
}

variable "fabric_id" {
  description = "Import id of the existing fabric: aws/<region>/<name>."
  type        = string
  default     = "aws/us-east-1/legacy"
}

variable "cluster_id" {
  description = "Import id of the existing cluster: aws/<region>/<name>."
  type        = string
  default     = "aws/us-east-1/legacy"
}

import {
  to = hpc_gpu_fabric.legacy
  id = var.fabric_id
}

import {
  to = hpc_gpu_cluster.legacy
  id = var.cluster_id
}

resource "hpc_gpu_fabric" "legacy" {
  name   = "legacy"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
}

resource "hpc_gpu_cluster" "legacy" {
  name       = "legacy"
  fabric     = hpc_gpu_fabric.legacy
  node_count = 2
}

output "node_names" {
  value = hpc_gpu_cluster.legacy.node_names
}

output "node_private_ips" {
  value = hpc_gpu_cluster.legacy.nodes[*].private_ip
}
