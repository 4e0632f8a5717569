// NCCL-style collectives on a GPU fabric (gpu.hpp): the rings' order, the
// routed hops every algorithm builds on, the algorithms' names and candidates,
// and build(), which dispatches to one algorithm per file (gpu_ring.cpp,
// gpu_tree.cpp, gpu_nvls.cpp, gpu_nvls_tree.cpp, gpu_hierarchical.cpp,
// gpu_direct.cpp; protocols in gpu_protocols.cpp, sizes in gpu_bounds.cpp).
#include "sim/collectives/gpu_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

std::vector<int> node_axes_of(const Torus& coords, std::span<const int> axes) {
  std::vector<int> out;
  for (int a : axes)
    if (!coords.axis(a).in_node) out.push_back(a);
  return out;
}

std::vector<int> local_axes_of(const Torus& coords, std::span<const int> axes) {
  std::vector<int> out;
  for (int a : axes)
    if (coords.axis(a).in_node) out.push_back(a);
  return out;
}

std::vector<std::vector<ChipId>> active_groups(std::vector<std::vector<ChipId>> all, const OpPorts& ports) {
  std::erase_if(all, [&](const std::vector<ChipId>& ring) { return !ports.active(ring.front()); });
  return all;
}

bool spans_nodes(const Fabric& f, const std::vector<ChipId>& group) {
  for (ChipId c : group)
    if (f.node_of(c) != f.node_of(group.front())) return true;
  return false;
}

int ring_channels(const Torus& coords, std::span<const int> axes) {
  int gpus = 1, nodes = 1;
  for (int a : local_axes_of(coords, axes)) gpus *= coords.axis(a).size;
  for (int a : node_axes_of(coords, axes)) nodes *= coords.axis(a).size;
  return nodes > 1 ? gpus : 1;
}

std::vector<std::vector<ChipId>> channel_rings(const Torus& coords, std::span<const int> axes) {
  std::vector<std::vector<ChipId>> out;
  for (int c = 0; c < ring_channels(coords, axes); ++c)
    for (std::vector<ChipId>& ring : rings(coords, axes, c)) out.push_back(std::move(ring));
  return out;
}

std::vector<std::vector<ChipId>> rings(const Torus& coords, std::span<const int> axes, int channel) {
  std::vector<std::vector<ChipId>> out;
  std::vector<char> seen(coords.num_chips(), 0);
  const std::vector<int> local = local_axes_of(coords, axes), across = node_axes_of(coords, axes);
  int gpus = 1;  // per group and node
  for (int a : local) gpus *= coords.axis(a).size;
  int nodes = 1;  // per group
  for (int a : across) nodes *= coords.axis(a).size;
  // `c` with the listed axes set to the digits of `index` (first axis fastest).
  const auto placed = [&](ChipId c, const std::vector<int>& listed, int index) {
    for (int a : listed) {
      c = coords.with_coord(c, a, index % coords.axis(a).size);
      index /= coords.axis(a).size;
    }
    return c;
  };
  for (ChipId c = 0; c < coords.num_chips(); ++c) {
    if (seen[c]) continue;
    std::vector<ChipId> ring;
    for (int p = 0; p < nodes; ++p) {
      // The group's p-th node: c's, with the listed node axes set to the digits of p.
      const ChipId node = placed(c, across, p);
      // Every other node of the ring runs its GPUs backwards; a group inside one
      // node runs forwards in every node, so that the nodes' groups are
      // translates of each other, listed alike (driver/groups.hpp).
      const bool backwards = p % 2 == 1;
      for (int k = 0; k < gpus; ++k) {
        const int l = backwards ? (channel - 1 - k + 2 * gpus) % gpus : (channel + k) % gpus;
        const ChipId g = placed(node, local, l);
        ring.push_back(g);
        seen[g] = 1;
      }
    }
    out.push_back(std::move(ring));
  }
  return out;
}

// GPU `c` turned by `r` places in its node (GPU i to i + r, mod G).
ChipId turned_gpu(const Fabric& f, ChipId c, std::size_t r) {
  const auto g = static_cast<ChipId>(f.gpus_per_node());
  return c - c % g + static_cast<ChipId>((c % g + r) % g);
}

// GPU link `l` (NVLink or NIC, up or down: kind * GPUs + GPU) turned by `r`
// places, or with `to_zero` put on its node's GPU 0.
LinkId turned(const Fabric& f, LinkId l, std::size_t r, bool to_zero) {
  const std::uint32_t n = f.num_gpus();
  MESHSIM_ASSERT(l < 4 * n, "a switch cable in a turned tree");
  const ChipId gpu = l % n;
  const auto g = static_cast<ChipId>(f.gpus_per_node());
  return l - gpu + (to_zero ? gpu - gpu % g : turned_gpu(f, gpu, r));
}

std::uint32_t Fold::operator()(LinkId l) const {
  const std::uint32_t r = resource[turned(fabric, l, 0, true)];
  MESHSIM_ASSERT(r != ~std::uint32_t{0}, "a turned tree's link without a resource");
  return r;
}

std::pair<TaskId, TaskId> hop(ProgramBuilder& b, const std::vector<LinkId>& route, std::uint64_t bytes, OpId op,
                              std::uint16_t step, const Fold* fold) {
  MESHSIM_ASSERT(!route.empty(), "a hop to itself");
  TaskId first = 0, prev = 0;
  for (std::size_t h = 0; h < route.size(); ++h) {
    const TaskId x = b.transfer(fold ? (*fold)(route[h]) : route[h], bytes, op, step);
    if (h == 0)
      first = x;
    else
      b.depend(prev, x, sim::EdgeKind::Stream);
    prev = x;
  }
  return {first, prev};
}

// `bytes` along `route` from src to dst, cut-through, between the op's ports.
// Returns the last hop's transfer (kNoTask for an empty route).
TaskId routed(ProgramBuilder& b, const std::vector<LinkId>& route, std::uint64_t bytes, ChipId src, ChipId dst,
              const OpPorts& ports) {
  if (route.empty()) return sim::kNoTask;
  const auto [first, last] = hop(b, route, bytes, ports.op, 1);
  b.depend(ports.entry[src], first);
  b.depend(last, ports.exit[dst]);
  return last;
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Ring:
      return "ring";
    case Algorithm::Nvls:
      return "nvls";
    case Algorithm::Hierarchical:
      return "hierarchical";
    case Algorithm::Direct:
      return "direct";
    case Algorithm::Tree:
      return "tree";
    case Algorithm::NvlsTree:
      return "nvls_tree";
  }
  return "?";
}

const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::Simple:
      return "simple";
    case Protocol::LL:
      return "ll";
    case Protocol::LL128:
      return "ll128";
  }
  return "?";
}

std::optional<Protocol> parse_protocol(std::string_view name) {
  for (Protocol p : {Protocol::Simple, Protocol::LL, Protocol::LL128})
    if (name == protocol_name(p)) return p;
  return std::nullopt;
}

bool supports(Algorithm a, Protocol p) { return p == Protocol::Simple || a == Algorithm::Ring || a == Algorithm::Tree; }

std::vector<Algorithm> candidates(Kind kind, const Torus& coords, std::span<const int> axes, const Fabric& fabric) {
  bool local = false, across = false;  // any in-node axis, any node axis
  for (int a : axes)
    if (a < coords.num_axes() && coords.axis(a).size > 1) (coords.axis(a).in_node ? local : across) = true;
  switch (kind) {
    case Kind::AllToAll:
      return {Algorithm::Direct};
    case Kind::AllReduce: {
      std::vector<Algorithm> out{Algorithm::Ring, Algorithm::Tree, Algorithm::Direct};
      if (local && !across && fabric.nvls_efficiency() > 0) out.push_back(Algorithm::Nvls);
      if (local && across) out.push_back(Algorithm::Hierarchical);
      if (local && across && fabric.nvls_efficiency() > 0) out.push_back(Algorithm::NvlsTree);
      return out;
    }
    default:
      return {Algorithm::Ring};
  }
}

namespace {

// build() in data bytes.
void build_data(ProgramBuilder& b, const Fabric& f, const Torus& coords, Kind kind, Algorithm algorithm,
                std::span<const int> axes, std::uint64_t group_bytes, std::uint64_t chunk_bytes, Protocol protocol,
                const OpPorts& ports) {
  const std::vector<std::vector<ChipId>> rs = active_groups(rings(coords, axes), ports);
  if (rs.empty() || rs.front().size() < 2) return;
  const std::uint64_t n = rs.front().size();
  // Ring phases run on every channel, each with its share of the bytes.
  const int channels = ring_channels(coords, axes);
  std::vector<std::vector<ChipId>> ch = rs;
  for (int c = 1; c < channels; ++c)
    for (std::vector<ChipId>& ring : active_groups(rings(coords, axes, c), ports)) ch.push_back(std::move(ring));
  const std::uint64_t ring_shard = ceil_div(ceil_div(group_bytes, static_cast<std::uint64_t>(channels)), n);
  switch (kind) {
    case Kind::AllGather:
      ring_gather(b, f, ch, ring_shard, ports.entry, ports.exit, ports.op);
      return;
    case Kind::ReduceScatter:
      ring_reduce(b, f, ch, ring_shard, ports.entry, ports.exit, ports.op);
      return;
    case Kind::AllReduce: {
      if (algorithm == Algorithm::Nvls) {
        nvls_all_reduce(b, f, rs, group_bytes, chunk_bytes, ports);
        return;
      }
      if (algorithm == Algorithm::Tree) {
        nccl_tree_all_reduce(b, f, rs, group_bytes, chunk_bytes, protocol, ports);
        return;
      }
      if (algorithm == Algorithm::NvlsTree) {
        nvls_tree_all_reduce(b, f, rs, group_bytes, ports);
        return;
      }
      if (algorithm == Algorithm::Direct) {
        direct_all_reduce(b, f, rs, group_bytes, ports);
        return;
      }
      if (algorithm == Algorithm::Hierarchical) {
        hierarchical_all_reduce(b, f, coords, axes, group_bytes, ports);
        return;
      }
      ring_all_reduce(b, f, coords, ch, ring_shard, ports);
      return;
    }
    case Kind::AllToAll:
      direct_all_to_all(b, f, rs, group_bytes, ports);
      return;
    case Kind::Send:
    case Kind::Matmul:
    case Kind::Elementwise:
      break;
  }
  MESHSIM_ASSERT(false, "not a group collective");
}

}  // namespace

void build(ProgramBuilder& b, const Fabric& f, const Torus& coords, Kind kind, Algorithm algorithm,
           std::span<const int> axes, std::uint64_t group_bytes, std::uint64_t chunk_bytes, const OpPorts& ports,
           Protocol protocol) {
  MESHSIM_ASSERT(supports(algorithm, protocol), "a protocol the algorithm does not run");
  const auto first = static_cast<TaskId>(b.num_tasks());
  build_data(b, f, coords, kind, algorithm, axes, group_bytes, step_bytes(protocol, chunk_bytes), protocol, ports);
  to_wire(b, first, protocol);
}

void send(ProgramBuilder& b, const Fabric& f, ChipId src, ChipId dst, std::uint64_t bytes, const OpPorts& ports) {
  const TaskId last = routed(b, f.route(src, dst), bytes, src, dst, ports);
  // The sender is done with the send once its bytes have arrived: what it does
  // next waits for that. (Not once they have left it: a flow-level engine
  // moves the route's hops as one flow, which no edge may leave halfway;
  // sim/flow_graph.hpp.)
  if (last != sim::kNoTask) b.depend(last, ports.exit[src]);
}

}  // namespace meshsim::collectives::gpu
