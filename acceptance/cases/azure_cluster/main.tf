# A 4-node Standard_ND96isr_H100_v5 cluster's fabric on the Azure emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }

provider "hpc" {
  default_tags = { project = "acceptance" }
  azure {
    subscription_id = "00000000-0000-0000-0000-000000000001"
    endpoint        = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "accfab"
  cloud         = "azure"
  region        = "eastus"
  instance_type = "Standard_ND96isr_H100_v5"
  tags          = { team = "ml" }
}

output "ids" {
  value = {
    fabric = hpc_gpu_fabric.f.id
    vnet   = hpc_gpu_fabric.f.vpc_id
  }
}
