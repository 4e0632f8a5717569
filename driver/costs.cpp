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
  const workloads::MatmulOp& mm = op.matmul();
  return 2.0 * static_cast<double>(mm.batch) * static_cast<double>(mm.m) * static_cast<double>(mm.k) *
         static_cast<double>(mm.n);
}

kernels::Roofline matmul_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  const workloads::MatmulOp& mm = op.matmul();
  MESHSIM_ASSERT(!op.inputs.empty() || !mm.dtype.empty(), "a matmul without a dtype");
  const std::string& dtype = op.inputs.empty() ? mm.dtype : op.inputs[0].dtype;
  const std::uint64_t element_bytes =
      op.inputs.empty() ? workloads::element_size(mm.dtype) : op.inputs[0].element_bytes;
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
  } else if (dtype == "fp32" && mm.bf16_passes > 0) {
    peak = hw.chip.bf16_flops_per_s / mm.bf16_passes;
    key = "bf16_flops_per_s";
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
  kernels::RooflineInput in = kernels::matmul_traffic(mm.m, mm.k, mm.n, element_bytes);
  const auto batch = static_cast<double>(mm.batch);
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
      const double t =
          kernels::calibrated_matmul_time(
              {fit.launch_s, fit.flops_per_s, fit.wave_flops_per_s, fit.hbm_bytes_per_s, fit.sms}, mm.m, mm.k, mm.n,
              element_bytes) *
          batch;  // a batch of products: one launch each, an upper bound of one batched kernel
      if (!(t < kMaxTick.seconds()))
        throw InputError(file, op.pointer, fmt::format("the calibrated local matmul would take {:.3g} s, past the "
                                                       "simulator's limit of {:.3g} s", t, kMaxTick.seconds()));
      r.compute_time = tick_from_seconds(t);
    }
  return r;
}

kernels::Roofline elementwise_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  const workloads::ElementwiseOp& e = op.elementwise();
  if (e.duration > kZeroTick) return {e.duration, kZeroTick};  // measured: its time as is
  if (hw.chip.hbm_bandwidth_bytes_per_s <= 0)
    throw InputError(file, op.pointer, fmt::format("{} has no HBM bandwidth; give \"hardware\": {{\"hbm_bandwidth_bytes_per_s\": ...}}", hw.preset));
  const double t = static_cast<double>(e.hbm_bytes) / hw.chip.hbm_bandwidth_bytes_per_s;
  if (!(t < kMaxTick.seconds()))
    throw InputError(file, op.pointer, fmt::format("the elementwise kernel would take {:.3g} s, past the simulator's "
                                                   "limit of {:.3g} s (2^62 ps)", t, kMaxTick.seconds()));
  kernels::RooflineInput in;
  in.hbm_bytes = static_cast<double>(e.hbm_bytes);
  in.hbm_bandwidth_bytes_per_s = hw.chip.hbm_bandwidth_bytes_per_s;
  in.peak_flops_per_s = 1;  // no FLOPs: only the memory term counts
  if (e.flops > 0) {
    in.flops = static_cast<double>(e.flops);
    in.peak_flops_per_s = hw.chip.bf16_flops_per_s;
    if (!(in.flops / in.peak_flops_per_s < kMaxTick.seconds()))
      throw InputError(file, op.pointer,
                       fmt::format("the kernel's {} operations would take past the simulator's limit "
                                   "of {:.3g} s (2^62 ps)",
                                   e.flops, kMaxTick.seconds()));
  }
  return kernels::roofline(in);
}

kernels::Roofline local_cost(const workloads::Op& op, const workloads::Hardware& hw, const std::string& file) {
  return op.kind == OpKind::Elementwise ? elementwise_cost(op, hw, file) : matmul_cost(op, hw, file);
}

std::uint64_t op_nodes(const workloads::Op& op, const topology::Torus& torus) {
  std::uint64_t nodes = 1;
  for (int a : op.comm_axes())
    if (!torus.axis(a).in_node) nodes *= static_cast<std::uint64_t>(torus.axis(a).size);
  return nodes;
}

namespace {

// A send's GPU closed form: each link of the route forwards once a forwarding chunk (or the
// whole message, if smaller) has crossed the one before: the route's latencies
// and that chunk over every link but the narrowest, then the message through the
// narrowest. Exact for a route of equal links with nothing else on it.
collectives::ClosedForm gpu_send_form(const workloads::Op& op, const workloads::Workload& w,
                                      const topology::Fabric& fabric) {
  collectives::ClosedForm f;
  const workloads::SendOp& send = op.send();
  const double bytes = static_cast<double>(send.bytes);
  const double first = std::min(bytes, static_cast<double>(w.hardware.forward_chunk_bytes));
  double bw = 0, chunk_s = 0;
  for (topology::LinkId l : fabric.route(send.src, send.dst)) {
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

// An all-to-all's GPU closed form, of pieces of `piece` bytes (V/n^2, in the protocol's lines)
// within each of `rings` (the groups).
collectives::ClosedForm gpu_all_to_all_form(const topology::Fabric& fabric,
                                            const std::vector<std::vector<topology::ChipId>>& rings, double piece) {
  collectives::ClosedForm f;
  // Each GPU sends n-1 pieces of V/n^2 through its ports: the ones to its
  // own node over NVLink, the others over its NIC; the busier port bounds it,
  // unless its leaf's (or pod's) cables up carry more: every GPU of the op
  // there sends as many pieces out of it as the first GPU does (an
  // oversubscribed fat tree).
  const auto& ring = rings.front();
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
  return f;
}

}  // namespace

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
                                        collectives::gpu::Algorithm algorithm, collectives::gpu::Protocol protocol) {
  using collectives::gpu::Protocol;
  MESHSIM_ASSERT(collectives::gpu::supports(algorithm, protocol) || op.kind == OpKind::Send,
                 "a protocol the algorithm does not run");
  if (op.kind == OpKind::Send) return gpu_send_form(op, w, fabric);
  const workloads::CollectiveOp& co = op.collective();
  collectives::ClosedForm f;
  const auto rings = collectives::gpu::rings(torus, co.hw_axes);
  const double n = rings.empty() ? 1.0 : static_cast<double>(rings.front().size());
  if (n < 2) return f;
  // The bytes the links carry (the data in the protocol's lines).
  const double v = static_cast<double>(co.bytes) * collectives::gpu::wire_factor(protocol);
  // A ring's phase: N-1 consecutive steps' latency; bandwidth (N-1)/N V
  // over its narrowest link, or with C channels (N-1)/N V/C through the link the
  // channels cross most often.
  // Each step forwards what it received once a forwarding chunk of it (or all of
  // it, if smaller) has crossed each link of the step: a phase's latency counts
  // that chunk's serialisation at every link of its steps (ring_limits).
  const int channels = collectives::gpu::ring_channels(torus, co.hw_axes);
  const double forward = static_cast<double>(w.hardware.forward_chunk_bytes);
  const auto ring_phase = [&](collectives::ClosedForm& phase) {
    const double piece = v / n / channels;
    const collectives::gpu::RingLimits all = collectives::gpu::ring_limits(
        fabric, channels == 1 ? rings : collectives::gpu::channel_rings(torus, co.hw_axes), protocol, piece,
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
        const double g = n / m;  // the group's GPUs per node
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
            fabric, rings.front(), co.bytes, collectives::gpu::tree_channels(fabric, rings.front()).size(),
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
        const collectives::gpu::NvlsTreeCut c = collectives::gpu::nvls_tree_cut(fabric, rings.front(), co.bytes);
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
    case OpKind::AllToAll:
      f = gpu_all_to_all_form(fabric, rings, v / (n * n));
      break;
    default:
      break;
  }
  return f;
}

collectives::Schedule torus_schedule(const workloads::Op& op) {
  const std::string& algorithm = op.collective().algorithm;
  if (algorithm.empty()) return collectives::Schedule::Balanced;
  const std::optional<collectives::Schedule> s = collectives::parse_schedule(algorithm);
  MESHSIM_ASSERT(s.has_value(), "a torus schedule the parser let through");
  return *s;
}

collectives::ClosedForm communication_closed_form(const workloads::Op& op, const workloads::Workload& w,
                                                  const topology::System& system) {
  if (const topology::Fabric* fabric = system.fabric()) return communication_closed_form(op, w, system.grid(), *fabric);
  return torus_closed_form(op, w, system.grid());
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
  if (const auto* groups = op.explicit_groups())
    return load_closed_form(collectives::group_load(torus, op.kind, *groups, op.comm_bytes(), op.collective().factors),
                            w, torus);
  if (op.kind == OpKind::Send && op.send().pairs.size() > 1)
    return load_closed_form(collectives::send_load(torus, op.send().pairs, op.comm_bytes()), w, torus);
  std::vector<int> sizes;
  collectives::ClosedFormInput in;
  for (int a : op.comm_axes()) {
    if (torus.switched(a))
      in.slices = torus.axis(a).size;  // multislice: the DCN part
    else
      sizes.push_back(torus.axis(a).size);
  }
  in.kind = op.kind;
  in.bytes = op.comm_bytes();
  in.link_bandwidth_one_way = static_cast<double>(w.hardware.ici.bandwidth_bytes_per_s);
  in.hop_latency = w.hardware.ici.latency;
  in.axis_sizes = sizes;
  in.dcn_bandwidth_one_way = static_cast<double>(w.hardware.dcn.bandwidth_bytes_per_s);
  in.dcn_hop_latency = w.hardware.dcn.latency;
  if (op.kind == OpKind::Send) {
    const workloads::SendOp& send = op.send();
    in.send_hops = torus.hop_distance(send.src, send.dst);
    in.send_routes = collectives::send_paths(torus, send.src, send.dst);
    const int dcn = torus.dcn_axis();
    if (dcn >= 0 && torus.coord(send.src, dcn) != torus.coord(send.dst, dcn)) {
      in.slices = 2;  // between slices: every route crosses the DCN once
      in.send_latency = torus.route_latency(send.src, send.dst);
    }
  }
  return collectives::cheat_sheet(in);
}

workloads::FabricLevel comm_level(const workloads::Op& op, const topology::System& system) {
  using workloads::FabricLevel;
  const topology::Torus& torus = system.grid();
  if (const topology::Fabric* fabric = system.fabric()) {
    const auto per_node = static_cast<topology::ChipId>(fabric->gpus_per_node());
    if (op.kind == OpKind::Send) {
      for (const auto& [src, dst] : workloads::send_pairs(op))
        if (src / per_node != dst / per_node) return FabricLevel::Nic;
      return FabricLevel::Nvlink;
    }
    for (int a : op.collective().hw_axes)
      if (!torus.axis(a).in_node && torus.axis(a).size > 1) return FabricLevel::Nic;
    return FabricLevel::Nvlink;
  }
  if (op.kind == OpKind::Send) {
    for (const auto& [src, dst] : workloads::send_pairs(op))
      if (torus.between_slices(src, dst)) return FabricLevel::Dcn;
    return FabricLevel::Ici;
  }
  const workloads::CollectiveOp& co = op.collective();
  for (int a : co.hw_axes)
    if (torus.switched(a)) return FabricLevel::Dcn;
  if (co.groups)
    for (const std::vector<topology::ChipId>& g : *co.groups)
      for (topology::ChipId c : g)
        if (torus.between_slices(g.front(), c)) return FabricLevel::Dcn;
  return FabricLevel::Ici;
}

Tick comm_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::System& system) {
  if (is_local(op.kind)) return kZeroTick;
  return w.hardware.fixed_cost_of(comm_level(op, system), op.kind);
}

Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::System& system,
                   GpuChoices* gpu) {
  if (!system.switched() || !is_collective(op.kind) || op.kind == OpKind::Send) return comm_fixed_cost(op, w, system);
  MESHSIM_ASSERT(gpu != nullptr, "a GPU collective's fixed cost without the workload's choices");
  return op_fixed_cost(op, w, system, (*gpu)(op));
}

Tick op_fixed_cost(const workloads::Op& op, const workloads::Workload& w, const topology::System& system,
                   const GpuChoice& choice) {
  using collectives::gpu::Algorithm;
  Tick nccl = nccl_base_latency(choice.algorithm, choice.protocol);
  if (choice.algorithm == Algorithm::Nvls) nccl = nvls_fixed_cost(w.hardware);
  if (choice.algorithm == Algorithm::NvlsTree) nccl = nvls_tree_fixed_cost(w.hardware, op_nodes(op, system.grid()));
  return comm_fixed_cost(op, w, system) + nccl;
}

}  // namespace meshsim::driver
