#pragma once
// The expected costs printed beside simulated times: the roofline of a lowered
// matmul (its local shard shapes at the chip's peak rate for its dtype, scaled by
// the matmul efficiency) and the cheat sheet's closed form of a communication op.
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/roofline.hpp"
#include "sim/collectives/closed_form.hpp"
#include "sim/collectives/gpu.hpp"
#include "sim/collectives/schedule.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

// Throws InputError (at the op) when the preset has no rate for the dtype.
kernels::Roofline matmul_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
double matmul_flops(const workloads::Op& op);  // per chip
// An elementwise op: its HBM bytes over the HBM bandwidth (no compute term).
kernels::Roofline elementwise_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
// matmul_cost or elementwise_cost, by kind.
kernels::Roofline local_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file);
// A GPU collective's algorithm and NCCL protocol: the algorithm the workload
// names; else, for an all-reduce, the pair NCCL's cost model (nccl_model_s)
// says is fastest among the ring and the tree with each protocol and, in one
// NVLink domain that has it, NVLS with Simple; else the fastest by its closed
// form. The protocol: the one the workload names, else, for the ring and the
// tree, NCCL's model's pick; Simple for the others. InputError when the named
// algorithm or protocol does not apply.
struct GpuChoice {
  collectives::gpu::Algorithm algorithm;
  collectives::ClosedForm closed;
  collectives::gpu::Protocol protocol = collectives::gpu::Protocol::Simple;
};
GpuChoice gpu_algorithm(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                        const topology::Fabric& fabric);  // `fabric` is w.make_fabric()

// NCCL's tuning model (src/graph/tuning.cc, NCCL 2.2x; constants in
// ../shared/notes/scale.md) of a ring all-reduce, all-gather or reduce-scatter,
// a tree all-reduce with protocol p, an NVLS all-reduce in one node (Simple:
// 25 us + bytes / (5/6 busbw)) or an NVLS tree across nodes (below): latency +
// bytes / algbw. The ring's
// latency: base + (steps - network steps) NVLink steps + network steps
// (all-reduce 2(n-1) steps, 2(nodes-1) of them network; the others half), an
// NVLink step costing at least the network's post overhead across nodes; the
// tree's base + 2((n/nodes - 1) NVLink steps + log2(nodes) network steps).
// algbw = busbw n / steps for the ring, busbw / 2 for the tree, after NCCL's
// refinements: the tree 0.92; LL x 0.5 on the ring, 1/3.8 on the tree, capped
// at `ll_max_bytes_per_s`; LL128 x 0.92 on the ring, 120/128 on the tree (7/9 in
// one node). NCCL's per-channel caps are left out: meshsim's channel counts
// are not NCCL's. `bus_bytes_per_s`: the ring's bus bandwidth on this fabric
// (meshsim's closed form; NCCL's is its channels times their speed).
// NCCL's NVLS tree (Simple): its latency, the 25 us of NVLS in the node and
// 2 floor(log2 nodes) network steps of 20.9 us, and algbw = busbw n / steps
// with `nvls_tree_bus_bytes_per_s` (nccl_nvls_tree_bus_bytes_per_s).
struct NcclModelInput {
  int ranks = 1, nodes = 1;
  double bus_bytes_per_s = 0;
  bool all_reduce = true;  // else an all-gather or reduce-scatter (the ring)
  double ll_max_bytes_per_s = 1e300;
  double nvls_tree_bus_bytes_per_s = 0;
};
// NCCL's bus bandwidth of its NVLS tree across `nodes` nodes of G GPUs
// (src/graph/tuning.cc, NCCL 2.29): its NVLS graph has one channel per head,
// H = min(G, 32), each at min(bwIntra x nvlsEfficiency x (H-1)/H x 2, bwInter
// (x 2 on 2 nodes), perChMaxNVLSTreeBw): bwIntra the GPU's NVLink rate over H + 1 (NCCL's
// NVLS search puts every head's traffic through every GPU's port, its own
// twice), bwInter the head's NIC rate, and NCCL's per-channel cap by GPU
// generation and node count (Hopper 57.7 GB/s on 2 nodes, 45.5 on more;
// Blackwell 96.0 and 43.8). Here the channel count is NCCL's, so the cap is
// kept (the ring's and the tree's caps are left out: their channels are not).
double nccl_nvls_tree_bus_bytes_per_s(const workloads::Hardware& hw, int gpus_per_node, int nodes);
double nccl_model_s(collectives::gpu::Algorithm algorithm, collectives::gpu::Protocol protocol,
                    const NcclModelInput& in, std::uint64_t bytes);
// Per op of `w`, the class its tasks run as (sim::Executor::classify_ops): a GPU
// collective's protocol (collectives::gpu::Protocol), else 0; empty when every
// op is of class 0.
class GpuChoices;
std::vector<std::uint8_t> op_classes(const workloads::Workload& w, const topology::Torus& torus,
                                     GpuChoices* gpu = nullptr);

// The fabric level a communication op reaches, its outermost: on a TPU, dcn for a
// collective over the slice axis or a send between slices, else ici; on a GPU
// fabric, nic for a collective over more than one node or a send between nodes,
// else nvlink.
workloads::FabricLevel comm_level(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus);
// The hardware's fixed cost of the op's level and kind (zero for local ops and
// by default): a calibrated launch and synchronisation cost, on top of NCCL's
// base latency on a GPU (op_fixed_cost). Alone, a lower bound of what an op
// pays before its first transfer (search's bounds use it so).
Tick comm_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus);
// NCCL's base latency of an algorithm with a protocol (src/graph/tuning.cc's
// baseLat, NCCL 2.2x): the collective kernel's launch and setup, once per
// collective. Ring LL, LL128, Simple: 6.6, 14.0, 8.4 us; tree 6.8, 14.0, 8.4;
// NVLS 0 (NCCL puts all its latency in its per-hop term); meshsim's own direct
// and hierarchical algorithms, which NCCL does not have, 0.
Tick nccl_base_latency(collectives::gpu::Algorithm algorithm, collectives::gpu::Protocol protocol);
// What an NVLS all-reduce pays at entry: NCCL's NVLS latency (25 us, its
// whole latency term) less the part the simulation crosses hop by hop, two
// switch round trips (4 x the NVLink hop latency: 6.8 us on the presets), so
// that a small NVLS all-reduce takes NCCL's 25 us; 0 if the hops take longer.
Tick nvls_fixed_cost(const workloads::Hardware& hw);
// What an NVLS tree all-reduce over `nodes` nodes pays at entry: NVLS's
// (nvls_fixed_cost: NCCL's 25 us in the node) and, for each of NCCL's 2
// floor(log2 M) network steps, its 20.9 us (NCCL 2.29) less the NIC up and down
// hops the simulation crosses (14 us on the presets).
Tick nvls_tree_fixed_cost(const workloads::Hardware& hw, std::uint64_t nodes);
// What an op pays on every chip before its first transfer: comm_fixed_cost
// and, for a GPU collective (not a send), NCCL's base latency of the algorithm
// and protocol it runs (NVLS: nvls_fixed_cost; the NVLS tree:
// nvls_tree_fixed_cost). `gpu`: the workload's choices, null on a TPU.
Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                   GpuChoices* gpu);
// The same for a GPU collective (not a send) whose choice is at hand.
Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                   const GpuChoice& choice);

// A torus collective's multi-axis schedule: the one the op names, else balanced.
collectives::Schedule torus_schedule(const workloads::Op& op);

collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                                  const topology::Torus& torus);
collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                                  const topology::Torus& torus, const topology::Fabric& fabric);
collectives::ClosedForm torus_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                          const topology::Torus& torus);

// What an op's GPU choice depends on: its kind, hardware axes, bytes, the
// algorithm and protocol it names and a send's ends.
using GpuChoiceKey = std::tuple<int, std::vector<int>, std::uint64_t, std::string, std::string, std::uint32_t, std::uint32_t>;

// gpu_algorithm (and a send's closed form) memoized for one system: the
// choice depends only on the system and the op's kind, hardware axes, bytes,
// the algorithm it names and a send's ends, so ops alike (a training step's
// thousands of layers) share one, and so do workloads on the system (a
// workload's group 0, its ops expanded one by one). Not for a workload whose
// hardware changes meanwhile.
class GpuChoices {
 public:
  GpuChoices(const workloads::Workload& w, const topology::Torus& torus);
  const GpuChoice& operator()(const workloads::Op& op);
  const topology::Fabric& fabric() const { return fabric_; }

 private:
  using Key = GpuChoiceKey;
  const workloads::Workload& w_;
  const topology::Torus& torus_;
  topology::Fabric fabric_;
  std::map<Key, GpuChoice> memo_;
};

// The choices a function uses: `given` (one run's, passed down by simulate()
// so that each op's algorithm is chosen once: the size estimate, the quotient's
// checks, the build and the report each ask, and at scale a choice walks every
// GPU of every channel), else `own`, made here for `w` on a GPU fabric; null on
// a TPU.
GpuChoices* choices_for(GpuChoices* given, std::optional<GpuChoices>& own, const workloads::Workload& w,
                        const topology::Torus& torus);

}  // namespace meshsim::driver
