# What each cloud offers for one GPU model, straight from the provider's catalog: no credentials and no
# cloud calls, so `tofu plan` works anywhere (try `-var gpu=H200`).

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

provider "hpc" {}

variable "gpu" {
  description = "GPU model to look up in every cloud."
  type        = string
  default     = "H100"
}

locals {
  clouds = ["aws", "azure", "gcp", "oci"]
}

data "hpc_gpu_catalog" "by_cloud" {
  for_each = toset(local.clouds)
  cloud    = each.key
  gpu      = var.gpu
}

output "instance_types" {
  description = "Per cloud: instance type -> GPUs x memory, fabric, RDMA interfaces, bandwidth."
  value = {
    for cloud, catalog in data.hpc_gpu_catalog.by_cloud : cloud => {
      for it in catalog.instance_types : it.name => format(
        "%dx %s %s GB, %s x%s, %s Gbps",
        it.gpu_count, it.gpu_model, coalesce(it.gpu_memory_gb, "?"), it.rdma_fabric,
        coalesce(it.rdma_interfaces, "?"), coalesce(it.network_bandwidth_gbps, "?")
      )
    }
  }
}
