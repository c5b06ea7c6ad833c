# The training-cluster module on AWS, with what is particular to AWS: EC2 capacity reservations and
# capacity blocks for ML, an existing VPC and subnet, and an S3 bucket linked to FSx for Lustre.

locals {
  reserved = var.capacity_type == null ? false : contains(["reservation", "capacity-block"], var.capacity_type)
}

module "cluster" {
  source = "../training-cluster"

  name                       = var.name
  cloud                      = "aws"
  region                     = var.region
  zone                       = var.zone
  gpu                        = var.gpu
  instance_type              = var.instance_type
  node_count                 = var.node_count
  workload                   = var.workload
  vpc_id                     = var.vpc_id
  subnet_id                  = var.subnet_id
  placement                  = coalesce(var.placement, local.reserved ? "none" : "cluster")
  capacity_type              = var.capacity_type
  reservation_id             = var.reservation_id
  create_filesystem          = var.create_filesystem
  storage_capacity_gib       = var.storage_capacity_gib
  storage_throughput_per_tib = var.storage_throughput_per_tib
  data_repository            = var.s3_import_path
  ssh_public_key             = var.ssh_public_key
  user_data                  = var.user_data
  image                      = var.image
  tags                       = var.tags
}
