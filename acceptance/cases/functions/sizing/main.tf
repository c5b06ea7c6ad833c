# A module that takes only capacities the cloud's managed Lustre accepts at 500 MB/s/TiB.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "cloud" { type = string }

variable "capacity_gib" {
  type = number

  validation {
    condition     = var.capacity_gib == provider::hpc::lustre_capacity(var.cloud, 500, var.capacity_gib)
    error_message = "capacity_gib is not a size this cloud's managed Lustre takes at 500 MB/s/TiB: use provider::hpc::lustre_capacity."
  }
}

output "capacity_gib" { value = var.capacity_gib }
