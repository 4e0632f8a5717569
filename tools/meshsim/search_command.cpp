// meshsim search: the best way to shard a training step on a system (docs/SEARCH.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>

#include "base/error.hpp"
#include "search/search_json.hpp"
#include "studies/pareto_plot.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/limit_options.hpp"
#include "tools/meshsim/parallel.hpp"

namespace meshsim::cli {

namespace {

struct SearchOptions {
  std::string spec, json, workload, plot;
  std::size_t top = 10;
  bool exhaustive = false;
  driver::Limits limits;
};

int run_search_command(const SearchOptions& o) {
  // As in sweep: what a rank can get wrong on its own is agreed on first; then
  // the ranks' rule of exit codes (guarded_rank, parallel.hpp).
  const std::unique_ptr<Parallel> par = join_ranks();
  if (!par) return 1;
  const bool root = par->rank() == 0;
  std::unique_ptr<search::SearchSpec> spec;
  const std::string early = agreed_error(*par, [&] {
    if (!o.json.empty() && !o.workload.empty() && o.json != "-" && same_file(o.json, o.workload))
      throw Error("--workload: '" + o.workload + "' is also the --json output; give them different files");
    for (const std::string& out : {o.json, o.workload})
      if (!out.empty() && out != "-" && same_file(out, o.spec))
        throw Error("'" + out + "' is the spec file; it would be overwritten");
    if (o.json == "-" && o.workload == "-") throw Error("--workload: only one of --json and --workload can go to stdout");
    spec = std::make_unique<search::SearchSpec>(search::load_spec(o.spec));
  });
  if (!early.empty()) return shared_failure(*par, early);
  // Every rank runs the same search (the plans and their order are the same
  // everywhere); only the simulations are shared, and every rank sees every
  // result, so an Error is every rank's.
  return guarded_rank(*par, true, [&] {
    search::SearchOptions options;
    options.top = o.top;
    options.exhaustive = o.exhaustive;
    options.pareto = !o.plot.empty();
    options.limits = o.limits;
    options.batch = static_cast<std::size_t>(par->size());
    options.map = [&](std::size_t n, const std::function<std::string(std::size_t)>& run) {
      return share_items(*par, n, [&](std::size_t i, std::size_t, std::size_t) { return run(i); });
    };
    const search::SearchResult r = search::run_search(*spec, options);
    if (!root) return 0;
    if (o.json != "-" && o.workload != "-") std::fputs(search::format_search(*spec, r, o.top).c_str(), stdout);
    if (!o.json.empty()) write_output(o.json, search::search_json(*spec, r, o.top).dump(2) + "\n");
    if (!o.workload.empty())
      write_output(o.workload, search::plan_workload(*spec, r.ranked.front().plan).dump(2) + "\n");
    if (!o.plot.empty()) studies::plot_pareto(o.plot, *spec, r);
    return 0;
  });
}

}  // namespace

Subcommand add_search_command(CLI::App& app) {
  auto o = std::make_shared<SearchOptions>();
  CLI::App* search = app.add_subcommand(
      "search", "Find the best way to shard a training step on a system: plans of data, FSDP, tensor, pipeline, expert "
                "and context parallelism over the hardware axes (and slice shapes), with microbatch, recompute, "
                "schedule, optimizer sharding and collective matmuls; pruned by memory and by a lower bound, the rest "
                "simulated; the winner explained against the runner-up (docs/SEARCH.md). Under mpirun the "
                "simulations are shared between the ranks");
  search->add_option("SPEC", o->spec,
                     "A training workload without \"mesh\" and \"parallelism\", with an optional \"search\" object "
                     "(docs/SEARCH.md)")
      ->required();
  search->add_option("--top", o->top, "How many plans to show (default 10); the top is exact")->check(CLI::Range(1, 1000));
  search->add_option("--json", o->json, "Write the result as JSON to FILE ('-' for stdout)")->option_text("FILE");
  search->add_option("--workload", o->workload,
                     "Write the best plan's workload (meshsim run reproduces it) to FILE ('-' for stdout)")
      ->option_text("FILE");
  search->add_option("--plot", o->plot,
                     "Draw PREFIX.png and PREFIX.svg with gnuplot: step time against memory per chip, the Pareto front "
                     "(kept exact: no plan that could be on it is pruned)")
      ->option_text("PREFIX");
  add_limit_options(*search, o->limits);
  search->add_flag("--exhaustive", o->exhaustive, "Simulate every plan that fits in memory (no pruning by the bound)");
  return {search, [o] { return run_search_command(*o); }};
}

}  // namespace meshsim::cli
