#pragma once
// Plots drawn by gnuplot (Debian's gnuplot-nox): the sweep's curves and the
// search's Pareto front. meshsim writes the data and the script beside the
// pictures, so that `gnuplot PREFIX.gp` redraws them.
#include <string>

namespace meshsim::studies {

// A string for a gnuplot script, in single quotes.
std::string gp_quote(const std::string& s);

// Writes PREFIX.dat (`data`) and PREFIX.gp (`body` drawn twice: PREFIX.png and
// PREFIX.svg, `width` x `height` pixels) and runs gnuplot. `body` reads the data
// as gp_quote(PREFIX + ".dat"). Error (naming --plot) when gnuplot is missing or fails.
void write_plot(const std::string& prefix, const std::string& what, const std::string& data, const std::string& body,
                int width, int height);

}  // namespace meshsim::studies
