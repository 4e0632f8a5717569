// Collectives over explicit groups of chips (collective.hpp, group_collective).
//
// Each group is a ring of its members in the listed order. Ring neighbours may sit
// anywhere on the torus: a ring step from member a to member b is routed, its
// bytes split evenly over every shortest dimension-order route of every rotation
// of the axes on which a and b differ (X-then-Y and Y-then-X; both ways round at
// exactly half an even ring; on a twisted torus every equally short crossing;
// between slices the one route over the data-center network), and forwarded hop
// by hop with cut-through. A member forwards what it receives on to the next step
// as it arrives (stream edges from every route of one step into every route of
// the next), as the axis rings do (ring_phase.hpp).
//
// On top of these steps the algorithms are the axis ring's:
//  - AllGather: each member's shard V/n travels floor(n/2) steps each way round;
//    on an even ring the last step of each way carries half of it, so every ring
//    edge carries (n-1)/2 shards in each direction;
//  - ReduceScatter: the sum of member d's chunk V/n is built along two chains of
//    floor(n/2) steps that end at d, one from each side; on an even ring both
//    start at the antipodal member, which sends half its contribution each way;
//  - AllReduce: the ReduceScatter, a per-chip barrier, the AllGather;
//  - AllToAll: each member sends its piece of V/n^2 straight to every other
//    member over the step routes, the farthest first.
#include <algorithm>
#include <map>
#include <tuple>

#include "base/error.hpp"
#include "sim/collectives/collective.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives {

using namespace detail;
using topology::LinkId;

namespace {

using Routes = std::vector<std::vector<LinkId>>;

// Every route of a step from a to b (see the top of this file).
Routes step_routes(const Torus& t, ChipId a, ChipId b) {
  if (t.between_slices(a, b)) {
    std::vector<int> all(static_cast<std::size_t>(t.num_axes()));
    for (int i = 0; i < t.num_axes(); ++i) all[static_cast<std::size_t>(i)] = i;
    return {t.route(a, b, all)};
  }
  std::vector<int> differ;
  for (int i = 0; i < t.num_axes(); ++i)
    if (t.coord(a, i) != t.coord(b, i)) differ.push_back(i);
  Routes out;
  for (std::size_t r = 0; r < differ.size(); ++r)
    for (auto& route : t.shortest_routes(a, b, rotated(differ, r))) out.push_back(std::move(route));
  return out;
}

// Builds (or, with a null builder, counts) the transfers of one op.
class GroupBuilder {
 public:
  GroupBuilder(ProgramBuilder* b, const Torus& t, const OpPorts* ports) : b_(b), t_(t), ports_(ports) {
    if (!b_) link_bytes_.assign(t.num_link_slots(), 0);
  }

  std::uint64_t transfers() const { return transfers_; }
  void set_chain_hops(std::uint64_t hops) { chain_hops_ = hops; }
  // Counting only: the bytes each link slot carries, and the most hops any
  // chain of steps crosses, summed over the op's phases.
  const std::vector<std::uint64_t>& link_bytes() const { return link_bytes_; }
  std::uint64_t chain_hops() const { return chain_hops_; }

  const Routes& routes(ChipId a, ChipId b) {
    auto it = routes_.find({a, b});
    if (it == routes_.end()) it = routes_.emplace(std::pair{a, b}, step_routes(t_, a, b)).first;
    return it->second;
  }

  // `bytes` from a to b over the step's routes; every route's first hop also
  // waits (stream) for each of `after` and for entry[a]. Returns the last hops.
  // Ring steps reuse their routes (kept); an all-to-all's pairs are used once
  // each, n^2 of them, so theirs are not kept.
  std::vector<TaskId> step(ChipId a, ChipId b, std::uint64_t bytes, std::span<const TaskId> entry,
                           std::span<const TaskId> after, std::uint16_t step_index, bool keep = true) {
    Routes once;
    if (!keep) once = step_routes(t_, a, b);
    const Routes& rs = keep ? routes(a, b) : once;
    MESHSIM_ASSERT(!rs.empty(), "a ring step between one chip and itself");
    const std::uint64_t share = ceil_div(bytes, rs.size());
    std::vector<TaskId> last;
    step_hops_ = 0;
    for (const std::vector<LinkId>& r : rs) {
      transfers_ += r.size();
      step_hops_ = std::max<std::uint64_t>(step_hops_, r.size());
      if (!b_) {
        for (LinkId l : r) link_bytes_[l] += share;
        continue;
      }
      TaskId prev = sim::kNoTask;
      for (std::size_t k = 0; k < r.size(); ++k) {
        const TaskId x = b_->transfer(r[k], share, ports_->op, step_index);
        if (k == 0) {
          b_->depend(entry[a], x);
          for (TaskId p : after) b_->depend(p, x, sim::EdgeKind::Stream);
        } else {
          b_->depend(prev, x, sim::EdgeKind::Stream);
        }
        prev = x;
      }
      last.push_back(prev);
    }
    return last;
  }

  void deliver(std::span<const TaskId> last, std::span<const TaskId> exit, ChipId to) {
    if (!b_) return;
    for (TaskId x : last) b_->depend(x, exit[to]);
  }

  // Chains of ring steps, built step-major (every chain's first step, then every
  // chain's second, ...) so that tasks running together get neighbouring ids.
  struct Chain {
    std::span<const ChipId> ring;
    std::size_t at;   // the member the next step leaves from
    int dir;          // +1 or -1 round the ring
    int steps;
    std::uint64_t first, middle, last;  // bytes of the first, middle and last steps
    std::vector<TaskId> prev = {};
    std::uint64_t hops = 0;  // crossed so far
    // The member the next step arrives at, and the bytes of step k.
    std::size_t next() const { return dir > 0 ? (at + 1) % ring.size() : (at + ring.size() - 1) % ring.size(); }
    std::uint64_t bytes(int k) const { return k + 1 == steps ? last : k == 0 ? first : middle; }
  };
  void run_chains(std::vector<Chain>& chains, std::span<const TaskId> entry, std::span<const TaskId> exit,
                  bool deliver_each) {
    int longest = 0;
    for (const Chain& c : chains) longest = std::max(longest, c.steps);
    std::uint64_t most_hops = 0;
    for (int k = 0; k < longest; ++k) {
      if (b_ && hop_major_) {
        hop_major_step(chains, k, entry, exit, deliver_each, most_hops);
        continue;
      }
      for (Chain& c : chains) {
        if (k >= c.steps) continue;
        const std::size_t to = c.next();
        c.prev = step(c.ring[c.at], c.ring[to], c.bytes(k), entry, c.prev, static_cast<std::uint16_t>(k + 1));
        c.hops += step_hops_;
        most_hops = std::max(most_hops, c.hops);
        if (deliver_each || k + 1 == c.steps) deliver(c.prev, exit, c.ring[to]);
        c.at = to;
      }
    }
    chain_hops_ += most_hops;
  }

  // Builds a step's transfers hop-major: every chain's first link, then every
  // chain's second, ... Two transfers of one step on a link are then ordered by
  // how far along its route each is, never by the chains' order, and a
  // translation of the torus that maps the groups onto each other maps every
  // link's transfers in order (driver/translations.hpp) whatever the order of
  // the groups' members.
  void set_hop_major(bool on) { hop_major_ = on; }
  void hop_major_step(std::vector<Chain>& chains, int k, std::span<const TaskId> entry, std::span<const TaskId> exit,
                      bool deliver_each, std::uint64_t& most_hops) {
    struct Pending {
      Chain* chain;
      std::size_t to;
      const Routes* routes;
      std::uint64_t share;
      std::vector<TaskId> last;
    };
    std::vector<Pending> steps;
    std::size_t longest = 0;
    for (Chain& c : chains) {
      if (k >= c.steps) continue;
      const std::size_t to = c.next();
      const Routes& rs = routes(c.ring[c.at], c.ring[to]);
      MESHSIM_ASSERT(!rs.empty(), "a ring step between one chip and itself");
      std::size_t hops = 0;
      for (const std::vector<LinkId>& r : rs) {
        transfers_ += r.size();
        hops = std::max(hops, r.size());
      }
      longest = std::max(longest, hops);
      c.hops += hops;
      most_hops = std::max(most_hops, c.hops);
      steps.push_back({&c, to, &rs, ceil_div(c.bytes(k), rs.size()), std::vector<TaskId>(rs.size(), sim::kNoTask)});
    }
    const auto step_index = static_cast<std::uint16_t>(k + 1);
    for (std::size_t j = 0; j < longest; ++j)
      for (Pending& p : steps)
        for (std::size_t i = 0; i < p.routes->size(); ++i) {
          const std::vector<LinkId>& r = (*p.routes)[i];
          if (j >= r.size()) continue;
          const TaskId x = b_->transfer(r[j], p.share, ports_->op, step_index);
          if (j == 0) {
            b_->depend(entry[p.chain->ring[p.chain->at]], x);
            for (TaskId before : p.chain->prev) b_->depend(before, x, sim::EdgeKind::Stream);
          } else {
            b_->depend(p.last[i], x, sim::EdgeKind::Stream);
          }
          p.last[i] = x;
        }
    for (Pending& p : steps) {
      Chain& c = *p.chain;
      c.prev = std::move(p.last);
      if (deliver_each || k + 1 == c.steps) deliver(c.prev, exit, c.ring[p.to]);
      c.at = p.to;
    }
  }

  void all_gather(std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes,
                  std::span<const TaskId> entry, std::span<const TaskId> exit) {
    std::vector<Chain> chains;
    for (const std::vector<ChipId>& g : groups) {
      const std::size_t n = g.size();
      if (n < 2) continue;
      const std::uint64_t shard = ceil_div(group_bytes, n);
      const int steps = static_cast<int>(n / 2);
      const std::uint64_t last = n % 2 == 0 ? ceil_div(shard, 2) : shard;
      for (std::size_t i = 0; i < n; ++i)
        for (int dir : {+1, -1}) chains.push_back({g, i, dir, steps, shard, shard, last});
    }
    run_chains(chains, entry, exit, /*deliver_each=*/true);
  }

  void reduce_scatter(std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes,
                      std::span<const TaskId> entry, std::span<const TaskId> exit) {
    std::vector<Chain> chains;
    for (const std::vector<ChipId>& g : groups) {
      const std::size_t n = g.size();
      if (n < 2) continue;
      const std::uint64_t chunk = ceil_div(group_bytes, n);
      const int steps = static_cast<int>(n / 2);
      const std::uint64_t first = n % 2 == 0 ? ceil_div(chunk, 2) : chunk;
      const std::uint64_t last = steps == 1 ? first : chunk;
      for (std::size_t d = 0; d < n; ++d) {
        const std::size_t h = static_cast<std::size_t>(steps);
        chains.push_back({g, (d + n - h) % n, +1, steps, first, chunk, last});
        chains.push_back({g, (d + h) % n, -1, steps, first, chunk, last});
      }
    }
    run_chains(chains, entry, exit, /*deliver_each=*/false);
  }

  void all_to_all(std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes,
                  std::span<const TaskId> entry, std::span<const TaskId> exit) {
    struct Dest {
      int hops;
      ChipId chip;
    };
    std::vector<Dest> dests;
    for (const std::vector<ChipId>& g : groups) {
      const std::uint64_t n = g.size();
      if (n < 2) continue;
      const std::uint64_t piece = ceil_div(group_bytes, n * n);
      for (ChipId src : g) {
        dests.clear();
        for (ChipId d : g)
          if (d != src) dests.push_back({t_.hop_distance(src, d), d});
        // Farthest pieces first, so they are under way while the near ones are sent.
        std::stable_sort(dests.begin(), dests.end(), [](const Dest& x, const Dest& y) { return x.hops > y.hops; });
        std::uint64_t most_hops = 0;
        for (const Dest& d : dests) {
          deliver(step(src, d.chip, piece, entry, {}, 1, /*keep=*/false), exit, d.chip);
          most_hops = std::max(most_hops, step_hops_);
        }
        chain_hops_ = std::max(chain_hops_, most_hops);
      }
    }
  }

 private:
  ProgramBuilder* b_;
  const Torus& t_;
  const OpPorts* ports_;
  std::uint64_t transfers_ = 0;
  std::vector<std::uint64_t> link_bytes_;
  std::uint64_t step_hops_ = 0;   // the longest route of the last step
  bool hop_major_ = false;        // set_hop_major
  std::uint64_t chain_hops_ = 0;
  std::map<std::pair<ChipId, ChipId>, Routes> routes_;
};

void run(GroupBuilder& g, Kind kind, std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes,
         std::span<const TaskId> entry, std::span<const TaskId> exit, std::span<const TaskId> mid) {
  switch (kind) {
    case Kind::AllGather:
      return g.all_gather(groups, group_bytes, entry, exit);
    case Kind::ReduceScatter:
      return g.reduce_scatter(groups, group_bytes, entry, exit);
    case Kind::AllReduce:
      g.reduce_scatter(groups, group_bytes, entry, mid);
      return g.all_gather(groups, group_bytes, mid, exit);
    case Kind::AllToAll:
      return g.all_to_all(groups, group_bytes, entry, exit);
    case Kind::Send:
    case Kind::Matmul:
    case Kind::Elementwise:
      break;
  }
  MESHSIM_ASSERT(false, "not a group collective");
}

// The factors of size > 1 (indices into `factors`), when there are two or more
// and the collective runs a phase per factor; else none.
std::vector<std::size_t> phased_factors(Kind kind, std::span<const std::vector<ChipId>> groups,
                                        std::span<const int> factors) {
  std::vector<std::size_t> out;
  std::uint64_t n = 1;
  for (std::size_t f = 0; f < factors.size(); ++f) {
    n *= static_cast<std::uint64_t>(factors[f]);
    if (factors[f] > 1) out.push_back(f);
  }
  MESHSIM_ASSERT(factors.empty() || groups.empty() || n == groups.front().size(), "a group is its factors' product");
  if (out.size() < 2 || kind == Kind::AllToAll) out.clear();
  return out;
}

// The rings of factor f in every group: the members that differ only in it.
std::vector<std::vector<ChipId>> factor_rings(std::span<const std::vector<ChipId>> groups, std::span<const int> factors,
                                              std::size_t f) {
  std::size_t stride = 1;
  for (std::size_t i = 0; i < f; ++i) stride *= static_cast<std::size_t>(factors[i]);
  const auto m = static_cast<std::size_t>(factors[f]);
  std::vector<std::vector<ChipId>> out;
  for (const std::vector<ChipId>& g : groups)
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (i / stride % m != 0) continue;
      std::vector<ChipId> ring;
      for (std::size_t j = 0; j < m; ++j) ring.push_back(g[i + j * stride]);
      out.push_back(std::move(ring));
    }
  return out;
}

// A collective a phase per factor (group_collective): K parts, part p through
// the factors rotated by p; with a builder, a join per chip between phases.
void run_factored(GroupBuilder& g, ProgramBuilder* b, const OpPorts* ports, Kind kind,
                  std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes, std::span<const int> factors,
                  const std::vector<std::size_t>& phased) {
  const std::size_t k = phased.size();
  std::vector<std::vector<std::vector<ChipId>>> rings(factors.size());
  for (std::size_t f : phased) rings[f] = factor_rings(groups, factors, f);
  const std::uint64_t n = groups.front().size(), part = ceil_div(group_bytes, k);
  std::uint64_t hops = 0;  // the first part's chains (the parts run side by side)
  for (std::size_t p = 0; p < k; ++p) {
    std::vector<std::size_t> order(k);
    for (std::size_t i = 0; i < k; ++i) order[i] = phased[(i + p) % k];
    // (gather, factor, bytes for the ring call: m x shard or m x chunk)
    std::vector<std::tuple<bool, std::size_t, std::uint64_t>> phases;
    std::uint64_t reduced = 1, chunk = part;
    if (kind != Kind::AllGather)
      for (std::size_t f : order) {
        reduced *= static_cast<std::uint64_t>(factors[f]);
        chunk = ceil_div(part, reduced);
        phases.emplace_back(false, f, chunk * static_cast<std::uint64_t>(factors[f]));
      }
    if (kind != Kind::ReduceScatter) {
      std::uint64_t shard = kind == Kind::AllGather ? ceil_div(part, n) : chunk;
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t f = kind == Kind::AllGather ? order[i] : order[k - 1 - i];
        phases.emplace_back(true, f, shard * static_cast<std::uint64_t>(factors[f]));
        shard *= static_cast<std::uint64_t>(factors[f]);
      }
    }
    std::vector<TaskId> in, out;
    if (b) in.assign(ports->entry.begin(), ports->entry.end());
    const std::uint64_t before = g.chain_hops();
    for (std::size_t i = 0; i < phases.size(); ++i) {
      const auto& [gather, f, bytes] = phases[i];
      if (b) {
        out = i + 1 == phases.size() ? std::vector<TaskId>(ports->exit.begin(), ports->exit.end())
                                     : make_joins(*b, ports->entry, ports->op);
        for (ChipId c = 0; c < in.size(); ++c)
          if (ports->active(c)) b->depend(in[c], out[c]);
      }
      if (gather)
        g.all_gather(rings[f], bytes, in, out);
      else
        g.reduce_scatter(rings[f], bytes, in, out);
      in = std::move(out);
    }
    if (p == 0) hops = g.chain_hops() - before;
  }
  g.set_chain_hops(hops);
}

}  // namespace

void group_collective(ProgramBuilder& b, const Torus& t, Kind kind, std::span<const std::vector<ChipId>> groups,
                      std::uint64_t group_bytes, const OpPorts& ports, std::span<const int> factors) {
  for (const std::vector<ChipId>& g : groups)
    for (ChipId c : g) MESHSIM_ASSERT(c < t.num_chips() && ports.active(c), "a group's chip outside the op's chips");
  GroupBuilder builder(&b, t, &ports);
  builder.set_hop_major(!factors.empty());
  if (const std::vector<std::size_t> phased = phased_factors(kind, groups, factors); !phased.empty())
    return run_factored(builder, &b, &ports, kind, groups, group_bytes, factors, phased);
  std::vector<TaskId> mid;
  if (kind == Kind::AllReduce) {
    // A chip starts gathering once it holds its reduced chunk.
    mid = make_joins(b, ports.entry, ports.op);
    for (ChipId c = 0; c < t.num_chips(); ++c)
      if (ports.active(c)) b.depend(ports.entry[c], mid[c]);
  }
  run(builder, kind, groups, group_bytes, ports.entry, ports.exit, mid);
}

GroupLoad group_load(const Torus& t, Kind kind, std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes,
                     std::span<const int> factors) {
  GroupBuilder counter(nullptr, t, nullptr);
  if (const std::vector<std::size_t> phased = phased_factors(kind, groups, factors); !phased.empty())
    run_factored(counter, nullptr, nullptr, kind, groups, group_bytes, factors, phased);
  else
    run(counter, kind, groups, group_bytes, {}, {}, {});
  GroupLoad load;
  load.transfers = counter.transfers();
  load.chain_hops = counter.chain_hops();
  for (std::size_t l = 0; l < counter.link_bytes().size(); ++l)
    if (counter.link_bytes()[l] > load.busiest_bytes) {
      load.busiest_bytes = counter.link_bytes()[l];
      load.busiest_link = static_cast<LinkId>(l);
    }
  return load;
}

}  // namespace meshsim::collectives
