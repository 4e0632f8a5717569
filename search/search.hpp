#pragma once
// meshsim search: the best way to shard a training step on a given system
// (docs/SEARCH.md). A plan picks the slice shape (or the GPU nodes' grid), lays
// mesh axes onto the hardware axes (each mesh axis a run of consecutive hardware
// axes, as docs/WORKLOAD.md maps them), gives each a strategy (data, fsdp,
// tensor, pipeline, expert, context), and picks the microbatch, the recompute
// policy, the pipeline schedule, the optimizer sharding and the collective
// matmuls. Plans the parser refuses are invalid; plans whose memory closed form
// passes HBM are pruned; the rest are simulated in the order of a lower bound of
// their step, and a plan whose bound is above the N-th best step simulated so far
// is pruned: it cannot enter the top N. Every reported time is a full simulation.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/tick.hpp"
#include "driver/expand.hpp"
#include "workloads/spec.hpp"

namespace meshsim::search {

// On/off choices of a plan: ZeRO-1 (plans with data parallelism), collective
// matmuls and sequence parallelism (tensor parallelism), FSDP prefetch (FSDP),
// per-layer gradient reductions under the backward pass (any replicas).
enum Switch { kShardedOptimizer, kOverlapTensor, kSequenceParallel, kFsdpPrefetch, kGradientOverlap, kSwitches };
const char* switch_key(int s);  // its key in "search": "sharded_optimizer", ...

struct SearchSpec {
  std::string file;
  // The spec as read, less "search", as JSON text: plan_workload
  // (search_json.hpp) writes a plan's workload from it.
  std::string base;
  // The system and the step as read; each plan sets the slice shape (or the
  // nodes), the mesh and its choices (build_plan).
  workloads::Hardware hardware;
  workloads::TopologySpec topology;
  workloads::TrainingSpec training;
  bool gpu = false;
  // TPU: the slice shapes to choose among (each a "topology.shape"); GPU: the
  // nodes' layouts ({N}, {N0, N1}, ...).
  std::vector<std::vector<int>> layouts;
  int slices = 0;           // TPU multislice: topology.slices (0: one slice)
  int gpus_per_node = 0;
  bool moe = false;                      // the model has experts
  std::uint64_t ffn = 0, seq_len = 0;    // the model's (for the rules of thumb)
  std::vector<std::string> strategies;   // default: data, fsdp, tensor, pipeline (+ expert on MoE, context from 32k tokens)
  std::vector<std::uint64_t> microbatches;  // default: the spec's (1)
  std::vector<std::string> recompute;       // default: the spec's ("none")
  std::vector<std::string> schedules;       // pipelines: default 1f1b and interleaved
  std::vector<std::uint64_t> virtual_stages;  // interleaved: default 2
  // The on/off choices (Switch), each varied only on the plans it applies to.
  std::array<std::vector<bool>, kSwitches> switches;
  // Also mesh axes over part of a hardware axis: every hardware axis (a TPU's
  // torus axis, a GPU node's GPUs) split in two factors d x size/d, one at a
  // time ("search.split_axes"; default: on GPUs, where it adds the node's
  // splits, not on TPUs, where it multiplies the plans about tenfold).
  bool split_axes = true;
};

// Reads a spec: a training workload with neither "mesh" nor
// "training.parallelism" (the search chooses them) and an optional "search"
// object (docs/SEARCH.md). InputError on anything malformed or contradictory.
SearchSpec parse_spec(std::string_view text, const std::string& file);
SearchSpec load_spec(const std::string& path);

// The strategies' exposed and in-flight communication, in this order.
enum StrategyIndex { kTensor, kExpert, kContext, kFsdp, kData, kPipeline, kStrategies };
const char* strategy_name(int s);  // "tensor", ...

struct Plan {
  std::size_t index = 0;          // in enumeration order
  std::vector<int> layout;        // TPU: the slice shape; GPU: the nodes' grid
  std::vector<std::pair<std::string, int>> mesh;  // mesh axes in hardware order
  // Each strategy's mesh axes, strategies in the order of their first axis.
  std::vector<std::pair<std::string, std::vector<std::string>>> parallelism;
  std::uint64_t microbatch = 1;
  std::string recompute;
  std::string schedule;                // pipelines only
  std::uint64_t virtual_stages = 1;
  std::array<bool, kSwitches> on{};  // by Switch
  std::uint64_t dp = 1, fsdp = 1, tp = 1, pp = 1, ep = 1, cp = 1;
  std::string axes;     // "F=16(xy) T=4(z)"
  std::string options;  // "interleaved v2, zero-1, tp overlap" or "-"
  std::string label;    // every choice, for messages
};

// Every plan of the spec, in enumeration order (Plan::index).
std::vector<Plan> enumerate_plans(const SearchSpec& spec);

// The plan's workload, built in memory: the workload plan_workload's JSON gives,
// with allow_oom (the search prunes by memory itself). InputError when the plan
// does not fit the model.
workloads::Workload build_plan(const SearchSpec& spec, const Plan& plan);

struct Comm {
  Tick exposed;    // what no computation hides (the most over pipeline stages)
  Tick in_flight;  // how long it was in flight at all (the most over stages)
};

struct PlanResult {
  Plan plan;
  Tick bound;                    // the lower bound
  Tick compute_bound, comm_bound;  // its two parts: the bound is their max
  std::uint64_t peak_bytes = 0;  // memory per chip (closed form)
  bool simulated = false;
  Tick step;
  double mfu = 0;
  Tick compute, optimizer, idle;  // the most over stages; idle is the bubble
  std::array<Comm, kStrategies> comm;
};

struct SearchOptions {
  std::size_t top = 10;
  bool exhaustive = false;  // simulate every plan that fits (no bound pruning)
  // Keep the Pareto front of step against memory exact too: a plan is pruned
  // only when a simulated plan is faster than its bound with no more memory.
  bool pareto = false;
  // Simulating many plans at once (mpirun): `map(n, run)` returns run(0..n-1)'s
  // texts in order; null runs them here, one after another. `batch` plans are
  // handed to it at a time (the number of ranks).
  std::function<std::vector<std::string>(std::size_t, const std::function<std::string(std::size_t)>&)> map;
  std::size_t batch = 1;
  // A plan whose run would pass these (meshsim run's --max-transfers and
  // --max-memory) is not simulated: it is counted and named, never ranked.
  driver::Limits limits;
};

struct SearchResult {
  std::vector<PlanResult> ranked;  // the simulated plans, fastest first (ties: enumeration order)
  std::vector<PlanResult> pruned;  // by the bound: never simulated
  std::size_t enumerated = 0, invalid = 0, pruned_memory = 0, pruned_bound = 0, simulated = 0;
  std::size_t too_large = 0;                   // over the limits: not simulated, not ranked
  std::vector<std::string> too_large_reasons;  // the first few, "plan: message"
  std::uint64_t hbm_bytes = 0;
  std::uint64_t smallest_peak_bytes = 0;  // of the plans pruned by memory
  std::vector<std::string> invalid_reasons;  // the first few, "plan: message"
  double peak_flops_per_s = 0, link_bytes_per_s = 0;  // the chip's, for the rules of thumb
  std::uint64_t chips = 0;
  std::uint64_t global_batch = 0;
};

// InputError (at the spec) when no plan is valid or none fits in memory.
SearchResult run_search(const SearchSpec& spec, const SearchOptions& options);

// The simulated plans no other simulated plan beats on both step and memory,
// by memory ascending.
std::vector<const PlanResult*> pareto_front(const SearchResult& r);

std::string format_search(const SearchSpec& spec, const SearchResult& r, std::size_t top);
// Why the winner beats the runner-up, and the scaling book's rules of thumb.
std::string format_explanation(const SearchSpec& spec, const SearchResult& r);

}  // namespace meshsim::search
