#include "driver/simulate.hpp"

#include <fmt/format.h>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/expand.hpp"
#include "sim/collectives/closed_form.hpp"
#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "traces/link_stats.hpp"

namespace meshsim::driver {


RunResult simulate(const workloads::Workload& w, const SimulateOptions& options) {
  const topology::Torus torus = w.make_torus();
  const Expanded ex = expand(w, torus);

  // When every chip may start each op: the completion of its last entry join.
  struct EntryWatch final : sim::ExecutionObserver {
    const Expanded& ex;
    std::vector<Tick> all_ready;
    explicit EntryWatch(const Expanded& e) : ex(e), all_ready(e.op_transfers.size()) {}
    void on_task(sim::TaskId, const sim::Task&, const sim::TaskTiming&) override {}
    void on_join(sim::TaskId id, const sim::Task& task, Tick at) override {
      const sim::OpId op = task.op();
      if (id >= ex.op_entry_begin[op] && id < ex.op_entry_begin[op] + ex.chips) all_ready[op] = max(all_ready[op], at);
    }
  } entries(ex);

  sim::Engine engine;
  sim::Executor executor(engine, ex.program, ex.resources);
  traces::LinkStats stats(ex.resources);
  executor.add_observer(stats);
  executor.add_observer(entries);
  executor.start();
  engine.run();
  if (const auto overflow = executor.overflowed_task()) {
    const auto& op = w.ops[ex.program.task(*overflow).op()];
    throw InputError(w.file, op.pointer,
                     fmt::format("simulated time would exceed the limit of {:.3g} s (2^62 ps); reduce the sizes",
                                 kMaxTick.seconds()));
  }

  const std::vector<sim::TaskId> stuck = executor.unfinished_tasks();
  if (!stuck.empty()) {
    const auto& op = w.ops[ex.program.task(stuck.front()).op()];
    throw Error(fmt::format("{}:{}: the schedule deadlocked: {} tasks never ran, the first in op '{}'", w.file,
                            op.pointer, stuck.size(), op.name));
  }

  RunResult r;
  r.makespan = executor.makespan();
  r.events = engine.events_executed();
  r.transfers = stats.total_transfers();
  r.link_bytes = stats.total_bytes();
  r.capacity_respected = stats.capacity_respected();
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    const sim::OpTiming& t = executor.op_timings()[i];
    OpResult o;
    o.name = op.name;
    o.kind = op.kind;
    for (int a : op.mesh_axes) o.mesh_axes.push_back(w.mesh[static_cast<std::size_t>(a)].name);
    for (int a : op.hw_axes) o.hw_axes.push_back(torus.axis_name(a));
    o.bytes = op.bytes;
    o.begin = entries.all_ready[i];
    o.first_start = t.begin;
    o.end = t.end;
    if (op.kind == OpKind::Matmul) {
      const kernels::Roofline roof = matmul_cost(op, w.hardware, w.file);
      o.compute_s = roof.compute_time.seconds();
      o.memory_s = roof.memory_time.seconds();
      o.closed_s = roof.time().seconds();
      o.flops = matmul_flops(op);
      o.bound = roof.compute_bound() ? "compute" : "memory";
    } else {
      const collectives::ClosedForm f = communication_closed_form(op, w, torus);
      o.latency_s = f.latency_s;
      o.bandwidth_s = f.bandwidth_s;
      o.closed_s = f.time_s();
      o.bound = f.latency_bound() ? "latency" : "bandwidth";
    }
    o.transfers = ex.op_transfers[i];
    o.link_bytes = ex.op_link_bytes[i];
    o.sharding_before = op.sharding_before;
    o.sharding_after = op.sharding_after;
    r.ops.push_back(std::move(o));
  }
  for (std::uint32_t id : stats.busiest(options.busiest_links))
    r.busiest_links.push_back({torus.link_name(id), stats.loads()[id].bytes, stats.loads()[id].busy});
  return r;
}

}  // namespace meshsim::driver
