#include "model/lora_adapter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <span>
#include <string_view>

#include "model/model.h"
#include "model/weights.h"
#include "util/error.h"

// Header-only use of libxxhash (Debian libxxhash-dev), as the prefix cache.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tokenmill::model {
namespace {

constexpr std::string_view kSuffixA = ".lora_a";
constexpr std::string_view kSuffixB = ".lora_b";

struct TensorPair {
  const gguf::TensorInfo* a = nullptr;
  const gguf::TensorInfo* b = nullptr;
};

// The adapter's tensors by the base tensor they change, in name order (so
// the identity does not depend on the file's tensor order).
std::map<std::string, TensorPair> pair_tensors(const gguf::GgufFile& f) {
  std::map<std::string, TensorPair> pairs;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const std::string_view name = t.name;
    const bool is_a = name.ends_with(kSuffixA);
    if (!is_a && !name.ends_with(kSuffixB))
      fail("{}: tensor '{}' is not a LoRA tensor (names end in .lora_a or .lora_b)", f.name(), t.name);
    TensorPair& p = pairs[std::string(name.substr(0, name.size() - kSuffixA.size()))];
    (is_a ? p.a : p.b) = &t;
  }
  for (const auto& [base, p] : pairs) {
    if (p.a == nullptr) fail("{}: '{}.lora_b' has no '{}.lora_a'", f.name(), base, base);
    if (p.b == nullptr) fail("{}: '{}.lora_a' has no '{}.lora_b'", f.name(), base, base);
  }
  return pairs;
}

// The layer of a "blk.N.*" name, or -1.
int64_t layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int64_t layer = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) layer = layer * 10 + (name[i] - '0');
  return i < name.size() && name[i] == '.' ? layer : -1;
}

const kernels::WeightView& slot_view(const LayerWeights& w, LoraSlot slot) {
  switch (slot) {
    case LoraSlot::kQ: return w.wq;
    case LoraSlot::kK: return w.wk;
    case LoraSlot::kV: return w.wv;
    case LoraSlot::kO: return w.wo;
    case LoraSlot::kGate: return w.w_gate;
    case LoraSlot::kUp: return w.w_up;
    case LoraSlot::kDown: return w.w_down;
  }
  return w.wq;
}

// The first row of the base tensor `t` that `view` starts at, or -1 when
// the view is not inside it (a fused tensor holds several views).
int64_t row_inside(const kernels::WeightView& view, const gguf::TensorInfo& t) {
  const auto* p = static_cast<const uint8_t*>(view.data);
  if (p == nullptr || p < t.data || p >= t.data + t.num_bytes) return -1;
  return static_cast<int64_t>(p - t.data) / gguf::row_bytes(t.type, t.row_length());
}

// A LoRA tensor as a matrix [rows, cols] (GGUF dims [cols, rows]) that
// kernels::matmul can multiply.
kernels::WeightView matrix_of(const gguf::GgufFile& f, const gguf::TensorInfo& t) {
  if (t.num_dims != 2) fail("{}: LoRA tensor '{}' has {} dimensions, expected 2", f.name(), t.name, t.num_dims);
  const int64_t block = gguf::tensor_type_info(t.type).block_size;
  if (t.dims[0] % block != 0)
    fail("{}: LoRA tensor '{}' is {} with rows of {} elements, not a whole number of its {}-element blocks", f.name(),
         t.name, gguf::tensor_type_name(t.type), t.dims[0], block);
  return kernels::WeightView{t.type, t.data, t.dims[1], t.dims[0], nullptr};
}

void check_header(const gguf::GgufFile& f, const ModelConfig& base) {
  const std::string type = f.get_string_or("general.type", "");
  if (type != "adapter")
    fail("{}: not a LoRA adapter file: general.type is '{}', expected 'adapter'", f.name(),
         type.empty() ? "(missing)" : type);
  const std::string adapter = f.get_string_or("adapter.type", "");
  if (adapter != "lora")
    fail("{}: adapter.type is '{}'; tokenmill loads only 'lora' adapters", f.name(),
         adapter.empty() ? "(missing)" : adapter);
  const std::string arch = f.get_string_or("general.architecture", "");
  if (arch != base.arch_name)
    fail("{}: the adapter is for architecture '{}', the base model is '{}'", f.name(), arch, base.arch_name);
}

// Binds the pair adapting `target` to each base view inside that tensor (a
// fused tensor such as phi3's attn_qkv holds several; each gets its rows of
// B): a layer's slots in `layers` [n_layer], or `output`. Returns the
// pair's rank.
int64_t bind_target(const gguf::GgufFile& f, const std::string& target, const TensorPair& p, const Model& base,
                    float alpha, float user_scale, std::span<std::array<LoraPair, kNumLoraSlots>> layers,
                    LoraPair& output) {
  const ModelConfig& c = base.config();
  const gguf::TensorInfo* t = base.file().find_tensor(target);
  if (target == "token_embd.weight")
    fail("{}: a LoRA delta of the token embedding ('{}') is not supported", f.name(), target);
  if (t == nullptr) fail("{}: the base model has no tensor '{}' to adapt", f.name(), target);
  const kernels::WeightView wa = matrix_of(f, *p.a);
  const kernels::WeightView wb = matrix_of(f, *p.b);
  const int64_t n_in = t->row_length();
  const int64_t n_out = t->num_rows();
  if (wa.cols != n_in || wb.rows != n_out)
    fail("{}: '{}' does not fit the base tensor {}: lora_a {} and lora_b {} (expected [{}, rank] and [rank, {}])",
         f.name(), target, t->shape_string(), p.a->shape_string(), p.b->shape_string(), n_in, n_out);
  if (wa.rows != wb.cols)
    fail("{}: '{}': lora_a {} and lora_b {} disagree on the rank", f.name(), target, p.a->shape_string(),
         p.b->shape_string());
  const int64_t rank = wa.rows;
  const float scale = alpha != 0.0f ? user_scale * alpha / static_cast<float>(rank) : user_scale;
  int bound = 0;
  const auto bind = [&](LoraPair& pair, const kernels::WeightView& view) {
    const int64_t row = row_inside(view, *t);
    if (row < 0) return;
    pair = LoraPair{wa, row_range(wb, row, view.rows), scale};
    ++bound;
  };
  const ModelWeights& weights = base.weights();
  const int64_t layer = layer_of(target);
  if (layer >= c.n_layer) fail("{}: '{}' names a layer past the model's {}", f.name(), target, c.n_layer);
  if (layer >= 0) {
    for (size_t s = 0; s < kNumLoraSlots; ++s)
      bind(layers[static_cast<size_t>(layer)][s],
           slot_view(weights.layers[static_cast<size_t>(layer)], static_cast<LoraSlot>(s)));
  } else {
    bind(output, weights.output);
  }
  if (bound == 0) fail("{}: '{}' is not a linear layer tokenmill can adapt", f.name(), target);
  return rank;
}

struct Xxh3StateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};

// A LoRA tensor's name, type, dims and bytes into the adapter's identity.
void mix_tensor(XXH3_state_t* state, const gguf::TensorInfo& x) {
  XXH3_128bits_update(state, x.name.data(), x.name.size() + 1);
  const uint32_t type = static_cast<uint32_t>(x.type);
  XXH3_128bits_update(state, &type, sizeof type);
  XXH3_128bits_update(state, x.dims, sizeof x.dims);
  XXH3_128bits_update(state, x.data, x.num_bytes);
}

}  // namespace

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& path, const Model& base, std::string name,
                                                     float user_scale) {
  return bind(gguf::GgufFile::open(path), base, std::move(name), user_scale);
}

std::shared_ptr<const LoraAdapter> LoraAdapter::bind(gguf::GgufFile file, const Model& base, std::string name,
                                                     float user_scale) {
  auto adapter = std::shared_ptr<LoraAdapter>(new LoraAdapter(std::move(file)));
  LoraAdapter& a = *adapter;
  const gguf::GgufFile& f = a.file_;
  const ModelConfig& c = base.config();
  check_header(f, c);
  if (base.shard().tp_size > 1 || base.shard().pp_size > 1)
    fail("{}: LoRA adapters cannot be used with a model split over ranks (--tp/--pp)", f.name());
  if (!std::isfinite(user_scale)) fail("{}: the LoRA scale must be a finite number", f.name());
  a.name_ = std::move(name);
  a.path_ = f.name();
  a.base_ = &base;
  a.user_scale_ = user_scale;
  a.alpha_ = static_cast<float>(f.get_float_or("adapter.lora.alpha", 0.0));
  if (!std::isfinite(a.alpha_)) fail("{}: adapter.lora.alpha is not a finite number", f.name());
  a.layers_.resize(static_cast<size_t>(c.n_layer));

  // The identity: a hash of the scales and of every LoRA tensor.
  const std::unique_ptr<XXH3_state_t, Xxh3StateDeleter> state(XXH3_createState());
  XXH3_128bits_reset(state.get());
  XXH3_128bits_update(state.get(), &a.alpha_, sizeof a.alpha_);
  XXH3_128bits_update(state.get(), &a.user_scale_, sizeof a.user_scale_);
  for (const auto& [target, p] : pair_tensors(f)) {
    const int64_t rank = bind_target(f, target, p, base, a.alpha_, user_scale, a.layers_, a.output_);
    a.max_rank_ = std::max(a.max_rank_, rank);
    a.num_adapted_ += 1;
    a.tensor_bytes_ += static_cast<int64_t>(p.a->num_bytes + p.b->num_bytes);
    for (const gguf::TensorInfo* x : {p.a, p.b}) mix_tensor(state.get(), *x);
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state.get());
  if (a.num_adapted_ == 0) fail("{}: the adapter has no LoRA tensors", f.name());
  a.identity_ = fmt::format("lora:{:016x}{:016x}", h.high64, h.low64);
  return adapter;
}

}  // namespace tokenmill::model
