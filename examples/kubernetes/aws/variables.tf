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
