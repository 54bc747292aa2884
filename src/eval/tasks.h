// Regression task sets for the abilities quantization is known to break
// first, run as small fixed sets with greedy decoding and exact scoring:
//   arithmetic: few-shot "a + b = c" style problems (slices by operation and
//               digit count); correct iff the answer line equals c;
//   json:       few-shot "record -> JSON object" conversions; slices "valid"
//               (the line parses as JSON) and "exact" (equals the expected
//               object);
//   needle:     a code sentence hidden at 10/50/90 % depth of a synthetic
//               haystack of ~200 or ~600 tokens, then asked for; correct iff
//               the answer starts with the code (slices by length and depth).
// The sets are generated from a fixed seed, so every run sees the same items.
// Small models score low in absolute terms; what matters on the card is the
// change against the base.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/evaluator.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace tokenmill::eval {

enum class TaskCheck { kExactLine, kJson, kStartsWith };

struct TaskItem {
  std::string task;   // "arithmetic", "json", "needle"
  std::string slice;  // "add-2digit", "len200-depth50" ...
  std::string prompt;
  std::string expected;  // the answer line (json: the expected object's text)
  TaskCheck check = TaskCheck::kExactLine;
  int max_new_tokens = 12;
};

// The fixed sets (about 24 arithmetic, 8 json, 6 needle items).
std::vector<TaskItem> builtin_task_set();

struct SliceScore {
  std::string task, slice;
  int64_t total = 0, correct = 0;
  double score() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

struct TaskResult {
  std::vector<SliceScore> slices;    // per (task, slice); json has "valid" and "exact"
  std::vector<SliceScore> tasks;     // per task (json: exact)
  std::vector<std::string> answers;  // the generated answer line of each item
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double seconds = 0;
};

// Runs every item with greedy decoding (stops at a newline, an
// end-of-generation token or max_new_tokens).
TaskResult run_tasks(const ModelUnderTest& m, const tokenizer::Tokenizer& tok, const std::vector<TaskItem>& items,
                     ThreadPool& pool);

// Greedy continuation of `prompt` up to the first newline; for tests.
std::string greedy_line(const ModelUnderTest& m, const tokenizer::Tokenizer& tok, const std::string& prompt,
                        int max_new_tokens, ThreadPool& pool, int64_t* prompt_tokens = nullptr,
                        int64_t* generated = nullptr);

}  // namespace tokenmill::eval
