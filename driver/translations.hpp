#pragma once
// The quotient of a program by the translations of its torus (docs/MODEL.md,
// "Exact reductions"). A collective over every wrapped axis of an untwisted
// torus is one connected program, yet the same from every chip: translating
// the torus by a vector v maps its links, compute units and chips onto
// themselves, and when the builders laid every chip's tasks out alike, the k-th
// task on a slot (a resource, or a chip for joins) maps to the k-th task on the
// translated slot. If that map keeps every task's kind, amount, op and step and
// carries every edge onto an edge, it is an automorphism of the program. On a
// GPU fabric whose nodes are a grid, shifting the nodes along a node axis maps
// every GPU's NVLink and NIC links onto the same links of another GPU alike,
// and, when it moves whole blocks of the fabric's cable period
// (topology::Fabric::cable_period), every switch cable onto the same cable of
// another unit or pod (else the cables are not mapped, and a program that uses
// them is refused).
//
// The quotient keeps one task per orbit: the tasks on the representative chips
// (coordinate 0, or below the step, on every translated axis), each edge redirected to its end's
// representative. Its run gives every task the time of its representative if
// the full run is translation-equivariant. Activation order, which breaks ties
// between tasks ready at the same time on one resource, is not; so every run
// of a program that is invariant, reduced or not, breaks them by activation
// time and then by keys() (sim::Executor::order_ties_by). A resource
// free at t then starts the least (ready, activation time, key) of its tasks
// ready by t, all of which are waiting at t: the schedule is a function of
// times and keys, and the full run's is the quotient's translated. The quotient
// run reports a task ready the moment it was activated beside another of its
// resource (sim::Executor::watch_zero_lag), and the automorphism is checked in
// full (verify()) before the results are used; either failing, the full
// program runs.
#include <cstdint>
#include <optional>
#include <vector>

#include "driver/costs.hpp"
#include "driver/expand.hpp"
#include "sim/executor.hpp"
#include "sim/program.hpp"
#include "sim/reduce.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct TranslationQuotient {
  sim::Program program;                  // one task per orbit, in ascending full id
  std::vector<sim::Resource> resources;  // the representatives' resources, numbered 0..k-1
  // Per quotient task, the key that breaks its ties (sim::Executor::order_ties_by),
  // ascending as the tasks' ids in the full program: Translations::quotient()
  // gives those ids. Empty from quotient_by_ops(): the quotient's own ids,
  // which follow them, are the keys (sim::Executor::order_ties_by_ids).
  std::vector<sim::TaskId> keys;
  // copies: the translations; resources: the representatives' resources (full
  // ids, as the quotient numbers them); replicas: each translation's images.
  sim::Reduced::Class translated;
  // Also by the mirror of the nodes (mirrors_unbuilt): `translated` has its images.
  bool mirrored = false;
};

// A generator of the translations: `step` positions along hardware axis `axis`
// (1 on a torus; on a GPU fabric 1 or 2 nodes).
struct Shift {
  int axis = 0;
  int step = 1;
  bool operator==(const Shift&) const = default;
};
// The axes a quotient translates along: the wrapped (or switched) axes of an
// untwisted TPU torus, or a GPU fabric's node axes (a step: the same GPU of
// the node 1 or 2 on, round to the first), along which every op's chips, and
// every send's pairs, are the same set after a step. Empty for a twisted
// torus or a collective over explicit groups. With NCCL's tree across nodes on
// a GPU fabric, no node axis, but the rotation of every node's GPUs (axis 0,
// step 1) when every collective over a node's GPUs is such a tree. A GPU
// step is 2 nodes where 1 would reverse a ring through the GPUs of several
// nodes (every other node's backwards); a ring over several node axes keeps
// only shifts along its last (slowest) one. On a fabric of several units of
// leaves the step is the least multiple of that which moves whole blocks of
// the cable period, so that the cables move too; an axis where none divides
// its size is left out. A pipeline's stages along one axis leave the others.
// `run`: the run's system and GPU choices (run_context.hpp).
std::vector<Shift> translated_axes(const workloads::Workload& w, RunContext& run);

// How many translations the quotient by translations along `axes` (translated_axes)
// uses: the product of size / step; 1 when none.
std::uint64_t translation_count(const std::vector<Shift>& axes, const topology::Torus& t);

class Translations {
 public:
  // The translations of `t` along `axes` (translated_axes of the whole
  // workload `ex` was expanded from, or of which it is one op) that may leave
  // `ex` unchanged; nothing when the program cannot be invariant (a slot
  // holding fewer or more tasks than its translates). Two passes over the
  // tasks, no per-task memory: most of a failed attempt's cost is the
  // quotient's short run. `fabric`: the GPU fabric `ex` is on (its links are
  // the fabric's, `t` the GPUs' coordinates; the run's, RunContext::fabric);
  // null on a torus.
  static std::optional<Translations> find(const topology::Torus& t, const Expanded& ex,
                                          const std::vector<Shift>& axes, const topology::Fabric* fabric);
  // Nothing when an edge would join a task to itself (the builders' order of
  // tasks does not follow the translations).
  std::optional<TranslationQuotient> quotient() const;
  // Whether the translations are automorphisms of the program (every task
  // against its representative: kind, amount, op, step, resource parameters,
  // and its successors translated, as a multiset with edge kinds). Indexes
  // every task by slot first (8 bytes a task).
  bool verify() const;
  // Per task, the tie-breaking key every run of this program uses
  // (sim::Executor::order_ties_by): its representative's id, which its
  // translates share and no other task of its resource has.
  BigVector<std::uint32_t> keys() const;
  std::uint64_t copies() const { return copies_; }
  // `c.resources` (representative chips' resources, ascending) with the rest
  // of the class: the translations, and each one's images of them.
  void complete(sim::Reduced::Class& c) const;

 private:
  Translations(const topology::Torus& t, const Expanded& ex);
  std::uint32_t slot_of(sim::TaskId id) const;
  std::uint32_t chip_of_slot(std::uint32_t slot) const { return slot_chip_[slot]; }
  std::uint32_t slot_on(std::uint32_t slot, std::uint32_t chip) const;  // the same kind of slot on `chip`
  // `chip` translated by minus the translation that takes a representative to `by`.
  std::uint32_t back(std::uint32_t chip, std::uint32_t by) const;
  struct Index {  // every task by slot, in id order, and its position there
    std::vector<std::uint32_t> begin;
    BigVector<sim::TaskId> on_slot;
    BigVector<std::uint32_t> position;
  };
  Index index() const;
  // Task `id` translated by minus the translation that takes a representative to chip `by`.
  sim::TaskId moved(const Index& x, sim::TaskId id, std::uint32_t by) const;
  bool on_representative(sim::TaskId id) const { return representative_chip_[chip_of_slot(slot_of(id))] != 0; }

  const topology::Torus* t_;
  const Expanded* ex_;
  std::uint32_t links_ = 0;           // resources below this are links
  std::uint32_t link_stride_ = 0;     // from a chip's link to the same link of the next chip
  std::uint32_t cables_begin_ = 0;    // a GPU fabric's switch cables: links from here on
  std::uint32_t gpus_per_node_ = 1;
  std::vector<topology::Fabric::CableBlock> cables_;  // per cable, when the shifts move them: owner and stride
  std::uint32_t resources_ = 0;       // slots below are resources, the rest chips (joins)
  std::vector<int> axes_;             // the translated axes
  std::vector<int> sizes_;              // their sizes
  std::vector<int> steps_;              // their steps (sizes_ / steps_ translations each)
  std::vector<std::uint32_t> strides_;  // their chip id strides
  std::vector<std::uint16_t> coords_;   // chip * axes_.size() + i: coordinate on axes_[i]
  std::vector<std::uint8_t> representative_chip_;  // per chip: coordinate below the step on every translated axis
  std::vector<std::uint32_t> slot_chip_;           // per slot: its chip
  std::uint64_t copies_ = 1;
  std::vector<std::uint32_t> slot_begin_;  // per slot: its task count, then (verify) where its tasks begin
};

// The quotient of the program expand(w, t) would build, built without that
// program, so that a training step of thousands of ops on thousands of chips
// costs its distinct ops, not its tasks. Each op's own program (its entry and
// exit joins and its body, as expand() lays them out) is expanded alone, its
// quotient taken and its automorphism checked in full, once for all the ops
// that build the same program (same kind, axes, bytes, schedule, fixed cost
// and kernel time); the quotients are then laid end to end with the ops'
// per-chip dependencies between the representative chips' joins. That is the
// quotient of the whole program: each op's tasks are contiguous ids there, its
// count on every slot equals its translates', so a task's position on its slot
// is the same offset plus its position in its op's own program, and the ops'
// dependencies join a chip's exit to the same chip's entry on every chip both
// run on (docs/MODEL.md, "Translations of the torus"). This holds for ops on
// part of the chips too (a pipeline's stages, their sends), whose sets the
// translations keep. The whole program may pass 2^32 tasks: nothing numbers
// it. Nothing when an op is not invariant or the workload cannot be.
struct OpQuotient {
  // The whole program's layout without its tasks: its resources and per-op
  // counts; op_ports in the quotient's numbering (each op's entry joins on the
  // representative chips, then their exits, first among its tasks).
  Expanded ex;
  TranslationQuotient quotient;
  std::size_t built_ops = 0;        // distinct op programs expanded and checked in full
  std::uint64_t built_tasks = 0;    // their tasks
  std::uint64_t full_tasks = 0;     // the tasks of the whole program
};
std::optional<OpQuotient> quotient_by_ops(const workloads::Workload& w, RunContext& run,
                                          const BuildOptions& options = {});

// Whether quotient_by_ops builds `op`'s quotient without the op itself: NCCL's
// tree across nodes over the GPUs of every node, on a fabric of one unit of
// leaves, the rotation of every node's GPUs the only translation (`axes`). Its
// rail-0 channels, their links put on GPU 0's, are the quotient
// (collectives::gpu::tree_rail_quotient), checked by its channels and routes
// turning (collectives::gpu::tree_rail_quotient), not task by task: at thousands of
// GPUs the whole op is past the program's task limit.
bool turns_unbuilt(const workloads::Op& op, GpuChoices& gpu, const std::vector<Shift>& axes);

// Whether quotient_by_ops also takes the quotient by the mirror of the nodes
// (node of rank r to m - 1 - r, collectives::gpu::tree_mirror): `w` is one such
// op, one group over every GPU of an even number of nodes. Tree 1 of NCCL's
// double binary tree is then tree 0 mirrored, and the quotient is rail 0's tree
// 0 alone (the tasks of 2G each), checked by its chains, trees and routes
// mirroring, as the rotation is by turning.
bool mirrors_unbuilt(const workloads::Workload& w, RunContext& run, const std::vector<Shift>& axes);

}  // namespace meshsim::driver
