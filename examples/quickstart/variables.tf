variable "gpu" {
  description = "GPU model of the nodes; the provider picks the best-connected instance type for it."
  type        = string
  default     = "H100"
}
