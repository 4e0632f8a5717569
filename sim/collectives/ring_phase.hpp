#pragma once
// One phase of a ring collective along a single hardware axis, for every ring (or
// line) along that axis at once, and the multi-axis composition of phases.
#include <cstdint>
#include <span>
#include <vector>

#include "sim/collectives/collective.hpp"

namespace meshsim::collectives::detail {

// One phase: along `axis`, every chip exchanges with the X - 1 others of its ring
// or line of X = `size` chips. A ring's chains follow the links X/2 hops each way;
// on a twisted torus such a ring may run past a twisted wraparound, where the
// chips met beyond X/2 hold the same data as the ones before (schedule.hpp).
// A line (`ring` false) is the axis itself, never through a wraparound.
//
// Every chip sends `shard_bytes` to every other chip of its ring/line.
// A ring: chip c's shard travels floor(X/2) hops each way, forwarded chip to chip
// (stream edges); on an even ring the last hop of each direction carries half the
// shard, so the antipodal chip gets one half from each side and both directions
// carry (X-1)/2 shards. A line: along the line to both ends.
void all_gather_phase(ProgramBuilder& b, const Torus& t, int axis, int size, bool ring, std::uint64_t shard_bytes,
                      std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op);

// Every chip ends with the sum of one `chunk_bytes` chunk over its ring/line.
// A ring: the chunk for chip d is reduced along a chain of floor(X/2) hops in
// each direction; each hop adds the sending chip's contribution and forwards it.
// On an even ring both chains start at the antipodal chip, which sends half of
// its contribution (half the elements) each way. A line: chains from both ends.
void reduce_scatter_phase(ProgramBuilder& b, const Torus& t, int axis, int size, bool ring, std::uint64_t chunk_bytes,
                          std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op);

// Per-chip joins for an intermediate barrier, for the chips whose `like` port is
// a task (the op's chips); kNoTask for the others.
std::vector<TaskId> make_joins(ProgramBuilder& b, std::span<const TaskId> like, OpId op);

// Ceiling division for byte counts (uneven shards are padded, as XLA pads).
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The axes rotated left by `by`: part p of a multi-axis collective runs its
// phases in this order so that every axis's links work at the same time.
std::vector<int> rotated(std::span<const int> axes, std::size_t by);

}  // namespace meshsim::collectives::detail

namespace meshsim::collectives::detail {

enum class PhaseKind { Gather, Reduce, Idle };  // Idle: a part with nothing in this stage
struct Phase {
  PhaseKind kind;
  int axis;
  std::uint64_t bytes;  // shard (gather) or chunk (reduce) per chip
  int size = 0;         // the chips of its ring or line (the axis size, or a twisted ring's, schedule.hpp)
  bool ring = false;    // a ring (else a line)
};

// Runs `phases` one after another on every chip, with a per-chip barrier between
// them (a chip starts phase k+1 once it holds its phase-k result).
void run_phases(ProgramBuilder& b, const Torus& t, std::span<const Phase> phases, const OpPorts& ports);

// Runs several parts' phases with one barrier per chip between stages: a chip
// starts every part's stage-k phase once it holds all parts' results of stage
// k-1 (the balanced schedule's lock step: docs/MODEL.md). parts[i][k] is part
// i's phase in stage k (Idle: none); every part has one entry per stage.
void run_in_lockstep(ProgramBuilder& b, const Torus& t, std::span<const std::vector<Phase>> parts,
                     const OpPorts& ports);
// The parts in lock step, or each on its own (run_phases) when `lockstep` is false.
void run_parts(ProgramBuilder& b, const Torus& t, std::span<const std::vector<Phase>> parts, const OpPorts& ports,
               bool lockstep);

// `phases` placed in `stages` slots from stage `first` on, Idle elsewhere.
std::vector<Phase> staged(std::span<const Phase> phases, int first, int stages);

// AllGather phases over a part's gather order, starting from `shard_bytes` per
// chip; each phase multiplies the shard by its ring size.
std::vector<Phase> all_gather_phases(const AxisOrderPart& part, std::uint64_t shard_bytes);
// ReduceScatter phases over a part's reduction order for `part_bytes` per chip;
// each phase divides the chunk by its ring size.
std::vector<Phase> reduce_scatter_phases(const AxisOrderPart& part, std::uint64_t part_bytes);

// Sends `bytes` along `links` (a route), hop by hop with cut-through forwarding.
// The first hop waits for entry[src]; the last arrival feeds exit[dst]. Returns
// the last hop's transfer.
TaskId routed_chain(ProgramBuilder& b, const Torus& t, std::span<const topology::LinkId> links, std::uint64_t bytes,
                    std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op);

}  // namespace meshsim::collectives::detail
