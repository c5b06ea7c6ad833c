# The training-cluster module on Azure, with what is particular to it: the resource group to build in and
# the weekly maintenance window of Azure Managed Lustre. Azure has no zone here: InfiniBand scale sets
# are kept together by a proximity placement group instead.

terraform {
  required_version = ">= 1.0"
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "name" {
  description = "Name of the fabric, cluster and filesystem; prefix of every Azure resource (1-40 lowercase letters, digits, hyphens)."
  type        = string
}

variable "location" {
  description = "Azure location, e.g. eastus."
  type        = string
}

variable "resource_group" {
  description = "Existing resource group to build in; one named after the cluster is created when null."
  type        = string
  default     = null
}

variable "gpu" {
  description = "GPU model, resolved to the best-connected VM size (H100: Standard_ND96isr_H100_v5). Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "VM size, e.g. Standard_ND96isr_H200_v5; overrides gpu."
  type        = string
  default     = null
}

variable "node_count" {
  description = "Number of VMs; above 100 they are split into several InfiniBand scale sets. Changes in place."
  type        = number
}

variable "workload" {
  description = "pretraining, finetuning, inference or media (video transcoding, needs NVENC GPUs); drives the provider's plan-time checks."
  type        = string
  default     = "pretraining"
}

variable "capacity_type" {
  description = "on-demand or spot; on-demand when null. Capacity reservation groups cannot hold InfiniBand scale sets."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_type == null ? true : contains(["on-demand", "spot"], var.capacity_type)
    error_message = "On Azure the capacity_type must be on-demand or spot."
  }
}

variable "create_filesystem" {
  description = "Create the Azure Managed Lustre filesystem."
  type        = bool
  default     = true
}

variable "storage_capacity_gib" {
  description = "Azure Managed Lustre capacity in GiB, a multiple of the tier's step (125 MB/s/TiB: 16 TiB, 16384 GiB). Required with a filesystem."
  type        = number
  default     = null
}

variable "storage_throughput_per_tib" {
  description = "Azure Managed Lustre throughput in MB/s per TiB: 40, 125, 250 or 500. Required with a filesystem."
  type        = number
  default     = null
}

variable "maintenance_window" {
  description = "Weekly maintenance window of the filesystem as day and UTC time, e.g. Saturday 23:00; Sunday 02:00 when null. Changing it replaces the filesystem."
  type        = string
  default     = null
}

variable "ssh_public_key" {
  description = "SSH public key (OpenSSH format) for the VMs' admin user: Azure needs a key or a password for Linux VMs, and password login stays off."
  type        = string
}

variable "user_data" {
  description = "Cloud-init passed to every VM unchanged."
  type        = string
  default     = null
  sensitive   = true
}

variable "image" {
  description = "Image URN (publisher:offer:sku:version); the Ubuntu HPC image microsoft-dsvm:ubuntu-hpc:2204:latest when null."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags on every Azure resource, after the provider's default_tags."
  type        = map(string)
  default     = {}
}

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "azure"
  region                     = var.location
  resource_group             = var.resource_group
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  capacity_type              = var.capacity_type
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gib
  storage_throughput_per_tib = var.storage_throughput_per_tib
  maintenance_window         = var.maintenance_window
  ssh_public_key             = var.ssh_public_key
  user_data                  = var.user_data
  image                      = var.image
  tags                       = var.tags
}

output "fabric_id" {
  description = "Id of the fabric."
  value       = module.cluster.fabric_id
}

output "cluster_id" {
  description = "Id of the cluster."
  value       = module.cluster.cluster_id
}

output "filesystem_id" {
  description = "Id of the filesystem; null without one."
  value       = module.cluster.filesystem_id
}

output "instance_type" {
  description = "Node type of the cluster."
  value       = module.cluster.instance_type
}

output "gpus_total" {
  description = "GPUs in the cluster."
  value       = module.cluster.gpus_total
}

output "node_names" {
  description = "Node names, in node index order."
  value       = module.cluster.node_names
}

output "node_ids" {
  description = "Cloud ids of the nodes, in node index order."
  value       = module.cluster.node_ids
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = module.cluster.node_private_ips
}

output "nodes" {
  description = "The nodes (name, id, private_ip), in node index order."
  value       = module.cluster.nodes
}

output "hostfile" {
  description = "MPI hostfile: one line per node with its private IP and GPU slots."
  value       = module.cluster.hostfile
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node; null without a filesystem."
  value       = module.cluster.mount_command
}

output "nccl_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = module.cluster.nccl_environment
}

output "estimated_hourly_cost_usd" {
  description = "Estimated USD per hour of the cluster plus the filesystem (list or provider prices); null when either is not estimated (see cost_basis)."
  value       = module.cluster.estimated_hourly_cost_usd
}

output "cost_basis" {
  description = "How the cluster's and the filesystem's estimates were made, or why not."
  value       = module.cluster.cost_basis
}

output "nccl_test_slurm" {
  description = "Slurm batch script running the nccl-tests all-reduce on these nodes; check its log with data.hpc_nccl_check before a long run."
  value       = module.cluster.nccl_test_slurm
}

output "nccl_test_kubernetes" {
  description = "The same all-reduce as a Kubernetes indexed Job manifest."
  value       = module.cluster.nccl_test_kubernetes
}

output "expected_busbw_gbs" {
  description = "Published all-reduce bus bandwidth (GB/s) to expect from nccl-tests on this node type, where one exists."
  value       = module.cluster.expected_busbw_gbs
}

output "placement_groups" {
  description = "Names of the placement pieces the nodes share (placement group, proximity placement group, compact placement policy, compute cluster or cluster network)."
  value       = module.cluster.placement_groups
}

output "expansion_summary" {
  description = "The cloud resources each part expands into, as kind.name with a count where above one."
  value       = module.cluster.expansion_summary
}
