terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

data "hpc_gpu_catalog" "bad_gpu" {
  cloud = "aws"
  gpu   = "H900"
}

data "hpc_gpu_catalog" "bad_cloud" {
  cloud = "ibm"
}

data "hpc_gpu_catalog" "bad_shape" {
  cloud         = "azure"
  instance_type = "Standard_ND96asr_v4"
}
