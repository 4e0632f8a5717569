#include <catch2/catch.hpp>

#include <vector>

#include "sim/engine.hpp"
#include "sim/executor.hpp"
#include "sim/program.hpp"
#include "sim/reduce.hpp"

using namespace meshsim;
using namespace meshsim::sim;

namespace {

const Resource kLink{1'000'000'000, Tick::from_ps(100'000), 0};

// A chain a -> b (stream) on links `l0`, `l1`, both waiting on a join, and a
// second transfer on l0 queued behind a: a small component with a queue, a
// stream edge and a join.
void chain(ProgramBuilder& b, OpId op, std::uint32_t l0, std::uint32_t l1, std::uint64_t bytes) {
  const TaskId start = b.join(op);
  const TaskId a = b.transfer(l0, bytes, op, 1);
  const TaskId x = b.transfer(l1, bytes, op, 2);
  const TaskId q = b.transfer(l0, bytes / 2, op, 1);
  b.depend(start, a);
  b.depend(start, q);
  b.depend(a, x, EdgeKind::Stream);
}

struct Result {
  Tick makespan;
  std::vector<OpTiming> ops;
  std::uint64_t events = 0;
};

Result run(const Program& p, const std::vector<Resource>& res) {
  Engine e;
  Executor x(e, p, res);
  x.start();
  e.run();
  return {x.makespan(), x.op_timings(), e.events_executed()};
}

}  // namespace

TEST_CASE("reduce: identical independent components run once, with the full program's timings", "[sim]") {
  ProgramBuilder b;
  const OpId op = b.add_op();
  for (std::uint32_t g = 0; g < 4; ++g) chain(b, op, 2 * g, 2 * g + 1, 1000);
  const Program full = std::move(b).finish();
  const std::vector<Resource> res(8, kLink);
  const auto r = reduce(full, res);
  REQUIRE(r.has_value());
  REQUIRE(r->classes.size() == 1);
  CHECK(r->classes[0].copies == 4);
  CHECK(r->classes[0].resources == std::vector<std::uint32_t>{0, 1});
  REQUIRE(r->classes[0].replicas.size() == 3);
  CHECK(r->classes[0].replicas[2] == std::vector<std::uint32_t>{6, 7});
  CHECK(r->program.num_tasks() == 4);
  CHECK(r->full_id == std::vector<TaskId>{0, 1, 2, 3});
  CHECK(r->full_tasks == 16);
  const Result a = run(full, res);
  const Result c = run(r->program, res);
  CHECK(a.makespan == c.makespan);
  CHECK(a.ops[0].begin == c.ops[0].begin);
  CHECK(a.ops[0].end == c.ops[0].end);
  CHECK(a.events == 4 * c.events);
}

TEST_CASE("reduce: components that differ in anything are classes of their own", "[sim]") {
  const std::vector<Resource> res(8, kLink);
  SECTION("bytes") {
    ProgramBuilder b;
    const OpId op = b.add_op();
    chain(b, op, 0, 1, 1000);
    chain(b, op, 2, 3, 1000);
    chain(b, op, 4, 5, 999);
    const auto r = reduce(std::move(b).finish(), res);
    REQUIRE(r.has_value());
    CHECK(r->classes.size() == 2);
    CHECK(r->classes[0].copies == 2);
    CHECK(r->classes[1].copies == 1);
  }
  SECTION("a resource's bandwidth") {
    ProgramBuilder b;
    const OpId op = b.add_op();
    chain(b, op, 0, 1, 1000);
    chain(b, op, 2, 3, 1000);
    std::vector<Resource> slow = res;
    slow[3].bandwidth_bytes_per_s /= 2;
    CHECK_FALSE(reduce(std::move(b).finish(), slow).has_value());
  }
  SECTION("the op") {
    ProgramBuilder b;
    const OpId op0 = b.add_op();
    const OpId op1 = b.add_op();
    chain(b, op0, 0, 1, 1000);
    chain(b, op1, 2, 3, 1000);
    CHECK_FALSE(reduce(std::move(b).finish(), res).has_value());
  }
  SECTION("the pattern of resources: one link used twice instead of two") {
    ProgramBuilder b;
    const OpId op = b.add_op();
    chain(b, op, 0, 1, 1000);
    chain(b, op, 2, 2, 1000);
    CHECK_FALSE(reduce(std::move(b).finish(), res).has_value());
  }
  SECTION("an edge's kind") {
    ProgramBuilder b;
    const OpId op = b.add_op();
    for (std::uint32_t g = 0; g < 2; ++g) {
      const TaskId a = b.transfer(2 * g, 1000, op);
      const TaskId x = b.transfer(2 * g + 1, 1000, op);
      b.depend(a, x, g == 0 ? EdgeKind::Stream : EdgeKind::Full);
    }
    CHECK_FALSE(reduce(std::move(b).finish(), res).has_value());
  }
}

TEST_CASE("reduce: a shared resource or an edge joins components", "[sim]") {
  const std::vector<Resource> res(8, kLink);
  SECTION("a link used by two groups: one component, nothing to reduce") {
    ProgramBuilder b;
    const OpId op = b.add_op();
    chain(b, op, 0, 1, 1000);
    chain(b, op, 2, 1, 1000);
    CHECK_FALSE(reduce(std::move(b).finish(), res).has_value());
  }
  SECTION("a third group tied to the second by an edge is no longer its copy") {
    ProgramBuilder b;
    const OpId op = b.add_op();
    chain(b, op, 0, 1, 1000);
    chain(b, op, 2, 3, 1000);
    chain(b, op, 4, 5, 1000);
    const TaskId tie = b.join(op);
    b.depend(5, tie);  // the second chain's first transfer
    const Program full = std::move(b).finish();
    const auto r = reduce(full, res);
    REQUIRE(r.has_value());  // the first and third chains are still copies
    CHECK(r->classes.size() == 2);
    const Result a = run(full, res);
    const Result c = run(r->program, res);
    CHECK(a.makespan == c.makespan);
  }
}

TEST_CASE("reduce: compute tasks and joins without resources", "[sim]") {
  std::vector<Resource> res(4, Resource{0, kZeroTick, 0});
  ProgramBuilder b;
  const OpId op = b.add_op();
  for (std::uint32_t u = 0; u < 4; ++u) {
    const TaskId c = b.compute(u, Tick::from_ps(5000), op);
    const TaskId j = b.join(op);
    b.depend(c, j);
  }
  const Program full = std::move(b).finish();
  const auto r = reduce(full, res);
  REQUIRE(r.has_value());
  CHECK(r->classes[0].copies == 4);
  CHECK(run(r->program, res).makespan == run(full, res).makespan);
  CHECK(run(r->program, res).makespan.ps() == 5000);
}
