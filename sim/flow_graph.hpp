#pragma once
// The program as a flow-level simulator sees it (the SimGrid cross-check,
// docs/CROSSCHECK.md). The native executor moves data hop by hop; a flow-level
// model moves a message as one flow that holds every link of its route at once.
// So every chain of transfers that a message is routed along (each middle chip
// only forwards it) becomes one flow over the chain's links:
//
//  - A stream edge p -> s is *internal* to a chain when s is p's only successor
//    and p is s's only predecessor: the chip between them neither keeps the data
//    nor adds to it. Chains are the maximal paths of internal edges; a transfer
//    with no internal edge is a chain of one hop. A relay whose middle chips keep
//    a copy (a ring all-gather) or add their part (a reduce-scatter) is thus a
//    sequence of one-hop flows, each waiting for the previous one to arrive:
//    flow-level models cannot pipeline, so they store and forward.
//  - A chain whose hops carried different byte counts would be cut into layers:
//    flows over sub-ranges of the chain such that every hop carries exactly its
//    bytes (today's schedules route equal bytes along every chain).
//  - Every program task keeps its id as a node here; a transfer's node becomes a
//    zero-time join that completes when all the flows covering it have
//    completed. Flows are appended after the tasks.
//  - Every other edge p -> s (full edges, and stream edges that are not internal)
//    becomes "s waits for p's completion"; when s is a transfer, each flow
//    covering s waits for it.
//
// Nothing here knows SimGrid: the graph is tested on its own (flow_graph_test).
#include <cstdint>
#include <span>
#include <vector>

#include "sim/program.hpp"

namespace meshsim::sim {

class FlowGraph {
 public:
  enum class Kind : std::uint8_t { Flow, Compute, Join };
  struct Node {
    std::uint64_t amount = 0;    // Flow: bytes. Compute: duration in ps. Join: delay in ps (0 for a transfer's).
    std::uint32_t resource = 0;  // Flow: offset of its route in route_links. Compute: compute unit.
    std::uint32_t hops = 0;      // Flow: links in its route
    OpId op = 0;
    Kind kind = Kind::Join;
  };

  // Builds the graph of `program`. Throws Error when its stream edges form a cycle.
  explicit FlowGraph(const Program& program);

  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_tasks() const { return num_tasks_; }  // nodes [0, num_tasks) are the program's tasks
  std::size_t num_flows() const { return nodes_.size() - num_tasks_; }
  const Node& node(std::uint32_t id) const { return nodes_[id]; }
  std::span<const std::uint32_t> route(std::uint32_t flow) const {
    return {route_links_.data() + nodes_[flow].resource, nodes_[flow].hops};
  }
  std::span<const std::uint32_t> successors(std::uint32_t id) const {
    return {successors_.data() + offsets_[id], successors_.data() + offsets_[id + 1]};
  }
  std::uint32_t num_predecessors(std::uint32_t id) const { return predecessors_[id]; }
  std::uint32_t num_ops() const { return num_ops_; }

 private:
  std::size_t num_tasks_ = 0;
  std::uint32_t num_ops_ = 0;
  std::vector<Node> nodes_;
  std::vector<std::uint32_t> route_links_;
  std::vector<std::uint32_t> offsets_, successors_, predecessors_;
};

}  // namespace meshsim::sim
