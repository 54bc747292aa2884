#include "sample/stop_criteria.h"

#include <algorithm>
#include <utility>

namespace tokenmill::sample {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

// Every stop string that could end inside `text` starts inside it: held_ keeps
// every suffix that might begin a stop string, so no match straddles text
// already emitted. The first occurrence of each stop string is the one ending
// first, so the minimum end over the stop strings is where the stream stops.
StopResult StopStringMatcher::push(std::string_view new_text, bool may_stop) {
  if (stopped_) return {"", true};
  std::string text = std::move(held_);
  text.append(new_text);
  held_.clear();

  size_t best_end = std::string::npos;
  size_t best_start = std::string::npos;
  static const std::vector<std::string> kNoStops;
  for (const std::string& stop : may_stop ? stops_ : kNoStops) {
    const size_t pos = text.find(stop);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
    }
  }
  if (best_start != std::string::npos) {
    stopped_ = true;
    text.resize(include_stop_ ? best_end : best_start);
    return {std::move(text), true};
  }
  const size_t keep = held_suffix_length(text);
  held_.assign(text, text.size() - keep, keep);
  text.resize(text.size() - keep);
  return {std::move(text), false};
}

std::string StopStringMatcher::flush() {
  if (stopped_) return "";
  return std::exchange(held_, std::string());
}

size_t StopStringMatcher::held_suffix_length(std::string_view text) const {
  size_t best = 0;
  for (const std::string& stop : stops_) {
    const std::string_view s(stop);
    for (size_t k = std::min(s.size() - 1, text.size()); k > best; --k) {
      if (text.substr(text.size() - k) == s.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

}  // namespace tokenmill::sample
