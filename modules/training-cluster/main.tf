# A GPU training cluster on any of the four clouds: the fabric (network, placement, RDMA security), the
# nodes, and a managed Lustre filesystem next to them. The provider expands each into the cloud's own
# pieces; this module only wires them together and turns the result into what jobs need (hostfile, NCCL
# environment, mount command).

terraform {
  required_version = ">= 1.0"
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "name" {
  description = "Name of the fabric, cluster and filesystem; prefix of every cloud resource (1-40 lowercase letters, digits, hyphens)."
  type        = string
}

variable "cloud" {
  description = "Cloud to build in: aws, azure, gcp or oci."
  type        = string

  validation {
    condition     = contains(["aws", "azure", "gcp", "oci"], var.cloud)
    error_message = "The cloud must be one of aws, azure, gcp or oci."
  }
}

variable "region" {
  description = "Region (Azure: location)."
  type        = string
}

variable "zone" {
  description = "Availability zone (GCP zone, OCI availability domain). Required except on Azure."
  type        = string
  default     = null
}

variable "gpu" {
  description = "GPU model, resolved through the provider's catalog to the best-connected node type. Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "Node type (instance type, VM size, machine type or shape); overrides gpu."
  type        = string
  default     = null
}

variable "node_count" {
  description = "Number of nodes. Changes in place. Set this or nvlink_domains."
  type        = number
  default     = null

  validation {
    condition     = var.node_count == null ? true : var.node_count >= 1 && floor(var.node_count) == var.node_count
    error_message = "The node_count must be a whole number of at least 1."
  }
}

variable "nvlink_domains" {
  description = "Rack-scale node types (gpu = \"GB200\" or \"GB300\": NVL72 racks): number of whole NVLink domains; node_count becomes domains x nodes per domain (18). Set this or node_count."
  type        = number
  default     = null

  validation {
    condition     = var.nvlink_domains == null ? true : var.nvlink_domains >= 1 && floor(var.nvlink_domains) == var.nvlink_domains
    error_message = "The nvlink_domains must be a whole number of at least 1."
  }
}

variable "workload" {
  description = "pretraining, finetuning, inference or media (video transcoding, needs NVENC GPUs); drives the provider's plan-time checks."
  type        = string
  default     = "pretraining"

  validation {
    condition     = contains(["pretraining", "finetuning", "inference", "media"], var.workload)
    error_message = "The workload must be pretraining, finetuning, inference or media."
  }
}

variable "create_filesystem" {
  description = "Create the Lustre filesystem. When false the storage variables are ignored."
  type        = bool
  default     = true
}

variable "storage_capacity_gib" {
  description = "Lustre capacity in GiB (OCI: GB as OCI counts them); the valid sizes depend on cloud and tier. Required when create_filesystem is true."
  type        = number
  default     = null
}

variable "storage_throughput_per_tib" {
  description = "Lustre throughput tier in MB/s per TiB: 125, 250, 500 or 1000 (Azure: 40, 125, 250 or 500). Required when create_filesystem is true."
  type        = number
  default     = null
}

variable "data_repository" {
  description = "Object store linked to the filesystem: an s3://, gs:// or oci:// path, or an Azure Blob container URL (https://)."
  type        = string
  default     = null
}

variable "maintenance_window" {
  description = "Azure: weekly maintenance window of the filesystem, e.g. Sunday 02:00 (UTC); the provider's default when null."
  type        = string
  default     = null
}

variable "vpc_id" {
  description = "Existing VPC, VNet or VCN to join (with subnet_id); one is created when null."
  type        = string
  default     = null
}

variable "subnet_id" {
  description = "Existing subnet to join (with vpc_id); one is created when null."
  type        = string
  default     = null
}

variable "placement" {
  description = "cluster (proximity placement), none, or on OCI cluster-network; the provider's default (cluster) when null."
  type        = string
  default     = null

  validation {
    condition     = var.placement == null ? true : contains(["cluster", "none", "cluster-network"], var.placement)
    error_message = "The placement must be cluster, none or cluster-network (OCI only)."
  }
}

variable "compartment_id" {
  description = "OCI: compartment OCID to build in. Required on OCI."
  type        = string
  default     = null
}

variable "resource_group" {
  description = "Azure: existing resource group to build in; one is created when null."
  type        = string
  default     = null
}

variable "max_distance" {
  description = "GCP compact placement: maximum distance between nodes, 1-3 (1 is not allowed for A3 Ultra and A4)."
  type        = number
  default     = null
}

variable "capacity_type" {
  description = "on-demand, spot, reservation, capacity-block (AWS) or flex-start (GCP); on-demand when null."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_type == null ? true : contains(["on-demand", "spot", "reservation", "capacity-block", "flex-start"], var.capacity_type)
    error_message = "The capacity_type must be on-demand, spot, reservation, capacity-block or flex-start."
  }
}

variable "reservation_id" {
  description = "Reservation to launch into, for capacity_type reservation and capacity-block."
  type        = string
  default     = null
}

variable "ssh_public_key" {
  description = "SSH public key for the nodes' default user."
  type        = string
  default     = null
}

variable "user_data" {
  description = "Cloud-init or script passed to every node unchanged."
  type        = string
  default     = null
  sensitive   = true
}

variable "image" {
  description = "Node image (AMI, image URN, image self link or image OCID); the cloud's GPU image when null."
  type        = string
  default     = null
}

variable "repair" {
  description = "What an apply does with an unhealthy node: replace (remade under its own name), reboot, or report (plan only)."
  type        = string
  default     = "replace"
}

variable "max_repairs" {
  description = "At most this many unhealthy nodes repaired per apply: a count (\"1\") or a share (\"20%\")."
  type        = string
  default     = "20%"
}

variable "update_batch_size" {
  description = "Nodes remade at a time when the image, user data or SSH key changes: a count (\"2\") or a share (\"25%\")."
  type        = string
  default     = "25%"
}

variable "wait_for_selfcheck" {
  description = "Wait for each batch of a rolling update to publish a passing boot-time self-check before the next."
  type        = bool
  default     = false
}

variable "node_identity" {
  description = "The identity the nodes publish their self-check verdict with: an AWS instance profile, a Google service account's email, an OCI dynamic group's OCID (not used on Azure). Needed with wait_for_selfcheck on AWS, Google Cloud and OCI."
  type        = string
  default     = null
}

variable "capacity_policy" {
  description = "When the cloud gives fewer nodes than planned: all-or-nothing (release what came, the default for training), at-least (keep at least min_nodes) or keep-partial. Null: the workload's default."
  type        = string
  default     = null
}

variable "min_nodes" {
  description = "With capacity_policy = \"at-least\": the fewest nodes worth keeping."
  type        = number
  default     = null
}

variable "slurm_version" {
  description = "Put the nodes in a Slurm cluster (a controller, a login node and one partition of the nodes, hpc_slurm_cluster) written for this Slurm version, which the images run: 21.08 for the clouds' stock Ubuntu 22.04 GPU images. Null: no Slurm."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags (GCP: labels) on every cloud resource, after the provider's default_tags."
  type        = map(string)
  default     = {}
}

resource "hpc_gpu_fabric" "this" {
  name           = var.name
  cloud          = var.cloud
  region         = var.region
  zone           = var.zone
  gpu            = var.instance_type == null ? var.gpu : null
  instance_type  = var.instance_type
  vpc_id         = var.vpc_id
  subnet_id      = var.subnet_id
  placement      = var.placement
  max_distance   = var.max_distance
  resource_group = var.resource_group
  compartment_id = var.compartment_id
  slurm          = var.slurm_version != null ? true : null
  tags           = var.tags
}

# The node type's NVLink domain, from the provider's catalog (no cloud call).
# Read from the inputs, not the fabric, so that it is known at plan time.
data "hpc_gpu_catalog" "node" {
  cloud         = var.cloud
  gpu           = var.instance_type == null ? var.gpu : null
  instance_type = var.instance_type
}

locals {
  nodes_per_domain = max(1, [for t in data.hpc_gpu_catalog.node.instance_types : t.nvlink_domain_nodes]...)
  node_count       = var.nvlink_domains != null ? var.nvlink_domains * local.nodes_per_domain : var.node_count
}

resource "hpc_gpu_cluster" "this" {
  name            = var.name
  fabric          = hpc_gpu_fabric.this
  node_count      = local.node_count
  workload        = var.workload
  capacity_type   = var.capacity_type
  reservation_id  = var.reservation_id
  image           = var.image
  user_data       = var.user_data
  ssh_public_key  = var.ssh_public_key
  node_identity   = var.node_identity
  repair          = var.repair
  max_repairs     = var.max_repairs
  capacity_policy = var.capacity_policy
  min_nodes       = var.min_nodes
  slurm           = var.slurm_version != null ? hpc_gpu_fabric.this.slurm_join : null
  tags            = var.tags

  update_strategy {
    batch_size         = var.update_batch_size
    wait_for_selfcheck = var.wait_for_selfcheck
  }
}

# Slurm over the nodes: the nodes join it by themselves (hpc_gpu_cluster.slurm above), and the Slurm
# cluster refers to them, so there is no cycle.
resource "hpc_slurm_cluster" "this" {
  count = var.slurm_version != null ? 1 : 0

  name           = "${var.name}-slurm"
  fabric         = hpc_gpu_fabric.this
  slurm_version  = var.slurm_version
  ssh_public_key = var.ssh_public_key
  tags           = var.tags

  partition {
    name    = var.name
    cluster = hpc_gpu_cluster.this
    default = true
  }
}

resource "hpc_parallel_filesystem" "this" {
  count = var.create_filesystem ? 1 : 0

  name               = var.name
  fabric             = hpc_gpu_fabric.this
  cluster            = hpc_gpu_cluster.this # lets the provider check throughput against the GPUs it feeds
  capacity_gib       = var.storage_capacity_gib
  throughput_per_tib = var.storage_throughput_per_tib
  data_repository    = var.data_repository
  maintenance_window = var.maintenance_window
  tags               = var.tags
}

locals {
  gpus_per_node = floor(hpc_gpu_cluster.this.gpus_total / local.node_count)

  # Expansion kinds that place nodes close together, per cloud.
  placement_kinds = [
    "aws_placement_group",
    "azurerm_proximity_placement_group",
    "google_compute_resource_policy",
    "oci_core_compute_cluster",
    "oci_core_cluster_network",
  ]
  expansions = {
    fabric     = hpc_gpu_fabric.this.expansion
    cluster    = hpc_gpu_cluster.this.expansion
    filesystem = flatten(hpc_parallel_filesystem.this[*].expansion)
  }
}

output "fabric_id" {
  description = "Id of the fabric."
  value       = hpc_gpu_fabric.this.id
}

output "cluster_id" {
  description = "Id of the cluster."
  value       = hpc_gpu_cluster.this.id
}

output "filesystem_id" {
  description = "Id of the filesystem; null without one."
  value       = one(hpc_parallel_filesystem.this[*].id)
}

output "instance_type" {
  description = "Node type of the cluster."
  value       = hpc_gpu_cluster.this.instance_type
}

output "gpus_total" {
  description = "GPUs in the cluster."
  value       = hpc_gpu_cluster.this.gpus_total
}

output "node_names" {
  description = "Node names, in node index order."
  value       = hpc_gpu_cluster.this.node_names
}

output "node_ids" {
  description = "Cloud ids of the nodes, in node index order."
  value       = hpc_gpu_cluster.this.nodes[*].id
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = hpc_gpu_cluster.this.nodes[*].private_ip
}

output "nodes" {
  description = "The nodes (name, id, private_ip), in node index order."
  value       = hpc_gpu_cluster.this.nodes
}

output "hostfile" {
  description = "MPI hostfile: one line per node with its private IP and GPU slots."
  value       = "${join("\n", formatlist("%s slots=%d", hpc_gpu_cluster.this.nodes[*].private_ip, local.gpus_per_node))}\n"
}

output "mount_command" {
  description = "Command that mounts the Lustre filesystem on a node; null without a filesystem."
  value       = one(hpc_parallel_filesystem.this[*].mount_command)
}

output "unhealthy_nodes" {
  description = "Nodes the last refresh found unhealthy, with the reason (the plan shows the ones the next apply repairs)."
  value       = hpc_gpu_cluster.this.unhealthy_nodes
}

output "scheduled_maintenance" {
  description = "Maintenance the cloud has scheduled on a node, with its window: not repaired; drain the node before it."
  value       = hpc_gpu_cluster.this.scheduled_maintenance
}

output "node_revisions" {
  description = "The node configuration revision each node runs (after an interrupted rolling update, which nodes are updated)."
  value       = hpc_gpu_cluster.this.node_revisions
}

output "nccl_environment" {
  description = "NCCL and libfabric environment for jobs on these nodes."
  value       = hpc_gpu_cluster.this.node_environment
}

output "estimated_hourly_cost_usd" {
  description = "Estimated USD per hour of the cluster plus the filesystem (list or provider prices); null when either is not estimated (see cost_basis)."
  value = (
    hpc_gpu_cluster.this.estimated_hourly_cost_usd == null ? null :
    length(hpc_parallel_filesystem.this) == 0 ? hpc_gpu_cluster.this.estimated_hourly_cost_usd :
    hpc_parallel_filesystem.this[0].estimated_hourly_cost_usd == null ? null :
    hpc_gpu_cluster.this.estimated_hourly_cost_usd + hpc_parallel_filesystem.this[0].estimated_hourly_cost_usd
  )
}

output "cost_basis" {
  description = "How the cluster's and the filesystem's estimates were made, or why not."
  value       = compact([hpc_gpu_cluster.this.cost_basis, one(hpc_parallel_filesystem.this[*].cost_basis)])
}

output "nccl_test_slurm" {
  description = "Slurm batch script running the nccl-tests all-reduce on these nodes; check its log with data.hpc_nccl_check before a long run."
  value       = hpc_gpu_cluster.this.nccl_test_slurm
}

output "nccl_test_kubernetes" {
  description = "The same all-reduce as a Kubernetes indexed Job manifest."
  value       = hpc_gpu_cluster.this.nccl_test_kubernetes
}

output "expected_busbw_gbs" {
  description = "Published all-reduce bus bandwidth (GB/s) to expect from nccl-tests on this node type, where one exists."
  value       = hpc_gpu_cluster.this.expected_busbw_gbs
}

output "placement_groups" {
  description = "Names of the placement pieces the nodes share (placement group, proximity placement group, compact placement policy, compute cluster or cluster network)."
  value       = [for p in concat(local.expansions.fabric, local.expansions.cluster) : p.name if contains(local.placement_kinds, p.kind)]
}

output "expansion_summary" {
  description = "The cloud resources each part expands into, as kind.name with a count where above one."
  value = {
    for part, pieces in local.expansions :
    part => [for p in pieces : p.count > 1 ? "${p.kind}.${p.name} x${p.count}" : "${p.kind}.${p.name}"]
  }
}

output "nvlink_domains" {
  description = "Rack-scale node types: the NVLink domains (name, nodes, gpus); empty otherwise."
  value       = hpc_gpu_cluster.this.nvlink_domains
}

output "slurm_topology_conf" {
  description = "Rack-scale node types: Slurm topology.conf for topology/block, one block per NVLink domain; null otherwise."
  value       = hpc_gpu_cluster.this.slurm_topology_conf
}

output "slurm_conf" {
  description = "Rack-scale node types: the slurm.conf lines the block topology needs; null otherwise."
  value       = hpc_gpu_cluster.this.slurm_conf
}

output "kubernetes_node_labels" {
  description = "Labels per node for Kubernetes: the cluster, and on rack-scale node types the node's NVLink domain."
  value       = hpc_gpu_cluster.this.kubernetes_node_labels
}

output "slurm_login_command" {
  description = "How to log in to the Slurm cluster's login node (null without slurm_version)."
  value       = one(hpc_slurm_cluster.this[*].login_command)
}

output "slurm_cluster_conf" {
  description = "The Slurm cluster's slurm.conf, as its controller runs it (null without slurm_version)."
  value       = one(hpc_slurm_cluster.this[*].slurm_conf)
}

output "nccl_test_sbatch" {
  description = "An sbatch-ready NCCL all-reduce over every node of the partition (null without slurm_version)."
  value       = one(hpc_slurm_cluster.this[*].nccl_tests[var.name])
}
