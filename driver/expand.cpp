#include "driver/expand.hpp"

#include <fmt/format.h>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/run_context.hpp"
#include "sim/collectives/collective.hpp"
#include "sim/collectives/gpu.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace meshsim::driver {

namespace {

// The chips an op runs on.
std::uint64_t active_chips(const workloads::Op& op, const topology::Torus& t) {
  return op.chips ? op.chips->size() : t.num_chips();
}

// The torus estimate (see estimate_transfers).
std::uint64_t estimate_torus_transfers(const workloads::Op& op, const topology::Torus& t,
                                       collectives::PlanCache& plans) {
  if (const auto* groups = op.explicit_groups())
    return collectives::group_load(t, op.kind, *groups, op.comm_bytes(), op.collective().factors)
        .transfers;  // counted exactly
  const std::uint64_t chips = active_chips(op, t);
  if (op.kind == OpKind::Send) {
    std::uint64_t n = 0;
    // A twisted torus routes over the differing axes only, each at most twice round.
    std::uint64_t twisted_route = 0;
    for (int a = 0; a < t.num_axes() && t.twisted(); ++a) twisted_route += 2 * static_cast<std::uint64_t>(t.axis(a).size);
    // (a step between slices crosses two links)
    const std::uint64_t dcn_links = t.dcn_axis() < 0 ? 0 : 1;
    for (const auto& [src, dst] : workloads::send_pairs(op))
      n += static_cast<std::uint64_t>(t.num_axes()) *
           ((t.twisted() ? twisted_route : static_cast<std::uint64_t>(t.hop_distance(src, dst))) + dcn_links);
    return n;
  }
  const std::vector<int>& axes = op.comm_axes();
  std::uint64_t group = 1, ring_hops = 0, max_hops = 0;
  for (int a : axes) {
    const auto x = static_cast<std::uint64_t>(t.axis(a).size);
    group *= x;
    const std::uint64_t links = t.switched(a) ? 2 : 1;  // a step between slices: out and in
    ring_hops += links * x;  // at most X hops per chip and phase
    max_hops += links * x;
  }
  const std::uint64_t parts = op.kind == OpKind::AllToAll || axes.empty()
                                  ? axes.size()
                                  : plans.part_bound(t, axes, torus_schedule(op));
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
      return chips * ring_hops * parts;
    case OpKind::AllReduce:
      return 2 * chips * ring_hops * parts;
    case OpKind::AllToAll: {
      if (t.twisted()) {
        // Every chip's pieces take the same routes, translated (the twisted
        // wiring is the same at every chip): count chip 0's exactly.
        std::uint64_t per_chip = 0;
        std::vector<int> rotation(axes.begin(), axes.end());
        for (std::size_t r = 0; r < axes.size(); ++r) {
          for (topology::ChipId d = 1; d < t.num_chips(); ++d) {
            bool in_group = true;
            for (int a = 0; a < t.num_axes() && in_group; ++a)
              in_group = t.coord(d, a) == 0 ||
                         std::find(axes.begin(), axes.end(), a) != axes.end();
            if (!in_group) continue;
            for (const auto& route : t.shortest_routes(0, d, rotation)) per_chip += route.size();
          }
          std::rotate(rotation.begin(), rotation.begin() + 1, rotation.end());
        }
        return chips * per_chip;
      }
      // group - 1 pieces per chip, each over `parts` rotations and up to 2^axes
      // antipodal halves, each of at most max_hops hops.
      const std::uint64_t splits = parts << std::min<std::size_t>(axes.size(), 20);
      const unsigned __int128 n = static_cast<unsigned __int128>(chips) * (group - 1) * splits * max_hops;
      return n > kMaxTasks ? kMaxTasks + 1 : static_cast<std::uint64_t>(n);
    }
    case OpKind::Send:
    case OpKind::Matmul:
    case OpKind::Elementwise:
      break;
  }
  return 0;
}

}  // namespace

namespace {

// Every group builds the same transfers: an op on a subset of the chips (a
// union of groups) has that share of `all`, the transfers over every chip.
std::uint64_t chips_share(const workloads::Op& op, const topology::Torus& t, std::uint64_t all) {
  if (!op.chips) return all;
  const unsigned __int128 part =
      (static_cast<unsigned __int128>(all) * op.chips->size() + t.num_chips() - 1) / t.num_chips();
  return static_cast<std::uint64_t>(part);
}

// estimate_transfers for every op of one workload, with the GPU algorithm
// choices and the collectives' transfer bounds memoized (ops alike share them).
class Estimator {
 public:
  Estimator(const workloads::Workload& w, RunContext& run)
      : w_(w), t_(run.torus()), choices_(run.gpu()), plans_(run.plans()) {}
  const topology::Fabric* fabric() const { return choices_ ? &choices_->fabric() : nullptr; }
  GpuChoices* choices() { return choices_; }
  collectives::PlanCache& plans() { return plans_; }
  std::uint64_t operator()(const workloads::Op& op) {
    if (!choices_ && op.explicit_groups()) {
      // Counted by building them: once per kind and groups (ops over the same
      // groups share them: a training step's over the same mesh axes).
      const auto key = std::pair{static_cast<int>(op.kind), static_cast<const void*>(op.explicit_groups())};
      auto it = group_transfers_.find(key);
      if (it == group_transfers_.end())
        it = group_transfers_.emplace(key, estimate_torus_transfers(op, t_, plans_)).first;
      return it->second;
    }
    if (!choices_) return estimate_torus_transfers(op, t_, plans_);
    if (!is_collective(op.kind)) return estimate_transfers(op, w_, t_, fabric());
    const GpuChoice& c = (*choices_)(op);
    const Key key{static_cast<int>(op.kind), op.comm_axes(), op.comm_bytes(), static_cast<int>(c.algorithm),
                  static_cast<int>(c.protocol)};
    auto it = bounds_.find(key);
    if (it == bounds_.end())
      it = bounds_
               .emplace(key,
                        collectives::gpu::transfer_bound(choices_->fabric(), t_, op.kind, c.algorithm, op.comm_axes(),
                                                         op.comm_bytes(), w_.hardware.forward_chunk_bytes, c.protocol))
               .first;
    return chips_share(op, t_, it->second);
  }

 private:
  using Key = std::tuple<int, std::vector<int>, std::uint64_t, int, int>;
  const workloads::Workload& w_;
  const topology::Torus& t_;
  GpuChoices* choices_;  // the run's; null on a torus
  std::map<Key, std::uint64_t> bounds_;
  std::map<std::pair<int, const void*>, std::uint64_t> group_transfers_;
  collectives::PlanCache& plans_;  // the run's: the torus's multi-axis plans
};

}  // namespace

std::uint64_t estimate_transfers(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& t,
                                 const topology::Fabric* fabric) {
  if (!fabric) {
    collectives::PlanCache plans;
    return estimate_torus_transfers(op, t, plans);
  }
  switch (op.kind) {
    case OpKind::Send: {
      std::uint64_t n = 0;
      for (const auto& [src, dst] : workloads::send_pairs(op)) n += fabric->route(src, dst).size();
      return n;
    }
    case OpKind::Matmul:
    case OpKind::Elementwise:
      return 0;
    default: {
      const GpuChoice c = gpu_algorithm(op, w, t, *fabric);
      return chips_share(op, t,
                         collectives::gpu::transfer_bound(*fabric, t, op.kind, c.algorithm, op.comm_axes(),
                                                          op.comm_bytes(), w.hardware.forward_chunk_bytes, c.protocol));
    }
  }
}

RunSize estimate_run(const workloads::Workload& w, RunContext& run) {
  RunSize size;
  const topology::Torus& torus = run.torus();
  Estimator estimate(w, run);
  const auto saturating_add = [](std::uint64_t a, std::uint64_t b) { return a > ~b ? ~std::uint64_t{0} : a + b; };
  const auto saturating_mul = [](std::uint64_t a, std::uint64_t b) {
    return b != 0 && a > ~std::uint64_t{0} / b ? ~std::uint64_t{0} : a * b;
  };
  std::uint64_t joins = 0;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    const std::uint64_t transfers = estimate(op);
    if (i == 0 || transfers > size.biggest_op_transfers) {
      size.biggest_op = i;
      size.biggest_op_transfers = transfers;
      size.biggest_op_tasks = saturating_add(transfers, 2ull * active_chips(op, torus));
    }
    size.transfers = saturating_add(size.transfers, transfers);
    // An entry and an exit join per chip; a matmul adds a compute per chip.
    joins = saturating_add(joins, (is_local(op.kind) ? 3ull : 2ull) * active_chips(op, torus));
  }
  // As expand() reserves: the collectives' own joins are at most one per 8 transfers.
  joins = saturating_add(joins, size.transfers / 8);
  size.tasks = saturating_add(size.transfers, joins);
  size.edges = saturating_add(saturating_mul(3, size.transfers), saturating_mul(2, joins));
  // Per task: the program's Task, step and successor offset, the executor's
  // state and pending count. Per edge: the builder's packed edge and the
  // program's successor entry.
  constexpr std::uint64_t kPerTask = sizeof(sim::Task) + sizeof(std::uint16_t) + sizeof(std::uint32_t) +
                                     2 * sizeof(Tick) + sizeof(std::uint32_t);
  constexpr std::uint64_t kPerEdge = sizeof(std::uint64_t) + sizeof(std::uint32_t);
  size.memory_bytes = saturating_add(saturating_mul(kPerTask, size.tasks), saturating_mul(kPerEdge, size.edges));
  return size;
}

RunSize translated_size(const RunSize& full, std::uint64_t translations, bool biggest_built) {
  RunSize out = full;
  if (translations <= 1) return out;
  const auto share = [&](std::uint64_t n) { return n / translations + (n % translations != 0); };
  out.transfers = share(full.transfers);
  out.tasks = share(full.tasks);
  out.edges = share(full.edges);
  out.biggest_op_transfers = share(full.biggest_op_transfers);
  // The largest op's program, its share of the memory by its transfers.
  if (!biggest_built) out.biggest_op_tasks = 0;
  const double biggest = full.transfers == 0 || !biggest_built ? 0.0
                                             : static_cast<double>(full.memory_bytes) *
                                                   static_cast<double>(full.biggest_op_transfers) /
                                                   static_cast<double>(full.transfers);
  out.memory_bytes = share(full.memory_bytes) + static_cast<std::uint64_t>(std::min(biggest, 1.8e19));
  out.translations = translations;
  return out;
}

bool within_limits(const RunSize& size, const Limits& limits) {
  // The program's own limit (32-bit ids, edges), also for the op built whole to check a quotient.
  const bool whole_op = size.translations > 1 && size.biggest_op_tasks > kMaxTasks;
  return size.transfers <= limits.max_transfers && size.tasks <= kMaxTasks && !whole_op &&
         size.memory_bytes <= limits.max_memory_bytes;
}

void check_limits(const workloads::Workload& w, const RunSize& size, const Limits& limits, const std::string& hint) {
  if (within_limits(size, limits)) return;
  const bool transfers = size.transfers > limits.max_transfers;
  const bool whole_op = size.translations > 1 && size.biggest_op_tasks > kMaxTasks;
  const bool tasks = !transfers && (size.tasks > kMaxTasks || whole_op);
  const workloads::Op& op = w.ops[size.biggest_op];
  const auto size_text = [](std::uint64_t bytes) {
    const auto in = [&](int shift) { return static_cast<double>(bytes) / static_cast<double>(1ull << shift); };
    return bytes >= (1ull << 30) ? fmt::format("{:.3g} GiB", in(30))
           : bytes >= (1ull << 20) ? fmt::format("{:.3g} MiB", in(20))
                                   : fmt::format("{:.3g} KiB", in(10));
  };
  const bool largest = transfers && limits.max_transfers >= kMaxTasks;
  const std::string limit =
      largest     ? fmt::format("meshsim's largest limit of {} transfers", kMaxTasks)
      : transfers ? fmt::format("the limit of {} transfers (--max-transfers)", limits.max_transfers)
      : whole_op  ? fmt::format("meshsim's limit of {} tasks for the op built whole to check the reduction (it "
                                "has about {})",
                                kMaxTasks, size.biggest_op_tasks)
      : tasks     ? fmt::format("meshsim's limit of {} tasks (with {} joins and computes)", kMaxTasks,
                                size.tasks - size.transfers)
                  : fmt::format("the limit of {} (--max-memory)", size_text(limits.max_memory_bytes));
  throw InputError(w.file, op.pointer,
                   fmt::format("the run would need about {} hop transfers{} and {} of memory, more than {}; {}this "
                               "op alone needs about {}: coarsen the workload (a smaller mesh, fewer axes per "
                               "collective{}, fewer ops){}",
                               size.transfers,
                               size.groups > 1
                                   ? fmt::format(" (simulating one of its {} identical independent groups)", size.groups)
                               : size.translations > 1 && size.mirrored
                                   ? fmt::format(" (simulating one task of each set of {} images: the rotations of "
                                                 "every node's GPUs and the mirror of the nodes)",
                                                 size.translations)
                               : size.translations > 1
                                   ? fmt::format(" (simulating one task of each set of {} translates)",
                                                 size.translations)
                                   : std::string(),
                               size_text(size.memory_bytes), limit, hint.empty() ? hint : hint + "; ",
                               size.biggest_op_transfers,
                               w.hardware.gpu ? ", a larger forward_chunk_bytes" : "",
                               largest || tasks ? "" : " or raise the limit"));
}

struct Expander::State {
  State(const workloads::Workload& w, RunContext& run, const BuildOptions& o)
      : system(run.system()), torus(run.torus()), estimator(w, run), options(o) {}
  const topology::System& system;
  const topology::Torus& torus;
  Estimator estimator;
  BuildOptions options;
  Expanded layout;  // the resources and the network, no ops
};

Expander::Expander(const workloads::Workload& w, RunContext& run, const BuildOptions& options)
    : state_(std::make_unique<State>(w, run, options)) {
  const topology::Torus& torus = run.torus();
  Expanded& out = state_->layout;
  const std::uint32_t chips = torus.num_chips();
  out.chips = chips;
  // Resources: the links (torus link slots, or the fabric's links), then one
  // compute unit per chip.
  const topology::Fabric* fabric = state_->estimator.fabric();
  if (fabric) {
    // Switch nodes after the GPUs (Fabric::link_ends).
    for (topology::LinkId l = 0; l < fabric->num_links(); ++l) {
      const topology::FabricLink& link = fabric->link(l);
      // How NCCL's LL and LL128 see it (op classes 1 and 2, collectives::gpu::Protocol).
      using collectives::gpu::Protocol;
      sim::ResourceVariant ll = collectives::gpu::protocol_variant(Protocol::LL, link.kind, link.spec.latency);
      if (const std::uint64_t b = collectives::gpu::link_bandwidth(*fabric, l, Protocol::LL);
          b != link.spec.bandwidth_bytes_per_s)
        ll.bandwidth_bytes_per_s = b;
      out.resources.push_back(sim::Resource{
          link.spec.bandwidth_bytes_per_s, link.spec.latency, w.hardware.forward_chunk_bytes,
          {ll, collectives::gpu::protocol_variant(Protocol::LL128, link.kind, link.spec.latency)}});
      out.resource_ends.push_back(fabric->link_ends(l));
    }
  } else {
    // Multislice: the data-center network is one node after the chips.
    const std::uint32_t network = chips;
    for (topology::LinkId l = 0; l < torus.num_link_slots(); ++l) {
      const topology::Link& link = torus.link_info(l);
      const topology::LinkSpec& spec = torus.spec(l);
      out.resources.push_back(sim::Resource{spec.bandwidth_bytes_per_s, spec.latency, w.hardware.forward_chunk_bytes});
      // A missing link slot (an axis without wraparound) carries nothing.
      if (!torus.link_exists(l))
        out.resource_ends.emplace_back(0, 0);
      else if (link.dcn)
        out.resource_ends.emplace_back(link.direction == topology::Direction::Plus ? std::pair{link.src, network}
                                                                                   : std::pair{network, link.dst});
      else
        out.resource_ends.emplace_back(link.src, link.dst);
    }
  }
  out.links = out.resources.size();
  out.resources.resize(out.links + chips, sim::Resource{0, kZeroTick, 0});
  for (std::uint32_t c = 0; c < chips; ++c) out.resource_ends.emplace_back(c, c);
  out.nodes = chips;
  for (const auto& [from, to] : out.resource_ends) out.nodes = std::max({out.nodes, from + 1, to + 1});
}

Expander::~Expander() = default;

Expanded Expander::operator()(const workloads::Workload& w) const {
  const topology::Torus& torus = state_->torus;
  Estimator& estimator = state_->estimator;
  const topology::Fabric* fabric = estimator.fabric();
  Expanded out = state_->layout;
  const std::uint32_t chips = out.chips;
  const auto compute_unit = [&](std::uint32_t chip) { return static_cast<std::uint32_t>(out.links + chip); };
  sim::ProgramBuilder b;
  b.copy_repeats = state_->options.copy_repeats;
  {
    // Reserve from the estimates: untouched capacity costs no resident memory,
    // and no reallocation copies millions of tasks.
    std::uint64_t transfers = 0;
    for (const workloads::Op& op : w.ops) {
      std::uint64_t estimate = 0;
      try {
        estimate = estimator(op);
      } catch (const InputError&) {
        // An op with no algorithm that applies: reported in order below.
      }
      transfers = std::min<std::uint64_t>(transfers + std::min<std::uint64_t>(estimate, kMaxTasks), kMaxTasks);
    }
    std::uint64_t ports = 0;
    for (const workloads::Op& op : w.ops) ports += 2 * active_chips(op, torus);
    const std::uint64_t joins = ports + transfers / 8;
    b.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(transfers + joins, kMaxTasks)),
              static_cast<std::size_t>(std::min<std::uint64_t>(3 * transfers + 2 * joins, 3 * kMaxTasks)));
  }
  // Per op, its exit joins on the chips it runs on (in the order of its set).
  std::vector<std::vector<sim::TaskId>> exits;
  std::vector<sim::TaskId> entry(chips), exit(chips);
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    const sim::OpId id = b.add_op();
    const sim::OpChips layout{static_cast<sim::TaskId>(b.num_tasks()), op.chips, chips};
    const std::uint32_t n = layout.count();
    MESHSIM_ASSERT(!op.chips || (n > 0 && op.chips->back() < chips), "an op's chips are out of range");
    out.op_ports.push_back(layout);
    out.send_chips.push_back(send_chips(op));
    std::fill(entry.begin(), entry.end(), sim::kNoTask);
    std::fill(exit.begin(), exit.end(), sim::kNoTask);
    // A communication op's fixed cost (launch, synchronisation) delays every chip's entry.
    const Tick fixed = op_fixed_cost(op, w, state_->system, estimator.choices());
    for (std::uint32_t k = 0; k < n; ++k) entry[layout.chip_at(k)] = b.join(id, fixed, layout.chip_at(k));
    for (std::uint32_t k = 0; k < n; ++k) exit[layout.chip_at(k)] = b.join(id, kZeroTick, layout.chip_at(k));
    for (std::uint32_t k = 0; k < n; ++k) {
      const std::uint32_t c = layout.chip_at(k);
      b.depend(entry[c], exit[c]);
      // An op waits on chip c for the ops it depends on that run on chip c.
      for (std::uint32_t dep : op.deps)
        if (const auto at = out.op_ports[dep].position(c)) b.depend(exits[dep][*at], entry[c]);
    }
    const std::uint64_t estimate = estimator(op);
    if (b.num_tasks() + estimate + 2ull * n > kMaxTasks)
      throw InputError(w.file, op.pointer,
                       fmt::format("this op needs about {} hop transfers; with the ops before it that is more than "
                                   "meshsim's limit of {} tasks (use fewer chips per group{} or fewer ops)",
                                   estimate, kMaxTasks, fabric ? ", a larger forward_chunk_bytes" : ""));
    // The builders skip a group by its first chip: a collective's chips must be
    // whole groups (the lowering gives it a pipeline stage's chips, and no
    // collective runs over the pipeline axis).
    if (op.chips && is_collective(op.kind) && !op.explicit_groups())
      for (std::uint32_t k = 0; k < n; ++k) {
        topology::ChipId first = layout.chip_at(k);
        for (int a : op.collective().hw_axes) first = torus.with_coord(first, a, 0);
        MESHSIM_ASSERT(entry[first] != sim::kNoTask, "a collective's chips are not whole groups over its axes");
      }
    const std::size_t first_task = b.num_tasks();
    const collectives::OpPorts ports{id, entry, exit};
    switch (op.kind) {
      case OpKind::AllGather:
      case OpKind::ReduceScatter:
      case OpKind::AllReduce:
      case OpKind::AllToAll: {
        const workloads::CollectiveOp& co = op.collective();
        MESHSIM_ASSERT(!fabric || !co.groups, "groups of chips on a GPU fabric");
        if (co.groups) {
          collectives::group_collective(b, torus, op.kind, *co.groups, co.bytes, ports, co.factors);
        } else if (fabric) {
          const GpuChoice& c = (*estimator.choices())(op);
          collectives::gpu::build(b, *fabric, torus, op.kind, c.algorithm, co.hw_axes, co.bytes,
                                  w.hardware.forward_chunk_bytes, ports, c.protocol);
        } else {
          collectives::build(b, torus, op.kind, co.hw_axes, co.bytes, ports, torus_schedule(op), &estimator.plans());
        }
        break;
      }
      case OpKind::Send:
        for (const auto& [src, dst] : workloads::send_pairs(op)) {
          MESHSIM_ASSERT(entry[src] != sim::kNoTask && exit[dst] != sim::kNoTask, "a send outside its op's chips");
          if (fabric)
            collectives::gpu::send(b, *fabric, src, dst, op.send().bytes, ports);
          else
            collectives::send(b, torus, src, dst, op.send().bytes, ports);
        }
        break;
      case OpKind::Matmul:
      case OpKind::Elementwise: {
        const Tick t = local_cost(op, w.hardware, w.file).time();
        for (std::uint32_t k = 0; k < n; ++k) {
          const std::uint32_t c = layout.chip_at(k);
          const sim::TaskId task = b.compute(compute_unit(c), t, id);
          b.depend(entry[c], task);
          b.depend(task, exit[c]);
        }
        break;
      }
    }
    std::uint64_t transfers = 0, link_bytes = 0;
    for (std::size_t t = first_task; t < b.num_tasks(); ++t) {
      const sim::Task& task = b.task(static_cast<sim::TaskId>(t));
      if (task.kind() != sim::TaskKind::Transfer) continue;
      ++transfers;
      link_bytes += task.amount;
    }
    out.op_transfers.push_back(transfers);
    out.op_link_bytes.push_back(link_bytes);
    std::vector<sim::TaskId> own(n);
    for (std::uint32_t k = 0; k < n; ++k) own[k] = exit[layout.chip_at(k)];
    exits.push_back(std::move(own));
  }
  out.program = std::move(b).finish();
  return out;
}

std::vector<std::uint32_t> send_chips(const workloads::Op& op) {
  std::vector<std::uint32_t> out;
  if (op.kind != OpKind::Send) return out;
  for (const auto& [src, dst] : workloads::send_pairs(op)) out.insert(out.end(), {src, dst});
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Expanded expand(const workloads::Workload& w, RunContext& run, const BuildOptions& options) {
  return Expander(w, run, options)(w);
}

Expanded expand(const workloads::Workload& w, const BuildOptions& options) {
  RunContext run(w);
  return expand(w, run, options);
}

}  // namespace meshsim::driver
