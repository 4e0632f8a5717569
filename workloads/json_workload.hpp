#pragma once
// The JSON workload frontend (docs/WORKLOAD.md): a file's text to its typed
// spec (spec.hpp), and the documents a sweep writes for its points.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/spec.hpp"

namespace meshsim::workloads {

// The spec of a workload file; `preset`, when not empty, stands for the
// preset the file names (a sweep's --preset: errors point where the name is).
// Throws InputError ("FILE:/json/pointer: message") on malformed text.
WorkloadSpec read_workload_spec(std::string_view text, const std::string& file, const std::string& preset = "");

// The workload file `text` with `edits` put in (what `meshsim run` would read
// for a sweep point; read_workload_spec and apply_edits give the same spec).
std::string edit_workload_json(std::string_view text, const std::string& file, const WorkloadEdits& edits);

// A workload of one collective from a sweep's flags: hardware `preset`, mesh
// axes X, Y, Z... of `mesh`'s sizes, the op `kind` ("all_gather", ...) named
// after its kind, of `bytes`, over `axes` (empty: every mesh axis).
std::string collective_workload_json(const std::string& preset, const std::vector<int>& mesh,
                                     const std::string& kind, const std::vector<std::string>& axes,
                                     std::uint64_t bytes);

}  // namespace meshsim::workloads
