# Capacity before money on OCI: a BM.GPU.L40S.4 cluster in its fabric's compute cluster, on the OCI emulator,
# whose Compute GPU limit (Limits GetResourceAvailability) and host capacity the test sets through the
# emulator's admin API. The node count, capacity policy, minimum, workload and the provider's quota check are
# variables, so the test changes them without editing this file.
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
variable "node_count" {
  type    = number
  default = 4
}
variable "capacity_policy" {
  type    = string
  default = "all-or-nothing"
}
variable "min_nodes" {
  type    = number
  default = null
}
variable "workload" {
  type    = string
  default = "pretraining"
}
variable "quota_check" {
  type    = string
  default = "error"
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  quota_check  = var.quota_check
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
  name           = "capfab"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  compartment_id = var.compartment
  instance_type  = "BM.GPU.L40S.4"
  placement      = "cluster"
}

resource "hpc_gpu_cluster" "c" {
  name            = "cap"
  fabric          = hpc_gpu_fabric.f
  node_count      = var.node_count
  capacity_type   = "on-demand"
  image           = "ocid1.image.oc1.iad.emulator-ol8-gpu"
  capacity_policy = var.capacity_policy
  min_nodes       = var.min_nodes
  workload        = var.workload
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
