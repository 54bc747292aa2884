// libFuzzer target for building a tokenizer from GGUF tokenizer metadata
// (Tokenizer::from_gguf, src/tokenizer/tokenizer_gguf.cc) and then using it.
//
// The input describes the metadata rather than being a GGUF file, so that
// mutations change tokens, types and ids instead of breaking the framing
// (fuzz_gguf covers that). Layout: an 11-byte header, then sections split
// at '\0':  tokens ('\n'-separated) \0 merges ('\n'-separated) \0 type
// bytes \0 score bytes \0 text to tokenize (the rest, first 256 bytes).
// Header: [0] model, [1] pre-tokenizer, [2] element type of token_type (low
// nibble) and of scores (high nibble), [3] which keys are present (see
// kHas*), [4] flag values and flag types, [5..10] bos, eos, unk, pad, eot
// and eom ids (0xFF absent, 0xFE a uint64 too big for int64, 0xFD a string,
// else the byte as int8). The metadata goes through GgufWriter and
// GgufFile::parse, as a file from disk would.
//
// Contract: tokenmill::Error is the only clean rejection (missing, wrongly
// typed or inconsistent metadata, an unknown model or pre-tokenizer, PCRE2
// limits while splitting). A tokenizer that loads must have one id per
// token and its special ids inside the vocabulary (or -1), encode the text
// into in-range ids, decode them, and stream them through the incremental
// detokenizer as valid UTF-8 equal to decode() whenever that is valid UTF-8.
// Anything else aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace {

using tokenmill::gguf::GgufFile;
using tokenmill::gguf::GgufWriter;
using tokenmill::gguf::Value;
using tokenmill::gguf::ValueType;
using namespace tokenmill::tokenizer;

// Header byte 3: which keys are written.
constexpr uint8_t kHasScores = 1, kHasTypes = 2, kHasMerges = 4, kFlagsShift = 3;
constexpr uint8_t kExactLengths = 64;  // arrays as long as their section, not cycled
constexpr uint8_t kHasPre = 128;
constexpr size_t kMaxText = 256;  // a short text: encode cost is not under test here

void require(bool ok) {
  if (!ok) std::abort();  // a tokenizer that loaded but breaks an invariant
}

// Consumes the input front to back; past its end, bytes are 0.
struct Reader {
  std::string_view rest;
  uint8_t byte() {
    if (rest.empty()) return 0;
    const auto b = static_cast<uint8_t>(rest[0]);
    rest.remove_prefix(1);
    return b;
  }
  std::string_view section() {
    const size_t end = std::min(rest.find('\0'), rest.size());
    const std::string_view s = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    return s;
  }
};

std::vector<Value> split_strings(std::string_view s) {
  std::vector<Value> out;
  if (s.empty()) return out;  // an empty section is an empty array
  for (size_t begin = 0;;) {
    const size_t end = std::min(s.find('\n', begin), s.size());
    out.push_back(Value::str(std::string(s.substr(begin, end - begin))));
    if (end == s.size()) return out;
    begin = end + 1;
  }
}

// v stored as `type`, truncated to its width as a file would hold it;
// STRING is the wrongly typed case.
Value typed_number(ValueType type, int64_t v, double as_float) {
  const auto u = static_cast<uint64_t>(v);
  switch (type) {
    case ValueType::UINT8: return {type, uint64_t{static_cast<uint8_t>(u)}};
    case ValueType::UINT16: return {type, uint64_t{static_cast<uint16_t>(u)}};
    case ValueType::UINT32: return {type, uint64_t{static_cast<uint32_t>(u)}};
    case ValueType::UINT64: return {type, u};
    case ValueType::INT8: return {type, int64_t{static_cast<int8_t>(v)}};
    case ValueType::INT16: return {type, int64_t{static_cast<int16_t>(v)}};
    case ValueType::INT32: return {type, int64_t{static_cast<int32_t>(v)}};
    case ValueType::INT64: return {type, v};
    case ValueType::FLOAT32: return Value::f32(static_cast<float>(as_float));
    case ValueType::FLOAT64: return Value::f64(as_float);
    default: return Value::str(std::to_string(v));
  }
}

constexpr ValueType kTypeElements[] = {ValueType::INT32,  ValueType::UINT8, ValueType::INT8,
                                       ValueType::UINT16, ValueType::INT16, ValueType::UINT32,
                                       ValueType::UINT64, ValueType::INT64, ValueType::STRING};
constexpr ValueType kScoreElements[] = {ValueType::FLOAT32, ValueType::FLOAT64, ValueType::INT32, ValueType::UINT64,
                                        ValueType::STRING};

// One element per token (the section's bytes cycled), or per section byte
// with `exact`, so that both consistent and mismatched lengths occur.
template <typename Make>
Value per_token_array(ValueType element, std::string_view bytes, size_t num_tokens, bool exact, Make make) {
  std::vector<Value> items;
  const size_t n = exact ? bytes.size() : num_tokens;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = bytes.empty() ? 1 : static_cast<uint8_t>(bytes[i % bytes.size()]);
    items.push_back(make(b));
  }
  return Value::array(element, std::move(items));
}

void set_ids(GgufWriter& w, Reader& in) {
  static constexpr const char* kKeys[] = {"tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
                                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                                          "tokenizer.ggml.eot_token_id",     "tokenizer.ggml.eom_token_id"};
  for (const char* key : kKeys) {
    const uint8_t b = in.byte();
    if (b == 0xFF) continue;
    if (b == 0xFE) {
      w.set(key, Value::u64(std::numeric_limits<uint64_t>::max()));
    } else if (b == 0xFD) {
      w.set(key, Value::str("1"));
    } else {
      w.set(key, Value::i32(static_cast<int8_t>(b)));
    }
  }
}

void set_flags(GgufWriter& w, uint8_t present, uint8_t flags) {
  static constexpr const char* kKeys[] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                          "tokenizer.ggml.add_space_prefix"};
  for (int i = 0; i < 3; ++i) {
    if (((present >> (kFlagsShift + i)) & 1) == 0) continue;
    const bool value = (flags >> i) & 1;
    const bool wrong_type = (flags >> (3 + i)) & 1;
    w.set(kKeys[i], wrong_type ? Value::u8(value) : Value::boolean(value));
  }
}

const std::string& pre_tokenizer_name(uint8_t b) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = PreTokenizer::known_names();
    n.push_back("");
    n.push_back("no-such-pre");
    return n;
  }();
  return names[b % names.size()];
}

// Writes the metadata the input describes; `text` gets the text to tokenize.
GgufWriter build_metadata(Reader& in, std::string& text) {
  static constexpr const char* kModels[] = {"llama", "gpt2", "no_vocab", "bert"};
  const uint8_t model = in.byte(), pre = in.byte(), elements = in.byte();
  const uint8_t present = in.byte(), flags = in.byte();
  GgufWriter w;
  w.set("tokenizer.ggml.model", Value::str(kModels[model % 4]));
  if (present & kHasPre) w.set("tokenizer.ggml.pre", Value::str(pre_tokenizer_name(pre)));
  set_flags(w, present, flags);
  set_ids(w, in);
  std::vector<Value> tokens = split_strings(in.section());
  const size_t num_tokens = tokens.size();
  w.set("tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens)));
  std::vector<Value> merges = split_strings(in.section());
  if (present & kHasMerges) w.set("tokenizer.ggml.merges", Value::array(ValueType::STRING, std::move(merges)));
  const std::string_view type_bytes = in.section(), score_bytes = in.section();
  const bool exact = present & kExactLengths;
  if (present & kHasTypes) {
    const ValueType e = kTypeElements[(elements & 15) % std::size(kTypeElements)];
    // Mostly 0..7 (7 is not a type); high bytes give negative or huge values.
    w.set("tokenizer.ggml.token_type", per_token_array(e, type_bytes, num_tokens, exact, [e](uint8_t b) {
            return typed_number(e, b < 0x80 ? b % 8 : static_cast<int8_t>(b), 0.0);
          }));
  }
  if (present & kHasScores) {
    const ValueType e = kScoreElements[(elements >> 4) % std::size(kScoreElements)];
    w.set("tokenizer.ggml.scores", per_token_array(e, score_bytes, num_tokens, exact, [e](uint8_t b) {
            return typed_number(e, static_cast<int8_t>(b), static_cast<int8_t>(b) / 4.0);
          }));
  }
  text = std::string(in.rest.substr(0, kMaxText));
  return w;
}

void check_detokenize(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
  const std::string decoded = t.decode(ids, skip_special);
  IncrementalDetokenizer detok(t, skip_special);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  require(is_valid_utf8(streamed));
  if (is_valid_utf8(decoded)) require(streamed == decoded);
}

void check_tokenizer(const Tokenizer& t, int64_t num_tokens, const std::string& text) {
  const int32_t n = t.vocab_size();
  require(n == num_tokens);
  for (int32_t id : {t.bos_id(), t.eos_id(), t.unk_id(), t.pad_id(), t.eot_id()}) {
    require(id >= kNoToken && id < n);
  }
  const std::vector<int32_t>& eog = t.end_of_generation_ids();
  require(std::is_sorted(eog.begin(), eog.end()) && std::adjacent_find(eog.begin(), eog.end()) == eog.end());
  for (int32_t id : eog) require(id >= 0 && id < n && t.is_end_of_generation(id));
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = t.encode(text, special, special);
    for (int32_t id : ids) require(id >= 0 && id < n);
    check_detokenize(t, ids, !special);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{std::string_view(reinterpret_cast<const char*>(data), size)};
  std::string text;
  const GgufWriter writer = build_metadata(in, text);
  const std::vector<uint8_t> bytes = writer.to_bytes();
  try {
    const GgufFile file = GgufFile::parse(bytes, "fuzz.gguf");
    const Tokenizer t = Tokenizer::from_gguf(file);
    check_tokenizer(t, static_cast<int64_t>(file.get_array("tokenizer.ggml.tokens").items.size()), text);
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
