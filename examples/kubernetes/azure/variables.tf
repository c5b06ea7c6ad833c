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
