#pragma once
// Human and machine reports of a run. Both are deterministic: integer times,
// fixed formatting, ops in workload order.
#include <string>

#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

namespace meshsim::driver {

std::string format_table(const workloads::Workload& w, const RunResult& r);
// One line when the run was reduced (sim/reduce.hpp): what was simulated; else "".
std::string reduction_note(const RunResult& r);
// The --json document; field names and units are documented in docs/OUTPUT.md.
std::string format_json(const workloads::Workload& w, const RunResult& r);

// --engine all: both engines per op, side by side, with the difference in percent.
std::string format_comparison(const workloads::Workload& w, const RunResult& native, const RunResult& simgrid);
// Its --json document: per-op differences, then each engine's full run document.
std::string format_comparison_json(const workloads::Workload& w, const RunResult& native, const RunResult& simgrid);

}  // namespace meshsim::driver
