// Weight runtimes selected at load time (see quant_target.h): a MatmulHook
// that runs a model's products with the W8A8 integer kernel (Q8_0 weights,
// per-token INT8 activations) or with FP8 E4M3 weights packed from the
// file's BF16 values. Products the runtime does not cover (other types, rows
// not a multiple of 32) fall through to kernels::matmul.
//
// Thread-safety: as Model::forward (one caller); owns the packed weights.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/fp8.h"
#include "model/matmul_hook.h"
#include "model/model.h"
#include "quant/quant_target.h"

namespace tokenmill::quant {

class WeightRuntimeHook : public model::MatmulHook {
 public:
  // Builds the runtime for `model` (which must outlive it). FP8 packs every
  // BF16 matrix with 32-multiple rows whose values lie exactly on the FP8
  // block grid (checked per tensor by unpacking; others stay dense). Cost
  // for FP8: one pass over those weights; memory ~1.03 bytes per packed weight.
  WeightRuntimeHook(const model::Model& model, WeightRuntime runtime);

  bool matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) override;

  WeightRuntime runtime() const { return runtime_; }
  int64_t num_converted() const { return num_converted_; }  // matrices this runtime runs
  int64_t num_dense() const { return num_dense_; }          // matrices left to kernels::matmul
  // Bytes of weights as this runtime holds them (packed FP8, or the file's
  // bytes for W8A8 and dense matrices), for the memory column of the card.
  int64_t weight_bytes() const { return weight_bytes_; }
  uint64_t num_calls() const { return num_calls_; }

 private:
  WeightRuntime runtime_;
  std::unordered_map<const void*, std::vector<kernels::Fp8Block>> fp8_;  // by WeightView::data
  std::unordered_map<const void*, bool> w8a8_;
  int64_t num_converted_ = 0, num_dense_ = 0, weight_bytes_ = 0;
  uint64_t num_calls_ = 0;
};

// The runtime a model file asks for (tokenmill.weights.runtime), or dense.
WeightRuntime requested_runtime(const model::Model& model);

// "auto" (the file's), "dense", "w8a8", "fp8_e4m3": a hook, or null for
// dense. Throws Error for an unknown name or a runtime the file cannot use
// (W8A8 on a model without Q8_0 matrices, FP8 without BF16 ones).
std::unique_ptr<WeightRuntimeHook> make_weight_runtime(const model::Model& model, const std::string& name);

}  // namespace tokenmill::quant
