# A single-node fine-tuning box with no fabric, and FSx for Lustre on the network the cluster made
# (fabric = hpc_gpu_cluster.tune.fabric).
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}
provider "hpc" {
  aws { region = "us-east-1" }
}
resource "hpc_gpu_cluster" "tune" {
  name       = "tune"
  cloud      = "aws"
  region     = "us-east-1"
  zone       = "us-east-1a"
  gpu        = "H100"
  node_count = 1
  workload   = "finetuning"
  image      = "ami-12c6146b"
}
resource "hpc_parallel_filesystem" "fs" {
  name               = "tunefs"
  fabric             = hpc_gpu_cluster.tune.fabric
  cluster            = hpc_gpu_cluster.tune
  capacity_gib       = 1200
  throughput_per_tib = 250
}
output "mount" { value = hpc_parallel_filesystem.fs.mount_command }
