// `tokenmill quantize IN OUT --type TYPE`: re-encodes a model's weight
// matrices (see quant/quantizer.h for the policy and the checks).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "quant/quant_target.h"
#include "quant/quantizer.h"

namespace tokenmill::cli {
namespace {

void run_quantize(const quant::QuantizeOptions& o) {
  const quant::QuantizeResult r =
      quant::quantize_model(o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (o.dry_run) {
    std::fputs(quant::format_plan(r).c_str(), stdout);
    return;
  }
  const double bpw = r.num_parameters > 0 ? 8.0 * r.matrix_bytes / r.num_parameters : 0.0;
  std::fprintf(stderr, "wrote %s: %s, %.2f MB (tensors %.2f MB -> %.2f MB, %.2f bits per weight) in %.1f s\n",
               o.output.c_str(), r.target.name.c_str(), r.output_file_bytes / 1e6, r.input_tensor_bytes / 1e6,
               r.output_tensor_bytes / 1e6, bpw, r.seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<quant::QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a GGUF model's weights to another type");
  cmd->add_option("input", o->input, "Input GGUF (F32/F16/BF16 weights)")->required()->check(CLI::ExistingFile);
  cmd->add_option("output", o->output, "Output GGUF (written atomically)");
  cmd->add_option("--type", o->type, "Target: " + quant::quant_target_choices())->required();
  cmd->add_option("--imatrix", o->imatrix_path, "Importance matrix from `tokenmill calibrate`")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--keep-output-f16", o->keep_output_f16, "Keep the output (classifier) matrix in F16");
  cmd->add_flag("--dry-run", o->dry_run, "Print the per-tensor plan and sizes; write nothing");
  cmd->add_flag("--allow-requantize", o->allow_requantize, "Accept an already-quantized source (warns)");
  cmd->add_option("--smooth-alpha", o->smooth_alpha, "SmoothQuant migration strength for W8A8 (0..1)")
      ->check(CLI::Range(0.0f, 1.0f))
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->num_threads, "Threads (default: all cores)");
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace tokenmill::cli
