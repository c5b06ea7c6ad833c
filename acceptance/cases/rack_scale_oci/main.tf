# A GB200 NVL72 training cluster on BM.GPU.GB200.4: one GPU memory cluster per NVLink domain on the racks'
# GPU memory fabrics (found, never made), over the fabric's compute cluster, on the OCI emulator.
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
  default = 36
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
  name           = "nvlfab"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  compartment_id = var.compartment
  gpu            = "GB200"
}

resource "hpc_gpu_cluster" "c" {
  name           = "nvl"
  fabric         = hpc_gpu_fabric.f
  node_count     = var.node_count
  image          = "ocid1.image.oc1..arm64gpu"
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc acceptance"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "nvlink_domains" { value = hpc_gpu_cluster.c.nvlink_domains }
output "slurm_topology_conf" { value = hpc_gpu_cluster.c.slurm_topology_conf }
output "slurm_conf" { value = hpc_gpu_cluster.c.slurm_conf }
output "kubernetes_node_labels" { value = hpc_gpu_cluster.c.kubernetes_node_labels }
output "node_environment" { value = hpc_gpu_cluster.c.node_environment }
output "instance_type" { value = hpc_gpu_cluster.c.instance_type }
output "cluster_id" { value = hpc_gpu_cluster.c.id }
