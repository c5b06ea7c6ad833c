# A GPU node pool on an EKS cluster another team made, with the official aws provider and in another
# state. This configuration only reads that cluster (its name, and the VPC and subnet it runs in, come in
# as variables, or from that team's state through terraform_remote_state) and makes two things: a fabric
# in the cluster's network (the EFA security group and the cluster placement group) and the node pool
# (an EKS node group over a launch template with one EFA interface per network card).
#
# After apply, install what the outputs say in the cluster: the EFA device plugin (device_plugin), and
# Kueue's Topology (kueue_topology) for topology-aware scheduling; then run nccl_test_kubernetes.

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
  aws {
    region = "us-east-1"
  }
}

resource "hpc_gpu_fabric" "train" {
  name      = "train"
  cloud     = "aws"
  region    = "us-east-1"
  zone      = var.zone
  gpu       = "H100"
  vpc_id    = var.vpc_id
  subnet_id = var.subnet_id
}

resource "hpc_gpu_node_pool" "gpu" {
  name               = "gpu"
  fabric             = hpc_gpu_fabric.train
  kubernetes_cluster = var.eks_cluster
  kubernetes_version = var.kubernetes_version
  node_count         = var.node_count
  node_role          = var.node_role
  user_data          = var.user_data

  labels = {
    "example.com/team" = "llm"
  }

  taint {
    key    = "nvidia.com/gpu"
    value  = "present"
    effect = "NoSchedule"
  }
}
