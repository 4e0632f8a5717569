#pragma once
// meshsim search: the best way to shard a training step on a given system
// (docs/SEARCH.md). A plan lays mesh axes onto the hardware axes (each mesh axis
// a run of consecutive hardware axes, as docs/WORKLOAD.md maps them) and gives
// each a strategy (data, fsdp, tensor, pipeline), with a microbatch size and a
// recompute policy. Plans the parser refuses are invalid; plans whose memory
// closed form passes HBM are pruned; the rest are simulated in the order of a
// lower bound of their step (the busiest chip's computation at the roofline: its
// compute unit runs one kernel at a time, so no schedule is faster), and a plan
// whose bound is above the N-th best step simulated so far is pruned: it cannot
// enter the top N. Every reported time is a full simulation.
#include <cstdint>
#include <string>
#include <vector>

#include "base/tick.hpp"
#include "workloads/json_cursor.hpp"

namespace meshsim::search {

struct SearchSpec {
  std::string file;
  workloads::Json base;               // the spec as read, less "search"
  std::vector<std::string> hw_names;  // the hardware axes of size > 1, in order
  std::vector<int> hw_sizes;
  std::vector<std::vector<int>> node_grids;  // GPU: the node layouts to try ({N}, {N0, N1}, ...)
  std::vector<std::string> strategies = {"data", "fsdp", "tensor", "pipeline"};
  std::vector<std::uint64_t> microbatches;  // default: the spec's (1)
  std::vector<std::string> recompute;       // default: the spec's ("none")
};

// Reads a spec: a training workload with neither "mesh" nor
// "training.parallelism" (the search chooses them) and an optional "search"
// object: {"strategies": [...], "microbatch": [...], "recompute": [...]}.
// InputError on anything malformed.
SearchSpec parse_spec(std::string_view text, const std::string& file);
SearchSpec load_spec(const std::string& path);

struct Plan {
  std::size_t index = 0;          // in enumeration order
  std::vector<int> node_grid;     // GPU: the topology's nodes; empty on a TPU
  std::vector<std::pair<std::string, int>> mesh;  // mesh axes in hardware order
  workloads::Json parallelism;
  std::uint64_t microbatch = 1;
  std::string recompute;
  std::uint64_t dp = 1, fsdp = 1, tp = 1, pp = 1;
  std::string axes;   // "F=16(xy) T=4(z)"
  std::string label;  // "fsdp 16 x tensor 4, microbatch 1, recompute selective"
};

// The plan's workload JSON (what `meshsim run` reproduces it with).
workloads::Json plan_workload(const SearchSpec& spec, const Plan& plan);

struct PlanResult {
  Plan plan;
  Tick bound;                    // the lower bound
  std::uint64_t peak_bytes = 0;  // memory per chip (closed form)
  bool simulated = false;
  Tick step;
  double mfu = 0;
  // Exposed communication, the most over stages: tensor, fsdp, data, pipeline; and idle (bubble).
  Tick tensor, fsdp, data, pipeline, idle;
};

struct SearchOptions {
  std::size_t top = 10;
  bool exhaustive = false;  // simulate every plan that fits (no bound pruning)
};

struct SearchResult {
  std::vector<PlanResult> ranked;  // the simulated plans, fastest first (ties: enumeration order)
  std::vector<PlanResult> pruned;  // by the bound: never simulated
  std::size_t enumerated = 0, invalid = 0, pruned_memory = 0, pruned_bound = 0, simulated = 0;
  std::uint64_t hbm_bytes = 0;
  std::uint64_t smallest_peak_bytes = 0;  // of the plans pruned by memory
  std::vector<std::string> invalid_reasons;  // the first few, "plan: message"
};

// InputError (at the spec) when no plan is valid or none fits in memory.
SearchResult run_search(const SearchSpec& spec, const SearchOptions& options);

std::string format_search(const SearchSpec& spec, const SearchResult& r, std::size_t top);
workloads::Json search_json(const SearchSpec& spec, const SearchResult& r, std::size_t top);

}  // namespace meshsim::search
