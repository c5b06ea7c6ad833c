variable "fabric_id" {
  description = "Import id of the existing fabric: aws/<region>/<name>."
  type        = string
  default     = "aws/us-east-1/legacy"
}

variable "cluster_id" {
  description = "Import id of the existing cluster: aws/<region>/<name>."
  type        = string
  default     = "aws/us-east-1/legacy"
}
