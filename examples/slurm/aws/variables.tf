variable "train_nodes" {
  description = "Nodes of the training cluster: a change re-renders the Slurm configuration, which the controller takes in place"
  type        = number
  default     = 8
}
