#include "cli/rope_flags.h"

#include <cstdio>

#include "gguf/reader.h"

namespace tokenmill::cli {

void add_rope_flags(CLI::App& cmd, RopeFlags& f) {
  cmd.add_option("--rope-scaling", f.scaling, "Override the file's RoPE scaling: none|linear|yarn");
  cmd.add_option("--rope-scale", f.scale,
                 "RoPE context extension factor (positions / N; linear unless the file or --rope-scaling says yarn)");
  cmd.add_option("--rope-freq-base", f.freq_base, "Override the file's RoPE base frequency");
  cmd.add_option("--yarn-orig-ctx", f.yarn_orig_ctx, "YaRN: the original context (default: the file's)");
}

model::RopeOverrides rope_overrides(const RopeFlags& f, int64_t ctx) {
  model::RopeOverrides o;
  o.scaling = f.scaling;
  o.scale = f.scale;
  o.freq_base = f.freq_base;
  o.yarn_orig_ctx = f.yarn_orig_ctx;
  if (ctx > 0) o.ctx = ctx;
  return o;
}

void print_notices(const std::vector<std::string>& notices) {
  for (const std::string& n : notices) std::fprintf(stderr, "warning: %s\n", n.c_str());
}

void warn_about_rope(const std::string& model_path, const model::RopeOverrides& overrides) {
  const gguf::GgufFile file = gguf::GgufFile::open(model_path);
  model::ModelConfig c = model::ModelConfig::from_gguf(file);
  print_notices(model::apply_rope_overrides(c, overrides));
}

}  // namespace tokenmill::cli
