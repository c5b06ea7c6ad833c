# Every p5.48xlarge node checks itself at boot: 8 GPUs and 32 EFA devices, or it logs
# "HPC SELFCHECK FAILED: <reason>" and powers itself off before a job can land on it. Your own
# cloud-init runs too (the check runs first among the scripts), and the DCGM exporter serves GPU
# metrics on port 9400 once the check passes.
data "hpc_gpu_selfcheck" "check" {
  cloud                 = "aws"
  instance_type         = "p5.48xlarge"
  install_dcgm_exporter = true # needs docker and the NVIDIA container toolkit in the image
  user_data             = <<-EOT
    #cloud-config
    packages: [htop]
  EOT
}

resource "hpc_gpu_fabric" "train" {
  name          = "train"
  cloud         = "aws"
  region        = "us-east-1"
  zone          = "us-east-1a"
  instance_type = "p5.48xlarge"
}

resource "hpc_gpu_cluster" "train" {
  name       = "train"
  fabric     = hpc_gpu_fabric.train
  node_count = 4
  user_data  = data.hpc_gpu_selfcheck.check.combined_user_data
}

output "selfcheck_script" {
  description = "The self-check each node runs, for review."
  value       = data.hpc_gpu_selfcheck.check.script # what runs on each node, for review
}
