// The SimGrid engine on hand-made graphs: its configuration gives the plain-link
// times of docs/CROSSCHECK.md, it shares bandwidth max-min, and its failures
// come back as errors, not as a dead process.
#include <catch2/catch.hpp>

#include <vector>

#include "base/error.hpp"
#include "sim/flow_graph.hpp"
#include "sim/program.hpp"
#include "sim/simgrid/simgrid_executor.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

constexpr std::uint64_t kW = 45'000'000'000;   // 45 GB/s one way (TPU v5e ICI)
constexpr Tick kLatency = Tick::from_ps(1'000'000);  // 1 us per hop

// Nodes 0 -> 1 -> 2 by links 0 and 1; node 0's compute unit is resource 2.
std::vector<FlowResource> line() {
  return {{kW, kLatency, 0, 1}, {kW, kLatency, 1, 2}, {0, kZeroTick, 0, 0}};
}

std::int64_t ps(double seconds) { return static_cast<std::int64_t>(seconds * 1e12 + 0.5); }

}  // namespace

TEST_CASE("one transfer alone on an idle link takes latency + bytes / bandwidth") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId t = b.transfer(0, 1'000'000, op);
  const Program p = std::move(b).finish();
  const FlowGraph g(p);
  const SimgridRun run = run_on_simgrid(g, line(), 3);
  // 1 MB / 45 GB/s = 22.222 us, + 1 us: 23.222 us.
  CHECK(std::abs(run.tasks[t].done.ps() - ps(1e6 / 45e9 + 1e-6)) <= 1);
  CHECK(run.tasks[t].start == kZeroTick);
  CHECK(run.flows == 1);
  CHECK(run.unfinished == 0);
}

TEST_CASE("a routed message pays every hop's latency once and the bandwidth once") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId h1 = b.transfer(0, 4'500'000, op), h2 = b.transfer(1, 4'500'000, op);
  b.depend(h1, h2, EdgeKind::Stream);
  const Program p = std::move(b).finish();
  const SimgridRun run = run_on_simgrid(FlowGraph(p), line(), 3);
  CHECK(std::abs(run.makespan.ps() - ps(4.5e6 / 45e9 + 2e-6)) <= 1);
}

TEST_CASE("two flows on one link share its bandwidth") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId a = b.transfer(0, 1'000'000, op), c = b.transfer(0, 1'000'000, op);
  const Program p = std::move(b).finish();
  const SimgridRun run = run_on_simgrid(FlowGraph(p), line(), 3);
  // Max-min: each gets half the link, both finish together.
  CHECK(run.tasks[a].done == run.tasks[c].done);
  CHECK(std::abs(run.tasks[a].done.ps() - ps(2e6 / 45e9 + 1e-6)) <= 1);
}

TEST_CASE("computes take their duration and dependencies are kept") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId c = b.compute(2, Tick::from_ps(5'000'000), op);
  const TaskId t = b.transfer(0, 450'000, op);
  b.depend(c, t);
  const Program p = std::move(b).finish();
  const SimgridRun run = run_on_simgrid(FlowGraph(p), line(), 3);
  CHECK(run.tasks[c].done.ps() == 5'000'000);
  CHECK(run.tasks[t].start.ps() == 5'000'000);
  CHECK(std::abs(run.tasks[t].done.ps() - (5'000'000 + ps(450'000 / 45e9 + 1e-6))) <= 1);
  CHECK(run.computes == 1);
}

TEST_CASE("a dependency cycle leaves tasks unfinished instead of hanging") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId a = b.transfer(0, 10, op), c = b.transfer(1, 10, op);
  b.depend(a, c);
  b.depend(c, a);
  const Program p = std::move(b).finish();
  const SimgridRun run = run_on_simgrid(FlowGraph(p), line(), 3);
  CHECK(run.unfinished > 0);
}

TEST_CASE("SimGrid failing or aborting its process becomes an error") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  b.transfer(0, 10, op);
  const Program p = std::move(b).finish();
  const FlowGraph g(p);
  const auto failure = [&](const std::string& setting) {
    const std::vector<std::string> config{setting};
    try {
      run_on_simgrid(g, line(), 3, config);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // An unknown key: SimGrid throws, the child reports it and exits with a code.
  const std::string unknown = failure("no/such-key:1");
  CHECK(unknown.rfind("SimGrid engine failed (it exited with code", 0) == 0);
  CHECK(unknown.find("no/such-key") != std::string::npos);
  // A bad value for a known key: SimGrid kills its process.
  const std::string bad = failure("network/model:NoSuchModel");
  INFO(bad);
  CHECK(bad.rfind("SimGrid engine failed", 0) == 0);
  CHECK(bad.find("NoSuchModel") != std::string::npos);
  // The process that called SimGrid is still here and can run it again.
  CHECK(run_on_simgrid(g, line(), 3).unfinished == 0);
}
