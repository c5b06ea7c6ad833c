variable "oci_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

variable "nodes" {
  description = "GPU nodes: a change re-renders the Slurm configuration, which the controller takes in place"
  type        = number
  default     = 2
}

variable "slurm_version" {
  description = "The Slurm version the hosts' image runs (or installs), which the configuration is written for; default the Slurm the image runs (or installs)"
  type        = string
  default     = "22.05"
}
