// Reading a TokenizerSpec from GGUF metadata (the tokenizer.ggml.* keys).
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::tokenizer {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";

bool is_no_vocab(std::string_view model) { return model.empty() || model == "no_vocab" || model == "none"; }

// The array under key, checked to hold elements for which `ok` holds.
// Returns nullptr when the key is absent.
template <typename Pred>
const gguf::Array* typed_array(const gguf::GgufFile& file, std::string_view key, std::string_view what, Pred ok) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return nullptr;
  if (!value->is_array()) {
    fail("{}: {} must be an array of {}, found {}", file.name(), key, what, gguf::value_type_name(value->type));
  }
  const gguf::Array& array = value->as_array();
  for (const gguf::Value& item : array.items) {
    if (!ok(item)) {
      fail("{}: {} must be an array of {}, found an element of type {}", file.name(), key, what,
           gguf::value_type_name(item.type));
    }
  }
  return &array;
}

std::vector<std::string> read_strings(const gguf::GgufFile& file, std::string_view key) {
  std::vector<std::string> out;
  const gguf::Array* array = typed_array(file, key, "strings", [](const gguf::Value& v) { return v.is_string(); });
  if (array == nullptr) return out;
  out.reserve(array->items.size());
  for (const gguf::Value& item : array->items) out.push_back(item.as_string());
  return out;
}

std::vector<float> read_scores(const gguf::GgufFile& file) {
  std::vector<float> out;
  const gguf::Array* array = typed_array(file, "tokenizer.ggml.scores", "numbers",
                                         [](const gguf::Value& v) { return v.is_float() || v.is_integer(); });
  if (array == nullptr) return out;
  out.reserve(array->items.size());
  for (const gguf::Value& item : array->items) out.push_back(static_cast<float>(item.as_float()));
  return out;
}

std::vector<TokenType> read_types(const gguf::GgufFile& file) {
  std::vector<TokenType> out;
  const gguf::Array* array =
      typed_array(file, "tokenizer.ggml.token_type", "integers", [](const gguf::Value& v) { return v.is_integer(); });
  if (array == nullptr) return out;
  out.reserve(array->items.size());
  for (size_t i = 0; i < array->items.size(); ++i) {
    const gguf::Value& item = array->items[i];
    // A uint64 is range-checked before as_int(), which CHECKs that it fits
    // int64: a file may hold any value here.
    const bool in_range = item.type == gguf::ValueType::UINT64 ? std::get<uint64_t>(item.data) <= 6
                                                               : item.as_int() >= 0 && item.as_int() <= 6;
    if (!in_range) {
      fail("{}: tokenizer.ggml.token_type[{}] is {}, not a token type (0..6)", file.name(), i,
           item.to_display_string());
    }
    out.push_back(static_cast<TokenType>(item.as_int()));
  }
  return out;
}

std::optional<int64_t> read_id(const gguf::GgufFile& file, std::string_view key) {
  if (!file.has(key)) return std::nullopt;
  return file.get_int(key);
}

std::optional<bool> read_flag(const gguf::GgufFile& file, std::string_view key) {
  if (!file.has(key)) return std::nullopt;
  return file.get_bool(key);
}

}  // namespace

bool Tokenizer::present_in(const gguf::GgufFile& file) {
  const gguf::Value* model = file.find(kModelKey);
  if (model == nullptr || !model->is_string() || is_no_vocab(model->as_string())) return false;
  return file.has(kTokensKey);
}

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
  const std::string model = file.get_string_or(std::string(kModelKey), "");
  if (is_no_vocab(model)) {
    fail("{}: the file has no tokenizer ({} is '{}')", file.name(), kModelKey, model);
  }
  TokenizerSpec spec;
  if (model == "llama") {
    spec.kind = TokenizerKind::kSpm;
  } else if (model == "gpt2") {
    spec.kind = TokenizerKind::kBpe;
  } else {
    fail("{}: tokenizer model '{}' is not supported (supported: llama, gpt2)", file.name(), model);
  }
  if (!file.has(kTokensKey)) fail("{}: {} is missing", file.name(), kTokensKey);
  spec.tokens = read_strings(file, kTokensKey);
  spec.scores = read_scores(file);
  spec.types = read_types(file);
  if (spec.kind == TokenizerKind::kBpe) {
    if (!file.has("tokenizer.ggml.merges")) {
      fail("{}: tokenizer.ggml.merges is missing (needed by the gpt2 tokenizer)", file.name());
    }
    spec.merges = read_strings(file, "tokenizer.ggml.merges");
    spec.pre_tokenizer = file.get_string_or("tokenizer.ggml.pre", "default");
    if (spec.pre_tokenizer.empty()) spec.pre_tokenizer = "default";  // as llama.cpp
  }
  spec.bos_id = read_id(file, "tokenizer.ggml.bos_token_id");
  spec.eos_id = read_id(file, "tokenizer.ggml.eos_token_id");
  spec.unk_id = read_id(file, "tokenizer.ggml.unknown_token_id");
  spec.pad_id = read_id(file, "tokenizer.ggml.padding_token_id");
  spec.eot_id = read_id(file, "tokenizer.ggml.eot_token_id");
  spec.eom_id = read_id(file, "tokenizer.ggml.eom_token_id");
  spec.add_bos = read_flag(file, "tokenizer.ggml.add_bos_token");
  spec.add_eos = read_flag(file, "tokenizer.ggml.add_eos_token");
  spec.add_space_prefix = read_flag(file, "tokenizer.ggml.add_space_prefix");
  try {
    return from_spec(std::move(spec));
  } catch (const Error& e) {
    fail("{}: {}", file.name(), e.what());
  }
}

}  // namespace tokenmill::tokenizer
