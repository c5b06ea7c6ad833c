output "aws_node_type" {
  description = "Node type the module picks for H100 on AWS."
  value       = module.aws.instance_type
}

output "gcp_node_type" {
  description = "Node type the module picks for H100 on Google Cloud, with or without an RDMA fabric."
  value       = module.gcp_any_fabric.instance_type
}
