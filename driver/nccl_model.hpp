#pragma once
// NCCL's tuning model (src/graph/tuning.cc) as meshsim uses it: the time it
// predicts for an algorithm and protocol (the selector, gpu_choice.hpp, picks
// by it), its base latencies, and NVLS's latencies paid at an op's entry.
#include <cstdint>

#include "base/tick.hpp"
#include "sim/collectives/gpu.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

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

}  // namespace meshsim::driver
