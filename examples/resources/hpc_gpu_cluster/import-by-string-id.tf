import {
  to = hpc_gpu_cluster.train
  id = "oci/us-ashburn-1/ocid1.compartment.oc1..exampleuniqueid/train"
}
