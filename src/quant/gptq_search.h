// GPTQ's settings chosen per input group on the calibration loss, as the
// damping is in practice: for each candidate (damping, column order) the
// group's sampled rows are quantized with that factor, and the output
// error sum_r d_r^T H d_r (output_error.h; d = target - result, H the
// undamped calibration Hessian) decides. The chosen candidate's factor is
// returned for quantizing the whole matrices.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/gptq.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {

struct GptqSettings {
  double damp = 0.01;      // fraction of H's mean diagonal
  bool act_order = false;  // columns by decreasing H diagonal, static block grids
};

// The candidates tried by default: damping 0.001, 0.01, 0.1, each in
// natural and in act-order.
std::vector<GptqSettings> default_gptq_candidates();

// The candidates of `--gptq-damp` ("auto" or a number in [0, 1]) and
// `--gptq-order` ("auto", "natural" or "act-order"): each damping with each
// order. Throws Error naming the bad value.
std::vector<GptqSettings> parse_gptq_candidates(std::string_view damp, std::string_view order);

// "damp 0.01 natural, damp 0.01 act-order, ..." (the file's metadata).
std::string gptq_candidates_name(std::span<const GptqSettings> candidates);

// Rows of one matrix of the group to try the candidates on.
struct GptqSample {
  gguf::TensorType type = gguf::TensorType::F32;
  std::vector<float> rows;  // [n, cols]: the values the quantized rows should reproduce
  int64_t n = 0;
  std::vector<float> clip;  // [n, blocks] AWQ clipping ratios for the block scales, or empty
};

struct GptqChoice {
  GptqFactor factor;  // of the chosen settings
  GptqSettings settings;
  double loss = 0.0;        // output error of the chosen settings on the samples
  double first_loss = 0.0;  // ... of the first candidate (the report's reference)
};

// h: [cols, cols] undamped Hessian (full, double); importance [cols] or
// null. With one candidate nothing is sampled (loss 0). Cost per
// candidate: one factorisation, plus GPTQ and the output error of the
// sampled rows. Throws Error when no candidate is given.
GptqChoice choose_gptq(const std::vector<double>& h, int64_t cols, std::span<const GptqSample> samples,
                       const float* importance, std::span<const GptqSettings> candidates, ThreadPool& pool);

}  // namespace tokenmill::quant
