#include "bench/traffic_spec.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/yaml_fields.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

constexpr int64_t kMaxTokens = 1 << 24;

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {} '{}'", what, path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

ArrivalKind parse_arrival(YamlFields& f, const std::string& key) {
  const std::string s = f.string(key, "poisson");
  if (s == "poisson") return ArrivalKind::kPoisson;
  if (s == "poisson_with_burst") return ArrivalKind::kPoissonWithBurst;
  if (s == "constant") return ArrivalKind::kConstant;
  if (s == "closed_loop" || s == "closed-loop") return ArrivalKind::kClosedLoop;
  if (s == "replay") return ArrivalKind::kReplay;
  f.fail_at(key, "'" + s + "' is not one of poisson, poisson_with_burst, constant, closed_loop, replay");
}

std::vector<LengthRange> parse_buckets(YamlFields& f, const std::string& key, std::vector<LengthRange> fallback) {
  const YAML::Node n = f.get(key);
  if (!n || n.IsNull()) return fallback;
  if (!n.IsSequence() || n.size() == 0) f.fail_at(key, "must be a non-empty list of [min, max] pairs");
  std::vector<LengthRange> out;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string name = fmt::format("{}[{}]", f.field(key), i);
    if (!n[i].IsSequence() || n[i].size() != 2) fail("{}: {}: must be a [min, max] pair", f.origin(), name);
    const LengthRange r{yaml_integer(n[i][0], f.origin(), name + "[0]"),
                        yaml_integer(n[i][1], f.origin(), name + "[1]")};
    if (r.min < 0 || r.max < 1 || r.min > r.max || r.max > kMaxTokens) {
      fail("{}: {}: need 0 <= min <= max, 1 <= max <= {} (got [{}, {}])", f.origin(), name, kMaxTokens, r.min, r.max);
    }
    out.push_back(r);
  }
  return out;
}

std::vector<double> parse_weights(YamlFields& f, const std::string& key, size_t num_buckets,
                                  const std::string& buckets_key) {
  std::vector<double> w = f.numbers(key, {}, 0, 1e9);
  if (w.empty()) return std::vector<double>(num_buckets, 1.0);
  if (w.size() != num_buckets) {
    f.fail_at(key, fmt::format("has {} weights but {} has {} buckets", w.size(), f.field(buckets_key), num_buckets));
  }
  double sum = 0;
  for (double x : w) sum += x;
  if (!(sum > 0)) f.fail_at(key, "weights must not all be 0");
  return w;
}

void parse_target(YamlFields& f, TrafficSpec& s) {
  s.url = f.string("url", s.url);
  const std::string ep = f.string("endpoint", "completions");
  if (ep == "completions") {
    s.endpoint = Endpoint::kCompletions;
  } else if (ep == "chat") {
    s.endpoint = Endpoint::kChat;
  } else {
    f.fail_at("endpoint", "'" + ep + "' is not one of completions, chat");
  }
  s.model = f.string("model", s.model);
  s.stream = f.boolean("stream", s.stream);
  s.include_usage = f.boolean("include_usage", s.include_usage);
  s.ignore_eos = f.boolean("ignore_eos", s.ignore_eos);
  s.temperature = f.number("temperature", s.temperature, 0, 100);
  s.metrics_interval_s = f.number("metrics_interval_s", s.metrics_interval_s, 0, 3600);
  YamlFields m(f.get("server_metrics"), f.field("server_metrics"), f.origin());
  s.server_metrics.memory_bytes = m.strings("memory_bytes", s.server_metrics.memory_bytes);
  s.server_metrics.prefix_hit_tokens = m.strings("prefix_hit_tokens", s.server_metrics.prefix_hit_tokens);
  s.server_metrics.prefix_miss_tokens = m.strings("prefix_miss_tokens", s.server_metrics.prefix_miss_tokens);
  m.finish();
  f.finish();
}

void parse_traffic(YamlFields& f, TrafficSpec& s) {
  s.concurrency = f.integers("concurrency", s.concurrency, 1, 4096);
  s.arrival = parse_arrival(f, "arrival");
  s.rate = f.number("rate", s.rate, 1e-6, 1e6);
  YamlFields b(f.get("burst"), f.field("burst"), f.origin());
  s.burst.factor = b.number("factor", s.burst.factor, 1e-3, 1e6);
  s.burst.period_s = b.number("period_s", s.burst.period_s, 1e-3, 1e9);
  s.burst.length_s = b.number("length_s", s.burst.length_s, 0, 1e9);
  if (s.burst.length_s > s.burst.period_s) b.fail_at("length_s", "must not exceed burst.period_s");
  b.finish();
  s.think_time_s = f.number("think_time_s", s.think_time_s, 0, 3600);
  s.input_buckets = parse_buckets(f, "length_buckets", s.input_buckets);
  s.input_weights = parse_weights(f, "length_bucket_weights", s.input_buckets.size(), "length_buckets");
  s.output_buckets = parse_buckets(f, "output_buckets", s.output_buckets);
  s.output_weights = parse_weights(f, "output_bucket_weights", s.output_buckets.size(), "output_buckets");
  s.cache_hit_rates = f.numbers("cache_hit_rate", s.cache_hit_rates, 0, 1);
  s.shared_prefix_tokens = f.integer("shared_prefix_tokens", s.shared_prefix_tokens, 0, kMaxTokens);
  s.requests_per_cell = f.integer("requests_per_cell", s.requests_per_cell, 1, 1000000);
  s.duration_s = f.number("duration_s", s.duration_s, 0, 1e7);
  s.cancel_rate = f.number("cancel_rate", s.cancel_rate, 0, 1);
  s.request_timeout_s = f.number("request_timeout_s", s.request_timeout_s, 0.001, 1e6);
  f.finish();
}

void parse_prompts(YamlFields& f, TrafficSpec& s) {
  const std::string src = f.string("source", "synthetic");
  if (src == "synthetic") {
    s.prompt_source = PromptSource::kSynthetic;
  } else if (src == "jsonl") {
    s.prompt_source = PromptSource::kJsonl;
  } else if (src == "trace") {
    s.prompt_source = PromptSource::kTrace;
  } else {
    f.fail_at("source", "'" + src + "' is not one of synthetic, jsonl, trace");
  }
  const std::string counter = f.string("token_counter", "server");
  if (counter == "server") {
    s.token_counter = TokenCounterKind::kServer;
  } else if (counter == "gguf") {
    s.token_counter = TokenCounterKind::kGguf;
  } else if (counter == "words") {
    s.token_counter = TokenCounterKind::kWords;
  } else {
    f.fail_at("token_counter", "'" + counter + "' is not one of server, gguf, words");
  }
  s.prompts_path = f.string("path", "");
  s.tokenizer_path = f.string("tokenizer", "");
  if (s.prompt_source != PromptSource::kSynthetic && s.prompts_path.empty()) {
    f.fail_at("path", "is required when prompts.source is " + src);
  }
  if (s.token_counter == TokenCounterKind::kGguf && s.tokenizer_path.empty()) {
    f.fail_at("tokenizer", "is required (a GGUF file) when prompts.token_counter is gguf");
  }
  f.finish();
}

void parse_gates_map(YamlFields& f, Gates& g) {
  g.quality_regression = f.number("quality_regression", g.quality_regression, -1, 1);
  g.p99_budget_breach = f.boolean("p99_budget_breach", g.p99_budget_breach);
  g.p99_budget_ms = f.number("p99_budget_ms", g.p99_budget_ms, 0, 1e9);
  g.p99_tolerance = f.number("p99_tolerance", g.p99_tolerance, 0, 10);
  g.max_success_rate_drop = f.number("max_success_rate_drop", g.max_success_rate_drop, 0, 1);
  g.min_improvement = f.number("min_improvement", g.min_improvement, 0, 10);
  g.max_regression = f.number("max_regression", g.max_regression, 0, 10);
  g.max_communication_share = f.number("max_communication_share", g.max_communication_share, 0, 1);
  g.min_spec_acceptance_rate = f.number("min_spec_acceptance_rate", g.min_spec_acceptance_rate, 0, 1);
  g.min_slice_requests = f.integer("min_slice_requests", g.min_slice_requests, 1, 1000000);
  f.finish();
}

void parse_controls(YamlFields& f, TrafficSpec& s) {
  s.warmup_requests = f.integer("warmup_requests", s.warmup_requests, 0, 1000000);
  const int64_t seed = f.integer("random_seed", static_cast<int64_t>(s.seed), 0, std::numeric_limits<int64_t>::max());
  s.seed = static_cast<uint64_t>(seed);
  s.hardware = f.string("hardware", "");
  s.driver = f.string("driver", "");
  f.finish();
}

void cross_check(const TrafficSpec& s, const std::string& origin) {
  const bool trace = s.prompt_source == PromptSource::kTrace;
  if (trace != (s.arrival == ArrivalKind::kReplay)) {
    fail("{}: traffic.arrival: 'replay' goes with prompts.source 'trace' and only with it", origin);
  }
  if (s.prompt_source != PromptSource::kSynthetic) {
    for (double h : s.cache_hit_rates) {
      if (h != 0) {
        fail("{}: traffic.cache_hit_rate: must be [0.0] with prompts.source {} (the prompts decide sharing)", origin,
             prompt_source_name(s.prompt_source));
      }
    }
  }
  for (size_t i = 0; i < s.input_buckets.size(); ++i) {
    if (s.shared_prefix_tokens > 0 && s.shared_prefix_tokens >= s.input_buckets[i].max) {
      fail("{}: traffic.shared_prefix_tokens: {} leaves no room in length_buckets[{}] (max {})", origin,
           s.shared_prefix_tokens, i, s.input_buckets[i].max);
    }
  }
  for (const std::string& m : s.report_metrics) {
    const auto& known = known_report_metrics();
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      fail("{}: report: unknown metric '{}' (known: {})", origin, m, fmt::join(known, ", "));
    }
  }
  if (s.decision != "compare_under_same_shape") {
    fail("{}: decision: '{}' is not supported (use compare_under_same_shape)", origin, s.decision);
  }
}

}  // namespace

const char* arrival_name(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson: return "poisson";
    case ArrivalKind::kPoissonWithBurst: return "poisson_with_burst";
    case ArrivalKind::kConstant: return "constant";
    case ArrivalKind::kClosedLoop: return "closed_loop";
    case ArrivalKind::kReplay: return "replay";
  }
  return "?";
}

const char* endpoint_name(Endpoint e) { return e == Endpoint::kChat ? "chat" : "completions"; }

const char* prompt_source_name(PromptSource s) {
  switch (s) {
    case PromptSource::kSynthetic: return "synthetic";
    case PromptSource::kJsonl: return "jsonl";
    case PromptSource::kTrace: return "trace";
  }
  return "?";
}

const char* token_counter_name(TokenCounterKind k) {
  switch (k) {
    case TokenCounterKind::kServer: return "server";
    case TokenCounterKind::kGguf: return "gguf";
    case TokenCounterKind::kWords: return "words";
  }
  return "?";
}

uint64_t fnv1a64(const std::string& data, uint64_t h) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

const std::vector<std::string>& known_report_metrics() {
  static const std::vector<std::string> kKnown = {"queue_ms",
                                                  "ttft_ms",
                                                  "tpot_ms",
                                                  "itl_ms",
                                                  "e2e_ms",
                                                  "p50_ms",
                                                  "p95_ms",
                                                  "p99_ms",
                                                  "req_per_s",
                                                  "input_tok_per_s",
                                                  "output_tok_per_s",
                                                  "total_tok_per_s",
                                                  "goodput_req_per_s",
                                                  "success_rate",
                                                  "error_rate",
                                                  "timeout_rate",
                                                  "rejection_rate",
                                                  "cancel_rate",
                                                  "oom_rate",
                                                  "cost_per_success",
                                                  "cost_per_million_output_tokens",
                                                  "communication_share",
                                                  "prefix_cache_hit_rate",
                                                  "server_memory_bytes",
                                                  "spec_acceptance_rate",
                                                  "spec_accepted_per_step"};
  return kKnown;
}

namespace {

TrafficSpec parse_spec_tree(const std::string& yaml_text, const std::string& origin,
                            const std::vector<std::string>& overrides) {
  YAML::Node root = parse_yaml(yaml_text, origin);
  for (const std::string& o : overrides) apply_yaml_override(root, o, origin);
  if (!root.IsMap()) fail("{}: the spec must be a YAML map (inference_benchmark, traffic, ...)", origin);
  YamlFields top(root, "", origin);
  TrafficSpec s;
  s.server_metrics.memory_bytes = {"tokenmill_process_resident_memory_bytes", "process_resident_memory_bytes"};
  s.server_metrics.prefix_hit_tokens = {"tokenmill_prefix_cache_hit_tokens_total", "vllm:prefix_cache_hits_total"};
  s.server_metrics.prefix_miss_tokens = {"tokenmill_prefix_cache_miss_tokens_total"};
  if (!top.has("inference_benchmark")) top.fail_at("inference_benchmark", "is required (a name for the run)");
  s.name = top.string("inference_benchmark", "");
  YamlFields target(top.get("target"), "target", origin);
  parse_target(target, s);
  YamlFields traffic(top.get("traffic"), "traffic", origin);
  parse_traffic(traffic, s);
  YamlFields prompts(top.get("prompts"), "prompts", origin);
  parse_prompts(prompts, s);
  YamlFields controls(top.get("controls"), "controls", origin);
  parse_controls(controls, s);
  YamlFields cost(top.get("cost"), "cost", origin);
  s.usd_per_hour = cost.number("usd_per_hour", 0, 0, 1e9);
  cost.finish();
  YamlFields slo(top.get("slo"), "slo", origin);
  s.slo.ttft_ms = slo.number("ttft_ms", 0, 0, 1e9);
  s.slo.tpot_ms = slo.number("tpot_ms", 0, 0, 1e9);
  s.slo.e2e_ms = slo.number("e2e_ms", 0, 0, 1e9);
  slo.finish();
  s.report_metrics = top.strings("report", {});
  YamlFields gates(top.get("gates"), "gates", origin);
  parse_gates_map(gates, s.gates);
  s.decision = top.string("decision", s.decision);
  top.finish();
  cross_check(s, origin);
  return s;
}

}  // namespace

TrafficSpec parse_traffic_spec(const std::string& yaml_text, const std::string& origin,
                               const std::vector<std::string>& overrides) {
  try {
    return parse_spec_tree(yaml_text, origin, overrides);
  } catch (const YAML::Exception& e) {  // e.g. nesting too deep; the helpers catch the rest
    fail("{}: YAML error: {}", origin, e.what());
  }
}

TrafficSpec load_traffic_spec(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_traffic_spec(read_file(path, "traffic spec"), path, overrides);
}

Gates load_gates_file(const std::string& path) {
  const std::string text = read_file(path, "gates file");
  try {
    const YAML::Node root = parse_yaml(text, path);
    YamlFields top(root, "", path);
    YamlFields gates(top.get("gates"), "gates", path);
    Gates g;
    parse_gates_map(gates, g);
    top.finish();
    return g;
  } catch (const YAML::Exception& e) {
    fail("{}: YAML error: {}", path, e.what());
  }
}

nlohmann::json traffic_shape_json(const TrafficSpec& s) {
  using nlohmann::json;
  json buckets = json::array(), outs = json::array();
  for (const LengthRange& r : s.input_buckets) buckets.push_back({r.min, r.max});
  for (const LengthRange& r : s.output_buckets) outs.push_back({r.min, r.max});
  json shape = {{"endpoint", endpoint_name(s.endpoint)},
                {"stream", s.stream},
                {"ignore_eos", s.ignore_eos},
                {"temperature", s.temperature},
                {"concurrency", s.concurrency},
                {"arrival", arrival_name(s.arrival)},
                {"rate", s.rate},
                {"burst", {s.burst.factor, s.burst.length_s, s.burst.period_s}},
                {"think_time_s", s.think_time_s},
                {"length_buckets", buckets},
                {"length_bucket_weights", s.input_weights},
                {"output_buckets", outs},
                {"output_bucket_weights", s.output_weights},
                {"cache_hit_rate", s.cache_hit_rates},
                {"shared_prefix_tokens", s.shared_prefix_tokens},
                {"requests_per_cell", s.requests_per_cell},
                {"duration_s", s.duration_s},
                {"cancel_rate", s.cancel_rate},
                {"request_timeout_s", s.request_timeout_s},
                {"prompt_source", prompt_source_name(s.prompt_source)},
                {"token_counter", token_counter_name(s.token_counter)},
                {"warmup_requests", s.warmup_requests},
                {"random_seed", s.seed}};
  if (!s.prompts_path.empty()) {
    shape["prompts_fnv1a64"] = fmt::format("{:016x}", fnv1a64(read_file(s.prompts_path, "prompts file")));
  }
  return shape;
}

std::string traffic_shape_hash(const TrafficSpec& spec) {
  return fmt::format("{:016x}", fnv1a64(traffic_shape_json(spec).dump()));
}

}  // namespace tokenmill::bench
