// Rendering with gnuplot, an external program (not linked): the plots'
// data and scripts are always written, the images only where it is installed.
#pragma once

#include <string>

namespace tokenmill::bench {

// Runs `gnuplot SCRIPT` inside `dir` (stderr to dir/gnuplot.log). Returns
// false and sets `warning` when gnuplot is missing or fails.
bool render_gnuplot(const std::string& dir, const std::string& script, std::string& warning);

}  // namespace tokenmill::bench
