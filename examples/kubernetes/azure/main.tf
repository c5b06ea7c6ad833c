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
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "azure_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

variable "aks_cluster_id" {
  description = "Resource id of the existing AKS cluster (azurerm_kubernetes_cluster.<x>.id in the team's configuration)."
  type        = string
  default     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/providers/Microsoft.ContainerService/managedClusters/ml-prod"
}

variable "vnet_id" {
  description = "The virtual network the cluster's pools run in (Azure CNI)."
  type        = string
  default     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/providers/Microsoft.Network/virtualNetworks/ml-vnet"
}

variable "subnet_id" {
  description = "A subnet of that network for the GPU nodes."
  type        = string
  default     = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/providers/Microsoft.Network/virtualNetworks/ml-vnet/subnets/gpu"
}

variable "kubernetes_version" {
  description = "The kubelet's minor version: the cluster's, or up to three minor versions older."
  type        = string
  default     = "1.33"
}

variable "node_count" {
  description = "GPU nodes in the pool (at most 100: one InfiniBand scale set)."
  type        = number
  default     = 4
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

output "device_plugin" {
  description = "The NVIDIA Network Operator's NicClusterPolicy with the RDMA shared device plugin."
  value       = module.gpu.device_plugin
}

output "device_resources" {
  value = module.gpu.device_resources
}

output "node_labels" {
  value = module.gpu.node_labels
}

output "kueue_topology" {
  value = module.gpu.kueue_topology
}

output "nccl_test_kubernetes" {
  value = module.gpu.nccl_test_kubernetes
}
