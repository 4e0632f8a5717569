#pragma once
// Human and machine reports of a run. Both are deterministic: integer times,
// fixed formatting, ops in workload order.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver/run_context.hpp"
#include "driver/simulate.hpp"
#include "workloads/workload.hpp"

namespace meshsim::reports {

// One op of a run as the reports give it (an entry of the --json "ops", a row
// of a sweep): integer picoseconds, the closed form's terms rounded to them.
struct OpRecord {
  std::string name;
  OpKind kind = OpKind::AllGather;
  std::vector<std::string> mesh_axes;
  std::uint64_t bytes = 0;
  std::int64_t start_ps = 0, end_ps = 0, time_ps = 0, closed_form_ps = 0;
  // Communication (not is_local(kind)): the closed form's terms, the lower
  // bound and the bandwidths.
  std::int64_t latency_term_ps = 0, bandwidth_term_ps = 0, lower_bound_ps = 0;
  std::string lower_bound_term;
  double algbw_bytes_per_s = 0, busbw_bytes_per_s = 0;
  std::optional<double> ratio;  // time / closed form; none when the closed form is 0
  std::string bound;            // "latency", "bandwidth", "compute", "memory"
  std::string algorithm, protocol;
  std::uint64_t transfers = 0, link_bytes = 0;
};
OpRecord op_record(const driver::OpResult& o);

// A double as the --json documents write it: the shortest text that reads back
// to the same double (and "1.0" for a whole number).
std::string json_number(double v);

// The reports read the run's context (its system, its torus plans): pass the
// one `r` was simulated with.
std::string format_table(const workloads::Workload& w, driver::RunContext& run, const driver::RunResult& r);
// One line when the run was reduced (sim/reduce.hpp): what was simulated; else "".
std::string reduction_note(const driver::RunResult& r);
// The --json document; field names and units are documented in docs/OUTPUT.md.
std::string format_json(const workloads::Workload& w, const driver::RunContext& run, const driver::RunResult& r);

// --engine all: both engines per op, side by side, with the difference in percent.
std::string format_comparison(const workloads::Workload& w, const driver::RunContext& run,
                              const driver::RunResult& native, const driver::RunResult& simgrid);
// Its --json document: per-op differences, then each engine's full run document.
std::string format_comparison_json(const workloads::Workload& w, const driver::RunContext& run,
                                   const driver::RunResult& native, const driver::RunResult& simgrid);

}  // namespace meshsim::reports
