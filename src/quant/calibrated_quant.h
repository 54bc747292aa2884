// Calibrated quantization of a model's weight matrices: AWQ scaling
// (awq.h), GPTQ error compensation (gptq.h) and importance-weighted scale
// search (importance_quant.h), alone or combined, driven by the input
// statistics of a calibration run (hessian_collector.h).
//
// With GPTQ the calibration is layer by layer, as the paper's: one pass
// per layer, whose Hessians come from the inputs the already-encoded layers
// before it produce (sequential_hook.h), so each layer compensates for the
// rounding error made upstream; a pass costs a forward pass up to its
// layer, about n_layer / 2 forward passes in all. Without GPTQ (or with
// `sequential` off) the input Hessians are those of the float model,
// collected for as many whole layers as fit `memory_budget` at a time, one
// calibration run per such pass. Either way a pass's Hessians are released
// once its matrices are encoded (whole layers, because a layer's ffn_down
// factors divide its ffn_up rows). Weights are dequantized in chunks of
// rows, except for a group being searched by AWQ.
//
// A tied classifier (token_embd used as output) is also the embedding table,
// whose lookups see none of the classifier's inputs: it gets neither AWQ nor
// GPTQ, only importance-weighted rounding when asked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "model/model.h"
#include "quant/awq.h"
#include "quant/calibrator.h"
#include "quant/gptq_search.h"
#include "quant/smoothquant.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {

struct QuantMethods {
  bool awq = false;
  bool gptq = false;
  bool weighted = false;  // importance-weighted scale search ("imatrix")
  bool calibrated() const { return awq || gptq; }
  std::string name() const;  // "awq+gptq+imatrix", "rtn" when none
};

// '+'-separated subset of {awq, gptq, imatrix}, or "rtn" (none); nullopt
// when unknown.
std::optional<QuantMethods> parse_quant_methods(std::string_view text);

struct CalibratedOptions {
  QuantMethods methods;
  model::Model* model = nullptr;    // the input model, loaded
  std::span<const int32_t> tokens;  // calibration tokens, tokens[0] = BOS
  CalibrationSpec spec;
  int64_t memory_budget = 2LL << 30;  // bytes of Hessians held at once
  // GPTQ's damping and column order, chosen per group on the calibration
  // loss among these (gptq_search.h); one candidate: used as it is.
  std::vector<GptqSettings> gptq_candidates = default_gptq_candidates();
  int64_t gptq_sample_rows = 128;  // rows per matrix the candidates are measured on
  bool sequential = true;          // GPTQ's Hessians layer by layer from quantized inputs
  AwqOptions awq;
};

struct CalibratedReport {
  int64_t passes = 0;
  int64_t calibration_tokens = 0;  // per pass
  int64_t hessian_bytes_peak = 0;
  double calibration_seconds = 0.0;  // forward passes and Hessian accumulation
  double awq_seconds = 0.0;
  double gptq_seconds = 0.0;  // settings search, factorisation and quantization (or the weighted rounding)
  int64_t matrices = 0;       // encoded here
  std::map<std::string, int64_t> gptq_choices;  // "damp 0.01, act-order" -> groups that chose it
  double gptq_search_gain = 0.0;                // sum over groups of 1 - chosen loss / first candidate's loss
  int64_t clipped_blocks = 0;                   // AWQ clipping: blocks whose limit is below their max |w|
  int64_t clip_blocks = 0;                      // ... of the blocks searched
};

struct CalibratedOutput {
  std::map<std::string, std::vector<uint8_t>> encoded;  // matrix -> its bytes in the target type
  std::map<std::string, std::string> method;            // matrix -> what was applied ("awq+gptq" ...)
  SmoothingPlan scaling;                                // AWQ factors, incl. folds into vectors and rows
  CalibratedReport report;
};

// `types`: every matrix to convert and its target type. Matrices of groups
// the methods cannot serve (a type without a block grid for GPTQ, members
// not converted) are left out of `encoded` for the caller's ordinary path.
CalibratedOutput quantize_calibrated(const gguf::GgufFile& file, const model::ModelConfig& config,
                                     const std::map<std::string, gguf::TensorType>& types,
                                     const CalibratedOptions& options, ThreadPool& pool,
                                     const std::function<void(const std::string&)>& log);

}  // namespace tokenmill::quant
