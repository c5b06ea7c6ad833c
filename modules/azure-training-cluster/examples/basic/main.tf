# Four Standard_ND96isr_H100_v5 VMs with Azure Managed Lustre serviced on Saturday nights, in a resource
# group the fabric creates (train-rg).

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000000"
    endpoint        = var.azure_endpoint
  }
}

module "cluster" {
  source = "../.."

  name       = "train"
  location   = "eastus"
  node_count = 4
  # resource_group = "ml-training" # to build in an existing resource group instead

  storage_capacity_gib       = 16384 # AMLFS-Durable-Premium-125 grows in 16 TiB steps
  storage_throughput_per_tib = 125
  maintenance_window         = "Saturday 23:00"
  ssh_public_key             = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc example" # e.g. file("~/.ssh/id_ed25519.pub")
}
