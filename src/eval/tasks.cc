#include "eval/tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "eval/logit_math.h"
#include "model/single_sequence.h"
#include "util/clock.h"

namespace tokenmill::eval {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

void add_arithmetic(std::mt19937& rng, std::vector<TaskItem>& out) {
  const std::string shots = "12 + 7 = 19\n45 + 23 = 68\n9 * 6 = 54\n84 - 31 = 53\n";
  struct Kind {
    const char* slice;
    char op;
    int lo_a, hi_a, lo_b, hi_b;
  };
  const Kind kinds[] = {{"add-2digit", '+', 10, 99, 10, 99},
                        {"add-3digit", '+', 100, 999, 100, 999},
                        {"sub-2digit", '-', 50, 99, 10, 49},
                        {"mul-1x2digit", '*', 2, 9, 11, 30}};
  for (const Kind& k : kinds) {
    for (int i = 0; i < 6; ++i) {
      const int a = std::uniform_int_distribution<int>(k.lo_a, k.hi_a)(rng);
      const int b = std::uniform_int_distribution<int>(k.lo_b, k.hi_b)(rng);
      const int c = k.op == '+' ? a + b : k.op == '-' ? a - b : a * b;
      out.push_back({"arithmetic", k.slice, fmt::format("{}{} {} {} =", shots, a, k.op, b), std::to_string(c),
                     TaskCheck::kExactLine, 6});
    }
  }
}

void add_json(std::mt19937& rng, std::vector<TaskItem>& out) {
  const std::string shots =
      "Convert each record to a JSON object.\n"
      "Record: name Alice, age 30, city Paris\n"
      "JSON: {\"name\": \"Alice\", \"age\": 30, \"city\": \"Paris\"}\n"
      "Record: name Bob, age 41, city Oslo\n"
      "JSON: {\"name\": \"Bob\", \"age\": 41, \"city\": \"Oslo\"}\n";
  const char* names[] = {"Clara", "David", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas"};
  const char* cities[] = {"Lima", "Rome", "Kyoto", "Cairo", "Quebec", "Tunis", "Dublin", "Perth"};
  for (int i = 0; i < 8; ++i) {
    const int age = std::uniform_int_distribution<int>(18, 90)(rng);
    const std::string obj =
        fmt::format("{{\"name\": \"{}\", \"age\": {}, \"city\": \"{}\"}}", names[i], age, cities[i]);
    out.push_back({"json", "record",
                   fmt::format("{}Record: name {}, age {}, city {}\nJSON:", shots, names[i], age, cities[i]), obj,
                   TaskCheck::kJson, 40});
  }
}

// Neutral filler sentences for the haystack.
const char* const kFiller[] = {
    "The river bends twice before it reaches the old mill.",
    "Most of the houses in the valley have red roofs.",
    "In spring the orchards are full of white blossoms.",
    "The market opens early on Saturdays and closes at noon.",
    "A narrow path climbs from the village to the chapel.",
    "Fishermen mend their nets on the harbour wall.",
    "The library keeps its oldest maps in a locked room.",
    "Every evening the bells ring from the square.",
    "Farmers bring cheese and honey down from the hills.",
    "The bridge was rebuilt after the great flood.",
    "Children play football in the field behind the school.",
    "The baker starts work long before sunrise.",
    "Wind turbines turn slowly on the ridge above the town.",
    "A small museum shows tools from the old quarry.",
    "The train to the coast leaves twice a day.",
    "Swallows nest under the eaves of the town hall.",
};

void add_needles(std::mt19937& rng, std::vector<TaskItem>& out) {
  for (int sentences : {16, 48}) {  // ~200 and ~600 tokens
    for (int depth : {10, 50, 90}) {
      const int code = std::uniform_int_distribution<int>(1000, 9999)(rng);
      std::string hay;
      const int at = sentences * depth / 100;
      for (int i = 0; i < sentences; ++i) {
        if (i == at) hay += fmt::format("The secret code is {}. ", code);
        hay += kFiller[std::uniform_int_distribution<int>(0, 15)(rng)];
        hay += ' ';
      }
      out.push_back({"needle", fmt::format("len{}-depth{}", sentences * 25 / 2, depth),
                     hay + "\nQuestion: what is the secret code?\nAnswer: The secret code is", std::to_string(code),
                     TaskCheck::kStartsWith, 6});
    }
  }
}

bool json_equal(const std::string& got, const std::string& want) {
  if (!nlohmann::json::accept(got)) return false;
  return nlohmann::json::parse(got) == nlohmann::json::parse(want);
}

}  // namespace

std::vector<TaskItem> builtin_task_set() {
  std::mt19937 rng(20250101);
  std::vector<TaskItem> items;
  add_arithmetic(rng, items);
  add_json(rng, items);
  add_needles(rng, items);
  return items;
}

std::string greedy_line(const ModelUnderTest& m, const tokenizer::Tokenizer& tok, const std::string& prompt,
                        int max_new_tokens, ThreadPool& pool, int64_t* prompt_tokens, int64_t* generated) {
  const std::vector<int32_t> ids = tok.encode(prompt, true, false);
  // One line: stop at end-of-generation (not kept) or once the text has a newline.
  m.model->set_matmul_hook(m.hook);
  std::vector<int32_t> out =
      model::greedy_continuation(*m.model, ids, max_new_tokens, m.kv_dtype, pool, [&](std::span<const int32_t> so_far) {
        return tok.is_end_of_generation(so_far.back()) || tok.decode(so_far, true).find('\n') != std::string::npos;
      });
  m.model->set_matmul_hook(nullptr);
  if (!out.empty() && tok.is_end_of_generation(out.back())) out.pop_back();
  const std::string text = tok.decode(out, true);
  if (prompt_tokens) *prompt_tokens += static_cast<int64_t>(ids.size());
  if (generated) *generated += static_cast<int64_t>(out.size());
  return text.substr(0, text.find('\n'));
}

TaskResult run_tasks(const ModelUnderTest& m, const tokenizer::Tokenizer& tok, const std::vector<TaskItem>& items,
                     ThreadPool& pool) {
  const SteadyClock::time_point start = SteadyClock::now();
  TaskResult r;
  std::map<std::pair<std::string, std::string>, SliceScore> slices;
  std::map<std::string, SliceScore> tasks;
  auto count = [&](const std::string& task, const std::string& slice, bool ok) {
    SliceScore& s = slices[{task, slice}];
    s.task = task, s.slice = slice, ++s.total, s.correct += ok ? 1 : 0;
  };
  for (const TaskItem& it : items) {
    const std::string line =
        trim(greedy_line(m, tok, it.prompt, it.max_new_tokens, pool, &r.prompt_tokens, &r.generated_tokens));
    r.answers.push_back(line);
    bool ok = false;
    if (it.check == TaskCheck::kExactLine) ok = line == it.expected;
    if (it.check == TaskCheck::kStartsWith) ok = line.starts_with(it.expected);
    if (it.check == TaskCheck::kJson) {
      count(it.task, "valid", nlohmann::json::accept(line));
      ok = json_equal(line, it.expected);
      count(it.task, "exact", ok);
    } else {
      count(it.task, it.slice, ok);
    }
    SliceScore& t = tasks[it.task];
    t.task = it.task, t.slice = "all", ++t.total, t.correct += ok ? 1 : 0;
  }
  for (auto& [k, s] : slices) r.slices.push_back(s);
  for (auto& [k, s] : tasks) r.tasks.push_back(s);
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace tokenmill::eval
