# Capacity before money on the Google Cloud emulator: a fabric with compact placement and an on-demand
# cluster of small L4 nodes (g2-standard-4, which draw on the regional NVIDIA_L4_GPUS quota), whose size,
# capacity policy and workload the test sets; the provider checks the quota at plan time.
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
  gcp {
    project  = "ml-prod"
    endpoint = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "capfab"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = "g2-standard-4"
  placement     = "cluster"
}

resource "hpc_gpu_cluster" "c" {
  name            = "cap"
  fabric          = hpc_gpu_fabric.f
  node_count      = var.node_count
  capacity_type   = "on-demand"
  capacity_policy = var.capacity_policy
  min_nodes       = var.min_nodes
  workload        = var.workload
  tags            = { team = "ml" }
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
