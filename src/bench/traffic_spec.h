// The traffic spec: one YAML file that fixes the shape of a serving
// benchmark (arrivals, lengths, prefix sharing, concurrency sweep), the
// controls that make it reproducible, the cost model, SLOs and the gates a
// comparison is judged by. docs/benchmarks.md lists every key with its
// default; parse_traffic_spec() rejects unknown keys and bad values with a
// message that names the field (e.g. "traffic.concurrency[2]").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tokenmill::bench {

enum class ArrivalKind { kPoisson, kPoissonWithBurst, kConstant, kClosedLoop, kReplay };
enum class Endpoint { kCompletions, kChat };
enum class PromptSource { kSynthetic, kJsonl, kTrace };
// How synthetic prompts are made exactly N tokens long: the server's
// /tokenize, a local GGUF tokenizer, or whitespace words (no tokenizer; the
// counts are then only as exact as "one common word = one token").
enum class TokenCounterKind { kServer, kGguf, kWords };

const char* arrival_name(ArrivalKind kind);
const char* endpoint_name(Endpoint endpoint);
const char* prompt_source_name(PromptSource source);
const char* token_counter_name(TokenCounterKind kind);

// Inclusive token-count range [min, max].
struct LengthRange {
  int64_t min = 0;
  int64_t max = 0;
};

// poisson_with_burst: the rate is `rate * factor` during the first
// `length_s` seconds of every `period_s` seconds, `rate` otherwise.
struct BurstParams {
  double factor = 4.0;
  double length_s = 2.0;
  double period_s = 10.0;
};

// Service-level objectives for goodput; 0 disables one.
struct Slo {
  double ttft_ms = 0;
  double tpot_ms = 0;
  double e2e_ms = 0;
};

// Gates of `bench compare`; see ticket.h for the decision rule.
struct Gates {
  double quality_regression = -1;  // max relative quality drop; < 0: no quality gate
  bool p99_budget_breach = true;   // true: breaches allowed (no p99 gate)
  double p99_budget_ms = 0;        // 0: the budget is before's p99 * (1 + p99_tolerance)
  double p99_tolerance = 0.05;
  double max_success_rate_drop = 0.01;  // absolute (0.01 = one percentage point)
  double min_improvement = 0.05;        // relative gain that counts as an improvement
  double max_regression = 0.05;         // relative loss tolerated on any headline metric
  double max_communication_share = 0;   // 0: no gate
  double min_spec_acceptance_rate = 0;  // speculative decoding's floor in the after run; 0: no gate
  int64_t min_slice_requests = 20;      // slices with fewer ok requests skip the p99 gate
};

// Prometheus names read from the server's /metrics (first one present wins).
struct ServerMetricNames {
  std::vector<std::string> memory_bytes;
  std::vector<std::string> prefix_hit_tokens;
  std::vector<std::string> prefix_miss_tokens;
};

struct TrafficSpec {
  std::string name;  // inference_benchmark

  // target
  std::string url = "http://127.0.0.1:8080";
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // "": the first model of GET /v1/models
  bool stream = true;
  bool include_usage = true;  // stream_options.include_usage
  bool ignore_eos = true;     // so outputs have their planned length
  double temperature = 0.0;
  double metrics_interval_s = 1.0;  // /metrics sampling; 0: never
  ServerMetricNames server_metrics;

  // traffic
  std::vector<int64_t> concurrency = {1};
  ArrivalKind arrival = ArrivalKind::kPoisson;
  double rate = 1.0;  // requests per second (open-loop kinds)
  BurstParams burst;
  double think_time_s = 0;  // closed loop: pause between a reply and the next request
  std::vector<LengthRange> input_buckets = {{64, 256}};
  std::vector<double> input_weights;  // empty: equal
  std::vector<LengthRange> output_buckets = {{64, 128}};
  std::vector<double> output_weights;
  std::vector<double> cache_hit_rates = {0.0};
  int64_t shared_prefix_tokens = 0;  // 0: each prompt starts with round(h * length) shared tokens
  int64_t requests_per_cell = 100;
  double duration_s = 0;  // > 0: stop sending after this many seconds of a cell
  double cancel_rate = 0;
  double request_timeout_s = 300;

  // prompts
  PromptSource prompt_source = PromptSource::kSynthetic;
  TokenCounterKind token_counter = TokenCounterKind::kServer;
  std::string prompts_path;    // jsonl dataset or trace
  std::string tokenizer_path;  // GGUF for TokenCounterKind::kGguf

  // controls
  int64_t warmup_requests = 0;
  uint64_t seed = 1;
  std::string hardware;
  std::string driver;

  double usd_per_hour = 0;
  Slo slo;
  std::vector<std::string> report_metrics;
  Gates gates;
  std::string decision = "compare_under_same_shape";
};

// Parses YAML text. `origin` (a file name) prefixes error messages.
// `overrides` are "dotted.key=yaml-value" pairs applied before validation
// (e.g. "traffic.requests_per_cell=20"). Throws Error naming the field.
TrafficSpec parse_traffic_spec(const std::string& yaml_text, const std::string& origin,
                               const std::vector<std::string>& overrides = {});
TrafficSpec load_traffic_spec(const std::string& path, const std::vector<std::string>& overrides = {});

// Parses a `gates:` map (a gates file holds `gates:` at its top level).
Gates load_gates_file(const std::string& path);

// The keys that define the traffic shape (everything that changes which
// requests are sent and when), as canonical JSON; the target, cost, SLOs,
// gates and labels are left out so before/after runs on different builds or
// hardware compare.
nlohmann::json traffic_shape_json(const TrafficSpec& spec);
// 16 hex digits: FNV-1a 64 of traffic_shape_json's dump. Prompt files are
// hashed by content, so an edited dataset changes the hash.
std::string traffic_shape_hash(const TrafficSpec& spec);

// FNV-1a 64 of `data`, continuing from `h`: a stable short hash for ids
// and shape hashes, not for security.
uint64_t fnv1a64(const std::string& data, uint64_t h = 0xcbf29ce484222325ull);

// Every metric name `report:` may list.
const std::vector<std::string>& known_report_metrics();

}  // namespace tokenmill::bench
