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
  // groups: indices into `all` to record. held_out_every > 0: the calls
  // alternate in runs of that many (one calibration chunk's forward calls)
  // between a fitting half and a held-out half, so that a choice made on
  // the calibration data (GPTQ's damping) can be checked on inputs its fit
  // did not see; 0: one collection.
  HessianCollector(const model::Model& model, const std::vector<InputGroup>& all, std::span<const size_t> groups,
                   int64_t held_out_every = 0);
  bool matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) override;

  // The statistics of group `index` (an index into `all`) over every call
  // (the two halves merged on first use); null when it was not chosen.
  InputHessian* find(size_t index);
  // The fitting and the held-out half; null without a split, or when the
  // held-out half saw nothing (a single chunk).
  const InputHessian* fitted(size_t index) const;
  const InputHessian* held_out(size_t index) const;

 private:
  struct Entry {
    std::unique_ptr<InputHessian> fit, check, merged;
    int64_t calls = 0;
  };
  int64_t held_out_every_;
  std::unordered_map<const void*, size_t> leaders_;  // first matrix's data -> group index
  std::map<size_t, Entry> entries_;
};
}  // namespace tokenmill::quant
