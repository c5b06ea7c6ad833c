variable "gpu" {
  description = "GPU model to look up in every cloud."
  type        = string
  default     = "H100"
}
