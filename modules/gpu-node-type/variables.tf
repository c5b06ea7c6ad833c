variable "cloud" {
  description = "Cloud to pick from: aws, azure, gcp or oci."
  type        = string
}

variable "gpu" {
  description = "GPU model, e.g. H100."
  type        = string
}

variable "require_rdma" {
  description = "Only accept instance types with an RDMA fabric (EFA, InfiniBand or RoCE), as multi-node training needs."
  type        = bool
  default     = true
}
