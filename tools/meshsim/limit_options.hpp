#pragma once
// meshsim run's bounds on the size of a run (--max-transfers, --max-memory),
// checked before anything is built: see driver::Limits.
#include <CLI/CLI.hpp>

#include "driver/expand.hpp"

namespace meshsim::cli {

void add_limit_options(CLI::App& run, driver::Limits& limits);

}  // namespace meshsim::cli
