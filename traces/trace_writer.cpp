// From a recording to trace events. Per chip (a process, sorted by chip id):
//   "ops" lanes      one slice per op, from when the chip entered it to when it left;
//   "compute"        its local matmuls;
//   "steps" lanes    (steps, hops) one slice per collective step: the span of the
//                    chip's outgoing transfers of that step, and an instant at its start;
//   "link +x" ...    (hops) one slice per hop transfer with op, step, bytes, src, dst;
//   flows            (hops) along forwarding chains, and from a last hop into the op
//                    of the chip that receives it (an instant "data in" marks the arrival);
//   counters         the busy fraction of every outgoing link in 64 time bins.
// Overlapping slices on one track are spread over lanes, so every track nests.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "traces/trace.hpp"

namespace meshsim::traces {

namespace {

constexpr std::uint32_t kComputeTid = 1;
constexpr std::uint32_t kLinkTid = 100;   // direction d, lane l: 100 + 10 d + l (links never overlap: lane 0)
constexpr std::uint32_t kOpsTid = 1000;   // lane l: 1000 + l
constexpr std::uint32_t kStepsTid = 2000;  // lane l: 2000 + l
constexpr int kCounterBins = 64;

class Lanes {
 public:
  std::uint32_t place(Tick start, Tick end) {
    for (std::size_t i = 0; i < ends_.size(); ++i)
      if (ends_[i] <= start) {
        ends_[i] = end;
        return static_cast<std::uint32_t>(i);
      }
    ends_.push_back(end);
    return static_cast<std::uint32_t>(ends_.size() - 1);
  }

 private:
  std::vector<Tick> ends_;
};

class Writer {
 public:
  Writer(const TraceRecorder& r, Tick makespan, Sink& sink)
      : r_(r), l_(r.layout()), p_(r.program()), makespan_(makespan), sink_(sink) {}

  TraceStats run() {
    plan_ops();
    plan_compute();
    if (r_.options().detail != Detail::Ops) plan_steps();
    if (r_.options().detail == Detail::Hops) plan_hops();
    for (std::uint32_t c = 0; c < l_.chips; ++c)
      if (r_.keeps_chip(c)) sink_.process(c + 1, "chip " + l_.chip_names[c], c);
    for (const auto& [key, name] : threads_) sink_.thread(key.first + 1, key.second, name);
    emit_ops();
    emit_compute();
    emit_steps();
    emit_hops();
    emit_counters();
    sink_.finish();
    stats_.events = sink_.events();
    return stats_;
  }

 private:
  bool room(std::size_t needed = 1) {
    if (sink_.events() + needed > r_.options().max_events) {
      stats_.truncated = true;
      return false;
    }
    return true;
  }
  void name_thread(std::uint32_t chip, std::uint32_t tid, std::string name) { threads_[{chip, tid}] = std::move(name); }

  // ---------------------------------------------------------------- ops
  struct OpSlice {
    Tick start, end;
    std::size_t op;
    std::uint32_t chip, tid;
  };
  void plan_ops() {
    for (std::size_t o = 0; o < l_.op_names.size(); ++o)
      for (std::uint32_t k = 0; k < l_.op_ports[o].count(); ++k) {
        const std::uint32_t c = l_.op_ports[o].chip_at(k);
        const Tick a = r_.entered(o, c), b = r_.left(o, c);
        if (a == kMaxTick || b == kMaxTick || !r_.keeps_chip(c) || !r_.in_window(a, b)) continue;
        ops_.push_back({a, b, o, c, 0});
      }
    std::stable_sort(ops_.begin(), ops_.end(),
                     [](const OpSlice& x, const OpSlice& y) { return std::tie(x.chip, x.start) < std::tie(y.chip, y.start); });
    std::vector<Lanes> lanes(l_.chips);
    for (OpSlice& s : ops_) {
      const std::uint32_t lane = lanes[s.chip].place(s.start, s.end);
      s.tid = kOpsTid + lane;
      op_tid_[{s.op, s.chip}] = s.tid;
      name_thread(s.chip, s.tid, lane == 0 ? "ops" : fmt::format("ops #{}", lane + 1));
    }
  }
  void emit_ops() {
    for (const OpSlice& s : ops_) {
      if (!room()) return;
      sink_.slice(s.chip + 1, s.tid, s.start, s.end, l_.op_names[s.op], "op", {{"kind", l_.op_kinds[s.op], 0}}, {}, {});
    }
  }

  // ---------------------------------------------------------------- compute
  void plan_compute() {
    for (const TaskRecord& t : r_.tasks())
      if (p_.task(t.id).kind() == sim::TaskKind::Compute)
        name_thread(l_.resource_chip[p_.task(t.id).resource], kComputeTid, "compute");
  }
  void emit_compute() {
    for (const TaskRecord& t : r_.tasks()) {
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Compute) continue;
      if (!room()) return;
      sink_.slice(l_.resource_chip[task.resource] + 1, kComputeTid, t.start, t.end, l_.op_names[task.op()], "compute",
                  {}, {}, {});
    }
  }

  // ---------------------------------------------------------------- steps
  struct StepSpan {
    Tick start = kMaxTick, end;
    std::uint64_t bytes = 0, transfers = 0;
    std::uint32_t tid = 0;
  };
  void plan_steps() {
    for (const TaskRecord& t : r_.tasks()) {
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      StepSpan& s = steps_[{l_.resource_chip[task.resource], task.op(), p_.step(t.id)}];
      s.start = min(s.start, t.start);
      s.end = max(s.end, t.end);
      s.bytes += task.amount;
      ++s.transfers;
    }
    std::vector<Lanes> lanes(l_.chips);
    for (auto& [key, s] : steps_) {
      const std::uint32_t chip = std::get<0>(key);
      const std::uint32_t lane = lanes[chip].place(s.start, s.end);
      s.tid = kStepsTid + lane;
      name_thread(chip, s.tid, lane == 0 ? "steps" : fmt::format("steps #{}", lane + 1));
    }
  }
  void emit_steps() {
    for (const auto& [key, s] : steps_) {
      const auto [chip, op, step] = key;
      if (!room(2)) return;
      const std::string name = fmt::format("{} step {}", l_.op_names[op], step);
      sink_.slice(chip + 1, s.tid, s.start, s.end, name, "step",
                  {{"op", l_.op_names[op], 0},
                   {"step", "", step},
                   {"bytes", "", static_cast<std::int64_t>(s.bytes)},
                   {"transfers", "", static_cast<std::int64_t>(s.transfers)}},
                  {}, {});
      sink_.instant(chip + 1, s.tid, s.start, name + " begins", "step", {});
    }
  }

  // ---------------------------------------------------------------- hops
  struct Arrival {
    std::uint32_t chip, tid;
    Tick at;
    std::uint64_t flow;
  };
  void plan_hops() {
    const auto& tasks = r_.tasks();
    hop_tid_.assign(tasks.size(), 0);
    flows_out_.assign(tasks.size(), {});
    std::map<sim::TaskId, std::size_t> index;
    std::map<std::uint32_t, Lanes> lanes;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const sim::Task& task = p_.task(tasks[i].id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      index[tasks[i].id] = i;
      const std::uint32_t lane = std::min(lanes[task.resource].place(tasks[i].start, tasks[i].end), 9u);
      hop_tid_[i] = kLinkTid + 10 * static_cast<std::uint32_t>(l_.resource_track[task.resource]) + lane;
      const std::string& dir = l_.track_names[static_cast<std::size_t>(l_.resource_track[task.resource])];
      name_thread(l_.resource_chip[task.resource], hop_tid_[i],
                  lane == 0 ? fmt::format("link {}", dir) : fmt::format("link {} #{}", dir, lane + 1));
    }
    flows_in_.assign(tasks.size(), {});
    std::uint64_t flow = 1;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const sim::Task& task = p_.task(tasks[i].id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      for (std::uint32_t e : p_.successors(tasks[i].id)) {
        const sim::TaskId succ = e >> 1;
        if (e & 1u) {  // forwarded onwards: hop to hop
          const auto it = index.find(succ);
          if (it == index.end()) continue;
          flows_out_[i].push_back(flow);
          flows_in_[it->second].push_back(flow++);
          continue;
        }
        // Delivered: into the op slice of the receiving chip, at the arrival.
        const sim::OpId op = task.op();
        const sim::OpChips& ports = l_.op_ports[op];
        const sim::TaskId exits = ports.entry_begin + ports.count();
        if (succ < exits || succ >= exits + ports.count()) continue;
        const std::uint32_t to = ports.chip_at(succ - exits);
        const auto tid = op_tid_.find({op, to});
        if (tid == op_tid_.end() || tasks[i].arrival < r_.entered(op, to) || tasks[i].arrival > r_.left(op, to)) continue;
        flows_out_[i].push_back(flow);
        arrivals_.push_back({to, tid->second, tasks[i].arrival, flow++});
      }
    }
  }
  void emit_hops() {
    if (hop_tid_.empty()) return;  // detail below hops
    const auto& tasks = r_.tasks();
    // Flows only when all of them fit: a flow cut in half is not a valid trace.
    std::size_t needed = arrivals_.size();
    for (std::size_t i = 0; i < tasks.size(); ++i) needed += hop_tid_[i] ? 1 + flows_out_[i].size() + flows_in_[i].size() : 0;
    const bool flows = room(needed);
    static const std::vector<std::uint64_t> none;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (!hop_tid_[i]) continue;
      if (!room()) return;
      const TaskRecord& t = tasks[i];
      const sim::Task& task = p_.task(t.id);
      const std::uint32_t chip = l_.resource_chip[task.resource];
      const std::uint16_t step = p_.step(t.id);
      sink_.slice(chip + 1, hop_tid_[i], t.start, t.end, fmt::format("{} step {}", l_.op_names[task.op()], step), "hop",
                  {{"op", l_.op_names[task.op()], 0},
                   {"kind", l_.op_kinds[task.op()], 0},
                   {"algorithm", l_.op_algorithms[task.op()], 0},
                   {"step", "", step},
                   {"bytes", "", static_cast<std::int64_t>(task.amount)},
                   {"src", l_.resource_src[task.resource], 0},
                   {"dst", l_.resource_dst[task.resource], 0},
                   {"arrival_ps", "", t.arrival.ps()},
                   {"forward_chunk_bytes", "", static_cast<std::int64_t>(l_.forward_chunk_bytes)}},
                  flows ? flows_out_[i] : none, flows ? flows_in_[i] : none);
    }
    if (!flows) return;
    for (const Arrival& a : arrivals_) sink_.instant(a.chip + 1, a.tid, a.at, "data in", "flow", {a.flow});
  }

  // ---------------------------------------------------------------- counters
  void emit_counters() {
    if (makespan_ <= kZeroTick) return;
    const std::int64_t bin = std::max<std::int64_t>(1, (makespan_.ps() + kCounterBins - 1) / kCounterBins);
    std::map<std::pair<std::uint32_t, int>, std::vector<std::int64_t>> busy;  // (chip, direction) -> ps per bin
    for (const TaskRecord& t : r_.tasks()) {
      const sim::Task& task = p_.task(t.id);
      if (task.kind() != sim::TaskKind::Transfer) continue;
      auto& bins = busy[{l_.resource_chip[task.resource], l_.resource_track[task.resource]}];
      bins.resize(kCounterBins + 1, 0);
      for (std::int64_t a = t.start.ps(); a < t.end.ps();) {
        const std::int64_t b = a / bin;
        const std::int64_t until = std::min(t.end.ps(), (b + 1) * bin);
        bins[static_cast<std::size_t>(b)] += until - a;
        a = until;
      }
    }
    std::map<std::uint32_t, std::vector<int>> directions;
    for (const auto& [key, bins] : busy) directions[key.first].push_back(key.second);
    for (const auto& [chip, list] : directions)
      for (int b = 0; b <= kCounterBins; ++b) {
        std::vector<std::pair<std::string, double>> series;
        for (int d : list) {
          const auto& bins = busy[{chip, d}];
          const double v = b == kCounterBins ? 0.0 : static_cast<double>(bins[static_cast<std::size_t>(b)]) / static_cast<double>(bin);
          series.emplace_back(l_.track_names[static_cast<std::size_t>(d)], v);
        }
        if (!room()) return;
        sink_.counter(chip + 1, "link busy fraction", series, Tick::from_ps(b * bin));
      }
  }

  const TraceRecorder& r_;
  const TraceLayout& l_;
  const sim::Program& p_;
  Tick makespan_;
  Sink& sink_;
  TraceStats stats_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> threads_;  // (chip, tid) -> name
  std::vector<OpSlice> ops_;
  std::map<std::pair<std::size_t, std::uint32_t>, std::uint32_t> op_tid_;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint16_t>, StepSpan> steps_;
  std::vector<std::uint32_t> hop_tid_;
  std::vector<std::vector<std::uint64_t>> flows_out_, flows_in_;
  std::vector<Arrival> arrivals_;
};

}  // namespace

TraceStats write_trace(const TraceRecorder& recorder, Tick makespan, Sink& sink) {
  return Writer(recorder, makespan, sink).run();
}

}  // namespace meshsim::traces
