#include "quant/calibrator.h"

#include <algorithm>
#include <vector>

#include "model/single_sequence.h"
#include "util/error.h"

namespace tokenmill::quant {

ImatrixCollector::ImatrixCollector(const model::Model& model) {
  for (const gguf::TensorInfo& t : model.file().tensors()) names_.emplace(t.data, t.name);
}

bool ImatrixCollector::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float*, ThreadPool&) {
  const auto it = names_.find(w.data);
  if (it != names_.end()) imatrix_.add(it->second, x, num_tokens, w.cols);
  return false;
}

int64_t run_calibration(model::Model& model, std::span<const int32_t> tokens, const CalibrationSpec& spec,
                        ThreadPool& pool, model::MatmulHook& hook,
                        const std::function<void(int64_t, int64_t)>& progress) {
  if (tokens.size() < 2) fail("calibration needs at least 2 tokens, got {}", tokens.size());
  if (spec.ctx < 2 || spec.ctx > model.config().n_ctx_train)
    fail("--ctx {} is outside [2, {}] (the model's training context)", spec.ctx, model.config().n_ctx_train);
  if (spec.batch < 1) fail("--batch must be >= 1");
  const int64_t per_chunk = spec.ctx - 1;
  int64_t total = (static_cast<int64_t>(tokens.size()) - 1 + per_chunk - 1) / per_chunk;
  if (spec.max_chunks > 0) total = std::min(total, spec.max_chunks);
  model.set_matmul_hook(&hook);
  try {
    std::vector<float> logits;
    for (int64_t c = 0; c < total; ++c) {
      const int64_t begin = 1 + c * per_chunk;
      const int64_t end = std::min<int64_t>(begin + per_chunk, static_cast<int64_t>(tokens.size()));
      std::vector<int32_t> in = {tokens[0]};
      in.insert(in.end(), tokens.begin() + begin, tokens.begin() + end);
      model::SingleSequence seq(model, static_cast<int64_t>(in.size()), kv::KvDtype::F32);
      for (size_t pos = 0; pos < in.size(); pos += static_cast<size_t>(spec.batch)) {
        const size_t n = std::min(in.size() - pos, static_cast<size_t>(spec.batch));
        seq.forward({in.data() + pos, n}, /*all_logits=*/true, logits, pool);
      }
      if (progress) progress(c + 1, total);
    }
  } catch (...) {
    model.set_matmul_hook(nullptr);
    throw;
  }
  model.set_matmul_hook(nullptr);
  return total;
}

Imatrix calibrate(model::Model& model, std::span<const int32_t> tokens, const CalibrationSpec& spec, ThreadPool& pool,
                  const std::function<void(int64_t, int64_t)>& progress) {
  ImatrixCollector collector(model);
  const int64_t total = run_calibration(model, tokens, spec, pool, collector, progress);
  Imatrix out = std::move(collector.imatrix());
  out.chunk_count = total;
  out.chunk_size = spec.ctx;
  return out;
}

}  // namespace tokenmill::quant
