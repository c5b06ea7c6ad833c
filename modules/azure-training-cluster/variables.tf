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
