#include "driver/critical_path.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace meshsim::driver {

std::vector<CriticalPath> critical_paths(const sim::Program& p, const std::vector<sim::TaskTiming>& t,
                                         const std::vector<std::string>& resource_names) {
  const std::size_t n = p.num_tasks();
  // Predecessors (reverse edges) and, per resource, the tasks in start order.
  std::vector<std::uint32_t> offsets(n + 1, 0), preds;
  for (sim::TaskId i = 0; i < n; ++i)
    for (std::uint32_t e : p.successors(i)) ++offsets[(e >> 1) + 1];
  for (std::size_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  preds.resize(offsets[n]);
  {
    std::vector<std::uint32_t> fill(offsets.begin(), offsets.end() - 1);
    for (sim::TaskId i = 0; i < n; ++i)
      for (std::uint32_t e : p.successors(i)) preds[fill[e >> 1]++] = (i << 1) | (e & 1u);
  }
  // The task that ran on the same resource just before each task.
  std::vector<sim::TaskId> before(n, ~sim::TaskId{0});
  {
    std::vector<sim::TaskId> order;
    for (sim::TaskId i = 0; i < n; ++i)
      if (p.task(i).kind() != sim::TaskKind::Join) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](sim::TaskId a, sim::TaskId b) {
      return std::make_pair(p.task(a).resource, t[a].start) < std::make_pair(p.task(b).resource, t[b].start);
    });
    for (std::size_t k = 1; k < order.size(); ++k)
      if (p.task(order[k]).resource == p.task(order[k - 1]).resource) before[order[k]] = order[k - 1];
  }

  std::vector<CriticalPath> out(p.num_ops());
  std::vector<sim::TaskId> last(p.num_ops(), ~sim::TaskId{0});
  for (sim::TaskId i = 0; i < n; ++i) {
    sim::TaskId& l = last[p.task(i).op()];
    if (l == ~sim::TaskId{0} || t[i].arrival > t[l].arrival) l = i;
  }
  for (sim::OpId op = 0; op < p.num_ops(); ++op) {
    CriticalPath& cp = out[op];
    std::vector<std::string> steps;
    for (sim::TaskId at = last[op]; at != ~sim::TaskId{0};) {
      const sim::Task& task = p.task(at);
      if (task.op() != op) break;  // reached the op's inputs
      if (task.kind() == sim::TaskKind::Transfer) {
        ++cp.hops;
        cp.latency += t[at].arrival - t[at].end;
        cp.wire += t[at].end - t[at].start;
        steps.push_back(fmt::format("{} {} bytes", resource_names[task.resource], task.amount));
      } else if (task.kind() == sim::TaskKind::Compute) {
        ++cp.computes;
        cp.compute += t[at].end - t[at].start;
        steps.push_back(fmt::format("{} {:.3f} us", resource_names[task.resource], (t[at].end - t[at].start).microseconds()));
      } else if (task.amount > 0) {
        const Tick delay = Tick::from_ps(static_cast<std::int64_t>(task.amount));
        cp.fixed += delay;
        steps.push_back(fmt::format("fixed cost {:.3f} us", delay.microseconds()));
      }
      // What let it start: the task ahead of it on its resource, when it waited
      // for that one (its wire time explains the wait), or else its last
      // dependency. A wait behind another op's task is contention: counted, and
      // the walk goes on through this op's own dependency.
      if (task.kind() != sim::TaskKind::Join && t[at].start > t[at].ready && before[at] != ~sim::TaskId{0}) {
        if (p.task(before[at]).op() == op) {
          at = before[at];
          continue;
        }
        cp.queued += t[at].start - t[at].ready;
      }
      sim::TaskId next = ~sim::TaskId{0};
      Tick latest;
      for (std::uint32_t k = offsets[at]; k < offsets[at + 1]; ++k) {
        const sim::TaskId q = preds[k] >> 1;
        const Tick allows = (preds[k] & 1u) ? t[q].start : t[q].arrival;
        if (next == ~sim::TaskId{0} || allows > latest) {
          latest = allows;
          next = q;
        }
      }
      at = next;
    }
    std::reverse(steps.begin(), steps.end());
    if (steps.size() > 6) {
      steps.erase(steps.begin() + 3, steps.end() - 2);
      steps.insert(steps.begin() + 3, "...");
    }
    cp.steps = std::move(steps);
  }
  return out;
}

}  // namespace meshsim::driver
