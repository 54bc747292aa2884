// `tokenmill convert`: imports a checkpoint of another format into GGUF.
// llama2.c checkpoints (and their tokenizer.bin); the 4-bit linear layers of
// GPTQ and AWQ safetensors checkpoints, onto a base GGUF of the same model
// that supplies the architecture, tokenizer and every other tensor.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "model/llama2c_import.h"
#include "quant/checkpoint_import.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct ConvertFlags {
  std::string from;
  std::string checkpoint;
  std::string tokenizer;
  std::string base;
  std::string output;
  std::string type;  // empty: F32 for llama2c, auto for gptq/awq
  int threads = 0;
};

void run_llama2c(const ConvertFlags& f) {
  if (!f.base.empty()) fail("--base is for --from gptq|awq; a llama2.c checkpoint is converted on its own");
  const std::string type = f.type.empty() ? "F32" : f.type;
  const std::optional<model::WeightFormat> format = model::parse_weight_format(type);
  if (!format) fail("--type {}: unknown type (one of {})", type, model::weight_format_choices());
  if (!std::filesystem::is_regular_file(f.checkpoint)) fail("{}: not a llama2.c checkpoint file", f.checkpoint);
  std::optional<std::string> tokenizer;
  if (!f.tokenizer.empty()) tokenizer = f.tokenizer;
  model::import_llama2c(f.checkpoint, tokenizer, f.output, *format);
  std::fprintf(stderr, "wrote %s: %s from %s", f.output.c_str(), model::weight_format_name(*format).c_str(),
               f.checkpoint.c_str());
}

void run_quantized(const ConvertFlags& f) {
  if (f.base.empty()) fail("--from {} needs --base BASE.gguf (the same model in GGUF, any float type)", f.from);
  if (!f.tokenizer.empty()) fail("--tokenizer is for --from llama2c; the tokenizer comes from --base");
  quant::CheckpointImportOptions o;
  o.method = f.from == "awq" ? quant::CheckpointMethod::kAwq : quant::CheckpointMethod::kGptq;
  o.checkpoint_dir = f.checkpoint;
  o.base_path = f.base;
  o.output_path = f.output;
  o.type = f.type.empty() ? "auto" : f.type;
  o.num_threads = f.threads;
  const quant::CheckpointImportResult r = quant::import_quantized_checkpoint(
      o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  const std::string type(gguf::tensor_type_name(r.type));
  if (!r.type_reason.empty()) std::fprintf(stderr, "--type auto chose %s: %s\n", type.c_str(), r.type_reason.c_str());
  for (const std::string& w : r.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fprintf(stderr,
               "%lld matrices as %s (%lld of %lld blocks exact, max abs error %.3g), %lld biases from the "
               "checkpoint\n",
               static_cast<long long>(r.num_matrices), type.c_str(),
               static_cast<long long>(r.num_blocks - r.requantized_blocks), static_cast<long long>(r.num_blocks),
               r.max_abs_error, static_cast<long long>(r.num_biases));
  std::fprintf(stderr, "wrote %s: %s from %s", f.output.c_str(), type.c_str(), f.checkpoint.c_str());
}

void run_convert(const ConvertFlags& f) {
  const SteadyClock::time_point start = SteadyClock::now();
  if (f.from == "llama2c") {
    run_llama2c(f);
  } else {
    run_quantized(f);
  }
  std::fprintf(stderr, ", %.1f MB in %.1f s\n", static_cast<double>(std::filesystem::file_size(f.output)) / 1e6,
               seconds_since(start));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto f = std::make_shared<ConvertFlags>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a checkpoint of another format to GGUF");
  cmd->add_option("--from", f->from, "Input format: llama2c, gptq (AutoGPTQ/GPTQModel) or awq (AutoAWQ GEMM)")
      ->required()
      ->check(CLI::IsMember({"llama2c", "gptq", "awq"}));
  cmd->add_option("checkpoint", f->checkpoint,
                  "Input checkpoint: a llama2.c .bin file, or a GPTQ/AWQ folder (settings JSON + *.safetensors)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--tokenizer", f->tokenizer, "llama2.c tokenizer.bin to embed")->check(CLI::ExistingFile);
  cmd->add_option("--base", f->base,
                  "gptq/awq: GGUF of the same model (any float type) giving the architecture, tokenizer and "
                  "every tensor that is not a 4-bit linear layer")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "Output GGUF file")->required();
  cmd->add_option("--type", f->type,
                  "Weight format: llama2c " + model::weight_format_choices() + " (default F32); gptq/awq " +
                      quant::checkpoint_import_type_choices() + " (default auto)");
  cmd->add_option("-t,--threads", f->threads, "Threads (default: all cores)");
  cmd->callback([f] { run_convert(*f); });
}

}  // namespace tokenmill::cli
