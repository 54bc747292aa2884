// GPTQ's settings chosen per input group on the calibration loss: for each
// candidate (damping, column order) measured, the group's sampled rows are
// quantized with that factor, and the output error sum_r d_r^T H d_r
// (output_error.h; d = target - result, H the undamped calibration
// Hessian) decides. The chosen candidate's factor is
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
  GptqFactor factor;  // of the chosen settings, made from h
  GptqSettings settings;
  double loss = 0.0;        // output error of the chosen settings on the samples
  double first_loss = 0.0;  // ... of the first candidate (the report's reference)
};

// h: [cols, cols] undamped Hessian (full, double) the factors are made
// from; held_out: the Hessian of other calibration inputs the loss is
// measured with (null: h itself). Measured in-sample, the loss always
// favours the least damping, which overfits when the calibration has few
// tokens for the width (Gemma 3 270M's ffn_down, 2048 wide, on 1100
// tokens: worse than no GPTQ); on held-out inputs it does not.
// importance [cols] or null. The search is by coordinates: every order at
// the first candidate's damping, then the other dampings in the order that
// won (with the defaults, 4 of the 6 candidates are measured). With one
// candidate nothing is sampled (loss 0). Cost per candidate measured: one
// factorisation (~cols^3 / 3 multiply-adds, the bulk), plus GPTQ and the
// output error of the sampled rows. Throws Error when no candidate is
// given.
GptqChoice choose_gptq(const std::vector<double>& h, const std::vector<double>* held_out, int64_t cols,
                       std::span<const GptqSettings> candidates, std::span<const GptqSample> samples,
                       const float* importance, ThreadPool& pool);

}  // namespace tokenmill::quant
