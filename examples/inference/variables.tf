variable "replicas" {
  description = "Number of inference nodes (one L4 GPU each)."
  type        = number
  default     = 3
}
