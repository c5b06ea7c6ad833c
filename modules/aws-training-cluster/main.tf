# The training-cluster module on AWS, with what is particular to AWS: EC2 capacity reservations and
# capacity blocks for ML, an existing VPC and subnet, and an S3 bucket linked to FSx for Lustre.

terraform {
  required_version = ">= 1.0"
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "name" {
  description = "Name of the fabric, cluster and filesystem; prefix of every AWS resource (1-40 lowercase letters, digits, hyphens)."
  type        = string
}

variable "region" {
  description = "AWS region, e.g. us-east-1."
  type        = string
}

variable "zone" {
  description = "Availability zone of the nodes and the filesystem, e.g. us-east-1a."
  type        = string
}

variable "gpu" {
  description = "GPU model, resolved to the best-connected instance type (H100: p5.48xlarge). Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "EC2 instance type; overrides gpu."
  type        = string
  default     = null
}

variable "node_count" {
  description = "Number of instances. Changes in place."
  type        = number
}

variable "workload" {
  description = "pretraining, finetuning, inference or media (video transcoding, needs NVENC GPUs); drives the provider's plan-time checks."
  type        = string
  default     = "pretraining"
}

variable "vpc_id" {
  description = "Existing VPC to join (with subnet_id); one is created when null."
  type        = string
  default     = null
}

variable "subnet_id" {
  description = "Existing private subnet in zone to join (with vpc_id); one is created when null."
  type        = string
  default     = null
}

variable "capacity_type" {
  description = "on-demand, spot, reservation (an EC2 capacity reservation) or capacity-block (EC2 Capacity Blocks for ML); on-demand when null."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_type == null ? true : contains(["on-demand", "spot", "reservation", "capacity-block"], var.capacity_type)
    error_message = "On AWS the capacity_type must be on-demand, spot, reservation or capacity-block."
  }
}

variable "placement" {
  description = "cluster (a cluster placement group) or none. When null: none with reserved capacity, which is co-located already and fails to launch into a placement group it was not made for; cluster otherwise."
  type        = string
  default     = null

  validation {
    condition     = var.placement == null ? true : contains(["cluster", "none"], var.placement)
    error_message = "On AWS the placement must be cluster or none."
  }
}

variable "reservation_id" {
  description = "Capacity reservation id (cr-...) of the reservation or capacity block to launch into."
  type        = string
  default     = null
}

variable "create_filesystem" {
  description = "Create the FSx for Lustre filesystem."
  type        = bool
  default     = true
}

variable "storage_capacity_gib" {
  description = "FSx for Lustre PERSISTENT_2 capacity in GiB: 1200 or a multiple of 2400. Required with a filesystem."
  type        = number
  default     = null
}

variable "storage_throughput_per_tib" {
  description = "FSx for Lustre throughput in MB/s per TiB: 125, 250, 500 or 1000. Required with a filesystem."
  type        = number
  default     = null
}

variable "s3_import_path" {
  description = "S3 path linked to the filesystem by a data repository association (imports and exports new, changed and deleted objects), e.g. s3://bucket/prefix."
  type        = string
  default     = null

  validation {
    condition     = var.s3_import_path == null ? true : can(regex("^s3://[a-z0-9][a-z0-9.-]+", var.s3_import_path))
    error_message = "The s3_import_path must be an s3://bucket[/prefix] path."
  }
}

variable "ssh_public_key" {
  description = "SSH public key for the instances' default user."
  type        = string
  default     = null
}

variable "user_data" {
  description = "Cloud-init or script passed to every instance unchanged."
  type        = string
  default     = null
  sensitive   = true
}

variable "image" {
  description = "AMI id; the latest AWS Deep Learning Base GPU AMI when null."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags on every AWS resource, after the provider's default_tags."
  type        = map(string)
  default     = {}
}

locals {
  reserved = var.capacity_type == null ? false : contains(["reservation", "capacity-block"], var.capacity_type)
}

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "aws"
  region                     = var.region
  zone                       = var.zone
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  vpc_id                     = var.vpc_id
  subnet_id                  = var.subnet_id
  placement                  = coalesce(var.placement, local.reserved ? "none" : "cluster")
  capacity_type              = var.capacity_type
  reservation_id             = var.reservation_id
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gib
  storage_throughput_per_tib = var.storage_throughput_per_tib
  data_repository            = var.s3_import_path
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

output "placement_group_name" {
  description = "Name of the EC2 cluster placement group the instances launch into; null with placement none."
  value       = one(module.cluster.placement_groups)
}
