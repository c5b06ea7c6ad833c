# GPU workers for an OKE cluster another team made, with the official oci provider and in another state.
# Managed OKE node pools cannot join a cluster network or a compute cluster, so RDMA workers are self-managed
# nodes: through modules/kubernetes-gpu-pool this configuration makes a fabric in the cluster's VCN (its
# security group and compute cluster) and four BM.GPU.H100.8 nodes in it, which boot an OKE worker image and
# join the cluster with oke-install.sh (its private API endpoint and CA are read from the cluster, never
# changed). The cluster's compartment needs the policy that lets the nodes join:
#   Allow dynamic-group <these instances> to {CLUSTER_JOIN} in compartment <the cluster's>
#
# After apply, install what the outputs say in the cluster: the NVIDIA Network Operator with the
# NicClusterPolicy (device_plugin), and Kueue's Topology (kueue_topology); then run nccl_test_kubernetes.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "oci_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

variable "oke_cluster_id" {
  description = "OCID of the existing OKE cluster (oci_containerengine_cluster.<x>.id in the team's configuration)."
  type        = string
  default     = "ocid1.cluster.oc1.iad.aaaaaaaaexampleuniqueid"
}

variable "compartment_id" {
  description = "The compartment the nodes go in."
  type        = string
  default     = "ocid1.compartment.oc1..exampleuniqueid"
}

variable "vcn_id" {
  description = "The cluster's VCN: the nodes reach its private API endpoint."
  type        = string
  default     = "ocid1.vcn.oc1.iad.exampleuniqueid"
}

variable "subnet_id" {
  description = "A subnet of that VCN for the GPU nodes."
  type        = string
  default     = "ocid1.subnet.oc1.iad.exampleuniqueid"
}

variable "worker_image" {
  description = "An OKE worker image for the cluster's Kubernetes version, with the GPU driver and RDMA packages (it carries /etc/oke/oke-install.sh)."
  type        = string
  default     = "ocid1.image.oc1.iad.exampleokegpuimage"
}

variable "node_count" {
  description = "GPU nodes."
  type        = number
  default     = 4
}

# Credentials come from ~/.oci/config (or the file OCI_CONFIG_FILE names).
provider "hpc" {
  oci {
    region   = "us-ashburn-1"
    endpoint = var.oci_endpoint
  }
}

module "gpu" {
  source = "../../../modules/kubernetes-gpu-pool"

  name               = "gpu"
  cloud              = "oci"
  region             = "us-ashburn-1"
  zone               = "Uocm:US-ASHBURN-AD-1"
  instance_type      = "BM.GPU.H100.8"
  compartment_id     = var.compartment_id
  kubernetes_cluster = var.oke_cluster_id
  vpc_id             = var.vcn_id
  subnet_id          = var.subnet_id
  image              = var.worker_image
  node_count         = var.node_count

  labels = {
    "example.com/team" = "llm"
  }
}

output "device_plugin" {
  description = "The NVIDIA Network Operator's NicClusterPolicy with the RDMA shared device plugin."
  value       = module.gpu.device_plugin
}

output "device_resources" {
  value = module.gpu.device_resources
}

output "node_labels" {
  value = module.gpu.node_labels
}

output "kueue_topology" {
  value = module.gpu.kueue_topology
}

output "nccl_test_kubernetes" {
  value = module.gpu.nccl_test_kubernetes
}
