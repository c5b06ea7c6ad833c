# Slurm on the aws emulator (acceptance/slurm.rs drives it): a fabric that hosts Slurm, a GPU cluster whose
# nodes join it, and the Slurm cluster over them: controller and login node on the fabric's network, the
# configuration rendered in the plan. `node_count` is a variable, so the test grows the cluster.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "node_count" {
  type    = number
  default = 2
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

resource "hpc_gpu_fabric" "f" {
  name  = "slfab"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "p5.48xlarge"
  slurm = true
}

resource "hpc_gpu_cluster" "gpu" {
  name       = "gpu"
  fabric     = hpc_gpu_fabric.f
  node_count = var.node_count
  slurm      = hpc_gpu_fabric.f.slurm_join
}

resource "hpc_slurm_cluster" "ml" {
  name          = "ml"
  fabric        = hpc_gpu_fabric.f
  slurm_version = "22.05"

  partition {
    name    = "gpu"
    cluster = hpc_gpu_cluster.gpu
    default = true
  }
}

output "slurm_conf" { value = hpc_slurm_cluster.ml.slurm_conf }
output "gres_conf" { value = hpc_slurm_cluster.ml.gres_conf }
output "topology_conf" { value = hpc_slurm_cluster.ml.topology_conf }
output "controller_address" { value = hpc_slurm_cluster.ml.controller_address }
output "login_command" { value = hpc_slurm_cluster.ml.login_command }
output "nccl_test" { value = hpc_slurm_cluster.ml.nccl_tests["gpu"] }
output "placement_groups" { value = hpc_gpu_cluster.gpu.placement_groups }
