# Which AWS instance types carry H100 GPUs, and what fabric they have.
data "hpc_gpu_catalog" "h100" {
  cloud = "aws"
  gpu   = "H100"
}

output "h100_instance_type" {
  description = "The best-connected H100 instance type."
  value       = data.hpc_gpu_catalog.h100.instance_types[0].name # "p5.48xlarge"
}

output "h100_efa_interfaces" {
  description = "Its EFA interfaces."
  value       = data.hpc_gpu_catalog.h100.instance_types[0].rdma_interfaces # 32
}
