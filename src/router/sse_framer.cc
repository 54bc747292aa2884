#include "router/sse_framer.h"

namespace tokenmill::router {
namespace {

// The end (exclusive) of the last blank line in `s`, i.e. just past the
// last event boundary ("\n\n" or "\n\r\n"); 0 when there is none.
size_t last_boundary_end(const std::string& s) {
  for (size_t i = s.size(); i >= 2; --i) {
    if (s[i - 1] != '\n') continue;
    if (s[i - 2] == '\n') return i;
    if (i >= 3 && s[i - 2] == '\r' && s[i - 3] == '\n') return i;
  }
  return 0;
}

}  // namespace

std::string SseFramer::feed(std::string_view piece) {
  tail_.append(piece);
  const size_t end = last_boundary_end(tail_);
  if (end == 0) return {};
  std::string out = tail_.substr(0, end);
  tail_.erase(0, end);
  if (out.find("data: [DONE]") != std::string::npos) saw_done_ = true;
  return out;
}

}  // namespace tokenmill::router
