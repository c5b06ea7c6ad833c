# The training-cluster module on OCI, with what is particular to it: the compartment, the choice between a
# compute cluster and a cluster network, and an Object Storage bucket linked to File Storage with Lustre.
# Credentials and tenancy come from the provider's oci block (~/.oci/config by default).

terraform {
  required_version = ">= 1.0"
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "name" {
  description = "Name of the fabric, cluster and filesystem; prefix of every OCI display name (1-40 lowercase letters, digits, hyphens)."
  type        = string
}

variable "region" {
  description = "OCI region, e.g. us-ashburn-1."
  type        = string
}

variable "availability_domain" {
  description = "Availability domain of the nodes and the filesystem, e.g. Uocm:US-ASHBURN-AD-1."
  type        = string
}

variable "compartment_id" {
  description = "OCID of the compartment to build in."
  type        = string

  validation {
    condition     = can(regex("^ocid1\\.(compartment|tenancy)\\.", var.compartment_id))
    error_message = "The compartment_id must be a compartment (or tenancy) OCID, ocid1.compartment.oc1..."
  }
}

variable "placement" {
  description = "cluster (a compute cluster, nodes launched one by one) or cluster-network (a cluster network's instance pool, resized in place)."
  type        = string
  default     = "cluster"

  validation {
    condition     = contains(["cluster", "cluster-network"], var.placement)
    error_message = "On OCI the placement must be cluster or cluster-network."
  }
}

variable "gpu" {
  description = "GPU model, resolved to the best-connected shape (H100: BM.GPU.H100.8). Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "Shape, e.g. BM.GPU.H200.8; overrides gpu."
  type        = string
  default     = null
}

variable "node_count" {
  description = "Number of bare-metal nodes. Changes in place."
  type        = number
}

variable "workload" {
  description = "pretraining, finetuning, inference or media (video transcoding, needs NVENC GPUs); drives the provider's plan-time checks."
  type        = string
  default     = "pretraining"
}

variable "capacity_type" {
  description = "on-demand, spot (preemptible) or reservation; on-demand when null."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_type == null ? true : contains(["on-demand", "spot", "reservation"], var.capacity_type)
    error_message = "On OCI the capacity_type must be on-demand, spot or reservation."
  }
}

variable "reservation_id" {
  description = "OCID of the capacity reservation to launch into, with capacity_type reservation."
  type        = string
  default     = null
}

variable "create_filesystem" {
  description = "Create the File Storage with Lustre filesystem."
  type        = bool
  default     = true
}

variable "storage_capacity_gb" {
  description = "Lustre capacity in GB as OCI counts them: at least 31200, in steps of 10400 up to 124800 and of 41600 above. Required with a filesystem."
  type        = number
  default     = null
}

variable "storage_throughput_per_tib" {
  description = "Lustre performance tier in MB/s per TiB: 125, 250, 500 or 1000. Required with a filesystem."
  type        = number
  default     = null
}

variable "object_storage_path" {
  description = "Object Storage path linked to the filesystem, as oci://bucket@namespace/prefix."
  type        = string
  default     = null

  validation {
    condition     = var.object_storage_path == null ? true : can(regex("^oci://[^@/]+@[^/]+", var.object_storage_path))
    error_message = "The object_storage_path must be an oci://bucket@namespace[/prefix] path."
  }
}

variable "ssh_public_key" {
  description = "SSH public key for the nodes' opc user."
  type        = string
  default     = null
}

variable "user_data" {
  description = "Cloud-init passed to every node unchanged."
  type        = string
  default     = null
  sensitive   = true
}

variable "image" {
  description = "Image OCID; the provider's GPU image for the shape when null."
  type        = string
  default     = null
}

variable "tags" {
  description = "Freeform tags on every OCI resource, after the provider's default_tags."
  type        = map(string)
  default     = {}
}

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "oci"
  region                     = var.region
  zone                       = var.availability_domain
  compartment_id             = var.compartment_id
  placement                  = var.placement
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  capacity_type              = var.capacity_type
  reservation_id             = var.reservation_id
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gb # the provider reads OCI capacities as GB
  storage_throughput_per_tib = var.storage_throughput_per_tib
  data_repository            = var.object_storage_path
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
