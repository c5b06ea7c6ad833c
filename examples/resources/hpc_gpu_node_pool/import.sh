# A node pool's id is its cloud's id for it:
#   EKS: aws/<region>/<EKS cluster>/<pool name>; the import reads the node group (DescribeNodegroup) and its
#        launch template.
#   GKE: gcp/<GKE cluster's location>/<GKE cluster>/<pool name>, in the provider's project; the import
#        reads the node pool and its instance groups.
#   AKS: azure/<AKS cluster's resource group>/<AKS cluster>/<pool name>; the import reads the agent pool.
#   OKE: oci/<region>/<compartment OCID>/<pool name>; the import reads the workers and their instance
#        configuration, whose join names the OKE cluster, the labels and the taints.
#
# Every way it takes over the owner's marker the pool carries and rebuilds the configuration: the fabric
# (its hpc:fabric tag or label, the node type, the placement, the zone, resource group or compartment), the
# size (or the autoscaling bounds), capacity type, image, Kubernetes version, node role (EKS) or service
# account (GKE), labels (without the hpc-platform/ ones the pool sets), taints, update batch and tags.
terraform import hpc_gpu_node_pool.gpu aws/us-east-1/ml-prod/gpu
terraform import hpc_gpu_node_pool.gpu gcp/us-central1/ml-prod/gpu
terraform import hpc_gpu_node_pool.gpu azure/ml-rg/ml-prod/gpu
terraform import hpc_gpu_node_pool.gpu oci/us-ashburn-1/ocid1.compartment.oc1..exampleuniqueid/gpu
