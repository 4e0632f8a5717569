// meshsim search: the best way to shard a training step on a system (docs/SEARCH.md).
#include <cstdio>
#include <memory>
#include <new>

#include "base/error.hpp"
#include "search/search.hpp"
#include "tools/meshsim/commands.hpp"

namespace meshsim::cli {

namespace {

struct SearchOptions {
  std::string spec, json, workload;
  std::size_t top = 10;
  bool exhaustive = false;
};

int run_search_command(const SearchOptions& o) {
  try {
    if (!o.json.empty() && !o.workload.empty() && o.json != "-" && same_file(o.json, o.workload))
      throw Error("--workload: '" + o.workload + "' is also the --json output; give them different files");
    for (const std::string& out : {o.json, o.workload})
      if (!out.empty() && out != "-" && same_file(out, o.spec))
        throw Error("'" + out + "' is the spec file; it would be overwritten");
    const search::SearchSpec spec = search::load_spec(o.spec);
    search::SearchOptions options;
    options.top = o.top;
    options.exhaustive = o.exhaustive;
    const search::SearchResult r = search::run_search(spec, options);
    if (o.json != "-") std::fputs(search::format_search(spec, r, o.top).c_str(), stdout);
    if (!o.json.empty()) write_output(o.json, search::search_json(spec, r, o.top).dump(2) + "\n");
    if (!o.workload.empty())
      write_output(o.workload, search::plan_workload(spec, r.ranked.front().plan).dump(2) + "\n");
    return 0;
  } catch (const Error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory");
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  }
}

}  // namespace

Subcommand add_search_command(CLI::App& app) {
  auto o = std::make_shared<SearchOptions>();
  CLI::App* search = app.add_subcommand(
      "search", "Find the best way to shard a training step on a system: plans of data, FSDP, tensor and pipeline "
                "parallelism over the hardware axes, pruned by memory and by a lower bound, the rest simulated "
                "(docs/SEARCH.md)");
  search->add_option("SPEC", o->spec,
                     "A training workload without \"mesh\" and \"parallelism\", with an optional \"search\" object "
                     "(docs/SEARCH.md)")
      ->required();
  search->add_option("--top", o->top, "How many plans to show (default 10); the top is exact")->check(CLI::Range(1, 1000));
  search->add_option("--json", o->json, "Write the result as JSON to FILE ('-' for stdout)")->option_text("FILE");
  search->add_option("--workload", o->workload, "Write the best plan's workload (meshsim run reproduces it) to FILE")
      ->option_text("FILE");
  search->add_flag("--exhaustive", o->exhaustive, "Simulate every plan that fits in memory (no pruning by the bound)");
  return {search, [o] { return run_search_command(*o); }};
}

}  // namespace meshsim::cli
