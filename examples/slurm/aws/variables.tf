variable "train_nodes" {
  description = "Nodes of the training cluster: a change re-renders the Slurm configuration, which the controller takes in place"
  type        = number
  default     = 8
}

variable "slurm_version" {
  description = "The Slurm version the hosts' image runs (or installs), which the configuration is written for; default what the stock Ubuntu 22.04 GPU images install"
  type        = string
  default     = "21.08"
}
