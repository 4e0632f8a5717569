// ReduceScatter over one or several axes: the mirror of AllGather. Part p of the
// data reduces the axes in the order rotated by p, largest chunks first.
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

void reduce_scatter(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                    const OpPorts& ports) {
  if (axes.empty()) return;
  const std::uint64_t part = ceil_div(group_bytes, axes.size());
  for (std::size_t p = 0; p < axes.size(); ++p) run_phases(b, t, reduce_scatter_phases(t, rotated(axes, p), part), ports);
}

}  // namespace meshsim::collectives
