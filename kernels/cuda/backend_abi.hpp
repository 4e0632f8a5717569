#pragma once
// The boundary between meshsim and its CUDA backend module. The module
// (libmeshsim_cuda_backend.so, built from device.cpp when MESHSIM_CUDA is on) is
// the only part of meshsim that links the CUDA runtime, cuBLAS and NCCL; meshsim
// loads it with dlopen when `replay` or `calibrate` first asks for a GPU
// (loader.cpp). So every other command starts without loading CUDA, and a
// meshsim built with CUDA still runs where the CUDA libraries are missing.
//
// Both sides come from the same build, so C++ types cross the boundary; the
// layout checks below catch a stale module from another build. Exceptions never
// cross it: every failure comes back as one line in `error`.
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/cuda/device.hpp"

namespace meshsim::kernels::cuda {

inline constexpr int kBackendAbi = 4;

struct BackendApi {
  int abi = kBackendAbi;
  std::size_t probe_size = sizeof(Probe);
  std::size_t device_call_size = sizeof(DeviceCall);
  std::size_t repeat_size = sizeof(Repeat);
  // Never fails: a problem is reported in Probe::problem.
  void (*probe)(Probe& out) = nullptr;
  // A session for `gpus` devices, or nullptr with `error` set.
  void* (*open_session)(int gpus, std::string& error) = nullptr;
  // A session of one process among several (Session(Coordinator&, int)).
  void* (*open_rank_session)(Coordinator& coordinator, int local_device, std::string& error) = nullptr;
  void (*close_session)(void* session) = nullptr;
  // Fills `out` (seconds per repetition, gated or not) and returns true, or returns
  // false with `error` set, and `fatal` when the session cannot go on (DeviceFatal).
  bool (*time)(void* session, const std::vector<DeviceCall>& calls, const Repeat& repeat, Timing& out,
               std::string& error, bool& fatal) = nullptr;
};

}  // namespace meshsim::kernels::cuda

// The module's one exported symbol (the module is built with hidden visibility).
extern "C" __attribute__((visibility("default"))) const meshsim::kernels::cuda::BackendApi* meshsim_cuda_backend();
inline constexpr const char* kMeshsimCudaBackendSymbol = "meshsim_cuda_backend";
