#include "cli/lora_flags.h"

#include <cstdio>

namespace tokenmill::cli {

void add_lora_options(CLI::App& cmd, LoraFlags& flags) {
  cmd.add_option("--lora", flags.path, "LoRA adapter GGUF (llama.cpp's adapter format) applied to every token")
      ->check(CLI::ExistingFile);
  cmd.add_option("--lora-scale", flags.scale, "Multiplier of the adapter's deltas (with alpha / rank)")
      ->capture_default_str();
}

std::shared_ptr<const model::LoraAdapter> load_lora(const LoraFlags& flags, const model::Model& base) {
  if (flags.path.empty()) return nullptr;
  auto adapter = model::LoraAdapter::load(flags.path, base, flags.path, flags.scale);
  std::fprintf(stderr, "lora: %s, %lld matrices, rank <= %lld, alpha %g, scale %g, %.2f MB\n", flags.path.c_str(),
               static_cast<long long>(adapter->num_adapted()), static_cast<long long>(adapter->max_rank()),
               static_cast<double>(adapter->alpha()), static_cast<double>(adapter->user_scale()),
               static_cast<double>(adapter->tensor_bytes()) / 1e6);
  return adapter;
}

}  // namespace tokenmill::cli
