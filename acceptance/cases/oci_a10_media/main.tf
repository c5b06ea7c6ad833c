# A video transcoding service on OCI: 2 x VM.GPU.A10.1 (one A10 with an NVENC encoder each) on Ethernet,
# without a compute cluster or the RDMA agent plugins, on the OCI emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "key_path" { type = string }
variable "fingerprint" { type = string }

provider "hpc" {
  oci {
    tenancy_ocid     = "ocid1.tenancy.oc1..emulator"
    user_ocid        = "ocid1.user.oc1..emulator"
    fingerprint      = var.fingerprint
    private_key_path = var.key_path
    region           = "us-ashburn-1"
    endpoint         = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name           = "media"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  compartment_id = "ocid1.compartment.oc1..acceptance"
  gpu            = "A10"
  placement      = "none"
}

resource "hpc_gpu_cluster" "c" {
  name       = "transcode"
  fabric     = hpc_gpu_fabric.f
  node_count = 2
  workload   = "media"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
