# Adopting a cluster that was built before it was managed here: the fabric and the 2-node cluster
# "legacy" in us-east-1 already exist. The import blocks bring them into state on the next apply; the
# resource blocks describe them as they are, so the plan after that is empty.
# OpenTofu only (import blocks, and a variable in their id); see README.md.

terraform {
  # import blocks whose id is an expression
  required_version = ">= 1.6"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {
  aws {
    region = "us-east-1"
  }
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
