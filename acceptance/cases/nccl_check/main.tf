terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

# Directory of the nccl-tests samples (tests/fixtures/nccl); the test sets it.
variable "samples" {
  type = string
}

# 16 x BM.GPU.H100.8: the catalog's multi-node all-reduce figure for the shape.
locals {
  expected = 365
}

data "hpc_nccl_check" "healthy" {
  expected_busbw_gbs = local.expected
  nccl_tests_output  = file("${var.samples}/healthy.txt")
  cloud              = "oci"
}

data "hpc_nccl_check" "thirty_under" {
  expected_busbw_gbs = local.expected
  nccl_tests_output  = file("${var.samples}/thirty_under.txt")
  cloud              = "aws"
}

data "hpc_nccl_check" "sixty_under" {
  expected_busbw_gbs = local.expected
  nccl_tests_output  = file("${var.samples}/sixty_under.txt")
  cloud              = "gcp"
}

# Standard_ND96isr_H100_v5's figure, and a bandwidth measured elsewhere.
data "hpc_nccl_check" "measured" {
  expected_busbw_gbs = 460
  measured_busbw_gbs = 331.2
  cloud              = "azure"
}

output "verdicts" {
  value = {
    healthy      = data.hpc_nccl_check.healthy.verdict
    thirty_under = data.hpc_nccl_check.thirty_under.verdict
    sixty_under  = data.hpc_nccl_check.sixty_under.verdict
    measured     = data.hpc_nccl_check.measured.verdict
  }
}

output "healthy" {
  value = {
    healthy      = data.hpc_nccl_check.healthy.healthy
    thirty_under = data.hpc_nccl_check.thirty_under.healthy
    sixty_under  = data.hpc_nccl_check.sixty_under.healthy
    measured     = data.hpc_nccl_check.measured.healthy
  }
}

output "checks" {
  value = {
    for name, check in {
      healthy      = data.hpc_nccl_check.healthy
      thirty_under = data.hpc_nccl_check.thirty_under
      sixty_under  = data.hpc_nccl_check.sixty_under
      measured     = data.hpc_nccl_check.measured
    } : name => {
      busbw_gbs         = check.busbw_gbs
      ratio             = check.ratio
      shortfall_percent = check.shortfall_percent
      wrong             = check.wrong
      message           = check.message
    }
  }
}
