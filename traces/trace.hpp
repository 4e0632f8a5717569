#pragma once
// Perfetto traces of a run. TraceRecorder is an execution observer: it keeps the
// timing of the tasks (and op entry/exit joins) that pass its filters; the
// writers turn the recording into a Chrome JSON trace (perfetto_json.cpp) that
// ui.perfetto.dev opens. The engine knows nothing of either.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/tick.hpp"
#include "sim/executor.hpp"
#include "sim/op_chips.hpp"
#include "sim/program.hpp"
#include "traces/sink.hpp"

namespace meshsim::traces {

enum class Detail {
  Ops,    // one slice per op per chip, compute slices, link utilisation counters
  Steps,  // + one slice per collective step per chip, instants at step boundaries
  Hops,   // + one slice per hop transfer on its link, flow arrows along forwarding chains
};

struct TraceOptions {
  Detail detail = Detail::Hops;
  std::vector<std::uint32_t> chips;  // only these chips (empty: all)
  Tick from, to;                     // only this time window (to == 0: to the end)
  std::size_t max_events = 5'000'000;
};

// What the trace needs to know about the run, in plain terms (no topology types).
constexpr std::uint32_t kNoChip = ~std::uint32_t{0};  // a resource no chip owns (a switch's cable)

struct TraceLayout {
  std::vector<std::string> chip_names;          // per chip, e.g. "(1,0)"
  std::vector<std::uint32_t> resource_chip;     // per resource: the chip it belongs to (a link: its source), or kNoChip
  std::vector<std::string> resource_src;        // per resource: the name of a link's sending end (a chip or a switch)
  std::vector<std::string> resource_dst;        // per resource: the name of a link's receiving end (compute: empty)
  std::vector<int> resource_track;              // per resource: 0 compute, d >= 1 link direction d
  std::vector<std::string> track_names;         // per track index: "compute", "+x", "-x", ...
  std::vector<std::string> op_names, op_kinds;  // per op
  std::vector<std::string> op_algorithms;       // per op, e.g. "bidirectional ring", "routed"
  std::uint64_t forward_chunk_bytes = 0;        // cut-through granularity of the links
  std::vector<sim::OpChips> op_ports;           // per op: its chips, its entry and exit joins
  std::uint32_t chips = 0;
};

struct TaskRecord {
  sim::TaskId id;
  Tick start, end, arrival;
};

class TraceRecorder final : public sim::ExecutionObserver {
 public:
  TraceRecorder(const sim::Program& program, const TraceLayout& layout, const TraceOptions& options);
  void on_task(sim::TaskId id, const sim::Task& task, const sim::TaskTiming& timing) override;
  void on_join(sim::TaskId id, const sim::Task& task, Tick at) override;

  const std::vector<TaskRecord>& tasks() const { return tasks_; }
  // Per op and chip: when the chip entered and left the op (kMaxTick: never, or
  // the op does not run on the chip).
  Tick entered(std::size_t op, std::uint32_t chip) const;
  Tick left(std::size_t op, std::uint32_t chip) const;
  bool keeps_chip(std::uint32_t chip) const { return chip_kept_[chip] != 0; }
  bool in_window(Tick start, Tick end) const;

  const sim::Program& program() const { return program_; }
  const TraceLayout& layout() const { return layout_; }
  const TraceOptions& options() const { return options_; }

 private:
  const sim::Program& program_;
  const TraceLayout& layout_;
  TraceOptions options_;
  std::vector<std::uint8_t> chip_kept_;
  std::vector<TaskRecord> tasks_;
  std::vector<std::size_t> port_base_;  // per op: where its chips' times start in entry_ and exit_
  std::vector<Tick> entry_, exit_;      // per op, per chip it runs on
};

struct TraceStats {
  std::size_t events = 0;
  bool truncated = false;  // the event cap was hit
};

// The Chrome JSON trace-event format (Perfetto's JSON importer) and Perfetto's
// native protobuf format (perfetto_trace.proto), both streamed to `out`.
std::unique_ptr<Sink> make_json_sink(std::FILE* out);
std::unique_ptr<Sink> make_proto_sink(std::FILE* out);

// Turns the recording into trace events, in one deterministic order.
TraceStats write_trace(const TraceRecorder& recorder, Tick makespan, Sink& sink);

}  // namespace meshsim::traces
