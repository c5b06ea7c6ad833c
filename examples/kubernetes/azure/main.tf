# A GPU node pool on an AKS cluster another team made, with the official azurerm provider and in another
# state. This configuration only reads that cluster (its id, and the virtual network and subnet its pools
# run in, come in as variables) and, through modules/kubernetes-gpu-pool, makes two things: a fabric in the
# cluster's network (its security group and proximity placement group, in a resource group of its own) and
# the node pool (one AKS agent pool of ND H100 v5 VMs in the proximity placement group: one scale set, one
# InfiniBand fabric), tainted for GPU work.
#
# After apply, install what the outputs say in the cluster: the NVIDIA Network Operator with the
# NicClusterPolicy (device_plugin), and Kueue's Topology (kueue_topology); then run nccl_test_kubernetes.

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

# The fabric and the pool, through the module any cloud's pool can use.
module "gpu" {
  source = "../../../modules/kubernetes-gpu-pool"

  name               = "gpu"
  cloud              = "azure"
  region             = "eastus"
  instance_type      = "Standard_ND96isr_H100_v5"
  kubernetes_cluster = var.aks_cluster_id
  kubernetes_version = var.kubernetes_version
  vpc_id             = var.vnet_id
  subnet_id          = var.subnet_id
  node_count         = var.node_count

  labels = {
    "example.com/team" = "llm"
  }
}
