# Day 2 on OCI: a 4-node BM.GPU.L40S.4 cluster in its fabric's compute cluster, on the OCI emulator. The API
# key is the emulator's test key; requests are signed exactly as for OCI. `image`, `repair` and the update
# strategy are variables, so the test changes them without editing this file.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "key_path" { type = string }
variable "fingerprint" { type = string }
variable "compartment" {
  type    = string
  default = "ocid1.compartment.oc1..acceptance"
}
variable "image" {
  type    = string
  default = "ocid1.image.oc1.iad.emulator-ol8-gpu"
}
variable "repair" {
  type    = string
  default = "replace"
}
variable "batch_size" {
  type    = string
  default = "2"
}
variable "wait_for_selfcheck" {
  type    = bool
  default = true
}

provider "hpc" {
  default_tags = { project = "acceptance" }
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
  name           = "d2fab"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  compartment_id = var.compartment
  instance_type  = "BM.GPU.L40S.4"
  placement      = "cluster"
}

# The nodes run the boot-time self-check, whose verdict wait_for_selfcheck waits for (the test publishes
# the verdicts itself).
data "hpc_gpu_selfcheck" "node" {
  cloud         = "oci"
  instance_type = "BM.GPU.L40S.4"
}

resource "hpc_gpu_cluster" "c" {
  name          = "d2"
  fabric        = hpc_gpu_fabric.f
  node_count    = 4
  capacity_type = "on-demand"
  image         = var.image
  user_data     = data.hpc_gpu_selfcheck.node.combined_user_data
  repair        = var.repair
  node_identity = "ocid1.dynamicgroup.oc1..hpcselfcheck" # the self-check publishes its verdict as this identity

  update_strategy {
    batch_size         = var.batch_size
    wait_for_selfcheck = var.wait_for_selfcheck
  }
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "node_revisions" { value = hpc_gpu_cluster.c.node_revisions }
output "revision" { value = hpc_gpu_cluster.c.revision }
