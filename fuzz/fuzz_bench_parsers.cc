// libFuzzer target for the bench client's stream parsers: the SSE parser
// (src/bench/sse_parser.h) and the OpenAI response parser (src/bench/
// response_parser.h) that reads each event's data.
//
// Input: a byte n, then n % 16 chunk lengths (0..255, used in turn), then
// the byte stream. The stream is fed once whole and once cut into those
// chunks, as a socket might deliver it; the whole stream is also parsed as
// one non-streamed response body.
//
// Contract: neither parser throws (both have no error path). The SSE
// parser must dispatch the same events however the stream is cut, report
// exactly the events it dispatched, never put a '\r' inside an event's
// data, and hold nothing after finish(). A response piece must not count
// more text bytes than its payload has, and "[DONE]" sets nothing else.
// Anything else aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bench/response_parser.h"
#include "bench/sse_parser.h"

namespace {

using tokenmill::bench::parse_response_piece;
using tokenmill::bench::ResponsePiece;
using tokenmill::bench::SseParser;

void require(bool ok) {
  if (!ok) std::abort();
}

void check_piece(const std::string& payload) {
  const ResponsePiece p = parse_response_piece(payload);
  require(p.text_bytes >= 0 && p.text_bytes <= static_cast<int64_t>(payload.size()));
  if (p.done) require(!p.malformed && !p.has_choice && p.error.empty() && p.text_bytes == 0);
  if (p.malformed) require(!p.has_choice && p.error.empty());
}

// Feeds `chunks` in order; returns every event's data.
std::vector<std::string> run_sse(const std::vector<std::string_view>& chunks) {
  SseParser parser;
  std::vector<std::string> events;
  auto on_event = [&](const std::string& data) { events.push_back(data); };
  size_t reported = 0, fed = 0;
  for (std::string_view chunk : chunks) {
    reported += parser.feed(chunk, on_event);
    fed += chunk.size();
    require(parser.pending_bytes() <= fed);
  }
  reported += parser.finish(on_event);
  require(reported == events.size() && parser.pending_bytes() == 0);
  for (const std::string& e : events) require(e.find('\r') == std::string::npos);
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.empty()) return 0;
  const size_t num_lengths = std::min<size_t>(static_cast<uint8_t>(in[0]) % 16, in.size() - 1);
  const std::string_view lengths = in.substr(1, num_lengths);
  const std::string_view stream = in.substr(1 + num_lengths);

  std::vector<std::string_view> chunks;
  for (size_t at = 0, i = 0; at < stream.size(); ++i) {
    size_t n = lengths.empty() ? 1 : static_cast<uint8_t>(lengths[i % lengths.size()]);
    if (n == 0) {  // an empty read; then at least a byte, so that cutting ends
      chunks.push_back(stream.substr(at, 0));
      n = 1;
    }
    chunks.push_back(stream.substr(at, n));
    at += std::min(n, stream.size() - at);
  }
  const std::vector<std::string> whole = run_sse({stream});
  require(run_sse(chunks) == whole);
  for (const std::string& e : whole) check_piece(e);
  check_piece(std::string(stream));
  return 0;
}
