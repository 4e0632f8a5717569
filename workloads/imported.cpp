#include "workloads/imported.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "topology/gpu_preset.hpp"
#include "topology/preset.hpp"

namespace meshsim::workloads {

Workload empty_workload(const ImportSystem& s, bool gpu_ok, const std::string& who) {
  const std::string& hardware = s.hardware;
  const std::span<const int> shape = s.shape;
  nlohmann::ordered_json doc;
  doc["hardware"] = hardware;
  const topology::Preset* tpu = topology::find_preset(hardware);
  const topology::GpuPreset* gpu = gpu_ok ? topology::find_gpu_preset(hardware) : nullptr;
  if (!tpu && !gpu)
    throw Error(gpu_ok ? fmt::format("--hardware: '{}' is not a preset (TPU: {}; GPU: {})", hardware,
                                     topology::preset_names(), topology::gpu_preset_names())
                       : fmt::format("--hardware: '{}' is not a TPU preset ({}); {} runs on TPU slices", hardware,
                                     topology::preset_names(), who));
  for (int size : shape)
    if (size < 1 || size > 65536) throw Error(fmt::format("--topology: sizes from 1 to 65536, got {}", size));
  if (tpu) {
    if (shape.empty() || shape.size() > static_cast<std::size_t>(tpu->max_axes))
      throw Error(fmt::format("--topology: {} has 1 to {} axes", hardware, tpu->max_axes));
    static constexpr const char* kNames[] = {"X", "Y", "Z"};
    doc["topology"]["shape"] = std::vector<int>(shape.begin(), shape.end());
    if (!s.wraparound.empty()) {
      if (s.wraparound.size() != shape.size() ||
          std::any_of(s.wraparound.begin(), s.wraparound.end(), [](int w) { return w != 0 && w != 1; }))
        throw Error(fmt::format("--wraparound: one 0 or 1 per axis of the {}-axis topology, got {}",
                                shape.size(), fmt::join(s.wraparound, ",")));
      std::vector<bool> wrap;
      for (int w : s.wraparound) wrap.push_back(w == 1);
      doc["topology"]["wraparound"] = wrap;
    }
    for (std::size_t i = 0; i < shape.size(); ++i) doc["mesh"][kNames[i]] = shape[i];
  } else {
    if (!s.wraparound.empty()) throw Error("--wraparound: only for a TPU slice (a GPU cluster is a fat tree)");
    if (shape.empty() || shape.size() > 3)
      throw Error(fmt::format("--topology: a GPU cluster is its number of nodes (e.g. 4) or a grid of nodes (8x8), "
                              "got {} numbers", shape.size()));
    doc["mesh"]["G"] = gpu->gpus_per_node;
    if (shape.size() == 1) {
      doc["topology"]["nodes"] = shape[0];
      doc["mesh"]["N"] = shape[0];
    } else {
      doc["topology"]["nodes"] = std::vector<int>(shape.begin(), shape.end());
      for (std::size_t i = 0; i < shape.size(); ++i) doc["mesh"][fmt::format("N{}", i)] = shape[i];
    }
  }
  // One placeholder op (a workload has at least one); the importer replaces the ops.
  doc["ops"] = nlohmann::ordered_json::array({{{"kind", "all_reduce"}, {"bytes", 1}, {"axes", {tpu ? "X" : "G"}}}});
  Workload w = parse_workload(doc.dump(), "--topology");
  w.ops.clear();
  return w;
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
