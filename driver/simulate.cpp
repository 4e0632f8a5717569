#include "driver/simulate.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/expand.hpp"
#include "sim/collectives/closed_form.hpp"
#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "traces/link_stats.hpp"

namespace meshsim::driver {


namespace {

// How the expansion runs an op (sim/collectives/), in words for traces.
std::string algorithm_name(const workloads::Op& op, const topology::Torus& torus) {
  switch (op.kind) {
    case OpKind::Matmul:
      return "local matmul";
    case OpKind::Send:
      return fmt::format("dimension-order routes x{}", collectives::send_paths(torus, op.src, op.dst));
    case OpKind::AllToAll:
      return "routed pieces, cut-through";
    default:
      break;
  }
  int wrapped = 0;
  for (int a : op.hw_axes) wrapped += torus.axis(a).wraparound ? 1 : 0;
  const std::string shape = wrapped == static_cast<int>(op.hw_axes.size()) ? "bidirectional ring"
                            : wrapped == 0                                 ? "line"
                                                                           : "rings and lines";
  return op.hw_axes.size() > 1 ? fmt::format("{}s, {} parts in rotated axis order", shape, op.hw_axes.size()) : shape;
}

traces::TraceLayout trace_layout(const workloads::Workload& w, const topology::Torus& torus, const Expanded& ex) {
  traces::TraceLayout l;
  l.chips = torus.num_chips();
  for (topology::ChipId c = 0; c < l.chips; ++c) l.chip_names.push_back(torus.chip_name(c));
  l.track_names.push_back("compute");
  for (int a = 0; a < torus.num_axes(); ++a) {
    l.track_names.push_back(fmt::format("+{}", torus.axis_name(a)));
    l.track_names.push_back(fmt::format("-{}", torus.axis_name(a)));
  }
  for (std::size_t r = 0; r < ex.resources.size(); ++r) {
    if (r < torus.num_link_slots()) {
      const auto id = static_cast<topology::LinkId>(r);
      const topology::Link& link = torus.link_info(id);
      const bool exists = torus.link_exists(id);
      l.resource_chip.push_back(exists ? link.src : 0);
      l.resource_peer.push_back(exists ? link.dst : 0);
      l.resource_track.push_back(1 + 2 * link.axis + static_cast<int>(link.direction));
    } else {
      const auto chip = static_cast<std::uint32_t>(r - torus.num_link_slots());
      l.resource_chip.push_back(chip);
      l.resource_peer.push_back(chip);
      l.resource_track.push_back(0);
    }
  }
  for (const workloads::Op& op : w.ops) {
    l.op_names.push_back(op.name);
    l.op_kinds.emplace_back(kind_name(op.kind));
    l.op_algorithms.push_back(algorithm_name(op, torus));
  }
  l.forward_chunk_bytes = w.hardware.forward_chunk_bytes;
  l.op_entry_begin = ex.op_entry_begin;
  return l;
}

}  // namespace

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
  std::unique_ptr<TimingRecorder> timings;
  if (options.critical_path) {
    timings = std::make_unique<TimingRecorder>(ex.program.num_tasks());
    executor.add_observer(*timings);
  }
  std::unique_ptr<traces::TraceLayout> layout;
  std::unique_ptr<traces::TraceRecorder> recorder;
  if (!options.trace_path.empty()) {
    layout = std::make_unique<traces::TraceLayout>(trace_layout(w, torus, ex));
    recorder = std::make_unique<traces::TraceRecorder>(ex.program, *layout, options.trace);
    executor.add_observer(*recorder);
  }
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
  if (recorder) {
    std::FILE* f = std::fopen(options.trace_path.c_str(), "wb");
    if (!f) throw Error(options.trace_path + ": cannot write file");
    const bool proto = options.trace_path.ends_with(".pftrace") || options.trace_path.ends_with(".pb");
    const std::unique_ptr<traces::Sink> sink = proto ? traces::make_proto_sink(f) : traces::make_json_sink(f);
    const traces::TraceStats ts = traces::write_trace(*recorder, r.makespan, *sink);
    const bool failed = std::ferror(f) != 0;
    if (std::fclose(f) != 0 || failed) throw Error(options.trace_path + ": cannot write file");
    r.trace_events = ts.events;
    if (ts.truncated)
      r.trace_warning = fmt::format("the trace stopped at {} events (the cap); use --trace-detail steps or ops, "
                                    "--trace-chips or --trace-window for a complete one",
                                    ts.events);
  }
  if (timings) {
    std::vector<std::string> names;
    for (std::size_t res = 0; res < ex.resources.size(); ++res)
      names.push_back(res < torus.num_link_slots()
                          ? (torus.link_exists(static_cast<topology::LinkId>(res))
                                 ? torus.link_name(static_cast<topology::LinkId>(res))
                                 : std::string("-"))
                          : fmt::format("compute {}", torus.chip_name(static_cast<topology::ChipId>(res - torus.num_link_slots()))));
    r.critical_paths = critical_paths(ex.program, timings->timings(), names);
  }
  for (std::uint32_t id : stats.busiest(options.busiest_links))
    r.busiest_links.push_back({torus.link_name(id), stats.loads()[id].bytes, stats.loads()[id].busy});
  return r;
}

}  // namespace meshsim::driver
