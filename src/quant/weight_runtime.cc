#include "quant/weight_runtime.h"

#include <cstring>

#include "kernels/quant.h"
#include "kernels/w8a8.h"
#include "util/error.h"
#include "util/fp16.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;

// Every distinct weight matrix the forward pass multiplies by.
std::vector<kernels::WeightView> matrices(const model::ModelWeights& w) {
  std::vector<kernels::WeightView> out = {w.output};
  for (const model::LayerWeights& l : w.layers) {
    for (const kernels::WeightView& v : {l.wq, l.wk, l.wv, l.wo, l.w_gate, l.w_up, l.w_down}) out.push_back(v);
  }
  return out;
}

// Packs a BF16 matrix into FP8 blocks; false when a value is off the grid.
bool pack_fp8(const kernels::WeightView& w, std::vector<kernels::Fp8Block>& out) {
  const int64_t nb = w.cols / kernels::kFp8Block;
  out.resize(static_cast<size_t>(w.rows * nb));
  std::vector<float> row(static_cast<size_t>(w.cols)), back(row.size());
  const auto* src = static_cast<const uint16_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) row[c] = bf16_to_fp32(src[r * w.cols + c]);
    kernels::quantize_row_fp8(row.data(), out.data() + r * nb, w.cols);
    kernels::dequantize_row_fp8(out.data() + r * nb, back.data(), w.cols);
    if (std::memcmp(row.data(), back.data(), row.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace

WeightRuntimeHook::WeightRuntimeHook(const model::Model& model, WeightRuntime runtime) : runtime_(runtime) {
  for (const kernels::WeightView& w : matrices(model.weights())) {
    if (fp8_.contains(w.data) || w8a8_.contains(w.data)) continue;
    const int64_t file_bytes = gguf::row_bytes(w.type, w.cols) * w.rows;
    bool converted = false;
    if (runtime == WeightRuntime::kFp8 && w.type == TensorType::BF16 && w.cols % kernels::kFp8Block == 0) {
      std::vector<kernels::Fp8Block> blocks;
      if (pack_fp8(w, blocks)) {
        weight_bytes_ += static_cast<int64_t>(blocks.size() * sizeof(kernels::Fp8Block));
        fp8_.emplace(w.data, std::move(blocks));
        converted = true;
      }
    } else if (runtime == WeightRuntime::kW8A8 && w.type == TensorType::Q8_0) {
      w8a8_.emplace(w.data, true);
      weight_bytes_ += file_bytes;
      converted = true;
    }
    if (!converted) weight_bytes_ += file_bytes;
    (converted ? num_converted_ : num_dense_) += 1;
  }
}

bool WeightRuntimeHook::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y,
                               ThreadPool& pool) {
  if (runtime_ == WeightRuntime::kFp8) {
    const auto it = fp8_.find(w.data);
    if (it == fp8_.end()) return false;
    kernels::matmul_fp8({it->second.data(), w.rows, w.cols}, x, num_tokens, y, pool);
  } else {
    if (!w8a8_.contains(w.data)) return false;
    kernels::matmul_w8a8(w, x, num_tokens, y, pool);
  }
  ++num_calls_;
  return true;
}

WeightRuntime requested_runtime(const model::Model& model) {
  const std::string name = model.file().get_string_or(kRuntimeKey, "dense");
  const std::optional<WeightRuntime> r = runtime_from_name(name);
  if (!r) fail("{}: unknown {} '{}'", model.file().name(), kRuntimeKey, name);
  return *r;
}

std::unique_ptr<WeightRuntimeHook> make_weight_runtime(const model::Model& model, const std::string& name) {
  WeightRuntime r = WeightRuntime::kDense;
  if (name == "auto") {
    r = requested_runtime(model);
  } else if (const std::optional<WeightRuntime> parsed = runtime_from_name(name)) {
    r = *parsed;
  } else {
    fail("--runtime '{}': use auto, dense, w8a8 or fp8_e4m3", name);
  }
  if (r == WeightRuntime::kDense) return nullptr;
  auto hook = std::make_unique<WeightRuntimeHook>(model, r);
  if (hook->num_converted() == 0) {
    fail("{}: the {} runtime needs {} weight matrices and this model has none (quantize with --type {})",
         model.file().name(), runtime_name(r), r == WeightRuntime::kW8A8 ? "Q8_0" : "FP8-grid BF16",
         r == WeightRuntime::kW8A8 ? "W8A8" : "FP8_E4M3");
  }
  return hook;
}

}  // namespace tokenmill::quant
