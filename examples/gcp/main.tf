# A 4-node a3-megagpu-8g (8x H100, GPUDirect-TCPXO) cluster on Google Cloud with Managed Lustre.
# The fabric creates the 8 GPU VPCs A3 Mega needs, with MTU 8244, and a compact placement policy.

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
  gcp {
    project  = "ml-platform-prod"
    region   = "us-central1"
    zone     = "us-central1-a"
    endpoint = var.gcp_endpoint
  }
}

resource "hpc_gpu_fabric" "train" {
  name          = "train"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = "a3-megagpu-8g"
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
  capacity_gib       = 36000
  throughput_per_tib = 500
}

# A3 Ultra (H200, RoCE): a second gVNIC VPC and a RoCE VPC with 8 subnets instead.
resource "hpc_gpu_fabric" "ultra" {
  name          = "ultra"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-b"
  instance_type = "a3-ultragpu-8g"
  max_distance  = 2
}
