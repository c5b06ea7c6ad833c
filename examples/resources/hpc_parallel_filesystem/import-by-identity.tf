import {
  to = hpc_parallel_filesystem.scratch
  identity = {
    cloud    = "gcp"
    location = "us-central1-a"
    name     = "scratch"
  }
}
