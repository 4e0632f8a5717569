#include "sim/flow_graph.hpp"

#include <algorithm>
#include <limits>

#include "base/error.hpp"

namespace meshsim::sim {

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

struct Layer {
  std::uint32_t first, last;  // hop positions in the chain, inclusive
  std::uint64_t bytes;
};

// Cuts a chain whose hop k carries bytes[k] into flows over hop ranges such that
// every hop carries exactly its bytes: a level rising at hop k opens a flow
// there; a level falling closes the most recently opened flows (splitting one
// when it falls part of the way).
std::vector<Layer> layers_of(std::span<const std::uint64_t> bytes) {
  struct Open {
    std::uint32_t first;
    std::uint64_t bytes;
  };
  std::vector<Layer> out;
  std::vector<Open> open;
  std::uint64_t level = 0;
  for (std::uint32_t k = 0; k < bytes.size(); ++k) {
    while (level > bytes[k]) {
      Open& top = open.back();
      const std::uint64_t excess = level - bytes[k];
      const std::uint64_t closed = std::min(top.bytes, excess);
      out.push_back({top.first, k - 1, closed});
      top.bytes -= closed;
      level -= closed;
      if (top.bytes == 0) open.pop_back();
    }
    if (level < bytes[k]) {
      open.push_back({k, bytes[k] - level});
      level = bytes[k];
    }
  }
  const auto last = static_cast<std::uint32_t>(bytes.size() - 1);
  for (auto it = open.rbegin(); it != open.rend(); ++it) out.push_back({it->first, last, it->bytes});
  return out;
}

}  // namespace

FlowGraph::FlowGraph(const Program& p) : num_tasks_(p.num_tasks()), num_ops_(p.num_ops()) {
  const std::size_t n = p.num_tasks();
  MESHSIM_ASSERT(n < kNone / 2, "program too large for a flow graph");
  // A stream edge p -> s is internal to a chain (pure routing: the middle chip only
  // forwards) when it is p's only successor and p is s's only predecessor.
  std::vector<std::uint32_t> next(n, kNone);
  std::vector<bool> has_prev(n, false);
  const BigVector<std::uint32_t> predecessors = p.predecessor_counts();
  for (TaskId t = 0; t < n; ++t) {
    const std::span<const std::uint32_t> succ = p.successors(t);
    if (succ.size() == 1 && (succ[0] & 1u) && predecessors[succ[0] >> 1] == 1)
      next[t] = succ[0] >> 1, has_prev[succ[0] >> 1] = true;
  }

  // Predecessors of every task, without the internal edges.
  std::vector<std::uint32_t> pred_offsets(n + 1, 0);
  for (TaskId t = 0; t < n; ++t)
    for (std::uint32_t e : p.successors(t))
      if (next[t] != (e >> 1) || !(e & 1u)) ++pred_offsets[(e >> 1) + 1];
  for (std::size_t i = 0; i < n; ++i) pred_offsets[i + 1] += pred_offsets[i];
  std::vector<std::uint32_t> preds(pred_offsets[n]);
  {
    std::vector<std::uint32_t> fill(pred_offsets.begin(), pred_offsets.end() - 1);
    for (TaskId t = 0; t < n; ++t)
      for (std::uint32_t e : p.successors(t))
        if (next[t] != (e >> 1) || !(e & 1u)) preds[fill[e >> 1]++] = t;
  }

  nodes_.resize(n);
  for (TaskId t = 0; t < n; ++t) {
    const Task& task = p.task(t);
    Node& node = nodes_[t];
    node.op = task.op();
    if (task.kind() == TaskKind::Compute) node.kind = Kind::Compute, node.amount = task.amount, node.resource = task.resource;
    if (task.kind() == TaskKind::Join) node.amount = task.amount;  // its delay
  }

  std::vector<std::uint64_t> edges;  // before << 32 | after
  const auto edge = [&](std::uint32_t before, std::uint32_t after) {
    edges.push_back((std::uint64_t{before} << 32) | after);
  };
  for (TaskId t = 0; t < n; ++t)
    if (p.task(t).kind() != TaskKind::Transfer)
      for (std::uint32_t i = pred_offsets[t]; i < pred_offsets[t + 1]; ++i) edge(preds[i], t);

  std::vector<TaskId> chain;
  std::vector<std::uint64_t> bytes;
  std::size_t chained = 0, transfers = 0;
  for (TaskId head = 0; head < n; ++head) {
    if (p.task(head).kind() != TaskKind::Transfer || has_prev[head]) continue;
    chain.clear();
    bytes.clear();
    for (TaskId t = head; t != kNone; t = next[t]) {
      MESHSIM_ASSERT(chain.size() < n, "a cycle of stream edges");
      chain.push_back(t);
      bytes.push_back(p.task(t).amount);
    }
    chained += chain.size();
    for (const Layer& layer : layers_of(bytes)) {
      const auto flow = static_cast<std::uint32_t>(nodes_.size());
      MESHSIM_ASSERT(flow < kNone / 2, "too many flows");
      Node node;
      node.kind = Kind::Flow;
      node.amount = layer.bytes;
      node.op = p.task(chain[layer.first]).op();
      node.resource = static_cast<std::uint32_t>(route_links_.size());
      node.hops = layer.last - layer.first + 1;
      for (std::uint32_t k = layer.first; k <= layer.last; ++k) {
        const TaskId t = chain[k];
        route_links_.push_back(p.task(t).resource);
        edge(flow, t);  // the hop is done when every flow over it is
        for (std::uint32_t i = pred_offsets[t]; i < pred_offsets[t + 1]; ++i) edge(preds[i], flow);
      }
      nodes_.push_back(node);
    }
  }
  // Every transfer is in exactly one chain (a chain starts at each transfer without
  // an internal predecessor and follows unique internal successors), unless stream
  // edges form a cycle, which no executor can run.
  for (TaskId t = 0; t < n; ++t) if (p.task(t).kind() == TaskKind::Transfer) ++transfers;
  if (chained != transfers) throw Error("the program's stream edges form a cycle");

  const std::size_t total = nodes_.size();
  offsets_.assign(total + 1, 0);
  predecessors_.assign(total, 0);
  for (std::uint64_t e : edges) {
    ++offsets_[(e >> 32) + 1];
    ++predecessors_[e & 0xffffffffu];
  }
  for (std::size_t i = 0; i < total; ++i) offsets_[i + 1] += offsets_[i];
  successors_.resize(edges.size());
  std::vector<std::uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (std::uint64_t e : edges) successors_[fill[e >> 32]++] = static_cast<std::uint32_t>(e & 0xffffffffu);
}

}  // namespace meshsim::sim
