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
