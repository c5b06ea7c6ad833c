# A GPU training cluster on any of the four clouds: the fabric (network, placement, RDMA security), the
# nodes, and a managed Lustre filesystem next to them. The provider expands each into the cloud's own
# pieces; this module only wires them together and turns the result into what jobs need (hostfile, NCCL
# environment, mount command).

resource "hpc_gpu_fabric" "this" {
  name           = var.name
  cloud          = var.cloud
  region         = var.region
  zone           = var.zone
  gpu            = var.instance_type == null ? var.gpu : null
  instance_type  = var.instance_type
  vpc_id         = var.vpc_id
  subnet_id      = var.subnet_id
  placement      = var.placement
  max_distance   = var.max_distance
  resource_group = var.resource_group
  compartment_id = var.compartment_id
  slurm          = var.slurm_version != null ? true : null
  tags           = var.tags
}

# The node type's NVLink domain, from the provider's catalog (no cloud call).
# Read from the inputs, not the fabric, so that it is known at plan time.
data "hpc_gpu_catalog" "node" {
  cloud         = var.cloud
  gpu           = var.instance_type == null ? var.gpu : null
  instance_type = var.instance_type
}

locals {
  nodes_per_domain = max(1, [for t in data.hpc_gpu_catalog.node.instance_types : t.nvlink_domain_nodes]...)
  node_count       = var.nvlink_domains != null ? var.nvlink_domains * local.nodes_per_domain : var.node_count
}

resource "hpc_gpu_cluster" "this" {
  name            = var.name
  fabric          = hpc_gpu_fabric.this
  node_count      = local.node_count
  workload        = var.workload
  capacity_type   = var.capacity_type
  reservation_id  = var.reservation_id
  image           = var.image
  user_data       = var.user_data
  ssh_public_key  = var.ssh_public_key
  node_identity   = var.node_identity
  repair          = var.repair
  max_repairs     = var.max_repairs
  capacity_policy = var.capacity_policy
  min_nodes       = var.min_nodes
  slurm           = var.slurm_version != null ? hpc_gpu_fabric.this.slurm_join : null
  tags            = var.tags

  update_strategy {
    batch_size         = var.update_batch_size
    wait_for_selfcheck = var.wait_for_selfcheck
  }
}

# Slurm over the nodes: the nodes join it by themselves (hpc_gpu_cluster.slurm above), and the Slurm
# cluster refers to them, so there is no cycle.
resource "hpc_slurm_cluster" "this" {
  count = var.slurm_version != null ? 1 : 0

  name           = "${var.name}-slurm"
  fabric         = hpc_gpu_fabric.this
  slurm_version  = var.slurm_version
  ssh_public_key = var.ssh_public_key
  tags           = var.tags

  partition {
    name    = var.name
    cluster = hpc_gpu_cluster.this
    default = true
  }
}

resource "hpc_parallel_filesystem" "this" {
  count = var.create_filesystem ? 1 : 0

  name               = var.name
  fabric             = hpc_gpu_fabric.this
  cluster            = hpc_gpu_cluster.this # lets the provider check throughput against the GPUs it feeds
  capacity_gib       = var.storage_capacity_gib
  throughput_per_tib = var.storage_throughput_per_tib
  data_repository    = var.data_repository
  maintenance_window = var.maintenance_window
  tags               = var.tags
}

locals {
  gpus_per_node = floor(hpc_gpu_cluster.this.gpus_total / local.node_count)

  # Expansion kinds that place nodes close together, per cloud.
  placement_kinds = [
    "aws_placement_group",
    "azurerm_proximity_placement_group",
    "google_compute_resource_policy",
    "oci_core_compute_cluster",
    "oci_core_cluster_network",
  ]
  expansions = {
    fabric     = hpc_gpu_fabric.this.expansion
    cluster    = hpc_gpu_cluster.this.expansion
    filesystem = flatten(hpc_parallel_filesystem.this[*].expansion)
  }
}
