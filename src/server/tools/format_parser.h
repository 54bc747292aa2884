// The internal interface behind ToolCallParser: one parser per wire format.
//
// kHermes has a hand-written incremental parser (format_hermes.cc). The
// other formats are each a pure function from the text so far to a
// Snapshot of what is settled in it (SnapshotFn); SnapshotParser runs it
// on the whole text at every feed() and reports what grew since the last
// one. A SnapshotFn must be monotone: the snapshot of a longer prefix
// extends the snapshot of a shorter one (same calls, each string a prefix
// of the longer one's), and the final snapshot (final = true) extends all.
// The tests check this on every split of their outputs.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tools/format_scan.h"
#include "server/tools/tool_call_parser.h"

namespace tokenmill::server::tools_internal {

class FormatParser {
 public:
  virtual ~FormatParser() = default;
  virtual ParsedOutput feed(std::string_view text) = 0;
  virtual ParsedOutput finish() = 0;
  virtual int num_calls() const = 0;
};

// What a format has settled in a text; whitespace rules of
// tool_call_parser.h applied.
class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(bool final, ScanMemo* memo = nullptr) : final_(final), memo_(memo) {}
  bool final() const { return final_; }
  ScanMemo* memo() const { return memo_; }

  // Text; whitespace right after a call is dropped.
  void content(std::string_view text);
  void reasoning(std::string_view text) { reasoning_ += text; }
  // A call with a complete (non-empty) name; the content's trailing
  // whitespace is dropped.
  void begin_call(std::string name);
  // The next piece of the current call's arguments.
  void args(std::string_view text);
  int num_calls() const { return static_cast<int>(calls_.size()); }

  // Content's trailing whitespace is held back unless final (and dropped
  // then when there were calls).
  ParsedChoice take();

 private:
  bool final_;
  ScanMemo* memo_;
  bool after_call_ = false;
  std::string content_;
  std::string reasoning_;
  std::vector<ToolCallOutput> calls_;
};

using SnapshotFn = void (*)(std::string_view text, SnapshotBuilder& out);

// Building blocks of the SnapshotFns.
//
// A call region (what follows an opener such as "[TOOL_CALLS]") reports
// its calls to `out` and says how it ended: kDone (text resumes at `end`),
// kMore (the text so far is all region) or kBad (text resumes at `end`;
// when the region reported no call, the opener itself is text).
struct RegionScan {
  Scan status = Scan::kBad;
  size_t end = 0;
};
using RegionFn = RegionScan (*)(std::string_view text, std::string_view opener, size_t after, SnapshotBuilder& out);

// Text from `pos` on: content, and a call region after each opener. A
// region cut short at the end of the output is content when it reported
// no call.
void scan_with_openers(std::string_view text, size_t pos, std::initializer_list<std::string_view> openers,
                       RegionFn region, SnapshotBuilder& out);

// Reports a call's arguments text s[begin, end) as far as it is settled.
void report_args(std::string_view s, size_t begin, size_t end, bool done, SnapshotBuilder& out);

// A call object at s[i] (format_scan.h), reported once committed.
CallObjectScan report_call_object(std::string_view s, size_t i, const CallKeys& keys, SnapshotBuilder& out);

// After a region's calls ended at calls.end: its closing marker, skipped
// when there (a missing one ends the region all the same).
RegionScan close_with(std::string_view s, std::string_view marker, RegionScan calls);

// A JSON array of call objects at s[i] ('[' after whitespace).
RegionScan scan_call_array(std::string_view s, size_t i, const CallKeys& keys, SnapshotBuilder& out);

// Call objects from s[i] on, separated by `separator` (Llama 3's ';'), up
// to the first text that is neither.
RegionScan scan_call_sequence(std::string_view s, size_t i, char separator, const CallKeys& keys, SnapshotBuilder& out);

std::unique_ptr<FormatParser> make_hermes_parser();
std::unique_ptr<FormatParser> make_snapshot_parser(SnapshotFn fn);

void parse_qwen3_coder(std::string_view text, SnapshotBuilder& out);
void parse_llama3_json(std::string_view text, SnapshotBuilder& out);
void parse_mistral(std::string_view text, SnapshotBuilder& out);
void parse_deepseek_v3(std::string_view text, SnapshotBuilder& out);
void parse_gpt_oss(std::string_view text, SnapshotBuilder& out);
void parse_command_r(std::string_view text, SnapshotBuilder& out);
void parse_granite(std::string_view text, SnapshotBuilder& out);
void parse_functionary(std::string_view text, SnapshotBuilder& out);

}  // namespace tokenmill::server::tools_internal
