# A 4-node a3-megagpu-8g cluster with its fabric (8 GPU VPCs, compact placement) on the Google Cloud emulator.
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
variable "capacity_gib" {
  type    = number
  default = 36000
}
variable "instance_type" {
  type    = string
  default = "a3-megagpu-8g"
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  gcp {
    project  = "ml-prod"
    endpoint = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "accfab"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = var.instance_type
}

resource "hpc_gpu_cluster" "c" {
  name       = "acc"
  fabric     = hpc_gpu_fabric.f
  node_count = var.node_count
  tags       = { team = "ml" }
}

resource "hpc_parallel_filesystem" "fs" {
  name               = "accfs"
  fabric             = hpc_gpu_fabric.f
  cluster            = hpc_gpu_cluster.c
  capacity_gib       = var.capacity_gib
  throughput_per_tib = 500
  data_repository    = "gs://acc-training-data/tokenized"
}

output "node_names" { value = hpc_gpu_cluster.c.node_names }
output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "mount_command" { value = hpc_parallel_filesystem.fs.mount_command }
output "ids" {
  value = {
    fabric     = hpc_gpu_fabric.f.id
    cluster    = hpc_gpu_cluster.c.id
    filesystem = hpc_parallel_filesystem.fs.id
    vpc        = hpc_gpu_fabric.f.vpc_id
  }
}
