// Collects an InputHessian for chosen input groups (input_groups.h) over a
// calibration run (calibrator.h run_calibration). A group's matrices are
// called with the same input, so only its first matrix's calls are
// recorded. Memory is 4 cols^2 bytes per chosen group: callers split the
// groups of large models over several runs (calibrated_quant.cc).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <unordered_map>

#include "model/matmul_hook.h"
#include "model/model.h"
#include "quant/input_groups.h"
#include "quant/input_hessian.h"

namespace tokenmill::quant {

class HessianCollector : public model::MatmulHook {
 public:
  // groups: indices into `all` to record.
  HessianCollector(const model::Model& model, const std::vector<InputGroup>& all, std::span<const size_t> groups);
  bool matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) override;

  // The statistics of group `index` (an index into `all`); null when it was
  // not chosen.
  InputHessian* find(size_t index);

 private:
  std::unordered_map<const void*, size_t> leaders_;  // first matrix's data -> group index
  std::map<size_t, std::unique_ptr<InputHessian>> hessians_;
};

}  // namespace tokenmill::quant
