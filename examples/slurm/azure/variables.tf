variable "azure_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

variable "ssh_public_key" {
  description = "SSH public key for the Slurm cluster's users (e.g. file(\"~/.ssh/id_ed25519.pub\"))."
  type        = string
  default     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHpc example" # e.g. file("~/.ssh/id_ed25519.pub")
}

variable "nodes" {
  description = "GPU nodes: a change re-renders the Slurm configuration, which the controller takes in place"
  type        = number
  default     = 2
}

variable "slurm_version" {
  description = "The Slurm version the hosts' image runs (or installs), which the configuration is written for; default what the stock Ubuntu 22.04 GPU images install"
  type        = string
  default     = "21.08"
}
