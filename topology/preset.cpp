#include "topology/preset.hpp"

#include <algorithm>
#include <array>

namespace meshsim::topology {

namespace {

// Source for every value below unless stated otherwise: "How To Scale Your Model"
// (Google DeepMind, jax-ml.github.io/scaling-book), chapter "How to Think About
// TPUs", the per-chip specification table (FLOP/s, HBM, ICI) and the text on ICI:
//  - ICI bandwidth in that table is given one-way and bidirectional per link; we
//    store the ONE-WAY value (bytes/s, 1e9-based). W in the cheat sheet is 2x this.
//  - "each hop over an ICI link has some intrinsic overhead regardless of the data
//    volume. This is typically around 1us" -> 1 us per hop for every generation.
//  - Wraparound: v5e/v6e slices wrap only on axes of size 16; v4/v5p slices made of
//    whole 4x4x4 cubes wrap on every axis (optical circuit switches), smaller ones not.
constexpr Tick kHopLatency = Tick::from_ps(1'000'000);  // 1 us
// Forwarding granularity (modelling choice, docs/MODEL.md): small against the
// latency-bandwidth product (45 kB on v5e) so forwarding is pipelined, as the
// cheat sheet's max(latency, bandwidth) form assumes.
constexpr std::uint64_t kForwardChunk = 4096;

// Data-center network (multislice), same chapter: DCN bandwidth per chip
// (egress; the NICs are full duplex, so ingress the same) is 3.125e9 B/s on v5e,
// 6.25e9 on v5p, 1.25e10 on v6e; for v4 the book gives only the generic "around
// 6.25e9 per TPU". Google Cloud's docs agree per host (v5e: 2 x 100 Gb/s NICs
// per 8-chip host; v5p: 4 chips and 200 Gb/s per host). Google publishes no DCN
// latency: we take the network step of NCCL's cost model (src/graph/tuning.cc,
// Ring/Simple: 9.6 us per step over the network), half on each of the two links
// a DCN step crosses, as the GPU presets do (gpu_preset.cpp).
constexpr Tick kDcnLatency = Tick::from_ps(4'800'000);
constexpr LinkSpec dcn(std::uint64_t bytes_per_s) { return LinkSpec{.bandwidth_bytes_per_s = bytes_per_s, .latency = kDcnLatency}; }

const std::array<Preset, 4> kPresets = {{
    {"tpu-v4", "TPU v4 (v4p): 3D torus, 2.75e14 bf16 FLOP/s, 45 GB/s one-way ICI per link",
     ChipSpec{.bf16_flops_per_s = 2.75e14, .int8_ops_per_s = 2.75e14, .hbm_bytes = 32'000'000'000,
              .hbm_bandwidth_bytes_per_s = 1.2e12},
     LinkSpec{.bandwidth_bytes_per_s = 45'000'000'000, .latency = kHopLatency}, dcn(6'250'000'000), kForwardChunk,
     WrapRule::WholeCubes, 3},
    {"tpu-v5e", "TPU v5e: 2D torus, 1.97e14 bf16 FLOP/s, 45 GB/s one-way ICI per link",
     ChipSpec{.bf16_flops_per_s = 1.97e14, .int8_ops_per_s = 3.94e14, .hbm_bytes = 16'000'000'000,
              .hbm_bandwidth_bytes_per_s = 8.2e11},
     LinkSpec{.bandwidth_bytes_per_s = 45'000'000'000, .latency = kHopLatency}, dcn(3'125'000'000), kForwardChunk,
     WrapRule::AxisOf16, 2},
    {"tpu-v5p", "TPU v5p: 3D torus, 4.59e14 bf16 FLOP/s, 90 GB/s one-way ICI per link",
     ChipSpec{.bf16_flops_per_s = 4.59e14, .int8_ops_per_s = 9.18e14, .hbm_bytes = 96'000'000'000,
              .hbm_bandwidth_bytes_per_s = 2.8e12},
     LinkSpec{.bandwidth_bytes_per_s = 90'000'000'000, .latency = kHopLatency}, dcn(6'250'000'000), kForwardChunk,
     WrapRule::WholeCubes, 3},
    {"tpu-v6e", "TPU v6e (Trillium): 2D torus, 9.2e14 bf16 FLOP/s, 90 GB/s one-way ICI per link",
     ChipSpec{.bf16_flops_per_s = 9.2e14, .int8_ops_per_s = 1.84e15, .hbm_bytes = 32'000'000'000,
              .hbm_bandwidth_bytes_per_s = 1.6e12},
     LinkSpec{.bandwidth_bytes_per_s = 90'000'000'000, .latency = kHopLatency}, dcn(12'500'000'000), kForwardChunk,
     WrapRule::AxisOf16, 2},
}};

}  // namespace

std::span<const Preset> presets() { return kPresets; }

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : kPresets)
    if (p.name == name) return &p;
  return nullptr;
}

std::string preset_names() {
  std::string s;
  for (const Preset& p : kPresets) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

std::vector<bool> default_wraparound(WrapRule rule, std::span<const int> shape) {
  std::vector<bool> wrap(shape.size(), false);
  switch (rule) {
    case WrapRule::AxisOf16:
      for (std::size_t a = 0; a < shape.size(); ++a) wrap[a] = shape[a] == 16;
      break;
    case WrapRule::WholeCubes: {
      const bool cubes = shape.size() == 3 && std::all_of(shape.begin(), shape.end(), [](int s) { return s % 4 == 0; });
      std::fill(wrap.begin(), wrap.end(), cubes);
      break;
    }
  }
  return wrap;
}

}  // namespace meshsim::topology
