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

  // A stacked tensor of `n` matrices with GGUF dims {cols, rows, n}, as one
  // view per matrix.
  std::vector<kernels::WeightView> stacked(const std::string& name, int64_t n, int64_t rows, int64_t cols) const {
    const gguf::TensorInfo& t = require(name);
    if (t.num_dims != 3 || t.dims[0] != cols || t.dims[1] != rows || t.dims[2] != n)
      fail("{}: tensor '{}' has shape {}, expected [{}, {}, {}]", file_.name(), name, t.shape_string(), cols, rows, n);
    const int64_t bytes = gguf::row_bytes(t.type, cols) * rows;
    std::vector<kernels::WeightView> views;
    for (int64_t e = 0; e < n; ++e)
      views.push_back({t.type, static_cast<const uint8_t*>(t.data) + e * bytes, rows, cols});
    return views;
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
  const std::string& file_name() const { return file_.name(); }

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

// Some llama-layout files (granite, llama) may carry optional biases that the
// forward pass has no place for; reading the file without them would give
// silently wrong logits, so they are refused. `qkv_bias`: the q/k/v biases
// are bound (qwen2).
void refuse_unused_biases(const gguf::GgufFile& file, const std::string& prefix, bool qkv_bias) {
  for (const char* role : {"attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
    const std::string name = prefix + role + ".bias";
    const bool bound = qkv_bias && (std::string_view(role) == "attn_q" || std::string_view(role) == "attn_k" ||
                                    std::string_view(role) == "attn_v");
    if (!bound && file.find_tensor(name) != nullptr)
      fail("{}: tensor '{}' is not supported for architecture '{}' (tokenmill has no bias there)", file.name(), name,
           file.get_string("general.architecture"));
  }
}

// The q, k and v projections: attn_q/attn_k/attn_v, or the three row ranges
// of one fused attn_qkv [n_q_dim + 2 n_kv_dim, n_embd], q rows first, then
// k, then v (phi3).
void bind_qkv(const Binder& b, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  if (b.find(p + "attn_qkv.weight") == nullptr) {
    if (b.find(p + "attn_q.weight") == nullptr)
      fail("{}: required tensor '{}attn_q.weight' (or a fused '{}attn_qkv.weight') is missing", b.file_name(), p, p);
    l.wq = b.matrix(p + "attn_q.weight", c.n_q_dim(), c.n_embd);
    l.wk = b.matrix(p + "attn_k.weight", c.n_kv_dim(), c.n_embd);
    l.wv = b.matrix(p + "attn_v.weight", c.n_kv_dim(), c.n_embd);
    return;
  }
  const kernels::WeightView qkv = b.matrix(p + "attn_qkv.weight", c.n_q_dim() + 2 * c.n_kv_dim(), c.n_embd);
  l.wq = row_range(qkv, 0, c.n_q_dim());
  l.wk = row_range(qkv, c.n_q_dim(), c.n_kv_dim());
  l.wv = row_range(qkv, c.n_q_dim() + c.n_kv_dim(), c.n_kv_dim());
}

// The gate and up projections: ffn_gate and ffn_up, or, in a file without
// ffn_gate, the two halves of ffn_up [2 n_ff, n_embd], gate rows first
// (phi3, as its gate_up_proj).
void bind_gate_up(const Binder& b, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  if (b.find(p + "ffn_gate.weight") != nullptr) {
    l.w_gate = b.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
    l.w_up = b.matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
    return;
  }
  const gguf::TensorInfo* up = b.find(p + "ffn_up.weight");
  if (up != nullptr && up->num_dims == 2 && up->dims[1] == c.n_ff)  // an ordinary up matrix: the gate is missing
    b.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
  const kernels::WeightView fused = b.matrix(p + "ffn_up.weight", 2 * c.n_ff, c.n_embd);
  l.w_gate = row_range(fused, 0, c.n_ff);
  l.w_up = row_range(fused, c.n_ff, c.n_ff);
}

// The mixture-of-experts FFN of a layer: router, stacked experts and (qwen2moe)
// the shared expert. A file that stores each expert as its own tensor (the
// first Mixtral conversions: blk.N.ffn_gate.E.weight) is refused by name.
void bind_experts(const Binder& b, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  if (b.find(p + "ffn_gate_exps.weight") == nullptr && b.find(p + "ffn_gate.0.weight") != nullptr)
    fail(
        "{}: experts are stored one tensor each ('{}ffn_gate.0.weight'), an old layout tokenmill does not read; "
        "convert the model again (stacked '{}ffn_gate_exps.weight')",
        b.file_name(), p, p);
  l.router = b.matrix(p + "ffn_gate_inp.weight", c.n_expert, c.n_embd);
  l.gate_exps = b.stacked(p + "ffn_gate_exps.weight", c.n_expert, c.n_ff_exp, c.n_embd);
  l.up_exps = b.stacked(p + "ffn_up_exps.weight", c.n_expert, c.n_ff_exp, c.n_embd);
  l.down_exps = b.stacked(p + "ffn_down_exps.weight", c.n_expert, c.n_embd, c.n_ff_exp);
  if (c.n_ff_shexp == 0) return;
  l.shexp_gate = b.vector(p + "ffn_gate_inp_shexp.weight", c.n_embd);
  l.gate_shexp = b.matrix(p + "ffn_gate_shexp.weight", c.n_ff_shexp, c.n_embd);
  l.up_shexp = b.matrix(p + "ffn_up_shexp.weight", c.n_ff_shexp, c.n_embd);
  l.down_shexp = b.matrix(p + "ffn_down_shexp.weight", c.n_embd, c.n_ff_shexp);
}

// q/k/v biases: required by qwen2, optional in the MoE files (Qwen2-MoE has
// them; llama.cpp reads them wherever present there).
void bind_qkv_biases(const Binder& b, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  if (c.arch == Arch::Qwen2) {
    l.bq = b.vector(p + "attn_q.bias", c.n_q_dim());
    l.bk = b.vector(p + "attn_k.bias", c.n_kv_dim());
    l.bv = b.vector(p + "attn_v.bias", c.n_kv_dim());
  } else if (c.is_moe()) {
    l.bq = b.optional_vector(p + "attn_q.bias", c.n_q_dim());
    l.bk = b.optional_vector(p + "attn_k.bias", c.n_kv_dim());
    l.bv = b.optional_vector(p + "attn_v.bias", c.n_kv_dim());
  }
}

}  // namespace

kernels::WeightView row_range(const kernels::WeightView& w, int64_t begin, int64_t rows) {
  kernels::WeightView v = w;
  v.data = static_cast<const uint8_t*>(w.data) + begin * gguf::row_bytes(w.type, w.cols);
  v.rows = rows;
  v.interleaved = nullptr;
  return v;
}

ModelWeights ModelWeights::bind(const gguf::GgufFile& file, const ModelConfig& c) {
  const Binder b(file);
  ModelWeights w;
  w.tok_embd = b.matrix("token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = b.vector("output_norm.weight", c.n_embd);
  w.output = b.find("output.weight") ? b.matrix("output.weight", c.n_vocab, c.n_embd) : w.tok_embd;
  if (b.find("output.bias") != nullptr)  // llama.cpp's phi3 reader accepts one; no released phi3 has it
    fail("{}: tensor 'output.bias' is not supported for architecture '{}'", file.name(), c.arch_name);
  w.rope_freqs = b.optional_vector("rope_freqs.weight", c.rope_dims / 2);
  w.rope_factors_long = b.optional_vector("rope_factors_long.weight", c.rope_dims / 2);
  w.rope_factors_short = b.optional_vector("rope_factors_short.weight", c.rope_dims / 2);

  const bool qkv_bias = c.arch == Arch::Qwen2 || c.is_moe();
  const bool full_width = c.qk_norm == ModelConfig::QkNorm::kFullWidth;
  const int64_t q_norm_size = full_width ? c.n_q_dim() : c.head_dim;
  const int64_t k_norm_size = full_width ? c.n_kv_dim() : c.head_dim;
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = fmt::format("blk.{}.", i);
    refuse_unused_biases(file, p, qkv_bias);
    if (c.pre_norm) l.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    bind_qkv(b, p, c, l);
    l.wo = b.matrix(p + "attn_output.weight", c.n_embd, c.n_q_dim());
    bind_qkv_biases(b, p, c, l);
    if (c.qk_norm != ModelConfig::QkNorm::kNone) {
      l.q_norm = b.vector(p + "attn_q_norm.weight", q_norm_size);
      l.k_norm = b.vector(p + "attn_k_norm.weight", k_norm_size);
    }
    if (c.post_norms) {
      l.post_attn_norm = b.vector(p + "post_attention_norm.weight", c.n_embd);
      l.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", c.n_embd);
    }
    if (c.pre_norm) l.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd);
    if (c.is_moe()) {
      bind_experts(b, p, c, l);
    } else {
      bind_gate_up(b, p, c, l);
      l.w_down = b.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
    }
  }
  return w;
}

}  // namespace tokenmill::model
