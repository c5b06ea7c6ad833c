import {
  to = hpc_gpu_cluster.serve
  identity = {
    cloud    = "aws"
    location = "us-east-1" # AWS and OCI: the region; Google Cloud: the zone; Azure: the resource group
    name     = "serve"
  }
}
