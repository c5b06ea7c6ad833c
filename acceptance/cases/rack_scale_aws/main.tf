# A GB200 NVL72 training cluster on UltraServers (u-p6e-gb200x72, 18 nodes each) of a Capacity Block the
# test buys first, with its fabric, on the AWS emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "capacity_block" { type = string }
variable "node_count" {
  type    = number
  default = 36
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  aws {
    region     = "us-east-1"
    endpoint   = var.endpoint
    access_key = "test"
    secret_key = "test"
  }
}

# Capacity Blocks are co-located already: no placement group.
resource "hpc_gpu_fabric" "f" {
  name      = "nvlfab"
  cloud     = "aws"
  region    = "us-east-1"
  zone      = "us-east-1a"
  gpu       = "GB200"
  placement = "none"
}

resource "hpc_gpu_cluster" "c" {
  name           = "nvl"
  fabric         = hpc_gpu_fabric.f
  node_count     = var.node_count
  capacity_type  = "capacity-block"
  reservation_id = var.capacity_block
  image          = "ami-12c6146b"
}

output "nodes" { value = hpc_gpu_cluster.c.nodes }
output "nvlink_domains" { value = hpc_gpu_cluster.c.nvlink_domains }
output "slurm_topology_conf" { value = hpc_gpu_cluster.c.slurm_topology_conf }
output "slurm_conf" { value = hpc_gpu_cluster.c.slurm_conf }
output "kubernetes_node_labels" { value = hpc_gpu_cluster.c.kubernetes_node_labels }
output "node_environment" { value = hpc_gpu_cluster.c.node_environment }
output "instance_type" { value = hpc_gpu_cluster.c.instance_type }
output "cluster_id" { value = hpc_gpu_cluster.c.id }
