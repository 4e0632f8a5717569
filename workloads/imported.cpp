#include "workloads/imported.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "base/error.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"
#include "workloads/spec.hpp"

namespace meshsim::workloads {

Workload empty_workload(const ImportSystem& s, bool gpu_ok, const std::string& who) {
  const std::string& hardware = s.hardware;
  const std::span<const int> shape = s.shape;
  const topology::Preset* tpu = topology::find_preset(hardware);
  const topology::GpuPreset* gpu = gpu_ok ? topology::find_gpu_preset(hardware) : nullptr;
  if (!tpu && !gpu)
    throw Error(gpu_ok ? fmt::format("--hardware: '{}' is not a preset (TPU: {}; GPU: {})", hardware,
                                     topology::preset_names(), topology::gpu_preset_names())
                       : fmt::format("--hardware: '{}' is not a TPU preset ({}); {} runs on TPU slices", hardware,
                                     topology::preset_names(), who));
  for (int size : shape)
    if (size < 1 || size > 65536) throw Error(fmt::format("--topology: sizes from 1 to 65536, got {}", size));
  // The system as the workload {"hardware", "topology", "mesh"} would give it:
  // errors name those pointers, in the file "--topology".
  Workload w;
  w.file = "--topology";
  const SourceRef root{w.file, ""};
  TopologySpec topo;
  topo.given = true;
  topo.where = root.child("topology");
  MeshSpec mesh;
  mesh.where = root.child("mesh");
  const auto axis = [&](std::string name, int size) {
    const SourceRef at = mesh.where.child(name);
    mesh.axes.push_back({std::move(name), size, at});
  };
  if (tpu) {
    if (shape.empty() || shape.size() > static_cast<std::size_t>(tpu->max_axes))
      throw Error(fmt::format("--topology: {} has 1 to {} axes", hardware, tpu->max_axes));
    static constexpr const char* kNames[] = {"X", "Y", "Z"};
    topo.shape.assign(shape.begin(), shape.end());
    topo.shape_at = topo.where.child("shape");
    if (!s.wraparound.empty()) {
      if (s.wraparound.size() != shape.size() ||
          std::any_of(s.wraparound.begin(), s.wraparound.end(), [](int v) { return v != 0 && v != 1; }))
        throw Error(fmt::format("--wraparound: one 0 or 1 per axis of the {}-axis topology, got {}",
                                shape.size(), fmt::join(s.wraparound, ",")));
      topo.wraparound.emplace();
      for (int v : s.wraparound) topo.wraparound->push_back(v == 1);
      topo.wraparound_at = topo.where.child("wraparound");
    }
    for (std::size_t i = 0; i < shape.size(); ++i) axis(kNames[i], shape[i]);
  } else {
    if (!s.wraparound.empty()) throw Error("--wraparound: only for a TPU slice (a GPU cluster is a fat tree)");
    if (shape.empty() || shape.size() > 3)
      throw Error(fmt::format("--topology: a GPU cluster is its number of nodes (e.g. 4) or a grid of nodes (8x8), "
                              "got {} numbers", shape.size()));
    axis("G", gpu->gpus_per_node);
    topo.nodes.assign(shape.begin(), shape.end());
    topo.node_grid = shape.size() > 1;
    topo.nodes_at = topo.where.child("nodes");
    if (shape.size() == 1)
      axis("N", shape[0]);
    else
      for (std::size_t i = 0; i < shape.size(); ++i) axis(fmt::format("N{}", i), shape[i]);
  }
  build_system(w, *preset_hardware(hardware), topo, mesh);
  return w;
}

std::optional<std::vector<int>> parse_shape_text(std::string_view text) {
  std::vector<int> sizes;
  std::size_t start = 0;
  while (true) {
    const std::size_t x = text.find('x', start);
    const std::string_view part = text.substr(start, x == std::string_view::npos ? std::string_view::npos : x - start);
    int v = 0;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size() || v < 1 || v > kMaxAxisSize)
      return std::nullopt;
    sizes.push_back(v);
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  if (sizes.size() > 3) return std::nullopt;
  return sizes;
}

void check_device_order(std::span<const int> devices, std::uint32_t chips) {
  if (devices.empty()) return;
  std::vector<int> sorted(devices.begin(), devices.end());
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (sorted.size() != chips || sorted[i] != static_cast<int>(i))
      throw Error(fmt::format("--devices: expected each of the {} chips once (the chip of device 0, 1, ...), got {} ids",
                              chips, devices.size()));
}

}  // namespace meshsim::workloads
