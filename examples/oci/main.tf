# A 4-node BM.GPU.H100.8 cluster on OCI in a compute cluster, with File Storage with Lustre.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

# Credentials come from ~/.oci/config (or the file OCI_CONFIG_FILE names).
provider "hpc" {
  oci {
    region   = "us-ashburn-1"
    endpoint = var.oci_endpoint
  }
}

resource "hpc_gpu_fabric" "train" {
  name           = "train"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  gpu            = "H100"
  compartment_id = "ocid1.compartment.oc1..exampleuniqueid"
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
  capacity_gib       = 31200
  throughput_per_tib = 250
}
