import {
  to = hpc_parallel_filesystem.scratch
  id = "gcp/us-central1-a/scratch"
}
