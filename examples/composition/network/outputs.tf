output "vpc_id" {
  description = "Id of the existing VPC the training clusters join."
  value       = var.vpc_id
}

output "subnet_id" {
  description = "Id of the existing private subnet the training clusters join."
  value       = var.subnet_id
}

output "region" {
  description = "Region of the VPC."
  value       = var.region
}

output "zone" {
  description = "Availability zone of the subnet."
  value       = var.zone
}
