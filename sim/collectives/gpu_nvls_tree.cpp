// NCCL's NVLS tree across nodes: NVLS in every node, a double binary tree of
// the nodes' heads between them.
#include "sim/collectives/gpu_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

NvlsTreeCut nvls_tree_cut(const Fabric& f, std::span<const ChipId> group, std::uint64_t group_bytes) {
  // NCCL_NVLS_CHUNKSIZE's default (src/transport/nvls.cc) and NCCL's cut
  // (src/enqueue.cc, NCCL 2.29): NVLSTREE_MAX_CHUNKSIZE unset caps the chunk at
  // 64 KiB on 4 nodes and more; its rules for chunks above 128 KiB never apply.
  constexpr std::uint64_t kNvlsChunk = 128 * 1024;
  NvlsTreeCut out;
  out.channels = static_cast<std::uint64_t>(std::max(f.nvls_channels(), 1));
  const std::uint64_t nodes = std::max<std::uint64_t>(node_count(f, group), 1);
  const std::uint64_t heads = nvls_owners(std::max<std::uint64_t>(group.size() / nodes, 1));
  out.heads = heads;
  std::uint64_t chunk = nodes >= 4 ? kNvlsChunk / 2 : kNvlsChunk;
  const std::uint64_t concurrent = out.channels * heads;  // NCCL's concurrentOps
  if (group_bytes < 4 * concurrent * chunk && chunk > 65536) chunk = 65536;
  if (group_bytes < concurrent * chunk && chunk > 32768) chunk = 32768;
  out.per_channel = ceil_div(group_bytes, out.channels);
  out.loops = chunk_count(out.per_channel, heads * chunk);
  out.piece = ceil_div(out.per_channel, out.loops * heads);
  return out;
}

// NCCL's NVLS tree (docs/MODEL.md, "GPU fabrics"): on each of the fabric's NVLS
// channels (channel c on tree c % 2 of the double binary tree), loop by loop,
// GPU h of every node heads piece h of the loop (tree_channels' rail h: its
// chains start at GPU h; the first 32 GPUs of a larger node: nvls_tree_cut).
// Up, children before parents: the switch reduces the piece of every GPU of the
// node (each GPU's up link carries it, a load-reduce as NVLS's) down to the
// head, which adds its children's sums as they arrive and sends the node's sum
// on to its parent's head over its NIC (the rail's route); the root's head
// holds the total. Down, parents first: each head
// stores the total once into its switch, which multicasts it to every GPU of
// the node, and sends it on to its children's heads. A head's next load-reduce
// waits for its last (its warps reduce one piece at a time), and every network
// connection keeps at most 8 pieces in flight (NCCL_STEPS). Multimem traffic
// runs at the switches' NVLS efficiency (nvls_link_bytes). Tasks are listed by
// loop, channel, head, phase and node position.
void nvls_tree_all_reduce(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& groups,
                          std::uint64_t group_bytes, const OpPorts& ports) {
  constexpr std::uint64_t kWindow = Rounds::kWindow;
  MESHSIM_ASSERT(f.nvls_efficiency() > 0, "an NVLS tree on switches without NVLink SHARP");
  for (const auto& group : groups) {
    const std::vector<TreeChannel> all = tree_channels(f, group);  // channel 2h + t: rail h, tree t
    const NvlsTreeCut cut = nvls_tree_cut(f, group, group_bytes);
    const std::size_t m = all.front().chains.size(), g = static_cast<std::size_t>(cut.heads);
    MESHSIM_ASSERT(m >= 2, "an NVLS tree inside one node");
    const std::uint64_t multimem = nvls_link_bytes(cut.piece, f.nvls_efficiency());
    std::array<std::vector<std::vector<std::uint32_t>>, 2> children;  // per tree, by position
    for (std::size_t t = 0; t < 2; ++t) {
      children[t].assign(m, {});
      for (std::uint32_t i = 1; i < m; ++i) children[t][all[t].parent[i]].push_back(i);
    }
    // Per (channel, head) unit and node position: the head's last load-reduce,
    // and per window slot the last hop of the node's edge up to its parent and
    // of the edge down into it.
    const std::size_t units = static_cast<std::size_t>(cut.channels) * g;
    std::vector<TaskId> sum(units * m, 0), up(units * m * kWindow, 0), down(units * m * kWindow, 0);
    Rounds rounds(b);
    for (std::uint64_t k = 0; k < cut.loops; ++k) {
      if (rounds.repeated(k, cut.loops)) break;
      const bool wait = k >= kWindow;  // the same slot holds loop k - kWindow
      for (std::size_t c = 0; c < cut.channels; ++c) {
        const std::size_t t = c % 2;
        for (std::size_t h = 0; h < g; ++h) {
          const TreeChannel& ch = all[2 * h + t];
          const std::size_t u = c * g + h;
          const auto slot = [&](std::size_t i) { return (u * m + i) * kWindow + k % kWindow; };
          for (std::size_t i = m; i-- > 0;) {
            const std::vector<ChipId>& node = ch.chains[i];
            const TaskId reduced = b.transfer(f.nvlink_down(node[0]), multimem, ports.op, 2);
            for (ChipId x : node) {
              const TaskId load = b.transfer(f.nvlink_up(x), multimem, ports.op, 1);
              b.depend(ports.entry[x], load);
              if (k > 0) b.depend(sum[u * m + i], load);
              b.depend(load, reduced, sim::EdgeKind::Stream);
            }
            sum[u * m + i] = reduced;
            if (i == 0) break;
            const auto [first, last] = hop(b, f.route(node[0], ch.chains[ch.parent[i]][0]), cut.piece, ports.op, 3);
            if (wait) b.depend(up[slot(i)], first);
            b.depend(reduced, first, sim::EdgeKind::Stream);
            for (std::uint32_t kid : children[t][i]) b.depend(up[slot(kid)], first, sim::EdgeKind::Stream);
            up[slot(i)] = last;
          }
          for (std::size_t i = 0; i < m; ++i) {
            // What node i's total waits for: at the root its sum and its
            // children's, elsewhere the edge down from its parent.
            const auto total = [&](TaskId x) {
              if (i > 0) {
                b.depend(down[slot(i)], x, sim::EdgeKind::Stream);
                return;
              }
              b.depend(sum[u * m], x, sim::EdgeKind::Stream);
              for (std::uint32_t kid : children[t][0]) b.depend(up[slot(kid)], x, sim::EdgeKind::Stream);
            };
            const std::vector<ChipId>& node = ch.chains[i];
            const TaskId store = b.transfer(f.nvlink_up(node[0]), multimem, ports.op, 5);
            total(store);
            for (ChipId x : node) {
              const TaskId copy = b.transfer(f.nvlink_down(x), multimem, ports.op, 6);
              b.depend(store, copy, sim::EdgeKind::Stream);
              b.depend(copy, ports.exit[x]);
            }
            for (std::uint32_t kid : children[t][i]) {
              const auto [first, last] = hop(b, f.route(node[0], ch.chains[kid][0]), cut.piece, ports.op, 4);
              if (wait) b.depend(down[slot(kid)], first);
              total(first);
              down[slot(kid)] = last;
            }
          }
        }
      }
    }
  }
}

}  // namespace meshsim::collectives::gpu
