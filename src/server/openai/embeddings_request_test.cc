#include "server/openai/embeddings_request.h"

#include <gtest/gtest.h>

#include <cstring>

#include "server/api_error.h"
#include "server/openai/embeddings.h"

namespace tokenmill::server {
namespace {

const ParseLimits kEmbeddingLimits{/*n_vocab=*/1000, /*json=*/{}};

// Parses with `parse`, expecting ApiError 400 whose param and message name
// the problem.
template <typename Parse>
void expect_embedding_400(Parse parse, const std::string& body, const std::string& param, const std::string& needle) {
  try {
    parse(body, kEmbeddingLimits);
    ADD_FAILURE() << "no error for " << body << "; expected one about " << param;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.type(), "invalid_request_error");
    EXPECT_EQ(e.param().value_or("<none>"), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void openai_400(const std::string& body, const std::string& param, const std::string& needle) {
  expect_embedding_400(parse_embedding_request, body, param, needle);
}

void llama_400(const std::string& body, const std::string& param, const std::string& needle) {
  expect_embedding_400(parse_llama_embedding_request, body, param, needle);
}

TEST(EmbeddingRequest, EveryInputForm) {
  EmbeddingRequest r = parse_embedding_request(R"({"input": "hello", "model": "m"})", kEmbeddingLimits);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.input_param, "input");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_TRUE(r.inputs[0].is_text);
  EXPECT_EQ(r.inputs[0].text, "hello");
  EXPECT_EQ(r.encoding, EmbeddingEncoding::kFloat);
  EXPECT_FALSE(r.dimensions.has_value());

  r = parse_embedding_request(R"({"input": ["a", "b c", "d"]})", kEmbeddingLimits);
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(r.inputs[1].text, "b c");
  EXPECT_TRUE(r.model.empty());

  r = parse_embedding_request(R"({"input": [1, 2, 999]})", kEmbeddingLimits);  // one tokenized input
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.inputs[0].is_text);
  EXPECT_EQ(r.inputs[0].tokens, (std::vector<int32_t>{1, 2, 999}));

  r = parse_embedding_request(R"({"input": [[5], [6, 7]], "encoding_format": "base64", "dimensions": 64,
                                  "user": "u"})",
                              kEmbeddingLimits);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].tokens, (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(r.encoding, EmbeddingEncoding::kBase64);
  EXPECT_EQ(r.dimensions, 64);

  r = parse_embedding_request(R"({"input": "x", "encoding_format": "float", "dimensions": null})", kEmbeddingLimits);
  EXPECT_EQ(r.encoding, EmbeddingEncoding::kFloat);
  EXPECT_FALSE(r.dimensions.has_value());
}

TEST(EmbeddingRequest, BadInputsNameTheField) {
  openai_400(R"({"model": "m"})", "input", "'input' is required");
  openai_400(R"({"input": ""})", "input", "empty string");
  openai_400(R"({"input": []})", "input", "must not be empty");
  openai_400(R"({"input": ["a", ""]})", "input", "empty string");
  openai_400(R"({"input": [[1], []]})", "input", "empty list of token ids");
  openai_400(R"({"input": 5})", "input", "must be a string");
  openai_400(R"({"input": [1, "a"]})", "input", "must be integers");
  openai_400(R"({"input": [1.5]})", "input", "must be integers");
  openai_400(R"({"input": [1000]})", "input", "outside the vocabulary [0, 1000)");
  openai_400(R"({"input": [-1]})", "input", "outside the vocabulary");
  openai_400(R"({"input": [18446744073709551615]})", "input", "outside the vocabulary");
  openai_400(R"({"input": [{"text": "a"}]})", "input", "list items must be strings or lists of token ids");
  std::string many = R"({"input": [)";
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many += i == 0 ? R"("a")" : R"(, "a")";
  openai_400(many + "]}", "input", "at most 2048");
}

TEST(EmbeddingRequest, BadOptionsNameTheField) {
  openai_400(R"({"input": "a", "encoding_format": "binary"})", "encoding_format", "\"float\" or \"base64\"");
  openai_400(R"({"input": "a", "encoding_format": 1})", "encoding_format", "must be a string");
  openai_400(R"({"input": "a", "dimensions": 0})", "dimensions", "integer in [1,");
  openai_400(R"({"input": "a", "dimensions": "64"})", "dimensions", "integer");
  openai_400(R"({"input": "a", "model": 3})", "model", "must be a string");
  openai_400(R"({"input": "a", "user": 3})", "user", "must be a string");
  openai_400(R"({"input": "a", "pooling": "mean"})", "pooling", "unrecognized request argument");
}

TEST(EmbeddingRequest, MalformedBodies) {
  for (const char* body : {R"({"input": "a",)", "[1, 2]", "\"text\"", ""}) {
    try {
      parse_embedding_request(body, kEmbeddingLimits);
      ADD_FAILURE() << "no error for " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
    }
  }
}

TEST(LlamaEmbeddingRequest, ContentOrInput) {
  EmbeddingRequest r = parse_llama_embedding_request(R"({"content": "hello"})", kEmbeddingLimits);
  EXPECT_EQ(r.input_param, "content");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].text, "hello");
  r = parse_llama_embedding_request(R"({"content": ["a", [3, 4]], "embd_normalize": 2})", kEmbeddingLimits);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].tokens, (std::vector<int32_t>{3, 4}));
  r = parse_llama_embedding_request(R"({"input": "x", "model": "m"})", kEmbeddingLimits);
  EXPECT_EQ(r.input_param, "input");
  EXPECT_EQ(r.model, "m");
  llama_400(R"({})", "content", "exactly one of 'content' and 'input'");
  llama_400(R"({"content": "a", "input": "b"})", "content", "exactly one");
  llama_400(R"({"content": ""})", "content", "empty string");
  llama_400(R"({"input": []})", "input", "must not be empty");
  llama_400(R"({"content": "a", "embd_normalize": -1})", "embd_normalize", "not supported");
  llama_400(R"({"content": "a", "encoding_format": "base64"})", "encoding_format", "unrecognized");
}

// Decodes standard base64 (test-only, written from RFC 4648 independently
// of the encoder under test).
std::vector<uint8_t> decode_base64_for_test(const std::string& text) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    EXPECT_NE(v, std::string::npos) << "bad base64 character " << c;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xffu));
    }
  }
  return out;
}

TEST(EmbeddingResponse, Base64IsLittleEndianFloat32) {
  // Known vectors: 1.0f is 00 00 80 3f little-endian, "AACAPw==".
  EXPECT_EQ(embedding_base64(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(embedding_base64(std::vector<float>{}), "");
  // Every length's padding, and the bytes back.
  for (size_t n = 1; n <= 7; ++n) {
    std::vector<float> v;
    for (size_t i = 0; i < n; ++i) v.push_back(0.1f * static_cast<float>(i) - 0.33f);
    const std::string b64 = embedding_base64(v);
    EXPECT_EQ(b64.size() % 4, 0u);
    const std::vector<uint8_t> bytes = decode_base64_for_test(b64);
    ASSERT_EQ(bytes.size(), n * 4);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t u = bytes[4 * i] | (bytes[4 * i + 1] << 8) | (bytes[4 * i + 2] << 16) |
                         (static_cast<uint32_t>(bytes[4 * i + 3]) << 24);
      float f = 0;
      std::memcpy(&f, &u, 4);
      EXPECT_EQ(f, v[i]);
    }
  }
}

TEST(EmbeddingResponse, FloatsReadBackExactlyInFewDigits) {
  const std::vector<float> v = {0.1f, -0.333333343f, 1e-8f, 0.0f, 123.456f};
  const nlohmann::json j = embedding_json(v);
  ASSERT_EQ(j.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(static_cast<float>(j[i].get<double>()), v[i]);
  EXPECT_EQ(j[0].dump(), "0.1");
}

TEST(EmbeddingResponse, OpenAIAndLlamaShapes) {
  const std::vector<std::vector<float>> vectors = {{1.0f, 0.0f}, {0.0f, -1.0f}};
  const nlohmann::json o = embeddings_response(vectors, EmbeddingEncoding::kFloat, "tiny", 7);
  EXPECT_EQ(o["object"], "list");
  EXPECT_EQ(o["model"], "tiny");
  EXPECT_EQ(o["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(o["usage"]["total_tokens"], 7);
  ASSERT_EQ(o["data"].size(), 2u);
  EXPECT_EQ(o["data"][1]["object"], "embedding");
  EXPECT_EQ(o["data"][1]["index"], 1);
  EXPECT_EQ(o["data"][1]["embedding"], nlohmann::json::parse("[0.0, -1.0]"));
  const nlohmann::json b = embeddings_response(vectors, EmbeddingEncoding::kBase64, "tiny", 7);
  EXPECT_EQ(b["data"][0]["embedding"], embedding_base64(vectors[0]));
  const nlohmann::json l = llama_embedding_response(vectors);
  ASSERT_TRUE(l.is_array());
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1]["index"], 1);
  EXPECT_EQ(l[1]["embedding"], nlohmann::json::parse("[[0.0, -1.0]]"));
}

}  // namespace
}  // namespace tokenmill::server
