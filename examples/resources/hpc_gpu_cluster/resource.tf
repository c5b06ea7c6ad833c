resource "hpc_gpu_fabric" "train" {
  name           = "train"
  cloud          = "oci"
  region         = "us-ashburn-1"
  zone           = "Uocm:US-ASHBURN-AD-1"
  gpu            = "H100"
  compartment_id = "ocid1.compartment.oc1..exampleuniqueid"
}

# 16 BM.GPU.H100.8 nodes in the fabric's compute cluster, with the RDMA agent plugins enabled.
resource "hpc_gpu_cluster" "train" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = 16
  workload   = "pretraining"
  image      = "ocid1.image.oc1.iad.exampleuniqueid"

  timeouts {
    create = "2h" # capacity for large bare-metal GPU clusters can take a while
  }
}

output "nccl_env" {
  value = hpc_gpu_cluster.train.node_environment
}
