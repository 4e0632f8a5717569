#include "driver/costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <optional>

#include "base/error.hpp"
#include "kernels/calibrated_matmul.hpp"
#include "sim/collectives/gpu.hpp"

namespace meshsim::driver {

double matmul_flops(const workloads::Op& op) {
  return 2.0 * static_cast<double>(op.batch) * static_cast<double>(op.m) * static_cast<double>(op.k) *
         static_cast<double>(op.n);
}

kernels::Roofline matmul_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  MESHSIM_ASSERT(op.kind == OpKind::Matmul && (!op.inputs.empty() || !op.dtype.empty()), "not a matmul");
  const std::string& dtype = op.inputs.empty() ? op.dtype : op.inputs[0].dtype;
  const std::uint64_t element_bytes = op.inputs.empty() ? workloads::element_size(op.dtype) : op.inputs[0].element_bytes;
  double peak = 0;
  const char* key = "";
  if (dtype == "bf16" || dtype == "fp16") {
    peak = hw.chip.bf16_flops_per_s;
    key = "bf16_flops_per_s";
  } else if (dtype == "int8") {
    peak = hw.chip.int8_ops_per_s;
    key = "int8_ops_per_s";
  } else if (dtype == "fp8") {
    peak = hw.chip.fp8_flops_per_s;
    key = "fp8_flops_per_s";
  } else if (dtype == "fp32") {
    peak = hw.chip.fp32_flops_per_s;
    key = "fp32_flops_per_s";
  } else {
    throw InputError(file, op.pointer, fmt::format("no matmul rate for dtype {} (use bf16, fp16, fp32, int8 or fp8)", dtype));
  }
  if (peak <= 0)
    throw InputError(file, op.pointer,
                     fmt::format("{} has no published {} matmul rate; give \"hardware\": {{\"{}\": ...}}", hw.preset,
                                 dtype, key));
  if (hw.chip.hbm_bandwidth_bytes_per_s <= 0)
    throw InputError(file, op.pointer, fmt::format("{} has no HBM bandwidth; give \"hardware\": {{\"hbm_bandwidth_bytes_per_s\": ...}}", hw.preset));
  kernels::RooflineInput in = kernels::matmul_traffic(op.m, op.k, op.n, element_bytes);
  const auto batch = static_cast<double>(op.batch);
  in.flops *= batch;
  in.hbm_bytes *= batch;
  in.peak_flops_per_s = peak;
  in.hbm_bandwidth_bytes_per_s = hw.chip.hbm_bandwidth_bytes_per_s;
  in.efficiency = hw.matmul_efficiency;
  // Times past the simulator's clock range are an input error, not a crash.
  const double longest = std::max(in.flops / (in.peak_flops_per_s * in.efficiency),
                                  in.hbm_bytes / in.hbm_bandwidth_bytes_per_s);
  if (!(longest < kMaxTick.seconds()))
    throw InputError(file, op.pointer,
                     fmt::format("the local matmul would take {:.3g} s, past the simulator's limit of {:.3g} s "
                                 "(2^62 ps); reduce the sizes or raise the rates",
                                 longest, kMaxTick.seconds()));
  kernels::Roofline r = kernels::roofline(in);
  // Calibrated on real hardware (meshsim run --calibration): the fitted time of
  // the shape replaces the compute term; the HBM roofline still bounds it.
  for (const workloads::CalibratedMatmul& fit : hw.calibrated_matmuls)
    if (fit.dtype == dtype) {
      const double t = kernels::calibrated_matmul_time(
          {fit.launch_s, fit.flops_per_s, fit.wave_flops_per_s, fit.hbm_bytes_per_s, fit.sms}, op.m, op.k, op.n,
          element_bytes) * batch;  // a batch of products: one launch each, an upper bound of one batched kernel
      if (!(t < kMaxTick.seconds()))
        throw InputError(file, op.pointer, fmt::format("the calibrated local matmul would take {:.3g} s, past the "
                                                       "simulator's limit of {:.3g} s", t, kMaxTick.seconds()));
      r.compute_time = tick_from_seconds(t);
    }
  return r;
}

kernels::Roofline elementwise_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  MESHSIM_ASSERT(op.kind == OpKind::Elementwise, "not an elementwise op");
  if (op.duration > kZeroTick) return {op.duration, kZeroTick};  // measured: its time as is
  if (hw.chip.hbm_bandwidth_bytes_per_s <= 0)
    throw InputError(file, op.pointer, fmt::format("{} has no HBM bandwidth; give \"hardware\": {{\"hbm_bandwidth_bytes_per_s\": ...}}", hw.preset));
  const double t = static_cast<double>(op.hbm_bytes) / hw.chip.hbm_bandwidth_bytes_per_s;
  if (!(t < kMaxTick.seconds()))
    throw InputError(file, op.pointer, fmt::format("the elementwise kernel would take {:.3g} s, past the simulator's "
                                                   "limit of {:.3g} s (2^62 ps)", t, kMaxTick.seconds()));
  kernels::RooflineInput in;
  in.hbm_bytes = static_cast<double>(op.hbm_bytes);
  in.hbm_bandwidth_bytes_per_s = hw.chip.hbm_bandwidth_bytes_per_s;
  in.peak_flops_per_s = 1;  // no FLOPs: only the memory term counts
  if (op.flops > 0) {
    in.flops = static_cast<double>(op.flops);
    in.peak_flops_per_s = hw.chip.bf16_flops_per_s;
    if (!(in.flops / in.peak_flops_per_s < kMaxTick.seconds()))
      throw InputError(file, op.pointer, fmt::format("the kernel's {} operations would take past the simulator's limit "
                                                     "of {:.3g} s (2^62 ps)", op.flops, kMaxTick.seconds()));
  }
  return kernels::roofline(in);
}

kernels::Roofline local_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  return op.kind == OpKind::Elementwise ? elementwise_cost(op, hw, file) : matmul_cost(op, hw, file);
}

namespace {

// The nodes a GPU collective spans in each group: the product of its node axes
// (all the nodes, or part of a grid).
std::uint64_t op_nodes(const workloads::Op& op, const topology::Torus& torus) {
  std::uint64_t nodes = 1;
  for (int a : op.hw_axes)
    if (a >= 1) nodes *= static_cast<std::uint64_t>(torus.axis(a).size);
  return nodes;
}

// NCCL's ring and direct algorithms on a switched fabric (docs/MODEL.md): with N
// GPUs per ring, B the narrowest one-way bandwidth a ring step crosses and a the
// slowest step's latency (its links' latencies and a forwarding chunk, or the
// step's piece if smaller, over each of them),
//   AllGather, ReduceScatter: latency (N-1) a, bandwidth (N-1)/N V/B
//   AllReduce:                twice that (a reduce-scatter then an all-gather)
//   AllToAll (direct):        the busier port of a GPU: its pieces to its own node
//                             over NVLink, to other nodes over its NIC
//   Send:                     the route's latency and a forwarding chunk over
//                             every link but the narrowest, plus bytes/B (additive)
//
// With protocol p (ring and tree only): the links' latencies as p sees them,
// every byte p's wire bytes (wire_factor) and p's step as the forwarding chunk.
collectives::ClosedForm gpu_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                        const topology::Torus& torus, const topology::Fabric& fabric,
                                        collectives::gpu::Algorithm algorithm,
                                        collectives::gpu::Protocol protocol = collectives::gpu::Protocol::Simple) {
  using collectives::gpu::Protocol;
  MESHSIM_ASSERT(collectives::gpu::supports(algorithm, protocol) || op.kind == OpKind::Send,
                 "a protocol the algorithm does not run");
  collectives::ClosedForm f;
  if (op.kind == OpKind::Send) {
    // Each link of the route forwards once a forwarding chunk (or the whole
    // message, if smaller) has crossed the one before: the route's latencies and
    // that chunk over every link but the narrowest, then the message through the
    // narrowest. Exact for a route of equal links with nothing else on it.
    const double bytes = static_cast<double>(op.bytes);
    const double first = std::min(bytes, static_cast<double>(w.hardware.forward_chunk_bytes));
    double bw = 0, chunk_s = 0;
    for (topology::LinkId l : fabric.route(op.src, op.dst)) {
      const double b = static_cast<double>(fabric.link(l).spec.bandwidth_bytes_per_s);
      bw = bw == 0 ? b : std::min(bw, b);
      f.latency_s += fabric.link(l).spec.latency.seconds();
      chunk_s += first / b;
    }
    if (bw > 0) {
      f.additive = true;
      f.latency_s += chunk_s - first / bw;
      f.bandwidth_s = bytes / bw;
    }
    return f;
  }
  const auto rings = collectives::gpu::rings(torus, op.hw_axes);
  const double n = rings.empty() ? 1.0 : static_cast<double>(rings.front().size());
  if (n < 2) return f;
  // The bytes the links carry (the data in the protocol's lines).
  const double v = static_cast<double>(op.bytes) * collectives::gpu::wire_factor(protocol);
  // A ring's phase: N-1 consecutive steps' latency; bandwidth (N-1)/N V
  // over its narrowest link, or with C channels (N-1)/N V/C through the link the
  // channels cross most often.
  // Each step forwards what it received once a forwarding chunk of it (or all of
  // it, if smaller) has crossed each link of the step: a phase's latency counts
  // that chunk's serialisation at every link of its steps (ring_limits).
  const int channels = collectives::gpu::ring_channels(torus, op.hw_axes);
  const double forward = static_cast<double>(w.hardware.forward_chunk_bytes);
  const auto ring_phase = [&](collectives::ClosedForm& phase) {
    const double piece = v / n / channels;
    const collectives::gpu::RingLimits all = collectives::gpu::ring_limits(
        fabric, channels == 1 ? rings : collectives::gpu::channel_rings(torus, op.hw_axes), protocol, piece,
        w.hardware.forward_chunk_bytes);
    phase.latency_s = all.phase_latency_s + all.phase_forward_s;
    phase.bandwidth_s = channels == 1 ? (n - 1) / n * v / all.bandwidth_bytes_per_s
                                      : (n - 1) / n * v / channels * all.seconds_per_byte;
  };
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
      ring_phase(f);
      break;
    case OpKind::AllReduce: {
      const double nv = static_cast<double>(w.hardware.nvlink.bandwidth_bytes_per_s);
      const double nv_step = 2 * w.hardware.nvlink.latency.seconds();
      if (algorithm == collectives::gpu::Algorithm::Nvls) {
        // Up V + V/H and down V/H + V through an owner's port (H owners:
        // nvls_owners), at the switches' NVLS efficiency of the link rate; two
        // switch round trips.
        const double h = static_cast<double>(collectives::gpu::nvls_owners(rings.front().size()));
        f.latency_s = 2 * nv_step;
        f.bandwidth_s = (h + 1) / h * v / (nv * fabric.nvls_efficiency());
      } else if (algorithm == collectives::gpu::Algorithm::Hierarchical) {
        // Ring reduce-scatter and all-gather in the node (G GPUs, NVLink), ring
        // all-reduce of the V/G shards across the M nodes on each rail (NICs).
        const auto m = static_cast<double>(op_nodes(op, torus));
        // The four phases run one after the other: each its latency (a step of two
        // links, each crossed by a forwarding chunk of the step's piece or all of
        // it) or its bandwidth term, whichever is larger, and those add up.
        const double g = torus.axis(0).size;
        const double nic = static_cast<double>(w.hardware.nic.bandwidth_bytes_per_s);
        const double nic_step = 2 * w.hardware.nic.latency.seconds();
        f.additive = true;
        const auto phase = [&](double steps, double step_s, double piece, double link_bytes_per_s, double bytes) {
          const double latency = steps * (step_s + 2 * std::min(piece, forward) / link_bytes_per_s);
          const double bandwidth = steps / (steps + 1) * bytes / link_bytes_per_s;
          (latency > bandwidth ? f.latency_s : f.bandwidth_s) += 2 * std::max(latency, bandwidth);
        };
        phase(g - 1, nv_step, v / g, nv, v);            // in the node, reduce-scatter and all-gather
        phase(m - 1, nic_step, v / g / m, nic, v / g);  // across the nodes, on each rail
      } else if (algorithm == collectives::gpu::Algorithm::Tree) {
        // NCCL's tree of nodes with a chain in each (inside one node, the chain
        // alone), a pipeline of chunks of a channel's V / channels that every
        // link stores and forwards whole: the first chunk's way up and down, then
        // the other chunks through the link the channels load most.
        const collectives::gpu::TreeChunking c = collectives::gpu::tree_cut(
            fabric, rings.front(), op.bytes, collectives::gpu::tree_channels(fabric, rings.front()).size(),
            collectives::gpu::step_bytes(protocol, w.hardware.forward_chunk_bytes), protocol);
        const double wire = collectives::gpu::wire_factor(protocol);
        const collectives::gpu::TreeLimits t = collectives::gpu::tree_limits(
            fabric, rings.front(), protocol, static_cast<double>(c.chunk) * wire, w.hardware.forward_chunk_bytes);
        f.additive = true;
        f.latency_s = t.latency_s + t.path_forward_s;
        f.bandwidth_s = static_cast<double>(c.per_channel - c.chunk) * wire * t.seconds_per_byte;
      } else if (algorithm == collectives::gpu::Algorithm::NvlsTree) {
        // NCCL's NVLS tree: a pipeline of loops, each a piece per head on every
        // channel; the first loop's way in and out of the switches and up and
        // down the trees, then the other loops through the busiest link.
        const collectives::gpu::NvlsTreeCut c = collectives::gpu::nvls_tree_cut(fabric, rings.front(), op.bytes);
        const collectives::gpu::NvlsTreeLimits t =
            collectives::gpu::nvls_tree_limits(fabric, rings.front(), static_cast<double>(c.piece));
        const double moved = static_cast<double>(c.piece * c.loops * c.channels * c.heads);  // V, evened out
        f.additive = true;
        f.latency_s = t.latency_s + t.path_forward_s;
        f.bandwidth_s = moved * t.seconds_per_byte * static_cast<double>(c.loops - 1) / static_cast<double>(c.loops);
      } else if (algorithm == collectives::gpu::Algorithm::Direct) {
        const collectives::gpu::RingLimits lim = collectives::gpu::ring_limits(fabric, rings, protocol);
        f.latency_s = lim.step_latency_s;
        f.bandwidth_s = (n - 1) * v / lim.bandwidth_bytes_per_s;
      } else {
        ring_phase(f);  // a reduce-scatter, then an all-gather
        f.latency_s *= 2;
        f.bandwidth_s *= 2;
      }
      break;
    }
    case OpKind::AllToAll: {
      // Each GPU sends n-1 pieces of V/n^2 through its ports: the ones to its
      // own node over NVLink, the others over its NIC; the busier port bounds it,
      // unless its leaf's (or pod's) cables up carry more: every GPU of the op
      // there sends as many pieces out of it as the first GPU does (an
      // oversubscribed fat tree).
      const auto& ring = rings.front();
      const double piece = v / (n * n);
      double nvlink_s = 0, nic_s = 0, lat = 0, leaving_leaf = 0, leaving_pod = 0;
      for (topology::ChipId dst : ring) {
        if (dst == ring.front()) continue;
        const auto route = fabric.route(ring.front(), dst);
        const auto& first = fabric.link(route.front());
        const double t = piece / static_cast<double>(first.spec.bandwidth_bytes_per_s);
        if (first.kind == topology::FabricLinkKind::NvlinkUp)
          nvlink_s += t;
        else
          nic_s += t;
        if (route.size() >= 4) ++leaving_leaf;
        if (route.size() >= 6) ++leaving_pod;
        double route_lat = 0;
        for (auto l : route) route_lat += fabric.link(l).spec.latency.seconds();
        lat = std::max(lat, route_lat);
      }
      // The op's GPUs (of every group) on that leaf and in that pod.
      const int leaf = fabric.leaf_of(ring.front()), pod = fabric.pod_of_leaf(leaf);
      double on_leaf = 0, in_pod = 0;
      for (const auto& group : rings)
        for (topology::ChipId c : group) {
          on_leaf += fabric.leaf_of(c) == leaf;
          in_pod += fabric.pod_of_leaf(fabric.leaf_of(c)) == pod;
        }
      const double cable = static_cast<double>(fabric.cable_spec().bandwidth_bytes_per_s);
      const double leaf_s = on_leaf * leaving_leaf * piece / (fabric.spines() * fabric.spine_cables() * cable);
      const double pod_s = in_pod * leaving_pod * piece / (fabric.spines() * fabric.core_cables() * cable);
      f.latency_s = lat;
      f.bandwidth_s = std::max({nvlink_s, nic_s, leaf_s, pod_s});
      break;
    }
    default:
      break;
  }
  return f;
}

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

namespace {

GpuChoiceKey choice_key(const workloads::Op& op) {
  return {static_cast<int>(op.kind), op.hw_axes, op.bytes, op.algorithm, op.protocol,
          op.kind == OpKind::Send ? op.src : 0, op.kind == OpKind::Send ? op.dst : 0};
}

}  // namespace

GpuChoice gpu_algorithm(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                        const topology::Fabric& fabric) {
  using collectives::gpu::Algorithm;
  using collectives::gpu::Protocol;
  const std::vector<Algorithm> options = collectives::gpu::candidates(op.kind, torus, op.hw_axes, fabric);
  std::optional<Protocol> asked;
  if (!op.protocol.empty()) {
    asked = collectives::gpu::parse_protocol(op.protocol);
    if (!asked)
      throw InputError(w.file, op.pointer + "/protocol",
                       fmt::format("unknown protocol '{}' (known: simple, ll, ll128)", op.protocol));
  }
  const auto rings = collectives::gpu::rings(torus, op.hw_axes);
  const bool grouped = !rings.empty() && rings.front().size() > 1;
  // NCCL's model of algorithm a with protocol p, given the ring's bus bandwidth
  // on this fabric (meshsim's closed form; NCCL's is its channels times their
  // speed): for all-reduces, all-gathers and reduce-scatters.
  const bool modelled = grouped && (op.kind == OpKind::AllReduce || op.kind == OpKind::AllGather ||
                                    op.kind == OpKind::ReduceScatter);
  NcclModelInput in;
  if (modelled) {
    const double n = static_cast<double>(rings.front().size());
    in.ranks = static_cast<int>(rings.front().size());
    in.nodes = static_cast<int>(collectives::gpu::node_count(fabric, rings.front()));
    in.all_reduce = op.kind == OpKind::AllReduce;
    const double bus_share = (in.all_reduce ? 2 : 1) * (n - 1) / n;
    in.bus_bytes_per_s =
        bus_share * static_cast<double>(op.bytes) / gpu_closed_form(op, w, torus, fabric, Algorithm::Ring).bandwidth_s;
    in.ll_max_bytes_per_s = workloads::nccl_ll_max_bytes_per_s(w.hardware, in.nodes);
    if (std::find(options.begin(), options.end(), Algorithm::NvlsTree) != options.end())
      in.nvls_tree_bus_bytes_per_s =
          nccl_nvls_tree_bus_bytes_per_s(w.hardware, in.ranks / std::max(in.nodes, 1), in.nodes);
  }
  const std::vector<Protocol> protocols =
      asked ? std::vector<Protocol>{*asked} : std::vector<Protocol>{Protocol::Simple, Protocol::LL, Protocol::LL128};
  // The protocol for algorithm a: the one asked for, else the fastest by NCCL's
  // model where a runs more than Simple.
  const auto choose = [&](Algorithm a) -> GpuChoice {
    Protocol p = asked.value_or(Protocol::Simple);
    if (!collectives::gpu::supports(a, p))
      throw InputError(w.file, op.pointer + "/protocol",
                       fmt::format("protocol '{}' does not apply to the {} algorithm (NCCL runs the ring and the "
                                   "tree with simple, ll and ll128, the others with simple)",
                                   op.protocol, collectives::gpu::algorithm_name(a)));
    if (!asked && modelled && (a == Algorithm::Ring || a == Algorithm::Tree))
      for (Protocol q : protocols)
        if (nccl_model_s(a, q, in, op.bytes) < nccl_model_s(a, p, in, op.bytes)) p = q;
    return {a, gpu_closed_form(op, w, torus, fabric, a, p), p};
  };
  if (!op.algorithm.empty()) {
    for (Algorithm a : options)
      if (op.algorithm == collectives::gpu::algorithm_name(a)) return choose(a);
    std::string known;
    for (Algorithm a : options) known += fmt::format("{}{}", known.empty() ? "" : ", ", collectives::gpu::algorithm_name(a));
    throw InputError(w.file, op.pointer + "/algorithm",
                     fmt::format("algorithm '{}' does not apply to this {} (here: {})", op.algorithm, kind_name(op.kind),
                                 known));
  }
  // An all-reduce runs as NCCL would run it: the ring, the tree (inside one
  // node a chain) or, where the switches have NVLink SHARP, NVLS in one NVLink
  // domain and the NVLS tree across nodes, each with the
  // protocols it runs, whichever NCCL's own cost model says is fastest for this
  // size (in that order on a tie: the ring with Simple first). meshsim's own
  // direct and hierarchical algorithms run only when named.
  if (op.kind == OpKind::AllReduce && grouped) {
    std::vector<Algorithm> nccl{Algorithm::Ring, Algorithm::Tree};
    if (std::find(options.begin(), options.end(), Algorithm::Nvls) != options.end())
      nccl.push_back(Algorithm::Nvls);
    if (in.nvls_tree_bus_bytes_per_s > 0) nccl.push_back(Algorithm::NvlsTree);
    std::optional<std::pair<Algorithm, Protocol>> best;
    double best_s = 0;
    for (Algorithm a : nccl)
      for (Protocol p : protocols) {
        if (!collectives::gpu::supports(a, p)) continue;
        if (const double t = nccl_model_s(a, p, in, op.bytes); !best || t < best_s) best = {a, p}, best_s = t;
      }
    MESHSIM_ASSERT(best.has_value(), "the ring runs every protocol");
    return {best->first, gpu_closed_form(op, w, torus, fabric, best->first, best->second), best->second};
  }
  // Otherwise (an all-gather or reduce-scatter: the ring; an all-to-all: direct;
  // an all-reduce of single GPUs, which moves nothing) the algorithm whose closed
  // form is fastest for this size, among those that run the protocol asked for,
  // the tree left out (inside one node a chain, never faster than the ring: no
  // rounding may choose it over an equal ring); then its protocol.
  const Protocol base = asked.value_or(Protocol::Simple);
  std::optional<GpuChoice> best;
  for (Algorithm a : options) {
    if (a == Algorithm::Tree || !collectives::gpu::supports(a, base)) continue;
    const collectives::ClosedForm f = gpu_closed_form(op, w, torus, fabric, a, base);
    if (!best || f.time_s() < best->closed.time_s()) best = GpuChoice{a, f, base};
  }
  if (!best) return choose(options.front());  // the protocol asked for runs on none: say so
  return asked ? *best : choose(best->algorithm);
}

collectives::Schedule torus_schedule(const workloads::Op& op) {
  if (op.algorithm.empty()) return collectives::Schedule::Balanced;
  const std::optional<collectives::Schedule> s = collectives::parse_schedule(op.algorithm);
  MESHSIM_ASSERT(s.has_value(), "a torus schedule the parser let through");
  return *s;
}

collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                    const topology::Torus& torus) {
  if (w.hardware.gpu)
    return communication_closed_form(op, w, torus, w.make_fabric());
  return torus_closed_form(op, w, torus);
}

collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                                  const topology::Torus& torus, const topology::Fabric& fabric) {
  return op.kind == OpKind::Send ? gpu_closed_form(op, w, torus, fabric, collectives::gpu::Algorithm::Direct)
                                 : gpu_algorithm(op, w, torus, fabric).closed;
}

namespace {
// The closed form of a schedule from its load: the busiest link's bytes over
// its bandwidth, and its longest chain of hops at the ICI hop latency.
collectives::ClosedForm load_closed_form(const collectives::GroupLoad& load, const workloads::Workload& w,
                                         const topology::Torus& torus) {
  collectives::ClosedForm f;
  if (load.busiest_link != topology::kNoLink)
    f.bandwidth_s = static_cast<double>(load.busiest_bytes) /
                    static_cast<double>(torus.spec(load.busiest_link).bandwidth_bytes_per_s);
  f.latency_s = static_cast<double>(load.chain_hops) * w.hardware.ici.latency.seconds();
  return f;
}
}  // namespace

collectives::ClosedForm torus_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                          const topology::Torus& torus) {
  // No cheat-sheet formula covers any groups of chips, nor many sends sharing
  // links (a permute, a stage's hand-off): their schedule's own load.
  if (op.groups)
    return load_closed_form(collectives::group_load(torus, op.kind, *op.groups, op.bytes), w, torus);
  if (op.kind == OpKind::Send && op.pairs.size() > 1)
    return load_closed_form(collectives::send_load(torus, op.pairs, op.bytes), w, torus);
  std::vector<int> sizes;
  collectives::ClosedFormInput in;
  for (int a : op.hw_axes) {
    if (torus.switched(a))
      in.slices = torus.axis(a).size;  // multislice: the DCN part
    else
      sizes.push_back(torus.axis(a).size);
  }
  in.kind = op.kind;
  in.bytes = op.bytes;
  in.link_bandwidth_one_way = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  in.hop_latency = w.hardware.ici.latency;
  in.axis_sizes = sizes;
  in.dcn_bandwidth_one_way = static_cast<double>(w.hardware.dcn.bandwidth_bytes_per_s);
  in.dcn_hop_latency = w.hardware.dcn.latency;
  if (op.kind == OpKind::Send) {
    in.send_hops = torus.hop_distance(op.src, op.dst);
    in.send_routes = collectives::send_paths(torus, op.src, op.dst);
    const int dcn = torus.dcn_axis();
    if (dcn >= 0 && torus.coord(op.src, dcn) != torus.coord(op.dst, dcn)) {
      in.slices = 2;  // between slices: every route crosses the DCN once
      in.send_latency = torus.route_latency(op.src, op.dst);
    }
  }
  return collectives::cheat_sheet(in);
}

std::vector<std::uint8_t> op_classes(const workloads::Workload& w, const topology::Torus& torus, GpuChoices* gpu) {
  if (!w.hardware.gpu) return {};
  std::optional<GpuChoices> own;
  GpuChoices& choices = *choices_for(gpu, own, w, torus);
  std::vector<std::uint8_t> out(w.ops.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const workloads::Op& op = w.ops[i];
    if (!is_collective(op.kind) || op.kind == OpKind::Send) continue;
    out[i] = static_cast<std::uint8_t>(choices(op).protocol);
    any = any || out[i] != 0;
  }
  if (!any) out.clear();
  return out;
}

GpuChoices::GpuChoices(const workloads::Workload& w, const topology::Torus& torus)
    : w_(w), torus_(torus), fabric_(w.make_fabric()) {}

GpuChoices* choices_for(GpuChoices* given, std::optional<GpuChoices>& own, const workloads::Workload& w,
                        const topology::Torus& torus) {
  if (given || !w.hardware.gpu) return given;
  return &own.emplace(w, torus);
}

const GpuChoice& GpuChoices::operator()(const workloads::Op& op) {
  Key key = choice_key(op);
  const auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  GpuChoice c = op.kind == OpKind::Send ? GpuChoice{collectives::gpu::Algorithm::Direct,
                                                    communication_closed_form(op, w_, torus_, fabric_)}
                                        : gpu_algorithm(op, w_, torus_, fabric_);
  return memo_.emplace(std::move(key), c).first->second;
}

workloads::FabricLevel comm_level(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus) {
  using workloads::FabricLevel;
  if (w.hardware.gpu) {
    const auto per_node = static_cast<topology::ChipId>(w.hardware.gpus_per_node);
    if (op.kind == OpKind::Send) {
      for (const auto& [src, dst] : workloads::send_pairs(op))
        if (src / per_node != dst / per_node) return FabricLevel::Nic;
      return FabricLevel::Nvlink;
    }
    for (int a : op.hw_axes)
      if (a > 0 && torus.axis(a).size > 1) return FabricLevel::Nic;
    return FabricLevel::Nvlink;
  }
  if (op.kind == OpKind::Send) {
    for (const auto& [src, dst] : workloads::send_pairs(op))
      if (torus.between_slices(src, dst)) return FabricLevel::Dcn;
    return FabricLevel::Ici;
  }
  for (int a : op.hw_axes)
    if (torus.switched(a)) return FabricLevel::Dcn;
  if (op.groups)
    for (const std::vector<topology::ChipId>& g : *op.groups)
      for (topology::ChipId c : g)
        if (torus.between_slices(g.front(), c)) return FabricLevel::Dcn;
  return FabricLevel::Ici;
}

Tick comm_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus) {
  if (is_local(op.kind)) return kZeroTick;
  return w.hardware.fixed_cost_of(comm_level(op, w, torus), op.kind);
}

Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                   GpuChoices* gpu) {
  if (!w.hardware.gpu || !is_collective(op.kind) || op.kind == OpKind::Send) return comm_fixed_cost(op, w, torus);
  MESHSIM_ASSERT(gpu != nullptr, "a GPU collective's fixed cost without the workload's choices");
  return op_fixed_cost(op, w, torus, (*gpu)(op));
}

Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::Torus& torus,
                   const GpuChoice& choice) {
  using collectives::gpu::Algorithm;
  Tick nccl = nccl_base_latency(choice.algorithm, choice.protocol);
  if (choice.algorithm == Algorithm::Nvls) nccl = nvls_fixed_cost(w.hardware);
  if (choice.algorithm == Algorithm::NvlsTree) nccl = nvls_tree_fixed_cost(w.hardware, op_nodes(op, torus));
  return comm_fixed_cost(op, w, torus) + nccl;
}

}  // namespace meshsim::driver
