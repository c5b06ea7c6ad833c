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
