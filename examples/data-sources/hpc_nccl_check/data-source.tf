# Before a two-week run, check the fabric: run nccl-tests' all_reduce_perf across the cluster's nodes
# (e.g. srun --mpi=pmix all_reduce_perf -b 8 -e 16G -f 2 -g 1), save what it printed as allreduce.log,
# and let the check stop the apply when the bus bandwidth falls short of what the node type reaches.
# Postconditions need OpenTofu or Terraform 1.2 or later.
data "hpc_nccl_check" "fabric" {
  expected_busbw_gbs = hpc_gpu_cluster.train.expected_busbw_gbs
  nccl_tests_output  = file("${path.module}/allreduce.log")
  cloud              = "oci"

  lifecycle {
    postcondition {
      condition     = self.healthy
      error_message = self.message
    }
  }
}

# Resources that depend on the check are created only on a healthy fabric, e.g. the training job's:
#   depends_on = [data.hpc_nccl_check.fabric]

output "fabric_verdict" {
  description = "The verdict on the fabric's all-reduce."
  value       = data.hpc_nccl_check.fabric.verdict # "healthy", "placement-or-driver" or "fabric"
}

# A bandwidth measured elsewhere works the same way.
data "hpc_nccl_check" "measured" {
  expected_busbw_gbs = 460 # Standard_ND96isr_H100_v5
  measured_busbw_gbs = 331.2
  cloud              = "azure"
}

output "measured_verdict" {
  description = "The verdict on a measured bus bandwidth."
  value       = data.hpc_nccl_check.measured.verdict # "placement-or-driver": 28% short
}
