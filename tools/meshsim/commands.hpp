#pragma once
// Subcommands that live in their own files (main.cpp registers them and runs the
// one that was parsed). Each run() prints its own errors ("meshsim: error: ...")
// and returns the exit code.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace meshsim::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
  bool parsed() const { return app != nullptr && app->parsed(); }
};

// meshsim run: a workload, HLO dump or Chakra trace simulated (run_command.cpp).
Subcommand add_run_command(CLI::App& app);
// meshsim sweep: a workload (or a collective given by flags) over ranges of bytes,
// mesh shapes, presets and algorithms; table, CSV, JSON and plots (sweep_command.cpp).
Subcommand add_sweep_command(CLI::App& app);
// meshsim search: the best sharding plan of a training step on a system (search_command.cpp).
Subcommand add_search_command(CLI::App& app);
// meshsim validate: parse and lower a workload without simulating it (validate_command.cpp).
Subcommand add_validate_command(CLI::App& app);
// meshsim chakra WORKLOAD PREFIX: the workload as a Chakra trace (chakra_command.cpp).
Subcommand add_chakra_command(CLI::App& app);

// The one error path of every subcommand. A failure is one line on stderr,
// "meshsim: error: MESSAGE", and exit code 1; under mpirun the ranks follow
// guarded_rank (parallel.hpp).

// Prints "meshsim: error: MESSAGE" on stderr and returns 1.
int fail(const std::string& message);

// What body() threw: an Error's text (`error`: the input or the environment is
// at fault), "out of memory", or "internal error: ..." for any other exception;
// an empty message when it returned.
struct Failure {
  std::string message;
  bool error = false;
};
Failure failure_of(const std::function<void()>& body);

// body()'s exit code, or its failure printed (fail) and 1.
int guarded(const std::function<int()>& body);

// Writes `text` to the file `path` ("-": stdout); throws Error "PATH: cannot write file".
void write_output(const std::string& path, const std::string& text);

// The same file, by the path it would resolve to (it need not exist yet).
bool same_file(const std::string& a, const std::string& b);

}  // namespace meshsim::cli
