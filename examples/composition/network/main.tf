# Stands for the network team's configuration. The VPC and subnet were made outside Terraform; this
# configuration only publishes their ids, with where they are, so that other configurations can read them
# from its state (local here, the default backend) instead of copying ids around.

terraform {
  required_version = ">= 1.0"
}
