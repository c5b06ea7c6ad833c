terraform {
  # The oldest CLI the provider supports (Terraform 1.0; OpenTofu from 1.6).
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
      # Any 0.x release from the first: the module uses nothing newer. A module states the range it works
      # with; the root configuration pins the exact version (the examples do).
      version = ">= 0.1.0, < 1.0.0"
    }
  }
}
