#pragma once
// The --json document of a workload's run (with its 8 busiest links), with or
// without the exact reductions: tests hold the two byte for byte.
#include <string>

#include "driver/run_context.hpp"
#include "driver/simulate.hpp"
#include "reports/report.hpp"
#include "workloads/workload.hpp"

namespace meshsim::test {

inline std::string run_json(const std::string& text, bool reduce) {
  const workloads::Workload w = workloads::parse_workload(text, "t.json");
  driver::SimulateOptions o;
  o.reduce = reduce;
  o.busiest_links = 8;
  driver::RunContext run(w);
  return reports::format_json(w, run, driver::simulate(w, run, o));
}

}  // namespace meshsim::test
