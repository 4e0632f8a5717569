#pragma once
// Tests: whether two programs are the same, task by task (kind, op, amount,
// resource, step) and edge by edge (each task's successors, in order).
#include <algorithm>

#include "sim/program.hpp"

namespace meshsim::sim::testing {

inline bool same_program(const Program& a, const Program& b) {
  if (a.num_tasks() != b.num_tasks() || a.num_edges() != b.num_edges() || a.num_ops() != b.num_ops() ||
      a.num_stream_edges() != b.num_stream_edges())
    return false;
  for (TaskId i = 0; i < a.num_tasks(); ++i) {
    const Task &x = a.task(i), &y = b.task(i);
    if (x.amount != y.amount || x.resource != y.resource || x.op_kind != y.op_kind || a.step(i) != b.step(i))
      return false;
    const auto sa = a.successors(i), sb = b.successors(i);
    if (!std::equal(sa.begin(), sa.end(), sb.begin(), sb.end())) return false;
  }
  return true;
}

}  // namespace meshsim::sim::testing
