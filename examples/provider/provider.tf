terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

# Only the blocks of the clouds you use are needed. Leave `endpoint` out to talk to the real cloud;
# credentials default to each cloud's usual chain (environment, profile, CLI login, instance identity).
provider "hpc" {
  default_tags = {
    team        = "ml-platform"
    cost-center = "research"
  }

  aws {
    region = "us-east-1"
  }

  gcp {
    project = "ml-platform-prod"
    region  = "us-central1"
    zone    = "us-central1-a"
  }

  azure {
    subscription_id = "00000000-0000-0000-0000-000000000000"
    use_cli         = true
  }

  oci {
    config_file_profile = "DEFAULT"
    region              = "us-ashburn-1"
  }
}
