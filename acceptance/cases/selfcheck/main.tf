terraform {
  required_providers {
    hpc = {
      source = "hpc-platform/hpc"
    }
  }
}

data "hpc_gpu_selfcheck" "p5" {
  cloud                 = "aws"
  instance_type         = "p5.48xlarge"
  install_dcgm_exporter = true
  user_data             = "#cloud-config\npackages: [htop]\n"
}

output "expected_gpus" {
  value = data.hpc_gpu_selfcheck.p5.expected_gpus
}

output "expected_rdma_devices" {
  value = data.hpc_gpu_selfcheck.p5.expected_rdma_devices
}

# Not sensitive: an output of a sensitive value without `sensitive = true` would be an error.
output "script" {
  value = data.hpc_gpu_selfcheck.p5.script
}

# combined_user_data is sensitive (it carries user_data); its length is not.
output "combined_user_data_length" {
  value = nonsensitive(length(data.hpc_gpu_selfcheck.p5.combined_user_data))
}

output "combined_user_data_is_set" {
  value = nonsensitive(length(data.hpc_gpu_selfcheck.p5.combined_user_data)) > 0
}
