import {
  to = hpc_gpu_fabric.train
  identity = {
    cloud    = "aws"
    location = "us-east-1" # AWS and OCI: the region; Google Cloud: the zone; Azure: the resource group
    name     = "train"
  }
}
