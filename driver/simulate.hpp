#pragma once
// One call from a parsed workload to its simulated results.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/op_kind.hpp"
#include "base/tick.hpp"
#include "driver/critical_path.hpp"
#include "driver/expand.hpp"
#include "driver/groups.hpp"
#include "driver/run_context.hpp"
#include "driver/translations.hpp"
#include "traces/trace.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct OpResult {
  std::string name;
  OpKind kind = OpKind::AllGather;
  std::vector<std::string> mesh_axes;  // as written in the op
  std::vector<std::string> hw_axes;    // the hardware axes (size > 1) they span
  // A collective over explicit groups of chips (workloads::CollectiveOp::groups); null otherwise.
  std::shared_ptr<const std::vector<std::vector<topology::ChipId>>> groups;
  std::uint64_t bytes = 0;    // V (collectives) or payload (send)
  Tick begin;        // every chip could start the op (its dependencies done on all chips)
  Tick first_start;  // the first chip started it
  Tick end;          // its last byte arrived
  // The expected time beside the simulated one: the cheat sheet's closed form
  // for communication (its latency and bandwidth terms), the roofline for a
  // local matmul (its compute and memory times).
  double closed_s = 0;
  double latency_s = 0, bandwidth_s = 0;  // communication
  double compute_s = 0, memory_s = 0;     // matmul
  double flops = 0;                       // matmul: per chip
  // Communication: the lower bound no schedule beats (driver/bounds.hpp) and
  // which of its terms binds (ingress, cut or latency).
  double bound_s = 0;
  std::string bound_term;
  std::string bound;                      // latency | bandwidth | compute | memory
  std::string algorithm;                  // GPU collectives: ring, nvls, hierarchical, direct, tree, nvls_tree
  std::string protocol;                   // GPU collectives: NCCL's protocol, simple, ll or ll128
  // nccl-tests conventions (communication only): algbw = size / time with size as
  // nccl-tests counts it (V; V/n per rank for an all-to-all), busbw = algbw x
  // 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter, all-to-all), 1 (send).
  double algbw_bytes_per_s = 0, busbw_bytes_per_s = 0;
  std::uint64_t transfers = 0;
  std::uint64_t link_bytes = 0;  // sum over transfers of bytes (bytes x hops)
  std::string sharding_before, sharding_after;
  Tick time() const { return end - begin; }
};

struct LinkLoad {
  std::string name;  // "(0,0)+x"
  std::uint64_t bytes = 0;
  Tick busy;
};

struct RunResult {
  std::string engine = "native";  // native | simgrid
  std::vector<OpResult> ops;
  Tick makespan;
  // Engine events that started a task (tasks that waited for their resource or
  // for their ready time): simulator work, a function of the schedule alone.
  std::uint64_t events = 0;
  std::uint64_t transfers = 0;
  std::uint64_t link_bytes = 0;
  // What the engine really ran: the transfers of one member of each class of
  // identical independent components (sim/reduce.hpp, or driver/groups.hpp: one
  // class), and how many classes; without a reduction, all the transfers and 0.
  std::uint64_t simulated_transfers = 0;
  std::uint64_t reduced_classes = 0;
  // The quotient by the torus' translations (driver/translations.hpp): how many
  // translations each simulated task stands for; 0 when not used.
  std::uint64_t translations = 0;
  bool mirrored = false;  // the quotient is also by the mirror of the nodes (driver/translations.hpp)
  bool capacity_respected = false;
  std::vector<LinkLoad> busiest_links;  // most bytes first
  std::vector<CriticalPath> critical_paths;  // per op, with SimulateOptions::critical_path
  std::size_t trace_events = 0;
  std::string trace_warning;  // e.g. the event cap was hit
  // SimGrid engine only: the flows it ran (each a chain of hop transfers, or a
  // layer of one), its hosts and routes, and its wall time (set-up and run).
  std::uint64_t flows = 0, hosts = 0, routes = 0;
  std::uint64_t workers = 0;  // SimGrid worker actors: the most flows and computes in flight at once
  double engine_seconds = 0;
  // Native engine: the threads it ran on (1 or 2) and, on 2, its windows (not
  // in the reports, which do not depend on them).
  unsigned threads = 1;
  std::uint64_t windows = 0;
};

enum class EngineKind : std::uint8_t {
  Native,   // meshsim's hop-by-hop executor
  SimGrid,  // the same program as flows on SimGrid (docs/CROSSCHECK.md)
};

struct SimulateOptions {
  EngineKind engine = EngineKind::Native;  // SimGrid: no traces, critical paths or link loads
  std::vector<std::string> simgrid_config;  // extra SimGrid settings, "KEY:VALUE" (its --cfg)
  std::size_t busiest_links = 0;  // how many to report
  bool critical_path = false;     // find each op's critical path (records every task's timing)
  std::string trace_path;         // write a Perfetto trace here when not empty (.json or .pftrace)
  traces::TraceOptions trace;
  // Called every 2^16 engine events with the simulated time reached, the events
  // executed so far and the fraction of the program's tasks done (progress lines).
  std::function<void(Tick now, std::uint64_t events, double done)> progress;
  Limits limits;                  // checked before the program is built
  // Run one member of each class of identical independent components and copy
  // its results to the others (sim/reduce.hpp): the same results, byte for byte.
  // False: the full program (meshsim run --no-reduce).
  bool reduce = true;
  // Threads for the native engine: 1, 2 (whenever the program splits,
  // sim::Executor::run: the same results, byte for byte), or 0: 2 on a machine
  // with two cores or more for a run of at least 2^20 tasks that splits into
  // windows of 4,096 tasks or more, else 1.
  unsigned threads = 0;
};

// Throws InputError when the run would pass options.limits (before building
// anything), when simulated time would pass kMaxTick, and Error when the engine
// runs dry with tasks still pending (a deadlock: the message names the stuck ops,
// their chips and a dependency cycle) instead of reporting a truncated run.
// With `run`, on the run's context (run_context.hpp: its system, GPU choices and
// torus plans), which the caller may then hand to the reports; else one of its own.
RunResult simulate(const workloads::Workload& w, const SimulateOptions& options = {});
RunResult simulate(const workloads::Workload& w, RunContext& run, const SimulateOptions& options = {});

// The size of the run simulate() makes with `options`, as it checks it against
// options.limits before building anything: one of the workload's identical
// independent groups (RunSize::groups), one chip's share of the quotient by
// the torus' translations beside its largest op, which is built alone in full
// (RunSize::translations), or the whole workload. Should the quotient not
// apply after all (an op not invariant), simulate() checks the whole workload.
RunSize run_size(const workloads::Workload& w, RunContext& run, const SimulateOptions& options = {});

// How simulate() runs a workload with `options` (docs/MODEL.md, "Exact
// reductions"): group 0 of identical independent groups (the others copy its
// results), the quotient by the torus' translations (built op by op), or the
// whole program. Sized and checked against options.limits (InputError) before
// the program is built; `meshsim validate` counts the tasks of the same plan.
struct RunPlan {
  enum class Kind : std::uint8_t { Whole, Group, Quotient };
  Kind kind = Kind::Whole;
  RunSize size;                               // the run's estimate, as checked
  std::optional<TranslatedGroups> groups;     // Group: the groups
  std::optional<workloads::Workload> first;   // Group: the workload on group 0
  std::optional<OpQuotient> quotient;         // Quotient: the quotient, built
};
RunPlan plan_run(const workloads::Workload& w, RunContext& run, const SimulateOptions& options = {});

// simulate() on a program already expanded from `w` (expand(w, run), or in
// tests a deliberately broken one with the same layout); options.limits unused.
RunResult simulate_expanded(const workloads::Workload& w, RunContext& run, const Expanded& ex,
                            const SimulateOptions& options = {});

}  // namespace meshsim::driver
