variable "name" {
  description = "Name of the fabric, cluster and filesystem; prefix of every OCI display name (1-40 lowercase letters, digits, hyphens)."
  type        = string
}

variable "region" {
  description = "OCI region, e.g. us-ashburn-1."
  type        = string
}

variable "availability_domain" {
  description = "Availability domain of the nodes and the filesystem, e.g. Uocm:US-ASHBURN-AD-1."
  type        = string
}

variable "compartment_id" {
  description = "OCID of the compartment to build in."
  type        = string

  validation {
    condition     = can(regex("^ocid1\\.(compartment|tenancy)\\.", var.compartment_id))
    error_message = "The compartment_id must be a compartment (or tenancy) OCID, ocid1.compartment.oc1..."
  }
}

variable "placement" {
  description = "cluster (a compute cluster, nodes launched one by one) or cluster-network (a cluster network's instance pool, resized in place)."
  type        = string
  default     = "cluster"

  validation {
    condition     = contains(["cluster", "cluster-network"], var.placement)
    error_message = "On OCI the placement must be cluster or cluster-network."
  }
}

variable "gpu" {
  description = "GPU model, resolved to the best-connected shape (H100: BM.GPU.H100.8). Ignored when instance_type is set."
  type        = string
  default     = "H100"
}

variable "instance_type" {
  description = "Shape, e.g. BM.GPU.H200.8; overrides gpu."
  type        = string
  default     = null
}

variable "node_count" {
  description = "Number of bare-metal nodes. Changes in place."
  type        = number
}

variable "workload" {
  description = "pretraining, finetuning, inference or media (video transcoding, needs NVENC GPUs); drives the provider's plan-time checks."
  type        = string
  default     = "pretraining"
}

variable "capacity_type" {
  description = "on-demand, spot (preemptible) or reservation; on-demand when null."
  type        = string
  default     = null

  validation {
    condition     = var.capacity_type == null ? true : contains(["on-demand", "spot", "reservation"], var.capacity_type)
    error_message = "On OCI the capacity_type must be on-demand, spot or reservation."
  }
}

variable "reservation_id" {
  description = "OCID of the capacity reservation to launch into, with capacity_type reservation."
  type        = string
  default     = null
}

variable "create_filesystem" {
  description = "Create the File Storage with Lustre filesystem."
  type        = bool
  default     = true
}

variable "storage_capacity_gb" {
  description = "Lustre capacity in GB as OCI counts them: at least 31200, in steps of 10400 up to 124800 and of 41600 above. Required with a filesystem."
  type        = number
  default     = null
}

variable "storage_throughput_per_tib" {
  description = "Lustre performance tier in MB/s per TiB: 125, 250, 500 or 1000. Required with a filesystem."
  type        = number
  default     = null
}

variable "object_storage_path" {
  description = "Object Storage path linked to the filesystem, as oci://bucket@namespace/prefix."
  type        = string
  default     = null

  validation {
    condition     = var.object_storage_path == null ? true : can(regex("^oci://[^@/]+@[^/]+", var.object_storage_path))
    error_message = "The object_storage_path must be an oci://bucket@namespace[/prefix] path."
  }
}

variable "ssh_public_key" {
  description = "SSH public key for the nodes' opc user."
  type        = string
  default     = null
}

variable "user_data" {
  description = "Cloud-init passed to every node unchanged."
  type        = string
  default     = null
  sensitive   = true
}

variable "image" {
  description = "Image OCID; the provider's GPU image for the shape when null."
  type        = string
  default     = null
}

variable "tags" {
  description = "Freeform tags on every OCI resource, after the provider's default_tags."
  type        = map(string)
  default     = {}
}
