import {
  to = hpc_slurm_cluster.ml
  identity = {
    cloud    = "aws"
    location = "us-east-1"
    name     = "ml"
  }
}
