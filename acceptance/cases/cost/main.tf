# A 16-node p5.48xlarge cluster and a 7200 GiB FSx for Lustre filesystem: the plan shows what they cost per
# hour, from the catalog's list prices or from the provider's own prices.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "prices" {
  type    = map(number)
  default = {}
}

variable "capacity_type" {
  type    = string
  default = "on-demand"
}

provider "hpc" {
  prices = var.prices
  aws {
    region = "us-east-1"
  }
}

resource "hpc_gpu_fabric" "f" {
  name   = "costfab"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
}

resource "hpc_gpu_cluster" "c" {
  name          = "cost"
  fabric        = hpc_gpu_fabric.f
  node_count    = 16
  capacity_type = var.capacity_type
}

resource "hpc_parallel_filesystem" "fs" {
  name               = "costfs"
  fabric             = hpc_gpu_fabric.f
  capacity_gib       = 7200
  throughput_per_tib = 125
}
