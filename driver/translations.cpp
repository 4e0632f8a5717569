#include "driver/translations.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>

#include "base/error.hpp"
#include "driver/costs.hpp"
#include "driver/run_context.hpp"

namespace meshsim::driver {

namespace {

constexpr std::uint32_t kNone = ~std::uint32_t{0};

// Nodes between a node and the next along node axis `a` (>= 1) of a GPU fabric's coordinates.
int node_stride(const topology::Torus& t, int a) {
  int stride = 1;
  for (int b = 1; b < a; ++b) stride *= t.axis(b).size;
  return stride;
}

// Whether `step` nodes along node axis `a` moves the fabric's cables with the
// nodes (topology::Fabric::cable_period): every aligned block of `period` nodes
// lands whole and in order on another, which holds when the shift and the
// axis' whole span are multiples of the period (a block then sits on one side
// of where the axis wraps, all of its nodes moved alike).
bool moves_cables(const topology::Torus& t, int a, int step, int period) {
  const int stride = node_stride(t, a);
  return period > 0 && stride * step % period == 0 && stride * t.axis(a).size % period == 0;
}

// Each distinct set of explicit groups of w's ops, its groups sorted (ops share
// their sets: a stage's KV replicas are one set for all its ops, so each is
// copied and sorted once).
std::vector<std::vector<std::vector<topology::ChipId>>> explicit_group_sets(const workloads::Workload& w) {
  std::vector<const std::vector<std::vector<topology::ChipId>>*> shared;
  for (const workloads::Op& op : w.ops)
    if (const auto* groups = op.explicit_groups()) shared.push_back(groups);
  std::sort(shared.begin(), shared.end());
  shared.erase(std::unique(shared.begin(), shared.end()), shared.end());
  std::vector<std::vector<std::vector<topology::ChipId>>> out;
  // Each group as a set: a translation that maps groups onto groups whatever
  // their members' order may still be an automorphism of the program (a ring
  // turned, a factor's rings shifted), which Translations::verify decides.
  for (const auto* groups : shared) {
    out.push_back(*groups);
    for (std::vector<topology::ChipId>& g : out.back()) std::sort(g.begin(), g.end());
    std::sort(out.back().begin(), out.back().end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<Shift> translated_axes(const workloads::Workload& w, RunContext& run) {
  const topology::Torus& t = run.torus();
  std::vector<Shift> out;
  if (t.twisted() || w.ops.empty()) return out;
  const bool gpu = run.gpu() != nullptr;
  // Explicit groups of chips (an imported program's replica groups, a training
  // step's replicas of a KV head): a torus only.
  const std::vector<std::vector<std::vector<topology::ChipId>>> group_sets = explicit_group_sets(w);
  if (gpu && !group_sets.empty()) return out;
  // On a GPU fabric, what a shift of the nodes cannot keep (Translations::verify
  // would refuse it, after building each op): NCCL's tree across nodes, whose
  // positions are absolute. A ring through the GPUs of several nodes runs every
  // other node of the ring backwards, so a shift must move it by an even number
  // of positions (a group inside each node runs forwards in every node).
  std::vector<std::vector<int>> crossing;  // per ring through several nodes' GPUs: its node axes, in order
  std::vector<bool> fixed(static_cast<std::size_t>(t.num_axes()), false);  // node axes no shift may move
  // With several units of leaves (or pods), the shifts move the switches'
  // cables with the nodes, whole blocks of the fabric's cable period at a time
  // (a program across units uses them; Translations::find maps them).
  int cable_period = 0;
  // NCCL's tree across nodes has no node shifts, but its channels are the
  // rails' rotations of each other: the GPUs of every node turned by one (GPU
  // i to i + 1, rail i to i + 1) is its automorphism, offered as a step along
  // axis 0 when every collective over the GPUs of a node is such a tree (an op
  // over node axes alone runs one group per rail: rotated too).
  bool tree = false, rotates = true;
  if (gpu) {
    GpuChoices& choices = *run.gpu();
    const topology::Fabric& fabric = choices.fabric();
    if (fabric.units() > 1) cable_period = fabric.cable_period();
    for (const workloads::Op& op : w.ops) {
      if (!is_collective(op.kind)) continue;
      bool local = false, across = false;
      std::vector<int> nodes;
      for (int a : op.comm_axes()) {
        if (t.axis(a).size < 2) continue;
        (t.axis(a).in_node ? local : across) = true;
        if (!t.axis(a).in_node) nodes.push_back(a);
      }
      using collectives::gpu::Algorithm;
      const Algorithm alg = choices(op).algorithm;
      if (across && alg == Algorithm::Tree) tree = true;
      if (local && !(across && alg == Algorithm::Tree)) rotates = false;
      const bool ring = alg == Algorithm::Ring || alg == Algorithm::Hierarchical;
      if (local && across && ring) crossing.push_back(nodes);
      // A ring over several node axes visits them first fastest: a shift along
      // one but the last is no rotation of it (the first axis' last node wraps
      // to its first, not on to the next), so only the last may shift.
      if (ring)
        for (std::size_t i = 0; i + 1 < nodes.size(); ++i) fixed[static_cast<std::size_t>(nodes[i])] = true;
      // NCCL's NVLS tree runs its double binary tree over the nodes: no shift
      // of them along its node axes keeps it.
      if (alg == Algorithm::NvlsTree)
        for (int a : nodes) fixed[static_cast<std::size_t>(a)] = true;
    }
  }
  // `n` steps along `axis`: to the torus' neighbour (n = 1), or n chips on
  // (round to the first), or on a GPU fabric to the same GPU of the node n on
  // along a node axis.
  const auto move = [&](topology::ChipId c, int axis, int n) {
    if (!gpu && n == 1) return t.neighbor(c, axis, topology::Direction::Plus);
    return t.with_coord(c, axis, (t.coord(c, axis) + n) % t.axis(axis).size);
  };
  // The distinct sets of chips (a training step's ops share their stage's).
  std::vector<const std::vector<topology::ChipId>*> sets;
  for (const workloads::Op& op : w.ops)
    if (op.chips) sets.push_back(op.chips.get());
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  // Every send's pairs, ascending.
  std::vector<std::vector<std::pair<topology::ChipId, topology::ChipId>>> sends;
  for (const workloads::Op& op : w.ops)
    if (op.kind == OpKind::Send) {
      sends.push_back(workloads::send_pairs(op));
      std::sort(sends.back().begin(), sends.back().end());
    }
  // Whether `n` steps along `a` keep every op's chips, every send's pairs and
  // every explicit group (its chips moved in ring order are a group of its set).
  const auto keeps = [&](int a, int n) {
    for (const auto& groups : group_sets)
      for (const std::vector<topology::ChipId>& g : groups) {
        std::vector<topology::ChipId> moved;
        for (topology::ChipId c : g) moved.push_back(move(c, a, n));
        std::sort(moved.begin(), moved.end());
        if (!std::binary_search(groups.begin(), groups.end(), moved)) return false;
      }
    for (const std::vector<topology::ChipId>* chips : sets)
      for (topology::ChipId c : *chips)
        if (!std::binary_search(chips->begin(), chips->end(), move(c, a, n))) return false;
    for (const auto& pairs : sends)
      for (const auto& [src, dst] : pairs)
        if (!std::binary_search(pairs.begin(), pairs.end(), std::pair{move(src, a, n), move(dst, a, n)})) return false;
    return true;
  };
  for (int a = 0; a < t.num_axes(); ++a) {
    const int size = t.axis(a).size;
    if (!gpu) {
      // A step of 1 chip, or of the least divisor of the axis that keeps every
      // explicit group (pairs of a KV head's replicas: 2).
      if (size < 2 || !(t.axis(a).wraparound || t.switched(a))) continue;
      for (int step = 1; step <= size / 2; ++step)
        if (size % step == 0 && (step == 1 || !group_sets.empty()) && keeps(a, step)) {
          out.push_back({a, step});
          break;
        }
      continue;
    }
    // On a GPU fabric the node axes (a permutation of nodes keeps every GPU's
    // NVLink and NIC links, and with several units the cables when it moves
    // whole blocks of the cable period), never the GPUs of a node; a step of 1
    // node, or 2 where parity asks it, or with several units the least
    // multiple of it that moves the cables (the axis left out if none does).
    // The rotation turns every node's GPUs as one ring: not where mesh axes
    // split them (a group of a factor would turn into no group).
    if (t.axis(a).in_node) {
      if (a == 0 && !t.axis(1 % t.num_axes()).in_node && tree && rotates && size >= 2 && keeps(0, 1))
        out.push_back({0, 1});
      continue;
    }
    if (tree || fixed[static_cast<std::size_t>(a)]) continue;
    for (int n = 1; n <= 2; ++n) {
      if (size % n != 0 || size / n < 2) break;
      bool even = true;
      for (const std::vector<int>& ring : crossing) {
        int positions = 1;  // ring positions between a node and the next along `a`
        for (int b : ring) {
          if (b == a) {
            even = even && positions * n % 2 == 0;
            break;
          }
          positions *= t.axis(b).size;
        }
      }
      if (!even) continue;
      int step = n;
      if (cable_period > 0)
        while (step <= size / 2 && (size % step != 0 || !moves_cables(t, a, step, cable_period))) step += n;
      if (step <= size / 2 && size % step == 0 && keeps(a, step)) out.push_back({a, step});
      break;
    }
  }
  return out;
}

std::uint64_t translation_count(const std::vector<Shift>& axes, const topology::Torus& t) {
  std::uint64_t n = 1;
  for (const Shift& s : axes) n *= static_cast<std::uint64_t>(t.axis(s.axis).size / s.step);
  return n;
}


Translations::Translations(const topology::Torus& t, const Expanded& ex) : t_(&t), ex_(&ex) {}

std::optional<Translations> Translations::find(const topology::Torus& t, const Expanded& ex,
                                               const std::vector<Shift>& axes, const topology::Fabric* fabric) {
  if (axes.empty()) return std::nullopt;
  const std::uint32_t chips = t.num_chips();
  // The links first, then a compute unit per chip. A torus' links are its slots,
  // chip * 2 * axes + axis * 2 + direction; a GPU fabric's are every GPU's
  // NVLink up, NVLink down, NIC up and NIC down (kind * chips + GPU), then the
  // switches' cables, each of which moves with its owner GPU when every shift
  // moves whole blocks of the cable period (else they are mapped to nothing,
  // and a program that uses them refused).
  if ((!fabric && ex.links != t.num_link_slots()) ||
      (fabric && (ex.links != fabric->num_links() || fabric->num_gpus() != chips)) ||
      ex.resources.size() != ex.links + chips)
    return std::nullopt;
  Translations x(t, ex);
  x.links_ = static_cast<std::uint32_t>(ex.links);
  x.link_stride_ = fabric ? 1 : static_cast<std::uint32_t>(2 * t.num_axes());
  x.cables_begin_ = fabric ? 4 * chips : x.links_;
  x.gpus_per_node_ = fabric ? static_cast<std::uint32_t>(fabric->gpus_per_node()) : 1;
  x.resources_ = static_cast<std::uint32_t>(ex.resources.size());
  std::uint32_t stride = 1;
  for (int a = 0; a < t.num_axes(); ++a) {
    const int n = t.axis(a).size;
    const auto it = std::find_if(axes.begin(), axes.end(), [&](const Shift& s) { return s.axis == a; });
    if (it != axes.end()) {
      MESHSIM_ASSERT(n > 1 && (fabric != nullptr || t.axis(a).wraparound || t.switched(a)),
                     "a translated axis without wraparound");
      MESHSIM_ASSERT(it->step >= 1 && n % it->step == 0 && n / it->step >= 2, "a step that does not divide its axis");
      x.axes_.push_back(a);
      x.sizes_.push_back(n);
      x.steps_.push_back(it->step);
      x.strides_.push_back(stride);
      x.copies_ *= static_cast<std::uint64_t>(n / it->step);
    }
    stride *= static_cast<std::uint32_t>(n);
  }
  const std::size_t k = x.axes_.size();
  // A rotation of the GPUs (axis 0) would move a leaf's cables to the next
  // rail's leaf: not mapped, so a program that uses cables is refused then.
  bool cables = fabric != nullptr && x.cables_begin_ < x.links_;
  for (const Shift& s : axes)
    cables = cables && s.axis != 0 && moves_cables(t, s.axis, s.step, fabric->cable_period());
  if (cables)
    for (std::uint32_t s = x.cables_begin_; s < x.links_; ++s) x.cables_.push_back(fabric->cable_block(s));
  x.coords_.resize(static_cast<std::size_t>(chips) * k);
  x.representative_chip_.assign(chips, 1);
  for (topology::ChipId c = 0; c < chips; ++c)
    for (std::size_t i = 0; i < k; ++i) {
      x.coords_[c * k + i] = static_cast<std::uint16_t>(t.coord(c, x.axes_[i]));
      if (x.coords_[c * k + i] >= x.steps_[i]) x.representative_chip_[c] = 0;
    }

  // Every slot holds as many tasks as its representative's.
  const sim::Program& p = ex.program;
  const std::size_t slots = std::size_t{x.resources_} + chips;
  x.slot_chip_.resize(slots);
  for (std::uint32_t s = 0; s < slots; ++s)
    x.slot_chip_[s] = s >= x.resources_ ? s - x.resources_
                      : s >= x.links_   ? s - x.links_
                      : !fabric         ? s / x.link_stride_
                      : s < 4 * chips   ? s % chips
                      : cables          ? x.cables_[s - x.cables_begin_].owner
                                        : kNone;
  x.slot_begin_.assign(slots + 1, 0);
  for (sim::TaskId id = 0; id < p.num_tasks(); ++id) {
    const std::uint32_t s = x.slot_of(id);
    if (s >= slots || x.slot_chip_[s] == kNone) return std::nullopt;  // a join without its chip, or a switch's cable
    ++x.slot_begin_[s + 1];
  }
  for (std::uint32_t s = 0; s < slots; ++s) {
    const std::uint32_t c = x.chip_of_slot(s);
    if (c == kNone) continue;  // a cable, idle
    if (x.slot_begin_[s + 1] != x.slot_begin_[x.slot_on(s, x.back(c, c)) + 1]) return std::nullopt;
  }
  return x;
}

std::uint32_t Translations::slot_of(sim::TaskId id) const {
  const sim::Task& task = ex_->program.task(id);
  return task.kind() == sim::TaskKind::Join ? resources_ + task.resource : task.resource;
}

std::uint32_t Translations::slot_on(std::uint32_t slot, std::uint32_t chip) const {
  // The same link of the next chip is link_stride_ slots on; its compute unit
  // and its joins' slot one per chip; a cable is the same cable of `chip`'s
  // unit or pod. (Unsigned arithmetic wraps back into range.)
  if (slot >= cables_begin_ && slot < links_) {
    const topology::Fabric::CableBlock& b = cables_[slot - cables_begin_];
    const std::uint32_t per_block = b.nodes * gpus_per_node_;
    return slot + (chip / per_block - b.owner / per_block) * b.id_stride;
  }
  const std::uint32_t per_chip = slot < links_ ? link_stride_ : 1;
  return slot + (chip - slot_chip_[slot]) * per_chip;
}

std::uint32_t Translations::back(std::uint32_t chip, std::uint32_t by) const {
  const std::size_t k = axes_.size();
  const std::uint16_t* from = &coords_[chip * k];
  const std::uint16_t* at = &coords_[by * k];
  std::uint32_t out = chip;
  for (std::size_t i = 0; i < k; ++i) {
    const int shift = at[i] - at[i] % steps_[i];  // `by` is a representative moved by this much
    const int to = from[i] >= shift ? from[i] - shift : from[i] - shift + sizes_[i];
    out += static_cast<std::uint32_t>(to - from[i]) * strides_[i];
  }
  return out;
}

std::optional<TranslationQuotient> Translations::quotient() const {
  const sim::Program& p = ex_->program;
  const std::size_t n = p.num_tasks();
  // The representatives, and the tasks their edges reach.
  std::vector<sim::TaskId> kept, reached;
  for (sim::TaskId id = 0; id < n; ++id) {
    if (!on_representative(id)) continue;
    kept.push_back(id);
    for (std::uint32_t e : p.successors(id)) reached.push_back(e >> 1);
  }
  std::sort(reached.begin(), reached.end());
  reached.erase(std::unique(reached.begin(), reached.end()), reached.end());
  // Their positions on their slots, and each representative slot's tasks in order.
  std::vector<std::uint32_t> position(reached.size());
  std::vector<std::uint32_t> seen(slot_begin_.size() - 1, 0);
  std::size_t next = 0;
  for (sim::TaskId id = 0; id < n; ++id) {
    const std::uint32_t s = slot_of(id);
    const std::uint32_t at = seen[s]++;
    if (next < reached.size() && reached[next] == id) position[next++] = at;
  }
  BigVector<sim::TaskId> new_id(n, kNone);
  TranslationQuotient q;
  // Each representative slot's tasks, in id order.
  std::vector<std::vector<sim::TaskId>> on_slot(seen.size());
  for (sim::TaskId id : kept) on_slot[slot_of(id)].push_back(id);
  const auto representative = [&](sim::TaskId id) {
    const std::size_t j = static_cast<std::size_t>(std::lower_bound(reached.begin(), reached.end(), id) - reached.begin());
    const std::uint32_t s = slot_of(id);
    const std::uint32_t c = chip_of_slot(s);
    return on_slot[slot_on(s, back(c, c))][position[j]];
  };

  // The representatives' resources that carry tasks, in id order.
  std::vector<std::uint32_t> compact(resources_, kNone);
  for (std::uint32_t r = 0; r < resources_; ++r)
    if (slot_begin_[r + 1] > 0 && representative_chip_[chip_of_slot(r)]) {
      compact[r] = static_cast<std::uint32_t>(q.resources.size());
      q.resources.push_back(ex_->resources[r]);
      q.translated.resources.push_back(r);
    }
  sim::ProgramBuilder b;
  for (std::uint32_t op = 0; op < p.num_ops(); ++op) b.add_op();
  for (const sim::TaskId id : kept) {
    const sim::Task& task = p.task(id);
    new_id[id] = b.copy(task, task.kind() == sim::TaskKind::Join ? task.resource : compact[task.resource], p.step(id));
  }
  q.keys = std::move(kept);
  // Each edge to its end's representative. A task whose successor would be
  // itself cannot be invariant: an edge from t to its own translate repeats
  // round the torus into a cycle, which a program has not; the builders' order
  // of tasks does not follow the translations then.
  for (const sim::TaskId id : q.keys)
    for (std::uint32_t e : p.successors(id)) {
      const sim::TaskId to = new_id[representative(e >> 1)];
      MESHSIM_ASSERT(to != kNone, "a representative outside the representative chips");
      if (to == new_id[id]) return std::nullopt;
      b.depend(new_id[id], to, (e & 1u) ? sim::EdgeKind::Stream : sim::EdgeKind::Full);
    }
  q.program = std::move(b).finish();
  complete(q.translated);
  return q;
}

void Translations::complete(sim::Reduced::Class& c) const {
  // Every other translation's images of the representatives' resources: one
  // replica per translation, named by the chip it takes chip 0's representative
  // (chip 0) to.
  c.copies = copies_;
  c.replicas.clear();
  const std::size_t k = axes_.size();
  for (topology::ChipId chip = 0; chip < t_->num_chips(); ++chip) {
    if (representative_chip_[chip] || back(chip, chip) != 0) continue;
    std::vector<std::uint32_t> images;
    images.reserve(c.resources.size());
    for (std::uint32_t r : c.resources) {
      // r sits on a representative chip (coordinate below the step on every
      // translated axis): its image is that chip moved by `chip`'s
      // coordinates (multiples of the steps).
      std::uint32_t to = chip_of_slot(r);
      for (std::size_t i = 0; i < k; ++i) to += coords_[chip * k + i] * strides_[i];
      images.push_back(slot_on(r, to));
    }
    c.replicas.push_back(std::move(images));
  }
  MESHSIM_ASSERT(c.replicas.size() + 1 == copies_, "a translation without its replica");
}

Translations::Index Translations::index() const {
  const sim::Program& p = ex_->program;
  const std::size_t n = p.num_tasks();
  Index x;
  x.begin = slot_begin_;
  for (std::size_t s = 0; s + 1 < x.begin.size(); ++s) x.begin[s + 1] += x.begin[s];
  x.on_slot.resize(n);
  x.position.resize(n);
  std::vector<std::uint32_t> fill(x.begin.begin(), x.begin.end() - 1);
  for (sim::TaskId id = 0; id < n; ++id) {
    const std::uint32_t s = slot_of(id);
    x.position[id] = fill[s] - x.begin[s];
    x.on_slot[fill[s]++] = id;
  }
  return x;
}

sim::TaskId Translations::moved(const Index& x, sim::TaskId id, std::uint32_t by) const {
  const std::uint32_t s = slot_of(id);
  return x.on_slot[x.begin[slot_on(s, back(chip_of_slot(s), by))] + x.position[id]];
}

BigVector<std::uint32_t> Translations::keys() const {
  const Index x = index();
  BigVector<std::uint32_t> out(ex_->program.num_tasks());
  for (sim::TaskId id = 0; id < out.size(); ++id) out[id] = moved(x, id, chip_of_slot(slot_of(id)));
  return out;
}

bool Translations::verify() const {
  const sim::Program& p = ex_->program;
  const std::size_t n = p.num_tasks();
  const Index x = index();
  // Tasks [from, to) against their representatives.
  const auto check = [&](sim::TaskId from, sim::TaskId to) {
    std::vector<std::uint64_t> mine, theirs;
    for (sim::TaskId id = from; id < to; ++id) {
      const std::uint32_t c = chip_of_slot(slot_of(id));
      const sim::TaskId rep = moved(x, id, c);
      const sim::Task& a = p.task(id);
      const sim::Task& b = p.task(rep);
      if (a.amount != b.amount || a.op_kind != b.op_kind || p.step(id) != p.step(rep)) return false;
      if (a.kind() != sim::TaskKind::Join && ex_->resources[a.resource] != ex_->resources[b.resource])
        return false;
      const auto succ = p.successors(id);
      const auto rep_succ = p.successors(rep);
      if (succ.size() != rep_succ.size()) return false;
      mine.clear();
      theirs.assign(rep_succ.begin(), rep_succ.end());
      for (std::uint32_t e : succ) mine.push_back((std::uint64_t{moved(x, e >> 1, c)} << 1) | (e & 1u));
      if (mine.size() > 1) {
        std::sort(mine.begin(), mine.end());
        std::sort(theirs.begin(), theirs.end());
      }
      if (mine != theirs) return false;
    }
    return true;
  };
  // A pass that reads the whole program: on two threads when it is large (the
  // answer is the same, a conjunction).
  const unsigned threads = n < (std::size_t{1} << 20) ? 1u : std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  if (threads == 1) return check(0, static_cast<sim::TaskId>(n));
  const auto half = static_cast<sim::TaskId>(n / 2);
  bool second = false;
  std::thread other;
  try {
    other = std::thread([&] { second = check(half, static_cast<sim::TaskId>(n)); });
  } catch (const std::system_error&) {  // no thread to be had: one pass
    return check(0, static_cast<sim::TaskId>(n));
  }
  const bool first = check(0, half);
  other.join();
  return first && second;
}

namespace {

// One op's own program, reduced: its quotient (op 0, resources numbered by
// `resources`, the full ones), where its tasks sit in the op's own program, and
// the representative chips' entry and exit joins among them.
struct OpPart {
  sim::Program program;
  std::vector<std::uint32_t> resources;  // quotient resource k: its full id
  std::vector<sim::TaskId> own_id;       // per quotient task: its id in the op's own program
  // The op's representative chips (ascending), and per chip its entry's and exit's quotient task.
  std::shared_ptr<const std::vector<std::uint32_t>> chips;
  std::vector<sim::TaskId> entry, exit;
  std::uint64_t tasks = 0;  // the op's own program's tasks
  std::uint64_t transfers = 0, link_bytes = 0;
  // The quotient task of the entry or exit join on representative chip `c`, if the op runs there.
  std::optional<sim::TaskId> join_on(std::uint32_t c, bool exit_join) const {
    const auto it = std::lower_bound(chips->begin(), chips->end(), c);
    if (it == chips->end() || *it != c) return std::nullopt;
    return (exit_join ? exit : entry)[static_cast<std::size_t>(it - chips->begin())];
  }
};

// Whether `op`'s own program on a GPU fabric is G programs alike, one per rail
// (the same GPU of every node), sharing no resource: a collective over node
// axes alone (its groups are rails: driver/groups.hpp's argument, each rail
// group 0's translated by its local rank, its chips' ids by g, their links' and
// compute units' ids by g, their leaves' cables by g leaves) on whole nodes, on
// a fabric of one pod (with pods, core cables carry every rail).
bool rails_alike(const workloads::Op& op, const topology::Torus& t, const topology::Fabric* fabric) {
  if (fabric == nullptr) return false;
  const int g = fabric->gpus_per_node();
  if (fabric->pods() != 1 || g < 2 || !is_collective(op.kind) || op.explicit_groups()) return false;
  for (int a : op.comm_axes())
    if (t.axis(a).in_node) return false;
  if (!op.chips) return true;
  // Its chips (ascending) node by node: GPUs 0 to G-1 of each.
  const std::vector<topology::ChipId>& chips = *op.chips;
  const auto per_node = static_cast<std::uint32_t>(g);
  if (chips.size() % per_node != 0) return false;
  for (std::size_t node = 0; node < chips.size(); node += per_node)
    for (std::uint32_t local = 0; local < per_node; ++local)
      if (chips[node + local] != chips[node] + local || chips[node] % per_node != 0) return false;
  return true;
}

// `op` on the GPUs of local rank 0 alone: rail 0.
workloads::Op rail_zero(const workloads::Op& op, const topology::Torus& t, const topology::Fabric& fabric) {
  const auto g = static_cast<topology::ChipId>(fabric.gpus_per_node());
  std::vector<topology::ChipId> chips;
  if (op.chips) {
    for (topology::ChipId c : *op.chips)
      if (c % g == 0) chips.push_back(c);
  } else {
    for (topology::ChipId c = 0; c < t.num_chips(); c += g) chips.push_back(c);
  }
  workloads::Op out = op;
  out.chips = std::make_shared<const std::vector<topology::ChipId>>(std::move(chips));
  return out;
}

// Resource `r` of rail 0 (a GPU's link, a leaf's cable, a compute unit) on rail `rail`.
std::uint32_t on_rail(std::uint32_t r, std::uint32_t rail, const topology::Fabric& f, std::size_t links) {
  if (r < 4 * f.num_gpus() || r >= links) return r + rail;  // the same link, or compute unit, of GPU + rail
  const topology::FabricLink& l = f.link(r);
  const auto g = static_cast<std::uint32_t>(f.gpus_per_node());
  MESHSIM_ASSERT(l.a % g == 0 && (l.kind == topology::FabricLinkKind::LeafToSpine ||
                                  l.kind == topology::FabricLinkKind::SpineToLeaf),
                 "a rail-0 op on another rail's or the core's cable");
  const int leaf = static_cast<int>(l.a + rail), spine = static_cast<int>(l.b), cable = static_cast<int>(l.cable);
  return l.kind == topology::FabricLinkKind::LeafToSpine ? f.leaf_to_spine(leaf, spine, cable)
                                                         : f.spine_to_leaf(spine, leaf, cable);
}

// The quotient of an op whose rails are alike from rail 0's (`zero`): rail r's
// tasks are rail 0's on rail r's resources and chips. As in every op's quotient,
// the entry joins come first (by chip), then the exits, then the rest, here
// rail after rail. Task ids differ from the whole op's, whose builders
// interleave the rails, but no resource or chip has tasks of two rails, and the
// order of each one's tasks, which alone the tie keys compare
// (sim::Executor::order_ties_by), is rail 0's, as in the whole op.
OpPart every_rail(const OpPart& zero, std::uint32_t rails, const topology::Fabric& f, std::size_t links) {
  const auto resources = static_cast<std::uint32_t>(zero.resources.size());
  const auto n = static_cast<sim::TaskId>(zero.program.num_tasks());
  const auto chips = static_cast<sim::TaskId>(zero.chips->size());
  for (sim::TaskId k = 0; k < chips; ++k)
    MESHSIM_ASSERT(zero.entry[k] == k && zero.exit[k] == chips + k, "an op's quotient without its joins first");
  // Rail r's task k: rail 0's chip i is node-major, so its rail-r GPU is the
  // (i rails + r)-th of them all.
  const sim::TaskId body = n - 2 * chips;
  const auto moved = [&](sim::TaskId k, std::uint32_t r) -> sim::TaskId {
    if (k < chips) return k * rails + r;
    if (k < 2 * chips) return chips * rails + (k - chips) * rails + r;
    return 2 * chips * rails + r * body + (k - 2 * chips);
  };
  OpPart out;
  std::vector<sim::TaskId> order(std::size_t{n} * rails);  // new id -> (rail, task)
  for (std::uint32_t r = 0; r < rails; ++r)
    for (sim::TaskId k = 0; k < n; ++k) order[moved(k, r)] = r * n + k;
  sim::ProgramBuilder b;
  b.reserve(std::uint64_t{n} * rails, std::uint64_t{zero.program.num_edges()} * rails);
  b.add_op();
  for (std::uint32_t r = 0; r < rails; ++r)
    for (std::uint32_t x : zero.resources) out.resources.push_back(on_rail(x, r, f, links));
  for (const sim::TaskId at : order) {
    const std::uint32_t r = at / n;
    const sim::TaskId k = at % n;
    const sim::Task& task = zero.program.task(k);
    const bool join = task.kind() == sim::TaskKind::Join;  // its resource is its chip
    b.copy(task, task.resource + r * (join ? 1 : resources), zero.program.step(k), 0);
  }
  for (const sim::TaskId at : order) {
    const std::uint32_t r = at / n;
    const sim::TaskId k = at % n;
    for (std::uint32_t e : zero.program.successors(k))
      b.depend(moved(k, r), moved(e >> 1, r), (e & 1u) ? sim::EdgeKind::Stream : sim::EdgeKind::Full);
  }
  std::vector<std::uint32_t> all;
  for (sim::TaskId i = 0; i < chips * rails; ++i) {
    all.push_back((*zero.chips)[i / rails] + i % rails);
    out.entry.push_back(i);
    out.exit.push_back(chips * rails + i);
  }
  out.chips = std::make_shared<const std::vector<std::uint32_t>>(std::move(all));
  out.program = std::move(b).finish();
  out.tasks = zero.tasks * rails;
  out.transfers = zero.transfers * rails;
  out.link_bytes = zero.link_bytes * rails;
  return out;
}

}  // namespace

bool turns_unbuilt(const workloads::Op& op, GpuChoices& gpu, const std::vector<Shift>& axes) {
  if (axes != std::vector<Shift>{{0, 1}} || op.kind != OpKind::AllReduce || op.chips || op.explicit_groups())
    return false;
  const std::vector<int>& hw = op.collective().hw_axes;
  if (std::find(hw.begin(), hw.end(), 0) == hw.end() || gpu.fabric().units() != 1)
    return false;
  return gpu(op).algorithm == collectives::gpu::Algorithm::Tree;
}

bool mirrors_unbuilt(const workloads::Workload& w, RunContext& run, const std::vector<Shift>& axes) {
  if (!run.gpu()) return false;
  const topology::Torus& t = run.torus();
  GpuChoices& gpu = *run.gpu();
  if (w.ops.size() != 1 || !turns_unbuilt(w.ops.front(), gpu, axes)) return false;
  return !collectives::gpu::tree_mirror(gpu.fabric(), t, w.ops.front().comm_axes()).empty();
}

namespace {

// The quotient of such an op by the rotation, built without the op: its
// entry and exit joins on every node's GPU 0 (the representative chips), then
// rail 0's channels with every link on the same link of its node's GPU 0
// (collectives::gpu::tree_rail_quotient, which lists them as the whole op
// lists the representatives on GPU 0's links), the tasks of G turned ones each.
// Nothing when the channels do not turn (collectives::gpu::tree_rail_quotient).
//
// With `mirrors` (tree_mirror's map, when mirrors_unbuilt; empty: none), its
// quotient by the mirror of the nodes too:
// the joins of the node of lower id of each mirrored pair, rail 0's tree 0
// with every link on the same link of that node's GPU 0, the tasks of 2G each.
std::optional<OpPart> turned_tree(const workloads::Op& op, const workloads::Workload& w, const topology::System& system,
                                  GpuChoices& gpu, std::span<const topology::ChipId> mirrors,
                                  const BuildOptions& options) {
  const topology::Torus& t = system.grid();
  const topology::Fabric& fabric = gpu.fabric();
  const std::uint32_t chips = t.num_chips();
  const auto g = static_cast<std::uint32_t>(fabric.gpus_per_node());
  const bool mirror = !mirrors.empty();
  // Per chip, the representative chip whose ports it takes: its node's GPU 0,
  // or the lower of that and its mirror.
  const auto representative = [&](std::uint32_t c) {
    const std::uint32_t zero = c - c % g;
    return mirror ? std::min(zero, mirrors[zero]) : zero;
  };
  OpPart out;
  std::vector<std::uint32_t> representatives;
  for (std::uint32_t c = 0; c < chips; c += g)
    if (representative(c) == c) representatives.push_back(c);
  const auto n = static_cast<sim::TaskId>(representatives.size());
  sim::ProgramBuilder b;
  b.copy_repeats = options.copy_repeats;
  const sim::OpId id = b.add_op();
  const GpuChoice& choice = gpu(op);
  const Tick fixed = op_fixed_cost(op, w, system, choice);
  for (sim::TaskId k = 0; k < n; ++k) out.entry.push_back(b.join(id, fixed, representatives[k]));
  for (sim::TaskId k = 0; k < n; ++k) out.exit.push_back(b.join(id, kZeroTick, representatives[k]));
  std::vector<sim::TaskId> entry(chips), exit(chips);
  for (std::uint32_t c = 0; c < chips; ++c) {
    const auto k = static_cast<std::size_t>(
        std::lower_bound(representatives.begin(), representatives.end(), representative(c)) - representatives.begin());
    entry[c] = out.entry[k];
    exit[c] = out.exit[k];
  }
  for (sim::TaskId k = 0; k < n; ++k) b.depend(out.entry[k], out.exit[k]);
  // Its links (ascending, as the other ops' quotients number theirs) are its resources 0..k-1.
  std::optional<std::vector<std::uint32_t>> links = collectives::gpu::tree_rail_quotient(
      b, fabric, t, op.comm_axes(), op.comm_bytes(), w.hardware.forward_chunk_bytes,
      collectives::OpPorts{id, entry, exit}, mirrors, choice.protocol);
  if (!links) return std::nullopt;
  out.resources = std::move(*links);
  out.program = std::move(b).finish();
  std::uint64_t transfers = 0, link_bytes = 0;
  for (sim::TaskId k = 0; k < out.program.num_tasks(); ++k) {
    const sim::Task& task = out.program.task(k);
    if (task.kind() != sim::TaskKind::Transfer) continue;
    ++transfers;
    link_bytes += task.amount;
  }
  out.chips = std::make_shared<const std::vector<std::uint32_t>>(std::move(representatives));
  // Every task of the whole op is one of G turned ones (2G with the mirror).
  const std::uint64_t images = mirror ? 2ull * g : g;
  out.transfers = transfers * images;
  out.link_bytes = link_bytes * images;
  out.tasks = out.transfers + 2ull * chips;
  return out;
}

// The class of a quotient by the rotation of every node's GPUs and the mirror
// of the nodes (`mirrors`, per GPU): every GPU link of the representatives
// (`c.resources`: GPU 0's of the lower node of each mirrored pair) on GPU k of
// its node and of its mirror.
void mirror_class(sim::Reduced::Class& c, const topology::Fabric& fabric,
                  std::span<const topology::ChipId> mirrors) {
  const std::uint32_t n = fabric.num_gpus(), g = static_cast<std::uint32_t>(fabric.gpus_per_node());
  c.copies = 2ull * g;
  c.replicas.clear();
  for (std::uint32_t m = 0; m < 2; ++m)
    for (std::uint32_t k = 0; k < g; ++k) {
      if (m == 0 && k == 0) continue;
      std::vector<std::uint32_t> images;
      images.reserve(c.resources.size());
      for (std::uint32_t r : c.resources) {
        const std::uint32_t gpu = r % n;
        MESHSIM_ASSERT(r < 4 * n && gpu % g == 0, "a mirrored tree's link off its node's GPU 0");
        images.push_back(r - gpu + (m ? mirrors[gpu] : gpu) + k);
      }
      c.replicas.push_back(std::move(images));
    }
}

}  // namespace

// Long: one pass over the ops that decides, op by op, which translations
// survive and builds each op's quotient with the same state; split, the state
// would travel through every part.
// NOLINTNEXTLINE(readability-function-size)
std::optional<OpQuotient> quotient_by_ops(const workloads::Workload& w, RunContext& run, const BuildOptions& options) {
  const topology::Torus& t = run.torus();
  GpuChoices* gpu = run.gpu();
  const std::vector<Shift> axes = translated_axes(w, run);
  if (axes.empty()) return std::nullopt;
  const topology::Fabric* fabric = gpu ? &gpu->fabric() : nullptr;
  // A workload without ops: the system alone, every op expanded into it by itself.
  workloads::Workload one = w;
  one.ops.clear();
  one.arrays.clear();
  one.declared.clear();
  one.explanations.clear();
  one.training.reset();
  OpQuotient out;
  const Expander expand_ops(one, run, options);  // the system laid out once, every op expanded into it
  out.ex = expand_ops(one);

  // What expand() reads of an op on a torus: ops with the same key build the
  // same program. Their chips and explicit groups by identity: the ops of a
  // pipeline stage share one set of chips, a stage's KV replicas one of groups.
  using Key = std::tuple<int, std::vector<int>, std::uint64_t, std::string, std::string, std::int64_t, std::int64_t,
                         const void*, const void*, std::vector<std::pair<topology::ChipId, topology::ChipId>>>;
  std::map<Key, std::size_t> known;
  std::vector<OpPart> parts;
  std::vector<std::size_t> part_of(w.ops.size());
  std::optional<Translations> layout;  // any op's: the translations depend on the torus and the axes alone
  std::vector<topology::ChipId> mirrors;  // the mirror of the nodes, when the quotient is by it too
  if (gpu && mirrors_unbuilt(w, run, axes))
    mirrors = collectives::gpu::tree_mirror(*fabric, t, w.ops.front().comm_axes());
  const bool mirror = !mirrors.empty();
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    const Key key{static_cast<int>(op.kind),
                  op.comm_axes(),
                  op.comm_bytes(),
                  is_collective(op.kind) ? op.collective().algorithm : std::string(),
                  is_collective(op.kind) ? op.collective().protocol : std::string(),
                  comm_fixed_cost(op, w, run.system()).ps(),
                  is_local(op.kind) ? local_cost(op, w.hardware, w.file).time().ps() : 0,
                  op.chips.get(),
                  op.explicit_groups(),
                  op.kind == OpKind::Send ? workloads::send_pairs(op)
                                          : std::vector<std::pair<topology::ChipId, topology::ChipId>>()};
    if (const auto it = known.find(key); it != known.end()) {
      part_of[i] = it->second;
      continue;
    }
    // NCCL's tree turned by the rotation of the GPUs (and mirrored): its quotient alone.
    if (gpu && turns_unbuilt(op, *gpu, axes)) {
      std::optional<OpPart> part = turned_tree(op, w, run.system(), *gpu, mirrors, options);
      if (!part) return std::nullopt;
      out.built_tasks += part->program.num_tasks();
      part_of[i] = parts.size();
      known.emplace(key, parts.size());
      parts.push_back(std::move(*part));
      continue;
    }
    // An op whose rails are alike is built and checked on rail 0, and its
    // quotient laid out once per rail (below); not where the GPUs rotate, which
    // moves rail 0 onto the others (its quotient is then rail 0's already).
    const bool rotating = std::any_of(axes.begin(), axes.end(), [](const Shift& s) { return s.axis == 0; });
    const bool by_rail = !rotating && rails_alike(op, t, fabric ? &*fabric : nullptr);
    one.ops.assign(1, by_rail ? rail_zero(op, t, *fabric) : op);
    one.ops[0].deps.clear();
    const Expanded ex = expand_ops(one);
    std::optional<Translations> x = Translations::find(t, ex, axes, fabric ? &*fabric : nullptr);
    if (!x) return std::nullopt;
    std::optional<TranslationQuotient> q = x->quotient();
    if (!q || !x->verify()) return std::nullopt;
    OpPart part;
    part.program = std::move(q->program);
    part.resources = std::move(q->translated.resources);
    part.own_id = std::move(q->keys);
    part.tasks = ex.program.num_tasks();
    part.transfers = ex.op_transfers[0];
    part.link_bytes = ex.op_link_bytes[0];
    // The op's entry joins are its own tasks 0..n-1 for the n chips of its set
    // (ascending), its exits the next n; the quotient keeps those on
    // representative chips, in id order.
    const sim::OpChips& ports = ex.op_ports[0];
    const std::uint32_t n = ports.count();
    std::vector<std::uint32_t> entry_chips, exit_chips;
    for (sim::TaskId k = 0; k < part.own_id.size() && part.own_id[k] < 2 * n; ++k) {
      const sim::TaskId own = part.own_id[k];
      if (own < n) {
        part.entry.push_back(k);
        entry_chips.push_back(ports.chip_at(own));
      } else {
        part.exit.push_back(k);
        exit_chips.push_back(ports.chip_at(own - n));
      }
    }
    MESHSIM_ASSERT(entry_chips == exit_chips, "an op's quotient with entries and exits on different chips");
    part.chips = std::make_shared<const std::vector<std::uint32_t>>(std::move(entry_chips));
    out.built_tasks += part.tasks;
    if (by_rail) part = every_rail(part, static_cast<std::uint32_t>(fabric->gpus_per_node()), *fabric, ex.links);
    part_of[i] = parts.size();
    known.emplace(key, parts.size());
    parts.push_back(std::move(part));
    if (!layout) layout = std::move(x);
  }
  // The translations depend on the system and the axes alone: with every op
  // built as a turned tree, the system's own (no task) gives them.
  if (!layout) layout = Translations::find(t, out.ex, axes, fabric ? &*fabric : nullptr);
  if (!layout) return std::nullopt;
  out.built_ops = parts.size();

  // The representatives' resources that carry tasks, ascending.
  std::vector<std::uint8_t> used(out.ex.resources.size(), 0);
  for (const OpPart& part : parts)
    for (std::uint32_t r : part.resources) used[r] = 1;
  std::vector<std::uint32_t> compact(used.size(), kNone);
  TranslationQuotient& q = out.quotient;
  for (std::uint32_t r = 0; r < used.size(); ++r)
    if (used[r]) {
      compact[r] = static_cast<std::uint32_t>(q.resources.size());
      q.resources.push_back(out.ex.resources[r]);
      q.translated.resources.push_back(r);
    }

  // One op: its quotient is the program's when its resources are already the
  // ascending representatives' and its joins come first (no copy: at scale
  // that is most of the memory). A part laid out rail by rail lists its
  // resources rail after rail: it is copied below.
  const auto as_is = [&](const OpPart& part) {
    if (!std::is_sorted(part.resources.begin(), part.resources.end())) return false;
    for (std::size_t k = 0; k < part.entry.size(); ++k)
      if (part.entry[k] != k || part.exit[k] != part.entry.size() + k) return false;
    return true;
  };
  if (w.ops.size() == 1 && as_is(parts.front())) {
    OpPart& part = parts.front();
    out.ex.op_ports.push_back(sim::OpChips{0, part.chips, t.num_chips()});
    out.ex.send_chips.push_back(send_chips(w.ops.front()));
    out.ex.op_transfers.push_back(part.transfers);
    out.ex.op_link_bytes.push_back(part.link_bytes);
    out.full_tasks = part.tasks;
    q.program = std::move(part.program);
    if (mirror)
      mirror_class(q.translated, *fabric, mirrors);
    else
      layout->complete(q.translated);
    q.mirrored = mirror;
    return out;
  }
  if (mirror) return std::nullopt;  // one op, laid out as it is (the mirror's class is made above alone)
  // The ops end to end, as expand() numbers the whole program.
  sim::ProgramBuilder b;
  std::uint64_t tasks = 0, edges = 0;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const OpPart& part = parts[part_of[i]];
    tasks += part.program.num_tasks();
    edges += part.program.num_edges() + w.ops[i].deps.size() * part.chips->size();
  }
  b.reserve(tasks, edges);
  std::vector<sim::TaskId> first(w.ops.size());  // per op: its first quotient task
  std::uint64_t full = 0;                        // the whole program's tasks
  std::vector<std::size_t> last_use(parts.size(), 0);  // per part: the last op that lays it out
  for (std::size_t i = 0; i < w.ops.size(); ++i) last_use[part_of[i]] = i;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    OpPart& part = parts[part_of[i]];
    const sim::OpId id = b.add_op();
    first[i] = static_cast<sim::TaskId>(b.num_tasks());
    out.ex.op_ports.push_back(sim::OpChips{first[i], part.chips, t.num_chips()});
    out.ex.send_chips.push_back(send_chips(w.ops[i]));
    out.ex.op_transfers.push_back(part.transfers);
    out.ex.op_link_bytes.push_back(part.link_bytes);
    for (sim::TaskId k = 0; k < part.program.num_tasks(); ++k) {
      const sim::Task& task = part.program.task(k);
      b.copy(task, task.kind() == sim::TaskKind::Join ? task.resource : compact[part.resources[task.resource]],
             part.program.step(k), id);
    }
    for (sim::TaskId k = 0; k < part.program.num_tasks(); ++k)
      for (std::uint32_t e : part.program.successors(k))
        b.depend(first[i] + k, first[i] + (e >> 1), (e & 1u) ? sim::EdgeKind::Stream : sim::EdgeKind::Full);
    // An op waits on chip c for the ops it depends on that also run on c.
    for (std::size_t k = 0; k < part.chips->size(); ++k) {
      const std::uint32_t c = (*part.chips)[k];
      for (std::uint32_t dep : w.ops[i].deps)
        if (const std::optional<sim::TaskId> exit = parts[part_of[dep]].join_on(c, true))
          b.depend(first[dep] + *exit, first[i] + part.entry[k]);
    }
    full += part.tasks;
    if (last_use[part_of[i]] == i) part.program = sim::Program();  // laid out for the last time: its memory back
  }
  out.full_tasks = full;
  q.program = std::move(b).finish();
  layout->complete(q.translated);
  return out;
}

}  // namespace meshsim::driver
