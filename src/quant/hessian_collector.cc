#include "quant/hessian_collector.h"

namespace tokenmill::quant {

HessianCollector::HessianCollector(const model::Model& model, const std::vector<InputGroup>& all,
                                   std::span<const size_t> groups, int64_t held_out_every)
    : held_out_every_(held_out_every) {
  for (const size_t g : groups) {
    const gguf::TensorInfo& t = model.file().tensor(all[g].matrices[0]);
    leaders_.emplace(t.data, g);
    Entry& e = entries_[g];
    e.fit = std::make_unique<InputHessian>(t.row_length());
    if (held_out_every_ > 0) e.check = std::make_unique<InputHessian>(t.row_length());
  }
}

bool HessianCollector::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float*,
                              ThreadPool& pool) {
  const auto it = leaders_.find(w.data);
  if (it == leaders_.end()) return false;
  Entry& e = entries_.at(it->second);
  const bool check = held_out_every_ > 0 && (e.calls++ / held_out_every_) % 2 == 1;
  (check ? e.check : e.fit)->add(x, num_tokens, pool);
  return false;
}

InputHessian* HessianCollector::find(size_t index) {
  const auto it = entries_.find(index);
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second;
  if (e.check == nullptr) return e.fit.get();
  if (e.merged == nullptr) {
    e.merged = std::make_unique<InputHessian>(e.fit->cols());
    e.merged->merge(*e.fit);
    e.merged->merge(*e.check);
  }
  return e.merged.get();
}

const InputHessian* HessianCollector::fitted(size_t index) const {
  const auto it = entries_.find(index);
  return it == entries_.end() || held_out(index) == nullptr ? nullptr : it->second.fit.get();
}

const InputHessian* HessianCollector::held_out(size_t index) const {
  const auto it = entries_.find(index);
  if (it == entries_.end() || it->second.check == nullptr || it->second.check->count() == 0) return nullptr;
  return it->second.check.get();
}

}  // namespace tokenmill::quant
