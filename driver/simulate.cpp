#include "driver/simulate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "base/error.hpp"
#include "driver/bounds.hpp"
#include "driver/costs.hpp"
#include "driver/expand.hpp"
#include "driver/groups.hpp"
#include "driver/translations.hpp"
#include "sim/collectives/closed_form.hpp"
#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "sim/flow_graph.hpp"
#include "sim/reduce.hpp"
#include "sim/simgrid/simgrid_executor.hpp"
#include "traces/link_stats.hpp"

namespace meshsim::driver {


namespace {

// How the expansion runs an op (sim/collectives/), in words for traces.
std::string algorithm_name(const workloads::Op& op, const topology::Torus& torus, GpuChoices* gpu,
                           collectives::PlanCache& plans) {
  if (gpu) {
    if (op.kind == OpKind::Matmul) return "local matmul";
    if (op.kind == OpKind::Elementwise) return "local elementwise";
    if (op.kind == OpKind::Send) return "routed";
    const GpuChoice& c = (*gpu)(op);
    return fmt::format("{}/{}", collectives::gpu::algorithm_name(c.algorithm),
                       collectives::gpu::protocol_name(c.protocol));
  }
  switch (op.kind) {
    case OpKind::Matmul:
      return "local matmul";
    case OpKind::Elementwise:
      return "local elementwise";
    case OpKind::Send:
      return fmt::format("dimension-order routes x{}", collectives::send_paths(torus, op.send().src, op.send().dst));
    case OpKind::AllToAll:
      return "routed pieces, cut-through";
    default:
      break;
  }
  const workloads::CollectiveOp& co = op.collective();
  if (co.groups && co.factors.size() > 1) {
    std::vector<int> rings;
    for (int f : co.factors)
      if (f > 1) rings.push_back(f);
    if (rings.size() > 1)
      return fmt::format("a phase per factor ({}), rings of routed steps ({} groups)", fmt::join(rings, " x "),
                         co.groups->size());
  }
  if (co.groups)
    return fmt::format("rings of {} chips in group order, routed steps ({} groups)", co.groups->front().size(),
                       co.groups->size());
  int wrapped = 0;
  for (bool ring : plans.shape(torus, co.hw_axes).ring) wrapped += ring ? 1 : 0;
  const std::string shape = wrapped == static_cast<int>(co.hw_axes.size()) ? "bidirectional ring"
                            : wrapped == 0                                 ? "line"
                                                                           : "rings and lines";
  if (co.hw_axes.size() < 2) return shape;
  const collectives::detail::OrderPlan& plan = plans.plan(torus, co.hw_axes, co.bytes, torus_schedule(op));
  return fmt::format("{}s, {} parts {}", shape, plan.orders.size(),
                     plan.equal ? "in rotated axis order" : "balanced over axis orders");
}

// Names and owners of chips and resources, for a torus or a GPU fabric.
struct Names {
  std::vector<std::string> chips, resources, tracks;
  std::vector<std::uint32_t> resource_chip;
  std::vector<std::string> resource_src, resource_dst;  // a link's two ends, by name
  std::vector<int> resource_track;
};

Names names_of(const topology::Torus& torus, const Expanded& ex, GpuChoices* gpu) {
  Names n;
  if (gpu) {
    const topology::Fabric& f = gpu->fabric();
    for (topology::ChipId c = 0; c < torus.num_chips(); ++c) n.chips.push_back(f.gpu_name(c));
    n.tracks = {"compute", "nvlink up", "nvlink down", "nic up", "nic down"};
    for (topology::LinkId l = 0; l < f.num_links(); ++l) {
      const topology::FabricLink& link = f.link(l);
      n.resources.push_back(f.link_name(l));
      // A GPU's links run to or from a switch: its node's NVLink switch or its leaf.
      const bool gpu_link = link.kind == topology::FabricLinkKind::NvlinkUp ||
                            link.kind == topology::FabricLinkKind::NvlinkDown ||
                            link.kind == topology::FabricLinkKind::NicUp || link.kind == topology::FabricLinkKind::NicDown;
      n.resource_chip.push_back(gpu_link ? link.a : traces::kNoChip);
      const auto [from, to] = f.link_ends(l);
      n.resource_src.push_back(f.vertex_name(from));
      n.resource_dst.push_back(f.vertex_name(to));
      n.resource_track.push_back(gpu_link ? 1 + static_cast<int>(link.kind) : 0);
    }
  } else {
    for (topology::ChipId c = 0; c < torus.num_chips(); ++c) n.chips.push_back(torus.chip_name(c));
    n.tracks.push_back("compute");
    for (int a = 0; a < torus.num_axes(); ++a) {
      n.tracks.push_back(torus.switched(a) ? std::string("dcn out") : fmt::format("+{}", torus.axis_name(a)));
      n.tracks.push_back(torus.switched(a) ? std::string("dcn in") : fmt::format("-{}", torus.axis_name(a)));
    }
    for (topology::LinkId l = 0; l < torus.num_link_slots(); ++l) {
      const topology::Link& link = torus.link_info(l);
      const bool exists = torus.link_exists(l);
      const bool out = link.dcn && link.direction == topology::Direction::Plus;
      n.resources.push_back(exists ? torus.link_name(l) : std::string("-"));
      n.resource_chip.push_back(exists ? link.src : traces::kNoChip);
      // (a DCN link joins its chip and the data-center network)
      n.resource_src.push_back(!exists ? std::string() : link.dcn && !out ? std::string("dcn") : n.chips[link.src]);
      n.resource_dst.push_back(!exists ? std::string() : out ? std::string("dcn") : n.chips[link.dst]);
      n.resource_track.push_back(1 + 2 * link.axis + static_cast<int>(link.direction));
    }
  }
  for (std::size_t r = ex.links; r < ex.resources.size(); ++r) {
    const auto chip = static_cast<std::uint32_t>(r - ex.links);
    n.resources.push_back(fmt::format("compute {}", n.chips[chip]));
    n.resource_chip.push_back(chip);
    n.resource_src.push_back(n.chips[chip]);
    n.resource_dst.emplace_back();
    n.resource_track.push_back(0);
  }
  return n;
}

traces::TraceLayout trace_layout(const workloads::Workload& w, RunContext& run, const Expanded& ex, const Names& n) {
  const topology::Torus& torus = run.torus();
  traces::TraceLayout l;
  l.chips = torus.num_chips();
  l.chip_names = n.chips;
  // A training step's pipeline stages, in the chips' names.
  if (w.training && w.training->pp > 1)
    for (std::uint32_t c = 0; c < l.chips; ++c) l.chip_names[c] += fmt::format(" stage {}", w.training->chip_stage[c]);
  l.track_names = n.tracks;
  l.resource_chip = n.resource_chip;
  l.resource_src = n.resource_src;
  l.resource_dst = n.resource_dst;
  l.resource_track = n.resource_track;
  for (const workloads::Op& op : w.ops) {
    l.op_names.push_back(op.name);
    l.op_kinds.emplace_back(kind_name(op.kind));
    l.op_algorithms.push_back(algorithm_name(op, torus, run.gpu(), run.plans()));
  }
  l.forward_chunk_bytes = w.hardware.forward_chunk_bytes;
  l.op_ports = ex.op_ports;
  return l;
}

// The chip a task runs on (traces::kNoChip when none: a spine link, a collective's
// internal join) and a short description: "'op' hop (0,0)+x", "'op' entry on (0,1)".
struct TaskPlace {
  std::uint32_t chip = traces::kNoChip;
  std::string what;
};

TaskPlace place_of(sim::TaskId id, const sim::Program& program, const workloads::Workload& w, const Expanded& ex,
                   const Names& names) {
  const sim::Task& t = program.task(id);
  const sim::OpId op = t.op();
  const std::string& op_name = op < w.ops.size() ? w.ops[op].name : std::string("?");
  switch (t.kind()) {
    case sim::TaskKind::Transfer:
      return {names.resource_chip[t.resource], fmt::format("'{}' hop {}", op_name, names.resources[t.resource])};
    case sim::TaskKind::Compute:
      return {names.resource_chip[t.resource], fmt::format("'{}' {}", op_name, names.resources[t.resource])};
    case sim::TaskKind::Join:
      break;
  }
  if (op < ex.op_ports.size() && ex.op_ports[op].is_port(id)) {
    const sim::OpChips& ports = ex.op_ports[op];
    const std::uint32_t offset = id - ports.entry_begin;
    const std::uint32_t chip = ports.chip_at(offset % ports.count());
    return {chip, fmt::format("'{}' {} on {}", op_name, offset < ports.count() ? "entry" : "exit", names.chips[chip])};
  }
  return {traces::kNoChip, fmt::format("'{}' join", op_name)};
}

// "a, b, c and 4 more"
std::string first_few(const std::vector<std::string>& items, std::size_t shown, const char* separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) out += (i ? separator : "") + items[i];
  if (items.size() > shown) out += fmt::format(" and {} more", items.size() - shown);
  return out;
}

// The one-line report of a run that ended with `stuck` tasks never run: the ops
// and chips they belong to, and a dependency cycle among them (every stuck task
// that waits for a predecessor waits for a stuck one, so following predecessors
// must close a loop); tasks that were ready but never started are an executor bug.
[[noreturn]] void report_deadlock(const std::vector<sim::TaskId>& stuck, const sim::Program& program,
                                  const workloads::Workload& w, const Expanded& ex, const Names& names) {
  const std::size_t n = program.num_tasks();
  std::vector<char> is_stuck(n, 0);
  for (sim::TaskId t : stuck) is_stuck[t] = 1;
  // Per op (in program order): its stuck tasks' chips.
  std::vector<std::vector<char>> op_chips(program.num_ops());
  std::vector<std::size_t> op_count(program.num_ops(), 0);
  for (sim::TaskId t : stuck) {
    const sim::OpId op = program.task(t).op();
    ++op_count[op];
    const TaskPlace p = place_of(t, program, w, ex, names);
    if (p.chip == traces::kNoChip) continue;
    if (op_chips[op].empty()) op_chips[op].assign(ex.chips, 0);
    op_chips[op][p.chip] = 1;
  }
  std::vector<std::string> ops;
  for (std::size_t op = 0; op < op_count.size(); ++op) {
    if (op_count[op] == 0) continue;
    std::vector<std::string> chips;
    for (std::uint32_t c = 0; c < op_chips[op].size(); ++c)
      if (op_chips[op][c]) chips.push_back(names.chips[c]);
    ops.push_back(fmt::format("'{}' on {}", op < w.ops.size() ? w.ops[op].name : "?",
                              chips.empty() ? std::string("no known chip") : "chips " + first_few(chips, 4)));
  }
  // One stuck predecessor per stuck task.
  constexpr sim::TaskId kNone = ~sim::TaskId{0};
  std::vector<sim::TaskId> waits_for(n, kNone);
  for (sim::TaskId t : stuck)
    for (std::uint32_t e : program.successors(t))
      if (is_stuck[e >> 1] && waits_for[e >> 1] == kNone) waits_for[e >> 1] = t;
  std::size_t never_started = 0;
  sim::TaskId first_ready = kNone;
  for (sim::TaskId t : stuck)
    if (waits_for[t] == kNone && never_started++ == 0) first_ready = t;
  std::string cause;
  const auto in_cycle = std::find_if(stuck.begin(), stuck.end(), [&](sim::TaskId t) { return waits_for[t] != kNone; });
  if (in_cycle != stuck.end()) {
    // Walk back until a task repeats: the walk from there is a cycle.
    std::vector<char> seen(n, 0);
    sim::TaskId t = *in_cycle;
    while (!seen[t]) seen[t] = 1, t = waits_for[t];
    std::vector<sim::TaskId> cycle{t};
    for (sim::TaskId u = waits_for[t]; u != t; u = waits_for[u]) cycle.push_back(u);
    std::reverse(cycle.begin(), cycle.end());  // in dependency order: each waits for the one before
    std::vector<std::string> steps;
    for (std::size_t i = 0; i < cycle.size() && i < 6; ++i) steps.push_back(place_of(cycle[i], program, w, ex, names).what);
    if (cycle.size() > 6) steps.push_back(fmt::format("... ({} tasks in all)", cycle.size()));
    steps.push_back(place_of(cycle.front(), program, w, ex, names).what);
    std::string chain;
    for (const std::string& s : steps) chain += (chain.empty() ? "" : " -> ") + s;
    cause = "; dependency cycle: " + chain;
  }
  if (never_started > 0)
    cause += fmt::format("; {} tasks were ready but never started (an executor bug), the first {}", never_started,
                         place_of(first_ready, program, w, ex, names).what);
  const sim::OpId first_op = program.task(stuck.front()).op();
  const std::string pointer = first_op < w.ops.size() ? w.ops[first_op].pointer : std::string();
  throw Error(fmt::format("{}:{}: the schedule deadlocked: {} tasks never ran, in {}: {}{}", w.file, pointer,
                          stuck.size(), ops.size() == 1 ? "one op" : fmt::format("{} ops", ops.size()),
                          first_few(ops, 3, " and "), cause));
}

// A send runs on every chip of its op (or its `chips`): the others only pass
// its dependencies on (an entry and an exit join). Its timing is that of its
// own chips (Expanded::send_chips): from the first of their entries to the
// last of their exits, which wait for its bytes to arrive (the sender's too).
class PortWatch {
 public:
  explicit PortWatch(const Expanded& ex) : ex_(ex), own_(ex.op_ports.size()) {}
  // Port `full` (an id in ex's program) of op `op` completed at `at`.
  void port(sim::OpId op, sim::TaskId full, Tick at) {
    if (ex_.send_chips[op].empty()) return;
    const sim::OpChips& ports = ex_.op_ports[op];
    const std::uint32_t k = full - ports.entry_begin, n = ports.count();
    if (!ex_.starts_op(op, k < n ? k : k - n)) return;
    sim::OpTiming& t = own_[op];
    if (k < n)
      t.begin = min(t.begin, at);
    else
      t.end = max(t.end, at);
  }
  // What `part` saw too (a split run's other part).
  void merge(const PortWatch& part) {
    for (std::size_t i = 0; i < own_.size(); ++i) {
      own_[i].begin = min(own_[i].begin, part.own_[i].begin);
      own_[i].end = max(own_[i].end, part.own_[i].end);
    }
  }
  // `all` (every op's tasks and joins) with each send's own span where it ran.
  std::vector<sim::OpTiming> timings(std::vector<sim::OpTiming> all) const {
    for (std::size_t i = 0; i < all.size(); ++i)
      if (own_[i].ran()) all[i] = own_[i];
    return all;
  }

 private:
  const Expanded& ex_;
  std::vector<sim::OpTiming> own_;
};

// The results of every op from its timing on an engine: when all its chips could
// start it (`all_ready`), its first start and last arrival (`timings`).
std::vector<OpResult> op_results(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                                 const std::vector<sim::OpTiming>& timings, const std::vector<Tick>& all_ready) {
  const topology::Torus& torus = run.torus();
  GpuChoices* gpu = run.gpu();
  std::vector<OpResult> out;
  out.reserve(w.ops.size());
  // per (kind, axes, bytes, protocol, explicit groups)
  std::map<std::tuple<int, std::vector<int>, std::uint64_t, int, const void*>, LowerBound> bounds;
  std::map<std::tuple<int, std::uint64_t, const void*>, collectives::ClosedForm> group_forms;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    const sim::OpTiming& t = timings[i];
    OpResult o;
    o.name = op.name;
    o.kind = op.kind;
    if (is_collective(op.kind)) {
      const workloads::CollectiveOp& co = op.collective();
      for (int a : co.mesh_axes) o.mesh_axes.push_back(w.mesh[static_cast<std::size_t>(a)].name);
      for (int a : co.hw_axes) o.hw_axes.push_back(run.system().axis_name(a));
      o.groups = co.groups;
    }
    o.bytes = op.comm_bytes();
    o.begin = all_ready[i];
    o.first_start = t.begin;
    o.end = t.end;
    if (is_local(op.kind)) {
      const kernels::Roofline roof = local_cost(op, w.hardware, w.file);
      o.compute_s = roof.compute_time.seconds();
      o.memory_s = roof.memory_time.seconds();
      o.closed_s = roof.time().seconds();
      o.flops = op.kind == OpKind::Matmul ? matmul_flops(op) : 0;
      o.bound = op.kind == OpKind::Matmul && roof.compute_bound() ? "compute" : "memory";
    } else {
      // Over explicit groups the closed form counts the schedule's links: once
      // per kind, bytes and groups.
      collectives::ClosedForm f;
      if (gpu) {
        f = (*gpu)(op).closed;
      } else if (op.explicit_groups() && op.kind != OpKind::Send) {
        const auto key =
            std::tuple{static_cast<int>(op.kind), op.comm_bytes(), static_cast<const void*>(op.explicit_groups())};
        auto it = group_forms.find(key);
        if (it == group_forms.end()) it = group_forms.emplace(key, torus_closed_form(op, w, torus)).first;
        f = it->second;
      } else {
        f = torus_closed_form(op, w, torus);
      }
      // A collective's bound depends only on its kind, axes, bytes and protocol:
      // ops alike (a training step's layers) share one.
      const collectives::gpu::Protocol protocol =
          gpu && op.kind != OpKind::Send ? (*gpu)(op).protocol : collectives::gpu::Protocol::Simple;
      const auto bound_of = [&] { return lower_bound(op, w, torus, gpu ? &gpu->fabric() : nullptr, protocol); };
      LowerBound lb;
      if (is_collective(op.kind)) {
        const auto key = std::tuple{static_cast<int>(op.kind), op.comm_axes(), op.comm_bytes(),
                                    static_cast<int>(protocol), static_cast<const void*>(op.explicit_groups())};
        auto it = bounds.find(key);
        if (it == bounds.end()) it = bounds.emplace(key, bound_of()).first;
        lb = it->second;
      } else {
        lb = bound_of();
      }
      // The fixed cost precedes every chip's first transfer: it adds to the closed
      // form's latency term and to the bound.
      const double fixed_s = op_fixed_cost(op, w, run.system(), gpu ? &*gpu : nullptr).seconds();
      o.bound_s = lb.time_s() + fixed_s;
      o.bound_term = lb.binding();
      if (gpu && op.kind != OpKind::Send) {
        o.algorithm = collectives::gpu::algorithm_name((*gpu)(op).algorithm);
        o.protocol = collectives::gpu::protocol_name(protocol);
      }
      if (!gpu && is_collective(op.kind))
        o.algorithm = op.collective().algorithm;  // a torus schedule, when the op names one
      o.latency_s = f.latency_s + fixed_s;
      o.bandwidth_s = f.bandwidth_s;
      o.closed_s = f.time_s() + fixed_s;
      // The regime of the terms as reported: the fixed cost is latency.
      o.bound = o.latency_s > o.bandwidth_s ? "latency" : "bandwidth";
    }
    if (!is_local(op.kind) && o.time() > kZeroTick) {
      double n = 1;
      for (int a : op.comm_axes()) n *= torus.axis(a).size;
      if (op.explicit_groups()) n = static_cast<double>(op.explicit_groups()->front().size());
      const double size =
          op.kind == OpKind::AllToAll ? static_cast<double>(op.comm_bytes()) / n : static_cast<double>(op.comm_bytes());
      o.algbw_bytes_per_s = size / o.time().seconds();
      const double factor = op.kind == OpKind::AllReduce ? 2 * (n - 1) / n
                            : op.kind == OpKind::Send    ? 1.0
                                                         : (n - 1) / n;
      o.busbw_bytes_per_s = o.algbw_bytes_per_s * factor;
    }
    o.transfers = ex.op_transfers[i];
    o.link_bytes = ex.op_link_bytes[i];
    o.sharding_before = op.sharding_before;
    o.sharding_after = op.sharding_after;
    out.push_back(std::move(o));
  }
  return out;
}

// The same program as flows on SimGrid (sim/simgrid/).
RunResult simulate_simgrid(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                           const std::vector<std::string>& config) {
  // A SimGrid link has one latency, whichever flow crosses it: Simple's.
  const std::vector<std::uint8_t> classes = op_classes(w, run);
  for (std::size_t i = 0; i < classes.size(); ++i)
    if (classes[i] != 0) {
      const workloads::Op& op = w.ops[i];
      throw InputError(
          w.file, !is_collective(op.kind) || op.collective().protocol.empty() ? op.pointer : op.pointer + "/protocol",
          fmt::format("--engine simgrid gives every link one latency, the Simple protocol's, and NCCL's model runs "
                      "this op with {} (give the op \"protocol\": \"simple\" to run it on SimGrid)",
                      collectives::gpu::protocol_name(static_cast<collectives::gpu::Protocol>(classes[i]))));
    }
  const sim::FlowGraph graph(ex.program);
  std::vector<sim::FlowResource> resources;
  for (std::size_t i = 0; i < ex.resources.size(); ++i)
    resources.push_back({ex.resources[i].bandwidth_bytes_per_s, ex.resources[i].latency, ex.resource_ends[i].first,
                         ex.resource_ends[i].second});
  const sim::SimgridRun sg = sim::run_on_simgrid(graph, resources, ex.nodes, config);
  if (sg.unfinished > 0) {
    const auto& op = w.ops[graph.node(sg.first_unfinished).op];
    throw Error(fmt::format("{}:{}: the schedule deadlocked on SimGrid: {} tasks and flows never ran, the first in "
                            "op '{}'",
                            w.file, op.pointer, sg.unfinished, op.name));
  }
  if (sg.makespan > kMaxTick)
    throw InputError(w.file, w.ops.empty() ? "" : w.ops.front().pointer,
                     fmt::format("simulated time would exceed the limit of {:.3g} s (2^62 ps); reduce the sizes",
                                 kMaxTick.seconds()));
  std::vector<sim::OpTiming> timings(w.ops.size());
  std::vector<Tick> all_ready(w.ops.size());
  PortWatch sends(ex);
  for (sim::TaskId t = 0; t < ex.program.num_tasks(); ++t) {
    const sim::OpId op = ex.program.task(t).op();
    sim::OpTiming& o = timings[op];
    o.begin = min(o.begin, sg.tasks[t].start);
    o.end = max(o.end, sg.tasks[t].done);
    if (ex.op_ports[op].is_port(t)) sends.port(op, t, sg.tasks[t].done);
  }
  timings = sends.timings(timings);
  for (std::size_t i = 0; i < w.ops.size(); ++i)
    for (std::uint32_t c = 0; c < ex.op_ports[i].count(); ++c) {
      if (!ex.starts_op(static_cast<sim::OpId>(i), c)) continue;
      // Ready when its dependencies were done: before the entry's delay (the op's fixed cost).
      const sim::TaskId entry = ex.op_ports[i].entry_begin + c;
      const Tick delay = Tick::from_ps(static_cast<std::int64_t>(ex.program.task(entry).amount));
      all_ready[i] = max(all_ready[i], sg.tasks[entry].done - delay);
    }
  RunResult r;
  r.engine = "simgrid";
  r.makespan = sg.makespan;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    r.transfers += ex.op_transfers[i];
    r.link_bytes += ex.op_link_bytes[i];
  }
  r.flows = sg.flows;
  r.hosts = sg.hosts;
  r.routes = sg.routes;
  r.workers = sg.workers;
  r.engine_seconds = sg.engine_seconds;
  r.ops = op_results(w, run, ex, timings, all_ready);
  return r;
}

}  // namespace

namespace {

// Whether the program may hold repeated independent components, cheaply: not
// when a collective runs on every chip as one group, which joins every chip's
// tasks into one component, nor in a training step, whose data-parallel
// collectives and per-chip chains of ops join everything (looking would cost a
// pass over the whole program, and 24 bytes a task, for nothing). Only a
// shortcut: a component found or not, results are exact.
bool may_repeat(const workloads::Workload& w, const topology::Torus& torus) {
  if (w.training) return false;
  for (const workloads::Op& op : w.ops) {
    if (!is_collective(op.kind) || op.chips) continue;
    const std::vector<int>& axes = op.collective().hw_axes;
    std::size_t spanned = 0, wide = 0;
    for (int a = 0; a < torus.num_axes(); ++a) {
      if (torus.axis(a).size < 2) continue;
      ++wide;
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) ++spanned;
    }
    if (spanned == wide) return false;
  }
  return true;
}

std::optional<RunResult> run_native(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                                    const SimulateOptions& options, const sim::Reduced::Class* translated,
                                    const TranslationQuotient* quotient = nullptr);

}  // namespace

namespace {

// Whether a run may simulate less than the whole program: not on SimGrid, nor
// with a trace or critical paths, which want every task's own timing.
bool may_reduce_run(const SimulateOptions& options) {
  return options.reduce && options.engine == EngineKind::Native && options.trace_path.empty() && !options.critical_path;
}

}  // namespace

namespace {

// One chip's share of the quotient by the torus' translations (beside its
// largest op, built whole), when translations leave the workload's ops in place.
std::optional<RunSize> translation_size(const workloads::Workload& w, RunContext& run) {
  const std::vector<Shift> axes = translated_axes(w, run);
  const std::uint64_t n = translation_count(axes, run.torus());
  if (n <= 1) return std::nullopt;
  const RunSize full = estimate_run(w, run);
  bool built = true;  // the largest op, built whole to check its quotient
  bool mirrored = false;
  if (run.gpu() && !w.ops.empty()) {
    built = !turns_unbuilt(w.ops[full.biggest_op], *run.gpu(), axes);
    mirrored = mirrors_unbuilt(w, run, axes);
  }
  RunSize out = translated_size(full, mirrored ? 2 * n : n, built);
  out.mirrored = mirrored;
  return out;
}

RunSize group_size(const workloads::Workload& first, RunContext& run, const TranslatedGroups& groups) {
  RunSize size = estimate_run(first, run);
  size.groups = groups.copies();
  return size;
}

}  // namespace

RunSize run_size(const workloads::Workload& w, RunContext& run, const SimulateOptions& options) {
  if (may_reduce_run(options)) {
    if (const std::optional<TranslatedGroups> groups = translated_groups(w, run.system()))
      return group_size(first_group(w, *groups), run, *groups);
    if (std::optional<RunSize> size = translation_size(w, run)) return *size;
  }
  return estimate_run(w, run);
}

namespace {

// For a run that an option keeps whole and that is too big: which option, and
// what the exact reductions would simulate without it, when that fits (where
// nothing reduces, that is the whole run again, which does not).
std::string reduction_hint(const workloads::Workload& w, RunContext& run, const SimulateOptions& options) {
  if (may_reduce_run(options)) return {};
  const char* why = options.engine != EngineKind::Native ? "SimGrid (--engine) runs every task"
                    : !options.reduce                    ? "--no-reduce simulates every task"
                    : options.critical_path              ? "--critical-path simulates every task"
                                                         : "--trace simulates every task";
  const RunSize size = run_size(w, run, SimulateOptions{});
  if (!within_limits(size, options.limits)) return {};
  return fmt::format("{} (without it, the exact reductions would simulate about {} transfers)", why,
                     size.transfers);
}

}  // namespace

RunPlan plan_run(const workloads::Workload& w, RunContext& run, const SimulateOptions& options) {
  RunPlan plan;
  if (may_reduce_run(options)) {
    // Identical independent groups known from the workload (driver/groups.hpp):
    // group 0 alone is built and run.
    if (std::optional<TranslatedGroups> groups = translated_groups(w, run.system())) {
      plan.kind = RunPlan::Kind::Group;
      plan.first = first_group(w, *groups);
      plan.size = group_size(*plan.first, run, *groups);
      plan.groups = std::move(groups);
      check_limits(*plan.first, plan.size, options.limits);
      return plan;
    }
    // A program that the torus' translations may leave unchanged: its quotient,
    // built op by op without the whole program (driver/translations.hpp).
    if (const std::optional<RunSize> size = translation_size(w, run)) {
      check_limits(w, *size, options.limits);
      if ((plan.quotient = quotient_by_ops(w, run))) {
        plan.kind = RunPlan::Kind::Quotient;
        plan.size = *size;
        return plan;
      }
      // Not invariant: the whole program.
      plan.size = estimate_run(w, run);
      check_limits(w, plan.size, options.limits);
      return plan;
    }
  }
  plan.size = estimate_run(w, run);
  if (!within_limits(plan.size, options.limits))
    check_limits(w, plan.size, options.limits, reduction_hint(w, run, options));
  return plan;
}

RunResult simulate(const workloads::Workload& w, const SimulateOptions& options) {
  RunContext run(w);
  return simulate(w, run, options);
}

RunResult simulate(const workloads::Workload& w, RunContext& run, const SimulateOptions& options) {
  const RunPlan plan = plan_run(w, run, options);
  switch (plan.kind) {
    case RunPlan::Kind::Group: {
      const Expanded ex = expand(*plan.first, run);
      const sim::Reduced::Class translated = translated_class(*plan.groups, run.system(), ex);
      return *run_native(w, run, ex, options, &translated);
    }
    case RunPlan::Kind::Quotient:
      if (std::optional<RunResult> r =
              run_native(w, run, plan.quotient->ex, options, &plan.quotient->quotient.translated, &plan.quotient->quotient))
        return std::move(*r);
      // A tie the quotient cannot stand for: the whole program.
      check_limits(w, estimate_run(w, run), options.limits);
      break;
    case RunPlan::Kind::Whole:
      break;
  }
  const Expanded ex = expand(w, run);
  return *run_native(w, run, ex, options, nullptr);
}

RunResult simulate_expanded(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                            const SimulateOptions& options) {
  return *run_native(w, run, ex, options, nullptr);
}

namespace {

// When every chip may start each op: the completion of its last entry join;
// and a send's span on its own chips (PortWatch).
struct EntryWatch final : sim::ExecutionObserver {
  const Expanded& ex;
  const std::vector<sim::TaskId>* subset;
  std::vector<Tick> all_ready;
  PortWatch sends;
  EntryWatch(const Expanded& e, const std::vector<sim::TaskId>* s)
      : ex(e), subset(s), all_ready(e.op_transfers.size()), sends(e) {}
  void on_task(sim::TaskId, const sim::Task&, const sim::TaskTiming&) override {}
  void on_join(sim::TaskId id, const sim::Task& task, Tick at) override {
    const sim::OpId op = task.op();
    // Ready when its dependencies were done: before the entry's delay (the op's fixed cost).
    const sim::TaskId full = subset ? (*subset)[id] : id;
    if (!ex.op_ports[op].is_port(full)) return;
    sends.port(op, full, at);
    if (ex.op_ports[op].is_entry(full) && ex.starts_op(op, full - ex.op_ports[op].entry_begin))
      all_ready[op] = max(all_ready[op], at - Tick::from_ps(static_cast<std::int64_t>(task.amount)));
  }
  std::unique_ptr<sim::ExecutionObserver> split() const override { return std::make_unique<EntryWatch>(ex, subset); }
  void merge(const sim::ExecutionObserver& part) override {
    const auto& other = dynamic_cast<const EntryWatch&>(part);
    for (std::size_t i = 0; i < all_ready.size(); ++i) all_ready[i] = max(all_ready[i], other.all_ready[i]);
    sends.merge(other.sends);
  }
};

// What a native run executes of `ex`: with `keys`, a program the translations
// leave unchanged (its ties broken by keys its translates share); `reduced`, its
// identical independent components once each; `compact`, group 0 of translated
// groups on its own resources; none of them: `ex` itself (or the quotient).
struct RunProgram {
  BigVector<std::uint32_t> keys;
  std::optional<sim::Reduced> reduced;
  std::optional<sim::Program> compact;
  std::vector<sim::Resource> compact_resources;
};

RunProgram program_to_run(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                          const SimulateOptions& options, const sim::Reduced::Class* translated,
                          const TranslationQuotient* quotient) {
  // Exact reductions (sim/reduce.hpp): not with a trace or critical paths, which
  // want every task's own timing.
  const bool may_reduce = !translated && options.reduce && options.trace_path.empty() && !options.critical_path;
  // A program that the translations leave unchanged (and that is not split
  // into translated groups, which run group 0 alone) breaks ties between tasks
  // ready at once on one link by keys its translates share, in every run,
  // reduced or not (driver/translations.hpp); its reduced run is the quotient,
  // which simulate() builds, and whose ops were checked as this program is.
  // Else identical independent components.
  std::optional<Translations> translations;
  if (!translated) {
    const std::vector<Shift> axes = translated_axes(w, run);
    if (!axes.empty() && !translated_groups(w, run.system()))
      translations = Translations::find(run.torus(), ex, axes, run.fabric());
  }
  RunProgram out;
  if (translations && translations->verify()) out.keys = translations->keys();
  translations.reset();  // its index of every task: memory the run needs
  if (may_reduce && out.keys.empty() && may_repeat(w, run.torus())) out.reduced = sim::reduce(ex.program, ex.resources);
  // Translated groups: group 0 runs on its own resources alone, numbered in the
  // class's order (the system's other links and units would only cost memory).
  if (translated && !quotient) {
    std::vector<std::uint32_t> to(ex.resources.size(), ~std::uint32_t{0});
    for (std::size_t k = 0; k < translated->resources.size(); ++k) {
      to[translated->resources[k]] = static_cast<std::uint32_t>(k);
      out.compact_resources.push_back(ex.resources[translated->resources[k]]);
    }
    out.compact = ex.program.renamed(to);
  }
  return out;
}

// Writes the recorded trace to `path` (.json: Chrome JSON; .pftrace or .pb:
// Perfetto protobuf) and notes its events, and a warning when it was cut, in `r`.
void write_trace_file(const traces::TraceRecorder& recorder, const std::string& path, RunResult& r) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(path + ": cannot write file");
  const bool proto = path.ends_with(".pftrace") || path.ends_with(".pb");
  const std::unique_ptr<traces::Sink> sink = proto ? traces::make_proto_sink(f) : traces::make_json_sink(f);
  const traces::TraceStats ts = traces::write_trace(recorder, r.makespan, *sink);
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) throw Error(path + ": cannot write file");
  r.trace_events = ts.events;
  if (ts.truncated)
    r.trace_warning = fmt::format("the trace stopped at {} events (the cap); use --trace-detail steps or ops, "
                                  "--trace-chips or --trace-window for a complete one",
                                  ts.events);
}

// Every other member of a class ran exactly as its representative: its
// resources carried the same loads (copied into `stats`), and as many of its
// tasks were woken; the events of the whole run. `renumbered`: the executor
// numbered a class's resource k as k (a compact group 0 or a quotient), else as
// the class's own id.
std::uint64_t copy_classes(std::span<const sim::Reduced::Class> classes, const sim::Executor& executor,
                           bool renumbered, traces::LinkStats& stats) {
  std::uint64_t events = 0, simulated_events = 0;
  for (const sim::Reduced::Class& c : classes) {
    std::uint64_t own = 0;
    for (std::size_t k = 0; k < c.resources.size(); ++k)
      own += executor.woken_on(renumbered ? static_cast<std::uint32_t>(k) : c.resources[k]);
    simulated_events += own;
    events += c.copies * own;
    for (const std::vector<std::uint32_t>& replica : c.replicas)
      for (std::size_t k = 0; k < replica.size(); ++k) stats.copy_load(c.resources[k], replica[k]);
  }
  MESHSIM_ASSERT(simulated_events == executor.tasks_woken(), "events outside the reduced program's resources");
  return events;
}

// Runs `ex` (the whole of `w`, or with `translated` group 0 of its identical
// groups, whose class gives every other group's resources), or with `quotient`
// the quotient by the torus' translations (`ex` its layout, `translated` its
// class): nothing then when its run cannot stand for the full one. What it
// executes: program_to_run; its observers: the op entries, the links' loads and,
// as asked, the tasks' timings and the trace; the classes it did not run:
// copy_classes.
std::optional<RunResult> run_native(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                                    const SimulateOptions& options, const sim::Reduced::Class* translated,
                                    const TranslationQuotient* quotient) {
  const topology::Torus& torus = run.torus();
  GpuChoices* gpu = run.gpu();
  if (!options.trace_path.empty())
    for (std::uint32_t chip : options.trace.chips)
      if (chip >= torus.num_chips())
        throw Error(fmt::format("--trace-chips: chip {} is out of range: {} has chips 0..{}", chip, w.file,
                                torus.num_chips() - 1));
  if (options.engine == EngineKind::SimGrid) return simulate_simgrid(w, run, ex, options.simgrid_config);
  const RunProgram chosen = program_to_run(w, run, ex, options, translated, quotient);
  const bool keyed = !chosen.keys.empty();
  const std::optional<sim::Reduced>& reduced = chosen.reduced;
  const std::optional<sim::Program>& compact = chosen.compact;
  const std::vector<sim::Resource>& compact_resources = chosen.compact_resources;
  const sim::Program& program = quotient  ? quotient->program
                                : reduced ? reduced->program
                                : compact ? *compact
                                          : ex.program;
  const std::span<const sim::Resource> resources = quotient  ? std::span<const sim::Resource>(quotient->resources)
                                                   : compact ? std::span<const sim::Resource>(compact_resources)
                                                             : std::span<const sim::Resource>(ex.resources);
  // A task's id in the full program (a reduced program lists a subset; a
  // quotient's layout numbers its op ports as the quotient does).
  const std::vector<sim::TaskId>* subset = reduced ? &reduced->full_id : nullptr;

  EntryWatch entries(ex, subset);

  sim::Engine engine;
  const std::vector<std::uint8_t> op_class = op_classes(w, run);  // NCCL's protocols
  sim::Executor executor(engine, program, resources);
  if (!op_class.empty()) executor.classify_ops(op_class);
  traces::LinkStats observed(resources);
  executor.add_observer(observed);
  executor.add_observer(entries);
  // Every chip's and resource's name, made when something is to be named (a
  // trace, a deadlock, critical paths, the busiest links): a string per link
  // direction is a cost at scale.
  std::optional<Names> named;
  const auto names = [&]() -> const Names& {
    if (!named) named = names_of(torus, ex, gpu);
    return *named;
  };
  std::unique_ptr<TimingRecorder> timings;
  if (options.critical_path) {
    timings = std::make_unique<TimingRecorder>(ex.program.num_tasks());
    executor.add_observer(*timings);
  }
  std::unique_ptr<traces::TraceLayout> layout;
  std::unique_ptr<traces::TraceRecorder> recorder;
  if (!options.trace_path.empty()) {
    layout = std::make_unique<traces::TraceLayout>(trace_layout(w, run, ex, names()));
    recorder = std::make_unique<traces::TraceRecorder>(ex.program, *layout, options.trace);
    executor.add_observer(*recorder);
  }
  if (options.progress) {
    const double tasks = static_cast<double>(std::max<std::size_t>(program.num_tasks(), 1));
    engine.on_progress(std::uint64_t{1} << 16, [&, tasks](Tick now) {  // tasks: by value, it leaves scope
      options.progress(now, engine.events_executed(), static_cast<double>(executor.tasks_completed()) / tasks);
    });
  }
  if (quotient) {  // keys in the order of the full ids of the translates' representative
    if (quotient->keys.empty())
      executor.order_ties_by_ids();
    else
      executor.order_ties_by(quotient->keys);
    executor.watch_zero_lag();
  } else if (keyed) {
    executor.order_ties_by(chosen.keys);
  }
  // Two threads for a large run on a machine that has them, when the windows
  // hold enough tasks; named, whenever the program splits (the results are the
  // same: sim::Executor::run).
  const unsigned threads =
      options.threads != 0 ? options.threads
      : program.num_tasks() >= (std::size_t{1} << 20) ? std::clamp(std::thread::hardware_concurrency(), 1u, 2u)
                                                       : 1u;
  executor.run(threads, options.threads == 2 ? 0.0 : sim::Executor::kMinTasksPerWindow);
  // A quotient's run stands for the full one only when every task became ready
  // after it was activated (its automorphism was checked as it was built); so
  // far, it does, up to a time past the limit, which the full run reaches too
  // (reported below: the full program may be far too big to build). A
  // deadlock, a bug, is reported from the full program.
  const bool broken = executor.overflowed_task() || !executor.finished();
  // On one thread: the first task past the limit, the whole deadlock, or a
  // schedule that depends on the order of simultaneous events (sim::Executor::run).
  if (executor.threads_used() > 1 && (broken || (!quotient && executor.first_zero_lag()))) {
    SimulateOptions one = options;
    one.threads = 1;
    return run_native(w, run, ex, one, translated, quotient);
  }
  if (quotient && (executor.first_zero_lag() || (broken && !executor.overflowed_task()))) return std::nullopt;
  if (reduced && broken) {
    // Errors are reported from the full program, task by task.
    SimulateOptions full = options;
    full.reduce = false;
    return run_native(w, run, ex, full, nullptr);
  }
  if (const auto overflow = executor.overflowed_task()) {
    const auto& op = w.ops[program.task(*overflow).op()];
    throw InputError(w.file, op.pointer,
                     fmt::format("simulated time would exceed the limit of {:.3g} s (2^62 ps); reduce the sizes",
                                 kMaxTick.seconds()));
  }

  if (!executor.finished()) report_deadlock(executor.unfinished_tasks(), ex.program, w, ex, names());

  RunResult r;
  r.makespan = executor.makespan();
  r.threads = executor.threads_used();
  r.windows = executor.windows();
  r.events = executor.tasks_woken();
  r.simulated_transfers = observed.total_transfers();
  // The loads on the system's own resource ids.
  std::optional<traces::LinkStats> placed;
  if (compact || quotient) {
    placed.emplace(ex.resources);
    placed->place(observed, translated->resources);
  }
  traces::LinkStats& stats = placed ? *placed : observed;
  // The classes whose other members were not run: the reduction's, or the
  // translated groups' one (an error above named group 0's chips, which are
  // real chips, and the op, which every group runs alike).
  const std::span<const sim::Reduced::Class> classes =
      reduced ? std::span<const sim::Reduced::Class>(reduced->classes)
              : translated ? std::span<const sim::Reduced::Class>(translated, 1) : std::span<const sim::Reduced::Class>();
  if (!classes.empty()) {
    r.events = copy_classes(classes, executor, compact || quotient, stats);
    r.reduced_classes = classes.size();
    if (quotient) r.translations = quotient->translated.copies, r.mirrored = quotient->mirrored;
  }
  r.transfers = stats.total_transfers();
  r.link_bytes = stats.total_bytes();
  r.capacity_respected = stats.capacity_respected();
  r.ops = op_results(w, run, ex, entries.sends.timings(executor.op_timings()), entries.all_ready);
  if (translated && !quotient)  // every group ran each op's transfers (a quotient's ex counts the whole program's)
    for (OpResult& o : r.ops) o.transfers *= translated->copies, o.link_bytes *= translated->copies;
  if (recorder) write_trace_file(*recorder, options.trace_path, r);
  if (timings) r.critical_paths = critical_paths(ex.program, timings->timings(), names().resources);
  for (std::uint32_t id : stats.busiest(options.busiest_links))
    r.busiest_links.push_back({names().resources[id], stats.loads()[id].bytes, stats.loads()[id].busy});
  return r;
}

}  // namespace

}  // namespace meshsim::driver
