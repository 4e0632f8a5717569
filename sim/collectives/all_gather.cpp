// AllGather over one or several axes.
//
// One axis: a bidirectional ring (wraparound) or a line (no wraparound), see
// ring_phase.hpp. Several axes: the data is split into one part per axis; part p
// gathers the axes in the order rotated by p, so at every phase each axis carries
// one part and all axes' links work at once (the cheat sheet's N_axes factor).
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

void all_gather(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports) {
  if (axes.empty()) return;
  std::uint64_t group = 1;
  for (int a : axes) group *= static_cast<std::uint64_t>(t.axis(a).size);
  const std::uint64_t shard = ceil_div(group_bytes, group * axes.size());
  for (std::size_t part = 0; part < axes.size(); ++part) {
    const std::vector<Phase> phases = all_gather_phases(t, rotated(axes, part), shard);
    run_phases(b, t, phases, ports);
  }
}

}  // namespace meshsim::collectives
