#include "model/config.h"

#include <cmath>

#include "util/error.h"

namespace tokenmill::model {
namespace {

// Gemma 3 alternates five sliding-window layers with one global layer; the
// GGUF files in circulation do not store the pattern, so it is fixed here.
constexpr int64_t kGemma3GlobalEvery = 6;
constexpr float kGemma3LocalRopeBase = 10000.0f;

Arch parse_arch(const gguf::GgufFile& f, const std::string& name) {
  if (name == "llama") return Arch::Llama;
  if (name == "qwen2") return Arch::Qwen2;
  if (name == "gemma3") return Arch::Gemma3;
  fail("{}: unsupported architecture '{}' (supported: llama, qwen2, gemma3)", f.name(), name);
}

int64_t vocab_size(const gguf::GgufFile& f, const std::string& a) {
  // get_int, not Value::as_int: a file may store any type and value here.
  if (f.find(a + ".vocab_size") != nullptr) return f.get_int(a + ".vocab_size");
  if (const gguf::Value* v = f.find("tokenizer.ggml.tokens")) {
    if (v->is_array()) return static_cast<int64_t>(v->as_array().items.size());
  }
  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  return emb.dims[1];
}

void validate(const gguf::GgufFile& f, const ModelConfig& c) {
  auto positive = [&](const char* what, int64_t v) {
    if (v <= 0) fail("{}: {} must be positive, got {}", f.name(), what, v);
  };
  positive("embedding_length", c.n_embd);
  positive("block_count", c.n_layer);
  positive("attention.head_count", c.n_head);
  positive("attention.head_count_kv", c.n_kv_head);
  positive("head dimension", c.head_dim);
  positive("feed_forward_length", c.n_ff);
  positive("vocabulary size", c.n_vocab);
  if (c.n_layer > 4096 || c.n_head > 4096 || c.head_dim > 4096)
    fail("{}: implausible shape (layers {}, heads {}, head_dim {})", f.name(), c.n_layer, c.n_head, c.head_dim);
  if (c.n_head % c.n_kv_head != 0)
    fail("{}: head_count {} is not a multiple of head_count_kv {}", f.name(), c.n_head, c.n_kv_head);
  if (c.rope_dims <= 0 || c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    fail("{}: rope dimension count {} must be even and in (0, head_dim={}]", f.name(), c.rope_dims, c.head_dim);
  if (!(c.rms_eps > 0.0f) || !(c.rope_base > 0.0f) || !std::isfinite(c.rope_base))
    fail("{}: rms epsilon and rope base must be positive", f.name());
}

}  // namespace

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Gemma3: return "gemma3";
  }
  return "?";
}

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  c.arch = parse_arch(f, c.arch_name);
  const std::string a = c.arch_name;

  c.n_embd = f.get_int(a + ".embedding_length");
  c.n_layer = f.get_int(a + ".block_count");
  c.n_ff = f.get_int(a + ".feed_forward_length");
  c.n_head = f.get_int(a + ".attention.head_count");
  c.n_kv_head = f.get_int_or(a + ".attention.head_count_kv", c.n_head);
  c.n_ctx_train = f.get_int_or(a + ".context_length", 2048);
  c.n_vocab = vocab_size(f, a);
  c.head_dim = f.get_int_or(a + ".attention.key_length", c.n_head > 0 ? c.n_embd / c.n_head : 0);
  const int64_t v_dim = f.get_int_or(a + ".attention.value_length", c.head_dim);
  if (v_dim != c.head_dim)
    fail("{}: value_length {} differs from key_length {} (not supported)", f.name(), v_dim, c.head_dim);
  c.rms_eps = static_cast<float>(f.get_float_or(a + ".attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_dims = f.get_int_or(a + ".rope.dimension_count", c.head_dim);
  c.rope_base = static_cast<float>(f.get_float_or(a + ".rope.freq_base", 10000.0));
  c.rope_base_local = c.rope_base;

  const std::string scaling = f.get_string_or(a + ".rope.scaling.type", "none");
  if (scaling == "linear") {
    const double factor = f.get_float(a + ".rope.scaling.factor");
    if (!(factor > 0.0)) fail("{}: rope.scaling.factor must be positive", f.name());
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "llama3") {  // llama3 uses the rope_freqs tensor
    fail("{}: unsupported rope scaling type '{}'", f.name(), scaling);
  }
  c.rope_freq_scale_local = c.rope_freq_scale;
  c.layer_is_local.assign(static_cast<size_t>(std::max<int64_t>(c.n_layer, 0)), false);

  switch (c.arch) {
    case Arch::Llama: c.rope_neox = false; break;
    case Arch::Qwen2: c.rope_neox = true; break;
    case Arch::Gemma3:
      c.rope_neox = true;
      c.ffn_gelu = true;
      c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
      c.sliding_window = f.get_int_or(a + ".attention.sliding_window", 0);
      c.rope_base_local = kGemma3LocalRopeBase;
      // Linear rope scaling (larger Gemma 3 models) applies to global layers only.
      c.rope_freq_scale_local = 1.0f;
      for (int64_t i = 0; i < c.n_layer; ++i) {
        c.layer_is_local[static_cast<size_t>(i)] =
            c.sliding_window > 0 && (i % kGemma3GlobalEvery) != kGemma3GlobalEvery - 1;
      }
      break;
  }
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  validate(f, c);
  return c;
}

}  // namespace tokenmill::model
