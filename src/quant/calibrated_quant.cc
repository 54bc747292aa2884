#include "quant/calibrated_quant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/quant.h"
#include "quant/block_grid.h"
#include "quant/gptq.h"
#include "quant/hessian_collector.h"
#include "quant/importance_quant.h"
#include "quant/input_groups.h"
#include "quant/output_error.h"
#include "quant/sequential_hook.h"
#include "util/check.h"
#include "util/clock.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;

constexpr int64_t kRowChunk = 1024;  // rows dequantized at a time outside AWQ searches

// Rows [begin, end) of matrix t as float, with the AWQ factors applied:
// columns times col, rows divided by rowdiv. out: [end - begin, cols].
void load_rows(const gguf::TensorInfo& t, int64_t begin, int64_t end, const std::vector<float>* col,
               const std::vector<float>* rowdiv, std::vector<float>& out) {
  const int64_t cols = t.row_length(), in_row = gguf::row_bytes(t.type, cols);
  out.resize(static_cast<size_t>((end - begin) * cols));
  for (int64_t r = begin; r < end; ++r) {
    float* x = out.data() + (r - begin) * cols;
    kernels::dequantize_row_ref(t.type, t.data + r * in_row, x, cols);
    const float div = rowdiv != nullptr ? (*rowdiv)[static_cast<size_t>(r)] : 1.0f;
    for (int64_t j = 0; j < cols; ++j) {
      if (col != nullptr) x[j] *= (*col)[static_cast<size_t>(j)];
      if (rowdiv != nullptr) x[j] /= div;
    }
  }
}

// What the methods can do for one group.
struct GroupWork {
  size_t index = 0;
  bool awq = false;
  bool gptq = false;
};

bool is_tied_classifier(const InputGroup& g) { return g.layer < 0 && g.matrices[0] == "token_embd.weight"; }

std::optional<GroupWork> plan_group(const InputGroup& g, size_t index, const std::map<std::string, TensorType>& types,
                                    const QuantMethods& m) {
  for (const std::string& n : g.matrices) {
    if (!types.contains(n)) return std::nullopt;  // kept as it is (or a float type): nothing to calibrate
  }
  GroupWork w{index, m.awq && g.can_fold(), m.gptq && !is_tied_classifier(g)};
  for (const std::string& n : g.matrices) {
    const TensorType t = types.at(n);
    if (!has_block_grid(t)) return std::nullopt;
  }
  if (!w.awq && !w.gptq && !m.weighted) return std::nullopt;
  return w;
}

// Consecutive whole layers whose Hessians fit the budget (at least one
// layer per pass); with per_layer, one layer per pass.
std::vector<std::vector<GroupWork>> split_passes(const std::vector<GroupWork>& work,
                                                 const std::vector<InputGroup>& groups, const gguf::GgufFile& file,
                                                 int64_t budget, bool per_layer) {
  std::vector<std::vector<GroupWork>> passes;
  int64_t used = 0, layer = -2;
  for (const GroupWork& w : work) {
    const InputGroup& g = groups[w.index];
    const int64_t cols = file.tensor(g.matrices[0]).row_length();
    const int64_t bytes = cols * cols * 4;
    if (passes.empty() || (g.layer != layer && (per_layer || used + bytes > budget))) {
      passes.emplace_back();
      used = 0;
    }
    passes.back().push_back(w);
    used += bytes;
    layer = g.layer;
  }
  return passes;
}

std::string method_name(const GroupWork& w, bool weighted) {
  std::string s;
  if (w.awq) s = "awq";
  if (w.gptq) s += s.empty() ? "gptq" : "+gptq";
  if (weighted) s += s.empty() ? "imatrix" : "+imatrix";
  return s;
}

class PassRunner {
 public:
  PassRunner(const gguf::GgufFile& file, const std::vector<InputGroup>& groups,
             const std::map<std::string, TensorType>& types, const CalibratedOptions& o, bool sequential,
             ThreadPool& pool, const std::function<void(const std::string&)>& log, CalibratedOutput& out)
      : file_(file),
        groups_(groups),
        types_(types),
        o_(o),
        sequential_(sequential),
        pool_(pool),
        log_(log),
        out_(out) {}

  void run(const std::vector<GroupWork>& pass);

 private:
  void calibrate(const std::vector<size_t>& indices, int64_t layer, HessianCollector& collector);
  void search_awq(const GroupWork& w, const InputHessian& h);
  void search_clip(const GroupWork& w, const InputHessian& h);
  int clip_steps(const GroupWork& w) const {
    // Automatic: only where the rounding is plain. GPTQ and the imatrix's
    // weighted scale search already choose around the outliers: on Gemma 3
    // 270M Q4_0 clipping on top of them measured worse, alone it helped.
    if (o_.awq.clip_steps > 0) return o_.awq.clip_steps;
    return w.gptq || o_.methods.weighted ? 1 : kClipSteps;
  }
  void encode_group(const GroupWork& w, const InputHessian& h, const InputHessian* fitted,
                    const InputHessian* held_out);
  GptqFactor choose_settings(const InputGroup& g, const std::vector<double>& hs, const InputHessian* fitted,
                             const InputHessian* held_out, const float* importance);
  std::vector<double> scaled_hessian(const InputGroup& g, const InputHessian& h) const;
  std::vector<float> rounding_importance(const std::vector<double>& hs, int64_t cols) const;
  void load_stored_rows(const std::string& name, int64_t begin, int64_t end, std::vector<float>& out, bool clip) const;
  const std::vector<float>* clip_ratios(const std::string& name) const;
  std::vector<uint8_t> encode_matrix(const std::string& name, const GptqFactor* factor, const float* importance);

  const gguf::GgufFile& file_;
  const std::vector<InputGroup>& groups_;
  const std::map<std::string, TensorType>& types_;
  const CalibratedOptions& o_;
  const bool sequential_;
  ThreadPool& pool_;
  const std::function<void(const std::string&)>& log_;
  CalibratedOutput& out_;
  // AWQ clipping per matrix (search_awq_clip's ratios): applied to the
  // weights, or with GPTQ to the copies its block scales are chosen from.
  std::map<std::string, std::vector<float>> clip_;
};

void PassRunner::run(const std::vector<GroupWork>& pass) {
  std::vector<size_t> indices;
  int64_t bytes = 0;
  for (const GroupWork& w : pass) {
    indices.push_back(w.index);
    const int64_t cols = file_.tensor(groups_[w.index].matrices[0]).row_length();
    bytes += cols * cols * 4;
  }
  out_.report.hessian_bytes_peak = std::max(out_.report.hessian_bytes_peak, bytes);
  SteadyClock::time_point start = SteadyClock::now();
  // GPTQ's settings are chosen on chunks its factors did not see.
  const bool split = o_.methods.gptq && o_.gptq_candidates.size() > 1;
  HessianCollector collector(*o_.model, groups_, indices,
                             split ? (o_.spec.ctx + o_.spec.batch - 1) / o_.spec.batch : 0);
  calibrate(indices, groups_[pass[0].index].layer, collector);
  out_.report.calibration_seconds += seconds_since(start);
  start = SteadyClock::now();
  for (const GroupWork& w : pass) {
    if (w.awq) search_awq(w, *collector.find(w.index));
  }
  // Clipping after every factor of the pass is known: a matrix's stored
  // rows may be divided by the next group's factors.
  for (const GroupWork& w : pass) {
    if (w.awq && clip_steps(w) > 1) search_clip(w, *collector.find(w.index));
  }
  out_.report.awq_seconds += seconds_since(start);
  start = SteadyClock::now();
  for (const GroupWork& w : pass) {
    const InputHessian& h = *collector.find(w.index);
    if (out_.report.calibration_tokens == 0) out_.report.calibration_tokens = h.count();
    encode_group(w, h, collector.fitted(w.index), collector.held_out(w.index));
  }
  out_.report.gptq_seconds += seconds_since(start);
}

// One calibration run into the collector. Layer by layer, the matrices
// encoded so far run quantized and those after `layer` are skipped.
void PassRunner::calibrate(const std::vector<size_t>& indices, int64_t layer, HessianCollector& collector) {
  if (!sequential_) {
    run_calibration(*o_.model, o_.tokens, o_.spec, pool_, collector, {});
    return;
  }
  const gguf::GgufFile& model_file = o_.model->file();
  SequentialHook hook(collector);
  for (const auto& [name, bytes] : out_.encoded) {
    const gguf::TensorInfo& t = file_.tensor(name);
    hook.substitute(model_file.tensor(name).data,
                    kernels::WeightView{types_.at(name), bytes.data(), t.num_rows(), t.row_length(), nullptr},
                    find_factors(out_.scaling.col_scale, name), find_factors(out_.scaling.row_divide, name));
  }
  for (const InputGroup& g : groups_) {
    const bool later = layer >= 0 && (g.layer > layer || g.layer < 0);
    if (!later || std::find(indices.begin(), indices.end(), static_cast<size_t>(&g - groups_.data())) != indices.end())
      continue;
    for (const std::string& n : g.matrices) {
      if (!out_.encoded.contains(n)) hook.skip(model_file.tensor(n).data);
    }
  }
  run_calibration(*o_.model, o_.tokens, o_.spec, pool_, hook, {});
}

void PassRunner::search_awq(const GroupWork& w, const InputHessian& h) {
  const InputGroup& g = groups_[w.index];
  const int64_t cols = file_.tensor(g.matrices[0]).row_length();
  std::vector<std::vector<float>> weights(g.matrices.size());
  std::vector<AwqMatrix> mats;
  for (size_t i = 0; i < g.matrices.size(); ++i) {
    const gguf::TensorInfo& t = file_.tensor(g.matrices[i]);
    load_rows(t, 0, t.num_rows(), nullptr, nullptr, weights[i]);
    mats.push_back({types_.at(g.matrices[i]), weights[i].data(), t.num_rows()});
  }
  AwqOptions ao = o_.awq;
  ao.weighted = o_.methods.weighted;
  const AwqResult r = search_awq_scales(mats, cols, h.mean_full(), h.mean_abs(), h.mean_sq(), ao, pool_);
  for (const std::string& n : g.matrices) out_.scaling.col_scale[n] = r.scales;
  if (!g.fold_vector.empty()) out_.scaling.vector_divide[g.fold_vector] = r.scales;
  if (!g.fold_rows.empty()) out_.scaling.row_divide[g.fold_rows] = r.scales;
  if (log_) {
    log_(fmt::format("awq {}: alpha {:.2f}, output error {:.4g} -> {:.4g} ({:+.1f} %) on the rows searched",
                     g.matrices[0], r.alpha, r.plain_error, r.error,
                     r.plain_error > 0 ? 100.0 * (r.error / r.plain_error - 1.0) : 0.0));
  }
}

// AWQ's clipping of the group's matrices but attn_q and attn_k (as the
// paper's code: their products go through softmax(q k^T), which a per-
// matrix output error does not model).
void PassRunner::search_clip(const GroupWork& w, const InputHessian& h) {
  const InputGroup& g = groups_[w.index];
  const std::vector<double> hs = scaled_hessian(g, h);
  const std::vector<float> importance = rounding_importance(hs, h.cols());
  std::vector<float> rows;
  for (const std::string& n : g.matrices) {
    if (n.find("attn_q.") != std::string::npos || n.find("attn_k.") != std::string::npos) continue;
    const gguf::TensorInfo& t = file_.tensor(n);
    load_stored_rows(n, 0, t.num_rows(), rows, false);
    std::vector<float> ratios = search_awq_clip(types_.at(n), rows.data(), t.num_rows(), t.row_length(), hs,
                                                importance.empty() ? nullptr : importance.data(), clip_steps(w), pool_);
    out_.report.clipped_blocks += std::count_if(ratios.begin(), ratios.end(), [](float r) { return r < 1.0f; });
    out_.report.clip_blocks += static_cast<int64_t>(ratios.size());
    clip_[n] = std::move(ratios);
  }
}

// The rounding's weights with `imatrix` in the method: the diagonal of the
// (scaled) Hessian; empty without it.
std::vector<float> PassRunner::rounding_importance(const std::vector<double>& hs, int64_t cols) const {
  std::vector<float> importance;
  if (!o_.methods.weighted) return importance;
  importance.resize(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) importance[j] = static_cast<float>(hs[static_cast<size_t>(j * cols + j)]);
  return importance;
}

// The stored matrices multiply X / s (AWQ), whose Hessian is D^-1 H D^-1
// with D = diag(s).
std::vector<double> PassRunner::scaled_hessian(const InputGroup& g, const InputHessian& h) const {
  const int64_t cols = h.cols();
  const std::vector<float>* s = find_factors(out_.scaling.col_scale, g.matrices[0]);
  std::vector<double> hs = h.mean_full();
  if (s != nullptr) {
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j < cols; ++j) hs[static_cast<size_t>(i * cols + j)] /= double((*s)[i]) * (*s)[j];
    }
  }
  return hs;
}

// Rows [begin, end) of a matrix as they will be stored: AWQ factors applied
// (load_rows), then, with `clip`, its clipping.
void PassRunner::load_stored_rows(const std::string& name, int64_t begin, int64_t end, std::vector<float>& out,
                                  bool clip) const {
  load_rows(file_.tensor(name), begin, end, find_factors(out_.scaling.col_scale, name),
            find_factors(out_.scaling.row_divide, name), out);
  if (const std::vector<float>* ratios = clip_ratios(name); clip && ratios != nullptr)
    apply_awq_clip(types_.at(name), out.data(), begin, end - begin, file_.tensor(name).row_length(), *ratios);
}

const std::vector<float>* PassRunner::clip_ratios(const std::string& name) const {
  const auto it = clip_.find(name);
  return it == clip_.end() ? nullptr : &it->second;
}

void PassRunner::encode_group(const GroupWork& w, const InputHessian& h, const InputHessian* fitted,
                              const InputHessian* held_out) {
  const InputGroup& g = groups_[w.index];
  const int64_t cols = h.cols();
  std::vector<double> hs = scaled_hessian(g, h);
  const std::vector<float> importance = rounding_importance(hs, cols);
  const float* imp = importance.empty() ? nullptr : importance.data();
  std::optional<GptqFactor> factor;
  if (w.gptq) factor = choose_settings(g, hs, fitted, held_out, imp);
  for (const std::string& n : g.matrices) {
    out_.encoded[n] = encode_matrix(n, factor ? &*factor : nullptr, imp);
    out_.method[n] = method_name(w, o_.methods.weighted);
    ++out_.report.matrices;
  }
}

// GPTQ's damping and order for the group, measured on evenly spaced rows of
// each of its matrices (factors from the fitting half of the calibration
// inputs, loss on the held-out half when there is one), and the factor of
// the chosen settings from all of them.
GptqFactor PassRunner::choose_settings(const InputGroup& g, const std::vector<double>& hs, const InputHessian* fitted,
                                       const InputHessian* held_out, const float* importance) {
  const int64_t cols = file_.tensor(g.matrices[0]).row_length();
  std::vector<GptqSample> samples;
  if (o_.gptq_candidates.size() > 1) {
    for (const std::string& n : g.matrices) {
      GptqSample& s = samples.emplace_back();
      s.type = types_.at(n);
      std::vector<float> row;
      const std::vector<float>* ratios = clip_ratios(n);
      const int64_t blocks = cols / gguf::tensor_type_info(s.type).block_size;
      for (const int64_t r : evenly_spaced_rows(file_.tensor(n).num_rows(), o_.gptq_sample_rows)) {
        load_stored_rows(n, r, r + 1, row, false);
        s.rows.insert(s.rows.end(), row.begin(), row.end());
        if (ratios != nullptr)
          s.clip.insert(s.clip.end(), ratios->begin() + r * blocks, ratios->begin() + (r + 1) * blocks);
        ++s.n;
      }
    }
  }
  const bool split = fitted != nullptr && held_out != nullptr;
  std::vector<double> hs_check;
  if (split) hs_check = scaled_hessian(g, *held_out);
  GptqChoice c = choose_gptq(split ? scaled_hessian(g, *fitted) : hs, split ? &hs_check : nullptr, cols,
                             o_.gptq_candidates, samples, importance, pool_);
  const std::string key =
      fmt::format("damp {:g}, {}", c.settings.damp, c.settings.act_order ? "act-order" : "natural order");
  ++out_.report.gptq_choices[key];
  if (c.first_loss > 0.0) out_.report.gptq_search_gain += 1.0 - c.loss / c.first_loss;
  if (log_ && o_.gptq_candidates.size() > 1) {
    log_(fmt::format("gptq {}: {} ({} output error {:.4g}, {:+.1f} % against the first candidate)", g.matrices[0], key,
                     split ? "held-out" : "calibration", c.loss,
                     c.first_loss > 0 ? 100.0 * (c.loss / c.first_loss - 1.0) : 0.0));
  }
  if (!split) return std::move(c.factor);
  return gptq_factor(hs, cols, c.settings.damp, pool_, c.settings.act_order);
}

std::vector<uint8_t> PassRunner::encode_matrix(const std::string& name, const GptqFactor* factor,
                                               const float* importance) {
  const gguf::TensorInfo& t = file_.tensor(name);
  const TensorType type = types_.at(name);
  const int64_t cols = t.row_length(), rows = t.num_rows(), out_row = gguf::row_bytes(type, cols);
  std::vector<uint8_t> out(static_cast<size_t>(out_row * rows));
  std::vector<float> w;
  const std::vector<float>* ratios = clip_ratios(name);
  const int64_t blocks = cols / gguf::tensor_type_info(type).block_size;
  for (int64_t r0 = 0; r0 < rows; r0 += kRowChunk) {
    const int64_t r1 = std::min(rows, r0 + kRowChunk);
    load_stored_rows(name, r0, r1, w, factor == nullptr);
    uint8_t* dst = out.data() + r0 * out_row;
    if (factor != nullptr) {
      gptq_quantize(type, w.data(), r1 - r0, cols, *factor, importance, dst, pool_,
                    ratios == nullptr ? nullptr : ratios->data() + r0 * blocks);
    } else {
      pool_.parallel_for(r1 - r0, [&](int, int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          quantize_row_weighted(type, w.data() + r * cols, dst + r * out_row, cols, importance);
      });
    }
  }
  return out;
}

}  // namespace

std::string QuantMethods::name() const {
  std::string s;
  for (const auto& [on, n] : {std::pair{awq, "awq"}, std::pair{gptq, "gptq"}, std::pair{weighted, "imatrix"}}) {
    if (on) s += (s.empty() ? "" : "+") + std::string(n);
  }
  return s.empty() ? "rtn" : s;
}

std::optional<QuantMethods> parse_quant_methods(std::string_view text) {
  QuantMethods m;
  if (text == "rtn") return m;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t plus = std::min(text.find('+', pos), text.size());
    const std::string_view part = text.substr(pos, plus - pos);
    if (part == "awq") {
      m.awq = true;
    } else if (part == "gptq") {
      m.gptq = true;
    } else if (part == "imatrix") {
      m.weighted = true;
    } else {
      return std::nullopt;
    }
    pos = plus + 1;
  }
  return m;
}

CalibratedOutput quantize_calibrated(const gguf::GgufFile& file, const model::ModelConfig& config,
                                     const std::map<std::string, TensorType>& types, const CalibratedOptions& o,
                                     ThreadPool& pool, const std::function<void(const std::string&)>& log) {
  TM_CHECK(o.model != nullptr);
  const std::vector<InputGroup> groups = input_groups(file, config);
  std::vector<GroupWork> work;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (const std::optional<GroupWork> w = plan_group(groups[i], i, types, o.methods)) work.push_back(*w);
  }
  CalibratedOutput out;
  const bool sequential = o.methods.gptq && o.sequential;
  const std::vector<std::vector<GroupWork>> passes = split_passes(work, groups, file, o.memory_budget, sequential);
  out.report.passes = static_cast<int64_t>(passes.size());
  PassRunner runner(file, groups, types, o, sequential, pool, log, out);
  for (size_t p = 0; p < passes.size(); ++p) {
    if (log && passes.size() > 1)
      log(fmt::format("calibration pass {}/{}: {} input groups{}", p + 1, passes.size(), passes[p].size(),
                      sequential ? " (inputs from the layers encoded so far)" : ""));
    runner.run(passes[p]);
  }
  return out;
}

}  // namespace tokenmill::quant
