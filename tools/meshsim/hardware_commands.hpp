#pragma once
// The hardware commands of the CLI (replay, calibrate, compare) and run's
// --calibration, kept out of main.cpp.
#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

#include "workloads/workload.hpp"

namespace meshsim::tool {

// Registers `replay`, `calibrate` and `compare`; the returned function runs the
// one that was parsed (its exit code) or returns nullopt when none was. It throws
// Error / InputError like the rest of main().
std::function<std::optional<int>()> add_hardware_commands(CLI::App& app);

// `run --calibration FILE`: the option, and applying the file to a workload.
void add_calibration_option(CLI::App* run, std::string& path);
void apply_calibration_file(workloads::Workload& w, const std::string& path);

}  // namespace meshsim::tool
