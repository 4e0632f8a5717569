// AllGather over one or several axes.
//
// One axis: a bidirectional ring (wraparound) or a line (no wraparound), see
// ring_phase.hpp. Several axes: the data is split into parts, each gathering the
// axes in its own order (schedule.hpp): the equal split's N rotations keep every
// axis busy in every phase on a cube (the cheat sheet's N_axes factor); the
// balanced split gives each order the share, and the stage, that evens out the
// link classes, its parts in lock step.
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

void all_gather(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports, Schedule schedule, PlanCache* plans) {
  if (axes.empty()) return;
  std::uint64_t group = 1;
  for (int a : axes) group *= static_cast<std::uint64_t>(t.axis(a).size);
  PlanCache own;
  const MultiAxisPlan plan = (plans ? *plans : own).parts(t, Kind::AllGather, axes, group_bytes, schedule);
  std::vector<std::vector<Phase>> parts;
  for (const AxisOrderPart& part : plan.parts) {
    std::vector<Phase> phases = all_gather_phases(part, ceil_div(part.bytes, group));
    parts.push_back(plan.lockstep ? staged(phases, part.first_stage, plan.stages) : std::move(phases));
  }
  run_parts(b, t, parts, ports, plan.lockstep);
}

}  // namespace meshsim::collectives
