# The ML platform team's configuration: a 2-node H100 cluster with FSx for Lustre in the network team's
# existing VPC, read from that team's state. It hands the nodes on to the rest of the platform: an MPI
# hostfile and a Slurm topology.conf on disk, and the node IPs to configuration management.
# OpenTofu only (terraform_data, moved); see ../README.md.

terraform {
  # terraform_data
  required_version = ">= 1.4"

  required_providers {
    hpc = {
      source  = "hpc-platform/hpc"
      version = "0.1.0"
    }
    local = {
      source  = "hashicorp/local"
      version = "1.4.0"
    }
  }
}

data "terraform_remote_state" "network" {
  backend = "local"
  config = {
    path = var.network_state_path
  }
}

locals {
  network = data.terraform_remote_state.network.outputs
}

provider "hpc" {
  aws {
    region = local.network.region
  }
}

resource "hpc_gpu_fabric" "train" {
  name      = "train"
  cloud     = "aws"
  region    = local.network.region
  zone      = local.network.zone
  gpu       = "H100"
  vpc_id    = local.network.vpc_id
  subnet_id = local.network.subnet_id
}

resource "hpc_gpu_cluster" "train" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = 2
}

# This cluster was first declared as hpc_gpu_cluster.nodes. The moved block renames it in state, so the
# rename plans no change instead of replacing every node. Keep it until all states have been applied.
moved {
  from = hpc_gpu_cluster.nodes
  to   = hpc_gpu_cluster.train
}

resource "hpc_parallel_filesystem" "scratch" {
  name               = "scratch"
  fabric             = hpc_gpu_fabric.train
  cluster            = hpc_gpu_cluster.train
  capacity_gib       = 2400
  throughput_per_tib = 500
}

locals {
  gpus_per_node = floor(hpc_gpu_cluster.train.gpus_total / hpc_gpu_cluster.train.node_count)

  # Slurm's topology/tree plugin: one leaf switch per placement group, holding the nodes launched into
  # it (here every node of the cluster), under one root switch.
  placement_groups = [for p in hpc_gpu_fabric.train.expansion : p.name if p.kind == "aws_placement_group"]
  leaf_switches    = { for pg in local.placement_groups : pg => hpc_gpu_cluster.train.node_names }
  topology = join("", concat(
    [for switch, nodes in local.leaf_switches : "SwitchName=${switch} Nodes=${join(",", nodes)}\n"],
    ["SwitchName=root Switches=${join(",", keys(local.leaf_switches))}\n"],
  ))
}

resource "local_file" "hostfile" {
  content  = join("", formatlist("%s slots=%d\n", hpc_gpu_cluster.train.nodes[*].private_ip, local.gpus_per_node))
  filename = "${path.module}/out/hostfile"

  file_permission      = "0644"
  directory_permission = "0755"
}

resource "local_file" "topology" {
  content  = local.topology
  filename = "${path.module}/out/topology.conf"

  file_permission      = "0644"
  directory_permission = "0755"
}

# A stand-in for configuration management (an Ansible run, say) that must see every node's IP: replaced,
# and so run again, whenever the set of IPs changes.
resource "terraform_data" "node_ips" {
  input            = hpc_gpu_cluster.train.nodes[*].private_ip
  triggers_replace = hpc_gpu_cluster.train.nodes[*].private_ip
}
