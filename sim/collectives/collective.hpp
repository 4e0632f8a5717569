#pragma once
// Collective algorithms on a torus, each built as a schedule of real hop-by-hop
// transfers (sim::Program tasks). The times come out of executing them; nothing
// here computes a duration. docs/MODEL.md derives the exact time of every schedule.
//
// Every builder receives the op's per-chip ports: entry[c] fires when chip c may
// start the op, exit[c] must fire when chip c holds its result. Builders add edges
// from entry joins and into exit joins; the caller adds entry[c] -> exit[c].
#include <cstdint>
#include <span>
#include <vector>

#include "base/op_kind.hpp"
#include "sim/collectives/schedule.hpp"
#include "sim/program.hpp"
#include "topology/torus.hpp"

namespace meshsim::collectives {

using sim::OpId;
using sim::ProgramBuilder;
using sim::TaskId;
using topology::ChipId;
using topology::Torus;

using Kind = OpKind;

// An op may run on a subset of the chips (a pipeline stage): the others' ports
// are sim::kNoTask, and the set is a union of whole groups of the collective
// (every chip that differs from an active one only on the collective's axes is
// active), so a builder skips a ring, line or group by its first chip.
struct OpPorts {
  OpId op = 0;
  std::span<const TaskId> entry;  // one join per chip (kNoTask: the chip takes no part)
  std::span<const TaskId> exit;   // one join per chip (kNoTask: the chip takes no part)
  bool active(ChipId c) const { return entry[c] != sim::kNoTask; }
};

// `axes`: the hardware axes the collective spans (each of size > 1), in order.
// `group_bytes` (V): bytes of the whole array within one group of chips that
// share the collective: what each chip holds after an AllGather, before a
// ReduceScatter, throughout an AllReduce; each chip holds V / group size before
// an AllToAll. `schedule`: how several axes share the data (schedule.hpp).
// `plans`: the run's memo of multi-axis plans (null: one for this call).
void all_gather(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports, Schedule schedule = Schedule::Balanced, PlanCache* plans = nullptr);
void reduce_scatter(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                    const OpPorts& ports, Schedule schedule = Schedule::Balanced, PlanCache* plans = nullptr);
void all_reduce(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports, Schedule schedule = Schedule::Balanced, PlanCache* plans = nullptr);
void all_to_all(ProgramBuilder& b, const Torus& t, std::span<const int> axes, std::uint64_t group_bytes,
                const OpPorts& ports);
// Dispatches to one of the four above (kind AllGather, ReduceScatter, AllReduce
// or AllToAll; the schedule applies to the first three).
void build(ProgramBuilder& b, const Torus& t, Kind kind, std::span<const int> axes, std::uint64_t group_bytes,
           const OpPorts& ports, Schedule schedule = Schedule::Balanced, PlanCache* plans = nullptr);

// A collective over explicit groups of chips, for groups that are not the chips
// along a set of axes (an imported program's replica groups): each group is a
// ring of its members in the listed order, whose steps are routed over the torus
// (chip_groups.cpp; docs/MODEL.md "Collectives over any group of chips").
// `group_bytes` (V) per group as above; the groups are disjoint, each of the
// same size, and their chips are the op's chips. A group of one chip moves nothing.
//
// `factors` (a mesh axis over part of a torus axis, workloads::CollectiveOp):
// each group is the product of rings of these sizes, its members in mixed
// radix over them (first fastest). An AllGather, ReduceScatter or AllReduce
// then runs a phase per factor of size > 1, each a ring over the members that
// differ only in that factor: K such factors split V into K parts, part p
// taking them in the order rotated by p (the equal split of the torus's
// multi-axis schedules, schedule.hpp), with a barrier per chip between a
// part's phases. An AllToAll sends straight to every member, as without.
void group_collective(ProgramBuilder& b, const Torus& t, Kind kind, std::span<const std::vector<ChipId>> groups,
                      std::uint64_t group_bytes, const OpPorts& ports, std::span<const int> factors = {});
// What group_collective builds, counted without building it: its hop transfers
// (the run-size limits), the bytes of its busiest link and the most hops a chain
// of its steps crosses (its closed form: docs/MODEL.md).
struct GroupLoad {
  std::uint64_t transfers = 0;
  std::uint64_t busiest_bytes = 0;
  topology::LinkId busiest_link = topology::kNoLink;
  std::uint64_t chain_hops = 0;
};
GroupLoad group_load(const Torus& t, Kind kind, std::span<const std::vector<ChipId>> groups, std::uint64_t group_bytes,
                     std::span<const int> factors = {});

// Point-to-point: `bytes` from src to dst, split evenly over the edge-disjoint
// dimension-order routes (one per rotation of the axes on which they differ).
void send(ProgramBuilder& b, const Torus& t, ChipId src, ChipId dst, std::uint64_t bytes, const OpPorts& ports);

// Number of routes `send` uses between src and dst.
int send_paths(const Torus& t, ChipId src, ChipId dst);
// What `send` builds for every pair at once (a permute, a pipeline stage's
// hand-off), counted without building it: as GroupLoad, the longest route as
// its chain of hops.
GroupLoad send_load(const Torus& t, std::span<const std::pair<ChipId, ChipId>> pairs, std::uint64_t bytes);

}  // namespace meshsim::collectives
