#pragma once
// The program `meshsim run` (and what else takes a program file) reads, by the
// file it is given: a workload (JSON, docs/WORKLOAD.md), an XLA HLO dump
// (docs/HLO.md) or a Chakra trace's rank files (docs/CHAKRA.md), the last two
// on the system the options name. The frontends themselves live beside their
// formats (workloads/, hlo/, chakra/); this is the one place that chooses.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workloads/workload.hpp"

namespace meshsim::frontends {

struct ProgramOptions {
  // An imported program's system and device order (--hardware, --topology,
  // --wraparound, --devices) and a Chakra trace's process groups
  // (--comm-groups); a workload names its own, and giving them is an error.
  std::string hardware, topology;
  std::vector<int> wraparound, devices;
  std::string comm_groups;
  std::optional<std::int64_t> trip_count;  // an HLO dump's loops without a known trip count (--trip-count)
  bool verify = false;  // --verify: an imported program has no data to execute
};

struct Program {
  workloads::Workload workload;
  std::string summary;  // an import's summary line ("# FILE: lowered ..."), empty for a workload
};

// Error (naming the option) for an option that does not fit the file's kind;
// InputError for what the file itself gets wrong.
Program load_program(const std::string& path, const ProgramOptions& options);

}  // namespace meshsim::frontends
