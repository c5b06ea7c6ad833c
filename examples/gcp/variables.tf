variable "gcp_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}
