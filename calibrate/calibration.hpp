#pragma once
// A calibration: the model parameters fitted from measurements on real hardware
// (meshsim calibrate), read back by `meshsim run --calibration`. The file format
// is documented in docs/HARDWARE.md and docs/CALIBRATION.md. Parsing follows the workload rules: every
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
  std::string device;        // e.g. "NVIDIA H200", or the preset the measurements were made on
  int gpus = 0;              // visible GPUs used (0: not GPUs, or not known)
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

// The terms of one fabric level fitted to measurements of collectives by
// simulating them (meshsim calibrate --from, calibrate/fit_fabric.hpp): the hop
// latency of each of the level's links, the fraction of their peak bandwidth
// they achieve, and a fixed cost per collective kind (each with its standard
// error). `run` sets them on the workload's hardware (workloads::Hardware).
struct LevelFit {
  workloads::FabricLevel level = workloads::FabricLevel::Ici;
  std::string preset;  // the hardware whose peak the efficiency is a fraction of
  double hop_latency_s = 0, hop_latency_error_s = 0;
  bool hop_latency_fitted = true;  // false: the preset's, kept (the points could not separate it)
  double efficiency = 1, efficiency_error = 0;
  bool efficiency_fitted = true;  // false: the preset's, kept (no point where bandwidth matters)
  struct Fixed {
    OpKind kind = OpKind::AllReduce;
    double seconds = 0, error_s = 0;
    bool fitted = true;   // false: kept at 0 (no point small enough to see it), or shared
    bool shared = false;  // a kind without points: the mean of the level's fitted kinds
  };
  std::vector<Fixed> fixed_cost;  // the kinds measured, then shared to the others, in OpKind order
  FitQuality quality;
};

struct Calibration {
  std::string file;
  HardwareInfo hardware;
  std::optional<HbmFit> hbm;
  std::vector<MatmulFit> matmul;
  std::vector<LinkFit> links;
  std::vector<CollectiveFit> collectives;
  std::vector<LevelFit> fabric;

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
// docs/MODEL.md; and the fabric levels that apply (ici and dcn for TPU workloads,
// nvlink and nic for GPU ones): hop latency, link efficiency (bandwidth = the
// preset's peak x efficiency) and fixed costs. Returns what it changed, one line each.
std::vector<std::string> apply_calibration(workloads::Workload& w, const Calibration& c);

}  // namespace meshsim::calibrate
