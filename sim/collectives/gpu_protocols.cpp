// NCCL's protocols Simple, LL and LL128: their wire bytes, steps, per-hop
// latencies and forwarding chunks on each kind of link.
#include "sim/collectives/gpu_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/error.hpp"

namespace meshsim::collectives::gpu {

using detail::ceil_div;
using topology::Fabric;
using topology::LinkId;

namespace {

// LL: a 16-byte line carries 8 data bytes; LL128: a 128-byte line carries 120
// (NCCL_LL128_DATAELEMS 15 of NCCL_LL128_LINEELEMS 16 words).
constexpr std::uint64_t kLlLine = 16, kLlData = 8, kLl128Line = 128, kLl128Data = 120;
// A step's lines (DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE over NCCL_STEPS).
constexpr std::uint64_t kLlStepWire = 8 * 512 * kLlLine;     // 65,536
constexpr std::uint64_t kLl128StepWire = 120 * 640 * 8;      // 614,400

// NCCL's per-step hardware latency of the ring (src/graph/tuning.cc, hwLat, the
// table of NCCL 2.18 to today (2.29), whose Simple values the GPU presets' links
// carry: NVLink 3.4 us, the network 14 us; NCCL 2.7 to 2.17 had NVLink LL 0.47
// and network Simple 9.6), in tenths of a microsecond: LL, LL128, Simple.
// The ratio to Simple scales a link's latency (meshsim's links carry a step's
// latency, half on each of its two links).
struct HwLat {
  std::int64_t ll, ll128, simple;
};
constexpr HwLat kNvlinkHwLat{6, 19, 34};   // 0.6, 1.9, 3.4 us
constexpr HwLat kNetHwLat{27, 40, 140};    // 2.7, 4.0, 14 us

bool is_nvlink(topology::FabricLinkKind k) {
  return k == topology::FabricLinkKind::NvlinkUp || k == topology::FabricLinkKind::NvlinkDown;
}

}  // namespace

// Every transfer built from task `first` on carries protocol p's lines around its data.
void to_wire(ProgramBuilder& b, TaskId first, Protocol p) {
  if (p != Protocol::Simple) b.map_transfer_bytes(first, [p](std::uint64_t x) { return wire_bytes(p, x); });
}

std::uint64_t wire_bytes(Protocol p, std::uint64_t payload) {
  switch (p) {
    case Protocol::Simple:
      return payload;
    case Protocol::LL:
      return ceil_div(payload, kLlData) * kLlLine;
    case Protocol::LL128:
      return ceil_div(payload, kLl128Data) * kLl128Line;
  }
  return payload;
}

double wire_factor(Protocol p) {
  return p == Protocol::LL      ? static_cast<double>(kLlLine) / kLlData
         : p == Protocol::LL128 ? static_cast<double>(kLl128Line) / kLl128Data
                                : 1.0;
}

std::uint64_t step_wire_bytes(Protocol p, std::uint64_t simple_step) {
  return p == Protocol::LL ? kLlStepWire : p == Protocol::LL128 ? kLl128StepWire : simple_step;
}

std::uint64_t step_bytes(Protocol p, std::uint64_t simple_step) {
  switch (p) {
    case Protocol::Simple:
      return simple_step;
    case Protocol::LL:
      return kLlStepWire / kLlLine * kLlData;
    case Protocol::LL128:
      return kLl128StepWire / kLl128Line * kLl128Data;
  }
  return simple_step;
}

sim::ResourceVariant protocol_variant(Protocol p, topology::FabricLinkKind kind, Tick latency) {
  MESHSIM_ASSERT(p != Protocol::Simple, "Simple is the link itself");
  const HwLat& h = is_nvlink(kind) ? kNvlinkHwLat : kNetHwLat;
  const std::int64_t part = p == Protocol::LL ? h.ll : h.ll128;
  const std::uint64_t line = p == Protocol::LL ? kLlLine : kLl128Line;
  return {Tick::from_ps(latency.ps() / h.simple * part + latency.ps() % h.simple * part / h.simple),
          is_nvlink(kind) ? line : step_wire_bytes(p, 0)};
}

Tick link_latency(const Fabric& f, LinkId l, Protocol p) {
  const topology::FabricLink& link = f.link(l);
  return p == Protocol::Simple ? link.spec.latency : protocol_variant(p, link.kind, link.spec.latency).latency;
}

std::uint64_t link_bandwidth(const Fabric& f, LinkId l, Protocol p) {
  const topology::FabricLink& link = f.link(l);
  const std::uint64_t own = link.spec.bandwidth_bytes_per_s;
  if (p != Protocol::LL || link.kind != topology::FabricLinkKind::NvlinkUp || f.ll_bytes_per_s() <= 0) return own;
  // The GPU's LL data rate, in lines on the wire (16 bytes per 8 of data).
  const double wire = f.ll_bytes_per_s() * static_cast<double>(kLlLine) / static_cast<double>(kLlData);
  return wire < static_cast<double>(own) ? static_cast<std::uint64_t>(std::llround(wire)) : own;
}

std::uint64_t link_forward_chunk(const Fabric& f, LinkId l, Protocol p, std::uint64_t simple_chunk) {
  const topology::FabricLink& link = f.link(l);
  return p == Protocol::Simple ? simple_chunk : protocol_variant(p, link.kind, link.spec.latency).forward_chunk_bytes;
}

}  // namespace meshsim::collectives::gpu
