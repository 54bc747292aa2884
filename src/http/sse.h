// Server-Sent Events framing for streamed responses, as OpenAI sends them:
// each event is one "data: <json>\n\n"; the stream ends with
// "data: [DONE]\n\n"; lines starting with ':' are comments that clients
// ignore (used as keep-alives while a request waits in the queue).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tokenmill::http {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

// "data: " + compact JSON (never contains a raw newline) + "\n\n".
std::string sse_event(const nlohmann::json& payload);

}  // namespace tokenmill::http
