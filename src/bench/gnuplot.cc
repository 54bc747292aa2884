#include "bench/gnuplot.h"

#include <cstdlib>

#include <fmt/format.h>

namespace tokenmill::bench {

bool render_gnuplot(const std::string& dir, const std::string& script, std::string& warning) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    warning = "gnuplot is not installed (scripts/setup.sh installs it): wrote the plot data and " + script + " only";
    return false;
  }
  const std::string cmd = fmt::format("cd '{}' && gnuplot '{}' 2> gnuplot.log", dir, script);
  if (std::system(cmd.c_str()) != 0) {
    warning = "gnuplot failed; see " + dir + "/gnuplot.log";
    return false;
  }
  return true;
}

}  // namespace tokenmill::bench
