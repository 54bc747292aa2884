#include "quant/gptq_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "kernels/quant.h"
#include "quant/output_error.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

// Output error of GPTQ with factor f on every sample.
double sample_loss(const std::vector<float>& hf, int64_t cols, std::span<const GptqSample> samples,
                   const float* importance, const GptqFactor& f, ThreadPool& pool) {
  double loss = 0.0;
  for (const GptqSample& s : samples) {
    const int64_t row_bytes = gguf::row_bytes(s.type, cols);
    std::vector<float> w = s.rows;
    std::vector<uint8_t> q(static_cast<size_t>(row_bytes * s.n));
    gptq_quantize(s.type, w.data(), s.n, cols, f, importance, q.data(), pool, s.clip.empty() ? nullptr : s.clip.data());
    // w becomes the difference target - result.
    std::vector<float> r(static_cast<size_t>(cols));
    for (int64_t i = 0; i < s.n; ++i) {
      kernels::dequantize_row_ref(s.type, q.data() + i * row_bytes, r.data(), cols);
      for (int64_t j = 0; j < cols; ++j) w[static_cast<size_t>(i * cols + j)] = s.rows[i * cols + j] - r[j];
    }
    loss += output_error(hf, cols, w.data(), s.n, pool);
  }
  return loss;
}

}  // namespace

std::vector<GptqSettings> default_gptq_candidates() { return parse_gptq_candidates("auto", "auto"); }

std::vector<GptqSettings> parse_gptq_candidates(std::string_view damp, std::string_view order) {
  std::vector<double> damps{0.01, 0.001, 0.1};
  if (damp != "auto") {
    double v = -1.0;
    const auto [end, ec] = std::from_chars(damp.data(), damp.data() + damp.size(), v);
    if (ec != std::errc() || end != damp.data() + damp.size() || !(v >= 0.0 && v <= 1.0))
      fail("--gptq-damp: '{}' is neither auto nor a number in [0, 1]", damp);
    damps = {v};
  }
  std::vector<bool> orders{false, true};
  if (order == "natural") {
    orders = {false};
  } else if (order == "act-order") {
    orders = {true};
  } else if (order != "auto") {
    fail("--gptq-order: '{}' is not auto, natural or act-order", order);
  }
  std::vector<GptqSettings> c;
  for (const double d : damps) {
    for (const bool o : orders) c.push_back({d, o});
  }
  return c;
}

std::string gptq_candidates_name(std::span<const GptqSettings> candidates) {
  std::string s;
  for (const GptqSettings& c : candidates)
    s += fmt::format("{}damp {:g} {}", s.empty() ? "" : ", ", c.damp, c.act_order ? "act-order" : "natural");
  return s;
}

GptqChoice choose_gptq(const std::vector<double>& h, const std::vector<double>* held_out, int64_t cols,
                       std::span<const GptqSettings> candidates, std::span<const GptqSample> samples,
                       const float* importance, ThreadPool& pool) {
  if (candidates.empty()) fail("GPTQ: no damping/order candidate to choose from");
  GptqChoice best;
  if (candidates.size() == 1) {
    best.settings = candidates[0];
    best.factor = gptq_factor(h, cols, best.settings.damp, pool, best.settings.act_order);
    return best;
  }
  const std::vector<double>& judge = held_out != nullptr ? *held_out : h;
  const std::vector<float> hf(judge.begin(), judge.end());
  bool first = true;
  const auto measure = [&](const GptqSettings& c) {
    GptqFactor f = gptq_factor(h, cols, c.damp, pool, c.act_order);
    const double loss = sample_loss(hf, cols, samples, importance, f, pool);
    if (first) best.first_loss = loss;
    if (first || loss < best.loss) {
      best.loss = loss;
      best.settings = c;
      best.factor = std::move(f);
    }
    first = false;
  };
  // The order first, at the first candidate's damping; then the other
  // dampings in the order chosen (each factorisation is the search's cost).
  const double damp0 = candidates[0].damp;
  for (const GptqSettings& c : candidates) {
    if (c.damp == damp0) measure(c);
  }
  const bool order = best.settings.act_order;
  double lo = damp0, hi = damp0;
  for (const GptqSettings& c : candidates) {
    if (c.damp == damp0 || c.act_order != order) continue;
    measure(c);
    lo = std::min(lo, c.damp);
    hi = std::max(hi, c.damp);
  }
  // A damping at the edge of the candidates wins: go on tenfold that way
  // while it keeps winning (few calibration tokens for the width want
  // more damping than any fixed grid offers), up to 1.
  if (lo != hi) {
    for (double d = best.settings.damp; d == hi && d < 1.0;) {
      hi = d = std::min(1.0, d * 10.0);
      measure({d, order});
      d = best.settings.damp;
    }
    for (double d = best.settings.damp; d == lo && d > 1e-6;) {
      lo = d = d / 10.0;
      measure({d, order});
      d = best.settings.damp;
    }
  }
  return best;
}

}  // namespace tokenmill::quant
