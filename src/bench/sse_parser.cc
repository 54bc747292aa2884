#include "bench/sse_parser.h"

namespace tokenmill::bench {

size_t SseParser::end_line(const OnEvent& on_event) {
  size_t dispatched = 0;
  if (line_.empty()) {  // a blank line ends the event
    if (has_data_) {
      on_event(data_);
      ++dispatched;
    }
    data_.clear();
    has_data_ = false;
    return dispatched;
  }
  if (line_[0] != ':') {  // ':' starts a comment
    const size_t colon = line_.find(':');
    const std::string_view field = std::string_view(line_).substr(0, colon);
    if (field == "data") {
      std::string_view value;
      if (colon != std::string::npos) {
        value = std::string_view(line_).substr(colon + 1);
        if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
      }
      if (has_data_) data_ += '\n';
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
  return dispatched;
}

size_t SseParser::feed(std::string_view bytes, const OnEvent& on_event) {
  size_t dispatched = 0;
  for (char c : bytes) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_lf_ = c == '\r';
      dispatched += end_line(on_event);
    } else {
      line_ += c;
    }
  }
  return dispatched;
}

size_t SseParser::finish(const OnEvent& on_event) {
  size_t dispatched = 0;
  if (!line_.empty()) dispatched += end_line(on_event);
  if (has_data_) {
    on_event(data_);
    ++dispatched;
  }
  data_.clear();
  has_data_ = false;
  skip_lf_ = false;
  return dispatched;
}

}  // namespace tokenmill::bench
