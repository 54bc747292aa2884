// libFuzzer target for the incremental HTTP/1.1 request parser
// (src/http/http_request_parser.h). Input: byte 0 picks how the rest is
// cut into pieces, the rest is what a client sends on one connection
// (possibly several pipelined requests). The bytes are parsed as a
// connection would, request after request, once in one piece and once in
// pieces; both must give the same requests and the same final state, and
// every step must keep the parser's invariants. Any violation aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_request_parser.h"

namespace {

using tokenmill::http::HttpLimits;
using tokenmill::http::HttpRequestParser;
using tokenmill::http::ParsedRequest;
using State = HttpRequestParser::State;

// Small, so that inputs reach every limit.
constexpr HttpLimits kLimits{/*max_head_bytes=*/256, /*max_headers=*/8, /*max_body_bytes=*/64};
// The bound the header documents: twice the head, the body, the header slots.
constexpr size_t kMemoryBound =
    2 * kLimits.max_head_bytes + kLimits.max_body_bytes + 2 * kLimits.max_headers * 64 + 256;

void require(bool ok) {
  if (!ok) std::abort();
}

void check_step(const HttpRequestParser& p, size_t used, size_t offered) {
  require(used <= offered);
  require(p.memory_bytes() <= kMemoryBound);
  const int status = p.error_status();
  switch (p.state()) {
    case State::kHead: require(!p.head_complete() && status == 0 && used == offered); break;
    case State::kBody:
      require(p.head_complete() && status == 0 && used == offered);
      require(p.request().body.size() <= kLimits.max_body_bytes);
      break;
    case State::kComplete: require(p.head_complete() && status == 0); break;
    case State::kError:
      require(status == 400 || status == 413 || status == 431 || status == 501 || status == 505);
      require(!p.error_message().empty());
      break;
  }
}

void check_request(const ParsedRequest& r) {
  require(!r.method.empty() && !r.target.empty() && !r.path.empty());
  require(r.version_minor == 0 || r.version_minor == 1);
  require(r.path.find('\0') == std::string::npos);
  require(r.body.size() <= kLimits.max_body_bytes);
  require(r.headers.size() <= kLimits.max_headers);
  require(r.version_minor == 0 || r.has_header("host"));
  require(!(r.has_header("Content-Length") && r.has_header("Transfer-Encoding")));
  require(r.version_minor == 1 || !r.expects_continue);
}

// Everything observable about one request, or about where parsing stopped.
std::string describe(const ParsedRequest& r) {
  std::string s = r.method + '\n' + r.target + '\n' + r.path + '\n' + r.query + '\n' + std::to_string(r.version_minor) +
                  (r.keep_alive ? "k" : "c") + (r.expects_continue ? "e" : "-");
  for (const auto& [name, value] : r.headers) s += '\n' + name + ':' + value;
  return s + "\n\n" + r.body;
}

// Parses the stream as a connection does, offering it in pieces of the
// lengths `next_len` returns; the record lists every request and the end.
template <typename NextLen>
std::vector<std::string> run(std::string_view stream, NextLen next_len) {
  std::vector<std::string> record;
  HttpRequestParser p(kLimits);
  std::string pending;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t n = std::min(next_len(), stream.size() - pos);
    pending.append(stream.substr(pos, n));
    pos += n;
    while (!pending.empty()) {
      const size_t used = p.feed(pending);
      check_step(p, used, pending.size());
      pending.erase(0, used);
      if (p.state() == State::kComplete) {
        const ParsedRequest r = p.take();
        check_request(r);
        record.push_back(describe(r));
        require(p.state() == State::kHead && !p.head_complete());
        continue;
      }
      if (p.state() == State::kError) {
        record.push_back("error " + std::to_string(p.error_status()) + " " + p.error_message() + " left " +
                         std::to_string(pending.size() + stream.size() - pos));
        return record;
      }
      break;
    }
  }
  record.push_back("end " + std::to_string(static_cast<int>(p.state())) + (p.head_complete() ? " head" : ""));
  return record;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<std::string> whole = run(stream, [] { return std::string_view::npos; });
  // Byte 0: the low bits bound the piece length (1, 2, 4 ... 128 bytes), the
  // rest seeds the generator that draws each length.
  const size_t max_len = size_t{1} << (data[0] & 7);
  uint32_t state = 0x9e3779b9u ^ data[0];
  const std::vector<std::string> pieces = run(stream, [&] {
    state = state * 1664525u + 1013904223u;
    return 1 + (state >> 8) % max_len;
  });
  require(whole == pieces);
  return 0;
}
