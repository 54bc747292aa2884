// `tokenmill convert`: imports a checkpoint of another format into GGUF.
// Today: llama2.c checkpoints (and their tokenizer.bin).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "model/llama2c_import.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct ConvertFlags {
  std::string from;
  std::string checkpoint;
  std::string tokenizer;
  std::string output;
  std::string type = "F32";
};

void run_convert(const ConvertFlags& f) {
  const std::optional<model::WeightFormat> format = model::parse_weight_format(f.type);
  if (!format) fail("--type {}: unknown type (one of {})", f.type, model::weight_format_choices());
  const SteadyClock::time_point start = SteadyClock::now();
  std::optional<std::string> tokenizer;
  if (!f.tokenizer.empty()) tokenizer = f.tokenizer;
  model::import_llama2c(f.checkpoint, tokenizer, f.output, *format);
  std::fprintf(stderr, "wrote %s: %s from %s, %.1f MB in %.1f s\n", f.output.c_str(),
               model::weight_format_name(*format).c_str(), f.checkpoint.c_str(),
               static_cast<double>(std::filesystem::file_size(f.output)) / 1e6, seconds_since(start));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto f = std::make_shared<ConvertFlags>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a checkpoint of another format to GGUF");
  cmd->add_option("--from", f->from, "Input format: llama2c")->required()->check(CLI::IsMember({"llama2c"}));
  cmd->add_option("checkpoint", f->checkpoint, "Input checkpoint (llama2.c .bin)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", f->tokenizer, "llama2.c tokenizer.bin to embed")->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "Output GGUF file")->required();
  cmd->add_option("--type", f->type, "Weight format: " + model::weight_format_choices())->capture_default_str();
  cmd->callback([f] { run_convert(*f); });
}

}  // namespace tokenmill::cli
