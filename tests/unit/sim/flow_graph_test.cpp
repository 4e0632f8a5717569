#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "base/error.hpp"
#include "sim/flow_graph.hpp"
#include "sim/program.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

std::vector<std::uint32_t> flows_of(const FlowGraph& g) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = static_cast<std::uint32_t>(g.num_tasks()); i < g.num_nodes(); ++i) out.push_back(i);
  return out;
}

std::vector<std::uint32_t> route(const FlowGraph& g, std::uint32_t flow) {
  const auto r = g.route(flow);
  return {r.begin(), r.end()};
}

// Bytes every link carries, summed over the flows that cross it.
std::map<std::uint32_t, std::uint64_t> link_bytes(const FlowGraph& g) {
  std::map<std::uint32_t, std::uint64_t> out;
  for (std::uint32_t f : flows_of(g))
    for (std::uint32_t l : g.route(f)) out[l] += g.node(f).amount;
  return out;
}

}  // namespace

TEST_CASE("a message routed through middle chips is one flow over its whole route") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId entry = b.join(op), exit = b.join(op);
  const TaskId h1 = b.transfer(10, 1000, op), h2 = b.transfer(11, 1000, op), h3 = b.transfer(12, 1000, op);
  b.depend(entry, h1);
  b.depend(h1, h2, EdgeKind::Stream);
  b.depend(h2, h3, EdgeKind::Stream);
  b.depend(h3, exit);
  const Program p = std::move(b).finish();
  const FlowGraph g(p);
  REQUIRE(g.num_flows() == 1);
  const std::uint32_t f = flows_of(g)[0];
  CHECK(g.node(f).kind == FlowGraph::Kind::Flow);
  CHECK(g.node(f).amount == 1000);
  CHECK(route(g, f) == std::vector<std::uint32_t>{10, 11, 12});
  // The flow waits for the entry; every hop's node waits for the flow; the exit for the last hop.
  CHECK(g.num_predecessors(f) == 1);
  for (TaskId h : {h1, h2, h3}) {
    CHECK(g.node(h).kind == FlowGraph::Kind::Join);
    CHECK(g.num_predecessors(h) == 1);
  }
  CHECK(g.num_predecessors(exit) == 1);
}

TEST_CASE("a relay whose middle chip keeps a copy is stored and forwarded hop by hop") {
  // A ring all-gather chain: each hop also waits for its sender's entry and
  // delivers to its receiver's exit.
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId e0 = b.join(op), e1 = b.join(op), x1 = b.join(op), x2 = b.join(op);
  const TaskId h1 = b.transfer(0, 500, op), h2 = b.transfer(1, 500, op);
  b.depend(e0, h1);
  b.depend(e1, h2);
  b.depend(h1, h2, EdgeKind::Stream);
  b.depend(h1, x1);
  b.depend(h2, x2);
  const Program p = std::move(b).finish();
  const FlowGraph g(p);
  REQUIRE(g.num_flows() == 2);
  const auto flows = flows_of(g);
  CHECK(route(g, flows[0]) == std::vector<std::uint32_t>{0});
  CHECK(route(g, flows[1]) == std::vector<std::uint32_t>{1});
  // The second flow waits for its entry and for the first hop to have arrived.
  CHECK(g.num_predecessors(flows[1]) == 2);
  const auto succ = g.successors(h1);
  CHECK(std::find(succ.begin(), succ.end(), flows[1]) != succ.end());
}

TEST_CASE("a chain of unequal hops is cut into layers that keep every hop's bytes") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId entry = b.join(op);
  // 6, 10, 10, 4, 8 bytes over links 0..4.
  const std::vector<std::uint64_t> bytes{6, 10, 10, 4, 8};
  TaskId prev = 0;
  for (std::uint32_t k = 0; k < bytes.size(); ++k) {
    const TaskId t = b.transfer(k, bytes[k], op);
    if (k == 0)
      b.depend(entry, t);
    else
      b.depend(prev, t, EdgeKind::Stream);
    prev = t;
  }
  const Program p = std::move(b).finish();
  const FlowGraph g(p);
  const auto carried = link_bytes(g);
  for (std::uint32_t k = 0; k < bytes.size(); ++k) CHECK(carried.at(k) == bytes[k]);
  // Each flow's route is a contiguous piece of the chain.
  for (std::uint32_t f : flows_of(g)) {
    const auto r = route(g, f);
    for (std::size_t i = 1; i < r.size(); ++i) CHECK(r[i] == r[i - 1] + 1);
  }
  // Levels 6 -> 10 -> 10 -> 4 -> 8: a 4-byte base over all, then 2 over [0,2], 4 over [1,2], 4 over [4].
  CHECK(g.num_flows() == 4);
}

TEST_CASE("computes and joins keep their ids and edges") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId entry = b.join(op), c = b.compute(7, Tick::from_ps(123), op), exit = b.join(op);
  b.depend(entry, c);
  b.depend(c, exit);
  const Program p = std::move(b).finish();
  const FlowGraph g(p);
  CHECK(g.num_flows() == 0);
  CHECK(g.node(c).kind == FlowGraph::Kind::Compute);
  CHECK(g.node(c).amount == 123);
  CHECK(g.node(c).resource == 7);
  CHECK(g.num_predecessors(exit) == 1);
  CHECK(g.successors(entry).size() == 1);
}

TEST_CASE("a cycle of stream edges is refused") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId a = b.transfer(0, 10, op), c = b.transfer(1, 10, op);
  b.depend(a, c, EdgeKind::Stream);
  b.depend(c, a, EdgeKind::Stream);
  const Program p = std::move(b).finish();
  CHECK_THROWS_AS(FlowGraph(p), Error);
}
