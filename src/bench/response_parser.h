// Reads what an OpenAI-compatible server sends back: a streamed chunk's
// JSON, or a whole non-streamed response. Knows the common extensions:
// `usage.prompt_tokens_details.cached_tokens` (OpenAI, vLLM), llama.cpp's
// `timings` {prompt_n, cache_n, prompt_ms, predicted_ms} and tokenmill's
// `timings` {queue_ms, prompt_ms, ttft_ms, cached_tokens}, and speculative
// decoding's tallies: tokenmill's `timings` {draft_tokens,
// accepted_draft_tokens}, llama.cpp's {draft_n, draft_n_accepted}.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace tokenmill::bench {

struct ResponsePiece {
  bool done = false;       // "[DONE]"
  bool malformed = false;  // not JSON, or JSON of an unknown shape
  int64_t text_bytes = 0;  // of choices[0].text or choices[0].delta.content
  bool has_choice = false;
  std::string finish_reason;
  std::string error;  // an {"error": ...} payload's message
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t cached_tokens = -1;
  int64_t draft_tokens = -1;  // speculative decoding: proposed and verified
  int64_t accepted_draft_tokens = -1;
  double queue_ms = std::numeric_limits<double>::quiet_NaN();
  double prompt_ms = std::numeric_limits<double>::quiet_NaN();
  double server_ttft_ms = std::numeric_limits<double>::quiet_NaN();
};

// One SSE data payload or one full JSON body. Never throws.
ResponsePiece parse_response_piece(const std::string& payload);

}  // namespace tokenmill::bench
