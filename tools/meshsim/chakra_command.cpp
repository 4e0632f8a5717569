// meshsim chakra: write a workload as a Chakra execution trace, one file per
// chip, for ASTRA-sim (or meshsim's own import): docs/CHAKRA.md.
#include <fmt/format.h>

#include <cstdio>

#include "base/error.hpp"
#include "chakra/export.hpp"
#include "tools/meshsim/commands.hpp"
#include "workloads/workload.hpp"

namespace meshsim::cli {

Subcommand add_chakra_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto prefix = std::make_shared<std::string>();
  auto gzip = std::make_shared<bool>(false);
  CLI::App* chakra = app.add_subcommand(
      "chakra", "Write a workload as a Chakra execution trace for ASTRA-sim: PREFIX.<chip>.et per chip and the "
                "process groups in PREFIX.comm_groups.json (docs/CHAKRA.md)");
  chakra->add_option("WORKLOAD", *path, "Workload JSON file (format: docs/WORKLOAD.md)")->required();
  chakra->add_option("PREFIX", *prefix, "Where to write: PREFIX.0.et, PREFIX.1.et, ...")->required();
  chakra->add_flag("--gzip", *gzip, "Write PREFIX.<chip>.et.gz");
  return {chakra, [path, prefix, gzip]() -> int {
            return guarded([&] {
              const workloads::Workload w = workloads::load_workload(*path);
              const chakra::ExportReport r = chakra::export_trace(w, *prefix, *gzip);
              std::printf("%s", fmt::format("{}: {} ops as {} nodes on {} ranks ({}.0.et{} to {}.{}.et{}), {} process "
                                            "groups in {}.comm_groups.json\n",
                                            *path, w.ops.size(), r.nodes, r.ranks, *prefix, *gzip ? ".gz" : "", *prefix,
                                            r.ranks - 1, *gzip ? ".gz" : "", r.groups, *prefix)
                                    .c_str());
              if (r.rounded > 0)
                std::printf("note: %llu all-gathers or all-to-alls have a V that does not divide by their group size: "
                            "comm_size rounded up\n",
                            static_cast<unsigned long long>(r.rounded));
              return 0;
            });
          }};
}

}  // namespace meshsim::cli
