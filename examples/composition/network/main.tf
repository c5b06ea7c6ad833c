# Stands for the network team's configuration. The VPC and subnet were made outside Terraform; this
# configuration only publishes their ids, with where they are, so that other configurations can read them
# from its state (local here, the default backend) instead of copying ids around.

variable "vpc_id" {
  description = "Id of the existing VPC the training clusters join."
  type        = string
  default     = "vpc-0123456789abcdef0"
}

variable "subnet_id" {
  description = "Id of the existing private subnet, in zone, the training clusters join."
  type        = string
  default     = "subnet-0123456789abcdef0"
}

variable "region" {
  description = "Region of the VPC."
  type        = string
  default     = "us-east-1"
}

variable "zone" {
  description = "Availability zone of the subnet."
  type        = string
  default     = "us-east-1a"
}

output "vpc_id" {
  value = var.vpc_id
}

output "subnet_id" {
  value = var.subnet_id
}

output "region" {
  value = var.region
}

output "zone" {
  value = var.zone
}
