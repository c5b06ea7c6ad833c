# Everything here is well-formed, so validation passes; the mistakes need the fabric's node type and cloud,
# which arrive through references and are judged when each resource is planned.
terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

provider "hpc" {
  gcp {
    project = "ml-prod"
  }
}

resource "hpc_gpu_fabric" "aws" {
  name   = "train"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
}

resource "hpc_gpu_fabric" "azure" {
  name          = "train"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_ND96isr_H100_v5"
}

resource "hpc_gpu_cluster" "too_many_efa" {
  name            = "efa"
  fabric          = hpc_gpu_fabric.aws
  node_count      = 4
  rdma_interfaces = 33
}

resource "hpc_gpu_cluster" "big_block" {
  name           = "block"
  fabric         = hpc_gpu_fabric.aws
  node_count     = 65
  capacity_type  = "capacity-block"
  reservation_id = "cr-0123456789abcdef0"
}

resource "hpc_gpu_cluster" "no_reservation" {
  name          = "cb"
  fabric        = hpc_gpu_fabric.aws
  node_count    = 4
  capacity_type = "capacity-block"
}

resource "hpc_gpu_cluster" "ib_reservation" {
  name           = "ib"
  fabric         = hpc_gpu_fabric.azure
  node_count     = 4
  capacity_type  = "reservation"
  reservation_id = "crg-1"
}

resource "hpc_parallel_filesystem" "odd_size" {
  name               = "scratch"
  fabric             = hpc_gpu_fabric.aws
  capacity_gib       = 3000
  throughput_per_tib = 250
}

resource "hpc_parallel_filesystem" "amlfs_tier" {
  name               = "amlfs"
  fabric             = hpc_gpu_fabric.azure
  capacity_gib       = 4096
  throughput_per_tib = 1000
}

resource "hpc_gpu_fabric" "oci" {
  name           = "train"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "AD-1"
  gpu            = "H100"
  compartment_id = "ocid1.compartment.oc1..example"
}

# OKE workers without the worker image that carries oke-install.sh.
resource "hpc_gpu_node_pool" "oke" {
  name               = "gpu"
  fabric             = hpc_gpu_fabric.oci
  kubernetes_cluster = "ocid1.cluster.oc1.iad.aaaaaaaaexample"
  node_count         = 4
}

# An EKS pool without the role its nodes join with.
resource "hpc_gpu_node_pool" "no_role" {
  name               = "gpu"
  fabric             = hpc_gpu_fabric.aws
  kubernetes_cluster = "ml-prod"
  node_count         = 4
}
