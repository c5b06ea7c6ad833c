import {
  to = hpc_gpu_node_pool.gpu
  id = "aws/us-east-1/ml-prod/gpu"
}
