# A GPU node pool for a Kubernetes cluster made elsewhere, on any cloud whose pools the provider makes (EKS,
# GKE, AKS, OKE): a fabric in the cluster's network (the cloud's RDMA security group and placement) and the pool on it.
# The cluster is only read. The outputs are the in-cluster half: the RDMA device plugin or operator, Kueue's
# Topology and an NCCL test Job, and the labels the nodes carry.

resource "hpc_gpu_fabric" "this" {
  name           = var.name
  cloud          = var.cloud
  region         = var.region
  zone           = var.zone
  gpu            = var.instance_type == null ? var.gpu : null
  instance_type  = var.instance_type
  vpc_id         = var.vpc_id
  subnet_id      = var.subnet_id
  compartment_id = var.compartment_id
}

resource "hpc_gpu_node_pool" "this" {
  name               = var.name
  fabric             = hpc_gpu_fabric.this
  kubernetes_cluster = var.kubernetes_cluster
  kubernetes_version = var.kubernetes_version
  node_count         = var.node_count
  image              = var.image
  node_role          = var.node_role
  labels             = length(var.labels) == 0 ? null : var.labels

  dynamic "taint" {
    for_each = var.gpu_taint ? [1] : []
    content {
      key    = "nvidia.com/gpu"
      value  = "present"
      effect = "NoSchedule"
    }
  }
}
