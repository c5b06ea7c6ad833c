# Quickstart: a 2-node H100 training cluster on AWS with FSx for Lustre, through the cloud-agnostic
# training-cluster module. `tofu apply` prints what a job needs: the nodes, an MPI hostfile, the Lustre
# mount command and the NCCL environment.
#
# No endpoint here: like any AWS tool the provider follows AWS_ENDPOINT_URL and the usual credential
# chain, so the same files run against real AWS or, with AWS_ENDPOINT_URL set, the AWS emulator
# (`./scripts/emulators.sh start`).

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

provider "hpc" {
  default_tags = { team = "ml-platform" }

  aws {
    region = "us-east-1"
  }
}

variable "gpu" {
  description = "GPU model of the nodes; the provider picks the best-connected instance type for it."
  type        = string
  default     = "H100"
}

module "cluster" {
  source = "../../modules/training-cluster"

  name       = "train"
  cloud      = "aws"
  region     = "us-east-1"
  zone       = "us-east-1a"
  gpu        = var.gpu
  node_count = 2

  storage_capacity_gib       = 2400
  storage_throughput_per_tib = 500
}

output "node_names" {
  value = module.cluster.node_names
}

output "node_private_ips" {
  value = module.cluster.node_private_ips
}

output "hostfile" {
  description = "MPI hostfile, e.g. `tofu output -raw hostfile > hostfile && mpirun --hostfile hostfile ...`."
  value       = module.cluster.hostfile
}

output "mount_command" {
  value = module.cluster.mount_command
}

output "nccl_environment" {
  value = module.cluster.nccl_environment
}

output "estimated_hourly_cost_usd" {
  description = "Nodes plus Lustre per hour at list prices (an estimate; see cost_basis)."
  value       = module.cluster.estimated_hourly_cost_usd
}

output "cost_basis" {
  value = module.cluster.cost_basis
}
