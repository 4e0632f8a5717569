#pragma once
// The JSON frontend's readers (docs/WORKLOAD.md): text, through a Cursor, to
// the typed spec (spec.hpp), whose builder checks and lowers it. For other
// frontends that read part of a workload: a search spec reads its hardware,
// topology and training section with them.
#include <optional>
#include <string>

#include "workloads/json_cursor.hpp"
#include "workloads/spec.hpp"

namespace meshsim::workloads {

// "hardware": a preset name, or an object of a preset and overrides; `preset`,
// when not empty, stands for the name written (a sweep's).
Hardware parse_hardware(const Cursor& c, const std::string& preset = "");
// "topology" of `hw` (absent: null).
TopologySpec read_topology(const std::optional<Cursor>& topo, const Hardware& hw);
MeshSpec read_mesh(const Cursor& mesh);
// "model": a preset name, or an object (with an optional "preset").
ModelSpec parse_model(const Cursor& c);
// "training" (docs/TRAINING.md).
TrainingSpec read_training(const Cursor& c);

}  // namespace meshsim::workloads
