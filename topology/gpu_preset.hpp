#pragma once
// GPU presets: per-GPU compute and memory, the NVLink domain, the per-GPU NIC and
// the per-step latencies of NCCL's own cost model. Every value cites its public
// source in gpu_preset.cpp. A workload can override any of them.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "topology/preset.hpp"
#include "topology/torus.hpp"

namespace meshsim::topology {

struct GpuPreset {
  std::string_view name;
  std::string_view description;
  ChipSpec chip;
  int gpus_per_node = 8;     // NVLink domain size
  LinkSpec nvlink;           // per GPU and direction, through the NVLink switches: the datasheet's peak
  // The fraction of that peak NCCL's own model says its kernels achieve
  // (gpu_preset.cpp): the NVLink level's link efficiency when uncalibrated.
  double nvlink_efficiency = 1;
  LinkSpec nic;              // per GPU and direction, InfiniBand to the rail leaf
  LinkSpec spine;            // leaf <-> spine cable, per direction
  std::uint64_t forward_chunk_bytes = 0;
  double nvls_efficiency = 0;  // NVLink SHARP (topology::FabricSpec::nvls_efficiency); 0: none
  int compute_capability = 0;  // CUDA's, of the GPUs: 80 Ampere, 90 Hopper, 100 Blackwell
  bool amd_cpu = false;        // the hosts' CPUs are AMD's (NCCL's cost model asks)
};

std::span<const GpuPreset> gpu_presets();
const GpuPreset* find_gpu_preset(std::string_view name);
std::string gpu_preset_names();

}  // namespace meshsim::topology
