provider "hpc" {
  gcp {
    project = "ml-platform-prod"
  }
}

resource "hpc_gpu_fabric" "train" {
  name   = "train"
  cloud  = "gcp"
  region = "us-central1"
  zone   = "us-central1-a"
  gpu    = "H100"
}

resource "hpc_gpu_cluster" "train" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = 8
}

# 72,000 GiB of Google Cloud Managed Lustre at 500 MB/s per TiB (about 35 GB/s), checked against the
# 64 GPUs it feeds.
resource "hpc_parallel_filesystem" "scratch" {
  name               = "scratch"
  fabric             = hpc_gpu_fabric.train
  cluster            = hpc_gpu_cluster.train
  capacity_gib       = 72000
  throughput_per_tib = 500
  data_repository    = "gs://ml-datasets/tokenized"
}
