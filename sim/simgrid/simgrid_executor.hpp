#pragma once
// Runs a FlowGraph on SimGrid 3.32 (flow-level, max-min bandwidth sharing), the
// independent cross-check of the native executor. docs/CROSSCHECK.md has the
// platform, every configuration setting and where the two models must differ.
//
// Process hygiene: SimGrid allows one engine per process and aborts the process
// on some errors (xbt_die). The run happens in a forked child process; its
// results come back through a temporary file, and a child that aborts or fails
// becomes an Error with SimGrid's last message. The parent never loads a
// SimGrid engine.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/tick.hpp"
#include "sim/flow_graph.hpp"

namespace meshsim::sim {

// What SimGrid needs to know of a resource.
struct FlowResource {
  std::uint64_t bandwidth_bytes_per_s = 0;  // one way; 0: a compute unit
  Tick latency;                             // one hop
  std::uint32_t src = 0, dst = 0;           // a link's two ends (node ids); a compute unit's node (both)
};

struct NodeTiming {
  Tick start;  // a flow or compute began; a join completed
  Tick done;   // completed (a transfer's node: all flows over it completed)
};

// What a run counted (trivially copyable: the child process sends it as bytes).
struct SimgridStats {
  Tick makespan;
  std::uint64_t flows = 0;             // SimGrid communications run
  std::uint64_t computes = 0;          // SimGrid executions run
  std::uint64_t hosts = 0, routes = 0;
  std::uint64_t workers = 0;           // worker actors: the most flows and computes in flight at once
  double engine_seconds = 0;           // wall time of SimGrid's platform set-up and run, in the child
  std::uint64_t unfinished = 0;        // nodes that never completed (a deadlock); 0 after a good run
  std::uint32_t first_unfinished = 0;
};

struct SimgridRun : SimgridStats {
  std::vector<NodeTiming> tasks;  // per program task (FlowGraph nodes [0, num_tasks))
};

// Runs `graph` on a SimGrid platform with one host per node (nodes 0..num_nodes-1)
// and one link per link resource. `extra_config` ("KEY:VALUE", SimGrid's --cfg
// syntax) is applied after meshsim's settings. Throws Error when SimGrid fails or
// aborts.
SimgridRun run_on_simgrid(const FlowGraph& graph, std::span<const FlowResource> resources, std::uint32_t num_nodes,
                          std::span<const std::string> extra_config = {});

}  // namespace meshsim::sim
