# Picks the node type for a GPU model in a cloud from the provider's catalog, preferring the instance type
# with the most inter-node bandwidth, and fails the plan with a clear message when none fits.

data "hpc_gpu_catalog" "this" {
  cloud = var.cloud
  gpu   = var.gpu
}

locals {
  rdma_fabrics = ["efa", "infiniband", "roce"]
  candidates = [
    for it in data.hpc_gpu_catalog.this.instance_types : it
    if !var.require_rdma || contains(local.rdma_fabrics, it.rdma_fabric)
  ]
  # Highest known bandwidth first; unknown bandwidth sorts last.
  ranked = reverse(sort([for it in local.candidates : format("%06d/%s", coalesce(it.network_bandwidth_gbps, 0), it.name)]))
  chosen = length(local.ranked) == 0 ? null : one([for it in local.candidates : it if it.name == split("/", local.ranked[0])[1]])
}
