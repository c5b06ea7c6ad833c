# A 4-node p5.48xlarge cluster with its fabric and a Lustre filesystem, on the AWS emulator.
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
  default = 4800
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
  name          = "accfab"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "p5.48xlarge"
}

resource "hpc_gpu_cluster" "c" {
  name       = "acc"
  fabric     = hpc_gpu_fabric.f
  node_count = var.node_count
  image      = "ami-12c6146b"
  tags       = { team = "ml" }
}

resource "hpc_parallel_filesystem" "fs" {
  name               = "accfs"
  fabric             = hpc_gpu_fabric.f
  cluster            = hpc_gpu_cluster.c
  capacity_gib       = var.capacity_gib
  throughput_per_tib = 1000
  data_repository    = "s3://acc-training-data/datasets"
}

output "mount_command" { value = hpc_parallel_filesystem.fs.mount_command }
output "node_names" { value = hpc_gpu_cluster.c.node_names }
output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "ids" {
  value = {
    fabric     = hpc_gpu_fabric.f.id
    cluster    = hpc_gpu_cluster.c.id
    filesystem = hpc_parallel_filesystem.fs.id
  }
}
