#include "driver/nccl_model.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "base/error.hpp"

namespace meshsim::driver {

namespace {

// A protocol's place in NCCL's tables, which list LL, LL128, Simple.
std::size_t nccl_index(collectives::gpu::Protocol protocol) {
  return protocol == collectives::gpu::Protocol::LL ? 0 : protocol == collectives::gpu::Protocol::LL128 ? 1 : 2;
}

// NCCL's latency of an NVLS all-reduce in one NVLink domain (src/graph/tuning.cc,
// hwLat[NVLINK][NVLS][Simple], NCCL 2.21 to 2.29; 23 us in 2.19), which replaces
// its base latency: the whole of what its model charges before bandwidth.
constexpr Tick kNcclNvlsLatency = Tick::from_ps(25'000'000);
// NCCL's network latency of an NVLS tree step (hwLat[NET][NVLS_TREE][Simple]:
// 20.9 us in NCCL 2.29, 14 from 2.19 to 2.27).
constexpr Tick kNcclNvlsTreeNetStep = Tick::from_ps(20'900'000);

}  // namespace

Tick nvls_fixed_cost(const workloads::Hardware& hw) {
  // The simulation crosses a GPU's NVLink up and down links twice (the
  // load-reduce through the switch, then the multicast store): that part of
  // NCCL's latency is simulated hop by hop, the rest is paid at entry.
  const Tick simulated = Tick::from_ps(4 * hw.nvlink.latency.ps());
  return simulated < kNcclNvlsLatency ? kNcclNvlsLatency - simulated : kZeroTick;
}

Tick nvls_tree_fixed_cost(const workloads::Hardware& hw, std::uint64_t nodes) {
  // Of NCCL's network step the simulation crosses a NIC up and a NIC down hop
  // by hop; NCCL counts 2 floor(log2 M) steps, up and down the trees.
  const Tick simulated = Tick::from_ps(2 * hw.nic.latency.ps());
  const Tick extra = simulated < kNcclNvlsTreeNetStep ? kNcclNvlsTreeNetStep - simulated : kZeroTick;
  const auto steps = 2 * static_cast<std::int64_t>(std::bit_width(std::max<std::uint64_t>(nodes, 1)) - 1);
  return nvls_fixed_cost(hw) + Tick::from_ps(steps * extra.ps());
}

Tick nccl_base_latency(collectives::gpu::Algorithm algorithm, collectives::gpu::Protocol protocol) {
  using collectives::gpu::Algorithm;
  // NCCL's baseLat (src/graph/tuning.cc; ../shared/notes/scale.md), in NCCL's
  // protocol order LL, LL128, Simple: the table of NCCL 2.23 to today (2.29);
  // from 2.18 to 2.22 the tree's Simple entry was 0, and NVLS's 23 us in 2.18.
  constexpr std::array<std::int64_t, 3> kTreePs{6'800'000, 14'000'000, 8'400'000};
  constexpr std::array<std::int64_t, 3> kRingPs{6'600'000, 14'000'000, 8'400'000};
  if (algorithm == Algorithm::Ring) return Tick::from_ps(kRingPs[nccl_index(protocol)]);
  if (algorithm == Algorithm::Tree) return Tick::from_ps(kTreePs[nccl_index(protocol)]);
  return kZeroTick;
}

double nccl_nvls_tree_bus_bytes_per_s(const workloads::Hardware& hw, int gpus_per_node, int nodes) {
  const double g =  // its heads
      static_cast<double>(collectives::gpu::nvls_owners(static_cast<std::size_t>(std::max(gpus_per_node, 0))));
  if (g < 2 || nodes < 2 || hw.nvls_efficiency <= 0) return 0;  // NCCL: at least 2 channels, across nodes
  const double intra = static_cast<double>(hw.nvlink.bandwidth_bytes_per_s) / (g + 1);
  const double inter = static_cast<double>(hw.nic.bandwidth_bytes_per_s) * (nodes <= 2 ? 2 : 1);
  // perChMaxNVLSTreeBws (NCCL 2.29.7), GB/s, on 2 nodes and on more.
  const bool blackwell = hw.compute_capability >= 100;
  const double cap = 1e9 * (nodes <= 2 ? (blackwell ? 96.0 : 57.7) : (blackwell ? 43.8 : 45.5));
  return g * std::min({intra * hw.nvls_efficiency * (g - 1) / g * 2, inter, cap});
}

double nccl_model_s(collectives::gpu::Algorithm algorithm, collectives::gpu::Protocol protocol,
                    const NcclModelInput& in, std::uint64_t bytes) {
  using collectives::gpu::Algorithm;
  using collectives::gpu::Protocol;
  // NCCL's tuning model (src/graph/tuning.cc, NCCL 2.2x; ../shared/notes/scale.md),
  // in microseconds: a base latency, per-step hardware latencies over NVLink and
  // the network, and the bus bandwidth turned into algorithm bandwidth. Per
  // protocol, in NCCL's order LL, LL128, Simple:
  constexpr std::array<double, 3> kTreeNvlink{0.6, 1.25, 4.0}, kRingNvlink{0.6, 1.9, 3.4};
  constexpr std::array<double, 3> kTreeNet{5.0, 8.5, 14.0}, kRingNet{2.7, 4.0, 14.0};
  constexpr double kTreeBandwidth = 0.92;  // Tree all-reduce bandwidth factor
  // A network step's post overhead on an Intel (or Arm) host, 1 us, three times
  // over for Simple: the least an inter-node ring's NVLink step costs.
  constexpr double kNetOverhead = 1.0;
  const std::size_t i = nccl_index(protocol);
  const double n = in.ranks, nodes = in.nodes, ppn = n / nodes;
  const double steps = in.all_reduce ? 2 * (n - 1) : n - 1;
  const double inter = nodes <= 1 ? 0 : in.all_reduce ? 2 * (nodes - 1) : nodes - 1;
  double bus = in.bus_bytes_per_s, latency_us = 0, algbw = 0;
  if (algorithm == Algorithm::Nvls) {
    // NVLink SHARP in one NVLink domain, Simple only: no base latency, one
    // NVLink latency of 25 us (kNcclNvlsLatency: NCCL 2.21 to 2.29; 23 in 2.19), and the bus
    // bandwidth times 5/6 as algorithm bandwidth (both operations of an
    // all-reduce, the reduce and the multicast, pipelined). Its bus bandwidth
    // is NCCL's NVLS graph's channels times their speed, the GPU's NVLink
    // bandwidth as the ring's is: `bus_bytes_per_s` stands for both.
    MESHSIM_ASSERT(in.all_reduce && in.nodes <= 1 && protocol == Protocol::Simple,
                   "NCCL's NVLS runs all-reduces in one NVLink domain with Simple");
    return kNcclNvlsLatency.seconds() + static_cast<double>(bytes) / (bus * 5.0 / 6.0);
  }
  if (algorithm == Algorithm::NvlsTree) {
    // NCCL's NVLS tree (Simple only): no base latency, NVLS's 25 us in the node
    // and 20.9 us a network step (kNcclNvlsTreeNetStep), 2 floor(log2 nodes) of them.
    MESHSIM_ASSERT(in.all_reduce && in.nodes >= 2 && protocol == Protocol::Simple &&
                       in.nvls_tree_bus_bytes_per_s > 0,
                   "NCCL's NVLS tree runs all-reduces across nodes with Simple");
    const double levels = std::floor(std::log2(nodes));
    return kNcclNvlsLatency.seconds() + 2 * levels * kNcclNvlsTreeNetStep.seconds() +
           static_cast<double>(bytes) / (in.nvls_tree_bus_bytes_per_s * n / steps);
  }
  if (algorithm == Algorithm::Tree) {
    MESHSIM_ASSERT(in.all_reduce, "NCCL's tree runs all-reduces");
    bus *= kTreeBandwidth;
    if (protocol == Protocol::LL) bus = std::min(bus / 3.8, in.ll_max_bytes_per_s);
    if (protocol == Protocol::LL128) bus *= nodes <= 1 ? 7.0 / 9.0 : 120.0 / 128.0;
    latency_us = nccl_base_latency(algorithm, protocol).microseconds() +
                 2 * ((ppn - 1) * kTreeNvlink[i] + std::floor(std::log2(nodes)) * kTreeNet[i]);
    algbw = bus * 0.5;
  } else {
    if (protocol == Protocol::LL) bus = std::min(in.ll_max_bytes_per_s, bus * 0.5);
    if (protocol == Protocol::LL128) bus *= 0.92;
    const double intra =
        nodes <= 1 ? kRingNvlink[i] : std::max(kRingNvlink[i], kNetOverhead * (protocol == Protocol::Simple ? 3 : 1));
    // With one GPU a node, NCCL takes the tree's network latency.
    const double net = ppn == 1 ? kTreeNet[i] : kRingNet[i];
    latency_us = nccl_base_latency(algorithm, protocol).microseconds() + (steps - inter) * intra + inter * net;
    algbw = bus * n / steps;
  }
  return latency_us * 1e-6 + static_cast<double>(bytes) / algbw;
}

}  // namespace meshsim::driver
