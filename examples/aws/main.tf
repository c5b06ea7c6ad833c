# A 4-node p5.48xlarge (8x H100) training cluster on AWS with a 4800 GiB FSx for Lustre filesystem.
# `tofu plan` shows every vendor piece: VPC, subnet, cluster placement group, EFA security group and
# rules, launch template with 32 EFA interfaces, instances, FSx for Lustre and its S3 association.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {
  default_tags = { team = "ml-platform" }
  aws {
    region = "us-east-1"
  }
}

resource "hpc_gpu_fabric" "train" {
  name   = "train"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
}

resource "hpc_gpu_cluster" "train" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = 4
}

resource "hpc_parallel_filesystem" "scratch" {
  name               = "scratch"
  fabric             = hpc_gpu_fabric.train
  cluster            = hpc_gpu_cluster.train
  capacity_gib       = 4800
  throughput_per_tib = 500
  data_repository    = "s3://ml-datasets/tokenized"
}
