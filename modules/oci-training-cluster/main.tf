# The training-cluster module on OCI, with what is particular to it: the compartment, the choice between a
# compute cluster and a cluster network, and an Object Storage bucket linked to File Storage with Lustre.
# Credentials and tenancy come from the provider's oci block (~/.oci/config by default).

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "oci"
  region                     = var.region
  zone                       = var.availability_domain
  compartment_id             = var.compartment_id
  placement                  = var.placement
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  capacity_type              = var.capacity_type
  reservation_id             = var.reservation_id
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gb # the provider reads OCI capacities as GB
  storage_throughput_per_tib = var.storage_throughput_per_tib
  data_repository            = var.object_storage_path
  ssh_public_key             = var.ssh_public_key
  user_data                  = var.user_data
  image                      = var.image
  tags                       = var.tags
}
