#include "quant/hessian_collector.h"

namespace tokenmill::quant {

HessianCollector::HessianCollector(const model::Model& model, const std::vector<InputGroup>& all,
                                   std::span<const size_t> groups) {
  for (const size_t g : groups) {
    const gguf::TensorInfo& t = model.file().tensor(all[g].matrices[0]);
    leaders_.emplace(t.data, g);
    hessians_.emplace(g, std::make_unique<InputHessian>(t.row_length()));
  }
}

bool HessianCollector::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float*,
                              ThreadPool& pool) {
  const auto it = leaders_.find(w.data);
  if (it != leaders_.end()) hessians_.at(it->second)->add(x, num_tokens, pool);
  return false;
}

InputHessian* HessianCollector::find(size_t index) {
  const auto it = hessians_.find(index);
  return it == hessians_.end() ? nullptr : it->second.get();
}

}  // namespace tokenmill::quant
