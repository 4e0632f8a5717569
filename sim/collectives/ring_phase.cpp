#include "sim/collectives/ring_phase.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace meshsim::collectives::detail {

using topology::Direction;
using topology::kNoChip;

namespace {

struct ChainBytes {
  std::uint64_t first, middle, last;  // the first hop, the hops between, the last hop
  static ChainBytes uniform(std::uint64_t b) { return {b, b, b}; }
};

// A set of chains along one axis. Chain i: `hops` transfers from `from` in
// direction `dir` (a one-hop chain carries bytes.last); each hop after the first
// forwards the previous one (stream edge); the hop leaving chip n also waits for
// entry[n] (the chip's own data or its participation); `deliver_each` feeds every
// arrival into exit[receiver], otherwise only the last one.
//
// build() creates the transfers step-major (every chain's hop 1, then every
// chain's hop 2, ...): tasks that run at about the same time get neighbouring ids,
// which keeps the executor's working set in cache.
class Chains {
 public:
  // Room for two chains a chip, as many as a phase starts: growing by doubling
  // copied megabytes per phase on a full pod.
  explicit Chains(const Torus& t) { chains_.reserve(2 * static_cast<std::size_t>(t.num_chips())); }
  void add(ChipId from, Direction dir, int hops, ChainBytes bytes) {
    MESHSIM_ASSERT(hops > 0, "empty chain");
    chains_.push_back({from, dir, hops, bytes, 0});
    max_hops_ = std::max(max_hops_, hops);
  }
  void build(ProgramBuilder& b, const Torus& t, int axis, std::span<const TaskId> entry,
             std::span<const TaskId> exit, OpId op, bool deliver_each) {
    const bool dcn = t.switched(axis);
    // Between slices both directions share a chip's DCN links: a step's Plus
    // hops come before its Minus hops there, so that every link's k-th task is
    // its translates' (driver/translations.hpp); on the torus each direction
    // has its own links.
    const int passes = dcn ? 2 : 1;
    for (int k = 0; k < max_hops_; ++k) {
      for (int pass = 0; pass < passes; ++pass) {
        for (Chain& c : chains_) {
          if (k >= c.hops || (dcn && (c.dir == Direction::Plus) != (pass == 0))) continue;
          const std::uint64_t n = k + 1 == c.hops ? c.bytes.last : k == 0 ? c.bytes.first : c.bytes.middle;
          const auto step = static_cast<std::uint16_t>(k + 1);
          // One hop: the link to the neighbour, or between slices the chip's DCN
          // link out and the next slice's chip's link in (forwarded cut-through).
          const auto link = dcn ? t.dcn_out(c.from) : t.link(c.from, axis, c.dir);
          MESHSIM_ASSERT(link != topology::kNoLink, "ring step over a missing link");
          TaskId x = b.transfer(link, n, op, step);
          b.depend(entry[c.from], x);
          if (k > 0) b.depend(c.prev, x, sim::EdgeKind::Stream);
          if (dcn) {
            c.from = t.neighbor(c.from, axis, c.dir);
            const TaskId in = b.transfer(t.dcn_in(c.from), n, op, step);
            b.depend(x, in, sim::EdgeKind::Stream);
            x = in;
          } else {
            c.from = t.link_info(link).dst;  // the chain advances one chip
          }
          if (deliver_each || k + 1 == c.hops) b.depend(x, exit[c.from]);
          c.prev = x;
        }
      }
    }
  }

 private:
  struct Chain {
    ChipId from;
    Direction dir;
    int hops;
    ChainBytes bytes;
    TaskId prev;
  };
  std::vector<Chain> chains_;
  int max_hops_ = 0;
};

// Chips whose coordinate on `axis` is 0: one per ring/line.
std::vector<ChipId> ring_starts(const Torus& t, int axis) {
  std::vector<ChipId> out;
  for (ChipId c = 0; c < t.num_chips(); ++c)
    if (t.coord(c, axis) == 0) out.push_back(c);
  return out;
}

}  // namespace

void all_gather_phase(ProgramBuilder& b, const Torus& t, int axis, int size, bool ring, std::uint64_t shard_bytes,
                      std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op) {
  const int x = size;
  MESHSIM_ASSERT(x > 1, "ring phase over an axis of size 1");
  MESHSIM_ASSERT(ring || x == t.axis(axis).size, "a line is its whole axis");
  const bool wrap = ring;
  // On an even ring the antipodal chip gets half the shard from each side.
  const ChainBytes ring_bytes{shard_bytes, shard_bytes, x % 2 == 0 ? ceil_div(shard_bytes, 2) : shard_bytes};
  Chains chains(t);
  for (ChipId c = 0; c < t.num_chips(); ++c) {
    if (entry[c] == sim::kNoTask) continue;  // not in the op's chips
    const int pos = t.coord(c, axis);
    const int plus = wrap ? x / 2 : x - 1 - pos;
    const int minus = wrap ? x / 2 : pos;
    const ChainBytes bytes = wrap ? ring_bytes : ChainBytes::uniform(shard_bytes);
    if (plus > 0) chains.add(c, Direction::Plus, plus, bytes);
    if (minus > 0) chains.add(c, Direction::Minus, minus, bytes);
  }
  chains.build(b, t, axis, entry, exit, op, /*deliver_each=*/true);
}

void reduce_scatter_phase(ProgramBuilder& b, const Torus& t, int axis, int size, bool ring, std::uint64_t chunk_bytes,
                          std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op) {
  const int x = size;
  MESHSIM_ASSERT(x > 1, "ring phase over an axis of size 1");
  MESHSIM_ASSERT(ring || x == t.axis(axis).size, "a line is its whole axis");
  Chains chains(t);
  if (ring) {
    // On an even ring the antipodal chip sends half its contribution each way.
    const int hops = x / 2;
    const std::uint64_t first = x % 2 == 0 ? ceil_div(chunk_bytes, 2) : chunk_bytes;
    const ChainBytes bytes{first, chunk_bytes, hops == 1 ? first : chunk_bytes};
    for (ChipId d = 0; d < t.num_chips(); ++d) {
      if (entry[d] == sim::kNoTask) continue;  // not in the op's chips (nor is its ring)
      // The chains start `hops` links behind d each way (through a twisted
      // wraparound too: the links, not the coordinates, say where).
      ChipId behind = d, ahead = d;
      for (int k = 0; k < hops; ++k) {
        behind = t.neighbor(behind, axis, Direction::Minus);
        ahead = t.neighbor(ahead, axis, Direction::Plus);
      }
      chains.add(behind, Direction::Plus, hops, bytes);
      chains.add(ahead, Direction::Minus, hops, bytes);
    }
  } else {
    // A line: chains start at the ends; the farthest destination goes first so
    // that it can be forwarded while the nearer ones are still being sent.
    for (ChipId line : ring_starts(t, axis)) {
      if (entry[line] == sim::kNoTask) continue;  // not in the op's chips (nor is its line)
      for (int d = x - 1; d >= 1; --d) chains.add(line, Direction::Plus, d, ChainBytes::uniform(chunk_bytes));
      const ChipId end = t.with_coord(line, axis, x - 1);
      for (int d = 0; d <= x - 2; ++d) chains.add(end, Direction::Minus, x - 1 - d, ChainBytes::uniform(chunk_bytes));
    }
  }
  chains.build(b, t, axis, entry, exit, op, /*deliver_each=*/false);
}

std::vector<TaskId> make_joins(ProgramBuilder& b, std::span<const TaskId> like, OpId op) {
  std::vector<TaskId> out(like.size(), sim::kNoTask);
  for (std::size_t c = 0; c < like.size(); ++c)
    if (like[c] != sim::kNoTask) out[c] = b.join(op, kZeroTick, static_cast<std::uint32_t>(c));
  return out;
}

std::vector<int> rotated(std::span<const int> axes, std::size_t by) {
  std::vector<int> out(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) out[i] = axes[(i + by) % axes.size()];
  return out;
}

}  // namespace meshsim::collectives::detail

namespace meshsim::collectives::detail {

void run_phases(ProgramBuilder& b, const Torus& t, std::span<const Phase> phases, const OpPorts& ports) {
  const std::vector<std::vector<Phase>> one{std::vector<Phase>(phases.begin(), phases.end())};
  run_in_lockstep(b, t, one, ports);
}

void run_parts(ProgramBuilder& b, const Torus& t, std::span<const std::vector<Phase>> parts, const OpPorts& ports,
               bool lockstep) {
  if (lockstep) return run_in_lockstep(b, t, parts, ports);
  for (const std::vector<Phase>& part : parts) run_phases(b, t, part, ports);
}

void run_in_lockstep(ProgramBuilder& b, const Torus& t, std::span<const std::vector<Phase>> parts,
                     const OpPorts& ports) {
  MESHSIM_ASSERT(!parts.empty(), "no parts to run");
  const std::size_t stages = parts.front().size();
  std::vector<TaskId> in(ports.entry.begin(), ports.entry.end());
  for (std::size_t k = 0; k < stages; ++k) {
    const bool last = k + 1 == stages;
    std::vector<TaskId> out = last ? std::vector<TaskId>(ports.exit.begin(), ports.exit.end())
                                   : make_joins(b, ports.entry, ports.op);
    for (ChipId c = 0; c < t.num_chips(); ++c)
      if (ports.active(c)) b.depend(in[c], out[c]);
    for (const std::vector<Phase>& part : parts) {
      MESHSIM_ASSERT(part.size() == stages, "parts in lock step have as many phases");
      const Phase& p = part[k];
      if (p.kind == PhaseKind::Gather)
        all_gather_phase(b, t, p.axis, p.size, p.ring, p.bytes, in, out, ports.op);
      else if (p.kind == PhaseKind::Reduce)
        reduce_scatter_phase(b, t, p.axis, p.size, p.ring, p.bytes, in, out, ports.op);
    }
    in = std::move(out);
  }
}

}  // namespace meshsim::collectives::detail

namespace meshsim::collectives::detail {

std::vector<Phase> staged(std::span<const Phase> phases, int first, int stages) {
  MESHSIM_ASSERT(first >= 0 && first + static_cast<int>(phases.size()) <= stages, "phases outside their stages");
  std::vector<Phase> out(static_cast<std::size_t>(stages), Phase{PhaseKind::Idle, 0, 0});
  std::copy(phases.begin(), phases.end(), out.begin() + first);
  return out;
}

std::vector<Phase> all_gather_phases(const AxisOrderPart& part, std::uint64_t shard_bytes) {
  std::vector<Phase> phases;
  std::uint64_t shard = shard_bytes;
  for (std::size_t k = 0; k < part.order.size(); ++k) {
    phases.push_back({PhaseKind::Gather, part.order[k], shard, part.sizes[k], part.rings[k]});
    shard *= static_cast<std::uint64_t>(part.sizes[k]);
  }
  return phases;
}

std::vector<Phase> reduce_scatter_phases(const AxisOrderPart& part, std::uint64_t part_bytes) {
  std::vector<Phase> phases;
  std::uint64_t divisor = 1;
  for (std::size_t k = 0; k < part.order.size(); ++k) {
    divisor *= static_cast<std::uint64_t>(part.sizes[k]);
    phases.push_back({PhaseKind::Reduce, part.order[k], ceil_div(part_bytes, divisor), part.sizes[k], part.rings[k]});
  }
  return phases;
}

TaskId routed_chain(ProgramBuilder& b, const Torus& t, std::span<const topology::LinkId> links, std::uint64_t bytes,
                    std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op) {
  MESHSIM_ASSERT(!links.empty(), "empty route");
  TaskId prev = 0;
  for (std::size_t k = 0; k < links.size(); ++k) {
    const TaskId x = b.transfer(links[k], bytes, op, static_cast<std::uint16_t>(k + 1));
    if (k == 0)
      b.depend(entry[t.link_info(links[k]).src], x);
    else
      b.depend(prev, x, sim::EdgeKind::Stream);
    prev = x;
  }
  b.depend(prev, exit[t.link_info(links.back()).dst]);
  return prev;
}

}  // namespace meshsim::collectives::detail
