#pragma once
// A calibration: the model parameters fitted from measurements on real hardware
// (meshsim calibrate), read back by `meshsim run --calibration`. The file format
// is documented in docs/CALIBRATION.md. Parsing follows the workload rules: every
// error is an InputError "FILE:/json/pointer: message", unknown keys are errors.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/calibrated_matmul.hpp"
#include "workloads/workload.hpp"

namespace meshsim::calibrate {

inline constexpr int kCalibrationVersion = 1;

// How well a fit matches the points it was fitted on.
struct FitQuality {
  std::uint64_t points = 0;
  double rms_relative_residual = 0;  // sqrt(mean((model - measured) / measured)^2)
  double max_relative_residual = 0;
};

// Where the measurements came from.
struct HardwareInfo {
  std::string device;        // e.g. "NVIDIA H200"
  int gpus = 0;              // visible GPUs used
  int sms = 0;               // streaming multiprocessors per GPU (0: not known)
  std::string cuda_runtime;  // e.g. "12.4"
  std::string nccl;          // e.g. "2.21.5"; empty: no collectives measured
  std::string nccl_algo, nccl_proto;  // NCCL_ALGO / NCCL_PROTO in force ("" = NCCL's choice)
};

// HBM copy: t = latency + 2 n / bandwidth for a device-to-device copy of n bytes
// (n read, n written).
struct HbmFit {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  FitQuality quality;
};

// A local matmul of one dtype: t = launch + flops / rate + wave_flops / wave rate
// + hbm_bytes / bandwidth (kernels/calibrated_matmul.hpp; without `sms` no wave
// term). The efficiency of a shape is (flops / peak) / t.
struct MatmulFit {
  std::string dtype;  // bf16, fp16, fp32, int8, fp8
  double launch_s = 0;
  double flops_per_s = 0;
  double wave_flops_per_s = 0;  // with sms > 0
  double hbm_bytes_per_s = 0;
  int sms = 0;
  FitQuality quality;
  kernels::MatmulTimeModel model() const { return {launch_s, flops_per_s, wave_flops_per_s, hbm_bytes_per_s, sms}; }
  double time_s(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::uint64_t element_bytes) const {
    return kernels::calibrated_matmul_time(model(), m, k, n, element_bytes);
  }
};

// One fabric level: a collective of `steps` steps that puts `wire_bytes` through
// each GPU's port at this level takes t = steps x step_latency + wire_bytes / bandwidth
// (docs/MODEL.md's ring forms: AllGather/ReduceScatter N-1 steps and (N-1)/N V,
// AllReduce twice both).
enum class Level { Nvlink, Nic, Ici };
std::string_view level_name(Level l);

struct LinkFit {
  Level level = Level::Nvlink;
  double step_latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  FitQuality quality;
};

// The same fit for one collective kind alone (reported; `run` uses the levels).
struct CollectiveFit {
  OpKind kind = OpKind::AllReduce;
  Level level = Level::Nvlink;
  int ranks = 0;
  double step_latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  FitQuality quality;
};

struct Calibration {
  std::string file;
  HardwareInfo hardware;
  std::optional<HbmFit> hbm;
  std::vector<MatmulFit> matmul;
  std::vector<LinkFit> links;
  std::vector<CollectiveFit> collectives;

  const MatmulFit* matmul_for(std::string_view dtype) const;
  const LinkFit* link_for(Level level) const;
};

// Throws InputError on malformed or inconsistent input. `file_name` is only used
// in messages. (The entry point for fuzzing.)
Calibration parse_calibration(std::string_view text, std::string_view file_name);
// Reads and parses a file; an unreadable file is an Error.
Calibration load_calibration(const std::string& path);
// The JSON text parse_calibration reads back (numbers with full precision).
std::string format_calibration(const Calibration& c);

// Overrides the workload's hardware with the calibrated values that apply to it:
// HBM bandwidth, matmul fits (per dtype), and the link levels of its fabric
// (nvlink and nic for GPU workloads, ici for TPU ones): a step of `a` seconds is
// two link latencies of a/2 (up and down a switch, NIC to NIC), as in
// docs/MODEL.md. Returns what it changed, one line each.
std::vector<std::string> apply_calibration(workloads::Workload& w, const Calibration& c);

}  // namespace meshsim::calibrate
