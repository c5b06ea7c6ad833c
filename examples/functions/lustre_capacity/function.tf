# Size a filesystem from the dataset instead of looking up each service's steps by hand.
variable "dataset_gib" {
  description = "Size of the dataset, GiB."
  type        = number
  default     = 30000
}

locals {
  # Google Cloud Managed Lustre at 500 MB/s/TiB takes steps of 18000 GiB: 30000 becomes 36000.
  scratch_gib = provider::hpc::lustre_capacity("gcp", 500, var.dataset_gib)
  # FSx for Lustre PERSISTENT_2 takes 1200, 2400 or a multiple of 2400 GiB: 30000 becomes 31200.
  fsx_gib = provider::hpc::lustre_capacity("aws", 250, var.dataset_gib)
}

output "scratch_gib" {
  description = "Managed Lustre capacity for the dataset, GiB."
  value       = local.scratch_gib # 36000
}

output "fsx_gib" {
  description = "FSx for Lustre capacity for the dataset, GiB."
  value       = local.fsx_gib # 31200
}
