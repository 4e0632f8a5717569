// NCCL's tree: the double binary tree of nodes with a chain in every node, its
// channels and chunking, its quotient by the rotation of the nodes' GPUs.
#include "sim/collectives/gpu_internal.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

std::uint64_t chunk_count(std::uint64_t bytes, std::uint64_t chunk_bytes) {
  return std::max<std::uint64_t>(1, ceil_div(bytes, std::max<std::uint64_t>(chunk_bytes, 1)));
}

namespace {

// Each channel's ceil(bytes / channels) in chunks of at most `size`, evened out.
TreeChunking cut_in_chunks(std::uint64_t group_bytes, std::uint64_t channels, std::uint64_t size) {
  TreeChunking out;
  out.per_channel = ceil_div(group_bytes, channels);
  out.chunks = chunk_count(out.per_channel, size);
  out.chunk = ceil_div(out.per_channel, out.chunks);
  return out;
}

}  // namespace

TreeChunking tree_chunking(std::uint64_t group_bytes, std::uint64_t channels, std::uint64_t chunk_bytes,
                           std::uint64_t depth) {
  // NCCL (src/enqueue.cc, the tree with the Simple protocol, up and down): the
  // chunk is halved while the whole buffer over the channels gives fewer than
  // 8 x depth chunks, down to 128 KiB; fewer than 4 x depth, down to 64 KiB;
  // fewer than depth, down to 32 KiB. The bytes over channel x chunk are
  // counted in whole chunks, as NCCL's integer division counts them.
  std::uint64_t size = std::max<std::uint64_t>(chunk_bytes, 1);
  const auto enough = [&](std::uint64_t times) { return group_bytes / (channels * size) >= times * depth; };
  while (!enough(8) && size > 131072) size /= 2;
  while (!enough(4) && size > 65536) size /= 2;
  while (!enough(1) && size > 32768) size /= 2;
  return cut_in_chunks(group_bytes, channels, size);
}

TreeChunking tree_chunking_ll128(std::uint64_t group_bytes, std::uint64_t channels, std::uint64_t chunk_bytes,
                                 std::uint64_t nodes, std::uint64_t ppn) {
  const double steps = 1 + static_cast<double>(std::bit_width(std::max<std::uint64_t>(nodes, 1)) - 1) +
                       0.1 * static_cast<double>(ppn);
  std::uint64_t size = std::max<std::uint64_t>(chunk_bytes, 1);
  // NCCL's left side is an integer division, its right side a float.
  const auto fewer = [&](double times) {
    return static_cast<double>(group_bytes / (channels * size)) < steps * times / static_cast<double>(ppn);
  };
  while (fewer(64) && size > 131072) size /= 2;
  while (fewer(16) && size > 32768) size /= 2;
  return cut_in_chunks(group_bytes, channels, size);
}

TreeChunking tree_cut(const Fabric& f, std::span<const ChipId> group, std::uint64_t group_bytes, std::uint64_t channels,
                      std::uint64_t chunk_bytes, Protocol p) {
  if (p != Protocol::LL128) return tree_chunking(group_bytes, channels, chunk_bytes, tree_depth(f, group));
  const std::uint64_t nodes = node_count(f, group);
  const std::uint64_t ppn = group.size() / std::max<std::uint64_t>(nodes, 1);
  return tree_chunking_ll128(group_bytes, channels, chunk_bytes, nodes, ppn);
}

std::uint64_t node_count(const Fabric& f, std::span<const ChipId> group) {
  std::vector<int> nodes;
  for (ChipId c : group) nodes.push_back(f.node_of(c));
  std::sort(nodes.begin(), nodes.end());
  return static_cast<std::uint64_t>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

std::uint64_t tree_depth(const Fabric& f, std::span<const ChipId> group) {
  const std::uint64_t m = node_count(f, group);
  return group.size() / m - 1 + static_cast<std::uint64_t>(std::bit_width(m) - 1);
}

std::vector<std::uint32_t> double_binary_tree(std::uint32_t m, int tree) {
  MESHSIM_ASSERT(m >= 1 && (tree == 0 || tree == 1), "a double binary tree of no ranks");
  // Tree 0: rank r > 0 at level b (its lowest set bit) hangs under r with bit b
  // cleared and bit 2b set, or with bit b cleared when that is past the last rank.
  const auto parent0 = [m](std::uint32_t r) -> std::uint32_t {
    if (r == 0) return 0;
    const std::uint32_t b = r & (~r + 1);
    const std::uint32_t up = (r ^ b) | (b << 1);
    return up < m ? up : r ^ b;
  };
  std::vector<std::uint32_t> out(m);
  for (std::uint32_t r = 0; r < m; ++r) {
    if (tree == 0)
      out[r] = parent0(r);
    else if (m % 2 == 0)  // mirrored
      out[r] = m - 1 - parent0(m - 1 - r);
    else  // shifted by one rank
      out[r] = (parent0((r + m - 1) % m) + 1) % m;
  }
  return out;
}

namespace {

// A group's nodes in ring order (their ranks), each with its GPUs in local order.
std::vector<std::vector<ChipId>> ranked_nodes(const Fabric& f, const std::vector<ChipId>& group) {
  std::vector<std::vector<ChipId>> nodes;
  for (ChipId c : group) {
    if (nodes.empty() || f.node_of(nodes.back().front()) != f.node_of(c)) nodes.emplace_back();
    nodes.back().push_back(c);
  }
  for (auto& node : nodes) std::sort(node.begin(), node.end());
  return nodes;
}

}  // namespace

std::vector<ChipId> tree_mirror(const Fabric& f, const Torus& coords, std::span<const int> axes) {
  const std::vector<std::vector<ChipId>> groups = rings(coords, axes);
  if (groups.size() != 1 || groups.front().size() != f.num_gpus()) return {};
  const std::vector<std::vector<ChipId>> nodes = ranked_nodes(f, groups.front());
  const std::size_t m = nodes.size();
  if (m < 2 || m % 2 != 0) return {};
  std::vector<ChipId> out(f.num_gpus());
  for (std::size_t r = 0; r < m; ++r) {
    if (nodes[r].size() != nodes[m - 1 - r].size()) return {};
    for (std::size_t q = 0; q < nodes[r].size(); ++q) out[nodes[r][q]] = nodes[m - 1 - r][q];
  }
  return out;
}

std::vector<TreeChannel> tree_channels(const Fabric& f, const std::vector<ChipId>& group) {
  const std::vector<std::vector<ChipId>> nodes = ranked_nodes(f, group);
  const std::size_t g = nodes.front().size(), m = nodes.size();
  // Each tree's ranks root first, breadth first with children by rank, and
  // each rank's parent's place in that order. For an even m, tree 1 is tree 0
  // mirrored (rank r to m - 1 - r): its children go by descending rank, so that
  // its position i is the mirror of tree 0's and both trees have one shape.
  struct Order {
    std::vector<std::uint32_t> ranks, parent;
  };
  std::array<Order, 2> orders;
  for (int t = 0; t < 2; ++t) {
    const std::vector<std::uint32_t> up = double_binary_tree(static_cast<std::uint32_t>(m), t);
    std::vector<std::vector<std::uint32_t>> children(m);
    std::uint32_t root = 0;
    for (std::uint32_t r = 0; r < m; ++r) {
      if (up[r] == r)
        root = r;
      else
        children[up[r]].push_back(r);  // ascending
    }
    if (t == 1 && m % 2 == 0)
      for (auto& kids : children) std::reverse(kids.begin(), kids.end());
    Order& o = orders[static_cast<std::size_t>(t)];
    o.ranks.push_back(root);
    o.parent.push_back(0);
    for (std::size_t i = 0; i < o.ranks.size(); ++i)
      for (std::uint32_t c : children[o.ranks[i]]) {
        o.ranks.push_back(c);
        o.parent.push_back(static_cast<std::uint32_t>(i));
      }
    MESHSIM_ASSERT(o.ranks.size() == m, "a double binary tree that misses a rank");
  }
  std::vector<TreeChannel> out;
  for (std::size_t r = 0; r < g; ++r)
    for (const Order& o : orders) {
      TreeChannel ch;
      ch.parent = o.parent;
      for (std::uint32_t rank : o.ranks) {
        const auto& node = nodes[rank];
        std::vector<ChipId> chain;
        for (std::size_t j = 0; j < g; ++j) chain.push_back(node[(r + j) % g]);
        ch.chains.push_back(std::move(chain));
      }
      out.push_back(std::move(ch));
    }
  return out;
}

// The rounds of a pipelined collective (the tree's chunks, the NVLS tree's
// loops) with a window of kWindow slots: from round kWindow on, each waits for
// the round kWindow before it in every slot, and every round refers to the
// ids of the rounds before it alone (its own, and the slots' and the previous
// round's), besides the op's ports, which all share. So round k > kWindow is
// round kWindow with the ids of the rounds shifted by k - kWindow rounds:
// built once, copied the rest of the way (ProgramBuilder::repeat), the same
// program, faster (tests build it one round at a time too).
bool Rounds::repeated(std::uint64_t k, std::uint64_t n) {
  if (k == kWindow + 1 && b_.copy_repeats) {
    b_.repeat(first_, first_edge_, pivot_, n - k);
    return true;
  }
  first_ = static_cast<TaskId>(b_.num_tasks());
  first_edge_ = b_.num_edges();
  return false;
}

// NCCL's tree (docs/MODEL.md, "GPU fabrics"): on each of 2G channels
// (tree_channels), chunk by chunk, every node reduces its chain towards
// the head (tail -> ... -> head over NVLink), the head adds its children's sums
// and sends to its parent's head (over the head's NIC, one rail per channel);
// the root turns the sum around and it is broadcast down the tree and down every
// chain. Every edge keeps at most 8 chunks in flight (NCCL_STEPS).
//
// The tasks are listed in an order the tree's symmetries keep: chunk, phase,
// node position, chain position (or child), tree, and the rails innermost.
// - The channels of one tree are the rails' rotations of each other (channel
//   r's chain in a node starts at its GPU r). For a chain position j, rail r's
//   hop leaves GPU r + j: each GPU's port gets one hop of each (chunk, phase,
//   node, position, tree), its rotation's the same one (the quotient by the
//   rotation, driver/translations.hpp, maps the k-th task of a link onto the
//   k-th of the rotated link).
// - For an even node count, tree 1 is tree 0 mirrored (tree_channels): the
//   mirror of the nodes maps each task onto the task of the other tree with the
//   same (chunk, phase, position, chain position, rail), next to it in the
//   list. Two tasks of one link that differ in tree alone would sit in a node
//   and its mirror, which share no link: the mirror keeps the order on every link.
//
// `rail_zero`: only rail 0's channels, every link put on the link `rail_zero`
// folds it to (tree_rail_quotient: the quotient by the rotation, and with
// `tree_zero` by the mirror too, whose tree 0 alone is built).
void nccl_tree_all_reduce(ProgramBuilder& b, const Fabric& f, const std::vector<std::vector<ChipId>>& groups,
                          std::uint64_t group_bytes, std::uint64_t chunk_bytes, Protocol protocol, const OpPorts& ports,
                          const Fold* rail_zero, bool tree_zero) {
  constexpr std::uint64_t kWindow = Rounds::kWindow;
  for (const auto& group : groups) {
    const std::vector<TreeChannel> all = tree_channels(f, group);  // rail-major: channel 2r + t
    const TreeChunking cut = tree_cut(f, group, group_bytes, all.size(), chunk_bytes, protocol);
    const std::uint64_t chunks = cut.chunks, chunk = cut.chunk;
    const std::size_t m = all.front().chains.size(), g = all.front().chains.front().size();
    const std::size_t rails = rail_zero ? 1 : all.size() / 2, trees = tree_zero ? 1 : 2;
    // Per tree (both rails' channels share its shape): each position's children.
    std::array<std::vector<std::vector<std::uint32_t>>, 2> children;
    for (std::size_t t = 0; t < 2; ++t) {
      children[t].assign(m, {});
      for (std::uint32_t i = 1; i < m; ++i) children[t][all[t].parent[i]].push_back(i);
    }
    // Per channel built (trees * r + t) and chunk (the last kWindow): the last
    // transfer of each node's edges, by node position and chain position:
    // up[i][j] is the hop from chain position j (j >= 1) towards the head, or
    // for j = 0 the head's hop to its parent; down[i][j] the hop into chain
    // position j (j >= 1), or into the head (j = 0).
    using Hops = std::vector<std::vector<TaskId>>;
    const std::size_t built = trees * rails;
    std::vector<std::vector<Hops>> ups(built, std::vector<Hops>(kWindow, Hops(m, std::vector<TaskId>(g, 0))));
    std::vector<std::vector<Hops>> downs = ups;
    std::vector<std::vector<TaskId>> sum(built, std::vector<TaskId>(m, 0));  // the last hop into each head
    std::vector<TaskId> into(built, 0);
    const auto at = [&](std::size_t r, std::size_t t) { return trees * r + t; };
    const auto channel = [&](std::size_t r, std::size_t t) -> const TreeChannel& { return all[2 * r + t]; };
    Rounds rounds(b);
    for (std::uint64_t k = 0; k < chunks; ++k) {
      if (rounds.repeated(k, chunks)) break;
      const bool wait = k >= kWindow;  // the same slot holds chunk k - kWindow
      const auto up = [&](std::size_t r, std::size_t t) -> Hops& { return ups[at(r, t)][k % kWindow]; };
      const auto down = [&](std::size_t r, std::size_t t) -> Hops& { return downs[at(r, t)][k % kWindow]; };
      auto send = [&](ChipId from, ChipId to, std::uint16_t step, TaskId& slot) {
        const auto [first, last] = hop(b, f.route(from, to), chunk, ports.op, step, rail_zero);
        if (wait) b.depend(slot, first);
        slot = last;
        return first;
      };
      // Up: children before parents, chain tails first.
      for (std::size_t i = m; i-- > 0;) {
        for (std::size_t j = g - 1; j >= 1; --j)
          for (std::size_t t = 0; t < trees; ++t)
            for (std::size_t r = 0; r < rails; ++r) {
              const auto& chain = channel(r, t).chains[i];
              const TaskId first = send(chain[j], chain[j - 1], 1, up(r, t)[i][j]);
              b.depend(ports.entry[chain[j]], first);
              if (j + 1 < g) b.depend(into[at(r, t)], first, sim::EdgeKind::Stream);
              into[at(r, t)] = up(r, t)[i][j];
            }
        for (std::size_t c = 0; c < built; ++c) sum[c][i] = g > 1 ? into[c] : 0;
        if (i == 0) break;
        for (std::size_t t = 0; t < trees; ++t)
          for (std::size_t r = 0; r < rails; ++r) {
            const TreeChannel& ch = channel(r, t);
            const TaskId first = send(ch.chains[i][0], ch.chains[ch.parent[i]][0], 1, up(r, t)[i][0]);
            b.depend(ports.entry[ch.chains[i][0]], first);
            if (g > 1) b.depend(sum[at(r, t)][i], first, sim::EdgeKind::Stream);
            for (std::uint32_t c : children[t][i]) b.depend(up(r, t)[c][0], first, sim::EdgeKind::Stream);
          }
      }
      // What the root's sum waits for: its chain and its children.
      auto root_inputs = [&](std::size_t r, std::size_t t, TaskId x) {
        b.depend(ports.entry[channel(r, t).chains[0][0]], x);
        if (g > 1) b.depend(sum[at(r, t)][0], x, sim::EdgeKind::Stream);
        for (std::uint32_t c : children[t][0]) b.depend(up(r, t)[c][0], x, sim::EdgeKind::Stream);
      };
      // Down: parents first, each head to its children, then down its chain.
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t kids = std::max(children[0][i].size(), children[1][i].size());
        for (std::size_t s = 0; s < kids; ++s)
          for (std::size_t t = 0; t < trees; ++t) {
            if (s >= children[t][i].size()) continue;
            const std::uint32_t c = children[t][i][s];
            for (std::size_t r = 0; r < rails; ++r) {
              const auto& chains = channel(r, t).chains;
              const TaskId first = send(chains[i][0], chains[c][0], 2, down(r, t)[c][0]);
              if (i == 0)
                root_inputs(r, t, first);
              else
                b.depend(down(r, t)[i][0], first, sim::EdgeKind::Stream);
              b.depend(down(r, t)[c][0], ports.exit[chains[c][0]]);
            }
          }
        for (std::size_t j = 1; j < g; ++j)
          for (std::size_t t = 0; t < trees; ++t)
            for (std::size_t r = 0; r < rails; ++r) {
              const auto& chain = channel(r, t).chains[i];
              const TaskId first = send(chain[j - 1], chain[j], 2, down(r, t)[i][j]);
              if (j > 1)
                b.depend(down(r, t)[i][j - 1], first, sim::EdgeKind::Stream);
              else if (i == 0)
                root_inputs(r, t, first);
              else
                b.depend(down(r, t)[i][0], first, sim::EdgeKind::Stream);
              b.depend(down(r, t)[i][j], ports.exit[chain[j]]);
            }
      }
      // The root's head holds the sum once its inputs have arrived.
      for (std::size_t t = 0; t < trees; ++t)
        for (std::size_t r = 0; r < rails; ++r) {
          const ChipId head = channel(r, t).chains[0][0];
          if (g > 1) b.depend(sum[at(r, t)][0], ports.exit[head]);
          for (std::uint32_t c : children[t][0]) b.depend(up(r, t)[c][0], ports.exit[head]);
        }
    }
  }
}

namespace {

LinkId mirrored(const Fabric& f, std::span<const ChipId> mirror, LinkId l) {
  const ChipId gpu = l % f.num_gpus();
  return l - gpu + mirror[gpu];
}

// Whether the tree's channels turn (tree_rail_quotient), and with `mirror`
// (tree_mirror, not empty) whether rail 0's tree 1 is its tree 0 mirrored: its
// chains, its tree, its routes. `links`, when they do: the links of rail 0's
// channels put on their node's GPU 0, ascending; `per_chunk`, per group (in
// rings' order): the transfers of one chunk of the channels the quotient
// builds (rail 0's two, or with `mirror` its tree 0).
bool turns(const Fabric& f, const Torus& coords, std::span<const int> axes, std::span<const ChipId> mirror,
           std::vector<LinkId>& links, std::vector<std::uint64_t>& per_chunk) {
  const auto g = static_cast<std::size_t>(f.gpus_per_node());
  for (const std::vector<ChipId>& group : rings(coords, axes)) {
    const std::vector<TreeChannel> all = tree_channels(f, group);
    if (all.size() != 2 * g || all.front().chains.front().size() != g) return false;  // not every GPU of its nodes
    const std::size_t m = all.front().chains.size();
    std::uint64_t transfers = 0;
    for (std::size_t t = 0; t < 2; ++t) {
      const TreeChannel& zero = all[t];
      // Every edge of rail 0's channel, both ways, crosses GPU links alone.
      std::vector<std::pair<ChipId, ChipId>> edges;
      for (std::size_t i = 0; i < m; ++i) {
        const auto& chain = zero.chains[i];
        for (std::size_t j = 1; j < g; ++j)
          edges.insert(edges.end(), {{chain[j], chain[j - 1]}, {chain[j - 1], chain[j]}});
        if (i > 0) {
          const ChipId parent = zero.chains[zero.parent[i]].front();
          edges.insert(edges.end(), {{chain.front(), parent}, {parent, chain.front()}});
        }
      }
      std::vector<std::vector<LinkId>> routes;
      for (const auto& [a, b] : edges) {
        routes.push_back(f.route(a, b));
        for (LinkId l : routes.back()) {
          if (l >= 4 * f.num_gpus()) return false;
          links.push_back(turned(f, l, 0, true));
        }
        if (mirror.empty() || t == 0) transfers += routes.back().size();
      }
      if (!mirror.empty() && t == 0) {
        const TreeChannel& other = all[1];
        if (other.parent != zero.parent) return false;
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < g; ++j)
            if (other.chains[i][j] != mirror[zero.chains[i][j]]) return false;
        for (std::size_t e = 0; e < edges.size(); ++e) {
          const auto [a, b] = edges[e];
          const std::vector<LinkId> route = f.route(mirror[a], mirror[b]);
          if (route.size() != routes[e].size()) return false;
          for (std::size_t h = 0; h < route.size(); ++h)
            if (route[h] != mirrored(f, mirror, routes[e][h])) return false;
        }
      }
      for (std::size_t r = 1; r < g; ++r) {
        // Rail r's channel is rail 0's turned by r: its chains, its tree, its routes.
        const TreeChannel& ch = all[2 * r + t];
        if (ch.parent != zero.parent) return false;
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < g; ++j)
            if (ch.chains[i][j] != turned_gpu(f, zero.chains[i][j], r)) return false;
        for (std::size_t e = 0; e < edges.size(); ++e) {
          const auto [a, b] = edges[e];
          const std::vector<LinkId> route = f.route(turned_gpu(f, a, r), turned_gpu(f, b, r));
          if (route.size() != routes[e].size()) return false;
          for (std::size_t h = 0; h < route.size(); ++h)
            if (route[h] != turned(f, routes[e][h], r)) return false;
        }
      }
    }
    per_chunk.push_back(transfers);
  }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return true;
}

}  // namespace

std::optional<std::vector<LinkId>> tree_rail_quotient(ProgramBuilder& b, const Fabric& f, const Torus& coords,
                                                      std::span<const int> axes, std::uint64_t group_bytes,
                                                      std::uint64_t chunk_bytes, const OpPorts& ports,
                                                      std::span<const ChipId> mirrors, Protocol protocol) {
  chunk_bytes = step_bytes(protocol, chunk_bytes);
  const bool mirror = !mirrors.empty();
  std::vector<LinkId> links;
  std::vector<std::uint64_t> per_chunk;
  if (!turns(f, coords, axes, mirrors, links, per_chunk)) return std::nullopt;
  std::vector<std::uint32_t> resource(f.num_links(), ~std::uint32_t{0});
  if (mirror) {
    // A link and its mirror are one: the lower of the two (GPU 0 of the node
    // of lower id) stands for both.
    std::vector<LinkId> lower;
    for (LinkId l : links) lower.push_back(std::min(l, mirrored(f, mirrors, l)));
    std::sort(lower.begin(), lower.end());
    lower.erase(std::unique(lower.begin(), lower.end()), lower.end());
    for (LinkId l : links) {
      const LinkId rep = std::min(l, mirrored(f, mirrors, l));
      resource[l] = static_cast<std::uint32_t>(std::lower_bound(lower.begin(), lower.end(), rep) - lower.begin());
    }
    links = std::move(lower);
  } else {
    for (std::size_t k = 0; k < links.size(); ++k) resource[links[k]] = static_cast<std::uint32_t>(k);
  }
  std::vector<std::vector<ChipId>> rs = rings(coords, axes);
  // The builder's arrays at about their final size at once: at scale, growing
  // them by doubling faults in twice the pages (about 2 edges a transfer). Each
  // group's 2G channels carry V/2G (turns checked their count).
  const std::uint64_t chunks =
      rs.empty() ? 0
                 : tree_cut(f, rs.front(), group_bytes, 2 * static_cast<std::uint64_t>(f.gpus_per_node()), chunk_bytes,
                            protocol)
                       .chunks;
  std::uint64_t transfers = 0;
  for (std::size_t i = 0; i < rs.size(); ++i)
    if (ports.active(rs[i].front())) transfers += chunks * per_chunk[i];
  std::erase_if(rs, [&](const std::vector<ChipId>& ring) { return !ports.active(ring.front()); });
  if (rs.empty() || rs.front().size() < 2) return links;
  b.reserve(b.num_tasks() + transfers, b.num_edges() + transfers / 2 * 5);
  const Fold fold{f, resource};
  const auto first = static_cast<TaskId>(b.num_tasks());
  nccl_tree_all_reduce(b, f, rs, group_bytes, chunk_bytes, protocol, ports, &fold, mirror);
  to_wire(b, first, protocol);
  return links;
}

}  // namespace meshsim::collectives::gpu
