// How large a GPU collective's program is, before it is built: its transfers
// (transfer_bound) and the limits of its pipelined chunks.
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

namespace {

using Count = unsigned __int128;
constexpr std::uint64_t kCountCap = std::uint64_t{1} << 62;

// The most links a transfer between two GPUs of `group` crosses: six between
// pods, four between leaves (a leaf serves one rail of one unit), otherwise two
// (NVLink up and down, or NIC up and down).
Count longest_route(const Fabric& f, const std::vector<ChipId>& group) {
  bool leaves = false, pods = false;
  const int leaf = f.leaf_of(group.front());
  for (ChipId g : group) {
    leaves = leaves || f.leaf_of(g) != leaf;
    pods = pods || f.pod_of_leaf(f.leaf_of(g)) != f.pod_of_leaf(leaf);
  }
  return pods ? 6 : leaves ? 4 : 2;
}

// The hop transfers of one chunk of a tree channel, as nccl_tree_all_reduce
// builds them: every chain edge and every tree edge, up and down.
Count tree_channel_transfers(const Fabric& f, const TreeChannel& ch) {
  Count n = 0;
  for (std::size_t i = 0; i < ch.chains.size(); ++i) {
    const auto& chain = ch.chains[i];
    for (std::size_t j = 1; j < chain.size(); ++j)
      n += f.route(chain[j], chain[j - 1]).size() + f.route(chain[j - 1], chain[j]).size();
    if (i > 0) {
      const ChipId parent = ch.chains[ch.parent[i]].front();
      n += f.route(chain.front(), parent).size() + f.route(parent, chain.front()).size();
    }
  }
  return n;
}

// ring_gather / ring_reduce: a chain starts at every position and takes N-1
// steps, so every ring edge is crossed by N-1 chains, each with its route's links.
Count ring_phase_transfers(const Fabric& f, const std::vector<std::vector<ChipId>>& rings) {
  Count total = 0;
  for (const auto& ring : rings) {
    if (ring.size() < 2) continue;
    Count edges = 0;
    for (std::size_t i = 0; i < ring.size(); ++i) edges += f.route(ring[i], ring[(i + 1) % ring.size()]).size();
    total += static_cast<Count>(ring.size() - 1) * edges;
  }
  return total;
}

}  // namespace

std::uint64_t transfer_bound(const Fabric& f, const Torus& coords, Kind kind, Algorithm algorithm,
                             std::span<const int> axes, std::uint64_t group_bytes, std::uint64_t chunk_bytes,
                             Protocol protocol) {
  chunk_bytes = step_bytes(protocol, chunk_bytes);
  const std::vector<std::vector<ChipId>> rs = rings(coords, axes);
  if (rs.empty() || rs.front().size() < 2) return 0;
  Count total = 0;
  // Every ordered pair of a group once (direct all-reduce, all-to-all).
  auto all_pairs = [&] {
    Count n = 0;
    for (const auto& ring : rs) n += static_cast<Count>(ring.size()) * (ring.size() - 1) * longest_route(f, ring);
    return n;
  };
  switch (kind) {
    case Kind::AllGather:
    case Kind::ReduceScatter:
      total = ring_phase_transfers(f, channel_rings(coords, axes));
      break;
    case Kind::AllToAll:
      total = all_pairs();
      break;
    case Kind::AllReduce:
      switch (algorithm) {
        case Algorithm::Ring:
          total = 2 * ring_phase_transfers(f, channel_rings(coords, axes));
          break;
        case Algorithm::Direct:
          total = all_pairs();
          break;
        case Algorithm::Hierarchical: {
          const std::vector<int> in_node = local_axes_of(coords, axes), across = node_axes_of(coords, axes);
          total = 2 * ring_phase_transfers(f, rings(coords, in_node)) + 2 * ring_phase_transfers(f, rings(coords, across));
          break;
        }
        case Algorithm::Nvls:
          // Per chunk and owner: N loads up, one down, one store up, N copies down.
          for (const auto& ring : rs) {
            const Count n = ring.size();
            const std::size_t owned_by = nvls_owners(ring.size());
            total += static_cast<Count>(chunk_count(ceil_div(group_bytes, owned_by), chunk_bytes)) * owned_by *
                     (2 * n + 2);
          }
          break;
        case Algorithm::Tree:
          // 2G channels of V/2G (tree_channels), each with per chunk every chain
          // edge and tree edge once up and once down, each a routed hop: exact.
          for (const auto& ring : rs) {
            const std::vector<TreeChannel> channels = tree_channels(f, ring);
            const Count chunks = tree_cut(f, ring, group_bytes, channels.size(), chunk_bytes, protocol).chunks;
            for (const TreeChannel& ch : channels) total += chunks * tree_channel_transfers(f, ch);
          }
          break;
        case Algorithm::NvlsTree:
          // Per loop, channel and head: every node's G loads, its sum, store and
          // G copies, and each tree edge's route up and down: exact.
          for (const auto& ring : rs) {
            const std::vector<TreeChannel> channels = tree_channels(f, ring);
            const NvlsTreeCut cut = nvls_tree_cut(f, ring, group_bytes);
            const Count g = channels.front().chains.front().size(), m = channels.front().chains.size();
            std::array<Count, 2> per_tree{0, 0};  // summed over the heads
            for (std::size_t h = 0; h < cut.heads; ++h)
              for (std::size_t t = 0; t < 2; ++t) {
                const TreeChannel& ch = channels[2 * h + t];
                per_tree[t] += m * (2 * g + 2);
                for (std::size_t i = 1; i < ch.chains.size(); ++i) {
                  const ChipId a = ch.chains[i][0], p = ch.chains[ch.parent[i]][0];
                  per_tree[t] += static_cast<Count>(f.route(a, p).size() + f.route(p, a).size());
                }
              }
            const Count on_tree1 = cut.channels / 2, on_tree0 = cut.channels - on_tree1;
            total += static_cast<Count>(cut.loops) * (on_tree0 * per_tree[0] + on_tree1 * per_tree[1]);
          }
          break;
      }
      break;
    case Kind::Send:
    case Kind::Matmul:
    case Kind::Elementwise:
      break;
  }
  return total > kCountCap ? kCountCap : static_cast<std::uint64_t>(total);
}

TreeLimits tree_limits(const Fabric& f, const std::vector<ChipId>& group, Protocol protocol, double chunk,
                       std::uint64_t simple_chunk) {
  TreeLimits out;
  const std::vector<TreeChannel> channels = tree_channels(f, group);
  std::vector<std::uint32_t> crossings(f.num_links(), 0);
  struct Step {
    double latency_s = 0, forward_s = 0;
    void widen(const Step& s) {
      latency_s = std::max(latency_s, s.latency_s);
      forward_s = std::max(forward_s, s.forward_s);
    }
  };
  auto cross = [&](ChipId from, ChipId to) {
    Step s;
    for (LinkId l : f.route(from, to)) {
      const double b = static_cast<double>(link_bandwidth(f, l, protocol));
      out.seconds_per_byte = std::max(out.seconds_per_byte, ++crossings[l] / b);
      s.latency_s += link_latency(f, l, protocol).seconds();
      s.forward_s += std::min(chunk, static_cast<double>(link_forward_chunk(f, l, protocol, simple_chunk))) / b;
    }
    return s;
  };
  // The widest step of a chain, and the slowest way between a head and the root,
  // up and down: the sums of its steps, each edge's own route (under leaves
  // and spines a step within a leaf crosses 2 links, across leaves 4).
  Step chain_step, up_most, down_most;
  std::size_t g = 0;
  for (const TreeChannel& ch : channels) {
    const std::size_t m = ch.chains.size();
    g = ch.chains.front().size();
    std::vector<Step> up(m), down(m);  // node i's head to the root, and back; parents come first
    for (std::size_t i = 0; i < m; ++i) {
      const auto& chain = ch.chains[i];
      for (std::size_t j = 1; j < g; ++j) {  // up the chain and down it
        chain_step.widen(cross(chain[j], chain[j - 1]));
        chain_step.widen(cross(chain[j - 1], chain[j]));
      }
      if (i > 0) {
        const std::uint32_t p = ch.parent[i];
        const Step u = cross(chain[0], ch.chains[p][0]), d = cross(ch.chains[p][0], chain[0]);
        up[i] = {up[p].latency_s + u.latency_s, up[p].forward_s + u.forward_s};
        down[i] = {down[p].latency_s + d.latency_s, down[p].forward_s + d.forward_s};
      }
      up_most.widen(up[i]);
      down_most.widen(down[i]);
    }
  }
  // Up the chain and the tree, and down again: over the trees' depth, ceil(log2 M)
  // steps (NCCL's cost model counts floor(log2 M): its root has one child).
  const double chain_steps = 2 * static_cast<double>(g - 1);
  out.latency_s = chain_steps * chain_step.latency_s + up_most.latency_s + down_most.latency_s;
  out.path_forward_s = chain_steps * chain_step.forward_s + up_most.forward_s + down_most.forward_s;
  out.channels = channels.size();
  return out;
}

NvlsTreeLimits nvls_tree_limits(const Fabric& f, const std::vector<ChipId>& group, double piece) {
  NvlsTreeLimits out;
  const std::vector<TreeChannel> all = tree_channels(f, group);  // channel 2h + t: head h, tree t
  const std::size_t heads = nvls_owners(all.front().chains.front().size());
  const std::span<const TreeChannel> channels(all.data(), 2 * heads);
  const double g = static_cast<double>(heads);
  const double efficiency = f.nvls_efficiency();
  MESHSIM_ASSERT(efficiency > 0, "an NVLS tree on switches without NVLink SHARP");
  // Each (head, tree) pair carries V / 2H through every edge, up and down.
  std::vector<std::uint32_t> crossings(f.num_links(), 0);
  double net_seconds_per_unit = 0;
  struct Way {
    double latency_s = 0, forward_s = 0;
  };
  auto cross = [&](ChipId from, ChipId to) {
    Way w;
    for (LinkId l : f.route(from, to)) {
      const double b = static_cast<double>(link_bandwidth(f, l, Protocol::Simple));
      net_seconds_per_unit = std::max(net_seconds_per_unit, ++crossings[l] / b);
      w.latency_s += link_latency(f, l, Protocol::Simple).seconds();
      w.forward_s += piece / b;
    }
    return w;
  };
  Way up_most, down_most;  // the slowest way from a head to the root, and back
  for (const TreeChannel& ch : channels) {
    const std::size_t m = ch.chains.size();
    std::vector<Way> up(m), down(m);  // parents come first
    for (std::size_t i = 1; i < m; ++i) {
      const std::uint32_t p = ch.parent[i];
      const Way u = cross(ch.chains[i][0], ch.chains[p][0]), d = cross(ch.chains[p][0], ch.chains[i][0]);
      up[i] = {up[p].latency_s + u.latency_s, up[p].forward_s + u.forward_s};
      down[i] = {down[p].latency_s + d.latency_s, down[p].forward_s + d.forward_s};
      up_most = {std::max(up_most.latency_s, up[i].latency_s), std::max(up_most.forward_s, up[i].forward_s)};
      down_most = {std::max(down_most.latency_s, down[i].latency_s), std::max(down_most.forward_s, down[i].forward_s)};
    }
  }
  // In the node, two switch round trips of the piece's multimem bytes: the
  // load-reduce (up, then down to the head) and the store and its multicast.
  const ChipId gpu = channels.front().chains.front().front();  // a head
  const LinkId in = f.nvlink_up(gpu), out_link = f.nvlink_down(gpu);
  const double in_b = static_cast<double>(link_bandwidth(f, in, Protocol::Simple));
  const double out_b = static_cast<double>(link_bandwidth(f, out_link, Protocol::Simple));
  const double multimem = piece / efficiency;
  out.latency_s =
      2 * (link_latency(f, in, Protocol::Simple).seconds() + link_latency(f, out_link, Protocol::Simple).seconds()) +
      up_most.latency_s + down_most.latency_s;
  out.path_forward_s = 2 * (multimem / in_b + multimem / out_b) + up_most.forward_s + down_most.forward_s;
  // A head's port each way: its whole buffer and a head's 1/H, as multimem traffic.
  const double nvlink = (1 + 1 / g) / (efficiency * std::min(in_b, out_b));
  out.seconds_per_byte = std::max(nvlink, net_seconds_per_unit / (2 * g));
  return out;
}

RingLimits ring_limits(const Fabric& f, const std::vector<std::vector<ChipId>>& rings, Protocol p, double piece,
                       std::uint64_t simple_chunk) {
  RingLimits out;
  double bw = 0, lat = 0;
  std::vector<std::uint32_t> crossings(f.num_links(), 0);
  for (const auto& ring : rings) {
    if (ring.size() < 2) continue;
    // The ring's step latencies and forwarding times: their sums, and the step of
    // the smallest latency.
    double around = 0, around_forward = 0, fastest = 0, fastest_forward = 0;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const std::vector<LinkId> route = f.route(ring[i], ring[(i + 1) % ring.size()]);
      double step_lat = 0, step_forward = 0;
      for (LinkId l : route) {
        const double b = static_cast<double>(link_bandwidth(f, l, p));
        bw = bw == 0 ? b : std::min(bw, b);
        step_lat += link_latency(f, l, p).seconds();
        step_forward += std::min(piece, static_cast<double>(link_forward_chunk(f, l, p, simple_chunk))) / b;
        out.seconds_per_byte = std::max(out.seconds_per_byte, ++crossings[l] / b);
      }
      lat = std::max(lat, step_lat);
      around += step_lat;
      around_forward += step_forward;
      if (i == 0 || step_lat < fastest) fastest = step_lat, fastest_forward = step_forward;
    }
    // A phase's chains each take N-1 consecutive steps: all but one of the ring's.
    out.phase_latency_s = std::max(out.phase_latency_s, around - fastest);
    out.phase_forward_s = std::max(out.phase_forward_s, around_forward - fastest_forward);
  }
  out.bandwidth_bytes_per_s = bw;
  out.step_latency_s = lat;
  return out;
}

}  // namespace meshsim::collectives::gpu
