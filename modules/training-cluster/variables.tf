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
  description = "Wait for each batch of a rolling update to publish a passing boot-time self-check before the next. The nodes must run the self-check: set user_data to a data \"hpc_gpu_selfcheck\" combined_user_data."
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
