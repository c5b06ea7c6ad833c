terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

resource "hpc_gpu_fabric" "no_zone" {
  name   = "nozone"
  cloud  = "aws"
  region = "us-east-1"
  gpu    = "H100"
}

resource "hpc_gpu_fabric" "bad_gpu" {
  name   = "badgpu"
  cloud  = "gcp"
  region = "us-central1"
  zone   = "us-central1-a"
  gpu    = "MI300X"
}

resource "hpc_gpu_fabric" "bad_distance" {
  name          = "ultra"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-b"
  instance_type = "a3-ultragpu-8g"
  max_distance  = 1
}

resource "hpc_gpu_fabric" "half_network" {
  name   = "half"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
  vpc_id = "vpc-0123"
}

resource "hpc_gpu_fabric" "bad_name" {
  name   = "Train_Fabric"
  cloud  = "azure"
  region = "eastus"
  gpu    = "H100"
}

resource "hpc_gpu_fabric" "no_compartment" {
  name   = "oci"
  cloud  = "oci"
  region = "us-ashburn-1"
  zone   = "AD-1"
  gpu    = "H100"
}

resource "hpc_gpu_fabric" "bad_placement" {
  name      = "spread"
  cloud     = "azure"
  region    = "eastus"
  gpu       = "H100"
  placement = "cluster-network"
}

# Resources that depend on a failing one are not validated by the CLI, so these use a valid fabric.
resource "hpc_gpu_fabric" "ok" {
  name   = "ok"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
}

resource "hpc_gpu_cluster" "bad_capacity" {
  name          = "spotty"
  fabric        = hpc_gpu_fabric.ok
  node_count    = 2
  capacity_type = "preemptible"
}

resource "hpc_gpu_cluster" "zero_nodes" {
  name       = "zero"
  fabric     = hpc_gpu_fabric.ok
  node_count = 0
}

resource "hpc_gpu_cluster" "bad_workload" {
  name       = "work"
  fabric     = hpc_gpu_fabric.ok
  node_count = 2
  workload   = "training"
}

resource "hpc_gpu_cluster" "bad_timeout" {
  name       = "slow"
  fabric     = hpc_gpu_fabric.ok
  node_count = 2
  timeouts {
    create = "2 hours"
  }
}

resource "hpc_parallel_filesystem" "bad_repo" {
  name               = "repo"
  fabric             = hpc_gpu_fabric.ok
  capacity_gib       = 2400
  throughput_per_tib = 250
  filesystem_name    = "scratch-01"
}
