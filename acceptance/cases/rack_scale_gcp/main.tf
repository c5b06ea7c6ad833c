# A GB200 NVL72 training cluster on A4X (a4x-highgpu-4g, 18 VMs per NVLink sub-block) from a reservation,
# with its fabric, on the Google Cloud emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "node_count" {
  type    = number
  default = 36
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  gcp {
    project  = "ml-prod"
    endpoint = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name   = "nvlfab"
  cloud  = "gcp"
  region = "us-central1"
  zone   = "us-central1-a"
  gpu    = "GB200"
}

resource "hpc_gpu_cluster" "c" {
  name           = "nvl"
  fabric         = hpc_gpu_fabric.f
  node_count     = var.node_count
  capacity_type  = "reservation"
  reservation_id = "a4x-all-capacity"
  image          = "projects/ml-prod/global/images/ubuntu-accelerator-arm64"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "nvlink_domains" { value = hpc_gpu_cluster.c.nvlink_domains }
output "slurm_topology_conf" { value = hpc_gpu_cluster.c.slurm_topology_conf }
output "slurm_conf" { value = hpc_gpu_cluster.c.slurm_conf }
output "kubernetes_node_labels" { value = hpc_gpu_cluster.c.kubernetes_node_labels }
output "node_environment" { value = hpc_gpu_cluster.c.node_environment }
output "instance_type" { value = hpc_gpu_cluster.c.instance_type }
output "cluster_id" { value = hpc_gpu_cluster.c.id }
