# A 4-node BM.GPU.H100.8 cluster in a compute cluster, its fabric and File Storage with Lustre, on the OCI
# emulator. The API key is the emulator's test key; requests are signed exactly as for OCI.
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
  name           = "accfab"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  compartment_id = var.compartment
  instance_type  = "BM.GPU.H100.8"
  tags           = { team = "ml" }
}

resource "hpc_gpu_cluster" "c" {
  name           = "acc"
  fabric         = hpc_gpu_fabric.f
  node_count     = var.node_count
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
}

resource "hpc_parallel_filesystem" "fs" {
  name               = "accfs"
  fabric             = hpc_gpu_fabric.f
  cluster            = hpc_gpu_cluster.c
  capacity_gib       = 31200
  throughput_per_tib = 1000
  filesystem_name    = "train"
  data_repository    = "oci://datasets@tenancyns/imagenet"
}

output "node_names" { value = hpc_gpu_cluster.c.node_names }
output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "mount_command" { value = hpc_parallel_filesystem.fs.mount_command }

output "ids" {
  value = {
    fabric = hpc_gpu_fabric.f.id
    vcn    = hpc_gpu_fabric.f.vpc_id
  }
}
