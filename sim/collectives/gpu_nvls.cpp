// NVLink SHARP (NCCL's NVLS) in one NVLink domain: load-reduces through the
// switch and multicast stores.
#include "sim/collectives/gpu_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

std::size_t nvls_owners(std::size_t gpus) { return std::min<std::size_t>(gpus, 32); }

std::uint64_t nvls_link_bytes(std::uint64_t bytes, double efficiency) {
  MESHSIM_ASSERT(efficiency > 0 && efficiency <= 1, "NVLS on switches without NVLink SHARP");
  return efficiency == 1 ? bytes : static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / efficiency));
}

// NVLink SHARP all-reduce in one NVLink domain (NCCL's NVLS): GPU g of the
// first H = nvls_owners(N) owns slice g (V/H) and loops over its chunks: a
// load-reduce pulls the chunk from every GPU (each GPU's up link carries it),
// the switch adds the N contributions and sends the sum down to g; g stores it
// once (up) and the switch multicasts it to every GPU (down). The next chunk's
// load-reduce waits for the previous one, so loads and stores of different
// owners interleave on the links. Tasks are listed chunk by
// chunk: the load-reduces, the previous chunk's multicasts, then the stores, so
// that on every link a chunk's loads come before its stores and a chunk's sums
// before the previous chunk's multicasts. Listed so, ties broken by listing
// (driver/translations.hpp) give what activation order gives (8 H100s, 1 MiB to
// 1 GiB); listed owner by owner, an owner's store and multicasts went before the
// loads and sums of the owners after it, 8 % slower on 1 GiB. Multimem traffic
// runs at the switches' NVLS efficiency of the link rate (nvls_link_bytes).
void nvls_all_reduce(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                     std::uint64_t group_bytes, std::uint64_t chunk_bytes, const OpPorts& ports) {
  for (const auto& ring : rings) {
    const std::size_t n = nvls_owners(ring.size());
    const std::uint64_t slice = ceil_div(group_bytes, n);
    const std::uint64_t kChunks = chunk_count(slice, chunk_bytes);
    const std::uint64_t chunk = nvls_link_bytes(ceil_div(slice, kChunks), f.nvls_efficiency());
    std::vector<TaskId> down(n), store(n);  // per owner: the current chunk's sum and store
    for (std::uint64_t k = 0; k <= kChunks; ++k) {
      for (std::size_t o = 0; k < kChunks && o < n; ++o) {
        const TaskId sum = b.transfer(f.nvlink_down(ring[o]), chunk, ports.op, 2);
        for (ChipId s : ring) {
          const TaskId up = b.transfer(f.nvlink_up(s), chunk, ports.op, 1);
          b.depend(ports.entry[s], up);
          if (k > 0) b.depend(down[o], up);  // the owner's previous load-reduce has landed
          b.depend(up, sum, sim::EdgeKind::Stream);
        }
        down[o] = sum;
      }
      for (std::size_t o = 0; k > 0 && o < n; ++o)  // chunk k - 1's multicasts
        for (ChipId d : ring) {
          const TaskId copy = b.transfer(f.nvlink_down(d), chunk, ports.op, 4);
          b.depend(store[o], copy, sim::EdgeKind::Stream);
          b.depend(copy, ports.exit[d]);
        }
      for (std::size_t o = 0; k < kChunks && o < n; ++o) {
        store[o] = b.transfer(f.nvlink_up(ring[o]), chunk, ports.op, 3);
        b.depend(down[o], store[o], sim::EdgeKind::Stream);
      }
    }
  }
}

}  // namespace meshsim::collectives::gpu
