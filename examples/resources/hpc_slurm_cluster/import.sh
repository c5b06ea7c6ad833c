# A Slurm cluster's id is <cloud>/<location>/<name>: aws/<region>/<name>, gcp/<zone>/<name>,
# azure/<resource group>/<name> or oci/<region>/<compartment OCID>/<name>.
#
# The import finds the controllers and login nodes by hpc:slurm = <name> (one list call), takes over their
# owner's marker, and reads the configuration the controller's metadata carries: the Slurm version, the
# rendered files and their revision, the controllers and login nodes with their types, the state location,
# the health check interval and the user's tags. The fabric, the partitions, the image and the SSH key are
# the configuration's: the first plan fills them in as an update in place that makes nothing again, and
# rewrites the configuration on the hosts only if the one the configuration renders differs
# (config_revision).
terraform import hpc_slurm_cluster.ml aws/us-east-1/ml
terraform import hpc_slurm_cluster.ml gcp/us-central1-a/ml
terraform import hpc_slurm_cluster.ml azure/ml-rg/ml
terraform import hpc_slurm_cluster.ml oci/us-ashburn-1/ocid1.compartment.oc1..exampleuniqueid/ml
