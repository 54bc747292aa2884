#include "model/synth.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>

#include "model/synth_moe.h"
#include "model/synth_random.h"
#include "model/synth_vocab.h"
#include "util/check.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace tokenmill::model {
namespace {

using gguf::TensorType;
using gguf::Value;

struct Preset {
  std::string_view name;
  SynthShape shape;
};

// n_embd, n_layer, n_head, n_kv_head, n_ff, vocab, head_dim, ctx,
// sliding_window, tied_output, attn_softcap, final_softcap.
// "tiny" keeps every file under a few hundred KB and gives gemma3 a sliding
// window shorter than typical test prompts, so that path runs in tests; its
// gemma2 soft-caps are low enough to bend its O(1) attention scores and
// logits (the released 50 and 30 would leave them almost unchanged).
// "phi3-mini" and "gemma2-2b" are the shapes of Phi-3-mini-4k and Gemma 2 2B.
const Preset kPresets[] = {
    {"tiny", {64, 2, 4, 2, 128, 512, 0, 256, 8, false, 4.0f, 8.0f}},
    {"tinyllama-1.1b", {2048, 22, 32, 4, 5632, 32000, 0, 2048, 512, false}},
    {"llama-7b", {4096, 32, 32, 32, 11008, 32000, 0, 4096, 512, false}},
    {"phi3-mini", {3072, 32, 32, 32, 8192, 32064, 0, 4096, 2047, false}},
    {"gemma2-2b", {2304, 26, 8, 4, 9216, 256000, 256, 8192, 4096, false}},
    // Qwen3-0.6B (16 heads of 128 on n_embd 1024), OLMo-2-0425-1B, Granite 3.0 2B.
    {"qwen3-0.6b", {1024, 28, 16, 8, 3072, 151936, 128, 40960, 0, false}},
    {"olmo2-1b", {2048, 16, 16, 16, 8192, 100352, 0, 4096, 0, false}},
    {"granite3-2b", {2048, 40, 32, 8, 8192, 49155, 0, 4096, 0, false}},
    // Qwen3-30B-A3B scaled down: 128 experts of 768 with 8 per token on
    // n_embd 2048 become 64 of 512 (a multiple of the K-quants' 256-element
    // blocks, as 768 is) with 8 per token on 1024; 48 layers 16; its
    // 151936-token vocabulary 32000 (the output projection would otherwise
    // dominate a model this size). 1.7 B parameters, 0.27 B active per token.
    {"qwen3moe-mini", {1024, 16, 16, 4, 3072, 32000, 64, 4096, 0, false, 0.0f, 0.0f, 64, 8, 512, 0}},
};

// Largest accepted size of any one dimension: keeps every product of two or
// three dimensions far from int64 overflow.
constexpr int64_t kMaxSynthDim = int64_t{1} << 24;

constexpr float kNormJitter = 0.02f;
constexpr float kBiasStd = 0.02f;

// ---- Tensor plan. ----

// llama.cpp's "use more bits" layer rule for mostly-Q4_K_M: the first and
// last eighth of the layers and every third layer in between (about half).
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// Q4_K_M: Q4_K everywhere except the tensors that quantization error hurts
// most, which get Q6_K: the classifier (output.weight, or token_embd.weight
// when it is tied to the output), and attn_v and ffn_down in the layers
// use_more_bits picks; a fused attn_qkv (phi3) gets Q5_K in every layer.
TensorType q4_k_m_type(std::string_view role, int64_t layer, const SynthShape& shape) {
  if (role == "output" || (role == "token_embd" && shape.tied_output)) return TensorType::Q6_K;
  if (role == "attn_qkv") return TensorType::Q5_K;
  const bool down = role == "ffn_down" || role == "ffn_down_exps" || role == "ffn_down_shexp";
  if ((role == "attn_v" || down) && use_more_bits(layer, shape.n_layer)) return TensorType::Q6_K;
  return TensorType::Q4_K;
}

class Planner {
 public:
  Planner(const SynthShape& shape, const WeightFormat& format, TensorType last_resort, std::vector<std::string>* notes)
      : shape_(shape), format_(format), last_resort_(last_resort), notes_(notes) {}

  void vector(std::string name, int64_t n, SynthInit init) {
    tensors_.push_back({std::move(name), {n}, TensorType::F32, init});
  }

  // role: the name without "blk.N." and ".weight"; layer -1 outside blocks.
  void matrix(std::string_view role, int64_t layer, int64_t n_in, int64_t n_out) {
    const std::string name = layer < 0 ? fmt::format("{}.weight", role) : fmt::format("blk.{}.{}.weight", layer, role);
    const TensorType wanted = format_.q4_k_m ? q4_k_m_type(role, layer, shape_) : format_.base;
    const TensorType type = fitting_type(wanted, n_in, last_resort_);
    if (type != wanted && notes_ != nullptr) {
      notes_->push_back(fmt::format("note: {}: row length {} is not a multiple of the {} block size {}; stored as {}",
                                    name, n_in, gguf::tensor_type_name(wanted),
                                    gguf::tensor_type_info(wanted).block_size, gguf::tensor_type_name(type)));
    }
    tensors_.push_back({name, {n_in, n_out}, type, SynthInit::kMatrix});
  }

  // A stack of n matrices (mixture-of-experts tensors), one type for all.
  void stacked(std::string_view role, int64_t layer, int64_t n_in, int64_t n_out, int64_t n) {
    matrix(role, layer, n_in, n_out);
    tensors_.back().dims.push_back(n);
  }

  // A matrix kept in F32 whatever the format (the router).
  void f32_matrix(std::string_view role, int64_t layer, int64_t n_in, int64_t n_out) {
    tensors_.push_back(
        {fmt::format("blk.{}.{}.weight", layer, role), {n_in, n_out}, TensorType::F32, SynthInit::kMatrix});
  }

  std::vector<SynthTensor> take() { return std::move(tensors_); }

 private:
  const SynthShape& shape_;
  WeightFormat format_;
  TensorType last_resort_;
  std::vector<std::string>* notes_;
  std::vector<SynthTensor> tensors_;
};

// Layer i's FFN matrices, between its FFN norms: the experts of a
// mixture-of-experts model, or the dense gate, up and down.
void plan_ffn_tensors(Planner& p, const SynthShape& s, int64_t i, bool phi3) {
  const std::string blk = fmt::format("blk.{}.", i);
  if (s.n_expert > 0) {
    // The router (kept F32, as quantize keeps it), the stacked experts and
    // (qwen2moe) the shared expert with its gate vector.
    p.f32_matrix("ffn_gate_inp", i, s.n_embd, s.n_expert);
    p.stacked("ffn_gate_exps", i, s.n_embd, s.n_ff_exp, s.n_expert);
    p.stacked("ffn_up_exps", i, s.n_embd, s.n_ff_exp, s.n_expert);
    p.stacked("ffn_down_exps", i, s.n_ff_exp, s.n_embd, s.n_expert);
    if (s.n_ff_shexp > 0) {
      p.vector(blk + "ffn_gate_inp_shexp.weight", s.n_embd, SynthInit::kMatrix);
      p.matrix("ffn_gate_shexp", i, s.n_embd, s.n_ff_shexp);
      p.matrix("ffn_up_shexp", i, s.n_embd, s.n_ff_shexp);
      p.matrix("ffn_down_shexp", i, s.n_ff_shexp, s.n_embd);
    }
    return;
  }
  if (phi3) {
    p.matrix("ffn_up", i, s.n_embd, 2 * s.n_ff);  // the gate rows, then the up rows
  } else {
    p.matrix("ffn_gate", i, s.n_embd, s.n_ff);
    p.matrix("ffn_up", i, s.n_embd, s.n_ff);
  }
  p.matrix("ffn_down", i, s.n_ff, s.n_embd);
}

void check_positive(std::string_view what, int64_t value) {
  if (value < 1 || value > kMaxSynthDim) fail("{} must be in 1..{}, got {}", what, kMaxSynthDim, value);
}

const Preset& find_preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (p.name == name) return p;
  }
  std::string known;
  for (const Preset& p : kPresets) known += fmt::format("{}{}", known.empty() ? "" : ", ", p.name);
  fail("unknown synth preset '{}' (known: {})", name, known);
}

constexpr std::string_view kDefaultVocab = "vocab/ggml-vocab-llama-spm.gguf";

int64_t vocab_size_of(const gguf::GgufFile& file) {
  const Value* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    fail("'{}' has no vocabulary (tokenizer.ggml.tokens)", file.name());
  }
  return static_cast<int64_t>(tokens->as_array().items.size());
}

// The byte-level BPE tokenizer an architecture's released models ship, as
// its pre-tokenizer name and control tokens (the first is bos and eos):
// Qwen 3 keeps Qwen 2's, OLMo 2 a cl100k-style one (llama.cpp: "dbrx"),
// Granite 3 a StarCoder-style one ("refact"). nullopt: SentencePiece.
struct ShippedBpe {
  std::string pre;
  std::vector<std::string> specials;
};

std::optional<ShippedBpe> shipped_bpe(SynthArch arch) {
  switch (arch) {
    case SynthArch::kQwen3:
    case SynthArch::kQwen2Moe:
    case SynthArch::kQwen3Moe: return ShippedBpe{"qwen2", {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}};
    case SynthArch::kOlmo2: return ShippedBpe{"dbrx", {"<|endoftext|>", "<|pad|>"}};
    case SynthArch::kGranite: return ShippedBpe{"refact", {"<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"}};
    default: return std::nullopt;
  }
}

// The GGUF whose vocabulary the model takes, if any: --vocab-from, else for
// the 32000-token presets the shared llama SPM vocabulary when it exists and
// its size matches. Sets overrides.vocab to its size.
std::optional<gguf::GgufFile> open_vocab(const SynthOptions& opt, ShapeOverrides& overrides) {
  if (opt.vocab_from) {
    gguf::GgufFile file = gguf::GgufFile::open(*opt.vocab_from);
    const int64_t n = vocab_size_of(file);
    if (overrides.vocab && *overrides.vocab != n) {
      fail("--vocab {} contradicts --vocab-from '{}', which has {} tokens", *overrides.vocab, *opt.vocab_from, n);
    }
    overrides.vocab = n;
    return file;
  }
  if (opt.shared_dir.empty() || (opt.preset != "tinyllama-1.1b" && opt.preset != "llama-7b") || shipped_bpe(opt.arch)) {
    return std::nullopt;
  }
  const std::filesystem::path path = std::filesystem::path(opt.shared_dir) / kDefaultVocab;
  if (!std::filesystem::exists(path)) return std::nullopt;
  gguf::GgufFile file = gguf::GgufFile::open(path.string());
  const int64_t n = vocab_size_of(file);
  if (overrides.vocab.value_or(n) != n) return std::nullopt;
  overrides.vocab = n;
  return file;
}

// Phi-3's tokenizer: the SentencePiece table, then the 64 added tokens of
// Phi-3-mini (its ids 32000..32063): the chat tokens, then unused
// placeholders (a table too small for 64 takes the 11 chat tokens only).
// They replace the table's last entries, which no kept piece has as a
// prefix. <|endoftext|> ends the text, <|end|> a turn (llama.cpp looks it up
// in files named like Phi-3). Returns the id of the first.
int64_t add_phi3_chat_tokens(VocabTables& v) {
  static constexpr std::string_view kChat[] = {
      "<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>", "<|placeholder4|>",
      "<|system|>",    "<|end|>",       "<|placeholder5|>", "<|placeholder6|>", "<|user|>"};
  constexpr int64_t kChatTokens = 11;
  constexpr int64_t kAdded = 64;
  const int64_t size = static_cast<int64_t>(v.tokens.size());
  const int64_t first = size - kAdded >= kMinBuiltinVocab ? size - kAdded : size - kChatTokens;
  if (first < kMinBuiltinVocab) fail("--vocab {} is too small for phi3's chat tokens", size);
  for (int64_t i = 0; first + i < size; ++i) {
    const auto at = static_cast<size_t>(first + i);
    v.tokens[at] = i < kChatTokens ? std::string(kChat[i]) : fmt::format("<|placeholder{}|>", i - 4);
    v.scores[at] = 0.0f;
    v.types[at] = i < kChatTokens ? kTokenControl : kTokenUnused;
  }
  return first;
}

void add_weights(gguf::GgufWriter& w, const std::vector<SynthTensor>& plan, uint64_t seed, int num_threads) {
  ThreadPool pool(num_threads);
  const uint64_t model_seed = mix64(seed);
  for (const SynthTensor& t : plan) {
    const uint64_t tensor_seed = mix64(model_seed ^ fnv1a(t.name));
    float mean = 0.0f;
    float std = kBiasStd;
    if (t.init == SynthInit::kNorm) {
      mean = 1.0f;
      std = kNormJitter;
    } else if (t.init == SynthInit::kMatrix) {
      std = 1.0f / std::sqrt(static_cast<float>(t.dims[0]));
    }
    int64_t rows = 1;
    for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
    std::vector<uint8_t> data = encode_rows(
        t.type, rows, t.dims[0],
        [&](int64_t row, std::span<float> out) { fill_normal(tensor_seed, row, mean, std, out); }, pool);
    w.add_tensor(t.name, t.type, t.dims, std::move(data));
  }
}

}  // namespace

std::optional<SynthArch> parse_synth_arch(std::string_view name) {
  if (name == "llama") return SynthArch::kLlama;
  if (name == "qwen2") return SynthArch::kQwen2;
  if (name == "gemma3") return SynthArch::kGemma3;
  if (name == "qwen3") return SynthArch::kQwen3;
  if (name == "olmo2") return SynthArch::kOlmo2;
  if (name == "granite") return SynthArch::kGranite;
  if (name == "phi3") return SynthArch::kPhi3;
  if (name == "gemma2") return SynthArch::kGemma2;
  if (name == "qwen2moe") return SynthArch::kQwen2Moe;
  if (name == "qwen3moe") return SynthArch::kQwen3Moe;
  if (name == "olmoe") return SynthArch::kOlmoe;
  return std::nullopt;
}

std::string_view synth_arch_name(SynthArch arch) {
  switch (arch) {
    case SynthArch::kLlama: return "llama";
    case SynthArch::kQwen2: return "qwen2";
    case SynthArch::kGemma3: return "gemma3";
    case SynthArch::kQwen3: return "qwen3";
    case SynthArch::kOlmo2: return "olmo2";
    case SynthArch::kGranite: return "granite";
    case SynthArch::kPhi3: return "phi3";
    case SynthArch::kGemma2: return "gemma2";
    case SynthArch::kQwen2Moe: return "qwen2moe";
    case SynthArch::kQwen3Moe: return "qwen3moe";
    case SynthArch::kOlmoe: return "olmoe";
  }
  check_failed("known SynthArch", "value outside the enum");
}

std::vector<std::string> synth_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

SynthShape resolve_synth_shape(SynthArch arch, std::string_view preset, const ShapeOverrides& o) {
  SynthShape s = find_preset(preset).shape;
  s.n_embd = o.n_embd.value_or(s.n_embd);
  s.n_layer = o.n_layer.value_or(s.n_layer);
  s.n_head = o.n_head.value_or(s.n_head);
  s.n_kv_head = o.n_kv_head.value_or(s.n_kv_head);
  s.n_ff = o.n_ff.value_or(s.n_ff);
  s.vocab = o.vocab.value_or(s.vocab);
  s.ctx = o.ctx.value_or(s.ctx);
  check_positive("--n-embd", s.n_embd);
  check_positive("--n-layer", s.n_layer);
  check_positive("--n-head", s.n_head);
  check_positive("--n-kv-head", s.n_kv_head);
  check_positive("--n-ff", s.n_ff);
  check_positive("--vocab", s.vocab);
  check_positive("--ctx", s.ctx);
  if (o.head_dim) {
    check_positive("--head-dim", *o.head_dim);
    s.head_dim = *o.head_dim;
  } else if (s.head_dim > 0) {
    // The preset's own head size (gemma2-2b: 256, not n_embd / n_head).
  } else if (s.n_embd % s.n_head != 0) {
    fail("n_embd {} is not divisible by n_head {} (give --head-dim to decouple them)", s.n_embd, s.n_head);
  } else {
    s.head_dim = s.n_embd / s.n_head;
  }
  if (s.n_head % s.n_kv_head != 0) {
    fail("n_head {} is not a multiple of n_kv_head {}", s.n_head, s.n_kv_head);
  }
  s.tied_output = arch == SynthArch::kGemma3 || arch == SynthArch::kGemma2;
  // OLMoE has no grouped-query attention: its k norm spans n_embd, which
  // readers (llama.cpp) expect whatever the KV head count.
  if (arch == SynthArch::kOlmoe) {
    if (o.n_kv_head && *o.n_kv_head != s.n_head)
      fail("--arch olmoe has as many KV heads as heads ({}), got --n-kv-head {}", s.n_head, *o.n_kv_head);
    s.n_kv_head = s.n_head;
  }
  resolve_synth_experts(arch, o, s);
  return s;
}

std::vector<SynthTensor> plan_synth_tensors(SynthArch arch, const SynthShape& s, const WeightFormat& format,
                                            TensorType last_resort, std::vector<std::string>* notes) {
  Planner p(s, format, last_resort, notes);
  const int64_t q_dim = s.n_head * s.head_dim;
  const int64_t kv_dim = s.n_kv_head * s.head_dim;
  const bool gemma = arch == SynthArch::kGemma3;
  const bool olmo2 = arch == SynthArch::kOlmo2;  // no pre-norms; post-norms; full-width q/k norms
  const bool pre_norm = !olmo2;
  const bool post_norms = gemma || olmo2 || arch == SynthArch::kGemma2;
  const bool phi3 = arch == SynthArch::kPhi3;  // fused q/k/v and gate/up, as Phi-3's qkv_proj and gate_up_proj
  const bool head_qk_norm = gemma || arch == SynthArch::kQwen3 || arch == SynthArch::kQwen3Moe;
  const bool full_qk_norm = olmo2 || arch == SynthArch::kOlmoe;  // over the whole projection
  const bool qkv_bias = arch == SynthArch::kQwen2 || arch == SynthArch::kQwen2Moe;
  p.matrix("token_embd", -1, s.n_embd, s.vocab);
  p.vector("output_norm.weight", s.n_embd, SynthInit::kNorm);
  if (!s.tied_output) p.matrix("output", -1, s.n_embd, s.vocab);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string blk = fmt::format("blk.{}.", i);
    if (pre_norm) p.vector(blk + "attn_norm.weight", s.n_embd, SynthInit::kNorm);
    if (phi3) {
      p.matrix("attn_qkv", i, s.n_embd, q_dim + 2 * kv_dim);
    } else {
      p.matrix("attn_q", i, s.n_embd, q_dim);
      p.matrix("attn_k", i, s.n_embd, kv_dim);
      p.matrix("attn_v", i, s.n_embd, kv_dim);
    }
    if (qkv_bias) {
      p.vector(blk + "attn_q.bias", q_dim, SynthInit::kBias);
      p.vector(blk + "attn_k.bias", kv_dim, SynthInit::kBias);
      p.vector(blk + "attn_v.bias", kv_dim, SynthInit::kBias);
    }
    if (head_qk_norm || full_qk_norm) {
      p.vector(blk + "attn_q_norm.weight", full_qk_norm ? q_dim : s.head_dim, SynthInit::kNorm);
      p.vector(blk + "attn_k_norm.weight", full_qk_norm ? kv_dim : s.head_dim, SynthInit::kNorm);
    }
    p.matrix("attn_output", i, q_dim, s.n_embd);
    if (post_norms) p.vector(blk + "post_attention_norm.weight", s.n_embd, SynthInit::kNorm);
    if (pre_norm) p.vector(blk + "ffn_norm.weight", s.n_embd, SynthInit::kNorm);
    plan_ffn_tensors(p, s, i, phi3);
    if (post_norms) p.vector(blk + "post_ffw_norm.weight", s.n_embd, SynthInit::kNorm);
  }
  return p.take();
}

void set_arch_keys(gguf::GgufWriter& w, SynthArch arch, const SynthShape& s) {
  const std::string a(synth_arch_name(arch));
  auto u32 = [&](std::string_view key, int64_t v) {
    w.set(fmt::format("{}.{}", a, key), Value::u32(static_cast<uint32_t>(v)));
  };
  auto f32 = [&](std::string_view key, float v) { w.set(fmt::format("{}.{}", a, key), Value::f32(v)); };
  w.set("general.architecture", Value::str(a));
  u32("context_length", s.ctx);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  u32("feed_forward_length", s.n_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_kv_head);
  const bool gemma = arch == SynthArch::kGemma3 || arch == SynthArch::kGemma2;
  if (gemma || s.head_dim * s.n_head != s.n_embd) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
  }
  if (arch == SynthArch::kGemma3) {
    f32("attention.layer_norm_rms_epsilon", 1e-6f);
    f32("rope.freq_base", 1e6f);
    u32("attention.sliding_window", s.sliding_window);
    return;
  }
  if (arch == SynthArch::kGemma2) {  // as Gemma 2 files: no RoPE keys (base 10000, every dimension)
    f32("attention.layer_norm_rms_epsilon", 1e-6f);
    u32("attention.sliding_window", s.sliding_window);
    f32("attn_logit_softcapping", s.attn_softcap > 0.0f ? s.attn_softcap : 50.0f);
    f32("final_logit_softcapping", s.final_softcap > 0.0f ? s.final_softcap : 30.0f);
    return;
  }
  set_expert_keys(w, arch, s);
  // OLMoE: llama's RoPE base and norm epsilon.
  const bool llama =
      arch == SynthArch::kLlama || arch == SynthArch::kGranite || arch == SynthArch::kPhi3 || arch == SynthArch::kOlmoe;
  // Phi-3 files state a window that llama.cpp (and so tokenmill) ignores.
  if (arch == SynthArch::kPhi3) u32("attention.sliding_window", s.sliding_window);
  if ((arch == SynthArch::kQwen3 || arch == SynthArch::kQwen3Moe) && s.head_dim * s.n_head == s.n_embd) {
    u32("attention.key_length", s.head_dim);  // Qwen 3 files always state it
    u32("attention.value_length", s.head_dim);
  }
  u32("rope.dimension_count", s.head_dim);
  f32("rope.freq_base", arch == SynthArch::kOlmo2 ? 5e5f : llama ? 10000.0f : 1e6f);
  f32("attention.layer_norm_rms_epsilon", llama ? 1e-5f : 1e-6f);
  u32("vocab_size", s.vocab);
  if (arch == SynthArch::kGranite) {
    // The multipliers of Granite 3.1 2B (embedding, residual, attention
    // and logits multipliers in its config.json).
    f32("embedding_scale", 12.0f);
    f32("residual_scale", 0.22f);
    f32("attention.scale", 0.015625f);
    f32("logit_scale", 8.0f);
  }
}

gguf::GgufWriter build_synth_model(const SynthOptions& opt, std::vector<std::string>* notes) {
  ShapeOverrides overrides = opt.overrides;
  const std::optional<gguf::GgufFile> vocab_file = open_vocab(opt, overrides);
  const SynthShape shape = resolve_synth_shape(opt.arch, opt.preset, overrides);
  const std::vector<SynthTensor> plan = plan_synth_tensors(opt.arch, shape, opt.format, TensorType::F16, notes);

  gguf::GgufWriter w;
  w.set("general.architecture", Value::str(std::string(synth_arch_name(opt.arch))));
  w.set("general.name", Value::str(fmt::format("synthetic {}", opt.preset)));
  w.set("general.file_type", Value::u32(llama_file_type(opt.format)));
  w.set("tokenmill.synth.seed", Value::u64(opt.seed));
  set_arch_keys(w, opt.arch, shape);
  add_synth_rope_scaling(w, opt.rope);
  if (vocab_file) {
    copy_tokenizer_keys(*vocab_file, w);
  } else if (const std::optional<ShippedBpe> bpe = shipped_bpe(opt.arch)) {
    set_bpe_tokenizer_keys(w, builtin_bpe_vocab(shape.vocab, bpe->specials), bpe->pre);
  } else if (opt.arch == SynthArch::kPhi3) {
    VocabTables vocab = builtin_vocab(shape.vocab);
    const int64_t endoftext = add_phi3_chat_tokens(vocab);
    set_spm_tokenizer_keys(w, vocab);
    w.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(endoftext)));
    w.set("tokenizer.ggml.eot_token_id", Value::u32(static_cast<uint32_t>(endoftext + 7)));  // <|end|>
  } else {
    set_spm_tokenizer_keys(w, builtin_vocab(shape.vocab));
  }
  add_weights(w, plan, opt.seed, opt.num_threads);
  return w;
}

void write_synth_model(const SynthOptions& options, const std::string& path) {
  std::vector<std::string> notes;
  const gguf::GgufWriter writer = build_synth_model(options, &notes);
  for (const std::string& note : notes) std::fprintf(stderr, "%s\n", note.c_str());
  writer.write(path);
}

}  // namespace tokenmill::model
