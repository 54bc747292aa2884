#include "server/openai/embeddings_request.h"

#include <set>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace tokenmill::server {
namespace {

int32_t embedding_token_id(const RequestJson& v, const std::string& param, const ParseLimits& limits) {
  if (!v.is_number_integer()) bad_request(param, "'{}' token ids must be integers, got {}", param, describe_json(v));
  // Huge unsigned values must not wrap into the vocabulary.
  const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t{1} << 40) ? -1 : v.get<int64_t>();
  if (id < 0 || id >= limits.n_vocab)
    bad_request(param, "'{}' holds token id {} outside the vocabulary [0, {})", param, describe_json(v),
                limits.n_vocab);
  return static_cast<int32_t>(id);
}

PromptInput embedding_token_input(const RequestJson& list, const std::string& param, const ParseLimits& limits) {
  if (list.empty()) bad_request(param, "'{}' must not hold an empty list of token ids", param);
  PromptInput in{false, "", {}};
  in.tokens.reserve(list.size());
  for (const RequestJson& v : list) in.tokens.push_back(embedding_token_id(v, param, limits));
  return in;
}

PromptInput embedding_text_input(const RequestJson& s, const std::string& param) {
  if (s.get_ref<const std::string&>().empty()) bad_request(param, "'{}' must not hold an empty string", param);
  return PromptInput{true, s.get<std::string>(), {}};
}

// A string, a list of token ids (one input), or a list whose items are
// strings or token-id lists (one input each).
std::vector<PromptInput> parse_embedding_inputs(const RequestJson& v, const std::string& param,
                                                const ParseLimits& limits) {
  if (v.is_string()) return {embedding_text_input(v, param)};
  if (!v.is_array())
    bad_request(param, "'{}' must be a string, a list of strings, a list of token ids or a list of those; got {}",
                param, describe_json(v));
  if (v.empty()) bad_request(param, "'{}' must not be empty", param);
  if (v.front().is_number()) return {embedding_token_input(v, param, limits)};
  if (v.size() > kMaxEmbeddingInputs)
    bad_request(param, "'{}' holds {} inputs; at most {} are allowed", param, v.size(), kMaxEmbeddingInputs);
  std::vector<PromptInput> out;
  out.reserve(v.size());
  for (const RequestJson& item : v) {
    if (item.is_string()) {
      out.push_back(embedding_text_input(item, param));
    } else if (item.is_array()) {
      out.push_back(embedding_token_input(item, param, limits));
    } else {
      bad_request(param, "'{}' list items must be strings or lists of token ids, got {}", param, describe_json(item));
    }
  }
  return out;
}

EmbeddingEncoding parse_encoding_format(const JsonFields& f) {
  const std::optional<std::string> format = f.string("encoding_format");
  if (!format || *format == "float") return EmbeddingEncoding::kFloat;
  if (*format == "base64") return EmbeddingEncoding::kBase64;
  bad_request("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got \"{}\"", *format);
}

}  // namespace

EmbeddingRequest parse_embedding_request(std::string_view body, const ParseLimits& limits) {
  const RequestJson root = parse_json_object(body, limits.json);
  const JsonFields f(root);
  f.reject_unknown({"input", "model", "encoding_format", "dimensions", "user"});
  const RequestJson* input = f.find("input");
  if (input == nullptr) bad_request("input", "'input' is required");
  EmbeddingRequest r;
  r.inputs = parse_embedding_inputs(*input, "input", limits);
  r.model = f.string("model").value_or("");
  r.encoding = parse_encoding_format(f);
  r.dimensions = f.integer("dimensions", 1, int64_t{1} << 20);
  f.string("user");  // type-checked, otherwise ignored
  return r;
}

EmbeddingRequest parse_llama_embedding_request(std::string_view body, const ParseLimits& limits) {
  const RequestJson root = parse_json_object(body, limits.json);
  const JsonFields f(root);
  f.reject_unknown({"content", "input", "model", "embd_normalize"});
  if (f.has("content") == f.has("input")) bad_request("content", "give exactly one of 'content' and 'input'");
  const char* param = f.has("content") ? "content" : "input";
  EmbeddingRequest r;
  r.input_param = param;
  r.inputs = parse_embedding_inputs(*f.find(param), param, limits);
  r.model = f.string("model").value_or("");
  const std::optional<int64_t> normalize = f.integer("embd_normalize", -1, 1 << 20);
  if (normalize && *normalize != 2)
    bad_request("embd_normalize", "'embd_normalize' {} is not supported: embeddings are always L2-normalised (2)",
                *normalize);
  return r;
}

}  // namespace tokenmill::server
