# A GB200 NVL72 training cluster of two NVLink domains (2 racks x 18 VMs x 4 GPUs = 144 GPUs) on Azure,
# through the cloud-agnostic module. gpu = "GB200" picks each cloud's rack-scale node type and its domain
# layout: on AWS p6e-gb200.36xlarge UltraServers from a Capacity Block (capacity_type = "capacity-block",
# reservation_id = "cb-..."), on Google Cloud a4x-highgpu-4g from a reservation with one gpuTopology 1x72
# policy per domain, on OCI BM.GPU.GB200.4 with a GPU memory cluster per domain. The outputs feed Slurm's
# block topology and Kubernetes node labels.

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

module "nvl72" {
  source = "../../modules/training-cluster"

  name           = "nvl"
  cloud          = "azure"
  region         = "eastus"
  gpu            = "GB200" # Standard_ND128isr_NDR_GB200_v6, 18 VMs per NVL72 rack
  nvlink_domains = 2       # node_count 36; scale by whole racks
  # Grace CPUs are Arm64: an arm64 image with the NVIDIA driver, IMEX and the InfiniBand drivers.
  image          = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/images/providers/Microsoft.Compute/galleries/hpc/images/ubuntu-hpc-arm64"
  ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc example" # e.g. file("~/.ssh/id_ed25519.pub")

  create_filesystem = false
}
