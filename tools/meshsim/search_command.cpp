// meshsim search: the best way to shard a training step on a system (docs/SEARCH.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>

#include "base/error.hpp"
#include "search/search_json.hpp"
#include "tools/meshsim/commands.hpp"
#include "tools/meshsim/limit_options.hpp"
#include "tools/meshsim/parallel.hpp"
#include "tools/meshsim/plot.hpp"

namespace meshsim::cli {

namespace {

struct SearchOptions {
  std::string spec, json, workload, plot;
  std::size_t top = 10;
  bool exhaustive = false;
  driver::Limits limits;
};

// PREFIX.png and PREFIX.svg: every simulated plan's step against its memory
// per chip, the Pareto front joined, the chip's HBM as a line.
void plot_pareto(const std::string& prefix, const search::SearchSpec& spec, const search::SearchResult& r) {
  std::string dat = "# meshsim search plot: memory per chip (GB), step (ms), rank, axes; block 0: every simulated "
                    "plan; block 1: the Pareto front\n";
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    dat += fmt::format("{:.6f} {:.6f} {} \"{}\"\n", static_cast<double>(r.ranked[i].peak_bytes) / 1e9,
                       r.ranked[i].step.seconds() * 1e3, i + 1, r.ranked[i].plan.axes);
  dat += "\n\n";
  for (const search::PlanResult* p : search::pareto_front(r))
    dat += fmt::format("{:.6f} {:.6f} {} \"{} {}\"\n", static_cast<double>(p->peak_bytes) / 1e9,
                       p->step.seconds() * 1e3, static_cast<std::size_t>(p - r.ranked.data()) + 1, p->plan.axes,
                       p->plan.options == "-" ? "" : p->plan.options);
  const std::string data = gp_quote(prefix + ".dat");
  std::string body = fmt::format("set title {}\n", gp_quote(fmt::format(
                                                       "meshsim search {}: {} plans simulated, the Pareto front of "
                                                       "step time against memory per chip",
                                                       spec.file, r.simulated)));
  body += "set xlabel 'memory per chip (GB, closed form)'\nset ylabel 'step (ms, simulated)'\nset grid\n";
  body += "set key top right box opaque\nset offsets graph 0.02, graph 0.25, graph 0.05, graph 0.05\n";
  // The chip's HBM as a line when it is near the plans' memory; else in the key.
  double most = 0;
  for (const search::PlanResult& p : r.ranked) most = std::max(most, static_cast<double>(p.peak_bytes) / 1e9);
  const double hbm = static_cast<double>(r.hbm_bytes) / 1e9;
  if (hbm <= 2 * most) {
    body += fmt::format("set arrow 1 from {0:.6f}, graph 0 to {0:.6f}, graph 1 nohead dt 2 lw 1.5 lc rgb 'red'\n", hbm);
    body += fmt::format("set label 1 'HBM {:.0f} GB' at {:.6f}, graph 0.5 right rotate by 90 offset -1.5,0 tc rgb 'red'\n",
                        hbm, hbm);
    body += fmt::format("set xrange [0:{:.6f}]\n", hbm * 1.05);
  } else {
    body += fmt::format("set xrange [0:{:.6f}]\nset label 1 'HBM {:.0f} GB per chip: off the scale' at graph 0.02, "
                        "graph 0.95 left tc rgb 'red'\n",
                        most * 1.3, hbm);
  }
  body += fmt::format("plot {} index 0 using 1:2 with points pt 7 ps 0.8 lc rgb '#7f7f7f' title 'simulated plans', \\\n"
                      "  '' index 1 using 1:2 with linespoints lw 2 pt 7 ps 1.2 lc rgb '#1f77b4' title 'Pareto front', \\\n"
                      "  '' index 1 using 1:2:4 with labels left offset 1,0.5 font ',8' notitle\n",
                      data);
  write_plot(prefix, "meshsim search plot", dat, body, 1100, 750);
}

int run_search_command(const SearchOptions& o) {
  // As in sweep: what a rank can get wrong on its own is agreed on first; only
  // rank 0 speaks, and only rank 0's exit status fails the job.
  std::unique_ptr<Parallel> par;
  try {
    par = std::make_unique<Parallel>();
  } catch (const Error& e) {
    return fail(e.what());
  }
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
  if (!early.empty()) return root ? fail(early) : 0;
  try {
    search::SearchOptions options;
    options.top = o.top;
    options.exhaustive = o.exhaustive;
    options.pareto = !o.plot.empty();
    options.limits = o.limits;
    options.batch = static_cast<std::size_t>(par->size());
    options.map = [&](std::size_t n, const std::function<std::string(std::size_t)>& run) {
      return share_items(*par, n, [&](std::size_t i, std::size_t, std::size_t) { return run(i); });
    };
    // Every rank runs the same search (the plans and their order are the same
    // everywhere); only the simulations are shared, and every rank sees every
    // result, so a failure is every rank's.
    const search::SearchResult r = search::run_search(*spec, options);
    if (!root) return 0;
    if (o.json != "-" && o.workload != "-") std::fputs(search::format_search(*spec, r, o.top).c_str(), stdout);
    if (!o.json.empty()) write_output(o.json, search::search_json(*spec, r, o.top).dump(2) + "\n");
    if (!o.workload.empty())
      write_output(o.workload, search::plan_workload(*spec, r.ranked.front().plan).dump(2) + "\n");
    if (!o.plot.empty()) plot_pareto(o.plot, *spec, r);
    return 0;
  } catch (const Error& e) {
    return root ? fail(e.what()) : 0;
  } catch (const std::bad_alloc&) {
    return root ? fail("out of memory") : 1;
  } catch (const std::exception& e) {
    return root ? fail(std::string("internal error: ") + e.what()) : 1;
  }
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
