import {
  to = hpc_gpu_fabric.train
  id = "aws/us-east-1/train"
}
