#include "frontends/load.hpp"

#include "base/error.hpp"
#include "chakra/import.hpp"
#include "hlo/hlo.hpp"
#include "hlo/lower.hpp"
#include "workloads/imported.hpp"

namespace meshsim::frontends {

Program load_program(const std::string& path, const ProgramOptions& o) {
  const bool chakra = chakra::rank_file_parts(path).has_value();
  if (!chakra && !o.comm_groups.empty()) throw Error("--comm-groups: only for a Chakra trace");
  if ((chakra || !hlo::is_hlo_file(path)) && o.trip_count) throw Error("--trip-count: only for an HLO dump");
  if (!chakra && !hlo::is_hlo_file(path)) {
    if (hlo::is_mlir_file(path))
      throw InputError(path, "1",
                       "MLIR (StableHLO or MHLO), not HLO text: meshsim reads the compiled module's HLO "
                       "(jax.jit(f).lower(...).compile().as_text(), or XLA_FLAGS=--xla_dump_to=DIR)");
    if (!o.hardware.empty() || !o.topology.empty() || !o.devices.empty() || !o.wraparound.empty())
      throw Error(std::string(!o.hardware.empty()   ? "--hardware"
                              : !o.topology.empty() ? "--topology"
                              : !o.devices.empty()  ? "--devices"
                                                    : "--wraparound") +
                  ": only for an HLO dump or a Chakra trace; a workload names its hardware and topology itself");
    return {workloads::load_workload(path), {}};
  }
  const char* what = chakra ? "a Chakra trace" : "an HLO dump";
  if (o.hardware.empty() || o.topology.empty())
    throw Error(path + ": " + what + " needs --hardware PRESET and --topology SHAPE");
  if (o.verify) throw Error(std::string("--verify: ") + what + " has no data to execute");
  const std::optional<std::vector<int>> shape = workloads::parse_shape_text(o.topology);
  if (!shape)
    throw Error(std::string("--topology: expected a slice shape such as 4x4 or 4x4x4") +
                (chakra ? ", or a node count" : "") + ", got '" + o.topology + "'");
  if (chakra) {
    chakra::ImportOptions co;
    co.hardware = o.hardware;
    co.shape = *shape;
    co.devices = o.devices;
    co.comm_groups = o.comm_groups;
    co.wraparound = o.wraparound;
    chakra::ImportReport report;
    Program p{chakra::import_trace(path, co, &report), {}};
    p.summary = "# " + p.workload.file + ": " + report.summary() + "\n";
    return p;
  }
  hlo::ImportOptions io;
  io.hardware = o.hardware;
  io.shape = *shape;
  io.devices = o.devices;
  io.wraparound = o.wraparound;
  io.trip_count = o.trip_count;
  hlo::ImportReport report;
  Program p{hlo::import_module(hlo::load_module(path), io, &report), {}};
  p.summary = "# " + path + ": " + report.summary() + "\n";
  return p;
}

}  // namespace meshsim::frontends
