// libFuzzer target: the workload parser, from text to a lowered workload, and on
// to what meshsim run and explain do with it when the run is small. Any input
// must end in a result or in meshsim::Error (InputError included) with a
// one-line message; anything else (another exception, a crash, a sanitizer
// report, a hang, an allocation past libFuzzer's limit) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "driver/simulate.hpp"
#include "reports/explain.hpp"
#include "reports/report.hpp"
#include "workloads/workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const meshsim::workloads::Workload w = meshsim::workloads::parse_workload(text, "fuzz.json");
    (void)meshsim::reports::format_explain(w);
    // Small runs only: the bounds refuse the rest before anything is built.
    meshsim::driver::SimulateOptions options;
    options.limits.max_transfers = 20000;
    options.limits.max_memory_bytes = std::uint64_t{16} << 20;
    options.busiest_links = 3;
    options.critical_path = true;
    meshsim::driver::RunContext run(w);
    const meshsim::driver::RunResult r = meshsim::driver::simulate(w, run, options);
    (void)meshsim::reports::format_table(w, run, r);
    (void)meshsim::reports::format_json(w, run, r);
  } catch (const meshsim::Error& e) {
    const std::string_view message = e.what();
    if (message.empty() || message.find('\n') != std::string_view::npos) std::abort();  // one line, always
  }
  return 0;
}
