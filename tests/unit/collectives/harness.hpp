#pragma once
// Runs collective schedules on a torus with the real executor, for closed-form tests.
#include <cstdint>
#include <functional>
#include <vector>

#include "base/tick.hpp"
#include "sim/collectives/closed_form.hpp"
#include "sim/collectives/collective.hpp"
#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "traces/link_stats.hpp"

namespace meshsim::test {

using collectives::Kind;
using topology::AxisSpec;
using topology::Torus;

// v5e-like ICI: 45 GB/s one-way per link, 1 us per hop, 4 KiB forwarding chunk.
constexpr std::uint64_t kBw = 45'000'000'000;
constexpr double kB = 45e9;       // one-way bytes/s
constexpr double kAlpha = 1e-6;   // s per hop
constexpr std::uint64_t kChunk = 4096;

inline Torus torus(std::vector<AxisSpec> axes, std::uint64_t bw = kBw, double latency_s = kAlpha) {
  return Torus(std::move(axes), {bw, tick_from_seconds(latency_s)});
}

struct Outcome {
  Tick makespan;
  std::vector<sim::OpTiming> ops;
  bool capacity_respected = false;
  std::uint64_t link_bytes = 0;
  std::uint64_t max_link_bytes = 0;
};

// `build(b, ports_of_op)` adds the ops; each op gets per-chip entry/exit joins.
using Builder = std::function<void(sim::ProgramBuilder&, const std::vector<collectives::OpPorts>&)>;

inline Outcome run(const Torus& t, int num_ops, const Builder& build, std::uint64_t chunk = kChunk,
                   const std::vector<std::pair<int, int>>& op_deps = {}) {
  sim::ProgramBuilder b;
  std::vector<std::vector<sim::TaskId>> entry(static_cast<std::size_t>(num_ops)), exit(static_cast<std::size_t>(num_ops));
  std::vector<collectives::OpPorts> ports;
  for (int o = 0; o < num_ops; ++o) {
    const sim::OpId id = b.add_op();
    auto& en = entry[static_cast<std::size_t>(o)];
    auto& ex = exit[static_cast<std::size_t>(o)];
    for (std::uint32_t c = 0; c < t.num_chips(); ++c) en.push_back(b.join(id));
    for (std::uint32_t c = 0; c < t.num_chips(); ++c) ex.push_back(b.join(id));
    for (std::uint32_t c = 0; c < t.num_chips(); ++c) b.depend(en[c], ex[c]);
    ports.push_back({id, en, ex});
  }
  for (auto [before, after] : op_deps)
    for (std::uint32_t c = 0; c < t.num_chips(); ++c)
      b.depend(exit[static_cast<std::size_t>(before)][c], entry[static_cast<std::size_t>(after)][c]);
  build(b, ports);
  const sim::Program p = std::move(b).finish();
  const std::vector<sim::Resource> res(t.num_link_slots(), sim::Resource{t.link_spec().bandwidth_bytes_per_s,
                                                                         t.link_spec().latency, chunk});
  sim::Engine engine;
  sim::Executor exec(engine, p, res);
  traces::LinkStats stats(res);
  exec.add_observer(stats);
  exec.start();
  engine.run();
  Outcome o;
  o.makespan = exec.makespan();
  o.ops = exec.op_timings();
  o.capacity_respected = stats.capacity_respected() && exec.unfinished_tasks().empty();
  o.link_bytes = stats.total_bytes();
  for (const auto& l : stats.loads()) o.max_link_bytes = std::max(o.max_link_bytes, l.bytes);
  return o;
}

// The cheat sheet's closed form (seconds) for V bytes over axes of `sizes`.
inline double cheat(Kind kind, const std::vector<int>& sizes, double v) {
  collectives::ClosedFormInput in;
  in.kind = kind;
  in.bytes = static_cast<std::uint64_t>(v);
  in.link_bandwidth_one_way = kB;
  in.hop_latency = tick_from_seconds(kAlpha);
  in.axis_sizes = sizes;
  return collectives::cheat_sheet(in).time_s();
}

// Simulated seconds of one collective.
inline double simulate(const Torus& t, Kind kind, const std::vector<int>& axes, std::uint64_t v,
                       std::uint64_t chunk = kChunk) {
  const Outcome o = run(t, 1, [&](sim::ProgramBuilder& b, const auto& ports) { collectives::build(b, t, kind, axes, v, ports[0]); },
                        chunk);
  return o.makespan.seconds();
}

// ---- Exact closed forms of meshsim's schedules (derived in docs/MODEL.md), in
// the bandwidth regime (every per-chip shard s with s/b >= alpha + chunk/b).

// One ring/line phase: each chip's data `s` reaches the other X-1 chips.
inline double phase_time(int x, bool wrap, double s) {
  return (wrap ? (x - 1) / 2.0 : (x - 1.0)) * s / kB + kAlpha;
}

// AllGather/ReduceScatter over `sizes` (all wrapped, or all lines), N parts,
// phases in rotated order; for equal sizes every part has the same phases.
inline double exact_gather(const std::vector<int>& sizes, bool wrap, double v) {
  double p = 1;
  for (int x : sizes) p *= x;
  const double n = static_cast<double>(sizes.size());
  double s = v / (n * p), t = 0;
  for (int x : sizes) {
    t += phase_time(x, wrap, s);
    s *= x;
  }
  return t;
}
inline double exact_reduce(const std::vector<int>& sizes, bool wrap, double v) {
  const double n = static_cast<double>(sizes.size());
  double c = v / n, t = 0;
  for (int x : sizes) {
    c /= x;
    t += phase_time(x, wrap, c);
  }
  return t;
}

}  // namespace meshsim::test
