#pragma once
// Identical independent groups, found from the workload before anything is
// built (docs/MODEL.md, "Exact reductions"). When every collective of a workload
// runs over axes within a set A, no op is a send or runs on part of the chips,
// and the system looks the same from every group of chips that differ only on
// A (an untwisted torus, with or without slices; on a GPU fabric A inside the
// node, or every node axis and not the GPU axis: the rails), then those groups
// share no link and no chip, and each is group 0
// translated: its chips are group 0's plus a fixed offset, and so are its links'
// and compute units' ids. The builders list a group's tasks in the same order
// (chip ids keep their order under the translation), so each group runs exactly
// as group 0 does (sim/reduce.hpp gives the argument). meshsim then builds and
// runs group 0 only and gives every other group its loads: the program, the
// memory and the size limits are one group's.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "driver/expand.hpp"
#include "sim/reduce.hpp"
#include "topology/system.hpp"
#include "topology/torus.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

struct TranslatedGroups {
  std::shared_ptr<const std::vector<topology::ChipId>> first;  // group 0's chips, ascending
  std::vector<topology::ChipId> offsets;                       // every other group: chip id offset from group 0
  std::uint64_t copies() const { return offsets.size() + 1; }
};

// The groups, or nothing when the workload does not split into several (a
// training step, a send, an op on part of the chips, a twisted torus, GPU
// collectives across nodes beside ones inside them or on part of the nodes,
// oversubscribed spines, or collectives over every axis). `system`: the run's.
std::optional<TranslatedGroups> translated_groups(const workloads::Workload& w, const topology::System& system);

// `w` with every op on group 0's chips only.
workloads::Workload first_group(const workloads::Workload& w, const TranslatedGroups& g);

// The class the other groups form with group 0 (for the result copying that
// exact reductions use): group 0's resources (its chips' links and compute
// units; on a GPU fabric their NVLink and NIC ports, and for rails their leaves'
// cables and those cables' core cables) and each other group's.
sim::Reduced::Class translated_class(const TranslatedGroups& g, const topology::System& system, const Expanded& ex);

}  // namespace meshsim::driver
