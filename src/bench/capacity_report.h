// The views of a capacity search, rendered from capacity.json alone (see
// capacity_run.h for its fields): the one-sentence answer, the Markdown
// report and the gnuplot plot of p99 latency and goodput against the load.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokenmill::bench {

// "This server serves N req/s of this traffic within SLO (...)", or what
// the search could say when it found no knee.
std::string capacity_statement(const nlohmann::json& capacity);

std::string capacity_markdown(const nlohmann::json& capacity);

// Writes capacity.dat and capacity.gp under `dir` and renders capacity.svg
// when gnuplot is installed. Returns the image paths relative to `dir`'s
// parent; sets `warning` when it could not render.
std::vector<std::string> write_capacity_plot(const nlohmann::json& capacity, const std::string& dir,
                                             std::string& warning);

}  // namespace tokenmill::bench
