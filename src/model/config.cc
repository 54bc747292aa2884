#include "model/config.h"

#include <cmath>

#include "model/rope_config.h"
#include "util/error.h"

namespace tokenmill::model {
namespace {

// Gemma 3 alternates five sliding-window layers with one global layer; the
// GGUF files in circulation do not store the pattern, so it is fixed here.
constexpr int64_t kGemma3GlobalEvery = 6;
constexpr float kGemma3LocalRopeBase = 10000.0f;
constexpr int64_t kGemma3Layers27b = 62;
// Gemma 2's values where a file leaves the key out (llama.cpp's defaults,
// those of the released models), and the layer count of its 27B model.
constexpr int64_t kGemma2DefaultWindow = 4096;
constexpr double kGemma2DefaultAttnSoftcap = 50.0;
constexpr double kGemma2DefaultFinalSoftcap = 30.0;
constexpr int64_t kGemma2Layers27b = 46;

Arch parse_arch(const gguf::GgufFile& f, const std::string& name) {
  if (name == "llama") return Arch::Llama;
  if (name == "qwen2") return Arch::Qwen2;
  if (name == "gemma3") return Arch::Gemma3;
  if (name == "qwen3") return Arch::Qwen3;
  if (name == "olmo2") return Arch::Olmo2;
  if (name == "granite") return Arch::Granite;
  if (name == "phi3") return Arch::Phi3;
  if (name == "gemma2") return Arch::Gemma2;
  if (name == "qwen2moe") return Arch::Qwen2Moe;
  if (name == "qwen3moe") return Arch::Qwen3Moe;
  if (name == "olmoe") return Arch::Olmoe;
  fail(
      "{}: unsupported architecture '{}' (supported: llama, qwen2, gemma3, qwen3, olmo2, granite, phi3, gemma2, "
      "qwen2moe, qwen3moe, olmoe)",
      f.name(), name);
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

// OLMo 2: no norm before the blocks, a norm after each; q and k normalised
// over their whole projection. (OLMo 3 files reuse the name with a sliding
// window on three layers in four, which is not supported.)
void read_olmo2(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string key = c.arch_name + ".attention.sliding_window";
  if (f.get_int_or(key, 0) > 0)
    fail("{}: '{}' is set: olmo2 with sliding-window layers (OLMo 3) is not supported", f.name(), key);
  c.rope_neox = true;
  c.pre_norm = false;
  c.post_norms = true;
  c.qk_norm = ModelConfig::QkNorm::kFullWidth;
}

// A granite multiplier: 0 or absent means "not applied" (llama.cpp's reading).
float granite_scale(const gguf::GgufFile& f, const std::string& key, float absent) {
  const double v = f.get_float_or(key, 0.0);
  if (v == 0.0) return absent;
  if (!(v > 0.0) || !std::isfinite(v)) fail("{}: '{}' must be a positive number, got {}", f.name(), key, v);
  return static_cast<float>(v);
}

// Granite (IBM Granite 3.x): the llama layout with four multipliers.
// logit_scale is required, as in llama.cpp; the others default to none.
void read_granite(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch_name;
  if (!f.has(a + ".logit_scale")) fail("{}: granite needs the key '{}.logit_scale', which is missing", f.name(), a);
  c.logit_scale = granite_scale(f, a + ".logit_scale", 0.0f);
  if (c.logit_scale == 0.0f) fail("{}: '{}.logit_scale' must be a positive number, got 0", f.name(), a);
  c.embd_scale = granite_scale(f, a + ".embedding_scale", 1.0f);
  c.residual_scale = granite_scale(f, a + ".residual_scale", 1.0f);
  c.attn_scale = granite_scale(f, a + ".attention.scale", 0.0f);  // 0: 1/sqrt(head_dim)
  // Granite treats rope.scaling.finetuned = false as "no RoPE at all".
  if (!f.get_bool_or(a + ".rope.scaling.finetuned", true))
    fail("{}: '{}.rope.scaling.finetuned' is false (granite without RoPE), which is not supported", f.name(), a);
}

// Phi-3: the llama layer with NeoX RoPE; its fused q/k/v and gate/up
// matrices are split into views by ModelWeights::bind. llama.cpp reads
// phi3.attention.sliding_window and then switches the window off (the
// conversions do not record which layers use it), so it is not applied
// here either and the logits agree with llama.cpp's. The 128k-context
// models' LongRoPE factor tensors are read with the other RoPE scalings
// (rope_config.cc).
void read_phi3(const gguf::GgufFile&, ModelConfig& c) { c.rope_neox = true; }

// A soft-capping value: `fallback` when absent, else positive and finite.
float softcap_value(const gguf::GgufFile& f, const std::string& key, double fallback) {
  const double v = f.get_float_or(key, fallback);
  if (!(v > 0.0) || !std::isfinite(v)) fail("{}: '{}' must be a positive number, got {}", f.name(), key, v);
  return static_cast<float>(v);
}

// Gemma 3: GELU FFN, embeddings times sqrt(n_embd), per-head q/k norms,
// norms after both blocks, and sliding-window layers with their own RoPE
// base between the global ones.
void read_gemma3(const gguf::GgufFile& f, ModelConfig& c) {
  c.rope_neox = true;
  c.ffn_gelu = true;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.qk_norm = ModelConfig::QkNorm::kPerHead;
  c.post_norms = true;
  c.sliding_window = f.get_int_or(c.arch_name + ".attention.sliding_window", 0);
  c.rope_base_local = kGemma3LocalRopeBase;
  // Linear rope scaling (larger Gemma 3 models) applies to global layers only.
  c.rope_freq_scale_local = 1.0f;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    c.layer_is_local[static_cast<size_t>(i)] =
        c.sliding_window > 0 && (i % kGemma3GlobalEvery) != kGemma3GlobalEvery - 1;
  }
  // As Gemma 2 27B: the 27B model (62 layers) scales queries by
  // 1/sqrt(n_embd / n_head) = 1/sqrt(168), not 1/sqrt(head_dim = 128).
  if (c.n_layer == kGemma3Layers27b && c.n_head > 0)
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
}

// Gemma 2: gemma3's layer (GELU FFN, embeddings times sqrt(n_embd), norms
// after both blocks) without q/k norms, with soft-capped attention scores
// and logits, and a sliding window on the even layers (0, 2, ...) that use
// the same RoPE base as the odd, global ones.
void read_gemma2(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch_name;
  c.rope_neox = true;
  c.ffn_gelu = true;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.post_norms = true;
  c.sliding_window = f.get_int_or(a + ".attention.sliding_window", kGemma2DefaultWindow);
  if (c.sliding_window < 0)
    fail("{}: '{}.attention.sliding_window' must not be negative, got {}", f.name(), a, c.sliding_window);
  for (int64_t i = 0; i < c.n_layer; ++i) c.layer_is_local[static_cast<size_t>(i)] = c.sliding_window > 0 && i % 2 == 0;
  c.attn_softcap = softcap_value(f, a + ".attn_logit_softcapping", kGemma2DefaultAttnSoftcap);
  c.final_softcap = softcap_value(f, a + ".final_logit_softcapping", kGemma2DefaultFinalSoftcap);
  // The 27B model scales queries by 1/sqrt(n_embd / n_head) = 1/sqrt(144)
  // instead of 1/sqrt(head_dim = 128). No key records it; llama.cpp
  // recognises the model by its layer count, and so does this.
  if (c.n_layer == kGemma2Layers27b && c.n_head > 0)
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
}

// The mixture-of-experts keys. A MoE architecture without its expert
// counts, or a file using a routing variant tokenmill does not implement,
// is refused naming the key.
void read_experts(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch_name;
  const bool moe_arch = c.arch == Arch::Qwen2Moe || c.arch == Arch::Qwen3Moe || c.arch == Arch::Olmoe;
  const bool llama_experts = c.arch == Arch::Llama && f.get_int_or(a + ".expert_count", 0) > 0;
  if (!moe_arch && !llama_experts) return;
  for (const char* key : {"expert_count", "expert_used_count"}) {
    if (!f.has(a + "." + key)) fail("{}: {} needs the key '{}.{}', which is missing", f.name(), a, a, key);
  }
  c.n_expert = f.get_int(a + ".expert_count");
  c.n_expert_used = f.get_int(a + ".expert_used_count");
  if (c.n_expert < 1 || c.n_expert > 4096)
    fail("{}: '{}.expert_count' must be in 1..4096, got {}", f.name(), a, c.n_expert);
  if (c.n_expert_used < 1 || c.n_expert_used > c.n_expert)
    fail("{}: '{}.expert_used_count' must be in 1..{} (the expert count), got {}", f.name(), a, c.n_expert,
         c.n_expert_used);
  // Routing variants of other MoE families (DeepSeek's expert groups and
  // score bias, sigmoid gating): their keys in these files mean a model
  // tokenmill would run wrongly.
  if (f.get_int_or(a + ".expert_group_count", 1) > 1)
    fail("{}: '{}.expert_group_count' > 1 (grouped expert routing) is not supported", f.name(), a);
  if (f.has(a + ".expert_gating_func") && f.get_int(a + ".expert_gating_func") != 1)
    fail("{}: '{}.expert_gating_func' is {}; only softmax gating (1) is supported", f.name(), a,
         f.get_int(a + ".expert_gating_func"));
  // Mixtral and OLMoE give every expert the FFN width; the Qwen MoE files
  // state it (else llama.cpp's fallback, n_ff / n_expert_used).
  c.n_ff_exp = c.n_ff;
  if (c.arch == Arch::Qwen2Moe || c.arch == Arch::Qwen3Moe)
    c.n_ff_exp = f.get_int_or(a + ".expert_feed_forward_length", c.n_ff / c.n_expert_used);
  if (c.arch == Arch::Qwen2Moe) c.n_ff_shexp = f.get_int_or(a + ".expert_shared_feed_forward_length", c.n_ff);
  if (c.n_ff_exp < 1) fail("{}: the experts' FFN width must be positive, got {}", f.name(), c.n_ff_exp);
  c.expert_weights_norm = c.arch == Arch::Llama || c.arch == Arch::Qwen3Moe;
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
    case Arch::Qwen3: return "qwen3";
    case Arch::Olmo2: return "olmo2";
    case Arch::Granite: return "granite";
    case Arch::Phi3: return "phi3";
    case Arch::Gemma2: return "gemma2";
    case Arch::Qwen2Moe: return "qwen2moe";
    case Arch::Qwen3Moe: return "qwen3moe";
    case Arch::Olmoe: return "olmoe";
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

  c.n_ctx_file = c.n_ctx_train;
  read_rope_scaling(f, c);  // model/rope_config.cc
  c.layer_is_local.assign(static_cast<size_t>(std::max<int64_t>(c.n_layer, 0)), false);

  switch (c.arch) {
    case Arch::Llama: c.rope_neox = false; break;
    case Arch::Qwen2:
    case Arch::Qwen2Moe: c.rope_neox = true; break;
    case Arch::Gemma3: read_gemma3(f, c); break;
    case Arch::Qwen3:
    case Arch::Qwen3Moe:
      c.rope_neox = true;
      c.qk_norm = ModelConfig::QkNorm::kPerHead;
      break;
    case Arch::Olmo2: read_olmo2(f, c); break;
    case Arch::Granite: read_granite(f, c); break;
    case Arch::Phi3: read_phi3(f, c); break;
    case Arch::Gemma2: read_gemma2(f, c); break;
    case Arch::Olmoe:  // OLMo 2's full-width q/k norms, with llama's pre-norms
      c.rope_neox = true;
      c.qk_norm = ModelConfig::QkNorm::kFullWidth;
      break;
  }
  read_experts(f, c);
  if (c.attn_scale == 0.0f) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  validate(f, c);
  return c;
}

}  // namespace tokenmill::model
