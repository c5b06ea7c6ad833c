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
