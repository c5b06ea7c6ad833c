output "instance_types" {
  description = "Per cloud: instance type -> GPUs x memory, fabric, RDMA interfaces, bandwidth."
  value = {
    for cloud, catalog in data.hpc_gpu_catalog.by_cloud : cloud => {
      for it in catalog.instance_types : it.name => format(
        "%dx %s %s GB, %s x%s, %s Gbps",
        it.gpu_count, it.gpu_model, coalesce(it.gpu_memory_gb, "?"), it.rdma_fabric,
        coalesce(it.rdma_interfaces, "?"), coalesce(it.network_bandwidth_gbps, "?")
      )
    }
  }
}
