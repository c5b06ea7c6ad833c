variable "gcp_endpoint" {
  description = "API endpoint override for emulators or private endpoints; leave null for the real cloud"
  type        = string
  default     = null
}

variable "gke_cluster_id" {
  description = "Id of the existing GKE cluster (google_container_cluster.<x>.id in the team's configuration)."
  type        = string
  default     = "projects/ml-platform-prod/locations/us-central1/clusters/ml-prod"
}

variable "vpc_id" {
  description = "The VPC the cluster's nodes use (their first NIC)."
  type        = string
  default     = "projects/ml-platform-prod/global/networks/ml-vpc"
}

variable "subnet_id" {
  description = "The cluster's node subnetwork in that VPC."
  type        = string
  default     = "projects/ml-platform-prod/regions/us-central1/subnetworks/ml-nodes"
}

variable "kubernetes_version" {
  description = "The kubelet's minor version: the cluster's, or up to three minor versions older."
  type        = string
  default     = "1.33"
}

variable "node_count" {
  description = "GPU nodes in the pool."
  type        = number
  default     = 4
}
