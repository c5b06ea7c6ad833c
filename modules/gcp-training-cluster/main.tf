# The training-cluster module on Google Cloud, with what is particular to it: compact placement distance,
# Flex-start (DWS) or reserved capacity, and a Cloud Storage bucket linked to Managed Lustre. The project
# comes from the provider's gcp block, so the same module serves any project.

terraform {
  required_version = ">= 1.0"
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "name" {
  description = "Name of the fabric, cluster and filesystem; prefix of every Google Cloud resource (1-40 lowercase letters, digits, hyphens)."
  type        = string
}

variable "zone" {
  description = "Zone of the nodes and the filesystem, e.g. us-central1-a; the region is derived from it."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "The zone must be a Google Cloud zone such as us-central1-a."
  }
}

variable "gpu" {
  description = "GPU model, resolved to the best-connected machine type (H100: a3-megagpu-8g). Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "Machine type, e.g. a3-ultragpu-8g; overrides gpu."
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

variable "max_distance" {
  description = "Compact placement: maximum distance between nodes, 1-3 (1 is not allowed for A3 Ultra and A4); Google's default when null."
  type        = number
  default     = null

  validation {
    condition     = var.max_distance == null ? true : contains([1, 2, 3], var.max_distance)
    error_message = "The max_distance must be 1, 2 or 3."
  }
}

variable "capacity_type" {
  description = "on-demand, spot, reservation or flex-start (Dynamic Workload Scheduler); on-demand when null."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_type == null ? true : contains(["on-demand", "spot", "reservation", "flex-start"], var.capacity_type)
    error_message = "On Google Cloud the capacity_type must be on-demand, spot, reservation or flex-start."
  }
}

variable "reservation_id" {
  description = "Name of the reservation to launch into, with capacity_type reservation."
  type        = string
  default     = null
}

variable "create_filesystem" {
  description = "Create the Managed Lustre instance."
  type        = bool
  default     = true
}

variable "storage_capacity_gib" {
  description = "Managed Lustre capacity in GiB; the valid steps depend on the tier. Required with a filesystem."
  type        = number
  default     = null
}

variable "storage_throughput_per_tib" {
  description = "Managed Lustre performance tier in MB/s per TiB: 125, 250, 500 or 1000. Required with a filesystem."
  type        = number
  default     = null
}

variable "gcs_import_path" {
  description = "Cloud Storage path linked to the filesystem, e.g. gs://bucket/prefix."
  type        = string
  default     = null

  validation {
    condition     = var.gcs_import_path == null ? true : can(regex("^gs://[a-z0-9][a-z0-9._-]+", var.gcs_import_path))
    error_message = "The gcs_import_path must be a gs://bucket[/prefix] path."
  }
}

variable "ssh_public_key" {
  description = "SSH public key for the instances' default user."
  type        = string
  default     = null
}

variable "user_data" {
  description = "Startup script or cloud-init passed to every instance unchanged."
  type        = string
  default     = null
  sensitive   = true
}

variable "image" {
  description = "Boot image self link or family; the Deep Learning VM CUDA image when null."
  type        = string
  default     = null
}

variable "labels" {
  description = "Labels on every Google Cloud resource, after the provider's default_tags (lowercase keys and values)."
  type        = map(string)
  default     = {}
}

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "gcp"
  region                     = regex("^(.*)-[a-z]$", var.zone)[0]
  zone                       = var.zone
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  max_distance               = var.max_distance
  capacity_type              = var.capacity_type
  reservation_id             = var.reservation_id
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gib
  storage_throughput_per_tib = var.storage_throughput_per_tib
  data_repository            = var.gcs_import_path
  ssh_public_key             = var.ssh_public_key
  user_data                  = var.user_data
  image                      = var.image
  tags                       = var.labels
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
