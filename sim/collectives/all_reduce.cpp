// AllReduce = ReduceScatter then AllGather. Part p reduces the axes in the order
// rotated by p, then gathers them back in the reverse order; the parts run
// concurrently, so every axis's links work in every phase.
#include <algorithm>

#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;

void all_reduce(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports) {
  if (axes.empty()) return;
  const std::uint64_t part = ceil_div(group_bytes, axes.size());
  for (std::size_t p = 0; p < axes.size(); ++p) {
    std::vector<int> order = rotated(axes, p);
    std::vector<Phase> phases = reduce_scatter_phases(t, order, part);
    std::reverse(order.begin(), order.end());
    const std::vector<Phase> gather = all_gather_phases(t, order, phases.back().bytes);
    phases.insert(phases.end(), gather.begin(), gather.end());
    run_phases(b, t, phases, ports);
  }
}

}  // namespace meshsim::collectives
