#pragma once
// The critical path of each op: walking back from the op's last arrival through
// whatever made each task start when it did (a dependency that arrived last, an
// upstream hop it was forwarding, or the task ahead of it on a busy link), and
// where the time went along it: bytes on the wire, hop latency, waiting behind
// other ops' transfers (contention), and compute.
#include <cstdint>
#include <string>
#include <vector>

#include "base/tick.hpp"
#include "sim/executor.hpp"
#include "sim/program.hpp"

namespace meshsim::driver {

// Records every task's timing (an observer; attach only when asked for).
class TimingRecorder final : public sim::ExecutionObserver {
 public:
  explicit TimingRecorder(std::size_t tasks) : timings_(tasks) {}
  void on_task(sim::TaskId id, const sim::Task&, const sim::TaskTiming& t) override { timings_[id] = t; }
  void on_join(sim::TaskId id, const sim::Task&, Tick at) override { timings_[id] = {at, at, at, at}; }
  const std::vector<sim::TaskTiming>& timings() const { return timings_; }

 private:
  std::vector<sim::TaskTiming> timings_;
};

struct CriticalPath {
  std::size_t hops = 0;        // transfers on the path
  std::size_t computes = 0;    // compute tasks on the path
  Tick wire;                   // serialisation of the transfers' bytes
  Tick latency;                // hop latencies (arrival - end)
  Tick queued;                 // waiting behind other ops' tasks on a resource (contention)
  Tick compute;                // compute tasks
  Tick fixed;                  // fixed costs of the ops (delayed joins: a collective's launch)
  std::vector<std::string> steps;  // the first steps, from the op's start
};

// One per op. `describe(resource)` names a resource ("(0,1)+x", "compute (0,1)").
std::vector<CriticalPath> critical_paths(const sim::Program& program, const std::vector<sim::TaskTiming>& timings,
                                         const std::vector<std::string>& resource_names);

}  // namespace meshsim::driver
