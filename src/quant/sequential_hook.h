// The matmul hook of layer-by-layer (sequential) calibration, as GPTQ does
// it: the Hessians of layer L come from the inputs that layers 0..L-1
// produce once quantized, so that each layer's rounding compensates for the
// error already made before it. While layer L is calibrated:
//   - products of matrices already encoded run on their encoded bytes, in
//     the float model's basis (the input divided by the matrix's AWQ column
//     factors, the output multiplied back by its row divisors; the model's
//     norms and neighbours are not rescaled during calibration);
//   - products of the layers after L (and the classifier, unless it is
//     being calibrated) write zeros: nothing after L is used, and skipping
//     them makes a pass cost in proportion to L;
//   - everything else goes to `inner` (the Hessian collector), then to the
//     model's own kernels.
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kernels/matmul.h"
#include "model/matmul_hook.h"

namespace tokenmill::quant {

class SequentialHook : public model::MatmulHook {
 public:
  explicit SequentialHook(model::MatmulHook& inner) : inner_(inner) {}

  // `source`: the model's data pointer of the matrix; `encoded`: its
  // quantized bytes as a view (kept alive by the caller); col_scale,
  // row_divide: its AWQ factors or null.
  void substitute(const void* source, const kernels::WeightView& encoded, const std::vector<float>* col_scale,
                  const std::vector<float>* row_divide);
  void skip(const void* source) { skipped_.insert(source); }

  bool matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) override;

 private:
  struct Substitute {
    kernels::WeightView encoded;
    const std::vector<float>* col_scale;
    const std::vector<float>* row_divide;
  };
  model::MatmulHook& inner_;
  std::unordered_map<const void*, Substitute> substitutes_;
  std::unordered_set<const void*> skipped_;
  std::vector<float> scaled_;  // the input divided by the column factors
};

}  // namespace tokenmill::quant
