// `tokenmill synth-lora`: writes a synthetic LoRA adapter (random deltas of
// a chosen rank and strength) for a base GGUF, in llama.cpp's adapter
// format, for tests and benchmarks of multi-adapter serving.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "model/synth_lora.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct SynthLoraFlags {
  std::string base;
  std::string output;
  std::string type = "F32";
  std::vector<std::string> targets;
  model::SynthLoraOptions options;
};

void run_synth_lora(SynthLoraFlags f) {
  const auto type = gguf::tensor_type_from_name(f.type);
  if (!type) fail("--type {}: unknown tensor type", f.type);
  f.options.type = *type;
  for (const std::string& t : f.targets) {
    // Accept "a,b" as well as repeated flags.
    size_t start = 0;
    while (start <= t.size()) {
      const size_t comma = std::min(t.find(',', start), t.size());
      if (comma > start) f.options.targets.push_back(t.substr(start, comma - start));
      start = comma + 1;
    }
  }
  const gguf::GgufFile base = gguf::GgufFile::open(f.base);
  model::build_synth_lora(base, f.options).write(f.output);
  std::fprintf(stderr, "wrote %s: LoRA rank %lld, alpha %g, %s, seed %llu, %.2f MB\n", f.output.c_str(),
               static_cast<long long>(f.options.rank), static_cast<double>(f.options.alpha), f.type.c_str(),
               static_cast<unsigned long long>(f.options.seed),
               static_cast<double>(std::filesystem::file_size(f.output)) / 1e6);
}

}  // namespace

void add_synth_lora_command(CLI::App& app) {
  auto f = std::make_shared<SynthLoraFlags>();
  CLI::App* cmd = app.add_subcommand(
      "synth-lora", "Write a synthetic LoRA adapter (llama.cpp's GGUF adapter format) for a base model");
  cmd->add_option("-m,--model", f->base, "Base model GGUF the adapter is for")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "Output adapter GGUF file")->required();
  cmd->add_option("--rank", f->options.rank, "LoRA rank r")->capture_default_str();
  cmd->add_option("--alpha", f->options.alpha, "adapter.lora.alpha (deltas are scaled by alpha / r)")
      ->capture_default_str();
  cmd->add_option("--targets", f->targets,
                  "Base tensor roles to adapt, comma-separated: attn_q, attn_k, attn_v, attn_qkv, attn_output, "
                  "ffn_gate, ffn_up, ffn_down, output (default: every layer's linears)");
  cmd->add_option("--type", f->type, "Tensor type of lora_a and lora_b: F32, F16, BF16, Q8_0 ...")
      ->capture_default_str();
  cmd->add_option("--seed", f->options.seed, "PRNG seed")->capture_default_str();
  cmd->add_option("--strength", f->options.strength,
                  "Size of a delta against its base product (ratio of output standard deviations)")
      ->capture_default_str();
  cmd->callback([f] { run_synth_lora(*f); });
}

}  // namespace tokenmill::cli
