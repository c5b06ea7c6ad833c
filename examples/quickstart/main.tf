# Quickstart: a 2-node H100 training cluster on AWS with FSx for Lustre, through the cloud-agnostic
# training-cluster module. `tofu apply` prints what a job needs: the nodes, an MPI hostfile, the Lustre
# mount command and the NCCL environment.
#
# No endpoint here: like any AWS tool the provider follows AWS_ENDPOINT_URL and the usual credential
# chain, so the same files run against real AWS or, with AWS_ENDPOINT_URL set, the AWS emulator
# (`./scripts/emulators.sh start`).

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

module "cluster" {
  source = "../../modules/training-cluster"

  name       = "train"
  cloud      = "aws"
  region     = "us-east-1"
  zone       = "us-east-1a"
  gpu        = var.gpu
  node_count = 2

  storage_capacity_gib       = 2400
  storage_throughput_per_tib = 500
}
