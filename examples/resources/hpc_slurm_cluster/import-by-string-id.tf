import {
  to = hpc_slurm_cluster.ml
  id = "aws/us-east-1/ml"
}
