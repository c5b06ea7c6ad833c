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
  description = "NCCL and libfabric environment for jobs on the nodes."
  value       = hpc_gpu_cluster.train.node_environment
}

# Inference needs no RDMA fabric: without `fabric` the cluster says where it runs and joins an existing
# subnet (or, without vpc_id and subnet_id, makes a small network of its own). No placement group, no RDMA
# pieces; the NCCL environment is socket-only.
resource "hpc_gpu_cluster" "serve" {
  name       = "serve"
  cloud      = "aws"
  region     = "us-east-1"
  zone       = "us-east-1a"
  gpu        = "L4"
  vpc_id     = "vpc-0123456789abcdef0"
  subnet_id  = "subnet-0123456789abcdef0"
  node_count = 4
  workload   = "inference"
}
