#pragma once
// The context of one run: what a run builds once and passes down.
#include <optional>

#include "driver/gpu_choice.hpp"
#include "sim/collectives/schedule.hpp"
#include "topology/system.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

// What one run shares, made once and passed down (never global): the system (the
// torus, or the GPUs' grid and fabric: Workload::make_system), NCCL's choices for
// the ops on a GPU fabric, and the torus's multi-axis plans. The workloads a run
// expands (the whole one, its group 0, one op at a time) are all on this system:
// each op's GPU algorithm is chosen once (the size estimate, the quotient's checks,
// the build and the results each ask, and at scale a choice walks every GPU of
// every channel), and each torus plan is solved once.
class RunContext {
 public:
  // `w` gives the system (hardware, topology); it must outlive the context.
  explicit RunContext(const workloads::Workload& w);
  RunContext(const RunContext&) = delete;  // gpu_ points into system_
  RunContext& operator=(const RunContext&) = delete;
  const topology::System& system() const { return system_; }
  const topology::Torus& torus() const { return system_.grid(); }
  const topology::Fabric* fabric() const { return system_.fabric(); }  // null on a TPU
  GpuChoices* gpu() { return gpu_ ? &*gpu_ : nullptr; }                // null on a TPU
  collectives::PlanCache& plans() { return plans_; }

 private:
  topology::System system_;
  std::optional<GpuChoices> gpu_;
  collectives::PlanCache plans_;
};

}  // namespace meshsim::driver
