// The RoPE and context flags of the commands that run a model (run, logits,
// serve, bench model, bench engine), spelled as llama.cpp spells them:
// --rope-scaling none|linear|yarn, --rope-scale N (context extension
// factor), --rope-freq-base B, --yarn-orig-ctx N. The context itself is
// each command's -c/--ctx-size (serve: also --max-model-len). One
// definition, so that the commands cannot drift apart.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/rope_config.h"

namespace tokenmill::cli {

struct RopeFlags {
  std::optional<std::string> scaling;
  std::optional<double> scale;
  std::optional<double> freq_base;
  std::optional<int64_t> yarn_orig_ctx;
};

void add_rope_flags(CLI::App& cmd, RopeFlags& flags);

// The overrides the flags and a context of `ctx` positions (0: the file's)
// describe. Values are checked when the model applies them.
model::RopeOverrides rope_overrides(const RopeFlags& flags, int64_t ctx);

// Prints to stderr, once, what the overrides warn about for this model
// (e.g. a context past the trained one without RoPE scaling). Reads the
// file's metadata only; throws Error for a bad override, as loading would.
void warn_about_rope(const std::string& model_path, const model::RopeOverrides& overrides);
// The same for warnings already computed (Model::notices()).
void print_notices(const std::vector<std::string>& notices);

}  // namespace tokenmill::cli
