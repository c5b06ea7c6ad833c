# A GPU node pool for a Kubernetes cluster made elsewhere, on any cloud whose pools the provider makes (EKS,
# GKE, AKS, OKE): a fabric in the cluster's network (the cloud's RDMA security group and placement) and the pool on it.
# The cluster is only read. The outputs are the in-cluster half: the RDMA device plugin or operator, Kueue's
# Topology and an NCCL test Job, and the labels the nodes carry.

terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

variable "name" {
  description = "Name of the fabric and the pool (on AKS 1-12 lowercase letters and digits)."
  type        = string
}

variable "cloud" {
  description = "aws (an EKS cluster), gcp (a GKE cluster), azure (an AKS cluster) or oci (an OKE cluster)."
  type        = string
}

variable "region" {
  description = "The Kubernetes cluster's region, e.g. us-east-1, us-central1 or eastus."
  type        = string
}

variable "zone" {
  description = "Zone of subnet_id on AWS (us-east-1a); on Google Cloud the zone of the nodes and their compact placement (us-central1-a); on OCI the availability domain; null on Azure."
  type        = string
  default     = null
}

variable "gpu" {
  description = "GPU model, resolved to the cloud's best-connected node type (H100: p5.48xlarge, Standard_ND96isr_H100_v5). Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "Node type; overrides gpu."
  type        = string
  default     = null
}

variable "kubernetes_cluster" {
  description = "The cluster the pool joins: the EKS cluster's name, the GKE cluster's id (projects/<p>/locations/<l>/clusters/<c>), the AKS cluster's resource id, or the OKE cluster's OCID."
  type        = string
}

variable "kubernetes_version" {
  description = "The kubelet's minor version (1.33): the cluster's, or up to three minor versions older; the cluster's when null."
  type        = string
  default     = null
}

variable "vpc_id" {
  description = "The cluster's network: its VPC id (on Google Cloud projects/<p>/global/networks/<n>), its virtual network's resource id, or its VCN's OCID."
  type        = string
}

variable "subnet_id" {
  description = "A subnet of that network for the GPU nodes."
  type        = string
}

variable "node_count" {
  description = "GPU nodes in the pool. Changes in place."
  type        = number
}

variable "compartment_id" {
  description = "OCI: the compartment of the fabric and the nodes. Null elsewhere."
  type        = string
  default     = null
}

variable "image" {
  description = "OCI: an OKE worker image's OCID (required there: it carries oke-install.sh). GKE: the node image type. Null for the cloud's default elsewhere."
  type        = string
  default     = null
}

variable "node_role" {
  description = "EKS: the ARN of the IAM role the nodes join with. GKE: the nodes' service account email (null: the default). Null on Azure."
  type        = string
  default     = null
}

variable "labels" {
  description = "Kubernetes labels on every node (not under kubernetes.io, k8s.io or hpc-platform/)."
  type        = map(string)
  default     = {}
}

variable "gpu_taint" {
  description = "Taint every node with nvidia.com/gpu=present:NoSchedule, so that only pods tolerating it (GPU work) land there."
  type        = bool
  default     = true
}

resource "hpc_gpu_fabric" "this" {
  name           = var.name
  cloud          = var.cloud
  region         = var.region
  zone           = var.zone
  gpu            = var.instance_type == null ? var.gpu : null
  instance_type  = var.instance_type
  vpc_id         = var.vpc_id
  subnet_id      = var.subnet_id
  compartment_id = var.compartment_id
}

resource "hpc_gpu_node_pool" "this" {
  name               = var.name
  fabric             = hpc_gpu_fabric.this
  kubernetes_cluster = var.kubernetes_cluster
  kubernetes_version = var.kubernetes_version
  node_count         = var.node_count
  image              = var.image
  node_role          = var.node_role
  labels             = length(var.labels) == 0 ? null : var.labels

  dynamic "taint" {
    for_each = var.gpu_taint ? [1] : []
    content {
      key    = "nvidia.com/gpu"
      value  = "present"
      effect = "NoSchedule"
    }
  }
}

output "instance_type" {
  description = "The node type the pool runs."
  value       = hpc_gpu_node_pool.this.instance_type
}

output "device_plugin" {
  description = "The cloud's RDMA device plugin or operator for these nodes (Helm values, or the Network Operator's NicClusterPolicy)."
  value       = hpc_gpu_node_pool.this.device_plugin
}

output "device_resources" {
  description = "The extended resources each pod of a job across the pool requests."
  value       = hpc_gpu_node_pool.this.device_resources
}

output "node_labels" {
  description = "The labels every node carries: labels and the pool's."
  value       = hpc_gpu_node_pool.this.node_labels
}

output "kueue_topology" {
  description = "Kueue's Topology over the labels that say where a node sits."
  value       = hpc_gpu_node_pool.this.kueue_topology
}

output "nccl_test_kubernetes" {
  description = "An NCCL all-reduce indexed Job across the pool."
  value       = hpc_gpu_node_pool.this.nccl_test_kubernetes
}
