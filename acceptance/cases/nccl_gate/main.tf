terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

# Directory of the nccl-tests samples (tests/fixtures/nccl) and the one to gate on; the test sets both.
variable "samples" {
  type = string
}

variable "sample" {
  type = string
}

# The fabric check before a long run: a postcondition stops the apply unless the fabric is healthy.
data "hpc_nccl_check" "fabric" {
  expected_busbw_gbs = 365 # BM.GPU.H100.8, multi-node
  nccl_tests_output  = file("${var.samples}/${var.sample}")
  cloud              = "oci"

  lifecycle {
    postcondition {
      condition     = self.healthy
      error_message = self.message
    }
  }
}

# Stands in for the training job's infrastructure: created only once the fabric passed.
resource "terraform_data" "training_job" {
  input = {
    busbw_gbs = data.hpc_nccl_check.fabric.busbw_gbs
    verdict   = data.hpc_nccl_check.fabric.verdict
  }
}

output "verdict" {
  value = data.hpc_nccl_check.fabric.verdict
}
