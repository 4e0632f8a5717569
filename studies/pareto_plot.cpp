// The search's plot (studies/pareto_plot.hpp).
#include "studies/pareto_plot.hpp"

#include <fmt/format.h>

#include "studies/plot.hpp"

namespace meshsim::studies {

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

}  // namespace meshsim::studies
