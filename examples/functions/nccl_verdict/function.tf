# Judge a saved nccl-tests all_reduce_perf log (srun ... all_reduce_perf -b 8 -e 16G -f 2 -g 1 > allreduce.log)
# against the bus bandwidth the node type should reach, e.g. in a check block or a module input.
locals {
  fabric = provider::hpc::nccl_verdict(file("${path.module}/allreduce.log"), 365) # BM.GPU.H100.8
}

output "verdict" {
  description = "The verdict."
  value       = local.fabric.verdict # "healthy", "placement-or-driver" or "fabric"
}

output "busbw_gbs" {
  description = "The measured bus bandwidth, GB/s."
  value       = local.fabric.busbw_gbs
}

output "healthy" {
  description = "Whether the fabric is healthy."
  value       = local.fabric.healthy
}
