# Eight A3 Ultra (H200) nodes from Flex-start capacity, packed within distance 2, with Managed Lustre
# linked to a Cloud Storage dataset. The project is the provider's.

terraform {
  required_version = ">= 1.0"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
  }
}

provider "hpc" {
  gcp {
    project  = "ml-platform-prod"
    region   = "us-central1"
    zone     = "us-central1-b"
    endpoint = var.gcp_endpoint
  }
}

module "cluster" {
  source = "../.."

  name          = "train"
  zone          = "us-central1-b"
  instance_type = "a3-ultragpu-8g"
  node_count    = 8
  max_distance  = 2
  capacity_type = "flex-start"

  storage_capacity_gib       = 36000
  storage_throughput_per_tib = 500
  gcs_import_path            = "gs://ml-datasets/tokenized"

  labels = { project = "llm" }
}
