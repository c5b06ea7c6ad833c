# The training-cluster module on Azure, with what is particular to it: the resource group to build in and
# the weekly maintenance window of Azure Managed Lustre. Azure has no zone here: InfiniBand scale sets
# are kept together by a proximity placement group instead.

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "azure"
  region                     = var.location
  resource_group             = var.resource_group
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  capacity_type              = var.capacity_type
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gib
  storage_throughput_per_tib = var.storage_throughput_per_tib
  maintenance_window         = var.maintenance_window
  ssh_public_key             = var.ssh_public_key
  user_data                  = var.user_data
  image                      = var.image
  tags                       = var.tags
}
