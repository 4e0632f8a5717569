// ReduceScatter over one or several axes: the mirror of AllGather. Each part of
// the data reduces the axes in its order (schedule.hpp), largest chunks first.
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

void reduce_scatter(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                    const OpPorts& ports, Schedule schedule, PlanCache* plans) {
  if (axes.empty()) return;
  PlanCache own;
  const MultiAxisPlan plan = (plans ? *plans : own).parts(t, Kind::ReduceScatter, axes, group_bytes, schedule);
  std::vector<std::vector<Phase>> parts;
  for (const AxisOrderPart& part : plan.parts) {
    std::vector<Phase> phases = reduce_scatter_phases(part, part.bytes);
    parts.push_back(plan.lockstep ? staged(phases, part.first_stage, plan.stages) : std::move(phases));
  }
  run_parts(b, t, parts, ports, plan.lockstep);
}

}  // namespace meshsim::collectives
