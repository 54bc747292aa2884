// Incremental parser for text/event-stream (the WHATWG server-sent events
// format) as OpenAI-compatible servers stream completions: bytes arrive in
// arbitrary pieces; each complete event's data (its "data:" lines joined
// with '\n') is handed to a callback. Other fields and comments are ignored.
// Not thread-safe; one parser per response.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tokenmill::bench {

class SseParser {
 public:
  using OnEvent = std::function<void(const std::string& data)>;

  // Returns the number of events dispatched by this call. Cost: linear in
  // the bytes; no allocation beyond the current line and event.
  size_t feed(std::string_view bytes, const OnEvent& on_event);
  // End of stream: an event whose blank line never came is dispatched (a
  // lenient reading; browsers drop it).
  size_t finish(const OnEvent& on_event);

  // Bytes of the unfinished line and event; a guard against a peer that
  // never sends a newline.
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  size_t end_line(const OnEvent& on_event);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool skip_lf_ = false;  // the previous piece ended in '\r'
};

}  // namespace tokenmill::bench
