#pragma once
// Hardware presets: per-chip compute and memory, ICI link parameters and the
// wraparound rule of each TPU generation. Every value cites its public source in
// preset.cpp. Any value can be overridden by a workload ("hardware" section).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topology/torus.hpp"

namespace meshsim::topology {

struct ChipSpec {
  double bf16_flops_per_s = 0;           // dense bf16 FLOP/s per chip
  double int8_ops_per_s = 0;             // int8 OP/s per chip
  double fp8_flops_per_s = 0;            // fp8 FLOP/s per chip; 0: no published rate (give one to use fp8)
  double fp32_flops_per_s = 0;           // fp32 FLOP/s per chip; 0: no published rate (give one to use fp32)
  std::uint64_t hbm_bytes = 0;           // HBM capacity, bytes (1e9-based "GB")
  double hbm_bandwidth_bytes_per_s = 0;  // HBM bandwidth, bytes/s
};

// Which axes of a slice have a wraparound link.
enum class WrapRule {
  AxisOf16,    // v5e, v6e: an axis wraps only when it has 16 chips
  WholeCubes,  // v4, v5p: every axis wraps when the slice is whole 4x4x4 cubes, none otherwise
};

struct Preset {
  std::string_view name;
  std::string_view description;
  ChipSpec chip;
  LinkSpec ici;  // one-way bandwidth per link and per-hop latency
  // Multislice: each chip's link out to the data-center network and in from it
  // (one-way bandwidth each, its share of its host's NICs; latency per link).
  LinkSpec dcn;
  // Forwarding granularity: a chip may forward (or reduce and forward) data it is
  // receiving once this many bytes have arrived. A modelling parameter of the
  // pipelined (cut-through) forwarding, not a datasheet value; see docs/MODEL.md.
  std::uint64_t forward_chunk_bytes = 0;
  WrapRule wrap_rule = WrapRule::AxisOf16;
  int max_axes = 3;  // physical dimensionality of the interconnect
};

std::span<const Preset> presets();
const Preset* find_preset(std::string_view name);
std::string preset_names();  // "tpu-v4, tpu-v5e, ..." for error messages

// The wraparound each axis of `shape` gets under `rule`.
std::vector<bool> default_wraparound(WrapRule rule, std::span<const int> shape);

}  // namespace meshsim::topology
