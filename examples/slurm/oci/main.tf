# Slurm on OCI: two BM.GPU.H100.8 nodes in the fabric's compute cluster, a controller and a login node
# (VM.Standard.E5.Flex) on the fabric's VCN; the tree topology is the compute cluster (one leaf switch).
# Credentials come from ~/.oci/config (or the file OCI_CONFIG_FILE names); set oci_endpoint to run it against
# the OCI emulator.

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
  slurm          = true
}

resource "hpc_gpu_cluster" "h100" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = var.nodes
  slurm      = hpc_gpu_fabric.train.slurm_join
}

resource "hpc_slurm_cluster" "ml" {
  name          = "ml"
  fabric        = hpc_gpu_fabric.train
  slurm_version = var.slurm_version
  # Job accounting (sacct, sreport): slurmdbd and MariaDB on the controller.
  accounting = true

  partition {
    name    = "h100"
    cluster = hpc_gpu_cluster.h100
    default = true
  }
}
