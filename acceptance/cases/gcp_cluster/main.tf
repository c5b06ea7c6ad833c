# A 4-node a3-megagpu-8g cluster with its fabric (8 GPU VPCs, compact placement) on the Google Cloud emulator.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

variable "endpoint" { type = string }
variable "instance_type" {
  type    = string
  default = "a3-megagpu-8g"
}

provider "hpc" {
  default_tags = { project = "acceptance" }
  gcp {
    project  = "ml-prod"
    endpoint = var.endpoint
  }
}

resource "hpc_gpu_fabric" "f" {
  name          = "accfab"
  cloud         = "gcp"
  region        = "us-central1"
  zone          = "us-central1-a"
  instance_type = var.instance_type
}

output "ids" {
  value = {
    fabric = hpc_gpu_fabric.f.id
    vpc    = hpc_gpu_fabric.f.vpc_id
  }
}
