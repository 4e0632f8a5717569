// AllReduce = ReduceScatter then AllGather. Each part reduces the axes in its
// order (schedule.hpp), then gathers them back in the reverse order. Equal
// split: the parts run concurrently, each on its own, so every axis's links
// work in every phase. Balanced: the ReduceScatter's stages in lock step, then
// the AllGather's (each part's gather at its gather stage), so the AllReduce
// takes its ReduceScatter followed by its AllGather.
#include <algorithm>

#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

void all_reduce(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports, Schedule schedule, PlanCache* plans) {
  if (axes.empty()) return;
  PlanCache own;
  const MultiAxisPlan plan = (plans ? *plans : own).parts(t, Kind::AllReduce, axes, group_bytes, schedule);
  const int n = static_cast<int>(axes.size());
  std::vector<std::vector<Phase>> parts;
  for (AxisOrderPart part : plan.parts) {
    std::vector<Phase> phases = reduce_scatter_phases(part, part.bytes);
    // Gather back in the reverse order (the same rings, backwards).
    std::reverse(part.order.begin(), part.order.end());
    std::reverse(part.sizes.begin(), part.sizes.end());
    std::reverse(part.rings.begin(), part.rings.end());
    const std::vector<Phase> gather = all_gather_phases(part, phases.back().bytes);
    if (plan.lockstep) {
      // The part reduces in stages [first, first + n) and gathers, mirrored, in
      // stages [S + (S - n - first), ...) of the 2S.
      std::vector<Phase> slots = staged(phases, part.first_stage, 2 * plan.stages);
      std::copy(gather.begin(), gather.end(), slots.begin() + (2 * plan.stages - n - part.first_stage));
      parts.push_back(std::move(slots));
    } else {
      phases.insert(phases.end(), gather.begin(), gather.end());
      parts.push_back(std::move(phases));
    }
  }
  run_parts(b, t, parts, ports, plan.lockstep);
}

}  // namespace meshsim::collectives
