# A fabric's id is <cloud>/<location>/<name>: aws/<region>/<name>, gcp/<zone>/<name>,
# azure/<resource group>/<name> or oci/<region>/<compartment OCID>/<name>.
#
# What the import reads: on AWS the pieces tagged hpc:fabric = <name> (the provider writes the tag on each
# of them), with the subnet and node type recorded on the security group; on Google Cloud the pieces by
# their names (<name>-gpu-0, ...) and the description each carries; on Azure and OCI the pieces by their
# names, with the network security group's tags recording the configuration. The imported state equals the
# created one.
#
# Import is the one way to adopt pieces another state made: the imported state records the owner marker
# (hpc:owner) the pieces carry, and from then on changes and deletes them; remove them from the other state
# (state rm) so that only one state manages them. Pieces made before owner markers existed import under a
# legacy owner, which owns the unmarked pieces with these names. Import refuses when pieces of several
# owners answer to the id.
terraform import hpc_gpu_fabric.train aws/us-east-1/train
terraform import hpc_gpu_fabric.train gcp/us-central1-a/train
terraform import hpc_gpu_fabric.train azure/train-rg/train
terraform import hpc_gpu_fabric.train oci/us-ashburn-1/ocid1.compartment.oc1..exampleuniqueid/train
