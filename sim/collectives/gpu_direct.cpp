// Direct algorithms: the one-shot all-reduce and NCCL's all-to-all, every GPU
// sending to every other along its route.
#include "sim/collectives/gpu_internal.hpp"

#include <cstdint>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

// One-shot all-reduce: every GPU sends its whole buffer to every other and adds
// up what it receives; one step of latency, (N-1) V through every port.
void direct_all_reduce(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                       std::uint64_t group_bytes, const OpPorts& ports) {
  for (const auto& ring : rings)
    for (std::size_t k = 1; k < ring.size(); ++k)
      for (std::size_t i = 0; i < ring.size(); ++i)
        routed(b, f.route(ring[i], ring[(i + k) % ring.size()]), group_bytes, ring[i], ring[(i + k) % ring.size()],
               ports);
}

void direct_all_to_all(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                       std::uint64_t group_bytes, const OpPorts& ports) {
  const std::uint64_t n = rings.front().size();
  const std::uint64_t piece = ceil_div(group_bytes, n * n);
  // Shifted destinations (NCCL's alltoall order): in round k every GPU sends to
  // the one k places after it, so every GPU's port receives one piece a round.
  for (const auto& ring : rings)
    for (std::size_t k = 1; k < ring.size(); ++k)
      for (std::size_t i = 0; i < ring.size(); ++i)
        routed(b, f.route(ring[i], ring[(i + k) % ring.size()]), piece, ring[i], ring[(i + k) % ring.size()], ports);
}

}  // namespace meshsim::collectives::gpu
