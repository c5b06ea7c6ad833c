output "instance_type" {
  description = "Node type the provider picked for the GPU."
  value       = hpc_gpu_cluster.serve.instance_type
}

# Targets for a load balancer's target group (instance ids) and the network it lives in.
output "target_ids" {
  description = "Instance ids of the nodes, for a load balancer's target group."
  value       = [for n in hpc_gpu_cluster.serve.nodes : n.id]
}

output "network" {
  description = "The network the nodes joined (VPC and subnet), for a load balancer beside them."
  value       = hpc_gpu_cluster.serve.network
}

output "node_private_ips" {
  description = "Private IP addresses of the nodes, in node index order."
  value       = [for n in hpc_gpu_cluster.serve.nodes : n.private_ip]
}
