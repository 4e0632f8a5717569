#pragma once
// The search's plot, drawn by gnuplot (studies/plot.hpp): PREFIX.png and
// PREFIX.svg, every simulated plan's step against its memory per chip, the
// Pareto front joined, the chip's HBM as a line.
#include <string>

#include "search/search.hpp"

namespace meshsim::studies {

void plot_pareto(const std::string& prefix, const search::SearchSpec& spec, const search::SearchResult& r);

}  // namespace meshsim::studies
