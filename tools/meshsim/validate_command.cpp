// meshsim validate: parse a workload and lower it to the program the engine would
// run, without running it. The same checks, in the same order, as `meshsim run`
// before its simulation starts, so a bad file gives the same error line.
#include <cstdio>
#include <optional>

#include "base/error.hpp"
#include "driver/expand.hpp"
#include "driver/groups.hpp"
#include "driver/simulate.hpp"
#include "driver/translations.hpp"
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
              const topology::Torus torus = w.make_torus();
              // run's default size limits, checked from the estimate before anything is built
              const driver::SimulateOptions defaults;
              const driver::RunSize size = driver::run_size(w, torus, defaults);
              driver::check_limits(w, size, defaults.limits);
              // What run builds: group 0 of identical independent groups, the
              // quotient by the translations (each distinct op's program in
              // full), else the whole program. The count is the whole program's.
              std::uint64_t tasks = 0;
              if (size.groups > 1)
                if (const std::optional<driver::TranslatedGroups> groups = driver::translated_groups(w, torus))
                  tasks = driver::expand(driver::first_group(w, *groups), torus).program.num_tasks() * groups->copies();
              if (size.translations > 1)
                if (const std::optional<driver::OpQuotient> q = driver::quotient_by_ops(w, torus))
                  tasks = q->full_tasks;
              if (tasks == 0) {
                if (size.translations > 1 || size.groups > 1)
                  driver::check_limits(w, driver::estimate_run(w, torus), defaults.limits);
                tasks = driver::expand(w, torus).program.num_tasks();
              }
              if (!*quiet)
                std::printf("%s: valid: %zu ops, %u chips, %llu tasks\n", path->c_str(), w.ops.size(),
                            torus.num_chips(), static_cast<unsigned long long>(tasks));
              return 0;
            });
          }};
}

}  // namespace meshsim::cli
