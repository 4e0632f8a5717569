// A deliberately broken schedule: the engine runs out of events with tasks still
// pending. The driver must stop with an error naming the stuck ops, their chips
// and a dependency cycle, never hang and never report the truncated run.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "driver/expand.hpp"
#include "driver/simulate.hpp"
#include "sim/program.hpp"
#include "workloads/workload.hpp"

using namespace meshsim;

namespace {

// Four chips in a ring; "second" runs after "first".
const char* kWorkload = R"({
  "hardware": "tpu-v5e", "topology": {"shape": [4], "wraparound": true}, "mesh": {"X": 4},
  "ops": [
    {"name": "first", "kind": "all_gather", "bytes": 4096, "axes": ["X"]},
    {"name": "second", "kind": "all_reduce", "bytes": 4096, "axes": ["X"], "after": ["first"]}
  ]
})";

// A copy of `p` with one more edge (before -> after).
sim::Program with_edge(const sim::Program& p, sim::TaskId before, sim::TaskId after) {
  sim::ProgramBuilder b;
  for (std::uint32_t op = 0; op < p.num_ops(); ++op) b.add_op();
  for (sim::TaskId t = 0; t < p.num_tasks(); ++t) {
    const sim::Task& task = p.task(t);
    switch (task.kind()) {
      case sim::TaskKind::Transfer:
        b.transfer(task.resource, task.amount, task.op(), p.step(t));
        break;
      case sim::TaskKind::Compute:
        b.compute(task.resource, Tick::from_ps(static_cast<std::int64_t>(task.amount)), task.op());
        break;
      case sim::TaskKind::Join:
        b.join(task.op());
        break;
    }
  }
  for (sim::TaskId t = 0; t < p.num_tasks(); ++t)
    for (std::uint32_t e : p.successors(t)) b.depend(t, e >> 1, e & 1u ? sim::EdgeKind::Stream : sim::EdgeKind::Full);
  b.depend(before, after);
  return std::move(b).finish();
}

std::string deadlock_message(const workloads::Workload& w, driver::RunContext& run, driver::Expanded& ex) {
  try {
    driver::simulate_expanded(w, run, ex);
  } catch (const InputError& e) {
    FAIL("an input error instead of the deadlock: " << e.what());
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("the broken schedule ran to a (truncated) success");
  return {};
}

}  // namespace

TEST_CASE("Deadlock: the unbroken program runs every task", "[driver][deadlock]") {
  const workloads::Workload w = workloads::parse_workload(kWorkload, "w.json");
  driver::RunContext torus_run(w);
  const driver::Expanded ex = driver::expand(w, torus_run);
  const driver::RunResult r = driver::simulate_expanded(w, torus_run, ex);
  CHECK(r.ops.size() == 2);
  CHECK(r.ops[1].begin >= r.ops[0].end);
}

TEST_CASE("Deadlock: a cycle between two ops names both ops, the chip and the cycle", "[driver][deadlock]") {
  const workloads::Workload w = workloads::parse_workload(kWorkload, "w.json");
  driver::RunContext torus_run(w);
  driver::Expanded ex = driver::expand(w, torus_run);
  // "first" on chip 2 now also waits for "second" to finish on chip 2, which waits
  // for "first": a schedule bug.
  const sim::TaskId first_entry_2 = ex.op_ports[0].entry_begin + 2;
  const sim::TaskId second_exit_2 = ex.op_ports[1].entry_begin + ex.chips + 2;
  ex.program = with_edge(ex.program, second_exit_2, first_entry_2);
  const std::string m = deadlock_message(w, torus_run, ex);
  INFO(m);
  CHECK(m.starts_with("w.json:/ops/0: the schedule deadlocked: "));
  CHECK(m.find(" tasks never ran, in 2 ops: 'first' on chips (0), (1), (2), (3) and 'second' on chips ") != std::string::npos);
  // The cycle runs through the added edge: second's exit on chip 2 -> first's entry on chip 2.
  CHECK(m.find("dependency cycle: ") != std::string::npos);
  CHECK(m.find("'second' exit on (2) -> 'first' entry on (2)") != std::string::npos);
  CHECK(m.find("executor bug") == std::string::npos);
  CHECK(m.find('\n') == std::string::npos);  // one line
}

TEST_CASE("Deadlock: a cycle inside one op's transfers", "[driver][deadlock]") {
  const workloads::Workload w = workloads::parse_workload(kWorkload, "w.json");
  driver::RunContext torus_run(w);
  driver::Expanded ex = driver::expand(w, torus_run);
  // A transfer that "first"'s exit on chip 0 waits for now also waits for that exit.
  const sim::TaskId exit_0 = ex.op_ports[0].entry_begin + ex.chips;
  sim::TaskId transfer = 0;
  const auto feeds_exit = [&](sim::TaskId t) {
    for (std::uint32_t e : ex.program.successors(t))
      if (e >> 1 == exit_0) return true;
    return false;
  };
  while (ex.program.task(transfer).kind() != sim::TaskKind::Transfer || !feeds_exit(transfer)) ++transfer;
  REQUIRE(ex.program.task(transfer).op() == 0);
  ex.program = with_edge(ex.program, exit_0, transfer);
  const std::string m = deadlock_message(w, torus_run, ex);
  INFO(m);
  CHECK(m.starts_with("w.json:/ops/0: the schedule deadlocked: "));
  CHECK(m.find("'first' exit on (0) -> 'first' hop ") != std::string::npos);
  CHECK(m.find(" and 'second' on chips (0), (1), (2), (3); ") != std::string::npos);  // everything after it is stuck too
}
