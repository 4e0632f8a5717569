#pragma once
// The report of a simulated training step: step time, where each pipeline
// stage's time went, model and hardware FLOPs with MFU and HFU, memory per chip.
// Everything timed comes from the simulated ops; the FLOPs and bytes are the
// closed forms of workloads/training.hpp.
#include <array>
#include <string>
#include <vector>

#include "base/tick.hpp"
#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

namespace meshsim::reports {

// One stage's step time split into disjoint parts: time computing (the local
// kernels), the optimizer step, then communication that no computation hides,
// by strategy (tensor, expert, context, fsdp, data, pipeline sends, in that
// order of precedence when several overlap), and idle time (the pipeline bubble: waiting for
// another stage). The parts add up to the step time exactly.
struct StageBreakdown {
  int stage = 0;
  Tick compute, tensor, expert, context, fsdp, data, pipeline, optimizer, idle;
  // Per role (workloads::Role as an index): how long its ops were in flight at
  // all, hidden or not (their merged intervals).
  std::array<Tick, 9> in_flight{};
};

struct TrainingResult {
  Tick step;
  std::vector<StageBreakdown> stages;
  double model_flops = 0, hardware_flops = 0;
  double mfu = 0, hfu = 0;  // over step x chips x peak
  double tokens_per_s_per_chip = 0;
  std::uint32_t chips = 0;
};

TrainingResult training_result(const workloads::Workload& w, const driver::RunResult& r);
std::string format_training_table(const workloads::Workload& w, const driver::RunResult& r);

}  // namespace meshsim::reports
