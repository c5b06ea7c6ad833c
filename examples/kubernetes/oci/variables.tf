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
