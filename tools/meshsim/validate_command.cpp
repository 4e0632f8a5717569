// meshsim validate: parse a workload and lower it to the program the engine would
// run, without running it. The same checks, in the same order, as `meshsim run`
// before its simulation starts, so a bad file gives the same error line.
#include <cstdio>
#include <optional>

#include "base/error.hpp"
#include "driver/expand.hpp"
#include "driver/simulate.hpp"
#include "tools/meshsim/commands.hpp"
#include "workloads/workload.hpp"

namespace meshsim::cli {

Subcommand add_validate_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  CLI::App* validate = app.add_subcommand(
      "validate", "Check a workload without simulating it: parse it, lower every op and build its transfers (the "
                  "checks `meshsim run` makes before it starts; a bad file gives the same error line)");
  validate->add_option("WORKLOAD", *path, "Workload JSON file (format: docs/WORKLOAD.md)")->required();
  validate->add_flag("-q,--quiet", *quiet, "Print nothing when the workload is valid");
  return {validate, [path, quiet]() -> int {
            return guarded([&] {
              const workloads::Workload w = workloads::load_workload(*path);
              driver::RunContext run(w);
              // What run builds, its size checked against run's default limits:
              // group 0 of identical independent groups, the quotient by the
              // translations (each distinct op's program in full), else the
              // whole program. The count is the whole program's.
              const driver::RunPlan plan = driver::plan_run(w, run);
              std::uint64_t tasks = 0;
              switch (plan.kind) {
                case driver::RunPlan::Kind::Group:
                  tasks = driver::expand(*plan.first, run).program.num_tasks() * plan.groups->copies();
                  break;
                case driver::RunPlan::Kind::Quotient:
                  tasks = plan.quotient->full_tasks;
                  break;
                case driver::RunPlan::Kind::Whole:
                  tasks = driver::expand(w, run).program.num_tasks();
                  break;
              }
              if (!*quiet)
                std::printf("%s: valid: %zu ops, %u chips, %llu tasks\n", path->c_str(), w.ops.size(),
                            run.torus().num_chips(), static_cast<unsigned long long>(tasks));
              return 0;
            });
          }};
}

}  // namespace meshsim::cli
