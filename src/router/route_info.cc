#include "router/route_info.h"

#include <algorithm>

#include "router/hash_ring.h"

namespace tokenmill::router {
namespace {

using nlohmann::json;

// Collects text up to `limit` bytes while counting every byte offered.
struct HeadWriter {
  size_t limit;
  std::string head;
  int64_t total = 0;

  void add(std::string_view text) {
    total += static_cast<int64_t>(text.size());
    if (head.size() < limit) head.append(text.substr(0, limit - head.size()));
  }
  void add_token(int64_t id) {
    const uint32_t v = static_cast<uint32_t>(id);
    const char bytes[4] = {static_cast<char>(v & 0xff), static_cast<char>((v >> 8) & 0xff),
                           static_cast<char>((v >> 16) & 0xff), static_cast<char>((v >> 24) & 0xff)};
    add(std::string_view(bytes, 4));
  }
};

void add_completion_prompt(const json& prompt, HeadWriter& w, int depth = 0) {
  if (prompt.is_string()) {
    w.add(prompt.get_ref<const std::string&>());
  } else if (prompt.is_number_integer()) {
    w.add_token(prompt.get<int64_t>());
  } else if (prompt.is_array() && depth < 2) {  // a list of prompts, or of token lists
    for (const json& p : prompt) add_completion_prompt(p, w, depth + 1);
  }
}

void add_message_content(const json& content, HeadWriter& w) {
  if (content.is_string()) {
    w.add(content.get_ref<const std::string&>());
    return;
  }
  if (!content.is_array()) return;
  for (const json& part : content) {
    if (!part.is_object()) continue;
    const auto text = part.find("text");
    if (text != part.end() && text->is_string()) w.add(text->get_ref<const std::string&>());
  }
}

int64_t integer_field(const json& body, const char* name, int64_t fallback) {
  const auto it = body.find(name);
  return it != body.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

std::string prompt_head(const json& body, bool is_chat, size_t limit, int64_t* total_bytes) {
  HeadWriter w{limit, {}, 0};
  if (body.is_object()) {
    if (is_chat) {
      const auto messages = body.find("messages");
      if (messages != body.end() && messages->is_array()) {
        for (const json& m : *messages) {
          if (!m.is_object()) continue;
          const auto content = m.find("content");
          if (content != m.end()) add_message_content(*content, w);
        }
      }
    } else {
      const auto prompt = body.find("prompt");
      if (prompt != body.end()) add_completion_prompt(*prompt, w);
    }
  }
  if (total_bytes) *total_bytes = w.total;
  return std::move(w.head);
}

std::string_view tenant_of(std::string_view x_tenant, std::string_view authorization) {
  return x_tenant.empty() ? authorization : x_tenant;
}

uint64_t affinity_key(std::string_view tenant, std::string_view head) {
  std::string bytes;
  bytes.reserve(tenant.size() + 1 + head.size());
  bytes.append(tenant).push_back('\n');
  bytes.append(head);
  return hash_bytes(bytes);
}

RouteInfo route_info(std::string_view body, bool is_chat, std::string_view tenant, size_t affinity_bytes) {
  RouteInfo r;
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    r.affinity_key = affinity_key(tenant, body.substr(0, std::min(body.size(), affinity_bytes)));
    r.prompt_bytes = static_cast<int64_t>(body.size());
    r.estimated_tokens = r.prompt_bytes / 4 + kDefaultMaxTokensEstimate;
    return r;
  }
  const std::string head = prompt_head(j, is_chat, affinity_bytes, &r.prompt_bytes);
  r.affinity_key = affinity_key(tenant, head);
  const auto stream = j.find("stream");
  r.stream = stream != j.end() && stream->is_boolean() && stream->get<bool>();
  int64_t max_tokens = is_chat ? integer_field(j, "max_completion_tokens", -1) : -1;
  if (max_tokens < 0) max_tokens = integer_field(j, "max_tokens", kDefaultMaxTokensEstimate);
  max_tokens = std::clamp<int64_t>(max_tokens, 0, kMaxTokensEstimateCap);
  const int64_t n = std::clamp<int64_t>(integer_field(j, "n", 1), 1, 128);
  r.estimated_tokens = r.prompt_bytes / 4 + n * max_tokens;
  return r;
}

}  // namespace tokenmill::router
