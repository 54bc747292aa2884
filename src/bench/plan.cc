#include "bench/plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/arrival.h"
#include "bench/rng.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

// Sub-stream ids for derive_seed: one per cell and purpose, so the draws of
// one purpose never shift another's.
enum Stream : uint64_t { kArrivals = 1, kShapes = 2, kDoc = 3 };
constexpr int64_t kWarmupCell = 1 << 20;

uint64_t stream_seed(const TrafficSpec& spec, int64_t cell, Stream s) {
  return derive_seed(spec.seed, static_cast<uint64_t>(cell) * 8 + s);
}

// A chunk count in [1, max_tokens - 1] (1 when max_tokens <= 2).
int64_t cancel_point(uint64_t draw, int64_t max_tokens) {
  return 1 + static_cast<int64_t>(draw % static_cast<uint64_t>(std::max<int64_t>(1, max_tokens - 1)));
}

int64_t draw_length(const LengthRange& r, int64_t floor, Rng& rng) {
  const int64_t lo = std::max(r.min, floor);
  return rng.uniform_int(std::min(lo, r.max), r.max);
}

// The shape of one synthetic request; every draw is made whether used or not
// so the sequence of draws per request is fixed.
void draw_shape(const TrafficSpec& spec, double hit_rate, Rng& rng, PlannedRequest& r, int64_t& shared,
                uint64_t& word_seed) {
  r.input_bucket = static_cast<int32_t>(rng.weighted_index(spec.input_weights));
  const int64_t fixed = spec.shared_prefix_tokens;
  r.input_tokens = draw_length(spec.input_buckets[r.input_bucket], fixed > 0 ? fixed + 1 : 1, rng);
  r.output_bucket = static_cast<int32_t>(rng.weighted_index(spec.output_weights));
  r.max_tokens = draw_length(spec.output_buckets[r.output_bucket], 1, rng);
  const bool with_prefix = rng.bernoulli(hit_rate);
  const bool cancel = rng.bernoulli(spec.cancel_rate);
  const uint64_t cancel_draw = rng.next_u64();
  word_seed = rng.next_u64();
  if (fixed > 0) {
    shared = with_prefix && fixed < r.input_tokens ? fixed : 0;
  } else {
    shared = static_cast<int64_t>(std::llround(hit_rate * static_cast<double>(r.input_tokens)));
    if (shared >= r.input_tokens) shared = r.input_tokens - 1;
  }
  r.cancel_after = cancel ? cancel_point(cancel_draw, r.max_tokens) : 0;
}

std::vector<PlannedRequest> synthetic_requests(const TrafficSpec& spec, int64_t cell, double hit_rate,
                                               const std::vector<double>& times, int64_t count,
                                               PromptBuilder& builder) {
  Rng rng(stream_seed(spec, cell, kShapes));
  const uint64_t doc_seed = stream_seed(spec, cell, kDoc);
  std::vector<PlannedRequest> out;
  for (int64_t i = 0; i < count; ++i) {
    PlannedRequest r;
    r.index = i;
    r.scheduled_s = i < static_cast<int64_t>(times.size()) ? times[i] : -1;
    int64_t shared = 0;
    uint64_t word_seed = 0;
    draw_shape(spec, hit_rate, rng, r, shared, word_seed);
    BuiltPrompt p = builder.build(r.input_tokens, shared, doc_seed, word_seed);
    r.prompt = std::move(p.text);
    r.input_tokens = p.tokens;
    r.shared_tokens = shared > 0 ? p.shared_tokens : 0;
    out.push_back(std::move(r));
  }
  return out;
}

// Dataset prompts: a bucket by weight (among buckets that have prompts),
// then a prompt of it uniformly, with replacement.
std::vector<PlannedRequest> dataset_requests(const TrafficSpec& spec, int64_t cell,
                                             const std::vector<PromptRecord>& records,
                                             const std::vector<int64_t>& counts, const std::vector<double>& times,
                                             int64_t num) {
  std::vector<std::vector<size_t>> by_bucket(spec.input_buckets.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const int32_t b = bucket_of(spec.input_buckets, counts[i]);
    if (b >= 0) by_bucket[b].push_back(i);
  }
  std::vector<double> weights = spec.input_weights;
  for (size_t b = 0; b < weights.size(); ++b) {
    if (by_bucket[b].empty()) weights[b] = 0;
  }
  if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) {
    fail("prompts.path '{}': no prompt falls into any of traffic.length_buckets", spec.prompts_path);
  }
  Rng rng(stream_seed(spec, cell, kShapes));
  std::vector<PlannedRequest> out;
  for (int64_t i = 0; i < num; ++i) {
    PlannedRequest r;
    r.index = i;
    r.scheduled_s = i < static_cast<int64_t>(times.size()) ? times[i] : -1;
    r.input_bucket = static_cast<int32_t>(rng.weighted_index(weights));
    const std::vector<size_t>& members = by_bucket[r.input_bucket];
    const size_t pick = members[rng.uniform_int(0, static_cast<int64_t>(members.size()) - 1)];
    r.output_bucket = static_cast<int32_t>(rng.weighted_index(spec.output_weights));
    const int64_t drawn = draw_length(spec.output_buckets[r.output_bucket], 1, rng);
    const bool cancel = rng.bernoulli(spec.cancel_rate);
    const uint64_t cancel_draw = rng.next_u64();
    r.max_tokens = records[pick].output_tokens > 0 ? records[pick].output_tokens : drawn;
    r.output_bucket = bucket_of(spec.output_buckets, r.max_tokens);
    r.cancel_after = cancel ? cancel_point(cancel_draw, r.max_tokens) : 0;
    r.prompt = records[pick].prompt;
    r.input_tokens = counts[pick];
    out.push_back(std::move(r));
  }
  return out;
}

// Trace replay: every record in order (up to requests_per_cell and
// duration_s), scheduled at its timestamp relative to the first one.
std::vector<PlannedRequest> trace_requests(const TrafficSpec& spec, int64_t cell,
                                           const std::vector<PromptRecord>& records, PromptBuilder& builder,
                                           const TokenCounter& counter) {
  Rng rng(stream_seed(spec, cell, kShapes));
  std::vector<PlannedRequest> out;
  const double t0 = records.empty() ? 0 : records.front().timestamp;
  for (size_t i = 0; i < records.size() && int64_t(i) < spec.requests_per_cell; ++i) {
    const PromptRecord& rec = records[i];
    PlannedRequest r;
    r.index = static_cast<int64_t>(i);
    r.scheduled_s = rec.timestamp - t0;
    if (spec.duration_s > 0 && r.scheduled_s >= spec.duration_s) break;
    const int64_t drawn = draw_length(spec.output_buckets[rng.weighted_index(spec.output_weights)], 1, rng);
    const bool cancel = rng.bernoulli(spec.cancel_rate);
    const uint64_t word_seed = rng.next_u64();
    r.max_tokens = rec.output_tokens > 0 ? rec.output_tokens : drawn;
    if (rec.input_tokens > 0) {
      BuiltPrompt p = builder.build(rec.input_tokens, 0, 0, word_seed);
      r.prompt = std::move(p.text);
      r.input_tokens = p.tokens;
    } else {
      r.prompt = rec.prompt;
      r.input_tokens = counter(rec.prompt);
    }
    r.input_bucket = bucket_of(spec.input_buckets, r.input_tokens);
    r.output_bucket = bucket_of(spec.output_buckets, r.max_tokens);
    r.cancel_after = cancel ? cancel_point(word_seed >> 1, r.max_tokens) : 0;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

int32_t bucket_of(const std::vector<LengthRange>& buckets, int64_t n) {
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (n >= buckets[i].min && n <= buckets[i].max) return static_cast<int32_t>(i);
  }
  return -1;
}

std::vector<PromptRecord> read_prompt_file(const std::string& path, bool trace) {
  std::ifstream in(path);
  if (!in) fail("cannot open prompts file '{}'", path);
  std::vector<PromptRecord> out;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) fail("{}:{}: not a JSON object", path, line_no);
    PromptRecord r;
    if (j.contains("prompt")) {
      if (!j["prompt"].is_string()) fail("{}:{}: \"prompt\" must be a string", path, line_no);
      r.prompt = j["prompt"].get<std::string>();
    } else if (trace && j.contains("input_tokens") && j["input_tokens"].is_number_integer()) {
      r.input_tokens = j["input_tokens"].get<int64_t>();
      if (r.input_tokens < 1) fail("{}:{}: \"input_tokens\" must be >= 1", path, line_no);
    } else {
      fail("{}:{}: needs \"prompt\" (a string){}", path, line_no, trace ? " or \"input_tokens\"" : "");
    }
    for (const char* key : {"output_tokens", "max_tokens"}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1) {
        fail("{}:{}: \"{}\" must be an integer >= 1", path, line_no, key);
      }
      r.output_tokens = j[key].get<int64_t>();
    }
    if (trace) {
      if (!j.contains("timestamp") || !j["timestamp"].is_number()) {
        fail("{}:{}: trace lines need a numeric \"timestamp\" (seconds)", path, line_no);
      }
      r.timestamp = j["timestamp"].get<double>();
      if (!out.empty() && r.timestamp < out.back().timestamp) {
        fail("{}:{}: timestamps must not decrease", path, line_no);
      }
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) fail("prompts file '{}' has no prompts", path);
  return out;
}

RunPlan make_run_plan(const TrafficSpec& spec, const TokenCounter& counter) {
  RunPlan plan;
  PromptBuilder builder(counter);
  std::vector<PromptRecord> records;
  std::vector<int64_t> counts;
  if (spec.prompt_source != PromptSource::kSynthetic) {
    records = read_prompt_file(spec.prompts_path, spec.prompt_source == PromptSource::kTrace);
  }
  if (spec.prompt_source == PromptSource::kJsonl) {
    for (const PromptRecord& r : records) counts.push_back(counter(r.prompt));
  }
  const ArrivalParams arrivals{spec.arrival, spec.rate, spec.burst};
  auto requests_for = [&](int64_t cell, double hit_rate, int64_t count, bool schedule) {
    std::vector<double> times;
    if (schedule) {
      Rng rng(stream_seed(spec, cell, kArrivals));
      times = arrival_times(arrivals, count, spec.duration_s, rng);
      if (spec.arrival != ArrivalKind::kClosedLoop) count = static_cast<int64_t>(times.size());
    }
    switch (spec.prompt_source) {
      case PromptSource::kSynthetic: return synthetic_requests(spec, cell, hit_rate, times, count, builder);
      case PromptSource::kJsonl: return dataset_requests(spec, cell, records, counts, times, count);
      case PromptSource::kTrace: return trace_requests(spec, cell, records, builder, counter);
    }
    return std::vector<PlannedRequest>{};
  };
  if (spec.warmup_requests > 0) {
    // Warmup: cell 0's shape, its own prompts, sent closed-loop.
    const bool replay = spec.prompt_source == PromptSource::kTrace;
    plan.warmup = replay ? trace_requests(spec, kWarmupCell, records, builder, counter)
                         : requests_for(kWarmupCell, spec.cache_hit_rates[0], spec.warmup_requests, false);
    if (int64_t(plan.warmup.size()) > spec.warmup_requests) plan.warmup.resize(spec.warmup_requests);
    for (PlannedRequest& r : plan.warmup) {
      r.cell = -1;
      r.scheduled_s = -1;
    }
  }
  int64_t cell = 0;
  for (int64_t c : spec.concurrency) {
    for (double h : spec.cache_hit_rates) {
      CellPlan cp{c, h, requests_for(cell, h, spec.requests_per_cell, true)};
      for (PlannedRequest& r : cp.requests) r.cell = cell;
      plan.cells.push_back(std::move(cp));
      ++cell;
    }
  }
  return plan;
}

std::string plan_to_jsonl(const RunPlan& plan) {
  std::string out;
  auto emit = [&](const PlannedRequest& r) {
    const nlohmann::json j = {{"cell", r.cell},
                              {"index", r.index},
                              {"scheduled_s", r.scheduled_s},
                              {"input_bucket", r.input_bucket},
                              {"input_tokens", r.input_tokens},
                              {"shared_tokens", r.shared_tokens},
                              {"output_bucket", r.output_bucket},
                              {"max_tokens", r.max_tokens},
                              {"cancel_after", r.cancel_after},
                              {"prompt", r.prompt}};
    out += j.dump();
    out += '\n';
  };
  for (const PlannedRequest& r : plan.warmup) emit(r);
  for (const CellPlan& c : plan.cells) {
    for (const PlannedRequest& r : c.requests) emit(r);
  }
  return out;
}

}  // namespace tokenmill::bench
