#pragma once
// What the importers of programs written elsewhere (XLA HLO dumps: hlo/;
// Chakra execution traces: chakra/) share: the system a program is imported
// onto, and the order of its devices on it.
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "workloads/workload.hpp"

namespace meshsim::workloads {

// The system an imported program runs on (--hardware, --topology, --wraparound).
struct ImportSystem {
  std::string hardware;         // a preset
  std::vector<int> shape;       // a TPU slice's shape; a GPU cluster's node count or node grid
  std::vector<int> wraparound;  // TPU: per axis 1 (a ring) or 0 (a line); empty: the preset's default for the shape
};

// A workload without ops on `s`: a TPU preset on a slice (mesh axes X, Y, Z
// over the hardware axes x, y, z) or, where `gpu_ok`, a GPU preset on shape[0]
// nodes (mesh axes G over a node's GPUs and N over the nodes) or on a grid of
// nodes, shape[0] x shape[1] ... (mesh axes G, N0, N1, ...). Error naming
// --hardware, --topology or --wraparound for an unknown preset or a shape it
// does not take (`who`: "HLO import" and such, for the message).
Workload empty_workload(const ImportSystem& s, bool gpu_ok, const std::string& who);

// A shape written as sizes joined by 'x' ("16", "8x16", "4x4x4"): 1 to 3 sizes,
// each 1 to kMaxAxisSize; null for anything else.
std::optional<std::vector<int>> parse_shape_text(std::string_view text);

// Checks a --devices list: every chip of `chips` once (the chip of device 0,
// 1, ...); empty is the identity. Error otherwise.
void check_device_order(std::span<const int> devices, std::uint32_t chips);

}  // namespace meshsim::workloads
