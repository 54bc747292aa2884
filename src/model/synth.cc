#include "model/synth.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>

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

// n_embd, n_layer, n_head, n_kv_head, n_ff, vocab, head_dim, ctx, sliding_window.
// "tiny" keeps every file under a few hundred KB and gives gemma3 a sliding
// window shorter than typical test prompts, so that path runs in tests.
const Preset kPresets[] = {
    {"tiny", {64, 2, 4, 2, 128, 512, 0, 256, 8, false}},
    {"tinyllama-1.1b", {2048, 22, 32, 4, 5632, 32000, 0, 2048, 512, false}},
    {"llama-7b", {4096, 32, 32, 32, 11008, 32000, 0, 4096, 512, false}},
};

// Largest accepted size of any one dimension: keeps every product of two or
// three dimensions far from int64 overflow.
constexpr int64_t kMaxSynthDim = int64_t{1} << 24;

constexpr float kNormJitter = 0.02f;
constexpr float kBiasStd = 0.02f;

// ---- Deterministic PRNG: splitmix64 streams, Box-Muller normals. ----

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

// Fills out with mean + std * N(0, 1). Each row has its own stream derived
// from (tensor seed, row), so rows can be generated in any order on any
// thread and the file still comes out the same.
void fill_normal(uint64_t tensor_seed, int64_t row, float mean, float std, std::span<float> out) {
  uint64_t state = mix64(tensor_seed ^ mix64(static_cast<uint64_t>(row)));
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  constexpr float kInv24 = 1.0f / 16777216.0f;
  for (size_t i = 0; i < out.size(); i += 2) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t bits = mix64(state);
    const float u1 = static_cast<float>((bits >> 40) + 1) * kInv24;  // (0, 1]
    const float u2 = static_cast<float>((bits >> 8) & 0xFFFFFF) * kInv24;
    const float r = std::sqrt(-2.0f * std::log(u1));
    out[i] = mean + std * r * std::cos(kTwoPi * u2);
    if (i + 1 < out.size()) out[i + 1] = mean + std * r * std::sin(kTwoPi * u2);
  }
}

// ---- Tensor plan. ----

// llama.cpp's "use more bits" layer rule for mostly-Q4_K_M: the first and
// last eighth of the layers and every third layer in between (about half).
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// Q4_K_M: Q4_K everywhere except the tensors that quantization error hurts
// most, which get Q6_K: the classifier (output.weight, or token_embd.weight
// when it is tied to the output), and attn_v and ffn_down in the layers
// use_more_bits picks.
TensorType q4_k_m_type(std::string_view role, int64_t layer, const SynthShape& shape) {
  if (role == "output" || (role == "token_embd" && shape.tied_output)) return TensorType::Q6_K;
  if ((role == "attn_v" || role == "ffn_down") && use_more_bits(layer, shape.n_layer)) {
    return TensorType::Q6_K;
  }
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

  std::vector<SynthTensor> take() { return std::move(tensors_); }

 private:
  const SynthShape& shape_;
  WeightFormat format_;
  TensorType last_resort_;
  std::vector<std::string>* notes_;
  std::vector<SynthTensor> tensors_;
};

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
  if (opt.shared_dir.empty() || (opt.preset != "tinyllama-1.1b" && opt.preset != "llama-7b")) {
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
  return std::nullopt;
}

std::string_view synth_arch_name(SynthArch arch) {
  switch (arch) {
    case SynthArch::kLlama: return "llama";
    case SynthArch::kQwen2: return "qwen2";
    case SynthArch::kGemma3: return "gemma3";
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
  } else if (s.n_embd % s.n_head != 0) {
    fail("n_embd {} is not divisible by n_head {} (give --head-dim to decouple them)", s.n_embd, s.n_head);
  } else {
    s.head_dim = s.n_embd / s.n_head;
  }
  if (s.n_head % s.n_kv_head != 0) {
    fail("n_head {} is not a multiple of n_kv_head {}", s.n_head, s.n_kv_head);
  }
  s.tied_output = arch == SynthArch::kGemma3;
  return s;
}

std::vector<SynthTensor> plan_synth_tensors(SynthArch arch, const SynthShape& s, const WeightFormat& format,
                                            TensorType last_resort, std::vector<std::string>* notes) {
  Planner p(s, format, last_resort, notes);
  const int64_t q_dim = s.n_head * s.head_dim;
  const int64_t kv_dim = s.n_kv_head * s.head_dim;
  const bool gemma = arch == SynthArch::kGemma3;
  p.matrix("token_embd", -1, s.n_embd, s.vocab);
  p.vector("output_norm.weight", s.n_embd, SynthInit::kNorm);
  if (!s.tied_output) p.matrix("output", -1, s.n_embd, s.vocab);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string blk = fmt::format("blk.{}.", i);
    p.vector(blk + "attn_norm.weight", s.n_embd, SynthInit::kNorm);
    p.matrix("attn_q", i, s.n_embd, q_dim);
    p.matrix("attn_k", i, s.n_embd, kv_dim);
    p.matrix("attn_v", i, s.n_embd, kv_dim);
    if (arch == SynthArch::kQwen2) {
      p.vector(blk + "attn_q.bias", q_dim, SynthInit::kBias);
      p.vector(blk + "attn_k.bias", kv_dim, SynthInit::kBias);
      p.vector(blk + "attn_v.bias", kv_dim, SynthInit::kBias);
    }
    if (gemma) {
      p.vector(blk + "attn_q_norm.weight", s.head_dim, SynthInit::kNorm);
      p.vector(blk + "attn_k_norm.weight", s.head_dim, SynthInit::kNorm);
    }
    p.matrix("attn_output", i, q_dim, s.n_embd);
    if (gemma) p.vector(blk + "post_attention_norm.weight", s.n_embd, SynthInit::kNorm);
    p.vector(blk + "ffn_norm.weight", s.n_embd, SynthInit::kNorm);
    p.matrix("ffn_gate", i, s.n_embd, s.n_ff);
    p.matrix("ffn_up", i, s.n_embd, s.n_ff);
    p.matrix("ffn_down", i, s.n_ff, s.n_embd);
    if (gemma) p.vector(blk + "post_ffw_norm.weight", s.n_embd, SynthInit::kNorm);
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
  if (arch == SynthArch::kGemma3 || s.head_dim * s.n_head != s.n_embd) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
  }
  if (arch == SynthArch::kGemma3) {
    f32("attention.layer_norm_rms_epsilon", 1e-6f);
    f32("rope.freq_base", 1e6f);
    u32("attention.sliding_window", s.sliding_window);
    return;
  }
  const bool llama = arch == SynthArch::kLlama;
  u32("rope.dimension_count", s.head_dim);
  f32("rope.freq_base", llama ? 10000.0f : 1e6f);
  f32("attention.layer_norm_rms_epsilon", llama ? 1e-5f : 1e-6f);
  u32("vocab_size", s.vocab);
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
  if (vocab_file) {
    copy_tokenizer_keys(*vocab_file, w);
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
