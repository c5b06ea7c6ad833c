# An H100 fabric on AWS joining an existing VPC and private subnet: the plan shows the cluster placement
# group and the EFA security group with its self-referencing all-traffic rules.
resource "hpc_gpu_fabric" "train" {
  name      = "train"
  cloud     = "aws"
  region    = "us-east-1"
  zone      = "us-east-1a"
  gpu       = "H100" # resolves to p5.48xlarge
  vpc_id    = "vpc-0123456789abcdef0"
  subnet_id = "subnet-0123456789abcdef0"
  tags      = { project = "llm" }
}
