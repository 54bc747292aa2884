#include "model/weights.h"

#include <fmt/format.h>

#include "util/error.h"

namespace tokenmill::model {
namespace {

class Binder {
 public:
  Binder(const gguf::GgufFile& file) : file_(file) {}

  // A matrix with GGUF dims {cols, rows}.
  kernels::WeightView matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const gguf::TensorInfo& t = require(name);
    if (t.num_dims != 2 || t.dims[0] != cols || t.dims[1] != rows)
      fail("{}: tensor '{}' has shape {}, expected [{}, {}]", file_.name(), name, t.shape_string(), cols, rows);
    return {t.type, t.data, rows, cols};
  }

  VectorView vector(const std::string& name, int64_t size) const {
    const gguf::TensorInfo& t = require(name);
    return vector_from(t, size);
  }

  VectorView optional_vector(const std::string& name, int64_t size) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    return t ? vector_from(*t, size) : VectorView{};
  }

  const gguf::TensorInfo* find(const std::string& name) const { return file_.find_tensor(name); }

 private:
  const gguf::TensorInfo& require(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) fail("{}: required tensor '{}' is missing", file_.name(), name);
    return *t;
  }

  VectorView vector_from(const gguf::TensorInfo& t, int64_t size) const {
    if (t.type != gguf::TensorType::F32)
      fail("{}: tensor '{}' has type {}, expected F32", file_.name(), t.name, gguf::tensor_type_name(t.type));
    if (t.num_elements() != size)
      fail("{}: tensor '{}' has shape {}, expected [{}]", file_.name(), t.name, t.shape_string(), size);
    return {reinterpret_cast<const float*>(t.data), size};
  }

  const gguf::GgufFile& file_;
};

}  // namespace

ModelWeights ModelWeights::bind(const gguf::GgufFile& file, const ModelConfig& c) {
  const Binder b(file);
  ModelWeights w;
  w.tok_embd = b.matrix("token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = b.vector("output_norm.weight", c.n_embd);
  w.output = b.find("output.weight") ? b.matrix("output.weight", c.n_vocab, c.n_embd) : w.tok_embd;
  w.rope_freqs = b.optional_vector("rope_freqs.weight", c.rope_dims / 2);

  const bool qwen2 = c.arch == Arch::Qwen2;
  const bool gemma3 = c.arch == Arch::Gemma3;
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("blk.{}.", i);
    l.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    l.wq = b.matrix(p + "attn_q.weight", c.n_q_dim(), c.n_embd);
    l.wk = b.matrix(p + "attn_k.weight", c.n_kv_dim(), c.n_embd);
    l.wv = b.matrix(p + "attn_v.weight", c.n_kv_dim(), c.n_embd);
    l.wo = b.matrix(p + "attn_output.weight", c.n_embd, c.n_q_dim());
    if (qwen2) {
      l.bq = b.vector(p + "attn_q.bias", c.n_q_dim());
      l.bk = b.vector(p + "attn_k.bias", c.n_kv_dim());
      l.bv = b.vector(p + "attn_v.bias", c.n_kv_dim());
    }
    if (gemma3) {
      l.q_norm = b.vector(p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = b.vector(p + "attn_k_norm.weight", c.head_dim);
      l.post_attn_norm = b.vector(p + "post_attention_norm.weight", c.n_embd);
      l.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", c.n_embd);
    }
    l.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd);
    l.w_gate = b.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
    l.w_up = b.matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
    l.w_down = b.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
  }
  return w;
}

}  // namespace tokenmill::model
