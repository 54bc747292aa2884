#include "sample/stop_criteria.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tokenmill::sample {
namespace {

struct Outcome {
  std::string text;
  bool stopped;
  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "{\"" << o.text << "\", " << (o.stopped ? "stopped" : "not stopped") << "}";
}

// Non-streaming reference, written independently: walk end positions from the
// left; at the first one where any stop string ends, cut before the earliest
// start among the stop strings ending there.
Outcome reference(const std::string& text, const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t cut = std::string::npos;
    for (const std::string& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
        cut = std::min(cut, end - s.size());
      }
    }
    if (cut != std::string::npos) return {text.substr(0, cut), true};
  }
  return {text, false};
}

Outcome stream(const std::vector<std::string>& chunks, const std::vector<std::string>& stops) {
  StopStringMatcher m(stops);
  Outcome out{"", false};
  for (const std::string& c : chunks) {
    StopResult r = m.push(c);
    out.text += r.emit;
    if (r.stopped) {
      out.stopped = true;
      EXPECT_EQ(m.push("more").emit, "");  // nothing after a stop
      EXPECT_EQ(m.flush(), "");
      return out;
    }
  }
  out.text += m.flush();
  return out;
}

struct Case {
  std::string text;
  std::vector<std::string> stops;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"Hello world\n\nUser: hi", {"\n\nUser:"}},
      {"Hello world", {"\n\nUser:"}},
      {"aaab", {"aab"}},  // overlapping prefix: restart inside a partial match
      {"abababc", {"ababc"}},
      {"xabcd", {"abcd", "bc"}},  // shorter stop ends first
      {"xabc", {"bc", "abc"}},    // same end: the longer (earlier) one cuts
      {"the end</s>tail", {"</s>", "<|eot|>"}},
      {"partial </ no stop", {"</s>"}},
      {"ends with prefix </", {"</s>"}},
      {"stop at start", {"stop"}},
      {"héllo wörld ✓ ok", {"wörld", "✓"}},  // UTF-8 bytes
      {"mississippi", {"issip", "ssi", "pp"}},
      {"aaaa", {"aaaaa"}},
  };
  return kCases;
}

TEST(StopStringMatcher, WholeTextInOneChunk) {
  for (const Case& c : cases()) EXPECT_EQ(stream({c.text}, c.stops), reference(c.text, c.stops)) << c.text;
}

TEST(StopStringMatcher, EverySplitPoint) {
  for (const Case& c : cases()) {
    const Outcome want = reference(c.text, c.stops);
    for (size_t i = 0; i <= c.text.size(); ++i) {
      EXPECT_EQ(stream({c.text.substr(0, i), c.text.substr(i)}, c.stops), want) << c.text << " split at " << i;
    }
    for (size_t i = 0; i <= c.text.size(); ++i) {
      for (size_t j = i; j <= c.text.size(); ++j) {
        ASSERT_EQ(stream({c.text.substr(0, i), c.text.substr(i, j - i), c.text.substr(j)}, c.stops), want)
            << c.text << " split at " << i << ", " << j;
      }
    }
  }
}

TEST(StopStringMatcher, ByteAtATime) {
  for (const Case& c : cases()) {
    std::vector<std::string> chunks;
    for (char ch : c.text) chunks.emplace_back(1, ch);
    EXPECT_EQ(stream(chunks, c.stops), reference(c.text, c.stops)) << c.text;
  }
}

TEST(StopStringMatcher, HoldsBackOnlyPossiblePrefixes) {
  StopStringMatcher m({"</s>"});
  StopResult r = m.push("abc<");
  EXPECT_EQ(r.emit, "abc");
  EXPECT_FALSE(r.stopped);
  r = m.push("/x");  // "</x" cannot start "</s>": all of it goes out
  EXPECT_EQ(r.emit, "</x");
  r = m.push("</");
  EXPECT_EQ(r.emit, "");
  r = m.push("s>after");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(m.stopped());
}

TEST(StopStringMatcher, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("abc").emit, "abc");
  EXPECT_EQ(m.flush(), "");
  StopStringMatcher with_empty({""});  // ignored, not an instant stop
  EXPECT_EQ(with_empty.push("x").emit, "x");
}

TEST(StopStringMatcher, IncludeStopKeepsTheStopString) {
  for (const Case& c : cases()) {
    const Outcome cut = reference(c.text, c.stops);
    for (size_t i = 0; i <= c.text.size(); ++i) {
      StopStringMatcher m(c.stops, /*include_stop=*/true);
      std::string text = m.push(c.text.substr(0, i)).emit;
      const StopResult r = m.push(c.text.substr(i));
      text += r.emit;
      if (!r.stopped) text += m.flush();
      EXPECT_EQ(r.stopped || m.stopped(), cut.stopped) << c.text;
      if (!cut.stopped) {
        EXPECT_EQ(text, c.text);
        continue;
      }
      // The output ends with the stop string that cut it, right after the cut.
      EXPECT_EQ(text.substr(0, cut.text.size()), cut.text) << c.text << " split at " << i;
      const std::string rest = text.substr(cut.text.size());
      EXPECT_TRUE(std::find(c.stops.begin(), c.stops.end(), rest) != c.stops.end()) << c.text << ": " << rest;
    }
  }
}

TEST(StopStringMatcher, PushesThatMayNotStopPassStopStringsAsText) {
  StopStringMatcher m({"ab"});
  EXPECT_EQ(m.push("xab", /*may_stop=*/false).emit, "xab");
  EXPECT_FALSE(m.stopped());
  // A stop string begun before may_stop and finished after it does stop.
  EXPECT_EQ(m.push("a", false).emit, "");
  const StopResult r = m.push("b", true);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  StopStringMatcher later({"ab"});
  EXPECT_EQ(later.push("ab", false).emit, "ab");
  EXPECT_EQ(later.push("cab", true).emit, "c");
  EXPECT_TRUE(later.stopped());
}

}  // namespace
}  // namespace tokenmill::sample
