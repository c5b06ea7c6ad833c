# What each cloud offers for one GPU model, straight from the provider's catalog: no credentials and no
# cloud calls, so `tofu plan` works anywhere (try `-var gpu=H200`).

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {}
locals {
  clouds = ["aws", "azure", "gcp", "oci"]
}

data "hpc_gpu_catalog" "by_cloud" {
  for_each = toset(local.clouds)
  cloud    = each.key
  gpu      = var.gpu
}
