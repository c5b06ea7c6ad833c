# The EKS cluster is another team's (made with the aws provider, in another state); the fabric joins its VPC.
resource "hpc_gpu_fabric" "train" {
  name      = "train"
  cloud     = "aws"
  region    = "us-east-1"
  zone      = "us-east-1a"
  gpu       = "H100"
  vpc_id    = "vpc-0123456789abcdef0"    # the EKS cluster's VPC
  subnet_id = "subnet-0123456789abcdef0" # a private subnet of it in us-east-1a
}

# An EKS node group of 4 p5.48xlarge over a launch template with one EFA interface per network card (32)
# in the fabric's cluster placement group, labelled and tainted for GPU work.
resource "hpc_gpu_node_pool" "gpu" {
  name               = "gpu"
  fabric             = hpc_gpu_fabric.train
  kubernetes_cluster = "ml-prod"
  kubernetes_version = "1.33"
  node_count         = 4
  node_role          = "arn:aws:iam::123456789012:role/eks-gpu-nodes"

  labels = {
    "example.com/team" = "llm"
  }

  taint {
    key    = "nvidia.com/gpu"
    value  = "present"
    effect = "NoSchedule"
  }
}

# The in-cluster half: install the EFA device plugin with these Helm values, and Kueue's Topology.
output "efa_device_plugin_values" {
  description = "Helm values for the EFA device plugin."
  value       = hpc_gpu_node_pool.gpu.device_plugin
}

output "kueue_topology" {
  description = "Kueue's Topology object over the pool's nodes."
  value       = hpc_gpu_node_pool.gpu.kueue_topology
}
