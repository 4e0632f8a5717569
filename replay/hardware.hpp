#pragma once
// Running on real GPUs (kernels/cuda/): the replay of a workload's plan, the
// calibration suite, their measurement files, and the comparison of measurements
// with the simulator before and after calibration.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/calibration.hpp"
#include "kernels/cuda/device.hpp"
#include "replay/nccl_log.hpp"
#include "replay/plan.hpp"
#include "workloads/workload.hpp"

namespace meshsim::replay {

struct Spread {
  double median_s = 0, min_s = 0, max_s = 0;
  // False when some repetition ran without the gate (kernels::cuda::Timing): the
  // times include the host's launch time. "ungated": true in the file.
  bool gated = true;
};
Spread spread_of(std::vector<double> samples);
Spread spread_of(const kernels::cuda::Timing& t);

struct OpMeasurement {
  std::uint32_t op = 0;
  std::string name;
  OpKind kind = OpKind::Matmul;
  std::uint32_t ranks = 0, ranks_replayed = 0;
  std::optional<Spread> time;  // none when nothing of it was replayed
  std::string skipped;
  NcclChoice nccl;  // what NCCL reported choosing for its collective ("" when it did not)
};

// An op's measurement before its timing: what it is and what of it the GPUs run.
OpMeasurement measurement_of(const workloads::Workload& w, const OpStep& step);

struct GemmMeasurement {
  std::string dtype;
  std::uint64_t m = 0, n = 0, k = 0;
  bool holdout = false;  // not used by the fit: the check of its predictions
  Spread time;
};

struct CopyMeasurement {
  std::uint64_t bytes = 0;
  Spread time;
};

struct CollectiveMeasurement {
  OpKind kind = OpKind::AllReduce;
  int ranks = 0;
  std::uint64_t bytes = 0;  // V (nccl-tests' size)
  Spread time;
  NcclChoice nccl;  // what NCCL reported choosing ("" when it did not)
};

struct Measurements {
  std::string file;
  bool suite = false;        // calibration suite; else a replay of `workload`
  std::string workload;
  calibrate::HardwareInfo hardware;
  kernels::cuda::Repeat repeat;
  std::vector<OpMeasurement> ops;
  std::vector<GemmMeasurement> gemm;
  std::vector<CopyMeasurement> copy;
  std::vector<CollectiveMeasurement> collectives;
  std::vector<std::string> skipped;
  // Not in the file: a DeviceFatal ended the suite or the replay early (what was
  // measured before it is kept; `skipped` says what ended it).
  bool stopped = false;
};

std::string format_measurements(const Measurements& m);
Measurements parse_measurements(std::string_view text, std::string_view file_name);  // InputError
Measurements load_measurements(const std::string& path);

calibrate::HardwareInfo hardware_info(const kernels::cuda::Probe& probe, int gpus_used);

// Replays every op of the plan on the visible GPUs, one op at a time.
Measurements replay(const workloads::Workload& w, const Plan& plan, const kernels::cuda::Probe& probe,
                    const kernels::cuda::Repeat& repeat, NcclTuningLog* nccl_log = nullptr);
// The same on `session`, whose devices are ranks 0 .. gpus-1 of the plan (one
// process's GPUs, or one GPU per process under MPI). An op that fails before it
// ran is skipped with the reason; a DeviceFatal ends the replay: the ops after it
// are named as not run, and `stopped` is set.
// `nccl_log`, when given, supplies what NCCL chose for each op's collectives.
Measurements replay_on(const workloads::Workload& w, const Plan& plan, const kernels::cuda::Probe& probe,
                       const kernels::cuda::Repeat& repeat, kernels::cuda::Session* session, int gpus,
                       NcclTuningLog* nccl_log = nullptr);
// What a replay measured, in words (meshsim replay): a head line, then per op its
// median [min, max] in us and on how many ranks it ran, what NCCL said it chose,
// and what was skipped. `ranks`: the MPI processes (1: one process's GPUs).
std::string format_replay(const workloads::Workload& w, const Measurements& m, int ranks,
                          const kernels::cuda::Repeat& repeat);

// A Chrome JSON trace of a replay in the simulator's layout: one process per
// replayed chip ("chip (x,y)"), an "ops" track with the ops back to back at their
// median times.
std::string format_replay_trace(const workloads::Workload& w, const Measurements& m);

// The calibration suite: GEMMs over a grid of shapes per dtype (and held-out
// shapes), HBM copies from 4 KiB to 1 GiB, and with >= 2 GPUs collective sweeps
// over all of them from 1 KiB to `max_collective_bytes`.
struct SuiteOptions {
  std::vector<std::string> dtypes = {"bf16", "fp32"};
  std::uint64_t max_collective_bytes = std::uint64_t{1} << 30;
  bool quick = false;  // a smaller grid (for a first look)
};
Measurements run_suite(const kernels::cuda::Probe& probe, const kernels::cuda::Repeat& repeat,
                       const SuiteOptions& options, std::vector<std::string>& log, NcclTuningLog* nccl_log = nullptr);
// Fits the model to the training points of a suite (held-out GEMMs left out).
// A fit the points cannot determine is left out and named in `not_fitted`.
calibrate::Calibration fit_suite(const Measurements& m, std::vector<std::string>& not_fitted);

// The GPU preset of a measured device ("NVIDIA H100 80GB HBM3" -> "h100-dgx"), or "".
std::string preset_for_device(const std::string& device);

// The comparison table: per op (replay) or per point (suite), measured,
// simulated before and after calibration, errors in percent, median absolute
// errors. `preset` names the hardware the "before" model uses for a suite
// ("" = the one matching the measured device).
std::string format_comparison(const Measurements& m, const calibrate::Calibration* cal, const std::string& preset);

}  // namespace meshsim::replay
