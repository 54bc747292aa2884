#include "model/llama2c_import.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "model/synth.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace tokenmill::model {
namespace {

using gguf::TensorType;
using gguf::Value;

constexpr int64_t kMaxDim = int64_t{1} << 24;

// a * b, throwing Error instead of overflowing (header values are untrusted).
int64_t checked_mul(int64_t a, int64_t b, const std::string& name) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail("'{}': llama2.c header sizes are too large", name);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& name) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail("'{}': llama2.c header sizes are too large", name);
  return r;
}

// Offsets (in floats, from the end of the header) of every array of the
// checkpoint, in file order.
struct Layout {
  int64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls, end_shared, end_unshared;
};

Layout compute_layout(const Llama2cHeader& h, const std::string& name) {
  auto mul = [&](int64_t a, int64_t b) { return checked_mul(a, b, name); };
  const int64_t head_size = h.dim / h.n_heads;
  const int64_t kv_dim = mul(h.n_kv_heads, head_size);
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t start = at;
    at = checked_add(at, n, name);
    return start;
  };
  Layout l{};
  l.emb = take(mul(h.vocab_size, h.dim));
  l.rms_att = take(mul(h.n_layers, h.dim));
  l.wq = take(mul(mul(h.n_layers, h.dim), h.dim));
  l.wk = take(mul(mul(h.n_layers, kv_dim), h.dim));
  l.wv = take(mul(mul(h.n_layers, kv_dim), h.dim));
  l.wo = take(mul(mul(h.n_layers, h.dim), h.dim));
  l.rms_ffn = take(mul(h.n_layers, h.dim));
  l.w1 = take(mul(mul(h.n_layers, h.hidden_dim), h.dim));
  l.w2 = take(mul(mul(h.n_layers, h.dim), h.hidden_dim));
  l.w3 = take(mul(mul(h.n_layers, h.hidden_dim), h.dim));
  l.rms_final = take(h.dim);
  l.freq = take(mul(2, mul(h.seq_len, head_size / 2)));
  l.wcls = l.end_shared = at;
  l.end_unshared = checked_add(at, mul(h.vocab_size, h.dim), name);
  return l;
}

// Offset (floats) of each GGUF tensor's data in the checkpoint.
std::unordered_map<std::string, int64_t> tensor_offsets(const Llama2cHeader& h, const Layout& l) {
  const int64_t kv_dim = h.n_kv_heads * (h.dim / h.n_heads);
  std::unordered_map<std::string, int64_t> at = {
      {"token_embd.weight", l.emb}, {"output_norm.weight", l.rms_final}, {"output.weight", l.wcls}};
  for (int64_t i = 0; i < h.n_layers; ++i) {
    auto blk = [&](std::string_view role, int64_t offset) { at[fmt::format("blk.{}.{}.weight", i, role)] = offset; };
    blk("attn_norm", l.rms_att + i * h.dim);
    blk("attn_q", l.wq + i * h.dim * h.dim);
    blk("attn_k", l.wk + i * kv_dim * h.dim);
    blk("attn_v", l.wv + i * kv_dim * h.dim);
    blk("attn_output", l.wo + i * h.dim * h.dim);
    blk("ffn_norm", l.rms_ffn + i * h.dim);
    blk("ffn_gate", l.w1 + i * h.hidden_dim * h.dim);
    blk("ffn_down", l.w2 + i * h.dim * h.hidden_dim);
    blk("ffn_up", l.w3 + i * h.hidden_dim * h.dim);
  }
  return at;
}

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string header_string(const Llama2cHeader& h) {
  return fmt::format("dim {}, hidden_dim {}, {} layers, {} heads, {} kv heads, vocab {}, seq_len {}", h.dim,
                     h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len);
}

// Converts one llama2.c token to its SentencePiece-GGUF text and type.
void add_token(VocabTables& v, std::string text, float score) {
  const int64_t id = static_cast<int64_t>(v.tokens.size());
  int32_t type = kTokenNormal;
  if (id < 3) {
    static constexpr std::string_view kSpecial[] = {"<unk>", "<s>", "</s>"};
    text = std::string(kSpecial[id]);
    type = id == 0 ? kTokenUnknown : kTokenControl;
  } else if (text.size() == 6 && text.starts_with("<0x") && text[5] == '>' &&
             std::isxdigit(static_cast<unsigned char>(text[3])) && std::isxdigit(static_cast<unsigned char>(text[4]))) {
    type = kTokenByte;
  } else {
    std::string out;
    for (char c : text) {
      if (c == ' ') {
        out += kSpaceMarker;
      } else {
        out += c;
      }
    }
    text = std::move(out);
  }
  v.tokens.push_back(std::move(text));
  v.scores.push_back(score);
  v.types.push_back(type);
}

}  // namespace

Llama2cHeader parse_llama2c_header(std::span<const uint8_t> file, const std::string& name) {
  if (static_cast<int64_t>(file.size()) < kLlama2cHeaderBytes) {
    fail("'{}' is too small for a llama2.c checkpoint: expected at least {} bytes, got {}", name, kLlama2cHeaderBytes,
         file.size());
  }
  int64_t v[7];
  for (int i = 0; i < 7; ++i) v[i] = read_i32(file.data() + 4 * i);
  Llama2cHeader h{v[0], v[1], v[2], v[3], v[4], v[5] < 0 ? -v[5] : v[5], v[6], v[5] > 0};
  static constexpr std::string_view kNames[] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                                "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    const int64_t x = i == 5 ? h.vocab_size : v[i];
    if (x < 1 || x > kMaxDim) {
      fail("'{}' is not a llama2.c checkpoint: header {} is {} (must be 1..{})", name, kNames[i], v[i], kMaxDim);
    }
  }
  if (h.dim % h.n_heads != 0) fail("'{}': dim {} is not divisible by n_heads {}", name, h.dim, h.n_heads);
  if (h.n_heads % h.n_kv_heads != 0) {
    fail("'{}': n_heads {} is not a multiple of n_kv_heads {}", name, h.n_heads, h.n_kv_heads);
  }
  if ((h.dim / h.n_heads) % 2 != 0) {
    fail("'{}': head size {} is odd; RoPE needs pairs", name, h.dim / h.n_heads);
  }
  const Layout l = compute_layout(h, name);
  const int64_t end = h.shared_classifier ? l.end_shared : l.end_unshared;
  const int64_t expected = checked_add(kLlama2cHeaderBytes, checked_mul(end, 4, name), name);
  if (static_cast<int64_t>(file.size()) != expected) {
    fail("'{}' does not match its llama2.c header ({}, {} classifier): expected {} bytes, got {}", name,
         header_string(h), h.shared_classifier ? "shared" : "unshared", expected, file.size());
  }
  return h;
}

VocabTables read_llama2c_tokenizer(const std::string& path, int64_t vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open tokenizer '{}'", path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  auto need = [&](size_t n, std::string_view what) {
    if (bytes.size() - at < n) {
      fail("tokenizer '{}' is truncated: {} needs {} bytes at offset {}, the file has {}", path, what, n, at,
           bytes.size());
    }
  };
  need(4, "max_token_length");
  at += 4;
  VocabTables v;
  for (int64_t i = 0; i < vocab_size; ++i) {
    const std::string what = fmt::format("token {}", i);
    need(8, what);
    float score;
    std::memcpy(&score, bytes.data() + at, 4);
    const int32_t len = read_i32(bytes.data() + at + 4);
    at += 8;
    if (len < 0) fail("tokenizer '{}': token {} has negative length {}", path, i, len);
    need(static_cast<size_t>(len), what);
    add_token(v, std::string(bytes.begin() + at, bytes.begin() + at + len), score);
    at += static_cast<size_t>(len);
  }
  if (at != bytes.size()) {
    fail(
        "tokenizer '{}' has {} bytes after its {} tokens (expected {} bytes, got {}); does it "
        "belong to this checkpoint?",
        path, bytes.size() - at, vocab_size, at, bytes.size());
  }
  return v;
}

gguf::GgufWriter build_llama2c_gguf(const std::string& checkpoint, const std::optional<std::string>& tokenizer,
                                    const WeightFormat& format, std::vector<std::string>* notes) {
  const MappedFile file = MappedFile::open(checkpoint);
  const Llama2cHeader h = parse_llama2c_header(file.bytes(), checkpoint);
  const Layout layout = compute_layout(h, checkpoint);
  SynthShape shape;
  shape.n_embd = h.dim;
  shape.n_layer = h.n_layers;
  shape.n_head = h.n_heads;
  shape.n_kv_head = h.n_kv_heads;
  shape.n_ff = h.hidden_dim;
  shape.vocab = h.vocab_size;
  shape.head_dim = h.dim / h.n_heads;
  shape.ctx = h.seq_len;
  shape.tied_output = h.shared_classifier;

  gguf::GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("general.name", Value::str(std::filesystem::path(checkpoint).stem().string()));
  w.set("general.file_type", Value::u32(llama_file_type(format)));
  set_arch_keys(w, SynthArch::kLlama, shape);
  if (tokenizer) set_spm_tokenizer_keys(w, read_llama2c_tokenizer(*tokenizer, h.vocab_size));

  const auto offsets = tensor_offsets(h, layout);
  const uint8_t* floats = file.data() + kLlama2cHeaderBytes;
  ThreadPool pool;
  for (const SynthTensor& t : plan_synth_tensors(SynthArch::kLlama, shape, format, TensorType::F32, notes)) {
    const int64_t base = offsets.at(t.name);
    const int64_t row_length = t.dims[0];
    const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    auto source = [&](int64_t row, std::span<float> out) {
      std::memcpy(out.data(), floats + 4 * (base + row * row_length), out.size_bytes());
    };
    w.add_tensor(t.name, t.type, t.dims, encode_rows(t.type, rows, row_length, source, pool));
  }
  return w;
}

void import_llama2c(const std::string& checkpoint, const std::optional<std::string>& tokenizer, const std::string& out,
                    const WeightFormat& format) {
  std::vector<std::string> notes;
  const gguf::GgufWriter writer = build_llama2c_gguf(checkpoint, tokenizer, format, &notes);
  for (const std::string& note : notes) std::fprintf(stderr, "%s\n", note.c_str());
  writer.write(out);
}

}  // namespace tokenmill::model
