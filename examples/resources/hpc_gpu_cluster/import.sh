# A cluster's id is <cloud>/<location>/<name>: aws/<region>/<name>, gcp/<zone>/<name>,
# azure/<resource group>/<name> or oci/<region>/<compartment OCID>/<name>.
#
# What the import reads: on AWS the nodes tagged hpc:cluster = <name>, and the image, capacity options, EFA
# interfaces, user data and SSH key from the launch template <name>-lt; on Google Cloud the nodes labelled
# hpc_cluster = <name>, with the settings from their scheduling, reservation affinity and metadata; on Azure
# the scale sets <name>-0, ...; on OCI the instance configuration <name>-ic and the nodes <name>-<i> (or the
# cluster network <name>-cn). A cluster built without a fabric imports by the same id, with the network it
# made or joined (a fabric named after the cluster with placement none is read as that network).
#
# Not imported: a timeouts block, and write-only user data. The cloud hands back the nodes' user data and
# the import records it in user_data (the cloud keeps no sign it was given as user_data_wo), so import a
# cluster made with user_data_wo only if its state may hold that user data; a configuration with
# user_data_wo then plans a replacement, which rolls the nodes onto write-only user data again.
#
# Import is the one way to adopt pieces another state made: the imported state records the owner marker
# (hpc:owner) the pieces carry, and from then on changes and deletes them; remove them from the other state
# (state rm) so that only one state manages them. Pieces made before owner markers existed import under a
# legacy owner, which owns the unmarked pieces with these names. Import refuses when pieces of several
# owners answer to the id.
terraform import hpc_gpu_cluster.train aws/us-east-1/train
terraform import hpc_gpu_cluster.train gcp/us-central1-a/train
terraform import hpc_gpu_cluster.train azure/train-rg/train
terraform import hpc_gpu_cluster.train oci/us-ashburn-1/ocid1.compartment.oc1..exampleuniqueid/train
