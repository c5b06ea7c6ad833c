# A filesystem's id is aws/<region>/<file system id>, aws/<region>/<name>, gcp/<zone>/<name>,
# azure/<resource group>/<name> or oci/<region>/<compartment OCID>/<name>.
#
# On Google Cloud the Managed Lustre instance's description names its fabric. On AWS the file system must
# carry the hpc:filesystem and hpc:fabric tags (this provider writes them; tag a file system made elsewhere
# with them to adopt it); hpc:cluster, when present, restores the cluster reference.
#
# Import is the one way to adopt pieces another state made: the imported state records the owner marker
# (hpc:owner) the pieces carry, and from then on changes and deletes them; remove them from the other state
# (state rm) so that only one state manages them. Pieces made before owner markers existed import under a
# legacy owner, which owns the unmarked pieces with these names. Import refuses when pieces of several
# owners answer to the id.
terraform import hpc_parallel_filesystem.scratch aws/us-east-1/fs-0123456789abcdef0
terraform import hpc_parallel_filesystem.scratch gcp/us-central1-a/scratch
terraform import hpc_parallel_filesystem.scratch azure/train-rg/scratch
terraform import hpc_parallel_filesystem.scratch oci/us-ashburn-1/ocid1.compartment.oc1..exampleuniqueid/scratch
