// ProgramBuilder: a loop's rounds copied from its last one (repeat).
#include <catch2/catch.hpp>

#include <vector>

#include "sim/program.hpp"
#include "same_program.hpp"

using namespace meshsim;
using namespace meshsim::sim;
using meshsim::sim::testing::same_program;

namespace {

// Rounds of a loop over two shared joins: each round a transfer chain a -> b
// (stream) -> c, a waiting for a shared join and for round k - 2's c, c
// feeding the other join; from round `copy_from` + 1 on (when given) the
// rounds are copies of round `copy_from`.
Program rounds(std::size_t n, std::size_t copy_from = 0) {
  ProgramBuilder b;
  const OpId op = b.add_op();
  const TaskId in = b.join(op), out = b.join(op, Tick::from_ps(5), 1);
  const auto pivot = static_cast<TaskId>(b.num_tasks());
  std::vector<TaskId> last;
  TaskId first = 0;
  std::size_t first_edge = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (copy_from > 0 && k == copy_from + 1) {
      b.repeat(first, first_edge, pivot, n - k);
      break;
    }
    first = static_cast<TaskId>(b.num_tasks());
    first_edge = b.num_edges();
    const TaskId a = b.transfer(0, 100, op, 1), x = b.transfer(1, 100, op, 2), c = b.compute(2, Tick::from_ps(7), op);
    b.depend(in, a);
    if (k >= 2) b.depend(last[k - 2], a);
    b.depend(a, x, EdgeKind::Stream);
    b.depend(x, c);
    b.depend(c, out);
    last.push_back(c);
  }
  return std::move(b).finish();
}

}  // namespace

TEST_CASE("ProgramBuilder: rounds copied from the last one built are the rounds built one by one", "[sim]") {
  for (std::size_t n : {3u, 4u, 5u, 9u, 40u}) {
    CAPTURE(n);
    const Program whole = rounds(n);
    CHECK(whole.num_tasks() == 2 + 3 * n);
    // From round 2 on, the first that waits for an earlier round.
    CHECK(same_program(rounds(n, 2), whole));
    // Round 1 does not wait: its copies would not.
    CHECK_FALSE(same_program(rounds(n, 1), whole));
  }
  // The shared joins keep every round's edges, in round order.
  const Program p = rounds(6, 2);
  CHECK(p.successors(0).size() == 6);
  CHECK(p.successors(1).empty());
  CHECK(p.successors(0)[5] == (TaskId{2 + 3 * 5} << 1));
}
