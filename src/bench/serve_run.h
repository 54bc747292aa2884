// `tokenmill bench serve` as a library call: plan, warm up, run every cell,
// watch the server, write report.json / report.md / records.jsonl /
// plan.jsonl / plots/ under the output directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"

namespace tokenmill::bench {

struct ServeOptions {
  std::string spec_path;
  std::vector<std::string> overrides;  // "dotted.key=value"
  std::string url;                     // "" = the spec's target.url
  std::string out_dir = "bench-out";
  std::string tokenizer_gguf;  // non-empty: count prompt tokens with this GGUF
  int64_t server_pid = 0;      // > 0: read the server's RSS from /proc
  bool dry_run = false;        // write plan.jsonl and stop
  bool plots = true;
};

// What one run produced, for callers that look further (the capacity search).
struct ServeOutcome {
  TrafficSpec spec;  // after overrides
  RunPlan plan;
  RunResult run;  // empty after a dry run
  nlohmann::json report;
};

// Throws Error for bad specs, an unreachable server or unwritable output.
ServeOutcome run_serve_benchmark(const ServeOptions& options);

// Writes `text` to `path` (one of a run's output files); throws Error
// naming the path when it cannot.
void write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace tokenmill::bench
