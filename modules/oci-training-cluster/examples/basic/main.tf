# Four BM.GPU.H100.8 nodes in a cluster network, with File Storage with Lustre linked to an Object Storage
# bucket. Credentials come from ~/.oci/config (or the file OCI_CONFIG_FILE names).

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
  oci {
    region   = "us-ashburn-1"
    endpoint = var.oci_endpoint
  }
}

module "cluster" {
  source = "../.."

  name                = "train"
  region              = "us-ashburn-1"
  availability_domain = "Uocm:US-ASHBURN-AD-1"
  compartment_id      = "ocid1.compartment.oc1..exampleuniqueid"
  placement           = "cluster-network"
  node_count          = 4

  storage_capacity_gb        = 31200
  storage_throughput_per_tib = 250
  object_storage_path        = "oci://datasets@mytenancy/tokenized"
}
