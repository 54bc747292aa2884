// `tokenmill quantize IN OUT --type TYPE`: re-encodes a model's weight
// matrices (see quant/quantizer.h for the policy and the checks).
#include <malloc.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "eval/loaded_model.h"
#include "model/model.h"
#include "quant/gptq_search.h"
#include "quant/quant_target.h"
#include "quant/quantizer.h"
#include "util/error.h"

namespace tokenmill::cli {
namespace {

struct CalibrationFlags {
  std::string text_file;
  std::string tokens_file;
  double memory_mb = 2048.0;
  std::string gptq_damp = "auto";
  std::string gptq_order = "auto";
  bool float_inputs = false;
};

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void print_calibration(const quant::QuantizeResult& r) {
  if (!r.calibration) return;
  const quant::CalibratedReport& c = *r.calibration;
  std::fprintf(stderr,
               "%s: %lld matrices from %lld calibration tokens in %lld pass(es); Hessians %.1f MB at once; "
               "calibration %.1f s, awq search %.1f s, quantization %.1f s; peak RSS %.0f MB\n",
               r.methods.name().c_str(), static_cast<long long>(c.matrices),
               static_cast<long long>(c.calibration_tokens), static_cast<long long>(c.passes),
               c.hessian_bytes_peak / 1e6, c.calibration_seconds, c.awq_seconds, c.gptq_seconds, peak_rss_mb());
  for (const auto& [settings, groups] : c.gptq_choices)
    std::fprintf(stderr, "gptq: %s in %lld group(s)\n", settings.c_str(), static_cast<long long>(groups));
  if (c.clip_blocks > 0)
    std::fprintf(stderr, "awq clipping: %lld of %lld blocks clipped\n", static_cast<long long>(c.clipped_blocks),
                 static_cast<long long>(c.clip_blocks));
}

void run_quantize(quant::QuantizeOptions o, const CalibrationFlags& cf) {
  std::unique_ptr<model::Model> model;
  std::vector<int32_t> tokens;
  if (!cf.text_file.empty() && !cf.tokens_file.empty()) fail("give at most one of --calib and --calib-tokens");
  o.calibration.gptq_candidates = quant::parse_gptq_candidates(cf.gptq_damp, cf.gptq_order);
  if (!cf.text_file.empty() || !cf.tokens_file.empty()) {
    if (!(cf.memory_mb > 0.0)) fail("--calib-memory must be > 0 MB");
    // Calibration allocates and frees large buffers (a chunk's logits, the
    // layers' scratch) once per chunk and pass. glibc raises its mmap
    // threshold after the first frees and then keeps such buffers in the
    // heap, where they fragment: layer-by-layer GPTQ on Gemma 3 270M (14
    // chunks x 18 passes) peaked at 4.3 GB RSS instead of 2.0. A fixed
    // threshold maps them and gives them back at free.
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    model = model::Model::load(o.input);
    if (!cf.text_file.empty()) {
      tokens = eval::tokenize_text(*model, read_text_file(cf.text_file));
    } else {
      for (const std::vector<int32_t>& s : eval::parse_token_file(cf.tokens_file))
        tokens.insert(tokens.end(), s.begin(), s.end());
    }
    o.calibration.model = model.get();
    o.calibration.tokens = tokens;
    o.calibration.memory_budget = static_cast<int64_t>(cf.memory_mb * 1e6);
    o.calibration.sequential = !cf.float_inputs;
    o.calibration_name =
        std::filesystem::path(cf.text_file.empty() ? cf.tokens_file : cf.text_file).filename().string();
  }
  const quant::QuantizeResult r =
      quant::quantize_model(o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  print_calibration(r);
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
  auto cf = std::make_shared<CalibrationFlags>();
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
  cmd->add_option("--method", o->method,
                  "rtn, or '+'-joined awq, gptq, imatrix (e.g. awq+gptq+imatrix); awq/gptq need --calib");
  cmd->add_option("--calib", cf->text_file, "Calibration text for awq/gptq")->check(CLI::ExistingFile);
  cmd->add_option("--calib-tokens", cf->tokens_file, "Calibration token ids for awq/gptq (one sequence per line)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--calib-ctx", o->calibration.spec.ctx, "Tokens per calibration chunk")->capture_default_str();
  cmd->add_option("--calib-chunks", o->calibration.spec.max_chunks, "Use at most this many chunks (0: all)");
  cmd->add_option("--calib-memory", cf->memory_mb, "MB of input Hessians held at once (more: more passes)")
      ->capture_default_str();
  cmd->add_option("--gptq-damp", cf->gptq_damp,
                  "GPTQ damping, fraction of the Hessian's mean diagonal, or auto: 0.001, 0.01 or 0.1 per group, "
                  "whichever gives the least output error on the calibration data")
      ->capture_default_str();
  cmd->add_option("--gptq-order", cf->gptq_order,
                  "GPTQ column order: natural, act-order (decreasing input energy, static block scales), "
                  "or auto (chosen per group with the damping)")
      ->capture_default_str();
  cmd->add_flag("--gptq-float-inputs", cf->float_inputs,
                "GPTQ Hessians from the float model in one pass instead of layer by layer from the quantized "
                "layers' outputs (faster, usually worse)");
  cmd->add_option("--awq-clip-steps", o->calibration.awq.clip_steps,
                  "AWQ clipping candidates per block (max|w| x 1, 0.95, ...); 1: no clipping; 0: automatic "
                  "(10 for awq alone, none with gptq or imatrix)")
      ->check(CLI::Range(0, 20))
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->num_threads, "Threads (default: all cores)");
  cmd->callback([o, cf] { run_quantize(*o, *cf); });
}

}  // namespace tokenmill::cli
