#pragma once
// Internal to sim/collectives/: what the GPU algorithms (gpu_*.cpp, one per
// file) share: routed hops, the ring phases, the rotation of a node's GPUs, the
// pipelined rounds, and each algorithm's builder, which build() dispatches to.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/collectives/gpu.hpp"
#include "sim/collectives/ring_phase.hpp"

namespace meshsim::collectives::gpu {

// The node axes (the grid's axes after its in_node ones: one, or a grid of
// nodes) among `axes`, in the order listed.
std::vector<int> node_axes_of(const Torus& coords, std::span<const int> axes);
// The in-node axes among `axes` (the GPUs of a node, or a factor of them), in
// the order listed.
std::vector<int> local_axes_of(const Torus& coords, std::span<const int> axes);
// The groups of `all` that the op runs on (a pipeline stage's, or all).
std::vector<std::vector<ChipId>> active_groups(std::vector<std::vector<ChipId>> all, const OpPorts& ports);

// GPU `c` turned by `r` places in its node (GPU i to i + r, mod G).
ChipId turned_gpu(const topology::Fabric& f, ChipId c, std::size_t r);
// GPU link `l` (NVLink or NIC, up or down: kind * GPUs + GPU) turned by `r`
// places, or with `to_zero` put on its node's GPU 0.
topology::LinkId turned(const topology::Fabric& f, topology::LinkId l, std::size_t r, bool to_zero = false);

// Where tree_rail_quotient puts a fabric's links: each on the same link of its
// node's GPU 0, numbered by `resource` (per link of the fabric; kNone: unused).
struct Fold {
  const topology::Fabric& fabric;
  std::span<const std::uint32_t> resource;
  std::uint32_t operator()(topology::LinkId l) const;
};

// `bytes` along `route`: returns the first and the last transfer, chained with
// cut-through (stream) edges. `fold`: links put on their node's GPU 0
// (tree_rail_quotient); null: the links themselves.
std::pair<TaskId, TaskId> hop(ProgramBuilder& b, const std::vector<topology::LinkId>& route, std::uint64_t bytes,
                              OpId op, std::uint16_t step, const Fold* fold = nullptr);
// `bytes` from `src` to `dst` along `route`, after src's entry and before dst's
// exit; the last transfer (kNoTask for an empty route).
TaskId routed(ProgramBuilder& b, const std::vector<topology::LinkId>& route, std::uint64_t bytes, ChipId src,
              ChipId dst, const OpPorts& ports);

// Every transfer built from task `first` on carries protocol p's lines around its data.
void to_wire(ProgramBuilder& b, TaskId first, Protocol p);

// The pipelined rounds of the tree and the NVLS tree (gpu_tree.cpp): from
// round kWindow + 1 on, copies of round kWindow (ProgramBuilder::repeat),
// unless the builder's copy_repeats is off.
class Rounds {
 public:
  static constexpr std::uint64_t kWindow = 8;
  explicit Rounds(ProgramBuilder& b) : b_(b), pivot_(static_cast<TaskId>(b.num_tasks())) {}
  // Called at the start of round k of n: true when the rest were copied (the
  // loop ends), else round k starts here.
  bool repeated(std::uint64_t k, std::uint64_t n);

 private:
  ProgramBuilder& b_;
  TaskId pivot_;  // round 0's first task
  TaskId first_ = 0;  // the last round's first task and edge
  std::size_t first_edge_ = 0;
};

// The ring phases (gpu_ring.cpp): every ring's gather or reduce-scatter of
// `shard` bytes a step, from `entry` to `exit` joins.
void ring_gather(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                 std::uint64_t shard, std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op);
void ring_reduce(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                 std::uint64_t chunk, std::span<const TaskId> entry, std::span<const TaskId> exit, OpId op);

// Each algorithm's all-reduce (and the direct all-to-all), in data bytes.
void ring_all_reduce(ProgramBuilder& b, const topology::Fabric& f, const Torus& coords,
                     const std::vector<std::vector<ChipId>>& channels, std::uint64_t ring_shard, const OpPorts& ports);
void hierarchical_all_reduce(ProgramBuilder& b, const topology::Fabric& f, const Torus& coords,
                             std::span<const int> axes, std::uint64_t group_bytes, const OpPorts& ports);
void nvls_all_reduce(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                     std::uint64_t group_bytes, std::uint64_t chunk_bytes, const OpPorts& ports);
void nvls_tree_all_reduce(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& groups,
                          std::uint64_t group_bytes, const OpPorts& ports);
void nccl_tree_all_reduce(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& groups,
                          std::uint64_t group_bytes, std::uint64_t chunk_bytes, Protocol protocol, const OpPorts& ports,
                          const Fold* rail_zero = nullptr, bool tree_zero = false);
void direct_all_reduce(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                       std::uint64_t group_bytes, const OpPorts& ports);
void direct_all_to_all(ProgramBuilder& b, const topology::Fabric& f, const std::vector<std::vector<ChipId>>& rings,
                       std::uint64_t group_bytes, const OpPorts& ports);

}  // namespace meshsim::collectives::gpu
