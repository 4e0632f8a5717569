#pragma once
// Exact reduction of a program: one copy of each class of identical independent
// components (docs/MODEL.md, "Exact reductions").
//
// Two tasks are connected when an edge joins them or they use the same resource
// (a link direction or a compute unit). A component of that relation shares no
// task, edge or resource with the rest, so the executor runs it exactly as it
// would run it alone: its events touch only its own state, they are ordered
// among themselves as before, and their interleaving with other components'
// events changes nothing of it. Two components are identical when, listing
// their tasks by ascending id, the k-th tasks agree on kind, amount, op, step and
// resource parameters, use resources in the same pattern, and have the same
// successors (by position in the list) and edge kinds in the same order. The
// executor's only use of ids is that order, so identical components have
// identical timings, task by task. The 256 rings of an X AllReduce on
// 16x16x16, or the 1,024 in-node groups of an NVLink AllReduce on 1,024 DGX
// nodes, each run once.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/executor.hpp"
#include "sim/program.hpp"

namespace meshsim::sim {

struct Reduced {
  Program program;                  // the representatives' tasks, in ascending id order; all ops kept
  std::vector<TaskId> full_id;      // per reduced task: its id in the full program
  // Per class of identical components: how many there are, the representative's
  // resources in the order its tasks first use them, and each other member's
  // resources in its own order (position k of a member plays resource k of the
  // representative).
  struct Class {
    std::uint64_t copies = 1;
    std::vector<std::uint32_t> resources;
    std::vector<std::vector<std::uint32_t>> replicas;
  };
  std::vector<Class> classes;
  std::uint64_t full_tasks = 0;     // tasks of the full program
};

// The reduction of `program`, or nothing when every component is unique (then
// the full program is what must run).
std::optional<Reduced> reduce(const Program& program, std::span<const Resource> resources);

}  // namespace meshsim::sim
