# Four p5.48xlarge nodes with FSx for Lustre linked to an S3 dataset. Set AWS_ENDPOINT_URL to run it
# against the AWS emulator.

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
  aws {
    region = "us-east-1"
  }
}

module "cluster" {
  source = "../.."

  name       = "train"
  region     = "us-east-1"
  zone       = "us-east-1a"
  node_count = 4

  # To launch into an EC2 Capacity Block in an existing network instead:
  # capacity_type  = "capacity-block"
  # reservation_id = "cr-0123456789abcdef0"
  # vpc_id         = "vpc-0123456789abcdef0"
  # subnet_id      = "subnet-0123456789abcdef0"

  storage_capacity_gib       = 4800
  storage_throughput_per_tib = 500
  s3_import_path             = "s3://ml-datasets/tokenized"

  tags = { project = "llm" }
}
