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
