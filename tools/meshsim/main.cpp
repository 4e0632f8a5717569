// meshsim: the command line. Registers the subcommands (run in run_command.cpp,
// the others in files of their own), parses the arguments, runs the one given.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "reports/explain.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/hardware_commands.hpp"
#include "workloads/workload.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "meshsim: a discrete-event simulator of TPU mesh interconnects.\n"
      "Simulates sharded collectives hop by hop on the links of a 2D/3D torus and compares\n"
      "the simulated times with the closed forms of the scaling cheat sheet."};
  app.set_version_flag("--version", "meshsim 0.1.0");
  app.require_subcommand(1);

  const meshsim::cli::Subcommand run = meshsim::cli::add_run_command(app);
  CLI::App* explain = app.add_subcommand(
      "explain", "Explain how each matmul and layer is lowered: the cheat sheet's case, the shardings, the "
                 "collectives inserted and why, and their closed-form costs with the numbers filled in");
  std::string explain_path;
  explain->add_option("WORKLOAD", explain_path, "Workload JSON file (format: docs/WORKLOAD.md)")->required();
  const auto hardware_command = meshsim::tool::add_hardware_commands(app);

  const meshsim::cli::Subcommand sweep = meshsim::cli::add_sweep_command(app);
  const meshsim::cli::Subcommand validate = meshsim::cli::add_validate_command(app);
  const meshsim::cli::Subcommand search = meshsim::cli::add_search_command(app);
  const meshsim::cli::Subcommand chakra_export = meshsim::cli::add_chakra_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // The top-level help lists the options of every subcommand too.
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return meshsim::cli::fail(std::string(e.what()) + " (see meshsim --help)");
  }

  if (sweep.parsed()) return sweep.run();
  if (validate.parsed()) return validate.run();
  if (chakra_export.parsed()) return chakra_export.run();
  if (search.parsed()) return search.run();
  if (run.parsed()) return run.run();
  return meshsim::cli::guarded([&]() -> int {
    if (const std::optional<int> rc = hardware_command()) return *rc;
    if (explain->parsed()) {
      const meshsim::workloads::Workload w = meshsim::workloads::load_workload(explain_path);
      std::fputs(meshsim::reports::format_explain(w).c_str(), stdout);
      return 0;
    }
    return 0;
  });
}
