terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

provider "hpc" {
  aws {
    region   = "us-east-1"
    endpoint = "localhost:4566"
  }
}

data "hpc_gpu_catalog" "any" {
  cloud = "aws"
}
