// A LoRA adapter: low-rank weight deltas for some of a base model's linear
// layers, W' = W + scale * B A, read from a GGUF adapter file as llama.cpp's
// converter writes it (general.type = "adapter", adapter.type = "lora",
// adapter.lora.alpha; tensors "<base tensor name>.lora_a" [rank, n_in] and
// "<base tensor name>.lora_b" [n_out, rank] as matrices, i.e. GGUF dims
// [n_in, rank] and [rank, n_out]).
//
// An adapter is bound to one loaded base Model: load() checks the
// architecture and every shape against it and keeps views into its own
// mapped file (nothing is merged into the base weights, so one base serves
// many adapters at once; model.h SequenceChunk::adapter picks one per
// chunk). Immutable after load, so shared freely between threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/matmul.h"

namespace tokenmill::model {

class Model;

// The linear layers of a decoder layer an adapter can change.
enum class LoraSlot : uint8_t { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr size_t kNumLoraSlots = 7;

// One adapted matrix: delta(x) = scale * B (A x). A: [rank, n_in], B:
// [n_out, rank] as WeightViews (any type kernels::matmul takes). For a base
// tensor fused in the file (phi3 attn_qkv, ffn_up), each slot's B is its
// row range of the fused tensor's B, and A is shared.
struct LoraPair {
  kernels::WeightView a;
  kernels::WeightView b;
  float scale = 0.0f;  // user scale * alpha / rank (user scale alone when alpha is 0, as llama.cpp)
  bool present() const { return a.data != nullptr; }
};

class LoraAdapter {
 public:
  // Maps `path` and binds it to `base`. `name` is how requests pick it
  // (may be empty for the command-line tools); `user_scale` multiplies
  // every delta (llama.cpp's --lora-scaled). Throws Error naming the file
  // and the problem: not an adapter, not LoRA, another architecture, a
  // tensor the base model lacks or cannot adapt (token embedding), shapes
  // that do not match the base, a lora_a without its lora_b, an unsupported
  // type, a model split over ranks.
  static std::shared_ptr<const LoraAdapter> load(const std::string& path, const Model& base, std::string name = {},
                                                 float user_scale = 1.0f);
  // The same for a file already parsed (gguf::GgufFile::parse: its bytes
  // must outlive the adapter); path() is the file's name. For fuzzing.
  static std::shared_ptr<const LoraAdapter> bind(gguf::GgufFile file, const Model& base, std::string name = {},
                                                 float user_scale = 1.0f);

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  // Hex hash of everything that shapes the deltas: alpha, the user scale
  // and every tensor's name, type, shape and bytes. Two files with the same
  // contents have the same identity, whatever their names (prefix-cache
  // namespace, engine/cache_namespace.h).
  const std::string& identity() const { return identity_; }
  const Model* base() const { return base_; }
  float alpha() const { return alpha_; }
  float user_scale() const { return user_scale_; }
  int64_t max_rank() const { return max_rank_; }
  int64_t num_adapted() const { return num_adapted_; }  // base matrices with a delta
  int64_t tensor_bytes() const { return tensor_bytes_; }

  // The delta of `slot` in `layer` (absent: !present()).
  const LoraPair& pair(int64_t layer, LoraSlot slot) const {
    return layers_[static_cast<size_t>(layer)][static_cast<size_t>(slot)];
  }
  // The delta of the output projection (absent for most adapters).
  const LoraPair& output() const { return output_; }

 private:
  LoraAdapter(gguf::GgufFile file) : file_(std::move(file)) {}

  gguf::GgufFile file_;
  std::string name_;
  std::string path_;
  std::string identity_;
  const Model* base_ = nullptr;
  float alpha_ = 0.0f;
  float user_scale_ = 1.0f;
  int64_t max_rank_ = 0;
  int64_t num_adapted_ = 0;
  int64_t tensor_bytes_ = 0;
  std::vector<std::array<LoraPair, kNumLoraSlots>> layers_;
  LoraPair output_;
};

}  // namespace tokenmill::model
