// `tokenmill quantize`: reads a GGUF model, re-encodes every weight matrix
// in the target's types (tensor_policy.h), copies everything else, and writes
// a new GGUF atomically (PATH.tmp, then rename): on any error no file is
// left under the output name, and the input is never touched.
//
// Refused with a clear Error before anything is written: an unknown target,
// an unreadable or malformed input, an architecture tokenmill cannot run,
// missing or misshapen tensors, an already-quantized source without
// allow_requantize (with it: a warning, since errors of both quantizations
// add up), an imatrix that does not match the model, output == input.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/calibrated_quant.h"
#include "quant/quant_target.h"

namespace tokenmill::quant {

struct QuantizeOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string imatrix_path;       // empty: none
  bool keep_output_f16 = false;   // the classifier stays F16
  bool dry_run = false;           // plan and report only; no file written
  bool allow_requantize = false;  // accept an already-quantized source
  float smooth_alpha = 0.5f;      // SmoothQuant migration strength (W8A8 with an imatrix)
  int num_threads = 0;            // 0: all cores
  // Calibrated methods (calibrated_quant.h): "rtn", or a '+'-joined subset
  // of awq, gptq, imatrix. Empty: "imatrix" with an imatrix file, else rtn.
  // awq and gptq need `calibration` (model = the input, loaded, and tokens).
  std::string method;
  CalibratedOptions calibration;
  std::string calibration_name;  // recorded in the file's metadata
};

struct TensorPlan {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order
  gguf::TensorType from = gguf::TensorType::F32;
  gguf::TensorType to = gguf::TensorType::F32;
  bool convert = false;     // false: bytes copied unchanged
  bool fp8_grid = false;    // rounded to the FP8 block grid (FP8 target)
  bool importance = false;  // quantized with imatrix weights
  bool smoothed = false;    // SmoothQuant (or AWQ) factors applied
  std::string method;       // calibrated method applied ("awq+gptq" ...), if any
  std::string note;         // fallback explanation, if any
  int64_t bytes = 0;        // output bytes
};

struct QuantizeResult {
  QuantTarget target;
  std::vector<TensorPlan> tensors;
  std::vector<std::string> warnings;  // requantizing, missing imatrix entries ...
  int64_t input_tensor_bytes = 0;
  int64_t output_tensor_bytes = 0;
  int64_t num_parameters = 0;     // elements of the weight matrices
  int64_t matrix_bytes = 0;       // output bytes of the weight matrices
  int64_t output_file_bytes = 0;  // 0 for a dry run
  double seconds = 0.0;
  QuantMethods methods;
  std::optional<CalibratedReport> calibration;  // when awq or gptq ran
};

// Plans (and unless dry_run, writes) the quantized model. `log` receives
// progress lines and the fallback notes as they happen (may be empty).
QuantizeResult quantize_model(const QuantizeOptions& options, const std::function<void(const std::string&)>& log);

// The dry-run table: one line per tensor (name, shape, from -> to, MB, note)
// and totals with bits per weight.
std::string format_plan(const QuantizeResult& result);

}  // namespace tokenmill::quant
