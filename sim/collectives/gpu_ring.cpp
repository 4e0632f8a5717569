// NCCL's ring on a GPU fabric: the gather and reduce-scatter phases, ring by ring
// and channel by channel, and the all-reduce as the one then the other.
#include "sim/collectives/gpu_internal.hpp"

#include <cstdint>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

namespace {

// A ring step: the transfers of one routed hop between neighbouring GPUs.
struct StepChain {
  std::size_t ring;   // which ring
  std::size_t start;  // position the chain starts from
  int steps;          // ring steps
  bool deliver_each;  // every step delivers (gather) or only the last (reduce)
  TaskId prev = 0;
  bool has_prev = false;
};

// Builds chains of ring steps step-major (see ring_phase.cpp: neighbouring task
// ids for tasks that run together).
void build_chains(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                  std::vector<StepChain>& chains, std::uint64_t bytes, std::span<const TaskId> entry,
                  std::span<const TaskId> exit, OpId op) {
  int max_steps = 0;
  for (const StepChain& c : chains) max_steps = std::max(max_steps, c.steps);
  for (int k = 0; k < max_steps; ++k)
    for (StepChain& c : chains) {
      if (k >= c.steps) continue;
      const auto& ring = rings[c.ring];
      const ChipId from = ring[(c.start + static_cast<std::size_t>(k)) % ring.size()];
      const ChipId to = ring[(c.start + static_cast<std::size_t>(k) + 1) % ring.size()];
      const std::vector<LinkId> route = f.route(from, to);
      MESHSIM_ASSERT(!route.empty(), "ring step to itself");
      for (std::size_t h = 0; h < route.size(); ++h) {
        const TaskId x = b.transfer(route[h], bytes, op, static_cast<std::uint16_t>(k + 1));
        if (h == 0) b.depend(entry[from], x);
        if (c.has_prev) b.depend(c.prev, x, sim::EdgeKind::Stream);
        c.prev = x;
        c.has_prev = true;
      }
      if (c.deliver_each || k + 1 == c.steps) b.depend(c.prev, exit[to]);
    }
}

}  // namespace

void ring_gather(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                 std::uint64_t shard, std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op) {
  std::vector<StepChain> chains;
  for (std::size_t r = 0; r < rings.size(); ++r)
    for (std::size_t i = 0; i < rings[r].size(); ++i)
      if (rings[r].size() > 1) chains.push_back({r, i, static_cast<int>(rings[r].size()) - 1, true});
  build_chains(b, f, rings, chains, shard, entry, exit, op);
}

void ring_reduce(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                 std::uint64_t chunk, std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op) {
  std::vector<StepChain> chains;
  for (std::size_t r = 0; r < rings.size(); ++r)
    for (std::size_t d = 0; d < rings[r].size(); ++d)
      if (rings[r].size() > 1) chains.push_back({r, (d + 1) % rings[r].size(), static_cast<int>(rings[r].size()) - 1, false});
  build_chains(b, f, rings, chains, chunk, entry, exit, op);
}

void ring_all_reduce(ProgramBuilder& b, const Fabric& f, const Torus& coords,
                     const std::vector<std::vector<ChipId>>& channels, std::uint64_t ring_shard, const OpPorts& ports) {
  // A reduce-scatter, a barrier per GPU, then an all-gather, on every channel.
  const std::vector<TaskId> mid = detail::make_joins(b, ports.entry, ports.op);
  for (ChipId c = 0; c < coords.num_chips(); ++c) {
    if (!ports.active(c)) continue;
    b.depend(ports.entry[c], mid[c]);
    b.depend(mid[c], ports.exit[c]);
  }
  ring_reduce(b, f, channels, ring_shard, ports.entry, mid, ports.op);
  ring_gather(b, f, channels, ring_shard, mid, ports.exit, ports.op);
}

}  // namespace meshsim::collectives::gpu
