// The hierarchical all-reduce (meshsim's, not NCCL's): a reduce-scatter over the
// GPUs of each node, an all-reduce over each rail across nodes, an all-gather in
// each node, with a barrier per GPU between the phases.
#include "sim/collectives/gpu_internal.hpp"

#include <cstdint>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

void hierarchical_all_reduce(ProgramBuilder& b, const Fabric& f, const Torus& coords, std::span<const int> axes,
                             std::uint64_t group_bytes, const OpPorts& ports) {
  const auto barrier = [&] { return detail::make_joins(b, ports.entry, ports.op); };
  // Phases with a per-GPU barrier between them: node rings, rail rings, node rings.
  const std::vector<int> in_node = local_axes_of(coords, axes), across = node_axes_of(coords, axes);
  const auto node_rings = active_groups(rings(coords, in_node), ports);
  const auto rail_rings = active_groups(rings(coords, across), ports);
  const std::uint64_t g = node_rings.front().size();
  const std::vector<TaskId> a = barrier(), c = barrier();
  for (ChipId chip = 0; chip < coords.num_chips(); ++chip) {
    if (!ports.active(chip)) continue;
    b.depend(ports.entry[chip], a[chip]);
    b.depend(a[chip], c[chip]);
    b.depend(c[chip], ports.exit[chip]);
  }
  ring_reduce(b, f, node_rings, ceil_div(group_bytes, g), ports.entry, a, ports.op);
  const std::vector<TaskId> mid = barrier();
  for (ChipId chip = 0; chip < coords.num_chips(); ++chip) {
    if (!ports.active(chip)) continue;
    b.depend(a[chip], mid[chip]);
    b.depend(mid[chip], c[chip]);
  }
  const std::uint64_t shard = ceil_div(group_bytes, g), m = rail_rings.front().size();
  ring_reduce(b, f, rail_rings, ceil_div(shard, m), a, mid, ports.op);
  ring_gather(b, f, rail_rings, ceil_div(shard, m), mid, c, ports.op);
  ring_gather(b, f, node_rings, shard, c, ports.exit, ports.op);
}

}  // namespace meshsim::collectives::gpu
