// SnapshotBuilder and the parser that diffs successive snapshots
// (format_parser.h).
#include <algorithm>

#include "server/tools/format_parser.h"
#include "server/tools/format_scan.h"

namespace tokenmill::server::tools_internal {

void SnapshotBuilder::content(std::string_view text) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_call_ = false;
  }
  content_ += text;
}

void SnapshotBuilder::begin_call(std::string name) {
  content_.resize(rstrip(content_).size());
  calls_.push_back({std::move(name), ""});
  after_call_ = true;
}

void SnapshotBuilder::args(std::string_view text) {
  if (!calls_.empty()) calls_.back().arguments += text;
}

ParsedChoice SnapshotBuilder::take() {
  if (!final_ || !calls_.empty()) content_.resize(rstrip(content_).size());
  return {std::move(content_), std::move(reasoning_), std::move(calls_)};
}

namespace {

// Runs a SnapshotFn on the whole text at each feed and reports what grew.
// A snapshot that does not extend the last one (a format bug) reports
// nothing of what shrank rather than failing.
class SnapshotParser final : public FormatParser {
 public:
  explicit SnapshotParser(SnapshotFn fn) : fn_(fn) {}

  ParsedOutput feed(std::string_view text) override {
    text_ += text;
    return report(/*final=*/false);
  }
  ParsedOutput finish() override { return report(/*final=*/true); }
  int num_calls() const override { return static_cast<int>(args_sizes_.size()); }

 private:
  static std::string grown(const std::string& now, size_t& reported) {
    if (now.size() <= reported) return {};
    std::string tail = now.substr(reported);
    reported = now.size();
    return tail;
  }

  ParsedOutput report(bool final) {
    SnapshotBuilder b(final, &memo_);
    fn_(text_, b);
    const ParsedChoice s = b.take();
    ParsedOutput out;
    out.content = grown(s.content, content_size_);
    out.reasoning = grown(s.reasoning, reasoning_size_);
    for (size_t i = 0; i < s.calls.size(); ++i) {
      if (i == args_sizes_.size()) {
        args_sizes_.push_back(0);
        out.calls.push_back({static_cast<int>(i), s.calls[i].name, grown(s.calls[i].arguments, args_sizes_[i])});
      } else if (std::string tail = grown(s.calls[i].arguments, args_sizes_[i]); !tail.empty()) {
        out.calls.push_back({static_cast<int>(i), "", std::move(tail)});
      }
    }
    return out;
  }

  SnapshotFn fn_;
  ScanMemo memo_;  // about text_, which only grows
  std::string text_;
  size_t content_size_ = 0;
  size_t reasoning_size_ = 0;
  std::vector<size_t> args_sizes_;  // per call started
};

}  // namespace

std::unique_ptr<FormatParser> make_snapshot_parser(SnapshotFn fn) { return std::make_unique<SnapshotParser>(fn); }

}  // namespace tokenmill::server::tools_internal

namespace tokenmill::server::tools_internal {

void scan_with_openers(std::string_view text, size_t pos, std::initializer_list<std::string_view> openers,
                       RegionFn region, SnapshotBuilder& out) {
  while (pos <= text.size()) {
    size_t p = std::string_view::npos;
    std::string_view opener;
    for (std::string_view o : openers)
      if (const size_t q = text.find(o, pos); q < p) p = q, opener = o;
    if (p == std::string_view::npos) {
      const std::string_view tail = text.substr(pos);
      out.content(tail.substr(0, tail.size() - (out.final() ? 0 : partial_suffix_any(tail, openers))));
      return;
    }
    out.content(text.substr(pos, p - pos));
    const int before = out.num_calls();
    const RegionScan r = region(text, opener, p + opener.size(), out);
    if (r.status == Scan::kMore) {
      if (out.final() && out.num_calls() == before) out.content(text.substr(p));
      return;
    }
    if (r.status == Scan::kBad && out.num_calls() == before) {
      out.content(opener);
      pos = p + opener.size();
    } else {
      pos = r.end;
    }
  }
}

void report_args(std::string_view s, size_t begin, size_t end, bool done, SnapshotBuilder& out) {
  begin = std::min(begin, s.size());
  out.args(done ? s.substr(begin, end - begin) : rstrip(s.substr(begin)));
}

CallObjectScan report_call_object(std::string_view s, size_t i, const CallKeys& keys, SnapshotBuilder& out) {
  CallObjectScan c = scan_call_object(s, i, keys, out.memo());
  if (c.committed) {
    out.begin_call(c.name);
    report_args(s, c.args_begin, c.args_end, c.args_done, out);
  }
  return c;
}

RegionScan close_with(std::string_view s, std::string_view marker, RegionScan calls) {
  if (calls.status != Scan::kDone) return calls;
  size_t k = skip_space(s, calls.end);
  const Scan m = match_word(s, k, marker);
  if (m == Scan::kMore) return {Scan::kMore, s.size()};
  return {Scan::kDone, m == Scan::kDone ? k : calls.end};
}

RegionScan scan_call_array(std::string_view s, size_t i, const CallKeys& keys, SnapshotBuilder& out) {
  i = skip_space(s, i);
  if (Scan m = match_word(s, i, "["); m != Scan::kDone) return {m, i};
  for (;;) {
    const CallObjectScan c = report_call_object(s, i, keys, out);
    if (c.status == Scan::kMore) return {Scan::kMore, s.size()};
    if (c.status == Scan::kBad) return {Scan::kBad, c.committed ? c.end : i};
    i = skip_space(s, c.end);
    if (i == s.size()) return {Scan::kMore, i};
    if (s[i] == ']') return {Scan::kDone, i + 1};
    if (s[i] != ',') return {Scan::kBad, i};
    ++i;
  }
}

RegionScan scan_call_sequence(std::string_view s, size_t i, char separator, const CallKeys& keys,
                              SnapshotBuilder& out) {
  for (;;) {
    const CallObjectScan c = report_call_object(s, i, keys, out);
    if (c.status == Scan::kMore) return {Scan::kMore, s.size()};
    if (c.status == Scan::kBad) return {Scan::kBad, c.committed ? c.end : i};
    i = skip_space(s, c.end);
    if (i == s.size()) return {out.final() ? Scan::kDone : Scan::kMore, i};
    if (s[i] != separator) return {Scan::kBad, c.end};
    i = skip_space(s, i + 1);
    if (i == s.size()) return {out.final() ? Scan::kDone : Scan::kMore, i};
  }
}

}  // namespace tokenmill::server::tools_internal
