// --lora FILE and --lora-scale X for the commands that run one model
// directly (run, logits): one adapter applied to every forward pass.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "model/lora_adapter.h"
#include "model/model.h"

namespace tokenmill::cli {

struct LoraFlags {
  std::string path;  // empty: no adapter
  float scale = 1.0f;
};

void add_lora_options(CLI::App& cmd, LoraFlags& flags);

// The adapter for `base` (null without --lora), with a line on stderr.
// Throws Error for a file that is not a LoRA adapter for this model.
std::shared_ptr<const model::LoraAdapter> load_lora(const LoraFlags& flags, const model::Model& base);

}  // namespace tokenmill::cli
