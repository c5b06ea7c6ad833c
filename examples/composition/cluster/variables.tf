variable "network_state_path" {
  description = "State file of the network configuration (apply ../network first)."
  type        = string
  default     = "../network/terraform.tfstate"
}
