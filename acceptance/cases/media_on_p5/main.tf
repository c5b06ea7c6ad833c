# Video transcoding on H100 nodes, which have no hardware video encoder: refused at plan time.
terraform {
  required_providers {
    hpc = { source = "hpc-platform/hpc" }
  }
}

resource "hpc_gpu_fabric" "f" {
  name   = "media"
  cloud  = "aws"
  region = "us-east-1"
  zone   = "us-east-1a"
  gpu    = "H100"
}

resource "hpc_gpu_cluster" "transcode" {
  name       = "transcode"
  fabric     = hpc_gpu_fabric.f
  node_count = 2
  workload   = "media"
}
