#include "bench/token_counter.h"

#include <httplib.h>

#include <memory>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "bench/driver.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tokenmill::bench {

namespace {

// The two request shapes in use: OpenAI-style servers (vLLM, tokenmill) take
// "prompt", llama.cpp's server takes "content". Strict servers refuse the
// other's keys, so each shape is sent alone.
nlohmann::json tokenize_body(int shape, const std::string& text, const std::string& model) {
  if (shape == 0) {
    nlohmann::json j = {{"prompt", text}, {"add_special_tokens", false}};
    if (!model.empty()) j["model"] = model;
    return j;
  }
  return {{"content", text}, {"add_special", false}};
}

std::optional<int64_t> token_count(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("count") && j["count"].is_number_integer()) return j["count"].get<int64_t>();
  if (j.is_object() && j.contains("tokens") && j["tokens"].is_array()) return static_cast<int64_t>(j["tokens"].size());
  return std::nullopt;
}

}  // namespace

TokenCounter server_token_counter(const std::string& url, const std::string& model) {
  const HttpTarget target = parse_target_url(url);
  auto client = std::make_shared<httplib::Client>(target.origin);
  client->set_connection_timeout(10, 0);
  client->set_read_timeout(120, 0);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);  // Nagle + delayed ACK would add ~40 ms to small writes
  auto mutex = std::make_shared<std::mutex>();
  auto shape = std::make_shared<int>(-1);  // learnt on the first call
  const std::string path = target.prefix + "/tokenize";
  return [client, mutex, shape, path, url, model](const std::string& text) -> int64_t {
    std::lock_guard<std::mutex> lock(*mutex);
    std::string last_error;
    for (int s = *shape < 0 ? 0 : *shape; s < 2 && (*shape < 0 || s == *shape); ++s) {
      const httplib::Result res = client->Post(path, tokenize_body(s, text, model).dump(), "application/json");
      if (!res) {
        fail("{}{}: {} (set prompts.token_counter to gguf or words to run without it)", url, path,
             httplib::to_string(res.error()));
      }
      const std::optional<int64_t> n = res->status == 200 ? token_count(res->body) : std::nullopt;
      if (n) {
        *shape = s;
        return *n;
      }
      last_error = fmt::format("http {}: {}", res->status, res->body.substr(0, 200));
    }
    fail("{}{}: no usable token count ({}); set prompts.token_counter to gguf or words", url, path, last_error);
  };
}

TokenCounter gguf_token_counter(const std::string& path) {
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  if (!tokenizer::Tokenizer::present_in(file)) fail("{}: the file has no tokenizer", path);
  auto tok = std::make_shared<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
  return [tok](const std::string& text) -> int64_t {
    return static_cast<int64_t>(tok->encode(text, /*add_special=*/false, /*parse_special=*/false).size());
  };
}

TokenCounter make_token_counter(const TrafficSpec& spec, const std::string& url) {
  switch (spec.token_counter) {
    case TokenCounterKind::kServer: return server_token_counter(url, spec.model);
    case TokenCounterKind::kGguf: return gguf_token_counter(spec.tokenizer_path);
    case TokenCounterKind::kWords: return [](const std::string& text) { return count_words(text); };
  }
  return {};
}

}  // namespace tokenmill::bench
