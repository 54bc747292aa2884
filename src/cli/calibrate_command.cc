// `tokenmill calibrate -m MODEL --text FILE -o IMATRIX`: per-input-channel
// activation statistics of every weight matrix (quant/calibrator.h), for
// `tokenmill quantize --imatrix` (importance-weighted scales, SmoothQuant).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "eval/loaded_model.h"
#include "quant/calibrator.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct CalibrateFlags {
  std::string model_path;
  std::string text_file;
  std::string tokens_file;
  std::string output;
  quant::CalibrationSpec spec;
  int threads = 0;
};

void run_calibrate(const CalibrateFlags& f) {
  if (f.text_file.empty() == f.tokens_file.empty()) fail("give exactly one of --text FILE or --tokens FILE");
  const SteadyClock::time_point start = SteadyClock::now();
  std::unique_ptr<model::Model> m = model::Model::load(f.model_path);
  std::vector<int32_t> tokens;
  if (!f.text_file.empty()) {
    tokens = eval::tokenize_text(*m, read_text_file(f.text_file));
  } else {
    for (const std::vector<int32_t>& s : eval::parse_token_file(f.tokens_file))
      tokens.insert(tokens.end(), s.begin(), s.end());
  }
  ThreadPool pool(f.threads);
  quant::Imatrix im = quant::calibrate(*m, tokens, f.spec, pool, [](int64_t done, int64_t total) {
    std::fprintf(stderr, "\rcalibrating: chunk %lld/%lld", static_cast<long long>(done), static_cast<long long>(total));
  });
  std::fprintf(stderr, "\n");
  im.datasets = {std::filesystem::path(f.text_file.empty() ? f.tokens_file : f.text_file).filename().string()};
  im.save(f.output);
  std::fprintf(stderr, "wrote %s: %zu matrices, %lld chunks of %lld tokens, in %.1f s\n", f.output.c_str(),
               im.entries().size(), static_cast<long long>(im.chunk_count), static_cast<long long>(im.chunk_size),
               seconds_since(start));
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto f = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Collect activation statistics (imatrix) for quantization");
  cmd->add_option("-m,--model", f->model_path, "GGUF model (preferably the unquantized one)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--text", f->text_file, "Calibration text")->check(CLI::ExistingFile);
  cmd->add_option("--tokens", f->tokens_file, "Calibration token ids (one sequence per line)")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "Output imatrix (GGUF)")->required();
  cmd->add_option("--ctx", f->spec.ctx, "Tokens per chunk")->capture_default_str();
  cmd->add_option("--chunks", f->spec.max_chunks, "Use at most this many chunks (0: all)");
  cmd->add_option("-t,--threads", f->threads, "Threads (default: all cores)");
  cmd->callback([f] { run_calibrate(*f); });
}

}  // namespace tokenmill::cli
