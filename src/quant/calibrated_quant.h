// Calibrated quantization of a model's weight matrices: AWQ scaling
// (awq.h), GPTQ error compensation (gptq.h) and importance-weighted scale
// search (importance_quant.h), alone or combined, driven by the input
// statistics of a calibration run (hessian_collector.h).
//
// Memory is bounded: the input Hessians (4 cols^2 bytes per input group)
// are collected for as many whole layers as fit `memory_budget` at a time,
// one calibration run per such pass, and released once the pass's matrices
// are encoded (whole layers, because a layer's ffn_down factors divide its
// ffn_up rows). Weights are dequantized in chunks of rows, except for a
// group being searched by AWQ.
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
  double damp = 0.01;                 // GPTQ damping, fraction of the mean diagonal
  AwqOptions awq;
};

struct CalibratedReport {
  int64_t passes = 0;
  int64_t calibration_tokens = 0;  // per pass
  int64_t hessian_bytes_peak = 0;
  double calibration_seconds = 0.0;  // forward passes and Hessian accumulation
  double awq_seconds = 0.0;
  double gptq_seconds = 0.0;  // factorisation and quantization (or the weighted rounding without GPTQ)
  int64_t matrices = 0;       // encoded here
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
