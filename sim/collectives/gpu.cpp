#include "sim/collectives/gpu.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <string_view>

#include "base/error.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

namespace {

// The node axes (hardware axes 1 and up: one, or a grid of nodes) among `axes`,
// in the order listed.
std::vector<int> node_axes_of(std::span<const int> axes) {
  std::vector<int> out;
  for (int a : axes)
    if (a >= 1) out.push_back(a);
  return out;
}

}  // namespace

bool spans_nodes(const Fabric& f, const std::vector<ChipId>& group) {
  for (ChipId c : group)
    if (f.node_of(c) != f.node_of(group.front())) return true;
  return false;
}

int ring_channels(const Torus& coords, std::span<const int> axes) {
  const bool local = std::find(axes.begin(), axes.end(), 0) != axes.end();
  int nodes = 1;
  for (int a : node_axes_of(axes)) nodes *= coords.axis(a).size;
  return local && nodes > 1 ? coords.axis(0).size : 1;
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
  const bool local = std::find(axes.begin(), axes.end(), 0) != axes.end();
  const std::vector<int> across = node_axes_of(axes);
  const int gpus = coords.axis(0).size;
  int nodes = 1;  // per group
  for (int a : across) nodes *= coords.axis(a).size;
  for (ChipId c = 0; c < coords.num_chips(); ++c) {
    if (seen[c]) continue;
    std::vector<ChipId> ring;
    const int my_local = coords.coord(c, 0);
    for (int p = 0; p < nodes; ++p) {
      // The group's p-th node: c's, with the listed node axes set to the digits
      // of p (first axis fastest).
      ChipId node = c;
      int rest = p;
      for (int a : across) {
        node = coords.with_coord(node, a, rest % coords.axis(a).size);
        rest /= coords.axis(a).size;
      }
      // Every other node of the ring runs its GPUs backwards; a group inside one
      // node runs forwards in every node, so that the nodes' groups are
      // translates of each other, listed alike (driver/groups.hpp).
      const bool backwards = p % 2 == 1;
      for (int k = 0; k < (local ? gpus : 1); ++k) {
        const int l = !local ? my_local : (backwards ? (channel - 1 - k + 2 * gpus) % gpus : (channel + k) % gpus);
        const ChipId g = coords.with_coord(node, 0, l);
        ring.push_back(g);
        seen[g] = 1;
      }
    }
    out.push_back(std::move(ring));
  }
  return out;
}

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

// GPU `c` turned by `r` places in its node (GPU i to i + r, mod G).
ChipId turned_gpu(const Fabric& f, ChipId c, std::size_t r) {
  const auto g = static_cast<ChipId>(f.gpus_per_node());
  return c - c % g + static_cast<ChipId>((c % g + r) % g);
}

// GPU link `l` (NVLink or NIC, up or down: kind * GPUs + GPU) turned by `r`
// places, or with `to_zero` put on its node's GPU 0.
LinkId turned(const Fabric& f, LinkId l, std::size_t r, bool to_zero = false) {
  const std::uint32_t n = f.num_gpus();
  MESHSIM_ASSERT(l < 4 * n, "a switch cable in a turned tree");
  const ChipId gpu = l % n;
  const auto g = static_cast<ChipId>(f.gpus_per_node());
  return l - gpu + (to_zero ? gpu - gpu % g : turned_gpu(f, gpu, r));
}

// `bytes` along `route`: returns the first and the last transfer, chained with
// cut-through (stream) edges.
// Where tree_rail_quotient puts a fabric's links: each on the same link of its
// node's GPU 0, numbered by `resource` (per link of the fabric; kNone: unused).
struct Fold {
  const Fabric& fabric;
  std::span<const std::uint32_t> resource;
  std::uint32_t operator()(LinkId l) const {
    const std::uint32_t r = resource[turned(fabric, l, 0, true)];
    MESHSIM_ASSERT(r != ~std::uint32_t{0}, "a turned tree's link without a resource");
    return r;
  }
};

// `fold`: links put on their node's GPU 0 (tree_rail_quotient); null: the links themselves.
std::pair<TaskId, TaskId> hop(ProgramBuilder& b, const std::vector<LinkId>& route, std::uint64_t bytes, OpId op,
                              std::uint16_t step, const Fold* fold = nullptr) {
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

}  // namespace

std::size_t nvls_owners(std::size_t gpus) { return std::min<std::size_t>(gpus, 32); }

std::uint64_t nvls_link_bytes(std::uint64_t bytes, double efficiency) {
  MESHSIM_ASSERT(efficiency > 0 && efficiency <= 1, "NVLS on switches without NVLink SHARP");
  return efficiency == 1 ? bytes : static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / efficiency));
}

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

namespace {

// LL: a 16-byte line carries 8 data bytes; LL128: a 128-byte line carries 120
// (NCCL_LL128_DATAELEMS 15 of NCCL_LL128_LINEELEMS 16 words).
constexpr std::uint64_t kLlLine = 16, kLlData = 8, kLl128Line = 128, kLl128Data = 120;
// A step's lines (DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE over NCCL_STEPS).
constexpr std::uint64_t kLlStepWire = 8 * 512 * kLlLine;     // 65,536
constexpr std::uint64_t kLl128StepWire = 120 * 640 * 8;      // 614,400

// NCCL's per-step hardware latency of the ring (src/graph/tuning.cc, hwLat, the
// table of NCCL 2.18 to today (2.29), whose Simple values the GPU presets' links
// carry: NVLink 3.4 us, the network 14 us; NCCL 2.7 to 2.17 had NVLink LL 0.47
// and network Simple 9.6), in tenths of a microsecond: LL, LL128, Simple.
// The ratio to Simple scales a link's latency (meshsim's links carry a step's
// latency, half on each of its two links).
struct HwLat {
  std::int64_t ll, ll128, simple;
};
constexpr HwLat kNvlinkHwLat{6, 19, 34};   // 0.6, 1.9, 3.4 us
constexpr HwLat kNetHwLat{27, 40, 140};    // 2.7, 4.0, 14 us

bool is_nvlink(topology::FabricLinkKind k) {
  return k == topology::FabricLinkKind::NvlinkUp || k == topology::FabricLinkKind::NvlinkDown;
}

// Every transfer built from task `first` on carries protocol p's lines around its data.
void to_wire(ProgramBuilder& b, TaskId first, Protocol p) {
  if (p != Protocol::Simple) b.map_transfer_bytes(first, [p](std::uint64_t x) { return wire_bytes(p, x); });
}

}  // namespace

std::uint64_t wire_bytes(Protocol p, std::uint64_t payload) {
  switch (p) {
    case Protocol::Simple:
      return payload;
    case Protocol::LL:
      return ceil_div(payload, kLlData) * kLlLine;
    case Protocol::LL128:
      return ceil_div(payload, kLl128Data) * kLl128Line;
  }
  return payload;
}

double wire_factor(Protocol p) {
  return p == Protocol::LL      ? static_cast<double>(kLlLine) / kLlData
         : p == Protocol::LL128 ? static_cast<double>(kLl128Line) / kLl128Data
                                : 1.0;
}

std::uint64_t step_wire_bytes(Protocol p, std::uint64_t simple_step) {
  return p == Protocol::LL ? kLlStepWire : p == Protocol::LL128 ? kLl128StepWire : simple_step;
}

std::uint64_t step_bytes(Protocol p, std::uint64_t simple_step) {
  switch (p) {
    case Protocol::Simple:
      return simple_step;
    case Protocol::LL:
      return kLlStepWire / kLlLine * kLlData;
    case Protocol::LL128:
      return kLl128StepWire / kLl128Line * kLl128Data;
  }
  return simple_step;
}

sim::ResourceVariant protocol_variant(Protocol p, topology::FabricLinkKind kind, Tick latency) {
  MESHSIM_ASSERT(p != Protocol::Simple, "Simple is the link itself");
  const HwLat& h = is_nvlink(kind) ? kNvlinkHwLat : kNetHwLat;
  const std::int64_t part = p == Protocol::LL ? h.ll : h.ll128;
  const std::uint64_t line = p == Protocol::LL ? kLlLine : kLl128Line;
  return {Tick::from_ps(latency.ps() / h.simple * part + latency.ps() % h.simple * part / h.simple),
          is_nvlink(kind) ? line : step_wire_bytes(p, 0)};
}

Tick link_latency(const Fabric& f, LinkId l, Protocol p) {
  const topology::FabricLink& link = f.link(l);
  return p == Protocol::Simple ? link.spec.latency : protocol_variant(p, link.kind, link.spec.latency).latency;
}

std::uint64_t link_bandwidth(const Fabric& f, LinkId l, Protocol p) {
  const topology::FabricLink& link = f.link(l);
  const std::uint64_t own = link.spec.bandwidth_bytes_per_s;
  if (p != Protocol::LL || link.kind != topology::FabricLinkKind::NvlinkUp || f.ll_bytes_per_s() <= 0) return own;
  // The GPU's LL data rate, in lines on the wire (16 bytes per 8 of data).
  const double wire = f.ll_bytes_per_s() * static_cast<double>(kLlLine) / static_cast<double>(kLlData);
  return wire < static_cast<double>(own) ? static_cast<std::uint64_t>(std::llround(wire)) : own;
}

std::uint64_t link_forward_chunk(const Fabric& f, LinkId l, Protocol p, std::uint64_t simple_chunk) {
  const topology::FabricLink& link = f.link(l);
  return p == Protocol::Simple ? simple_chunk : protocol_variant(p, link.kind, link.spec.latency).forward_chunk_bytes;
}

std::vector<Algorithm> candidates(Kind kind, const Torus& coords, std::span<const int> axes, const Fabric& fabric) {
  const bool local = std::find(axes.begin(), axes.end(), 0) != axes.end() && coords.axis(0).size > 1;
  bool across = false;  // any node axis
  for (int a : node_axes_of(axes)) across = across || (a < coords.num_axes() && coords.axis(a).size > 1);
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

}  // namespace

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

namespace {

bool one_by_one = false;  // build_rounds_one_by_one

// The rounds of a pipelined collective (the tree's chunks, the NVLS tree's
// loops) with a window of kWindow slots: from round kWindow on, each waits for
// the round kWindow before it in every slot, and every round refers to the
// ids of the rounds before it alone (its own, and the slots' and the previous
// round's), besides the op's ports, which all share. So round k > kWindow is
// round kWindow with the ids of the rounds shifted by k - kWindow rounds:
// built once, copied the rest of the way (ProgramBuilder::repeat), the same
// program, faster (tests build it one round at a time too).
class Rounds {
 public:
  static constexpr std::uint64_t kWindow = 8;
  explicit Rounds(ProgramBuilder& b) : b_(b), pivot_(static_cast<TaskId>(b.num_tasks())) {}
  // Called at the start of round k of n: true when the rest were copied (the
  // loop ends), else round k starts here.
  bool repeated(std::uint64_t k, std::uint64_t n) {
    if (k == kWindow + 1 && !one_by_one) {
      b_.repeat(first_, first_edge_, pivot_, n - k);
      return true;
    }
    first_ = static_cast<TaskId>(b_.num_tasks());
    first_edge_ = b_.num_edges();
    return false;
  }

 private:
  ProgramBuilder& b_;
  TaskId pivot_;  // round 0's first task
  TaskId first_ = 0;  // the last round's first task and edge
  std::size_t first_edge_ = 0;
};

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
                          const Fold* rail_zero = nullptr, bool tree_zero = false) {
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

}  // namespace

namespace {


// GPU link `l` on the same link of GPU `mirror[gpu]` (tree_mirror).
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

namespace {

// build() in data bytes.
void build_data(ProgramBuilder& b, const Fabric& f, const Torus& coords, Kind kind, Algorithm algorithm,
                std::span<const int> axes, std::uint64_t group_bytes, std::uint64_t chunk_bytes, Protocol protocol,
                const OpPorts& ports) {
  // Only the groups of the op's chips (a pipeline stage's, or all).
  const auto active_rings = [&](std::vector<std::vector<ChipId>> all) {
    std::erase_if(all, [&](const std::vector<ChipId>& ring) { return !ports.active(ring.front()); });
    return all;
  };
  const std::vector<std::vector<ChipId>> rs = active_rings(rings(coords, axes));
  if (rs.empty() || rs.front().size() < 2) return;
  const std::uint64_t n = rs.front().size();
  auto barrier = [&] { return detail::make_joins(b, ports.entry, ports.op); };
  // Ring phases run on every channel, each with its share of the bytes.
  const int channels = ring_channels(coords, axes);
  std::vector<std::vector<ChipId>> ch = rs;
  for (int c = 1; c < channels; ++c)
    for (std::vector<ChipId>& ring : active_rings(rings(coords, axes, c))) ch.push_back(std::move(ring));
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
        // Phases with a per-GPU barrier between them: node rings, rail rings, node rings.
        const std::vector<int> in_node{0}, across = node_axes_of(axes);
        const auto node_rings = active_rings(rings(coords, in_node)), rail_rings = active_rings(rings(coords, across));
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
        return;
      }
      const std::vector<TaskId> mid = barrier();
      for (ChipId c = 0; c < coords.num_chips(); ++c) {
        if (!ports.active(c)) continue;
        b.depend(ports.entry[c], mid[c]);
        b.depend(mid[c], ports.exit[c]);
      }
      ring_reduce(b, f, ch, ring_shard, ports.entry, mid, ports.op);
      ring_gather(b, f, ch, ring_shard, mid, ports.exit, ports.op);
      return;
    }
    case Kind::AllToAll: {
      const std::uint64_t piece = ceil_div(group_bytes, n * n);
      // Shifted destinations (NCCL's alltoall order): in round k every GPU sends to
      // the one k places after it, so every GPU's port receives one piece a round.
      for (const auto& ring : rs)
        for (std::size_t k = 1; k < ring.size(); ++k)
          for (std::size_t i = 0; i < ring.size(); ++i)
            routed(b, f.route(ring[i], ring[(i + k) % ring.size()]), piece, ring[i], ring[(i + k) % ring.size()], ports);
      return;
    }
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
          const std::vector<int> in_node{0}, across = node_axes_of(axes);
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

void build_rounds_one_by_one(bool on) { one_by_one = on; }

}  // namespace meshsim::collectives::gpu
