# The training-cluster module on Google Cloud, with what is particular to it: compact placement distance,
# Flex-start (DWS) or reserved capacity, and a Cloud Storage bucket linked to Managed Lustre. The project
# comes from the provider's gcp block, so the same module serves any project.

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "gcp"
  region                     = regex("^(.*)-[a-z]$", var.zone)[0]
  zone                       = var.zone
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  max_distance               = var.max_distance
  capacity_type              = var.capacity_type
  reservation_id             = var.reservation_id
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gib
  storage_throughput_per_tib = var.storage_throughput_per_tib
  data_repository            = var.gcs_import_path
  ssh_public_key             = var.ssh_public_key
  user_data                  = var.user_data
  image                      = var.image
  tags                       = var.labels
}
