#include "tools/meshsim/limit_options.hpp"

#include <fmt/format.h>

namespace meshsim::cli {

void add_limit_options(CLI::App& run, driver::Limits& limits) {
  run.add_option("--max-transfers", limits.max_transfers,
                 fmt::format("Refuse, before building it, a run estimated to need more than N hop transfers "
                             "(default and largest {})",
                             driver::kMaxTasks))
      ->option_text("N")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{driver::kMaxTasks}));
  run.add_option("--max-memory", limits.max_memory_bytes,
                 fmt::format("Refuse, before building it, a run estimated to need more than SIZE of memory for its "
                             "program (bytes, or with a unit: 512MB, 2GiB; default {}GiB)",
                             limits.max_memory_bytes >> 30))
      ->option_text("SIZE")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(std::uint64_t{1}, ~std::uint64_t{0}));
}

}  // namespace meshsim::cli
