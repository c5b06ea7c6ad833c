# A video transcoding service on OCI without any hpc_gpu_fabric: 2 x VM.GPU.A10.1 (one A10 with an NVENC
# encoder each) on Ethernet, in a VCN the cluster makes for itself, with no compute cluster and no RDMA plugins.
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

resource "hpc_gpu_cluster" "c" {
  name           = "transcode"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  compartment_id = "ocid1.compartment.oc1..acceptance"
  gpu            = "A10"
  node_count     = 2
  workload       = "media"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "network" { value = hpc_gpu_cluster.c.network }
