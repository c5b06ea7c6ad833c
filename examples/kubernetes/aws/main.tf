# A GPU node pool on an EKS cluster another team made, with the official aws provider and in another
# state. This configuration only reads that cluster (its name, and the VPC and subnet it runs in, come in
# as variables, or from that team's state through terraform_remote_state) and makes two things: a fabric
# in the cluster's network (the EFA security group and the cluster placement group) and the node pool
# (an EKS node group over a launch template with one EFA interface per network card).
#
# After apply, install what the outputs say in the cluster: the EFA device plugin (device_plugin), and
# Kueue's Topology (kueue_topology) for topology-aware scheduling; then run nccl_test_kubernetes.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "eks_cluster" {
  description = "Name of the existing EKS cluster (aws_eks_cluster.<x>.name in the team's configuration)."
  type        = string
  default     = "ml-prod"
}

variable "vpc_id" {
  description = "The EKS cluster's VPC (aws_eks_cluster.<x>.vpc_config[0].vpc_id)."
  type        = string
  default     = "vpc-0123456789abcdef0"
}

variable "subnet_id" {
  description = "A private subnet of that VPC, in zone, for the GPU nodes."
  type        = string
  default     = "subnet-0123456789abcdef0"
}

variable "zone" {
  description = "Availability zone of the subnet."
  type        = string
  default     = "us-east-1a"
}

variable "node_role" {
  description = "ARN of the IAM role the nodes join the cluster with (AmazonEKSWorkerNodePolicy, AmazonEC2ContainerRegistryReadOnly, AmazonEKS_CNI_Policy)."
  type        = string
  default     = "arn:aws:iam::123456789012:role/eks-gpu-nodes"
}

variable "user_data" {
  description = "More first-boot user data for the nodes, run beside EKS's own bootstrap (a change rolls the pool)."
  type        = string
  default     = null
}

variable "kubernetes_version" {
  description = "The kubelet's minor version: the cluster's, or up to three minor versions older."
  type        = string
  default     = "1.33"
}

variable "node_count" {
  description = "GPU nodes in the pool."
  type        = number
  default     = 4
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

output "device_plugin" {
  description = "Helm values for the EFA device plugin."
  value       = hpc_gpu_node_pool.gpu.device_plugin
}

output "device_resources" {
  value = hpc_gpu_node_pool.gpu.device_resources
}

output "node_labels" {
  value = hpc_gpu_node_pool.gpu.node_labels
}

output "kueue_topology" {
  value = hpc_gpu_node_pool.gpu.kueue_topology
}

output "nccl_test_kubernetes" {
  value = hpc_gpu_node_pool.gpu.nccl_test_kubernetes
}
