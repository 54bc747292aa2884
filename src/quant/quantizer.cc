#include "quant/quantizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/fp8.h"
#include "kernels/quant.h"
#include "model/config.h"
#include "model/weights.h"
#include "quant/imatrix.h"
#include "quant/importance_quant.h"
#include "quant/smoothquant.h"
#include "quant/tensor_policy.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;

bool is_float_type(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

// A mixture-of-experts router (ffn_gate_inp): kept as it is. It is small
// (n_expert x n_embd), and its rounding error would move tokens across the
// near-ties of routing, to other experts (llama.cpp keeps it too).
bool is_router(const gguf::TensorInfo& t) { return parse_tensor_role(t.name).role == "ffn_gate_inp"; }

// Weight matrices, and stacks of them (the experts, [n_expert, rows, cols]),
// which are quantized row by row alike.
bool is_matrix(const gguf::TensorInfo& t) {
  return (t.num_dims == 2 || t.num_dims == 3) && t.name.ends_with(".weight") && !is_router(t);
}

// Everything the plan and the encoder need, validated once.
struct Context {
  QuantizeOptions options;
  QuantTarget target;
  gguf::GgufFile file;
  model::ModelConfig config;
  std::optional<Imatrix> imatrix;
  SmoothingPlan smoothing;
  std::string classifier;  // output.weight, or token_embd.weight when tied
  QuantMethods methods;
};

void check_paths(const QuantizeOptions& o) {
  if (o.output.empty() && !o.dry_run) fail("no output path given");
  std::error_code ec;
  if (!o.dry_run && std::filesystem::exists(o.output, ec) && std::filesystem::equivalent(o.input, o.output, ec)) {
    fail("the output '{}' is the input file; write the quantized model to a new path", o.output);
  }
}

QuantMethods resolve_methods(const QuantizeOptions& o, const QuantTarget& target) {
  std::optional<QuantMethods> m =
      o.method.empty() ? std::optional<QuantMethods>(QuantMethods{}) : parse_quant_methods(o.method);
  if (!m) fail("unknown --method '{}' (rtn, or a '+'-joined subset of awq, gptq, imatrix, e.g. awq+gptq)", o.method);
  if (!o.imatrix_path.empty()) m->weighted = true;
  if (m->weighted && !m->calibrated() && o.imatrix_path.empty())
    fail("--method {} needs an importance matrix (--imatrix FILE from `tokenmill calibrate`)", m->name());
  if (m->calibrated()) {
    if (o.calibration.model == nullptr || o.calibration.tokens.size() < 2)
      fail("--method {} needs calibration text (--calib FILE)", m->name());
    const bool block_target = target.runtime == WeightRuntime::kDense && target.base != TensorType::F32 &&
                              target.base != TensorType::F16 && target.base != TensorType::BF16;
    if (!block_target) {
      fail("--method {} quantizes to block types (Q4_0, Q4_K_M, Q3_K ...); the target {} has none", m->name(),
           target.name);
    }
  }
  return *m;
}

Context open_context(const QuantizeOptions& o, const std::function<void(const std::string&)>& log) {
  const std::optional<QuantTarget> target = parse_quant_target(o.type);
  if (!target) fail("unknown quantization type '{}' (one of {})", o.type, quant_target_choices());
  check_paths(o);
  const QuantMethods methods = resolve_methods(o, *target);
  Context c{o, *target, gguf::GgufFile::open(o.input), {}, std::nullopt, {}, {}, methods};
  c.config = model::ModelConfig::from_gguf(c.file);   // unsupported architectures stop here
  (void)model::ModelWeights::bind(c.file, c.config);  // and missing or misshapen tensors here
  c.classifier = c.file.find_tensor("output.weight") ? "output.weight" : "token_embd.weight";
  if (!o.imatrix_path.empty()) {
    c.imatrix = Imatrix::load(o.imatrix_path);
    if (log)
      log(fmt::format("imatrix: {} matrices from {} chunks of {} tokens", c.imatrix->entries().size(),
                      c.imatrix->chunk_count, c.imatrix->chunk_size));
  }
  if (c.target.runtime == WeightRuntime::kW8A8 && c.imatrix) {
    c.smoothing = plan_smoothing(c.file, c.config, *c.imatrix, o.smooth_alpha);
  }
  return c;
}

void check_imatrix(const Context& c, std::vector<std::string>& warnings) {
  if (!c.imatrix) return;
  int64_t matched = 0;
  std::vector<std::string> missing;
  for (const gguf::TensorInfo& t : c.file.tensors()) {
    if (!is_matrix(t)) continue;
    const ChannelStats* s = c.imatrix->find(t.name);
    if (s == nullptr) {
      if (t.name != "token_embd.weight" || c.classifier == t.name) missing.push_back(t.name);
      continue;
    }
    if (static_cast<int64_t>(s->sum_sq.size()) != t.row_length()) {
      fail("imatrix '{}' does not match the model: '{}' has {} columns, the imatrix {}", c.options.imatrix_path, t.name,
           t.row_length(), s->sum_sq.size());
    }
    ++matched;
  }
  if (matched == 0) fail("imatrix '{}' has no entry for any weight of '{}'", c.options.imatrix_path, c.options.input);
  if (!missing.empty()) {
    warnings.push_back(fmt::format("no imatrix data for {} matrices (plain rounding for them), e.g. {}", missing.size(),
                                   missing.front()));
  }
}

TensorPlan plan_tensor(const Context& c, const gguf::TensorInfo& t) {
  TensorPlan p;
  p.name = t.name;
  p.dims.assign(t.dims, t.dims + t.num_dims);
  p.from = p.to = t.type;
  if (!is_matrix(t)) {
    p.convert = c.smoothing.vector_divide.contains(t.name);
    p.smoothed = p.convert;
    p.bytes = static_cast<int64_t>(t.num_bytes);
    return p;
  }
  const TensorChoice choice = choose_tensor_type(c.target, t.name, c.config.n_layer, t.name == c.classifier,
                                                 c.options.keep_output_f16, t.row_length());
  p.to = choice.type;
  p.fp8_grid = choice.fp8_grid;
  p.note = choice.note;
  p.smoothed = c.smoothing.col_scale.contains(t.name) || c.smoothing.row_divide.contains(t.name);
  p.convert = p.to != p.from || p.fp8_grid || p.smoothed;
  p.importance = p.convert && c.imatrix && !c.imatrix->importance(t.name).empty() &&
                 (has_weighted_search(p.to) || (p.to >= TensorType::Q2_K && p.to <= TensorType::Q6_K));
  p.bytes = gguf::row_bytes(p.to, t.row_length()) * t.num_rows();
  return p;
}

// Re-encodes one tensor row by row over the pool: dequantize, smooth, round
// to the FP8 grid, quantize with importance weights.
std::vector<uint8_t> encode_tensor(const Context& c, const gguf::TensorInfo& t, const TensorPlan& p, ThreadPool& pool) {
  const int64_t cols = t.row_length(), rows = t.num_rows();
  const std::vector<float>* col = find_factors(c.smoothing.col_scale, t.name);
  const std::vector<float>* rowdiv = find_factors(c.smoothing.row_divide, t.name);
  const std::vector<float>* vecdiv = find_factors(c.smoothing.vector_divide, t.name);
  std::vector<float> importance = p.importance ? c.imatrix->importance(t.name) : std::vector<float>{};
  if (col != nullptr && !importance.empty()) {
    // The smoothed input is X / s, so its mean square is divided by s^2.
    for (size_t j = 0; j < importance.size(); ++j) importance[j] /= (*col)[j] * (*col)[j];
  }
  const int64_t in_row = gguf::row_bytes(t.type, cols), out_row = gguf::row_bytes(p.to, cols);
  std::vector<uint8_t> out(static_cast<size_t>(out_row * rows));
  pool.parallel_for(rows, [&](int, int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      kernels::dequantize_row_ref(t.type, t.data + r * in_row, x.data(), cols);
      for (int64_t j = 0; j < cols; ++j) {
        if (col != nullptr) x[j] *= (*col)[j];
        if (vecdiv != nullptr) x[j] /= (*vecdiv)[j];
        if (rowdiv != nullptr) x[j] /= (*rowdiv)[r];
      }
      if (p.fp8_grid) kernels::round_row_to_fp8(x.data(), x.data(), cols);
      quantize_row_weighted(p.to, x.data(), out.data() + r * out_row, cols,
                            importance.empty() ? nullptr : importance.data());
    }
  });
  return out;
}

void set_metadata(const Context& c, gguf::GgufWriter& w) {
  for (const gguf::MetadataEntry& e : c.file.metadata()) {
    if (e.key == "general.file_type" || e.key == "general.quantization_version" || e.key == kRuntimeKey ||
        e.key.starts_with("tokenmill.quantize.")) {
      continue;
    }
    w.set(e.key, e.value);
  }
  w.set("general.file_type", gguf::Value::u32(c.target.file_type));
  w.set("general.quantization_version", gguf::Value::u32(2));
  w.set("tokenmill.quantize.type", gguf::Value::str(c.target.name));
  if (c.imatrix)
    w.set("tokenmill.quantize.imatrix", gguf::Value::str(std::filesystem::path(c.options.imatrix_path).filename()));
  if (c.options.keep_output_f16) w.set("tokenmill.quantize.keep_output_f16", gguf::Value::boolean(true));
  if (c.target.runtime != WeightRuntime::kDense) {
    w.set(std::string(kRuntimeKey), gguf::Value::str(std::string(runtime_name(c.target.runtime))));
  }
  if (!c.smoothing.empty() && !c.methods.awq)
    w.set("tokenmill.quantize.smooth_alpha", gguf::Value::f32(c.options.smooth_alpha));
  if (c.methods.calibrated() || c.methods.weighted)
    w.set("tokenmill.quantize.method", gguf::Value::str(c.methods.name()));
  if (c.methods.calibrated()) {
    w.set("tokenmill.quantize.calibration", gguf::Value::str(c.options.calibration_name));
    w.set("tokenmill.quantize.calibration_tokens",
          gguf::Value::u32(static_cast<uint32_t>(c.options.calibration.tokens.size())));
    if (c.methods.gptq) {
      const CalibratedOptions& o = c.options.calibration;
      w.set("tokenmill.quantize.gptq_settings", gguf::Value::str(gptq_candidates_name(o.gptq_candidates)));
      w.set("tokenmill.quantize.gptq_inputs", gguf::Value::str(o.sequential ? "layer by layer" : "float model"));
    }
  }
}

// AWQ / GPTQ for the matrices they serve; their factors become the
// context's smoothing plan, so the folds into norm vectors and ffn_up rows
// happen in encode_tensor like SmoothQuant's. Updates the plans' flags.
CalibratedOutput run_calibrated(Context& c, std::vector<TensorPlan>& plans, ThreadPool& pool,
                                const std::function<void(const std::string&)>& log) {
  std::map<std::string, TensorType> types;
  for (const TensorPlan& p : plans) {
    if (p.convert && p.dims.size() == 2 && !p.fp8_grid) types.emplace(p.name, p.to);
  }
  CalibratedOptions co = c.options.calibration;
  co.methods = c.methods;
  CalibratedOutput out = quantize_calibrated(c.file, c.config, types, co, pool, log);
  c.smoothing = out.scaling;
  for (TensorPlan& p : plans) {
    if (const auto it = out.method.find(p.name); it != out.method.end()) p.method = it->second;
    if (c.smoothing.vector_divide.contains(p.name)) p.convert = true;
    p.smoothed = c.smoothing.col_scale.contains(p.name) || c.smoothing.row_divide.contains(p.name) ||
                 c.smoothing.vector_divide.contains(p.name);
  }
  return out;
}

// Every tensor's plan and the sizes into `result`; refuses an
// already-quantized source unless allowed (then warns).
void plan_tensors(const Context& c, const QuantizeOptions& o, QuantizeResult& result) {
  std::vector<std::string> requantized;
  for (const gguf::TensorInfo& t : c.file.tensors()) {
    result.tensors.push_back(plan_tensor(c, t));
    const TensorPlan& p = result.tensors.back();
    result.input_tensor_bytes += static_cast<int64_t>(t.num_bytes);
    result.output_tensor_bytes += p.bytes;
    if (is_matrix(t)) result.num_parameters += t.num_elements(), result.matrix_bytes += p.bytes;
    if (is_matrix(t) && !is_float_type(t.type))
      requantized.push_back(fmt::format("{} is {}", t.name, gguf::tensor_type_name(t.type)));
  }
  if (!requantized.empty()) {
    if (!o.allow_requantize) {
      fail(
          "'{}' is already quantized ({} of its matrices, e.g. {}); quantizing it again adds a second rounding "
          "error on top of the first. Quantize from an F32/F16/BF16 source, or pass --allow-requantize",
          o.input, requantized.size(), requantized.front());
    }
    result.warnings.push_back(fmt::format(
        "requantizing an already-quantized source ({} matrices, e.g. {}): {}", requantized.size(), requantized.front(),
        c.target.base == TensorType::F32 ? "F32 holds its values exactly, its quantization error stays"
                                         : "the errors of both quantizations add up"));
  }
}

}  // namespace

QuantizeResult quantize_model(const QuantizeOptions& o, const std::function<void(const std::string&)>& log) {
  const SteadyClock::time_point start = SteadyClock::now();
  Context c = open_context(o, log);
  QuantizeResult result;
  result.target = c.target;
  plan_tensors(c, o, result);
  for (const TensorPlan& p : result.tensors) {
    if (!p.note.empty() && log) log("note: " + p.note);
  }
  check_imatrix(c, result.warnings);
  if (c.target.runtime == WeightRuntime::kW8A8 && c.smoothing.empty()) {
    result.warnings.push_back(
        "W8A8 without SmoothQuant smoothing (give --imatrix from `tokenmill calibrate` to enable it)");
  }
  for (const std::string& w : result.warnings) {
    if (log) log("warning: " + w);
  }
  if (o.dry_run) {
    result.seconds = seconds_since(start);
    return result;
  }
  ThreadPool pool(o.num_threads);
  result.methods = c.methods;
  CalibratedOutput calibrated;
  if (c.methods.calibrated()) {
    calibrated = run_calibrated(c, result.tensors, pool, log);
    result.calibration = calibrated.report;
  }
  gguf::GgufWriter writer(c.file.alignment());
  set_metadata(c, writer);
  for (size_t i = 0; i < result.tensors.size(); ++i) {
    const gguf::TensorInfo& t = c.file.tensors()[i];
    const TensorPlan& p = result.tensors[i];
    const auto done = calibrated.encoded.find(p.name);
    std::vector<uint8_t> bytes = done != calibrated.encoded.end() ? std::move(done->second)
                                 : p.convert                      ? encode_tensor(c, t, p, pool)
                                                                  : std::vector<uint8_t>(t.data, t.data + t.num_bytes);
    writer.add_tensor(p.name, p.to, p.dims, std::move(bytes));
  }
  writer.write(o.output);
  result.output_file_bytes = static_cast<int64_t>(std::filesystem::file_size(o.output));
  result.seconds = seconds_since(start);
  return result;
}

std::string format_plan(const QuantizeResult& r) {
  std::string out = fmt::format("{:<36} {:>16} {:>6}    {:<6} {:>10}\n", "tensor", "shape", "from", "to", "MB");
  for (const TensorPlan& p : r.tensors) {
    std::string shape;
    for (int64_t d : p.dims) shape += fmt::format("{}{}", shape.empty() ? "" : "x", d);
    std::string flags;
    if (p.importance) flags += " imatrix";
    if (p.smoothed) flags += " smoothed";
    if (p.fp8_grid) flags += " fp8-grid";
    if (!p.method.empty()) flags += " " + p.method;
    if (!p.note.empty()) flags += " (fallback)";
    out += fmt::format("{:<36} {:>16} {:>6} -> {:<6} {:>10.3f}{}\n", p.name, shape, gguf::tensor_type_name(p.from),
                       gguf::tensor_type_name(p.to), p.bytes / 1e6, flags);
  }
  const double bpw = r.num_parameters > 0 ? 8.0 * r.matrix_bytes / r.num_parameters : 0.0;
  out += fmt::format("{}: tensors {:.2f} MB -> {:.2f} MB ({:.2f} bits per weight over the {} matrix parameters)\n",
                     r.target.name, r.input_tensor_bytes / 1e6, r.output_tensor_bytes / 1e6, bpw, r.num_parameters);
  return out;
}

}  // namespace tokenmill::quant
